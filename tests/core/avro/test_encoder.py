"""The column-wise Avro encoder (:mod:`hoodie.avro.encoder`) on its own: each record reads back with fastavro
and, but for decimals, has the bytes fastavro writes (decimals take Java's fewest bytes, where fastavro may
write one more); chunks cover every row once; rows that do not fit are refused naming the column. The log
blocks built on it are tested in ``tests/core/log/test_writer.py``."""

from __future__ import annotations

import io
import json
from decimal import Decimal
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from hoodie.avro.encoder import ROWS_PER_CHUNK, concat_rows, encode_avro_records, encode_record_chunks
from hoodie.errors import SchemaMismatch

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "rec",
    "namespace": "hoodie.test",
    "fields": [
        {"name": "key", "type": "string"},
        {"name": "n", "type": ["null", "long"], "default": None},
        {"name": "x", "type": "double"},
        {"name": "flag", "type": "boolean"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": ["null", {"type": "map", "values": "int"}], "default": None},
        {
            "name": "price",
            "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
        },
    ],
}


def rows(n: int) -> pa.Table:
    return pa.table(
        {
            "key": [f"k{i}" for i in range(n)],
            "n": [None if i % 7 == 0 else i - n // 2 for i in range(n)],
            "x": [i / 3 for i in range(n)],
            "flag": [i % 2 == 0 for i in range(n)],
            "tags": [[f"t{j}" for j in range(i % 3)] for i in range(n)],
            "attrs": pa.array(
                [None if i % 5 == 0 else [("a", i), ("b", -i)] for i in range(n)],
                pa.map_(pa.string(), pa.int32()),
            ),
            "price": pa.array([Decimal(i - 500) / 100 for i in range(n)], pa.decimal128(10, 2)),
        }
    )


def fastavro_bytes(table: pa.Table, schema: dict[str, Any]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for record in table.to_pylist(maps_as_pydicts="strict"):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, record)
        out.append(buf.getvalue())
    return out


def test_each_record_reads_back_and_has_the_bytes_fastavro_writes() -> None:
    table = rows(500)
    encoded = encode_avro_records(table, json.dumps(SCHEMA))
    parsed = fastavro.parse_schema(SCHEMA)
    back = [fastavro.schemaless_reader(io.BytesIO(record), parsed) for record in encoded]
    assert back == table.to_pylist(maps_as_pydicts="strict")
    no_decimal = {**SCHEMA, "fields": SCHEMA["fields"][:-1]}
    plain = table.drop_columns(["price"])
    assert encode_avro_records(plain, json.dumps(no_decimal)) == fastavro_bytes(plain, no_decimal)


def test_decimals_take_the_fewest_bytes_as_java_does() -> None:
    """Java's ``BigInteger.toByteArray``: -128 is one byte 0x80 (fastavro writes ff 80)."""
    schema = {"type": "record", "name": "r", "fields": [SCHEMA["fields"][-1]]}
    prices = pa.array(
        [Decimal("-1.28"), Decimal("1.27"), Decimal("1.28"), Decimal("0")], pa.decimal128(10, 2)
    )
    encoded = encode_avro_records(pa.table({"price": prices}), json.dumps(schema))
    assert encoded == [b"\x02\x80", b"\x02\x7f", b"\x04\x00\x80", b"\x02\x00"]


def test_chunks_cover_every_row_once_across_the_chunk_boundary() -> None:
    n = ROWS_PER_CHUNK + 3
    table = pa.table({"key": [f"k{i}" for i in range(n)], "x": [float(i) for i in range(n)]})
    schema = {"type": "record", "name": "r", "fields": [SCHEMA["fields"][0], SCHEMA["fields"][2]]}
    chunks = list(encode_record_chunks(table, json.dumps(schema)))
    assert [count for count, _ in chunks] == [ROWS_PER_CHUNK, 3]
    last = concat_rows(chunks[-1][1], 3)
    data = last.data.tobytes()
    decoded = [
        fastavro.schemaless_reader(io.BytesIO(data[last.offsets[i] : last.offsets[i + 1]]), schema)
        for i in range(3)
    ]
    assert decoded == table.slice(ROWS_PER_CHUNK).to_pylist()


def test_rows_that_do_not_fit_are_refused_naming_the_column() -> None:
    table = rows(3).set_column(2, "x", pa.array(["a", "b", "c"]))
    with pytest.raises(SchemaMismatch, match="column x"):
        encode_avro_records(table, json.dumps(SCHEMA))
    with pytest.raises(SchemaMismatch, match="column key is missing"):
        encode_avro_records(rows(3).drop_columns(["key"]), json.dumps(SCHEMA))
