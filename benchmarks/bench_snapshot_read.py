"""Snapshot read of the largest fixture tables: ``hoodie.Table`` against hudi-rs, measured in the same run.

    python benchmarks/bench_snapshot_read.py [N]      # N timed runs per reader and table (default 7)

Each run opens the table and reads the latest snapshot into a pyarrow Table (``Table.open(root).read()`` vs
hudi-rs's ``HudiTableBuilder.from_base_uri(root).build().read(...)``), after one untimed warm-up run each. The
median of N runs is printed per table with the ratio ours / hudi-rs (below 1: we are faster), and the row
counts of both, so a timing is never read without knowing whether the answers agree. hudi-rs runs in this
process; a table it panics on is reported, not fatal.

Fixtures come from ``$HOODIE_FIXTURES`` or ``<repo>/../shared/fixtures``; the zips are unzipped into a
temporary folder. A larger generated table would need a writer: not here yet.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

REPO_ROOT = Path(__file__).resolve().parent.parent

#: (zip below fixtures/tables, table root inside the zip), largest and most varied first.
TABLES = [
    ("apache-hudi/hudi_trips_cow_v8.zip", "hudi_trips_cow_v8"),  # COW v8, 40 000 rows, one file
    ("apache-hudi/hudi_stock_ticks_mor.zip", "hudi_stock_ticks_mor"),  # MOR v8, log files
    ("apache-hudi/hudi-v8-table-mor.zip", "hudi-v8-table-maintenance"),  # MOR v8, compaction, clustering
    ("apache-hudi/hudi-v6-table-mor.zip", "hudi-v6-table-mor"),  # the same history in v6
    ("hudi-rs/quickstart_trips_table_mor_avro_v8_trips_8i3u1d.zip", "v8_trips_8i3u1d"),
    ("hudi-rs/sample_table_cow_v9_txns_simple_nometa.zip", "v9_txns_simple_nometa"),
    ("hudi-rs/sample_table_mor_avro_v9_txns_simple_nometa.zip", "v9_txns_simple_nometa"),
    ("hudi-rs/sample_table_cow_v9_txns_simple_meta.zip", "v9_txns_simple_meta"),
    ("hudi-rs/sample_table_mor_avro_v9_txns_simple_meta.zip", "v9_txns_simple_meta"),
    ("hudi-rs/sample_table_mor_avro_v9_txns_nonpart_meta.zip", "v9_txns_nonpart_meta"),
]


def fixtures_dir() -> Path:
    env = os.environ.get("HOODIE_FIXTURES")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "fixtures"


def read_ours(root: str) -> pa.Table:
    from hoodie import Table

    return Table.open(root).read()


def read_hudi_rs(root: str) -> pa.Table:
    import hudi

    table = hudi.HudiTableBuilder.from_base_uri(root).build()
    batches = table.read(hudi.HudiReadOptions())
    return pa.Table.from_batches(batches) if batches else pa.table({})


@dataclass
class Timing:
    median_ms: float | None
    rows: int | None
    error: str | None = None


def measure(read: Callable[[str], pa.Table], root: str, runs: int) -> Timing:
    try:
        rows = read(root).num_rows  # warm-up: page cache, imports, thread pools
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            read(root)
            samples.append((time.perf_counter() - start) * 1000)
    except BaseException as e:  # hudi-rs panics are BaseExceptions (pyo3_runtime.PanicException)
        if isinstance(e, KeyboardInterrupt):
            raise
        return Timing(None, None, f"{type(e).__name__}: {str(e).splitlines()[0][:80] if str(e) else ''}")
    return Timing(statistics.median(samples), rows)


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 7
    os.environ.setdefault("RUST_BACKTRACE", "0")
    tables_dir = fixtures_dir() / "tables"
    if not tables_dir.is_dir():
        print(f"fixture tables not found at {tables_dir} (set HOODIE_FIXTURES)", file=sys.stderr)
        return 2
    print(f"snapshot read, median of {runs} runs (after one warm-up), open + read each run")
    header = f"{'table':50} {'rows ours':>9} {'rows rs':>9} {'ours ms':>9} {'hudi-rs ms':>10} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory(prefix="bench_snapshot_") as tmp:
        for zip_name, root_in_zip in TABLES:
            zip_path = tables_dir / zip_name
            stem = Path(zip_name).stem
            label = stem if stem.endswith(root_in_zip) else f"{stem}:{root_in_zip}"
            if not zip_path.exists():
                print(f"{label:50} (missing)")
                continue
            target = Path(tmp) / zip_name.removesuffix(".zip")
            with zipfile.ZipFile(zip_path) as zf:
                zf.extractall(target)
            root = str(target / root_in_zip)
            ours = measure(read_ours, root, runs)
            theirs = measure(read_hudi_rs, root, runs)
            ratio = (
                f"{ours.median_ms / theirs.median_ms:7.2f}"
                if ours.median_ms is not None and theirs.median_ms
                else f"{'-':>7}"
            )

            def cell(t: Timing, width: int) -> str:
                return f"{t.median_ms:{width}.1f}" if t.median_ms is not None else f"{'failed':>{width}}"

            def rows(t: Timing) -> str:
                return f"{t.rows:9d}" if t.rows is not None else f"{'-':>9}"

            flag = "" if ours.rows == theirs.rows else "   <- row counts differ"
            print(f"{label:50} {rows(ours)} {rows(theirs)} {cell(ours, 9)} {cell(theirs, 10)} {ratio}{flag}")
            for who, t in (("ours", ours), ("hudi-rs", theirs)):
                if t.error:
                    print(f"    {who} failed: {t.error}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
