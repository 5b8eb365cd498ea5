"""Clustering of many small files into one sorted file, against what it costs at least.

    python benchmarks/bench_clustering.py [--rows 1000000] [--files 50] [--sort rider,ts] [--repeat 3]
                                          [--codec gzip|snappy] [--profile]

The table: a COPY_ON_WRITE table (version 8, trips schema of ``hoodie.testing.generate``, record key
``uuid``, ordering field ``ts``, partitioned by ``city``) whose ROWS rows, all of one city, are one
``bulk_insert`` cut into FILES base files of equal row counts in that one partition (the writer's
``max_file_bytes`` at its 1 KiB-a-record estimate). It is built once per run (its build time printed); every
run of ours starts from a fresh copy of it (``shutil.copytree``, untimed).

The clustering: one plan (``schedule_clustering``, not timed) of all FILES slices into one output file group
(``small.file.limit``, ``max.bytes.per.group`` and ``target.file.max.bytes`` raised), ``sort.columns`` SORT
(linear layout), executed in-process with the table's codec and level: ``prepare_clustering`` +
``run_clustering_task`` + ``commit_clustering`` (the replacecommit; the table has no metadata table), timed
as "clustering"; "task" is ``run_clustering_task`` alone.

The floor: ``pq.read_table`` of each of the FILES base files, ``pa.concat_tables``, ``sort_by`` the same
columns and ``pq.write_table`` with the same codec and level (gzip at parquet-mr's 6 by default: the table's
``ParquetOptions``); no Hudi footer, no bloom filter, no commit, no fsync.

Each run of each variant runs in a fresh process (imports before the clock), the variants alternating from
run to run. Printed: the medians over REPEAT runs (wall time, and CPU time of all the process's threads) and
the ratio of wall times, with its target: clustering / floor <= 1.3. Every run of ours is checked (one slice
left in the partition, holding every row, sorted by SORT), and once its file against the floor's, row by row
in key order. When the target is missed (or with ``--profile``), one more run of ours under ``cProfile``
prints where the clustering's time goes (its phases, and the functions of most cumulative and own time of
the calling thread; its waits are the work of the base-file writer's threads).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import targets
from child_result import Result, median, print_result, run_variant
from hoodie.clustering.execute import commit_clustering, prepare_clustering, run_clustering_task
from hoodie.clustering.layout import LayoutConfig, LayoutStrategy
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import TripGenerator, trips_writer
from hoodie.testing.table_writer import WriteConfig
from hoodie.write.base_file import ParquetOptions

VARIANTS = ("ours", "pyarrow")
TARGET_FLOOR = 1.3  # clustering / floor
SEED = 11
RECORD_SIZE_ESTIMATE = 1024  # the writer's bytes per record before a first commit: it cuts files by it
UNBOUNDED = 1 << 50
PROFILE_LINES = 25


# -- the table -----------------------------------------------------------------------------------------------


def build_table(path: str, rows: int, files: int, codec: str) -> str:
    """ROWS rows of one city in one ``bulk_insert``, cut into FILES base files; returns the partition."""
    per_file = math.ceil(rows / files)
    options = ParquetOptions(compression=codec, max_file_bytes=per_file * RECORD_SIZE_ESTIMATE)
    writer = trips_writer(
        path,
        table_type="COPY_ON_WRITE",
        config=WriteConfig(parquet=options, record_size_estimate=RECORD_SIZE_ESTIMATE),
        seed=SEED,
    )
    gen = TripGenerator(SEED, 1)
    keys = gen.keys(rows)
    data = gen.rows(keys, ["san_francisco"] * rows)
    writer.bulk_insert(data)
    return "san_francisco"


def clustering_config(sort_columns: tuple[str, ...]) -> ClusteringConfig:
    """Every slice of the partition in one group, written as one file group, sorted linearly."""
    return ClusteringConfig(
        sort_columns=sort_columns,
        layout=LayoutConfig(LayoutStrategy.LINEAR),
        small_file_limit=UNBOUNDED,
        max_bytes_per_group=UNBOUNDED,
        target_file_max_bytes=UNBOUNDED,
        max_file_bytes=UNBOUNDED,
        update_strategy=UpdateStrategy.ALLOW,  # no writer beside: every group
    )


def sorted_by(table: pa.Table, columns: Sequence[str]) -> bool:
    """Whether ``table``'s rows are in ascending order of ``columns`` (no nulls in the generated data)."""
    order = pc.sort_indices(table.select(list(columns)), [(c, "ascending") for c in columns])
    return bool(pc.all(pc.equal(order, pa.array(range(table.num_rows), pa.uint64()))).as_py() in (True, None))


# -- the children: one run of one variant ----------------------------------------------------------------


def child_ours(path: str, codec: str, sort_columns: tuple[str, ...], files: int, profile: bool) -> Result:
    storage = Storage.for_uri(path)
    lock = FileSystemLock(storage)
    start = time.perf_counter()
    scheduled = schedule_clustering(
        storage, lock, config=clustering_config(sort_columns), respect_trigger=False
    )
    schedule_s = time.perf_counter() - start
    plan = scheduled.plan
    if scheduled.instant is None or plan is None:
        raise RuntimeError(f"nothing scheduled: {scheduled.reason}")
    groups = plan.input_groups
    if len(groups) != 1 or len(groups[0].slices) != files or (groups[0].num_output_file_groups or 1) != 1:
        shape = [(len(g.slices), g.num_output_file_groups) for g in groups]
        raise RuntimeError(f"expected one group of {files} slices into one file, planned {shape}")
    options = ParquetOptions(compression=codec)
    profiler = cProfile.Profile() if profile else None
    start = time.perf_counter()
    cpu_start = time.process_time()
    if profiler is not None:
        profiler.enable()
    prepared = prepare_clustering(storage, lock, scheduled.instant.time, parquet=options)
    task_start = time.perf_counter()
    results = [run_clustering_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    commit_start = time.perf_counter()
    done = commit_clustering(storage, lock, prepared, results)
    end = time.perf_counter()
    cpu = time.process_time() - cpu_start
    if profiler is not None:
        profiler.disable()
    seconds = {
        "clustering": end - start,
        "cpu": cpu,
        "prepare": task_start - start,
        "task": commit_start - task_start,
        "commit": end - commit_start,
        "schedule": schedule_s,
    }
    # Checks, after the measurement: one slice left, the clustering's, every row, in order.
    slices = Table.open(path).file_slices()
    problems = []
    rel = ""
    if len(slices) != 1:
        problems.append(f"{len(slices)} file slices after clustering")
    for s in slices[:1]:
        if s.base_file is None or s.base_file.instant_time != prepared.instant.time:
            problems.append(f"the slice's base file is {s.base_file}, not the clustering's")
        rel = s.base_file_path or ""
    rows = -1
    if rel:
        written = pq.read_table(os.path.join(path, rel), columns=list(sort_columns))
        rows = written.num_rows
        if not sorted_by(written, sort_columns):
            problems.append(f"the clustered file is not sorted by {', '.join(sort_columns)}")
    result: Result = {
        "seconds": seconds,
        "rows": rows,
        "tasks": len(prepared.tasks),
        "records_written": done.records_written,
        "out_path": rel,
        "out_bytes": os.path.getsize(os.path.join(path, rel)) if rel else 0,
        "problems": problems,
    }
    if profiler is not None:
        result["profile"] = profile_text(profiler)
    return result


def profile_text(profiler: cProfile.Profile) -> str:
    """The functions of most cumulative time, then of most own time."""
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(PROFILE_LINES)
    stats.sort_stats("tottime").print_stats(PROFILE_LINES)
    return out.getvalue()


def child_pyarrow(partition_dir: str, out: str, codec: str, sort_columns: tuple[str, ...]) -> Result:
    options = ParquetOptions(compression=codec)
    names = sorted(n for n in os.listdir(partition_dir) if n.endswith(".parquet"))
    start = time.perf_counter()
    cpu_start = time.process_time()
    parts = [pq.read_table(os.path.join(partition_dir, n)) for n in names]
    table = pa.concat_tables(parts)
    table = table.sort_by([(c, "ascending") for c in sort_columns])
    pq.write_table(
        table,
        out,
        compression=options.pyarrow_compression,
        compression_level=options.pyarrow_compression_level,
    )
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    return {
        "seconds": {"total": seconds, "cpu": cpu},
        "rows": table.num_rows,
        "files_read": len(names),
        "out_bytes": os.path.getsize(out),
    }


def run_child(args: argparse.Namespace) -> int:
    columns = tuple(args.sort.split(","))
    try:
        if args.child in ("ours", "profile"):
            result = child_ours(args.path, args.codec, columns, args.files, args.child == "profile")
        elif args.child == "pyarrow":
            result = child_pyarrow(args.path, args.out, args.codec, columns)
        else:
            raise ValueError(f"unknown variant {args.child}")
    except Exception as e:
        first = str(e).splitlines()[0][:300] if str(e) else ""
        result = {"error": f"{type(e).__name__}: {first}"}
    print_result(result)
    return 0


def spawn(variant: str, path: str, out: str, args: argparse.Namespace) -> Result:
    """Run one variant in a fresh interpreter; its result, or ``{"error": ...}``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--path", path, "--out", out]
    cmd += ["--codec", args.codec, "--sort", args.sort, "--files", str(args.files)]
    return run_variant(cmd)


# -- the parent ----------------------------------------------------------------------------------------------


def compare_with_floor(ours_file: str, floor_file: str) -> str:
    """The clustered file against the floor's, rows matched by key (the file name column aside)."""
    key = "_hoodie_record_key"
    ours = pq.read_table(ours_file).replace_schema_metadata(None).drop_columns(["_hoodie_file_name"])
    floor = pq.read_table(floor_file).replace_schema_metadata(None).drop_columns(["_hoodie_file_name"])
    if ours.num_rows != floor.num_rows:
        return f"DIFFERENT: {ours.num_rows} rows, the floor {floor.num_rows}"
    floor = floor.cast(ours.schema) if floor.schema != ours.schema else floor
    if not ours.sort_by(key).equals(floor.sort_by(key)):
        return "DIFFERENT rows"
    return f"the same rows ({ours.num_rows} rows, {ours.num_columns} columns)"


def check(expected_rows: int, runs: dict[str, list[Result]]) -> list[str]:
    problems = []
    for variant, results in runs.items():
        for i, r in enumerate(results):
            if "error" in r:
                problems.append(f"{variant} run {i + 1} failed: {r['error']}")
                continue
            if r["rows"] != expected_rows:
                problems.append(f"{variant} run {i + 1}: {r['rows']} rows, expected {expected_rows}")
            problems.extend(f"{variant} run {i + 1}: {p}" for p in r.get("problems", []))
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows over all the files")
    parser.add_argument("--files", type=int, default=50, help="small base files to cluster")
    parser.add_argument("--sort", default="rider,ts", help="the sort columns, comma-separated")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per variant (median)")
    parser.add_argument("--codec", choices=("gzip", "snappy"), default="gzip", help="parquet codec")
    parser.add_argument(
        "--profile", action="store_true", help="profile one more run even if the target is met"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)
    if min(args.rows, args.repeat) < 1 or not 2 <= args.files <= args.rows:
        parser.error("rows and repeat must be at least 1, files within 2..rows")
    columns = tuple(args.sort.split(","))
    level = ParquetOptions(compression=args.codec).pyarrow_compression_level
    codec_label = args.codec + (f" level {level}" if level is not None else "")
    print(
        f"clustering of {args.files} files ({args.rows} rows in all, one partition) into one file sorted by "
        f"{', '.join(columns)}; {codec_label}; median of {args.repeat} runs, each in a fresh process"
    )
    with tempfile.TemporaryDirectory(prefix="bench_clustering_") as tmp:
        source = os.path.join(tmp, "source")
        start = time.perf_counter()
        partition = build_table(source, args.rows, args.files, args.codec)
        build_s = time.perf_counter() - start
        slices = Table.open(source).file_slices()
        if len(slices) != args.files:
            print(f"setup failed: {len(slices)} file slices, expected {args.files}", file=sys.stderr)
            return 2
        sizes = [s.base_file_size for s in slices]
        print(
            f"table built in {build_s:.1f} s: {len(slices)} base files, {sum(sizes) / 1e6:.1f} MB "
            f"({min(sizes) / 1e6:.2f}..{max(sizes) / 1e6:.2f} MB each)"
        )
        os.sync()

        runs: dict[str, list[Result]] = {v: [] for v in VARIANTS}
        kept: dict[str, str] = {}
        for i in range(args.repeat):
            order = VARIANTS if i % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                if variant == "ours":
                    path = os.path.join(tmp, f"ours-{i}")
                    shutil.copytree(source, path)
                    os.sync()
                    result = spawn("ours", path, "", args)
                    if i == 0 and "error" not in result:
                        kept["ours"] = os.path.join(path, result["out_path"])
                    else:
                        shutil.rmtree(path)
                else:
                    out = os.path.join(tmp, f"pyarrow-{i}.parquet")
                    result = spawn("pyarrow", os.path.join(source, partition), out, args)
                    if i == 0 and "error" not in result:
                        kept["pyarrow"] = out
                    elif os.path.exists(out):
                        os.remove(out)
                runs[variant].append(result)
            print(f"  run {i + 1}/{args.repeat}: " + ", ".join(brief(v, runs[v][-1]) for v in VARIANTS))

        problems = check(args.rows, runs)
        agreement = (
            compare_with_floor(kept["ours"], kept["pyarrow"])
            if len(kept) == 2
            else "not compared (a variant failed)"
        )
        if not agreement.startswith("the same"):
            problems.append(f"clustered file vs the floor's: {agreement}")
        met = report(args, runs, agreement)
        if not met or args.profile:
            path = os.path.join(tmp, "profiled")
            shutil.copytree(source, path)
            os.sync()
            profiled = spawn("profile", path, "", args)
            print_profile(profiled)
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


def brief(variant: str, r: Result) -> str:
    if "error" in r:
        return f"{variant} failed"
    return f"{variant} {r['seconds']['clustering' if variant == 'ours' else 'total']:.2f} s"


def report(args: argparse.Namespace, runs: dict[str, list[Result]], agreement: str) -> bool:
    """Print the medians and the ratio with its ``TARGET`` line; whether the target is met."""
    ours, floor = runs["ours"], runs["pyarrow"]
    t = {k: median(ours, k) for k in ("clustering", "prepare", "task", "commit", "schedule", "cpu")}
    t_floor, cpu_floor = median(floor, "total"), median(floor, "cpu")

    def sec(value: float | None) -> str:
        return f"{value:8.2f}" if value is not None else f"{'failed':>8}"

    def out_mb(results: Sequence[Result]) -> str:
        sizes = [r["out_bytes"] for r in results if "error" not in r]
        return f"{sizes[0] / 1e6:8.1f}" if sizes else f"{'-':>8}"

    print()
    header = f"{'variant':52} {'median s':>8} {'CPU s':>8} {'out MB':>8}"
    print(header)
    print("-" * len(header))
    line = f"{'ours: clustering (prepare + task + commit)':52} {sec(t['clustering'])} {sec(t['cpu'])}"
    print(f"{line} {out_mb(ours)}")
    print(f"{'ours:   of which prepare_clustering':52} {sec(t['prepare'])}")
    print(f"{'ours:   of which run_clustering_task':52} {sec(t['task'])}")
    print(f"{'ours:   of which commit_clustering':52} {sec(t['commit'])}")
    print(f"{'ours: schedule_clustering (not counted)':52} {sec(t['schedule'])}")
    line = f"{'floor: read_table x files, concat, sort_by, write':52} {sec(t_floor)} {sec(cpu_floor)}"
    print(f"{line} {out_mb(floor)}")
    for variant, results in runs.items():
        for r in results:
            if "error" in r:
                print(f"    {variant} failed: {r['error']}")
                break
    ratio = t["clustering"] / t_floor if t["clustering"] is not None and t_floor else None
    print()
    if ratio is not None and t["task"] is not None and t_floor:
        print(f"task alone / floor {t['task'] / t_floor:.2f}")
    print(f"check: clustered file vs the floor's: {agreement}")
    return targets.check(f"clustering {args.files} files / pyarrow floor", ratio, TARGET_FLOOR)


def print_profile(result: Result) -> None:
    if "error" in result:
        print(f"profiled run failed: {result['error']}")
        return
    s = result["seconds"]
    print(
        f"\nwhere a clustering's time goes (one run under cProfile, {s['clustering']:.2f} s with the "
        f"profiler's overhead): prepare {s['prepare']:.2f} s, task {s['task']:.2f} s, "
        f"commit {s['commit']:.2f} s.\ncProfile sees the calling thread: its waits (lock acquire, result) "
        "are the work of the base-file writer's threads: the column encoders "
        "(ColumnParallelWriter.write_table) and the producer of the next row group, merging the sorted runs "
        "(prefetched)"
    )
    print(result["profile"])


if __name__ == "__main__":
    sys.exit(main())
