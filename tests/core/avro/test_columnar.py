"""The column-at-a-time Avro decoder agrees with fastavro's record-by-record decoding on every supported
field kind (nulls, extremes, unicode, decimals of either sign, enums), falls back on what it does not support,
and never accepts malformed bytes: they go to the record-by-record decoder, which names the bad record."""

from __future__ import annotations

import decimal
import io
import json
import pathlib
import random
import struct
from typing import Any

import fastavro
import numpy as np
import pytest

from hoodie.avro.columnar import decode_columnar
from hoodie.schema import compile_avro_schema

SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "r",
    "fields": [
        {"name": "s", "type": "string"},
        {"name": "ns", "type": ["null", "string"]},
        {"name": "sn", "type": ["string", "null"]},
        {"name": "i", "type": "int"},
        {"name": "ni", "type": ["null", "int"]},
        {"name": "l", "type": "long"},
        {"name": "nl", "type": ["null", "long"]},
        {"name": "f", "type": "float"},
        {"name": "d", "type": ["null", "double"]},
        {"name": "b", "type": "boolean"},
        {"name": "nb", "type": ["null", "boolean"]},
        {"name": "by", "type": ["null", "bytes"]},
        {"name": "fx", "type": {"type": "fixed", "name": "f4", "size": 4}},
        {
            "name": "dec",
            "type": [
                "null",
                {
                    "type": "fixed",
                    "name": "d5",
                    "size": 5,
                    "logicalType": "decimal",
                    "precision": 10,
                    "scale": 2,
                },
            ],
        },
        {"name": "decb", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}},
        {
            "name": "e",
            "type": ["null", {"type": "enum", "name": "color", "symbols": ["RED", "GREEN", "BLUE"]}],
        },
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "dt", "type": {"type": "int", "logicalType": "date"}},
        {"name": "nothing", "type": "null"},
    ],
}


def _record(rng: random.Random, i: int) -> dict[str, Any]:
    maybe = lambda v: None if rng.random() < 0.3 else v  # noqa: E731
    return {
        "s": rng.choice(["", "a", "héllo wörld ✓", "x" * 300, f"key-{i}"]),
        "ns": maybe(f"n{i}"),
        "sn": maybe("ü" * (i % 7)),
        "i": rng.choice([0, -1, 1, 2**31 - 1, -(2**31), rng.randint(-1000, 1000)]),
        "ni": maybe(rng.randint(-(2**31), 2**31 - 1)),
        "l": rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-(2**40), 2**40)]),
        "nl": maybe(rng.randint(-(2**62), 2**62)),
        "f": rng.choice([0.0, -1.5, 3.25, float("inf")]),
        "d": maybe(rng.uniform(-1e300, 1e300)),
        "b": rng.random() < 0.5,
        "nb": maybe(rng.random() < 0.5),
        "by": maybe(bytes(rng.randrange(256) for _ in range(i % 9))),
        "fx": bytes(rng.randrange(256) for _ in range(4)),
        "dec": maybe(decimal.Decimal(rng.randint(-(10**9), 10**9)).scaleb(-2)),
        "decb": decimal.Decimal(rng.randint(-(10**19), 10**19)).scaleb(-4),
        "e": maybe(rng.choice(["RED", "GREEN", "BLUE"])),
        "ts": maybe(rng.randint(0, 2**50)),
        "dt": rng.randint(-20000, 20000),
        "nothing": None,
    }


def _content(schema: dict[str, Any], records: list[dict[str, Any]]) -> tuple[bytes, np.ndarray, np.ndarray]:
    """Records as a Hudi Avro block's content (version, count, then each record behind its length)."""
    parsed = fastavro.parse_schema(schema)
    out = io.BytesIO()
    out.write(struct.pack(">ii", 2, len(records)))
    starts, ends = [], []
    for r in records:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, r)
        data = buf.getvalue()
        out.write(struct.pack(">i", len(data)))
        starts.append(out.tell())
        out.write(data)
        ends.append(out.tell())
    return out.getvalue(), np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64)


def _record_by_record(schema: dict[str, Any], content: bytes, starts: np.ndarray) -> Any:
    compiled = compile_avro_schema(json.dumps(schema))
    stream = io.BytesIO(content)
    records = []
    for s in starts:
        stream.seek(int(s))
        records.append(fastavro.schemaless_reader(stream, compiled.decode_schema))
    return compiled.to_table(records)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_agrees_with_record_by_record_decoding(seed: int) -> None:
    rng = random.Random(seed)
    records = [_record(rng, i) for i in range(500)]
    content, starts, ends = _content(SCHEMA, records)
    fast = decode_columnar(content, starts, ends, compile_avro_schema(json.dumps(SCHEMA)))
    assert fast is not None, "the schema is supported: the columnar decoder must take it"
    slow = _record_by_record(SCHEMA, content, starts)
    assert fast.schema == slow.schema
    for name in slow.column_names:
        assert fast.column(name).equals(slow.column(name)), name


def test_no_records_and_all_null_columns() -> None:
    content, starts, ends = _content(SCHEMA, [])
    compiled = compile_avro_schema(json.dumps(SCHEMA))
    empty = decode_columnar(content, starts, ends, compiled)
    assert empty is not None
    assert empty.num_rows == 0
    assert empty.schema == compiled.arrow_schema
    rng = random.Random(9)
    records = [{**_record(rng, i), "ns": None, "nl": None, "dec": None} for i in range(20)]
    content, starts, ends = _content(SCHEMA, records)
    table = decode_columnar(content, starts, ends, compiled)
    assert table is not None
    assert table.column("ns").null_count == 20
    assert table.column("dec").null_count == 20


def test_unsupported_shapes_fall_back() -> None:
    for field_type in (
        {"type": "array", "items": "int"},
        {"type": "map", "values": "string"},
        ["null", "int", "long"],
        {"type": "record", "name": "inner", "fields": [{"name": "x", "type": "int"}]},
    ):
        schema = {"type": "record", "name": "r", "fields": [{"name": "x", "type": field_type}]}
        compiled = compile_avro_schema(json.dumps(schema))
        value: Any = {"x": 1} if isinstance(field_type, dict) and field_type["type"] == "record" else None
        if isinstance(field_type, dict) and field_type["type"] == "array":
            value = [1, 2]
        elif isinstance(field_type, dict) and field_type["type"] == "map":
            value = {"a": "b"}
        elif isinstance(field_type, list):
            value = 5
        content, starts, ends = _content(schema, [{"x": value}])
        assert decode_columnar(content, starts, ends, compiled) is None, field_type


@pytest.mark.parametrize(
    "damage",
    ["truncate-record", "extra-byte", "bad-union", "bad-boolean", "bad-enum", "long-string", "bad-utf8"],
)
def test_malformed_bytes_are_never_accepted(damage: str) -> None:
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "s", "type": ["null", "string"]},
            {"name": "b", "type": "boolean"},
            {"name": "e", "type": {"type": "enum", "name": "c", "symbols": ["A", "B"]}},
        ],
    }
    content, starts, ends = _content(schema, [{"s": "abc", "b": True, "e": "B"}] * 3)
    raw = bytearray(content)
    first = int(starts[1])
    if damage == "truncate-record":
        ends = ends.copy()
        ends[1] -= 1
    elif damage == "extra-byte":
        ends = ends.copy()
        ends[1] += 1
    elif damage == "bad-union":
        raw[first] = 0x08  # branch 4 of a 2-branch union
    elif damage == "bad-boolean":
        raw[first + 5] = 7
    elif damage == "bad-enum":
        raw[first + 6] = 0x0A  # symbol 5 of 2
    elif damage == "long-string":
        raw[first + 1] = 0x7E  # length 63, past the record
    elif damage == "bad-utf8":
        raw[first + 2] = 0xFF
    compiled = compile_avro_schema(json.dumps(schema))
    assert decode_columnar(bytes(raw), starts, ends, compiled) is None


def test_every_avro_block_of_the_fixtures_decodes_the_same_both_ways(
    fixture_cache: Any, fixture_tables: Any
) -> None:
    import hoodie.log.block as block_module
    from hoodie.log.block import BlockType, decode_data_block, iter_blocks

    compared = columnar = 0
    original = block_module.decode_columnar

    def counting(*args: Any) -> Any:
        nonlocal columnar
        result = original(*args)
        columnar += result is not None
        return result

    for table in fixture_tables:
        if table.refusal:
            continue
        root = pathlib.Path(fixture_cache.root(table))
        for path in sorted(root.rglob(".*.log.*")):
            if ".hoodie" in path.relative_to(root).parts:
                continue
            for block in iter_blocks(path.read_bytes()):
                if isinstance(block, str) or block.block_type is not BlockType.AVRO_DATA:
                    continue
                block_module.decode_columnar = counting
                try:
                    fast = decode_data_block(block)
                finally:
                    block_module.decode_columnar = lambda *a: None
                try:
                    slow = decode_data_block(block)
                finally:
                    block_module.decode_columnar = original
                assert fast.equals(slow), f"{path} at {block.offset}"
                compared += 1
    assert compared >= 100
    assert columnar >= compared - 5, f"only {columnar} of {compared} blocks took the columnar path"
