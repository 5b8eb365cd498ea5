"""What the metadata table's deltacommit costs a compaction of many file groups.

    python benchmarks/bench_metadata_upkeep.py [--partitions 100] [--groups 10] [--rows 100] [--updates 10]
                                               [--indexes column_stats,partition_stats] [--repeat 3]
                                               [--without] [--profile]

The table: a MERGE_ON_READ table (version 8, trips schema of ``hoodie.testing.generate``, record key
``uuid``, ordering field ``ts``, partitioned by ``city``) of PARTITIONS partitions of GROUPS file groups
each: one ``bulk_insert`` of ROWS rows per file group (the writer cuts each partition's rows into files at
its 1 KiB-a-record estimate), then its metadata table with ``files`` and INDEXES built (``run_indexing``),
then one upsert of UPDATES rows of every file group (so each has a log file, and the metadata table follows
the write), then one compaction of every file group scheduled (strategy ``UnBounded``). Built once, untimed;
every run compacts a fresh copy (``shutil.copytree``) in a fresh process (imports before the clock).

Measured per run: the compaction in-process (``prepare_compaction`` + ``run_compaction_task`` of each
operation + ``commit_compaction``), and, inside its commit, the metadata table's deltacommit: the call of
``write_metadata_update`` that ``complete_rewrite`` makes (building the update, ``update_for_rewrite``: each
new base file's footer, statistics and bloom filter; and writing it: HFile blocks, log files, the
deltacommit's timeline files), timed by wrapping that function where ``hoodie.write.service_commit`` calls
it (the time of the build is also shown apart). The metadata table's compaction after the commit
(``maintain_metadata_table``, when due) is shown apart, not counted: it is not the deltacommit. With
``--without``, one more run compacts a copy whose metadata table was deleted, as a cross-check of the
difference. Printed: the medians and the ratio deltacommit / compaction, with its target <= 0.10. When it is
missed (or with ``--profile``), one more run profiles the deltacommit (``cProfile``, the entries of most
cumulative and own time).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import targets
from child_result import Result, median, print_result, run_variant
from hoodie.compaction.execute import commit_compaction, prepare_compaction, run_compaction_task
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.indexing.execute import run_indexing, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.metadata_table import delete_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import TripGenerator, trips_writer
from hoodie.testing.table_writer import WriteConfig
from hoodie.write import service_commit
from hoodie.write.base_file import ParquetOptions

TARGET = 0.10  # metadata-table deltacommit / compaction
SEED = 13
RECORD_SIZE_ESTIMATE = 1024  # the writer's bytes per record before a first commit: it cuts files by it
PROFILE_LINES = 30


# -- the table -----------------------------------------------------------------------------------------------


def build_table(path: str, partitions: int, groups: int, rows: int, updates: int, indexes: list[str]) -> int:
    """The table of the module doc, its compaction scheduled; returns the compaction's operations."""
    options = ParquetOptions(max_file_bytes=rows * RECORD_SIZE_ESTIMATE)
    writer = trips_writer(
        path,
        table_type="MERGE_ON_READ",
        config=WriteConfig(parquet=options, record_size_estimate=RECORD_SIZE_ESTIMATE),
        seed=SEED,
    )
    gen = TripGenerator(SEED, 0)
    per_partition = groups * rows
    keys = gen.keys(partitions * per_partition)
    cities = [f"city_{p:04d}" for p in range(partitions) for _ in range(per_partition)]
    data = gen.rows(keys, cities)
    # Rows in partition order: the writer cuts each partition's rows into files of ROWS consecutive rows.
    writer.bulk_insert(data)
    storage = Storage.for_uri(path)
    lock = FileSystemLock(storage)
    if indexes:
        schedule_indexing(storage, lock, indexes)
        run_indexing(storage, lock)
    picked = [i for start in range(0, len(keys), rows) for i in range(start, start + min(updates, rows))]
    writer.upsert(gen.rows([keys[i] for i in picked], [cities[i] for i in picked]))
    scheduled = schedule_compaction(storage, lock, config=CompactionConfig(strategy=Strategy.UNBOUNDED))
    if scheduled.plan is None:
        raise RuntimeError(f"nothing to compact: {scheduled.reason}")
    return len(scheduled.plan.operations)


# -- the child: one compaction, its deltacommit timed --------------------------------------------------------


class Timed:
    """Wraps a function of ``hoodie.write.service_commit`` to add up the seconds its calls take (and
    profile them when given a profiler)."""

    def __init__(self, fn: Callable[..., Any], profiler: cProfile.Profile | None = None) -> None:
        self.fn = fn
        self.profiler = profiler
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        if self.profiler is not None:
            self.profiler.enable()
        try:
            return self.fn(*args, **kwargs)
        finally:
            if self.profiler is not None:
                self.profiler.disable()
            self.seconds += time.perf_counter() - start
            self.calls += 1


def child(path: str, profile: bool) -> Result:
    storage = Storage.for_uri(path)
    lock = FileSystemLock(storage)
    profiler = cProfile.Profile() if profile else None
    deltacommit = Timed(service_commit.write_metadata_update, profiler)
    build = Timed(service_commit.update_for_rewrite)
    maintain = Timed(service_commit.maintain_metadata_table)
    service_commit.write_metadata_update = deltacommit  # type: ignore[assignment]
    service_commit.update_for_rewrite = build  # type: ignore[assignment]
    service_commit.maintain_metadata_table = maintain  # type: ignore[assignment]
    start = time.perf_counter()
    prepared = prepare_compaction(storage, lock)
    tasks_start = time.perf_counter()
    results = [run_compaction_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    commit_start = time.perf_counter()
    done = commit_compaction(storage, lock, prepared, results)
    end = time.perf_counter()
    table = Table.open(path)
    slices = table.file_slices()
    problems = []
    if any(s.log_files for s in slices):
        problems.append(f"{sum(1 for s in slices if s.log_files)} slice(s) still have log files")
    if deltacommit.calls != 1:
        problems.append(f"write_metadata_update called {deltacommit.calls} times, expected once")
    result: Result = {
        "seconds": {
            "compaction": end - start,
            "prepare": tasks_start - start,
            "tasks": commit_start - tasks_start,
            "commit": end - commit_start,
            "deltacommit": deltacommit.seconds,
            "build": build.seconds,
            "maintain": maintain.seconds,
        },
        "operations": len(prepared.tasks),
        "records_written": done.records_written,
        "has_metadata_table": bool(table.config.metadata_partitions),
        "problems": problems,
    }
    if profiler is not None:
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out).strip_dirs()
        stats.sort_stats("cumulative").print_stats(PROFILE_LINES)
        stats.sort_stats("tottime").print_stats(PROFILE_LINES)
        result["profile"] = out.getvalue()
    return result


def run_child(args: argparse.Namespace) -> int:
    try:
        result = child(args.path, args.child == "profile")
    except Exception as e:
        first = str(e).splitlines()[0][:300] if str(e) else ""
        result = {"error": f"{type(e).__name__}: {first}"}
    print_result(result)
    return 0


def spawn(variant: str, path: str) -> Result:
    """Run one compaction in a fresh interpreter; its result, or ``{"error": ...}``."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", variant, "--path", path]
    return run_variant(cmd)


# -- the parent ----------------------------------------------------------------------------------------------


def fresh_copy(source: str, path: str, keep_metadata_table: bool = True) -> str:
    shutil.copytree(source, path)
    if not keep_metadata_table:
        storage = Storage.for_uri(path)
        delete_metadata_table(storage, FileSystemLock(storage))
    os.sync()
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--partitions", type=int, default=100, help="partitions of the table")
    parser.add_argument("--groups", type=int, default=10, help="file groups per partition")
    parser.add_argument("--rows", type=int, default=100, help="rows per file group")
    parser.add_argument("--updates", type=int, default=10, help="rows of each file group upserted")
    parser.add_argument(
        "--indexes", default="column_stats,partition_stats", help="metadata-table partitions besides files"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (median)")
    parser.add_argument("--without", action="store_true", help="one more run without the metadata table")
    parser.add_argument(
        "--profile", action="store_true", help="profile the deltacommit even if the target is met"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)
    if (
        min(args.partitions, args.groups, args.rows, args.updates, args.repeat) < 1
        or args.updates > args.rows
    ):
        parser.error("every size must be at least 1, and updates at most rows")
    indexes = [i.strip() for i in args.indexes.split(",") if i.strip()]
    groups = args.partitions * args.groups
    print(
        f"metadata-table upkeep of a compaction of {groups} file groups ({args.partitions} partitions x "
        f"{args.groups}, {args.rows} rows + a log file of {args.updates} updates each); metadata table: "
        f"files{''.join(', ' + i for i in indexes)}; median of {args.repeat} runs, each in a fresh process"
    )
    with tempfile.TemporaryDirectory(prefix="bench_metadata_upkeep_") as tmp:
        source = os.path.join(tmp, "source")
        start = time.perf_counter()
        operations = build_table(source, args.partitions, args.groups, args.rows, args.updates, indexes)
        built = time.perf_counter() - start
        print(f"table built in {built:.1f} s; compaction planned: {operations} operations")
        if operations != groups:
            print(f"setup failed: {operations} operations planned, expected {groups}", file=sys.stderr)
            return 2
        runs: list[Result] = []
        for i in range(args.repeat):
            path = fresh_copy(source, os.path.join(tmp, f"run-{i}"))
            runs.append(spawn("ours", path))
            shutil.rmtree(path)
            print(f"  run {i + 1}/{args.repeat}: {brief(runs[-1])}")
        without = None
        if args.without:
            path = fresh_copy(source, os.path.join(tmp, "without"), keep_metadata_table=False)
            without = spawn("ours", path)
            shutil.rmtree(path)
            print(f"  without the metadata table: {brief(without)}")
        problems = [
            f"run {i + 1}: {p}"
            for i, r in enumerate(runs)
            for p in ([r["error"]] if "error" in r else r["problems"])
        ]
        if any("error" not in r and r["records_written"] != groups * args.rows for r in runs):
            problems.append(f"a compaction wrote other than {groups * args.rows} records")
        met = report(runs, without)
        if not met or args.profile:
            path = fresh_copy(source, os.path.join(tmp, "profiled"))
            print_profile(spawn("profile", path))
    for p in problems:
        print(f"PROBLEM: {p}")
    return 1 if problems else 0


def brief(r: Result) -> str:
    if "error" in r:
        return f"failed: {r['error']}"
    s = r["seconds"]
    return f"compaction {s['compaction']:.2f} s, of which the deltacommit {s['deltacommit']:.2f} s"


def report(runs: Sequence[Result], without: Result | None) -> bool:
    """Print the medians and the ratio with its ``TARGET`` line; whether the target is met."""
    keys = ("compaction", "prepare", "tasks", "commit", "deltacommit", "build", "maintain")
    t = {k: median(runs, k) for k in keys}

    def sec(value: float | None) -> str:
        return f"{value:8.2f}" if value is not None else f"{'failed':>8}"

    print()
    print(f"{'':58} {'median s':>8}")
    print(f"{'compaction (prepare + tasks + commit)':58} {sec(t['compaction'])}")
    print(f"{'  prepare_compaction':58} {sec(t['prepare'])}")
    print(f"{'  run_compaction_task, every operation':58} {sec(t['tasks'])}")
    print(f"{'  commit_compaction':58} {sec(t['commit'])}")
    print(f"{'    metadata-table deltacommit (write_metadata_update)':58} {sec(t['deltacommit'])}")
    print(f"{'      of which building the update (update_for_rewrite)':58} {sec(t['build'])}")
    print(f"{'    metadata-table compaction when due (not counted)':58} {sec(t['maintain'])}")
    if without is not None:
        if "error" in without:
            print(f"without the metadata table: failed: {without['error']}")
        elif t["compaction"] is not None:
            w = without["seconds"]["compaction"]
            print(
                f"{'compaction without the metadata table (one run)':58} {w:8.2f}   "
                f"(difference {t['compaction'] - w:.2f} s)"
            )
    ratio = t["deltacommit"] / t["compaction"] if t["deltacommit"] is not None and t["compaction"] else None
    print()
    ops = next((r["operations"] for r in runs if "error" not in r), 0)
    return targets.check(f"metadata upkeep / compaction of {ops} file groups", ratio, TARGET, unit="")


def print_profile(result: Result) -> None:
    if "error" in result:
        print(f"profiled run failed: {result['error']}")
        return
    s = result["seconds"]
    print(
        f"\nwhere the deltacommit's time goes (one run, the deltacommit under cProfile: "
        f"{s['deltacommit']:.2f} s with the profiler's overhead, of a compaction of {s['compaction']:.2f} s)"
    )
    print(result["profile"])


if __name__ == "__main__":
    sys.exit(main())
