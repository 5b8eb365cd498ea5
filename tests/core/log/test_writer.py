from __future__ import annotations

import datetime as dt
import io
import json
import re
import struct
import threading
import zipfile
from collections import Counter
from collections.abc import Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.errors import FileAlreadyExists, InvalidFileName, InvalidInstant, SchemaMismatch, UnsupportedTable
from hoodie.log.block import (
    DELETE_RECORD_LIST_SCHEMAS,
    MAGIC,
    BlockType,
    HeaderKey,
    LogBlock,
    decode_data_block,
    decode_delete_block,
    iter_blocks,
)
from hoodie.log.log_file import LogFile
from hoodie.log.reader import LogScan, scan_log_files
from hoodie.log.writer import (
    MAX_LOG_FILE_BYTES,
    WrittenLogFile,
    encode_avro_data_block,
    encode_delete_block,
    encode_parquet_data_block,
    encode_rollback_command_block,
    frame_block,
    write_log_file,
)
from hoodie.schema import avro_to_arrow_schema, compile_avro_schema
from hoodie.storage import Storage
from hoodie.storage.local import LocalBackend

T1 = "20240101000000000"
T2 = "20240102000000000"
T3 = "20240103000000000"
FILE_ID = "8d1c6a1e-1d2b-4f9e-9c59-1a2b3c4d5e6f-0"
TOKEN = "0-1-2"


def everything(_: str) -> bool:
    return True


def only_block(data: bytes) -> LogBlock:
    blocks = list(iter_blocks(data))
    assert len(blocks) == 1, blocks
    return blocks[0]


def header_bytes(block_bytes: bytes) -> bytes:
    """Format version, type and the header map of a block, as written."""
    (count,) = struct.unpack_from(">i", block_bytes, 22)
    pos = 26
    for _ in range(count):
        _, length = struct.unpack_from(">ii", block_bytes, pos)
        pos += 8 + length
    return block_bytes[14:pos]


def reencode(block: LogBlock, *, table_version: int) -> bytes:
    """``block`` decoded and encoded again with our encoders, from its own header values in its own order."""
    order = list(block.header)
    extra = {k: v for k, v in block.header.items() if k not in (HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA)}
    instant = block.instant_time or ""
    if block.block_type is BlockType.AVRO_DATA:
        assert block.schema is not None
        if block.instant_time is None:  # archived timeline blocks carry only the schema
            content = only_block(
                encode_avro_data_block(decode_data_block(block), block.schema, instant_time=T1)
            )
            return frame_block(BlockType.AVRO_DATA, dict(block.header), content.content)
        return encode_avro_data_block(
            decode_data_block(block),
            block.schema,
            instant_time=instant,
            extra_headers=extra,
            header_order=order,
        )
    if block.block_type is BlockType.PARQUET_DATA:
        assert block.schema is not None
        return encode_parquet_data_block(
            decode_data_block(block),
            block.schema,
            instant_time=instant,
            extra_headers=extra,
            header_order=order,
        )
    if block.block_type is BlockType.DELETE:
        deleted = decode_delete_block(block)
        if block.schema is not None:
            extra[HeaderKey.SCHEMA] = block.schema
        return encode_delete_block(
            deleted.column("_hoodie_record_key"),
            deleted.column("_hoodie_partition_path"),
            deleted.column("ordering_value"),
            instant_time=instant,
            table_version=table_version,
            extra_headers=extra,
            header_order=order,
        )
    if block.block_type is BlockType.COMMAND:
        assert block.command_type == "0"
        assert block.target_instant_time is not None
        return encode_rollback_command_block(
            instant_time=instant, target_instant_time=block.target_instant_time, header_order=order
        )
    raise AssertionError(f"no encoder for {block.describe()}")


def storage_at(path: Path) -> Storage:
    return Storage.for_uri(str(path))


def scan(storage: Storage, written: Sequence[WrittenLogFile]) -> LogScan:
    ordered = sorted(written, key=lambda w: w.log_file.sort_key)
    return scan_log_files(storage, [w.path for w in ordered], include_instant=everything)


# -- framing -------------------------------------------------------------------------------------------------


def test_frame_block_writes_the_grammar() -> None:
    block = frame_block(BlockType.AVRO_DATA, {HeaderKey.SCHEMA: "s", HeaderKey.INSTANT_TIME: T1}, b"abc")
    body = (
        struct.pack(">ii", 1, 3)
        + struct.pack(">i", 2)
        + struct.pack(">ii", 2, 1)
        + b"s"
        + struct.pack(">ii", 0, 17)
        + T1.encode()
        + struct.pack(">q", 3)
        + b"abc"
        + struct.pack(">i", 0)
    )
    assert block == MAGIC + struct.pack(">q", len(body) + 8) + body + struct.pack(">q", 6 + 8 + len(body))
    parsed = only_block(block)
    assert (parsed.block_type, parsed.content, parsed.length) == (BlockType.AVRO_DATA, b"abc", len(block))
    assert list(parsed.header.items()) == [(HeaderKey.SCHEMA, "s"), (HeaderKey.INSTANT_TIME, T1)]


def test_header_values_are_utf8_and_unknown_keys_are_refused() -> None:
    block = only_block(frame_block(BlockType.COMMAND, {HeaderKey.INSTANT_TIME: "ünïcödé"}, b""))
    assert block.instant_time == "ünïcödé"
    with pytest.raises(ValueError, match="99"):
        frame_block(BlockType.COMMAND, {99: "x"}, b"")


def test_encoders_write_header_keys_in_ascending_order_unless_told() -> None:
    rollback = only_block(encode_rollback_command_block(instant_time=T2, target_instant_time=T1))
    assert list(rollback.header) == [
        HeaderKey.INSTANT_TIME,
        HeaderKey.TARGET_INSTANT_TIME,
        HeaderKey.COMMAND_BLOCK_TYPE,
    ]
    assert (rollback.instant_time, rollback.target_instant_time, rollback.command_type) == (T2, T1, "0")
    assert rollback.content == b""
    order = [HeaderKey.INSTANT_TIME, HeaderKey.COMMAND_BLOCK_TYPE, HeaderKey.TARGET_INSTANT_TIME]
    as_hudi = only_block(
        encode_rollback_command_block(instant_time=T2, target_instant_time=T1, header_order=order)
    )
    assert list(as_hudi.header) == order


def test_extra_headers_are_checked(simple_schema: dict[str, Any]) -> None:
    schema = json.dumps(simple_schema)
    rows = pa.table({"value": pa.array([1], pa.int64())})
    block = only_block(
        encode_avro_data_block(
            rows,
            schema,
            instant_time=T1,
            extra_headers={HeaderKey.BLOCK_IDENTIFIER: "0,0", HeaderKey.IS_PARTIAL: "false"},
        )
    )
    assert list(block.header) == [
        HeaderKey.INSTANT_TIME,
        HeaderKey.SCHEMA,
        HeaderKey.BLOCK_IDENTIFIER,
        HeaderKey.IS_PARTIAL,
    ]
    with pytest.raises(ValueError, match="INSTANT_TIME is set by the encoder"):
        encode_avro_data_block(rows, schema, instant_time=T1, extra_headers={HeaderKey.INSTANT_TIME: T2})
    with pytest.raises(ValueError, match="not a log block header key"):
        encode_avro_data_block(rows, schema, instant_time=T1, extra_headers={42: "x"})
    with pytest.raises(ValueError, match="header_order must list each header key once"):
        encode_avro_data_block(rows, schema, instant_time=T1, header_order=[HeaderKey.SCHEMA])
    with pytest.raises(InvalidInstant):
        encode_avro_data_block(rows, schema, instant_time="not-a-time")


# -- byte-identical re-encoding of Hudi's own blocks ---------------------------------------------------------


@pytest.mark.parametrize("vector", ["avro", "delete", "rollback"])
def test_the_log_vectors_reencode_byte_for_byte(vectors: Any, vector: str) -> None:
    data = getattr(vectors, vector).read_bytes()
    blocks = list(iter_blocks(data))
    assert blocks
    assert b"".join(reencode(b, table_version=6) for b in blocks) == data


def test_the_parquet_vector_reencodes_with_the_same_framing_and_rows(vectors: Any) -> None:
    data = vectors.parquet.read_bytes()
    block = only_block(data)
    again = reencode(block, table_version=6)
    assert header_bytes(again) == header_bytes(data)
    new = only_block(again)
    assert dict(new.footer) == {}
    assert decode_data_block(new).equals(decode_data_block(block))


_LOG_NAME = re.compile(r"\..+\.(log|archive)\.\d+(_\d+-\d+-\d+(\.cdc)?)?")
_VERSION = re.compile(r"^hoodie\.table\.version\s*[=:]\s*(\d+)\s*$", re.M)


def fixture_log_files(fixtures_root: Path) -> Iterator[tuple[str, int, bytes]]:
    """(name, table version, bytes) of every log file (data tables, metadata tables, v6 archived timelines)
    in every fixture zip whose table version we support."""
    for archive in sorted((fixtures_root / "tables").rglob("*.zip")):
        with zipfile.ZipFile(archive) as z:
            names = [n for n in z.namelist() if "__MACOSX" not in n]
            versions = {}
            for n in names:
                if n.endswith(".hoodie/hoodie.properties"):
                    m = _VERSION.search(z.read(n).decode("utf-8", "replace"))
                    versions[n[: -len(".hoodie/hoodie.properties")]] = int(m.group(1)) if m else 0
            for n in names:
                if not _LOG_NAME.fullmatch(n.rsplit("/", 1)[-1]):
                    continue
                root = max((r for r in versions if n.startswith(r)), key=len, default=None)
                if root is not None and versions[root] in (6, 8, 9):
                    yield f"{archive.name}:{n}", versions[root], z.read(n)


def test_every_block_of_the_fixture_tables_reencodes_byte_for_byte(fixtures_root: Path) -> None:
    """The compatibility check: every Avro data, delete and rollback block Hudi wrote in the fixture tables
    (table versions 6, 8, 9), decoded and encoded again from its own header values, gives the same bytes.
    Parquet blocks give the same framing and header bytes and the same rows (the Parquet bytes are another
    writer's). HFile blocks (metadata table) are not ours to write."""
    seen: Counter[str] = Counter()
    for name, version, data in fixture_log_files(fixtures_root):
        for block in iter_blocks(data):
            original = data[block.offset : block.end]
            kind = block.block_type
            if kind is BlockType.HFILE_DATA:
                seen["hfile (skipped)"] += 1
                continue
            if not re.fullmatch(r"\d{14}(\d{3})?", block.instant_time or T1):
                seen["metadata-table instant with a suffix (skipped)"] += 1
                continue
            if kind is BlockType.AVRO_DATA and struct.unpack_from(">i", block.content)[0] != 3:
                seen["avro content version < 3 (skipped)"] += 1
                continue
            again = reencode(block, table_version=version)
            if kind is BlockType.PARQUET_DATA:
                assert header_bytes(again) == header_bytes(original), name
                assert decode_data_block(only_block(again)).equals(decode_data_block(block)), name
            else:
                assert again == original, f"{name}: {block.describe()}"
            seen[kind.name] += 1
    assert seen["AVRO_DATA"] >= 100, seen
    assert seen["DELETE"] >= 500, seen
    assert seen["COMMAND"] >= 1, seen
    assert seen["PARQUET_DATA"] >= 10, seen


# -- Avro data blocks: many types, round trips ---------------------------------------------------------------

MANY_TYPES: dict[str, Any] = {
    "type": "record",
    "name": "many",
    "namespace": "hoodie.test",
    "fields": [
        {"name": "_hoodie_record_key", "type": ["null", "string"], "default": None},
        {"name": "b", "type": "boolean"},
        {"name": "i", "type": "int"},
        {"name": "l", "type": ["null", "long"], "default": None},
        {"name": "f", "type": ["float", "null"]},
        {"name": "d", "type": ["null", "double"], "default": None},
        {"name": "s", "type": ["null", "string"], "default": None},
        {"name": "by", "type": ["null", "bytes"], "default": None},
        {
            "name": "e",
            "type": ["null", {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}],
        },
        {"name": "fx", "type": {"type": "fixed", "name": "Four", "size": 4}},
        {
            "name": "dec_b",
            "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 4}],
        },
        {
            "name": "dec_f",
            "type": [
                "null",
                {
                    "type": "fixed",
                    "name": "Dec9",
                    "size": 9,
                    "logicalType": "decimal",
                    "precision": 20,
                    "scale": 2,
                },
            ],
        },
        {"name": "wide", "type": {"type": "bytes", "logicalType": "decimal", "precision": 50, "scale": 5}},
        {"name": "date", "type": ["null", {"type": "int", "logicalType": "date"}]},
        {"name": "tmil", "type": ["null", {"type": "int", "logicalType": "time-millis"}]},
        {"name": "tmic", "type": ["null", {"type": "long", "logicalType": "time-micros"}]},
        {"name": "tsm", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}]},
        {"name": "tsu", "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}]},
        {"name": "lts", "type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]},
        {"name": "uuid", "type": ["null", {"type": "string", "logicalType": "uuid"}]},
        {
            "name": "rec",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Inner",
                    "fields": [
                        {"name": "x", "type": "long"},
                        {"name": "y", "type": ["null", "string"]},
                        {"name": "color", "type": "Color"},
                    ],
                },
            ],
        },
        {"name": "rec2", "type": "Inner"},
        {"name": "ints", "type": ["null", {"type": "array", "items": ["null", "int"]}]},
        {"name": "recs", "type": {"type": "array", "items": "Inner"}},
        {"name": "m", "type": ["null", {"type": "map", "values": ["null", "double"]}]},
        {"name": "mm", "type": {"type": "map", "values": {"type": "array", "items": "string"}}},
        {"name": "nothing", "type": "null"},
        {"name": "num", "type": ["null", "int", "long"]},
    ],
}


def many_rows(n: int) -> pa.Table:
    """Rows of MANY_TYPES with nulls, extremes, empty strings, lists and maps, cycling through cases."""
    rng = np.random.default_rng(7)
    utc = dt.UTC
    longs = [0, 1, -1, 63, -64, 64, 2**31 - 1, -(2**31), 2**62, 2**63 - 1, -(2**63)]
    rows = []
    for k in range(n):
        inner = {"x": longs[k % len(longs)], "y": None if k % 3 else f"y{k}", "color": ["RED", "BLUE"][k % 2]}
        rows.append(
            {
                "_hoodie_record_key": None if k % 11 == 5 else f"key-{k}",
                "b": k % 2 == 0,
                "i": [0, -1, 2**31 - 1, -(2**31), 300][k % 5],
                "l": None if k % 4 == 3 else longs[k % len(longs)],
                "f": None if k % 5 == 4 else float(rng.standard_normal()),
                "d": None if k % 6 == 5 else [0.0, -0.0, float("inf"), 1e308, float(rng.random())][k % 5],
                "s": None if k % 7 == 6 else ["", "é€𝄞", "x" * 200, f"s{k}"][k % 4],
                "by": None if k % 5 == 0 else bytes(range(k % 7)),
                "e": None if k % 4 == 0 else ["RED", "GREEN", "BLUE"][k % 3],
                "fx": bytes([k % 256, 1, 2, 3]),
                "dec_b": None if k % 9 == 8 else Decimal(k * 37 - 900) / Decimal(10000),
                "dec_f": None if k % 8 == 7 else Decimal(-(10**17) + k * 12345) / 100,
                "wide": Decimal(10**44 * (-1) ** k + k) / Decimal(10**5),
                "date": None if k % 3 == 2 else dt.date(1969, 12, 31) + dt.timedelta(days=k * 97),
                "tmil": None if k % 3 == 1 else dt.time(k % 24, k % 60, 1, (k % 1000) * 1000),
                "tmic": None if k % 5 == 1 else dt.time(23, 59, 59, k % 1_000_000),
                "tsm": None if k % 4 == 1 else dt.datetime(1960 + k % 80, 1 + k % 12, 3, 4, 5, 6, 7000, utc),
                "tsu": None if k % 4 == 2 else dt.datetime(2024, 2, 29, 12, 0, k % 60, k, utc),
                "lts": None if k % 6 == 0 else dt.datetime(1999, 12, 31, 23, 59, 59, k),
                "uuid": None if k % 2 else f"00000000-0000-0000-0000-{k:012d}",
                "rec": None if k % 3 == 0 else inner,
                "rec2": inner,
                "ints": None if k % 5 == 0 else [None if j % 3 == 1 else j - k for j in range(k % 6)],
                "recs": [inner] * (k % 3),
                "m": None if k % 4 == 0 else [(f"k{j}", None if j == 1 else j / 3) for j in range(k % 4)],
                "mm": [(f"a{j}", [f"v{q}" for q in range(j)]) for j in range(k % 3)],
                "nothing": None,
                "num": None if k % 3 == 0 else (k if k % 3 == 1 else 2**40 + k),
            }
        )
    return pa.Table.from_pylist(rows, schema=avro_to_arrow_schema(MANY_TYPES))


def fastavro_content(table: pa.Table, schema: dict[str, Any]) -> bytes:
    """The oracle: the block content with fastavro encoding record by record."""
    compiled = compile_avro_schema(schema)
    physical = pa.StructArray.from_arrays(
        [table.column(f.name).combine_chunks() for f in compiled.arrow_schema],
        fields=list(compiled.arrow_schema),
    ).cast(compiled.physical_type)
    out = [struct.pack(">ii", 3, len(physical))]
    for record in physical.to_pylist(maps_as_pydicts="strict"):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, compiled.decode_schema, record)
        out.append(struct.pack(">i", len(buf.getvalue())) + buf.getvalue())
    return b"".join(out)


def test_many_types_encode_as_fastavro_does_and_read_back(tmp_path: Path) -> None:
    table = many_rows(300)
    schema = json.dumps(MANY_TYPES)
    block = encode_avro_data_block(table, schema, instant_time=T1)
    parsed = only_block(block)
    assert (parsed.block_type, parsed.instant_time, parsed.schema) == (BlockType.AVRO_DATA, T1, schema)
    assert parsed.content == fastavro_content(table, MANY_TYPES)
    storage = storage_at(tmp_path)
    written = write_log_file(storage, "p", FILE_ID, T1, [block], table_version=8, write_token=TOKEN)
    [batch] = scan(storage, written).batches
    assert (batch.kind, batch.instant_time) == ("data", T1)
    assert batch.table.equals(table)


def test_rows_are_conformed_to_the_schema() -> None:
    schema = MANY_TYPES | {
        "fields": [f for f in MANY_TYPES["fields"] if f["name"] in ("i", "s", "tsu", "dec_b")]
    }
    text = json.dumps(schema)
    given = pa.table(
        {
            "tsu": pa.array(
                [0, 1_000], pa.timestamp("ns", tz="Asia/Tokyo")
            ),  # same instants, other unit/zone
            "i": pa.array([1, 2], pa.int8()),
            "dec_b": pa.array([Decimal("1.5"), None], pa.decimal128(5, 1)),
            # "s" missing: nullable, written as null
        }
    )
    back = decode_data_block(only_block(encode_avro_data_block(given, text, instant_time=T1)))
    assert back.column_names == ["i", "s", "dec_b", "tsu"]
    assert back.column("tsu").to_pylist() == [
        dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.UTC),
    ]
    assert back.column("s").to_pylist() == [None, None]
    assert back.column("dec_b").to_pylist() == [Decimal("1.5000"), None]
    lossy = given.set_column(0, "tsu", pa.array([0, 1_500], pa.timestamp("ns", tz="UTC")))
    with pytest.raises(SchemaMismatch, match=r"column tsu: .* would lose data"):
        encode_avro_data_block(lossy, text, instant_time=T1)


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (pa.table({"value": [1], "other": [2]}), r"columns \['other'\] are not fields"),
        (pa.table({"_hoodie_record_key": ["a"]}), "column value is missing"),
        (pa.table({"value": pa.array([None, 1], pa.int64())}), "value: null value"),
        (pa.table({"value": ["x"]}), "column value: string cannot be written as int64"),
        (pa.table({"value": pa.array([2**40], pa.uint64()), "_hoodie_record_key": [None]}), None),
    ],
)
def test_rows_that_do_not_fit_are_refused_naming_the_column(
    simple_schema: dict[str, Any], rows: pa.Table, message: str | None
) -> None:
    schema = json.dumps(simple_schema)
    if message is None:  # fits after a safe cast
        assert (
            decode_data_block(only_block(encode_avro_data_block(rows, schema, instant_time=T1))).num_rows == 1
        )
        return
    with pytest.raises(SchemaMismatch, match=message):
        encode_avro_data_block(rows, schema, instant_time=T1)


def test_nested_values_that_do_not_fit_are_refused() -> None:
    enum = {"type": "enum", "name": "Color", "symbols": ["RED"]}
    inner = {"type": "record", "name": "Inner", "fields": [{"name": "x", "type": "long"}]}
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "e", "type": ["null", enum]},
            {"name": "rec", "type": ["null", inner]},
            {"name": "m", "type": {"type": "map", "values": {"type": "array", "items": "long"}}},
        ],
    }
    text = json.dumps(schema)
    good = {"e": "RED", "rec": {"x": 1}, "m": [("a", [1])]}
    arrow = pa.schema(
        [
            pa.field("e", pa.string()),
            pa.field("rec", pa.struct([pa.field("x", pa.int64())])),
            pa.field("m", pa.map_(pa.string(), pa.list_(pa.int64()))),
        ]
    )
    assert decode_data_block(
        only_block(encode_avro_data_block(pa.Table.from_pylist([good], schema=arrow), text, instant_time=T1))
    ).to_pylist() == [good]
    cases = [
        ({"e": "PINK"}, r"e: \['PINK'\] are not symbols of the enum \['RED'\]"),
        ({"rec": {"x": None}}, r"column rec: .* has nulls"),  # Arrow's cast says so
        ({"m": [("a", [1, None])]}, r"m\{\}\[\]: null value\(s\) where the Avro type long has no null"),
        ({"m": [("a", None)]}, r"m\{\}: null value\(s\) where the Avro type array has no null"),
        ({"m": None}, r"column m: null value|m: null value\(s\) where the Avro type map has no null"),
    ]
    for change, message in cases:
        rows = pa.Table.from_pylist([good | change], schema=arrow)
        with pytest.raises(SchemaMismatch, match=message):
            encode_avro_data_block(rows, text, instant_time=T1)


def test_decimals_use_the_fewest_bytes_as_java_does() -> None:
    """Java writes BigInteger.toByteArray(): -128 is 0x80 (fastavro writes ff80); fixed sizes sign-extend."""
    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "v", "type": {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": 0}},
            {
                "name": "w",
                "type": {"type": "fixed", "name": "F", "size": 17, "logicalType": "decimal", "precision": 38},
            },
        ],
    }
    values = [
        0,
        1,
        -1,
        127,
        128,
        -128,
        -129,
        255,
        -256,
        -32768,
        2**63,
        -(2**63),
        10**37,
        -(10**37),
        -(2**126),
    ]
    rows = pa.table(
        {"v": pa.array(values, pa.decimal128(38, 0)), "w": pa.array(values, pa.decimal128(38, 0))}
    )
    block = only_block(encode_avro_data_block(rows, json.dumps(schema), instant_time=T1))
    pos = 8
    for v in values:
        (length,) = struct.unpack_from(">i", block.content, pos)
        record = block.content[pos + 4 : pos + 4 + length]
        minimal = v.to_bytes(((v if v >= 0 else ~v).bit_length()) // 8 + 1, "big", signed=True)
        assert record == bytes([len(minimal) * 2]) + minimal + v.to_bytes(17, "big", signed=True), v
        pos += 4 + length
    assert decode_data_block(block).column("v").to_pylist() == [Decimal(v) for v in values]


def test_sliced_chunked_and_large_inputs(tmp_path: Path) -> None:
    """Arrays with offsets (slices), several chunks, and more rows than one encoding chunk."""
    table = many_rows(120)
    sliced = pa.concat_tables([table.slice(7, 50), table.slice(60, 45)])
    block = encode_avro_data_block(sliced, json.dumps(MANY_TYPES), instant_time=T1)
    assert only_block(block).content == fastavro_content(sliced.combine_chunks(), MANY_TYPES)
    assert decode_data_block(only_block(block)).equals(sliced.combine_chunks())
    n = 70_000
    big = pa.table(
        {"_hoodie_record_key": [f"k{i}" for i in range(n)], "value": pa.array(range(n), pa.int64())}
    )
    back = decode_data_block(only_block(encode_avro_data_block(big, json.dumps(SIMPLE), instant_time=T1)))
    assert back.equals(big.cast(back.schema))


SIMPLE: dict[str, Any] = {
    "type": "record",
    "name": "rec",
    "namespace": "hoodie.test",
    "fields": [
        {"name": "_hoodie_record_key", "type": ["null", "string"], "default": None},
        {"name": "value", "type": "long"},
    ],
}


def test_an_empty_table_makes_a_block_of_no_records() -> None:
    block = only_block(
        encode_avro_data_block(
            pa.table({"value": pa.array([], pa.int64())}), json.dumps(SIMPLE), instant_time=T1
        )
    )
    assert block.content == struct.pack(">ii", 3, 0)
    assert decode_data_block(block).num_rows == 0


# -- Parquet data blocks -------------------------------------------------------------------------------------


def test_parquet_blocks_hold_a_gzip_parquet_file_with_the_avro_schema(tmp_path: Path) -> None:
    table = many_rows(200)
    schema = json.dumps(MANY_TYPES)
    block = only_block(encode_parquet_data_block(table, schema, instant_time=T1))
    assert (block.block_type, block.instant_time, block.schema) == (BlockType.PARQUET_DATA, T1, schema)
    meta = pq.ParquetFile(pa.BufferReader(block.content)).metadata
    assert meta.metadata[b"parquet.avro.schema"] == schema.encode()
    assert meta.metadata[b"writer.model.name"] == b"avro"
    assert {meta.row_group(0).column(i).compression for i in range(meta.num_columns)} == {"GZIP"}
    storage = storage_at(tmp_path)
    written = write_log_file(
        storage, "", FILE_ID, T1, [block_bytes(block)], table_version=9, write_token=TOKEN
    )
    [batch] = scan(storage, written).batches
    assert batch.table.equals(table)


def block_bytes(block: LogBlock) -> bytes:
    return frame_block(block.block_type, dict(block.header), block.content)


def test_parquet_codec_follows_hoodie_parquet_compression_codec() -> None:
    table = pa.table({"value": pa.array([1, 2], pa.int64())})
    for codec, expected in [("snappy", "SNAPPY"), ("ZSTD", "ZSTD"), ("uncompressed", "UNCOMPRESSED")]:
        block = only_block(
            encode_parquet_data_block(table, json.dumps(SIMPLE), instant_time=T1, compression=codec)
        )
        assert (
            pq.ParquetFile(pa.BufferReader(block.content)).metadata.row_group(0).column(0).compression
            == expected
        )
    with pytest.raises(ValueError, match=r"hoodie\.parquet\.compression\.codec='lzo'"):
        encode_parquet_data_block(table, json.dumps(SIMPLE), instant_time=T1, compression="lzo")


# -- delete blocks -------------------------------------------------------------------------------------------

_UTC = dt.UTC


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (pa.array([3, None, -7], pa.int32()), pa.array([3, None, -7], pa.int32())),
        (pa.array([3, None, -7], pa.int16()), pa.array([3, None, -7], pa.int32())),
        (pa.array([2**40, None, -1], pa.int64()), pa.array([2**40, None, -1], pa.int64())),
        (pa.array([1.5, None, -2.25], pa.float32()), pa.array([1.5, None, -2.25], pa.float32())),
        (pa.array([1.5, None, 1e300], pa.float64()), pa.array([1.5, None, 1e300], pa.float64())),
        (pa.array(["b", None, ""], pa.large_string()), pa.array(["b", None, ""], pa.string())),
        (pa.array([b"\x00", None, b""], pa.binary()), pa.array([b"\x00", None, b""], pa.binary())),
        (pa.array([True, None, False]), pa.array([True, None, False])),
        (
            pa.array([dt.date(2024, 1, 1), None, dt.date(1900, 3, 1)], pa.date32()),
            pa.array([dt.date(2024, 1, 1), None, dt.date(1900, 3, 1)], pa.date32()),
        ),
        (
            pa.array([Decimal("-1.28"), None, Decimal("12345678901234.5")], pa.decimal128(20, 2)),
            pa.array([Decimal("-1.28"), None, Decimal("12345678901234.5")], pa.decimal128(30, 15)),
        ),
        (
            pa.array(
                [dt.datetime(2024, 5, 6, 7, 8, 9, 123000, _UTC), None, dt.datetime(1969, 1, 1, tzinfo=_UTC)],
                pa.timestamp("ms", tz="UTC"),
            ),
            pa.array(
                [dt.datetime(2024, 5, 6, 7, 8, 9, 123000, _UTC), None, dt.datetime(1969, 1, 1, tzinfo=_UTC)],
                pa.timestamp("us", tz="UTC"),
            ),
        ),
        (
            pa.array([dt.time(1, 2, 3, 4), None, dt.time(0)], pa.time64("us")),
            pa.array([dt.time(1, 2, 3, 4), None, dt.time(0)], pa.time64("us")),
        ),
        (pa.array([None, None, None], pa.int64()), pa.nulls(3, pa.null())),
        (pa.nulls(3), pa.nulls(3, pa.null())),
        (None, pa.nulls(3, pa.null())),
    ],
    ids=lambda v: str(v.type) if isinstance(v, pa.Array) else str(v),
)
@pytest.mark.parametrize("table_version", [6, 8, 9])
def test_delete_blocks_round_trip_ordering_values(
    tmp_path: Path, values: pa.Array | None, expected: pa.Array, table_version: int
) -> None:
    keys = pa.array(["k1", "k2", "k3"])
    partitions = pa.array(["p=1", None, ""])
    block = encode_delete_block(keys, partitions, values, instant_time=T1, table_version=table_version)
    storage = storage_at(tmp_path)
    written = write_log_file(
        storage, "p=1", FILE_ID, T1, [block], table_version=table_version, write_token=TOKEN
    )
    [batch] = scan(storage, written).batches
    assert (batch.kind, batch.instant_time) == ("delete", T1)
    assert batch.table.column("_hoodie_record_key").to_pylist() == ["k1", "k2", "k3"]
    assert batch.table.column("_hoodie_partition_path").to_pylist() == ["p=1", None, ""]
    assert batch.table.column("ordering_value").combine_chunks().equals(expected)


def test_delete_payload_uses_the_union_of_the_table_versions_hudi() -> None:
    keys, partitions = pa.array(["a", "b"]), pa.array(["", ""])
    ordering = pa.array([0, 5], pa.int32())
    payloads = {}
    for version, schema in [(6, "hudi-0.14"), (8, "hudi-0.14"), (9, "hudi-1.1")]:
        content = only_block(
            encode_delete_block(keys, partitions, ordering, instant_time=T1, table_version=version)
        ).content
        assert struct.unpack_from(">ii", content) == (3, len(content) - 8)
        stream = io.BytesIO(content[8:])
        decoded = fastavro.schemaless_reader(
            stream, fastavro.parse_schema(dict(DELETE_RECORD_LIST_SCHEMAS[schema]))
        )
        assert stream.tell() == len(content) - 8
        assert [r["orderingVal"] for r in decoded["deleteRecordList"]] == [{"value": 0}, {"value": 5}]  # type: ignore[index]
        payloads[version] = content
    assert payloads[6] == payloads[8] == payloads[9]  # scalar wrappers come before 1.1's ArrayWrapper


def test_composite_ordering_values_need_table_version_9(tmp_path: Path) -> None:
    ordering = pa.StructArray.from_arrays(
        [pa.array([1, 2], pa.int64()), pa.array(["x", None])],
        names=["ts", "name"],
        mask=pa.array([False, True]),
    )
    keys, partitions = pa.array(["a", "b"]), pa.array(["", ""])
    with pytest.raises(UnsupportedTable, match="table version 9"):
        encode_delete_block(keys, partitions, ordering, instant_time=T1, table_version=8)
    block = only_block(encode_delete_block(keys, partitions, ordering, instant_time=T1, table_version=9))
    assert decode_delete_block(block).column("ordering_value").to_pylist() == [{"0": 1, "1": "x"}, None]


def test_delete_blocks_refuse_what_hudi_cannot_hold() -> None:
    keys, partitions = pa.array(["a"]), pa.array([""])
    with pytest.raises(UnsupportedTable, match="table version 7"):
        encode_delete_block(keys, partitions, None, instant_time=T1, table_version=7)
    with pytest.raises(UnsupportedTable, match="list<item: int64>"):
        encode_delete_block(keys, partitions, pa.array([[1]]), instant_time=T1, table_version=9)
    with pytest.raises(UnsupportedTable, match="DecimalWrapper"):
        encode_delete_block(
            keys,
            partitions,
            pa.array([Decimal("1.00000000000000000001")], pa.decimal128(38, 20)),
            instant_time=T1,
            table_version=6,
        )
    with pytest.raises(ValueError, match="null"):
        encode_delete_block(pa.array([None], pa.string()), partitions, None, instant_time=T1, table_version=6)
    with pytest.raises(ValueError, match="1 record keys but 2 partition paths"):
        encode_delete_block(keys, pa.array(["", ""]), None, instant_time=T1, table_version=6)
    with pytest.raises(ValueError, match="1 record keys but 2 ordering values"):
        encode_delete_block(keys, partitions, pa.array([1, 2]), instant_time=T1, table_version=6)


def test_delete_blocks_accept_chunked_and_dictionary_arrays() -> None:
    keys = pa.chunked_array([["a"], ["b", "c"]])
    partitions = pa.array(["x", "y", "x"]).dictionary_encode()
    block = only_block(
        encode_delete_block(
            keys, partitions, pa.chunked_array([[1, 2], [3]]), instant_time=T1, table_version=8
        )
    )
    deleted = decode_delete_block(block)
    assert deleted.to_pydict() == {
        "_hoodie_record_key": ["a", "b", "c"],
        "_hoodie_partition_path": ["x", "y", "x"],
        "ordering_value": [1, 2, 3],
    }


# -- the scan rules over what we write -----------------------------------------------------------------------


def rows_of(*keys: str) -> pa.Table:
    return pa.table({"_hoodie_record_key": list(keys), "value": pa.array(range(len(keys)), pa.int64())})


def test_a_rollback_block_voids_the_earlier_blocks_of_its_target(tmp_path: Path) -> None:
    storage = storage_at(tmp_path)
    schema = json.dumps(SIMPLE)
    written = write_log_file(
        storage,
        "p",
        FILE_ID,
        T1,
        [
            encode_avro_data_block(rows_of("a", "b"), schema, instant_time=T1),
            encode_parquet_data_block(rows_of("c"), schema, instant_time=T2),
            encode_delete_block(pa.array(["a"]), pa.array(["p"]), None, instant_time=T2, table_version=6),
        ],
        table_version=6,
        write_token=TOKEN,
    )
    written += write_log_file(
        storage,
        "p",
        FILE_ID,
        T1,
        [encode_rollback_command_block(instant_time=T3, target_instant_time=T2)],
        table_version=6,
        write_token=TOKEN,
    )
    assert [w.log_file.version for w in written] == [1, 2]
    result = scan(storage, written)
    assert [
        (b.instant_time, b.kind, b.table.column("_hoodie_record_key").to_pylist()) for b in result.batches
    ] == [(T1, "data", ["a", "b"])]


# -- log files: names, versions, rollover, races -------------------------------------------------------------


def test_v8_writes_version_1_of_the_deltacommits_own_instant_and_moves_on_for_a_retry(tmp_path: Path) -> None:
    storage = storage_at(tmp_path)
    block = encode_avro_data_block(rows_of("a"), json.dumps(SIMPLE), instant_time=T2)
    [first] = write_log_file(storage, "2024/01/02", FILE_ID, T2, [block], table_version=8, write_token=TOKEN)
    assert first == WrittenLogFile(
        f"2024/01/02/.{FILE_ID}_{T2}.log.1_{TOKEN}", LogFile(FILE_ID, T2, 1, TOKEN), len(block), 1
    )
    assert storage.read(first.path) == block
    [retry] = write_log_file(
        storage, "2024/01/02", FILE_ID, T2, [block], table_version=8, write_token="1-1-3"
    )
    assert retry.path == f"2024/01/02/.{FILE_ID}_{T2}.log.2_1-1-3"
    [other] = write_log_file(storage, "2024/01/02", FILE_ID, T3, [block], table_version=9, write_token=TOKEN)
    assert other.log_file.version == 1
    [root] = write_log_file(storage, "", FILE_ID, T3, [block], table_version=9, write_token=TOKEN)
    assert root.path == f".{FILE_ID}_{T3}.log.1_{TOKEN}"


def test_v6_takes_the_next_version_of_the_slice_and_never_appends(tmp_path: Path) -> None:
    storage = storage_at(tmp_path)
    others = [
        f".{FILE_ID}_{T1}.log.1_0-1-1",
        f".{FILE_ID}_{T1}.log.3_2-5-9",  # another writer's token
        f".{FILE_ID}_{T1}.log.4_2-5-9.cdc",  # change-data capture files share the versions
        f"..{FILE_ID}_{T1}.log.9_0-1-1.crc",  # not a log file
        f".{FILE_ID}_{T2}.log.7_0-1-1",  # another slice
        f".other-0_{T1}.log.8_0-1-1",  # another file group
    ]
    for name in others:
        storage.create(f"p/{name}", b"x")
    block = encode_avro_data_block(rows_of("a"), json.dumps(SIMPLE), instant_time=T3)
    [w] = write_log_file(storage, "p", FILE_ID, T1, [block], table_version=6, write_token=TOKEN)
    assert w.log_file == LogFile(FILE_ID, T1, 5, TOKEN)
    assert storage.read(f"p/{others[0]}") == b"x"  # untouched: a new file, no append


def test_files_roll_over_before_passing_the_size_limit(tmp_path: Path) -> None:
    storage = storage_at(tmp_path)
    schema = json.dumps(SIMPLE)
    blocks = [
        encode_avro_data_block(rows_of(*(f"k{j}" for j in range(n))), schema, instant_time=T1)
        for n in (1, 2, 300, 1, 1)
    ]
    sizes = [len(b) for b in blocks]
    limit = sizes[0] + sizes[1]
    assert sizes[2] > limit
    assert sizes[3] + sizes[4] <= limit
    written = write_log_file(
        storage, "p", FILE_ID, T1, blocks, table_version=8, write_token=TOKEN, max_file_bytes=limit
    )
    assert [(w.log_file.version, w.blocks, w.size_bytes) for w in written] == [
        (1, 2, sizes[0] + sizes[1]),
        (2, 1, sizes[2]),  # larger than the limit: alone in its file
        (3, 2, sizes[3] + sizes[4]),
    ]
    assert b"".join(storage.read(w.path) for w in written) == b"".join(blocks)
    assert [b.table.num_rows for b in scan(storage, written).batches] == [1, 2, 300, 1, 1]
    assert MAX_LOG_FILE_BYTES == 1024**3
    assert write_log_file(storage, "p", FILE_ID, T1, [], table_version=8, write_token=TOKEN) == []


class RacingStorage(Storage):
    """A real local storage on which another writer creates each log file name just before we do."""

    def __init__(self, root: Path, races: int) -> None:
        super().__init__(LocalBackend(), str(root), str(root))
        self.races = races

    def create(self, path: str, data: bytes, *, overwrite: bool = False) -> str | None:
        if self.races and LogFile.try_parse(path.rsplit("/", 1)[-1]):
            self.races -= 1
            super().create(path, b"the other writer's file")
        return super().create(path, data, overwrite=overwrite)


def test_a_name_taken_meanwhile_moves_the_file_to_the_next_version(tmp_path: Path) -> None:
    storage = RacingStorage(tmp_path, races=2)
    block = encode_rollback_command_block(instant_time=T2, target_instant_time=T1)
    written = write_log_file(
        storage, "p", FILE_ID, T1, [block, block], table_version=6, write_token=TOKEN, max_file_bytes=1
    )
    assert [w.log_file.version for w in written] == [3, 4]  # lost the race for 1, then for 2
    assert [storage.read(w.path) for w in written] == [block, block]
    for version in (1, 2):
        assert storage.read(f"p/.{FILE_ID}_{T1}.log.{version}_{TOKEN}") == b"the other writer's file"


def test_concurrent_writers_of_one_file_group_get_distinct_versions(tmp_path: Path) -> None:
    storage = storage_at(tmp_path)
    writers = 8
    barrier = threading.Barrier(writers)
    results: dict[int, list[WrittenLogFile]] = {}
    errors: list[BaseException] = []

    def write(i: int) -> None:
        block = encode_rollback_command_block(instant_time=T2, target_instant_time=f"2024010100000{i:04d}")
        barrier.wait()
        try:
            results[i] = write_log_file(
                storage, "p", FILE_ID, T1, [block], table_version=8, write_token=TOKEN
            )
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    versions = sorted(w.log_file.version for ws in results.values() for w in ws)
    assert versions == list(range(1, writers + 1))
    for i, [w] in results.items():
        assert only_block(storage.read(w.path)).target_instant_time == f"2024010100000{i:04d}"


def test_write_log_file_refuses_bad_names_and_blocks(tmp_path: Path) -> None:
    storage = storage_at(tmp_path)
    block = encode_rollback_command_block(instant_time=T2, target_instant_time=T1)

    def write(**changes: Any) -> list[WrittenLogFile]:
        args: dict[str, Any] = {"partition_path": "p", "file_id": FILE_ID, "instant": T1, "blocks": [block]}
        kwargs: dict[str, Any] = {"table_version": 6, "write_token": TOKEN}
        for k, v in changes.items():
            (args if k in args else kwargs)[k] = v
        return write_log_file(
            storage, args["partition_path"], args["file_id"], args["instant"], args["blocks"], **kwargs
        )

    with pytest.raises(UnsupportedTable, match="table version 5"):
        write(table_version=5)
    with pytest.raises(InvalidInstant):
        write(instant="2024")
    with pytest.raises(InvalidFileName, match="write token"):
        write(write_token="1-2")
    with pytest.raises(InvalidFileName, match="file id"):
        write(file_id="a/b")
    with pytest.raises(InvalidFileName, match="file id"):
        write(file_id="")
    with pytest.raises(ValueError, match="block 0 does not start with the block magic"):
        write(blocks=[b"nope"])
    with pytest.raises(ValueError, match="must be positive"):
        write(max_file_bytes=0)
    assert storage.list("p") == []


def test_giving_up_after_many_taken_names_says_so(tmp_path: Path) -> None:
    storage = RacingStorage(tmp_path, races=10_000)
    block = encode_rollback_command_block(instant_time=T2, target_instant_time=T1)
    with pytest.raises(FileAlreadyExists, match="no free log file version"):
        write_log_file(storage, "p", FILE_ID, T1, [block], table_version=8, write_token=TOKEN)
