"""Compaction of one large MOR file slice against what it costs at least, and what a Python user would do.

    python benchmarks/bench_compaction.py [--rows 1000000] [--update-rows 50000] [--commits 5]
                                          [--repeat 5] [--codec gzip|snappy] [--spark-repeat 3 | --no-spark]

The table: a non-partitioned MERGE_ON_READ table (version 8, trips schema of ``hoodie.testing.generate``,
record key ``uuid``, ordering field ``ts``) with ONE file group: ROWS rows inserted in one commit into its
base file, then COMMITS upserts of UPDATE_ROWS rows each, all updating existing keys, so that each lands in
the group as a log file with one Avro data block. It is built once per run (its build time is printed); every
run of a compacting variant starts from a fresh copy of it (``shutil.copytree``, untimed).

Measured, each run of each variant in a fresh process (so that one variant's memory or warm caches do not
pollute another's; imports happen before the clock starts), the variants alternating from run to run:

- ours: ``schedule_compaction`` (timed apart, not counted), then the execution, timed as "compaction":
  ``prepare_compaction`` + ``run_compaction_task`` + ``commit_compaction`` in-process; "task" is
  ``run_compaction_task`` alone (merge the slice, check it, write the new base file: meta columns, bloom
  filter, key range, fsync'd create-if-absent);
- (a) the floor: ``pq.read_table`` of the base file and ``pq.write_table`` of as many rows with the same codec
  and level (gzip at parquet-mr's 6, snappy), no merge, no Hudi footer, no fsync;
- (b) what a Python user would do instead: hudi-rs ``HudiTableBuilder.from_base_uri(..).build()``,
  ``get_file_slices()``, ``create_file_group_reader_with_options().read_file_slice(slice)`` and
  ``pq.write_table`` of the merged batch with the same codec and level (nothing committed to the table);
- the Spark job path (``hoodied.jobs.run_service_job`` with compaction, in ``local`` mode), when pyspark
  and Java are there: one process for all its --spark-repeat runs (default 3, at most --repeat: a default
  run stays near 6 minutes on 2 cores), the session started and its Python worker warmed up (importing
  ``hoodie``) before the first run; its time is schedule-free as ours; its memory is not measured (the
  task runs in a Spark Python worker).

Peak memory is the peak RSS of the variant's process (``VmHWM``, reset right before the timed work, after
imports and scheduling) minus its RSS at that point (not ``ru_maxrss``, which Linux carries over ``exec`` from
the parent), set against the Arrow size (``Table.nbytes``) of the merged slice as read back from the compacted
base file. Printed: the medians over --repeat runs, and the ratios with their targets (``TARGET`` lines,
``targets.py``): compaction / (a) <= 1.2, compaction / (b) <= 0.8, peak memory / Arrow size of the slice
<= 2.5. The compacted file is checked every
run (one slice left, no log files, the rows the slice merges to), and once against hudi-rs's merge of the same
slice, column by column.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

import targets
from child_result import Result, median, print_result, run_variant
from hoodie.table import Table
from hoodie.testing.generate import TripGenerator, trips_writer
from hoodie.testing.table_writer import WriteConfig
from hoodie.write.base_file import ParquetOptions
from process_memory import memory_mark, memory_peak

VARIANTS = ("ours", "pyarrow", "hudi-rs")
TARGET_FLOOR = 1.2  # compaction / (a)
TARGET_HUDI_RS = 0.8  # compaction / (b)
TARGET_MEMORY = 2.5  # peak memory / Arrow size of the merged slice
SEED = 7


# -- the table -----------------------------------------------------------------------------------------------


def parquet_options(codec: str, rows: int = 0) -> ParquetOptions:
    # One file group: the writer splits inserts into files of max_file_bytes // 1024 (its record size
    # estimate before the first commit) rows; make room for all of them.
    return ParquetOptions(compression=codec, max_file_bytes=max(4 << 30, 2048 * rows))


def build_table(path: str, rows: int, update_rows: int, commits: int, codec: str) -> None:
    """ROWS rows in one base file, then COMMITS upserts of UPDATE_ROWS existing keys (one log file each)."""
    writer = trips_writer(
        path,
        table_type="MERGE_ON_READ",
        partitioned=False,
        config=WriteConfig(parquet=parquet_options(codec, rows), log_format="avro"),
        seed=SEED,
    )
    gen = TripGenerator(SEED, 0)
    keys = gen.keys(rows)
    first = gen.rows(keys)
    city = first.column("city")[0].as_py()
    writer.insert(first)
    for _ in range(commits):
        picked = gen.choose(rows, update_rows)
        writer.upsert(gen.rows([keys[int(i)] for i in picked], [city] * len(picked)))


def mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


# -- the children: one run of one variant ----------------------------------------------------------------


def child_ours(path: str, codec: str) -> Result:
    from hoodie.compaction.execute import commit_compaction, prepare_compaction, run_compaction_task
    from hoodie.compaction.plan import schedule_compaction
    from hoodie.lock import FileSystemLock
    from hoodie.storage import Storage

    storage = Storage.for_uri(path)
    lock = FileSystemLock(storage)
    options = ParquetOptions(compression=codec)
    start = time.perf_counter()
    scheduled = schedule_compaction(storage, lock)
    schedule_s = time.perf_counter() - start
    if scheduled.instant is None:
        raise RuntimeError(f"nothing scheduled: {scheduled.reason}")
    base_kib = memory_mark()
    start = time.perf_counter()
    prepared = prepare_compaction(storage, lock, scheduled.instant.time, parquet=options)
    task_start = time.perf_counter()
    results = [run_compaction_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    task_s = time.perf_counter() - task_start
    done = commit_compaction(storage, lock, prepared, results)
    compaction_s = time.perf_counter() - start
    peak_kib = memory_peak()
    # Checks, after the measurement: one slice left, its base file the compaction's, no log files.
    slices = Table.open(path).file_slices()
    problems = []
    if len(slices) != 1:
        problems.append(f"{len(slices)} file slices after compaction")
    rel = ""
    for s in slices[:1]:
        if s.log_files:
            problems.append(f"{len(s.log_files)} log file(s) left in the slice")
        if s.base_file is None or s.base_file.instant_time != prepared.instant.time:
            problems.append(f"the slice's base file is {s.base_file}, not the compaction's")
        rel = s.base_file_path or ""
    rows = pq.read_metadata(os.path.join(path, rel)).num_rows if rel else -1
    return {
        "seconds": {"compaction": compaction_s, "task": task_s, "schedule": schedule_s},
        "peak_bytes": (peak_kib - base_kib) * 1024,
        "rows": rows,
        "records_written": done.records_written,
        "out_path": rel,
        "out_bytes": os.path.getsize(os.path.join(path, rel)) if rel else 0,
        "problems": problems,
    }


def child_pyarrow(base_file: str, out: str, codec: str) -> Result:
    options = ParquetOptions(compression=codec)
    base_kib = memory_mark()
    start = time.perf_counter()
    table = pq.read_table(base_file)
    pq.write_table(
        table,
        out,
        compression=options.pyarrow_compression,
        compression_level=options.pyarrow_compression_level,
    )
    seconds = time.perf_counter() - start
    peak_kib = memory_peak()
    return {
        "seconds": {"total": seconds},
        "peak_bytes": (peak_kib - base_kib) * 1024,
        "rows": table.num_rows,
        "out_bytes": os.path.getsize(out),
    }


def child_hudi_rs(path: str, out: str, codec: str) -> Result:
    import hudi

    options = ParquetOptions(compression=codec)
    base_kib = memory_mark()
    start = time.perf_counter()
    table = hudi.HudiTableBuilder.from_base_uri(path).build()
    slices = table.get_file_slices()
    if len(slices) != 1:
        raise RuntimeError(f"hudi-rs sees {len(slices)} file slices, expected 1")
    reader = table.create_file_group_reader_with_options()
    batch = reader.read_file_slice(slices[0])
    merged = pa.Table.from_batches([batch])
    pq.write_table(
        merged,
        out,
        compression=options.pyarrow_compression,
        compression_level=options.pyarrow_compression_level,
    )
    seconds = time.perf_counter() - start
    peak_kib = memory_peak()
    return {
        "seconds": {"total": seconds},
        "peak_bytes": (peak_kib - base_kib) * 1024,
        "rows": merged.num_rows,
        "out_bytes": os.path.getsize(out),
    }


def _warm_worker(_: int) -> int:
    """Runs in a Spark Python worker: the imports a compaction task needs."""
    import hoodie.compaction.execute  # noqa: F401

    return os.getpid()


def child_spark(source: str, work: str, repeat: int, codec: str) -> Result:
    from hoodie.compaction.plan import schedule_compaction
    from hoodie.compaction.service import COMPACTION
    from hoodie.lock import FileSystemLock
    from hoodie.storage import Storage
    from hoodied.jobs import run_service_job
    from hoodied.spark import SparkConfig, spark_session

    start = time.perf_counter()
    spark = spark_session(SparkConfig(app_name="bench_compaction"))
    spark.sparkContext.parallelize([0], 1).map(_warm_worker).collect()
    startup_s = time.perf_counter() - start
    times: list[float] = []
    rows = -1
    try:
        for i in range(repeat):
            path = os.path.join(work, f"spark-{i}")
            shutil.copytree(source, path)
            os.sync()
            storage = Storage.for_uri(path)
            lock = FileSystemLock(storage)
            scheduled = schedule_compaction(storage, lock)
            if scheduled.instant is None:
                raise RuntimeError(f"nothing scheduled: {scheduled.reason}")
            start = time.perf_counter()
            job = run_service_job(
                spark,
                COMPACTION,
                storage,
                lock,
                scheduled.instant.time,
                settings={"hoodie.parquet.compression.codec": codec},
            )
            times.append(time.perf_counter() - start)
            rows = job.done.records
            shutil.rmtree(path)
    finally:
        spark.stop()
    return {"seconds": {"runs": times}, "startup_s": startup_s, "rows": rows}


def run_child(args: argparse.Namespace) -> int:
    try:
        if args.child == "ours":
            result = child_ours(args.path, args.codec)
        elif args.child == "pyarrow":
            result = child_pyarrow(args.path, args.out, args.codec)
        elif args.child == "hudi-rs":
            result = child_hudi_rs(args.path, args.out, args.codec)
        elif args.child == "spark":
            result = child_spark(args.path, args.out, args.repeat, args.codec)
        else:
            raise ValueError(f"unknown variant {args.child}")
    except BaseException as e:  # hudi-rs panics are BaseExceptions (pyo3_runtime.PanicException)
        if isinstance(e, KeyboardInterrupt):
            raise
        first = str(e).splitlines()[0][:300] if str(e) else ""
        result = {"error": f"{type(e).__name__}: {first}"}
    print_result(result)
    return 0


def spawn(variant: str, path: str, out: str, codec: str, repeat: int = 1) -> Result:
    """Run one variant in a fresh interpreter; its result, or ``{"error": ...}``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--path", path, "--out", out]
    cmd += ["--codec", codec, "--repeat", str(repeat)]
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    return run_variant(cmd, env)


# -- the parent ----------------------------------------------------------------------------------------------


def spark_unavailable() -> str | None:
    """Why the Spark variant cannot run, or ``None``."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed"
    try:
        from hoodied.spark import java_available
    except ImportError as e:
        return f"hoodied's Spark modules do not import: {e}"
    if not java_available():
        return "no Java runtime"
    return None


def median_peak(results: Sequence[Result]) -> float | None:
    values = [r["peak_bytes"] for r in results if "error" not in r and "peak_bytes" in r]
    return statistics.median(values) if values else None


def compare_with_hudi_rs(ours_file: str, theirs_file: str) -> str:
    """Column-by-column comparison of the compacted base file and hudi-rs's merge, rows matched by key."""
    key = "_hoodie_record_key"
    ours = pq.read_table(ours_file).replace_schema_metadata(None)
    theirs = pq.read_table(theirs_file).replace_schema_metadata(None)
    if ours.num_rows != theirs.num_rows:
        return f"DIFFERENT: {ours.num_rows} rows, hudi-rs {theirs.num_rows}"
    ours = ours.sort_by(key)
    theirs = theirs.sort_by(key)
    differing = []
    for name in ours.column_names:
        if name == "_hoodie_file_name":  # names the new file in ours, the old ones in the merge
            continue
        if name not in theirs.column_names:
            differing.append(f"{name} (missing in hudi-rs)")
            continue
        a = ours.column(name).combine_chunks()
        try:
            b = theirs.column(name).cast(a.type).combine_chunks()
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            differing.append(f"{name} (type {theirs.column(name).type} vs {a.type})")
            continue
        if not a.equals(b):
            differing.append(name)
    if differing:
        return "DIFFERENT in " + ", ".join(differing)
    return f"identical ({ours.num_rows} rows, {ours.num_columns - 1} columns compared)"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in the base file")
    parser.add_argument("--update-rows", type=int, default=50_000, help="updated rows per upsert")
    parser.add_argument("--commits", type=int, default=5, help="upserts (log files) after the insert")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per variant (median)")
    parser.add_argument("--codec", choices=("gzip", "snappy"), default="gzip", help="parquet codec")
    parser.add_argument(
        "--spark-repeat", type=int, help="timed runs of the Spark job variant (default: 3, at most --repeat)"
    )
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark job variant")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)
    if args.spark_repeat is None:
        args.spark_repeat = min(3, args.repeat)
    if min(args.rows, args.commits, args.repeat, args.spark_repeat) < 1:
        parser.error("rows, commits, repeat and spark-repeat must be at least 1")
    if not 1 <= args.update_rows <= args.rows:
        parser.error("update-rows must lie within 1..rows")

    level = ParquetOptions(compression=args.codec).pyarrow_compression_level
    codec_label = f"{args.codec}" + (f" level {level}" if level is not None else "")
    print(
        f"compaction of one file slice: {args.rows} rows in the base file + {args.commits} log files of "
        f"{args.update_rows} updates (Avro blocks); {codec_label}; median of {args.repeat} runs, "
        "each run of each variant in a fresh process"
    )
    with tempfile.TemporaryDirectory(prefix="bench_compaction_") as tmp:
        source = os.path.join(tmp, "source")
        start = time.perf_counter()
        build_table(source, args.rows, args.update_rows, args.commits, args.codec)
        build_s = time.perf_counter() - start
        slices = Table.open(source).file_slices()
        if len(slices) != 1 or slices[0].base_file_path is None or len(slices[0].log_files) != args.commits:
            print(
                f"setup failed: expected one file group with a base file and {args.commits} log files, got "
                + "; ".join(f"{s.file_id}: base {s.base_file}, {len(s.log_files)} logs" for s in slices),
                file=sys.stderr,
            )
            return 2
        the_slice = slices[0]
        base_file = os.path.join(source, the_slice.base_file_path or "")
        logs = the_slice.log_file_sizes
        print(
            f"table built in {build_s:.1f} s: base file {mb(the_slice.base_file_size)}, "
            f"{len(logs)} log files {mb(sum(logs))} ({mb(min(logs))}..{mb(max(logs))} each)"
        )
        os.sync()

        runs: dict[str, list[Result]] = {v: [] for v in VARIANTS}
        kept: dict[str, str] = {}
        for i in range(args.repeat):
            order = VARIANTS[i % len(VARIANTS) :] + VARIANTS[: i % len(VARIANTS)]
            for variant in order:
                if variant == "ours":
                    path = os.path.join(tmp, f"ours-{i}")
                    shutil.copytree(source, path)
                    os.sync()
                    result = spawn("ours", path, "", args.codec)
                    if i == 0 and "error" not in result:
                        kept["ours"] = os.path.join(path, result["out_path"])
                    else:
                        shutil.rmtree(path)
                else:
                    out = os.path.join(tmp, f"{variant}-{i}.parquet")
                    target = base_file if variant == "pyarrow" else source
                    result = spawn(variant, target, out, args.codec)
                    if i == 0 and variant == "hudi-rs" and "error" not in result:
                        kept["hudi-rs"] = out
                    elif os.path.exists(out):
                        os.remove(out)
                runs[variant].append(result)
            print(f"  run {i + 1}/{args.repeat}: " + ", ".join(_brief(v, runs[v][-1]) for v in VARIANTS))

        spark: Result | None = None
        why_not = "--no-spark" if args.no_spark else spark_unavailable()
        if why_not is None:
            spark = spawn("spark", source, tmp, args.codec, repeat=args.spark_repeat)

        # The merged slice: its Arrow size, read back from the compacted file.
        arrow_bytes = pq.read_table(kept["ours"]).nbytes if "ours" in kept else None
        problems = _check(args.rows, runs)
        if spark is not None and "error" not in spark and spark["rows"] != args.rows:
            problems.append(f"Spark job: {spark['rows']} records written, expected {args.rows}")
        agreement = (
            compare_with_hudi_rs(kept["ours"], kept["hudi-rs"])
            if "ours" in kept and "hudi-rs" in kept
            else "not compared (a variant failed)"
        )
        if agreement.startswith("DIFFERENT"):
            problems.append(f"compacted file vs hudi-rs: {agreement}")

        print()
        _report(args, runs, spark, why_not, arrow_bytes, agreement)
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


def _brief(variant: str, r: Result) -> str:
    if "error" in r:
        return f"{variant} failed"
    s = r["seconds"]["compaction" if variant == "ours" else "total"]
    return f"{variant} {s:.2f} s"


def _check(expected_rows: int, runs: dict[str, list[Result]]) -> list[str]:
    """Every compaction left the rows the slice merges to (all updates hit existing keys: ROWS rows)."""
    problems = []
    for variant, results in runs.items():
        for i, r in enumerate(results):
            if "error" in r:  # a failed baseline is reported in the table, not a problem of ours
                if variant == "ours":
                    problems.append(f"{variant} run {i + 1} failed: {r['error']}")
                continue
            if r["rows"] != expected_rows:
                problems.append(f"{variant} run {i + 1}: {r['rows']} rows, expected {expected_rows}")
            for p in r.get("problems", []):
                problems.append(f"{variant} run {i + 1}: {p}")
            if variant == "ours" and r["records_written"] != r["rows"]:
                problems.append(
                    f"ours run {i + 1}: commit metadata says {r['records_written']} records written, "
                    f"the file holds {r['rows']}"
                )
    return problems


def _report(
    args: argparse.Namespace,
    runs: dict[str, list[Result]],
    spark: Result | None,
    why_not: str | None,
    arrow_bytes: int | None,
    agreement: str,
) -> None:
    ours, floor, rs = runs["ours"], runs["pyarrow"], runs["hudi-rs"]
    t_comp, t_task, t_sched = median(ours, "compaction"), median(ours, "task"), median(ours, "schedule")
    t_floor, t_rs = median(floor, "total"), median(rs, "total")

    def sec(t: float | None) -> str:
        return f"{t:8.2f}" if t is not None else f"{'failed':>8}"

    def peak(results: Sequence[Result]) -> str:
        p = median_peak(results)
        if p is None:
            return f"{'-':>9} {'-':>10}"
        rel = f"{p / arrow_bytes:10.2f}" if arrow_bytes else f"{'-':>10}"
        return f"{p / 1e6:9.1f} {rel}"

    def out_size(results: Sequence[Result]) -> str:
        sizes = [r["out_bytes"] for r in results if "error" not in r and "out_bytes" in r]
        return f"{sizes[0] / 1e6:8.1f}" if sizes else f"{'-':>8}"

    def rows(results: Sequence[Result]) -> str:
        counts = {r["rows"] for r in results if "error" not in r}
        return f"{counts.pop():9d}" if len(counts) == 1 else f"{'varies' if counts else '-':>9}"

    slice_size = mb(arrow_bytes) if arrow_bytes else "unknown"
    print(f"merged slice: {slice_size} in Arrow (nbytes of the compacted file read back)")
    header = f"{'variant':44} {'median s':>8} {'peak MB':>9} {'peak/Arrow':>10} {'rows':>9} {'out MB':>8}"
    print(header)
    print("-" * len(header))

    def line(label: str, t: float | None, results: Sequence[Result]) -> None:
        print(f"{label:44} {sec(t)} {peak(results)} {rows(results)} {out_size(results)}")

    line("ours: compaction (prepare + task + commit)", t_comp, ours)
    print(f"{'ours:   of which run_compaction_task':44} {sec(t_task)}")
    print(f"{'ours: schedule_compaction (not counted)':44} {sec(t_sched)}")
    line("(a) pyarrow read_table + write_table", t_floor, floor)
    line("(b) hudi-rs read_file_slice + write_table", t_rs, rs)
    t_spark = None
    if spark is None:
        print(f"{'Spark job (hoodied.jobs)':44} skipped: {why_not}")
    elif "error" in spark:
        print(f"{'Spark job (hoodied.jobs)':44} failed: {spark['error']}")
    else:
        t_spark = statistics.median(spark["seconds"]["runs"])
        print(
            f"{'Spark job (hoodied.jobs), local mode':44} {sec(t_spark)} {'n/a':>9} {'n/a':>10} "
            f"{spark['rows']:9d}   ({len(spark['seconds']['runs'])} runs; session start + worker warm-up "
            f"{spark['startup_s']:.1f} s, not counted)"
        )
    for variant in VARIANTS:
        for r in runs[variant]:
            if "error" in r:
                print(f"    {variant} failed: {r['error']}")
                break

    def ratio(a: float | None, b: float | None) -> float | None:
        return a / b if a is not None and b else None

    print()
    print("ratios (medians):")
    targets.check("compaction / pyarrow floor", ratio(t_comp, t_floor), TARGET_FLOOR)
    targets.check("compaction / hudi-rs + write_table", ratio(t_comp, t_rs), TARGET_HUDI_RS)
    p = median_peak(ours)
    mem = p / arrow_bytes if p is not None and arrow_bytes else None
    targets.check("compaction peak memory / slice Arrow size", mem, TARGET_MEMORY)
    task_floor, task_rs = ratio(t_task, t_floor), ratio(t_task, t_rs)
    if task_floor is not None and task_rs is not None:
        print(f"  task alone / (a) {task_floor:5.2f}, / (b) {task_rs:5.2f}")
    spark_floor, spark_rs = ratio(t_spark, t_floor), ratio(t_spark, t_rs)
    if spark_floor is not None and spark_rs is not None:
        print(f"  Spark job / (a) {spark_floor:5.2f}, / (b) {spark_rs:5.2f}")
    print(f"check: compacted file vs hudi-rs's merge of the slice: {agreement}")


if __name__ == "__main__":
    sys.exit(main())
