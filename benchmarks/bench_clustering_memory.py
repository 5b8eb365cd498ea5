"""Peak memory of one clustering task, of an indexing build and of a log compaction task, each set against
the Arrow size of the largest file slice it reads.

    python benchmarks/bench_clustering_memory.py [--group-bytes 2e8] [--slices 8] [--files 4]
                                                 [--only clustering,indexing,logcompaction]

The target is a task whose peak is a small multiple of its largest input slice, not of all of its input:
peak / largest slice <= 3 (a ``TARGET`` line per task).

Tables (MERGE_ON_READ, version 8, the trips schema of ``hoodie.testing.generate``, not partitioned, built
once per run, every measured run on a fresh copy):

- clustering and indexing: SLICES file groups, each from a ``bulk_insert`` of GROUP_BYTES / SLICES of Arrow
  rows (as merged: meta columns included), then one upsert of 5% of the keys of each (a log file per group).
  The clustering plan holds the one group of all the slices (``small_file_limit`` and the group bound
  raised), with ``numOutputFileGroups`` FILES. It runs once sorted by ``rider, ts`` (linear), once sorted on
  a z-order curve over ``ts, fare``, and once without sort columns. The indexing build is the record index
  over all the slices, as one task (``build_index_share``: what a Spark task runs; the driver makes the
  records).
- log compaction: one file group of GROUP_BYTES / SLICES, then six upserts of 10% of its keys (six log
  files). Its slice size is the Arrow size of the log's distinct keys at the merged row size.

Measured: each run in a fresh process (``python`` this file ``--child ...``, with whatever ``PYTHONPATH``
the parent has: point it at another checkout to measure that code). Scheduling and preparing happen before
the measurement. Peak memory is the process's peak RSS (``VmHWM``, reset right before the task) minus its
RSS at that point, and also the peak of pyarrow's memory pool (``max_memory``, the Arrow buffers alone).
Printed: both, the largest slice's Arrow size (``nbytes`` of the slice as ``merge_file_slice`` returns it,
deleted rows dropped), their ratios and whether the target is met.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

import targets
from hoodie.table import Table
from hoodie.testing.generate import TripGenerator, trips_writer
from hoodie.testing.table_writer import TableWriter, WriteConfig
from hoodie.write.base_file import ParquetOptions
from process_memory import memory_mark, memory_peak

RESULT_PREFIX = "BENCH_RESULT "
TARGET = 3.0
SEED = 5
MERGED_BYTES_PER_ROW = 330  # a merged trips row with its meta columns, about (measured: 146 without)
CLUSTERINGS = {
    "clustering-linear": (("rider", "ts"), "linear"),
    "clustering-zorder": (("ts", "fare"), "z-order"),
    "clustering-unsorted": ((), "linear"),
}
Result = dict[str, Any]


# -- the tables --------------------------------------------------------------------------------------------


def _writer(path: str) -> TableWriter:
    return trips_writer(
        path,
        table_type="MERGE_ON_READ",
        partitioned=False,
        config=WriteConfig(
            parquet=ParquetOptions(compression="snappy", max_file_bytes=8 << 30), log_format="avro"
        ),
        seed=SEED,
    )


def build_group_table(path: str, group_bytes: float, slices: int) -> None:
    writer = _writer(path)
    gen = TripGenerator(SEED, 0)
    rows = max(1, int(group_bytes / slices / MERGED_BYTES_PER_ROW))
    updates: list[str] = []
    for _ in range(slices):
        keys = gen.keys(rows)
        batch = gen.rows(keys)
        writer.bulk_insert(batch)
        picked = gen.choose(rows, max(1, rows // 20))
        updates.extend(keys[int(i)] for i in picked)
        del batch
    city = TripGenerator(SEED, 0).rows(gen.keys(1)).column("city")[0].as_py()
    writer.upsert(gen.rows(updates, [city] * len(updates)))


def build_log_table(path: str, group_bytes: float, slices: int) -> None:
    writer = _writer(path)
    gen = TripGenerator(SEED + 1, 0)
    rows = max(1, int(group_bytes / slices / MERGED_BYTES_PER_ROW))
    keys = gen.keys(rows)
    first = gen.rows(keys)
    city = first.column("city")[0].as_py()
    writer.insert(first)
    del first
    for _ in range(6):
        picked = gen.choose(rows, max(1, rows // 10))
        writer.upsert(gen.rows([keys[int(i)] for i in picked], [city] * len(picked)))


# -- the children ------------------------------------------------------------------------------------------


def largest_slice_bytes(path: str) -> tuple[int, int, int]:
    """The Arrow size of the largest merged slice (deleted rows dropped), the slices' total, the rows."""
    from hoodie.read.merge import drop_deleted_rows

    table = Table.open(path)
    sizes, rows = [], 0
    for s in table.file_slices():
        merged = table.merge_file_slice(s).table
        if merged is not None:
            merged = drop_deleted_rows(merged)
            sizes.append(int(merged.nbytes))
            rows += merged.num_rows
    return max(sizes, default=0), sum(sizes), rows


def _measured(run: Any) -> Result:
    pool = pa.default_memory_pool()
    pool_before = pool.bytes_allocated()
    base_kib = memory_mark()
    start = time.perf_counter()
    info = run()
    seconds = time.perf_counter() - start
    peak_kib = memory_peak()
    return {
        "seconds": seconds,
        "peak_bytes": (peak_kib - base_kib) * 1024,
        "pool_peak_bytes": pool.max_memory() - pool_before,
        **info,
    }


def child_clustering(path: str, variant: str, files: int) -> Result:
    from hoodie.clustering.execute import prepare_clustering, run_clustering_task
    from hoodie.clustering.layout import LayoutConfig, LayoutStrategy
    from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
    from hoodie.clustering.update_strategy import UpdateStrategy
    from hoodie.lock import FileSystemLock
    from hoodie.storage import Storage

    columns, layout = CLUSTERINGS[variant]
    storage = Storage.for_uri(path)
    lock = FileSystemLock(storage)
    total = sum(s.base_file_size + sum(s.log_file_sizes) for s in Table.open(path).file_slices())
    config = ClusteringConfig(
        sort_columns=columns,
        layout=LayoutConfig(LayoutStrategy.parse(layout, "layout")),
        target_file_max_bytes=total // files + 1,
        max_bytes_per_group=1 << 50,
        small_file_limit=1 << 50,
        max_file_bytes=1 << 50,
        update_strategy=UpdateStrategy.ALLOW,  # no writer beside: every group
    )
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    if scheduled.plan is None or len(scheduled.plan.input_groups) != 1:
        raise RuntimeError(f"expected one clustering group: {scheduled.reason}")
    # A group without sort columns runs as one task per run of its slices (hoodie.clustering.split): they
    # run one after another, so the peak is that of the task of the largest slice, as with one task.
    tasks = prepare_clustering(storage, lock).tasks

    def run() -> Result:
        results = [run_clustering_task(task, f"{task.index}-0-{task.index}") for task in tasks]
        return {
            "rows": sum(r.input_rows for r in results),
            "files": sum(len(r.stats) for r in results),
            "slices": sum(len(task.group.slices) for task in tasks),
            "tasks": len(tasks),
        }

    return _measured(run)


def child_indexing(path: str) -> Result:
    from hoodie.indexing.execute import (
        build_index_share,
        index_slices,
        pending_indexing_plan,
        schedule_indexing,
    )
    from hoodie.lock import FileSystemLock
    from hoodie.storage import Storage

    storage = Storage.for_uri(path)
    schedule_indexing(storage, FileSystemLock(storage), ["record_index"])
    table = Table.load(storage)
    instant, partitions = pending_indexing_plan(table, None)
    slices = index_slices(table)

    def run() -> Result:
        built = build_index_share(storage, table.config, instant.time, partitions, slices)
        return {"records": sum(len(loc.keys) for loc in built.locations), "slices": len(slices)}

    return _measured(run)


def child_logcompaction(path: str) -> Result:
    from hoodie.lock import FileSystemLock
    from hoodie.logcompaction.execute import prepare_log_compaction, run_log_compaction_task
    from hoodie.logcompaction.plan import schedule_log_compaction
    from hoodie.storage import Storage

    storage = Storage.for_uri(path)
    lock = FileSystemLock(storage)
    scheduled = schedule_log_compaction(storage, lock)
    if scheduled.instant is None:
        raise RuntimeError(f"no log compaction scheduled: {scheduled.reason}")
    (task,) = prepare_log_compaction(storage, lock).tasks

    def run() -> Result:
        result = run_log_compaction_task(task, "0-0-0")
        return {"rows": sum(s.num_writes or 0 for s in result.stats), "slices": 1}

    return _measured(run)


def run_child(args: argparse.Namespace) -> int:
    if args.child == "indexing":
        result = child_indexing(args.path)
    elif args.child == "logcompaction":
        result = child_logcompaction(args.path)
    else:
        result = child_clustering(args.path, args.child, args.files)
    print(RESULT_PREFIX + json.dumps(result))
    return 0


def spawn(variant: str, source: str, work: str, files: int) -> Result:
    copy = os.path.join(work, "run")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(source, copy)
    try:
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--child",
            variant,
            "--path",
            copy,
            "--files",
            str(files),
        ]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=7200, env=os.environ.copy())
        if out.returncode != 0:
            raise RuntimeError(f"{variant} failed:\n{out.stderr[-4000:]}")
        line = next(x for x in out.stdout.splitlines() if x.startswith(RESULT_PREFIX))
        result: Result = json.loads(line[len(RESULT_PREFIX) :])
        return result
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group-bytes", type=float, default=2e8, help="Arrow bytes of the clustering group")
    parser.add_argument("--slices", type=int, default=8, help="file slices in the group")
    parser.add_argument("--files", type=int, default=4, help="output files of the clustering")
    parser.add_argument("--only", default="clustering,indexing,logcompaction")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return run_child(args)
    only = {x.strip() for x in args.only.split(",") if x.strip()}
    import hoodie

    print(f"code under test: {os.path.dirname(hoodie.__file__)}")
    with tempfile.TemporaryDirectory(prefix="bench-cluster-mem-") as work:
        rows_out: list[tuple[str, Result, int]] = []
        if only & {"clustering", "indexing"}:
            group = os.path.join(work, "group")
            start = time.perf_counter()
            build_group_table(group, args.group_bytes, args.slices)
            largest, total, rows = largest_slice_bytes(group)
            print(
                f"group table: {args.slices} slices, {rows:,} rows, Arrow {mb(total)} "
                f"(largest slice {mb(largest)}), built in {time.perf_counter() - start:.0f} s"
            )
            if "clustering" in only:
                for variant in CLUSTERINGS:
                    rows_out.append((variant, spawn(variant, group, work, args.files), largest))
            if "indexing" in only:
                rows_out.append(
                    ("indexing (record index)", spawn("indexing", group, work, args.files), largest)
                )
            shutil.rmtree(group, ignore_errors=True)
        if "logcompaction" in only:
            logs = os.path.join(work, "logs")
            build_log_table(logs, args.group_bytes, args.slices)
            largest, _, rows = largest_slice_bytes(logs)
            result = spawn("logcompaction", logs, work, args.files)
            # The log's distinct keys at the merged row size (the rows the task holds).
            per_row = largest / max(1, rows)
            rows_out.append(("log compaction", result, int(result["rows"] * per_row)))
        print(
            f"{'task':<26}{'seconds':>9}{'peak RSS':>14}{'pool peak':>14}{'slice':>12}"
            f"{'RSS/slice':>11}{'pool/slice':>11}"
        )
        ratios = []
        for name, r, slice_bytes in rows_out:
            ratio = r["peak_bytes"] / max(1, slice_bytes)
            pool_ratio = r["pool_peak_bytes"] / max(1, slice_bytes)
            ratios.append((name, ratio))
            tasks = f"  ({r['tasks']} tasks)" if r.get("tasks", 1) > 1 else ""
            print(
                f"{name:<26}{r['seconds']:>9.1f}{mb(r['peak_bytes']):>14}{mb(r['pool_peak_bytes']):>14}"
                f"{mb(slice_bytes):>12}{ratio:>10.2f}x{pool_ratio:>10.2f}x{tasks}"
            )
        for name, ratio in ratios:
            targets.check(f"{name}: peak RSS / largest slice", ratio, TARGET)
    return 0


if __name__ == "__main__":
    sys.exit(main())
