"""Base file writing: ``write_base_file`` against plain ``pyarrow.parquet.write_table``, measured in one run.

    python benchmarks/bench_base_file_write.py [ROWS] [N]    # default 1 000 000 rows, 5 timed runs each

The data: ROWS rows of a trips-like table (UUID record key, 10 columns: strings of low and high cardinality,
doubles, a timestamp, an int, a boolean, a decimal) with Hudi's five meta columns already added, so both
writers write the very same columns. Per codec (gzip, Hudi's default, at parquet-mr's level 6; snappy) the
median of N runs, the writers alternating, is printed as input MB/s (Arrow in-memory bytes per second)
with the ratio ours / baseline (above 1: we are slower), against two baselines: ``write_table`` straight to
a file, and ``write_table`` to a buffer handed to ``Storage.create`` (our I/O path: a temporary file, fsync,
link). The second ratio is what the Hudi parts cost: casting to the Avro schema's types, the DYNAMIC_V0
bloom filter of the keys, the key range, the footer. Two component timings follow: adding ROWS UUID keys
to a default bloom filter, and ``add_meta_columns``.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.bloom import new_bloom_filter
from hoodie.storage import Storage
from hoodie.write.base_file import ParquetOptions, add_meta_columns, write_base_file

COMMIT = "20250101000000000"

AVRO_SCHEMA = {
    "type": "record",
    "name": "trips_record",
    "namespace": "hoodie.trips",
    "fields": [
        {"name": "uuid", "type": "string"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "rider", "type": ["null", "string"], "default": None},
        {"name": "driver", "type": ["null", "string"], "default": None},
        {"name": "city", "type": ["null", "string"], "default": None},
        {"name": "fare", "type": ["null", "double"], "default": None},
        {"name": "begin_lat", "type": ["null", "double"], "default": None},
        {"name": "passengers", "type": ["null", "int"], "default": None},
        {"name": "paid", "type": ["null", "boolean"], "default": None},
        {
            "name": "tip",
            "type": [
                "null",
                {
                    "type": "fixed",
                    "name": "fixed",
                    "size": 5,
                    "logicalType": "decimal",
                    "precision": 10,
                    "scale": 2,
                },
            ],
            "default": None,
        },
    ],
}


def make_table(rows: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    keys = [
        str(uuid.UUID(bytes=bytes(b), version=4)) for b in rng.integers(0, 256, (rows, 16), dtype=np.uint8)
    ]
    cents = rng.integers(0, 100_000, rows)
    data = pa.table(
        {
            "uuid": pa.array(keys),
            "ts": pa.array(1_700_000_000_000_000 + rng.integers(0, 10**12, rows), pa.timestamp("us", "UTC")),
            "rider": pa.array([f"rider-{i:03d}" for i in rng.integers(0, 500, rows)]),
            "driver": pa.array([f"driver-{i:05d}" for i in rng.integers(0, 20_000, rows)]),
            "city": pa.array(rng.choice(["san_francisco", "sao_paulo", "chennai", "tokyo"], rows)),
            "fare": pa.array(rng.random(rows) * 100),
            "begin_lat": pa.array(rng.random(rows) * 180 - 90),
            "passengers": pa.array(rng.integers(1, 6, rows, dtype=np.int32)),
            "paid": pa.array(rng.random(rows) < 0.9),
            "tip": pa.array([Decimal(int(c)).scaleb(-2) for c in cents], pa.decimal128(10, 2)),
        }
    )
    name = f"{uuid.uuid4()}-0_0-1-1_{COMMIT}.parquet"
    return add_meta_columns(
        data, commit_time=COMMIT, partition_path="", file_name=name, record_keys=data.column("uuid")
    )


def median_seconds(*runs: Callable[[int], None], n: int) -> list[float]:
    """Median seconds of each run, the runs alternating after one warm-up each (a busy machine slows all)."""
    for run in runs:
        run(-1)
    times: list[list[float]] = [[] for _ in runs]
    for i in range(n):
        for run, spent in zip(runs, times, strict=True):
            start = time.perf_counter()
            run(i)
            spent.append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    table = make_table(rows)
    avro = json.dumps(AVRO_SCHEMA)
    # The baseline gets the table already in the schema's types, so it does no work ours need not do.
    arrow_table = pq.read_table(pa.BufferReader(_write_once(table, avro))).replace_schema_metadata(None)
    mb = table.nbytes / 1e6
    print(f"{rows} rows, {table.num_columns} columns, {mb:.1f} MB in memory; median of {n} runs")
    with tempfile.TemporaryDirectory() as tmp:
        storage = Storage.for_uri(tmp)
        for codec in ("gzip", "snappy"):
            options = ParquetOptions(compression=codec)

            def ours(i: int, options: ParquetOptions = options, codec: str = codec) -> None:
                write_base_file(
                    storage, f"ours-{codec}-{i}.parquet", table, avro_schema=avro, options=options
                )

            def baseline(i: int, options: ParquetOptions = options, codec: str = codec) -> None:
                pq.write_table(
                    arrow_table, str(Path(tmp) / f"plain-{codec}-{i}.parquet"), **pyarrow_options(options)
                )

            def same_io(i: int, options: ParquetOptions = options, codec: str = codec) -> None:
                sink = pa.BufferOutputStream()
                pq.write_table(arrow_table, sink, **pyarrow_options(options))
                storage.create(f"io-{codec}-{i}.parquet", sink.getvalue().to_pybytes())

            t_ours, t_base, t_io = median_seconds(ours, baseline, same_io, n=n)
            size = (Path(tmp) / f"ours-{codec}-0.parquet").stat().st_size / 1e6
            print(
                f"{codec:7s} write_base_file {mb / t_ours:6.1f} MB/s ({t_ours:.3f} s, file {size:.1f} MB) | "
                f"pyarrow write_table to a file {mb / t_base:6.1f} MB/s ({t_base:.3f} s), ratio "
                f"{t_ours / t_base:.2f} | pyarrow to a buffer + Storage.create {mb / t_io:6.1f} MB/s "
                f"({t_io:.3f} s), ratio {t_ours / t_io:.2f}"
            )
    keys = table.column("_hoodie_record_key")

    def add_keys(_: int) -> None:
        new_bloom_filter().add_keys(keys)

    def add_meta(_: int) -> None:
        add_meta_columns(
            table, commit_time=COMMIT, partition_path="p", file_name="f.parquet", record_keys=keys
        )

    t_keys, t_meta = median_seconds(add_keys, add_meta, n=n)
    print(f"bloom filter (DYNAMIC_V0 defaults): add {rows} UUID keys {t_keys:.3f} s")
    print(f"add_meta_columns: {t_meta:.3f} s")


def pyarrow_options(options: ParquetOptions) -> dict[str, object]:
    return {
        "compression": options.pyarrow_compression,
        "compression_level": options.pyarrow_compression_level,
        "data_page_size": options.page_bytes,
    }


def _write_once(table: pa.Table, avro: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        write_base_file(Storage.for_uri(tmp), "x.parquet", table, avro_schema=avro, options=ParquetOptions())
        return (Path(tmp) / "x.parquet").read_bytes()


if __name__ == "__main__":
    main()
