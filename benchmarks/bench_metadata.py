"""What the metadata table costs and buys: its build, its upkeep on every commit, and listing through it.

    python benchmarks/bench_metadata.py [--rows 200000] [--partitions 20] [--commits 8] [--repeat 5]

Builds a MOR v8 table (ROWS rows over PARTITIONS partitions, COMMITS commits; untimed), then measures, median
of REPEAT runs where it repeats:

- **indexing**: creating the metadata table and building column_stats + record_index (every live key) in
  one process, against the baseline of reading the same table's snapshot with pyarrow-backed ``Table.read``
  (the build reads every slice once; the ratio says what the index writing adds);
- **listing**: the file listing through the metadata table (``MetadataTable.file_listing``) against a
  recursive listing of storage with the committed-file filter (``storage_listing``), and hudi-rs's
  ``get_file_slices`` (which lists through the metadata table);
- **commit upkeep**: a compaction of the whole table with the metadata table against the same compaction
  on a copy without one (the difference is the deltacommit: statistics of every new base file, the files
  records).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.indexing.execute import run_indexing, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.metadata import MetadataTable
from hoodie.metadata.reader import storage_listing
from hoodie.metadata_table import delete_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, generate_table


def timed(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--commits", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-metadata-"))
    try:
        source = work / "source"
        spec = GenerateSpec(
            table_version=8,
            rows=args.rows,
            commits=args.commits,
            partitions=args.partitions,
            update_fraction=0.3,
            delete_fraction=0.02,
            seed=1,
        )
        generate_table(str(source), spec)
        table = Table.open(str(source))
        files = sum(len(v) for v in storage_listing(table.storage, table.timeline).values())
        print(f"table: {args.rows} rows, {args.partitions} partitions, {args.commits} commits, {files} files")

        # -- indexing ------------------------------------------------------------------------------------
        build_times, read_times = [], []
        indexed = work / "indexed"
        for _ in range(max(1, args.repeat // 2)):
            shutil.rmtree(indexed, ignore_errors=True)
            shutil.copytree(source, indexed)
            storage = Storage.for_uri(str(indexed))
            lock = FileSystemLock(storage)
            start = time.perf_counter()
            schedule_indexing(storage, lock, ["column_stats", "record_index"])
            result = run_indexing(storage, lock)
            build_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            rows = Table.open(str(indexed)).read()
            read_times.append(time.perf_counter() - start)
        build, read = statistics.median(build_times), statistics.median(read_times)
        print(
            f"indexing (files + column_stats + record_index, {result.records} records): {build:.2f} s, "
            f"{result.records / build:,.0f} records/s; snapshot read baseline {read:.2f} s "
            f"({rows.num_rows} rows); ratio {build / read:.2f}"
        )

        # -- listing -------------------------------------------------------------------------------------
        storage = Storage.for_uri(str(indexed))

        def through_mdt() -> object:
            t = Table.open(str(indexed))
            return MetadataTable.load(t.storage, t.config, t.timeline).file_listing()

        def through_storage() -> object:
            t = Table.open(str(indexed))
            return storage_listing(t.storage, t.timeline)

        mdt_s = timed(through_mdt, args.repeat)
        fs_s = timed(through_storage, args.repeat)
        line = f"listing: metadata table {mdt_s * 1000:.1f} ms, storage {fs_s * 1000:.1f} ms "
        line += f"(ratio {mdt_s / fs_s:.2f})"
        try:
            import hudi

            def hudi_rs() -> object:
                return hudi.HudiTableBuilder.from_base_uri(str(indexed)).build().get_file_slices()

            rs_s = timed(hudi_rs, args.repeat)
            line += f", hudi-rs get_file_slices {rs_s * 1000:.1f} ms (ratio ours/hudi-rs {mdt_s / rs_s:.2f})"
        except Exception as e:  # hudi-rs absent or failing: say so, the rest stands
            line += f", hudi-rs not measured ({type(e).__name__}: {e})"
        print(line)

        # -- commit upkeep -------------------------------------------------------------------------------
        with_mdt, without = [], []
        for _ in range(max(1, args.repeat // 2)):
            for target, keep in ((work / "with", True), (work / "without", False)):
                shutil.rmtree(target, ignore_errors=True)
                shutil.copytree(indexed, target)
                s = Storage.for_uri(str(target))
                lock = FileSystemLock(s)
                if not keep:
                    delete_metadata_table(s, lock)
                schedule_compaction(s, lock, config=CompactionConfig(strategy=Strategy.UNBOUNDED))
                start = time.perf_counter()
                compact_in_process(s, lock)
                (with_mdt if keep else without).append(time.perf_counter() - start)
        a, b = statistics.median(with_mdt), statistics.median(without)
        print(
            f"compaction of every slice: with the metadata table {a:.2f} s, without {b:.2f} s "
            f"(ratio {a / b:.2f}, upkeep {a - b:.2f} s)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
