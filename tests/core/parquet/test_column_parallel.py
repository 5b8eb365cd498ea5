"""The column-parallel Parquet writer writes exactly the bytes pyarrow's writer writes (so everything that
reads pyarrow's files reads ours), for every shape of schema, row-group split and thread count; and its
footer codec reads and writes Parquet footers unchanged."""

from __future__ import annotations

import io
import threading
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.parquet.column_parallel import ColumnParallelWriter, encode_threads
from hoodie.parquet.thrift_compact import (
    BINARY,
    I32,
    LIST,
    STRUCT,
    Struct,
    ThriftError,
    ThriftList,
    read_struct,
    write_struct,
)

OPTIONS: dict[str, Any] = {
    "version": "2.6",
    "compression": "gzip",
    "compression_level": 6,
    "use_dictionary": True,
    "write_statistics": True,
    "use_compliant_nested_type": True,
    "store_schema": False,
    "write_time_adjusted_to_utc": True,
    "write_page_checksum": True,
    "data_page_size": 64 * 1024,
}


def _table(n: int, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "key": pa.array([f"key-{i:09d}" for i in range(n)]),
            "point": pa.StructArray.from_arrays(
                [pa.array(rng.random(n)), pa.array(rng.integers(0, 100, n), pa.int32())], ["x", "y"]
            ),
            "tags": pa.array([[i, i + 1] if i % 3 else None for i in range(n)], pa.list_(pa.int64())),
            "fare": pa.array(rng.random(n)),
            "city": pa.array(rng.choice(["sf", "nyc", "sao paulo", None], n)),
            "props": pa.array(
                [{"a": i} if i % 5 else None for i in range(n)], pa.map_(pa.string(), pa.int64())
            ),
            "ts": pa.array(rng.integers(0, 2**40, n), pa.timestamp("us", tz="UTC")),
            "flag": pa.array(rng.random(n) < 0.5),
            "amount": pa.array([None if i % 7 == 0 else i for i in range(n)], pa.decimal128(10, 2)),
        }
    )


def _pyarrow_bytes(tables: list[pa.Table], row_group_size: int, key_values: dict[str, str]) -> bytes:
    out = io.BytesIO()
    with pq.ParquetWriter(out, tables[0].schema, **OPTIONS) as writer:
        for table in tables:
            writer.write_table(table, row_group_size=row_group_size)
        if key_values:
            writer.add_key_value_metadata(key_values)
    return out.getvalue()


def _our_bytes(
    tables: list[pa.Table], row_group_size: int, key_values: dict[str, str], threads: int
) -> bytes:
    out = io.BytesIO()
    with ColumnParallelWriter(out, tables[0].schema, threads=threads, **OPTIONS) as writer:
        for table in tables:
            writer.write_table(table, row_group_size=row_group_size)
        if key_values:
            writer.add_key_value_metadata(key_values)
    return out.getvalue()


@pytest.mark.parametrize("threads", [1, 2, 3, 16])
@pytest.mark.parametrize("row_group_size", [2**31 - 1, 5_000, 4_099])
def test_same_bytes_as_pyarrow(threads: int, row_group_size: int) -> None:
    first = _table(20_000)
    tables = [first, *(_table(n, seed).cast(first.schema) for n, seed in ((0, 1), (17, 2), (9_000, 3)))]
    key_values = {"parquet.avro.schema": '{"type": "record"}', "big": "v" * 5000}
    ours = _our_bytes(tables, row_group_size, key_values, threads)
    assert ours == _pyarrow_bytes(tables, row_group_size, key_values)
    read = pq.read_table(io.BytesIO(ours))
    assert read.equals(pa.concat_tables(tables))
    metadata = pq.read_metadata(io.BytesIO(ours))
    assert metadata.metadata[b"big"] == b"v" * 5000


def test_empty_file_and_one_column() -> None:
    schema = pa.schema([("only", pa.string())])
    assert _our_bytes([schema.empty_table()], 10, {}, 2) == _pyarrow_bytes([schema.empty_table()], 10, {})
    one = pa.table({"only": ["a", "b", None]})
    assert _our_bytes([one], 10, {"k": "v"}, 4) == _pyarrow_bytes([one], 10, {"k": "v"})


def test_encodes_on_several_threads() -> None:
    """The parts of a row group are encoded on the pool's threads, not on the caller's."""
    seen: set[str] = set()
    table = _table(30_000)

    class Sink(io.BytesIO):
        def write(self, data: Any) -> int:
            seen.add(threading.current_thread().name)
            return super().write(data)

    sink = Sink()
    writer = ColumnParallelWriter(sink, table.schema, threads=2, **OPTIONS)
    threads_before = {t.name for t in threading.enumerate()}
    with writer:
        writer.write_table(table, row_group_size=10_000)
        encoders = {t.name for t in threading.enumerate()} - threads_before
    assert len([name for name in encoders if name.startswith("hoodie-encode")]) == 2
    assert seen == {threading.current_thread().name}  # the sink is written by the caller only


def test_schema_mismatch_and_error_leaves_no_footer() -> None:
    table = _table(100)
    sink = io.BytesIO()
    writer = ColumnParallelWriter(sink, table.schema, threads=2, **OPTIONS)
    with pytest.raises(ValueError, match="schema differs"), writer:
        writer.write_table(table.drop_columns(["fare"]), row_group_size=10)
    assert sink.getvalue() == b"PAR1"  # no footer: not a Parquet file a reader could take for complete
    with pytest.raises(ValueError, match="threads"):
        ColumnParallelWriter(io.BytesIO(), table.schema, threads=0, **OPTIONS)


def test_encode_threads() -> None:
    assert encode_threads(3) == 3
    assert 1 <= encode_threads(0) <= 4


# -- the footer codec --------------------------------------------------------------------------------------


def _footer(data: bytes) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    return data[len(data) - 8 - length : len(data) - 8]


def test_footer_round_trip() -> None:
    data = _pyarrow_bytes([_table(3_000)], 1_000, {"k": "v"})
    footer = _footer(data)
    assert write_struct(read_struct(footer)) == footer


def test_struct_edits_keep_field_order_and_long_ids() -> None:
    value = Struct()
    value.set(40, I32, -7)  # an id jump above 15: the long field header
    value.set(1, BINARY, b"x")
    value.set(3, LIST, ThriftList(STRUCT, [Struct([(1, I32, i)]) for i in range(20)]))  # a long list header
    value.set(2, 1, True)
    assert [fid for fid, _, _ in value.fields] == [1, 2, 3, 40]
    again = read_struct(write_struct(value))
    assert again == value
    assert again.int(40) == -7
    assert [s.int(1) for s in again.structs(3)] == list(range(20))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x15", "truncated"),  # an i32 field, no value
        (b"\x18\x05ab", "truncated"),  # a 5-byte binary with 2 bytes
        (b"\x1b\x00", "not one a Parquet footer holds"),  # a map
        (b"\x15\x02\x00\x00", "after the struct"),
        (b"\x16" + b"\xff" * 11, "longer than 64 bits"),
    ],
)
def test_damaged_footers_are_refused(data: bytes, message: str) -> None:
    with pytest.raises(ThriftError, match=message):
        read_struct(data)
