"""Data skipping after clustering the same data linear, z-order and Hilbert on two columns.

    python benchmarks/bench_layout.py [--rows 200000] [--files 32] [--row-group-rows 2000] [--boxes 500]
                                      [--sides 0.05,0.1,0.25] [--seed 7]

The table: a non-partitioned COPY_ON_WRITE table (version 8), ROWS rows inserted in one commit, each a point
drawn uniformly in [-90, 90] x [-180, 180] and held three ways, one pair of sort columns each:

- ``lat``, ``lon``: doubles, signed (as the generated trips' ``begin_lat``/``begin_lon``);
- ``lat_e6``, ``lon_e6``: longs, micro-degrees, signed;
- ``x_e6``, ``y_e6``: longs, micro-degrees from the corner (-90, -180), never negative.

For each pair and layout, a fresh copy of the table (``shutil.copytree``) is clustered in-process
(``schedule_clustering`` with ``sort.columns`` = the pair and ``hoodie.layout.optimize.strategy``, then
``cluster_in_process``) into about FILES files (``target.file.max.bytes`` = the table's bytes / FILES),
written in row groups of about ROW_GROUP_ROWS rows (``hoodie.parquet.block.size`` from the rows' Arrow size).

Measured, for BOXES random boxes per box side (a side is that fraction of each range; boxes lie wholly within
the ranges, placed uniformly, the same boxes for every layout): the files, and the row groups, whose min/max
statistics (the Parquet footers: what the metadata table's column stats hold per file) overlap the box on
both columns, i.e. what a reader with data skipping still opens; and the rows those hold. Printed per pair,
side and layout: the mean files and row groups touched, the mean rows they hold, and each against linear's;
and the clustering time of each layout (the curve's cost; linear is the baseline of the same run). The rows
actually inside a box are the same for every layout (ROWS x side^2 expected): the floor. Nothing is asserted
here; the test suite checks correctness (``tests/core/clustering/test_layout.py``).
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.layout import LayoutConfig, LayoutStrategy
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.table_writer import TableWriter
from hoodie.write.base_file import ParquetOptions

PAIRS = {
    "doubles, signed": ("lat", "lon"),
    "longs, signed": ("lat_e6", "lon_e6"),
    "longs, >= 0": ("x_e6", "y_e6"),
}
LAYOUTS = (LayoutStrategy.LINEAR, LayoutStrategy.ZORDER, LayoutStrategy.HILBERT)


@dataclass(frozen=True)
class Unit:
    """A file or a row group: its rows and the min/max of the two columns."""

    rows: int
    lo: tuple[float, float]
    hi: tuple[float, float]


@dataclass(frozen=True)
class Layout:
    name: str
    files: list[Unit]
    row_groups: list[Unit]
    seconds: float


def build(root: Path, rows: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    lat = rng.uniform(-90, 90, rows)
    lon = rng.uniform(-180, 180, rows)
    data = pa.table(
        {
            "uuid": pa.array([f"k{i:09d}" for i in rng.permutation(rows)]),
            "ts": pa.array(np.arange(rows, dtype=np.int64)),
            "lat": pa.array(lat),
            "lon": pa.array(lon),
            "lat_e6": pa.array(np.round(lat * 1e6).astype(np.int64)),
            "lon_e6": pa.array(np.round(lon * 1e6).astype(np.int64)),
            "x_e6": pa.array(np.round((lat + 90) * 1e6).astype(np.int64)),
            "y_e6": pa.array(np.round((lon + 180) * 1e6).astype(np.int64)),
        }
    )
    writer = TableWriter.create(
        str(root),
        name="points",
        table_type="COPY_ON_WRITE",
        table_version=8,
        schema=data.schema,
        record_key_fields=("uuid",),
        ordering_field="ts",
        rng=random.Random(seed),
    )
    writer.bulk_insert(data)


def footers(root: Path, columns: tuple[str, str]) -> tuple[list[Unit], list[Unit]]:
    """The live base files of the table and their row groups, with their statistics of ``columns``."""
    files: list[Unit] = []
    groups: list[Unit] = []
    for s in Table.open(str(root)).file_slices():
        assert s.base_file_path is not None
        meta = pq.ParquetFile(root / s.base_file_path).metadata
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        idx = [names.index(c) for c in columns]
        units = []
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            st = [rg.column(i).statistics for i in idx]
            assert all(x is not None and x.has_min_max for x in st)
            units.append(Unit(rg.num_rows, (st[0].min, st[1].min), (st[0].max, st[1].max)))
        groups.extend(units)
        files.append(
            Unit(
                sum(u.rows for u in units),
                (min(u.lo[0] for u in units), min(u.lo[1] for u in units)),
                (max(u.hi[0] for u in units), max(u.hi[1] for u in units)),
            )
        )
    return files, groups


def cluster(
    source: Path, root: Path, columns: tuple[str, str], strategy: LayoutStrategy, files: int, rg_bytes: int
) -> Layout:
    shutil.copytree(source, root)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    total = sum(s.base_file_size for s in Table.open(str(root)).file_slices())
    config = ClusteringConfig(
        sort_columns=columns,
        layout=LayoutConfig(strategy),
        target_file_max_bytes=total // files + 1,
        small_file_limit=total + 1,
        max_bytes_per_group=total + 1,
        update_strategy=UpdateStrategy.ALLOW,  # no writer beside: every group
    )
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    assert scheduled.instant is not None, scheduled.reason
    t0 = time.perf_counter()
    cluster_in_process(storage, lock, parquet=ParquetOptions(row_group_bytes=rg_bytes))
    took = time.perf_counter() - t0
    f, g = footers(root, columns)
    shutil.rmtree(root)
    return Layout(strategy.value, f, g, took)


def touched(units: list[Unit], boxes: np.ndarray) -> tuple[float, float]:
    """Mean units, and mean rows in them, whose min/max rectangle overlaps a box (boxes: (n, lo/hi, 2))."""
    lo = np.array([u.lo for u in units], dtype=np.float64)
    hi = np.array([u.hi for u in units], dtype=np.float64)
    rows = np.array([u.rows for u in units])
    b_lo, b_hi = boxes[:, 0, :], boxes[:, 1, :]
    overlap = np.all((lo[None, :, :] <= b_hi[:, None, :]) & (hi[None, :, :] >= b_lo[:, None, :]), axis=2)
    return float(overlap.sum(axis=1).mean()), float((overlap * rows[None, :]).sum(axis=1).mean())


def random_boxes(
    rng: np.random.Generator, n: int, side: float, ranges: list[tuple[float, float]]
) -> np.ndarray:
    out = np.empty((n, 2, 2))
    for d, (a, b) in enumerate(ranges):
        width = (b - a) * side
        start = rng.uniform(a, b - width, n)
        out[:, 0, d] = start
        out[:, 1, d] = start + width
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--files", type=int, default=32)
    ap.add_argument("--row-group-rows", type=int, default=2_000)
    ap.add_argument("--boxes", type=int, default=500)
    ap.add_argument("--sides", default="0.05,0.1,0.25")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    sides = [float(s) for s in args.sides.split(",")]
    with tempfile.TemporaryDirectory(prefix="hoodied-bench-layout-") as tmp:
        work = Path(tmp)
        source = work / "source"
        t0 = time.perf_counter()
        build(source, args.rows, args.seed)
        whole = Table.open(str(source)).read()
        # The writer cuts row groups by the rows' Arrow size (meta columns included): aim at ROW_GROUP_ROWS.
        rg_bytes = max(1, int(whole.nbytes / args.rows * args.row_group_rows))
        print(
            f"built a v8 COW table of {args.rows} points in {time.perf_counter() - t0:.1f} s (untimed); each "
            f"layout clusters it into ~{args.files} files of ~{args.row_group_rows}-row row groups"
        )
        for label, columns in PAIRS.items():
            layouts = [
                cluster(source, work / f"{columns[0]}-{s.value}", columns, s, args.files, rg_bytes)
                for s in LAYOUTS
            ]
            linear = layouts[0]
            ranges = [
                (float(np.min(whole.column(c).to_numpy())), float(np.max(whole.column(c).to_numpy())))
                for c in columns
            ]
            print(f"\n{columns[0]}, {columns[1]} ({label})")
            for lay in layouts:
                sizes = [u.rows for u in lay.row_groups]
                print(
                    f"  {lay.name:<8} {len(lay.files):>3} files, {len(lay.row_groups):>4} row groups of "
                    f"{min(sizes)}-{max(sizes)} rows; clustered in {lay.seconds:.2f} s "
                    f"({lay.seconds / linear.seconds:.2f}x linear)"
                )
            rng = np.random.default_rng(args.seed)
            print(
                f"  {'side':>5} {'layout':<8} {'files':>7} {'/lin':>5} {'row groups':>11} {'/lin':>5} "
                f"{'rows read':>10} {'/lin':>5} {'in box':>7}"
            )
            for side in sides:
                boxes = random_boxes(rng, args.boxes, side, ranges)
                base_f = touched(linear.files, boxes)[0]
                base_g, base_rows = touched(linear.row_groups, boxes)
                for lay in layouts:
                    f_n = touched(lay.files, boxes)[0]
                    g_n, g_rows = touched(lay.row_groups, boxes)
                    print(
                        f"  {side:>5g} {lay.name:<8} {f_n:>7.2f} {f_n / base_f:>5.2f} {g_n:>11.2f} "
                        f"{g_n / base_g:>5.2f} {g_rows:>10.0f} {g_rows / base_rows:>5.2f} "
                        f"{args.rows * side * side:>7.0f}"
                    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
