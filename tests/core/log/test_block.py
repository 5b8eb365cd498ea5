from __future__ import annotations

import datetime as dt
import io
import json
import os
import random
import re
import struct
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from hoodie.errors import CorruptLogBlock, UnsupportedTable
from hoodie.log.block import (
    DELETE_RECORD_LIST_SCHEMAS,
    BlockType,
    HeaderKey,
    LogBlock,
    decode_data_block,
    decode_delete_block,
    iter_blocks,
)
from hoodie.log.log_file import LogFile
from hoodie.schema import avro_to_arrow_schema
from support.shared import missing_message

AVRO_KEY = "334e26e9-8355-45cc-97c6-c31daf0df330"
DELETED_KEYS = [
    "e96c4396-3fad-413a-a942-4cb36106d721",
    "9909a8b1-2d15-4d3d-8ec9-efc48c536a00",
    "334e26e9-8355-45cc-97c6-c31daf0df330",
]


def only_block(data: bytes) -> LogBlock:
    blocks = list(iter_blocks(data))
    assert len(blocks) == 1
    return blocks[0]


def assert_tiles(blocks: list[LogBlock], size: int) -> None:
    """Blocks cover the file exactly, in order, without gaps or overlaps (so the scan always advanced)."""
    pos = 0
    for b in blocks:
        assert b.offset == pos
        assert b.length > 0
        pos = b.end
    assert pos == size


# -- the real vectors ----------------------------------------------------------------------------------------


def test_avro_vector(vectors: Any) -> None:
    data = vectors.avro.read_bytes()
    block = only_block(data)
    assert (block.block_type, block.offset, block.length) == (BlockType.AVRO_DATA, 0, len(data))
    assert block.instant_time == "20250316025828811"
    assert set(block.header) == {HeaderKey.INSTANT_TIME, HeaderKey.SCHEMA}
    assert dict(block.footer) == {}
    table = decode_data_block(block)
    assert table.schema == avro_to_arrow_schema(block.schema or "")
    assert table.to_pylist() == [
        {
            "_hoodie_commit_time": "20250316025828811",
            "_hoodie_commit_seqno": "20250316025828811_0_2",
            "_hoodie_record_key": AVRO_KEY,
            "_hoodie_partition_path": "city=san_francisco",
            "_hoodie_file_name": "ff32ab89-5ad0-4968-83b4-89a34c95d32f-0",
            "ts": 1695159649088,
            "uuid": AVRO_KEY,
            "rider": "rider-A",
            "driver": "driver-K",
            "fare": 29.1,
            "city": "san_francisco",
        }
    ]


def test_parquet_vector(vectors: Any) -> None:
    data = vectors.parquet.read_bytes()
    block = only_block(data)
    assert (block.block_type, block.length, block.instant_time) == (
        BlockType.PARQUET_DATA,
        len(data),
        "20250113230424191",
    )
    assert block.content[:4] == b"PAR1"
    assert block.content[-4:] == b"PAR1"
    table = decode_data_block(block)
    assert table.num_rows == 1
    assert table.column("_hoodie_record_key").to_pylist() == [AVRO_KEY]
    assert table.column("_hoodie_commit_time").to_pylist() == ["20250113230424191"]
    assert table.column("fare").to_pylist() == [29.1]


def test_delete_vector_decodes_to_the_deleted_keys(vectors: Any) -> None:
    block = only_block(vectors.delete.read_bytes())
    assert (block.block_type, block.instant_time) == (BlockType.DELETE, "20250618054714114")
    table = decode_delete_block(block)
    assert table.schema == pa.schema(
        [
            pa.field("_hoodie_record_key", pa.string()),
            pa.field("_hoodie_partition_path", pa.string()),
            pa.field(
                "ordering_value", pa.int32()
            ),  # IntWrapper(0): Spark SQL DELETE's default ordering value
        ]
    )
    assert table.column("_hoodie_record_key").to_pylist() == DELETED_KEYS
    assert table.column("_hoodie_partition_path").to_pylist() == ["city=san_francisco"] * 3
    assert table.column("ordering_value").to_pylist() == [0, 0, 0]


def test_rollback_vector(vectors: Any) -> None:
    block = only_block(vectors.rollback.read_bytes())
    assert block.block_type is BlockType.COMMAND
    assert block.instant_time == "20250126040936578"
    assert block.target_instant_time == "20250126040826878"
    assert block.command_type == "0"
    assert block.content == b""


def test_kryo_delete_block_is_refused_naming_its_version(vectors: Any, log_writer: Any) -> None:
    content = vectors.kryo_delete_content.read_bytes()
    block = only_block(log_writer.block(BlockType.DELETE, {0: "20230101000000000"}, content))
    with pytest.raises(CorruptLogBlock, match=r"DELETE block at offset 0: delete block version 2 .*Kryo"):
        decode_delete_block(block)


# -- damaged files: truncation and flipped bytes -------------------------------------------------------------


@pytest.fixture
def multi_block_file(vectors: Any) -> bytes:
    """The four real blocks back to back, as one log file."""
    return b"".join(p.read_bytes() for p in (vectors.avro, vectors.delete, vectors.parquet, vectors.rollback))


def test_truncation_at_every_offset_keeps_every_intact_block(multi_block_file: bytes) -> None:
    originals = list(iter_blocks(multi_block_file))
    assert [b.block_type for b in originals] == [
        BlockType.AVRO_DATA,
        BlockType.DELETE,
        BlockType.PARQUET_DATA,
        BlockType.COMMAND,
    ]
    for cut in range(len(multi_block_file) + 1):
        blocks = list(iter_blocks(multi_block_file[:cut]))
        assert_tiles(blocks, cut)
        intact = [b for b in originals if b.end <= cut]
        assert blocks[: len(intact)] == intact
        rest = blocks[len(intact) :]
        assert all(b.block_type is BlockType.CORRUPT for b in rest), cut
        torn_start = intact[-1].end if intact else 0
        assert (rest[0].offset if rest else cut) == torn_start


@pytest.mark.parametrize("mask", [0xFF, 0x01, 0x80])
def test_a_flipped_byte_anywhere_damages_at_most_its_own_block(multi_block_file: bytes, mask: int) -> None:
    originals = list(iter_blocks(multi_block_file))
    for pos in range(len(multi_block_file)):
        damaged = bytearray(multi_block_file)
        damaged[pos] ^= mask
        blocks = list(iter_blocks(bytes(damaged)))
        assert_tiles(blocks, len(damaged))
        hit = next(b for b in originals if b.offset <= pos < b.end)
        for b in blocks:
            if b.block_type is BlockType.CORRUPT:
                # Corrupt ranges lie inside the damaged block (or are the damaged block itself).
                assert hit.offset <= b.offset, (pos, b)
                assert b.end <= hit.end, (pos, b)
            elif b.offset == hit.offset:
                # Framing still checks out: only the content or a header value changed; same extent.
                assert b.length == hit.length, pos
            else:
                assert b in originals, (pos, b)
        assert [b for b in blocks if b.end <= hit.offset or b.offset >= hit.end] == [
            b for b in originals if b is not hit
        ]


def test_iter_blocks_never_raises_and_always_advances_on_garbage(log_writer: Any) -> None:
    rng = random.Random(1234)
    good = log_writer.block(BlockType.COMMAND, {0: "1", 1: "2", 3: "0"})
    samples = [
        b"",
        b"#",
        b"#HUDI#",
        b"#HUDI##HUDI##HUDI#",
        b"#HUDI#" + struct.pack(">q", 2**63 - 1),
        b"#HUDI#" + struct.pack(">q", -5) + b"\x00" * 40,
        b"#HUDI#" + struct.pack(">q", 32) + b"\x00" * 40,
        b"\x00" * 100 + good,
        good + b"\x00" * 3,
        good[:-1] + b"#HUDI#",
    ]
    samples += [rng.randbytes(rng.randrange(0, 300)) for _ in range(300)]
    samples += [b"#HUDI#".join(rng.randbytes(rng.randrange(0, 40)) for _ in range(5)) for _ in range(300)]
    for data in samples:
        blocks = list(iter_blocks(data))
        assert_tiles(blocks, len(data))
    blocks = list(iter_blocks(b"\x00" * 100 + good))
    assert [(b.block_type, b.offset) for b in blocks] == [(BlockType.CORRUPT, 0), (BlockType.COMMAND, 100)]


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda b: b[:14] + struct.pack(">i", 2) + b[18:], "unknown log format version 2"),
        (lambda b: b[:18] + struct.pack(">i", 7) + b[22:], "unknown block type 7"),
        (lambda b: b[:22] + struct.pack(">i", -1) + b[26:], "header entry count -1"),
        (lambda b: b[:22] + struct.pack(">i", 1000) + b[26:], "header entry count 1000"),
        (lambda b: b[:-8] + struct.pack(">q", 1), "reverse pointer 1"),
        (lambda b: b[:6] + struct.pack(">q", 10) + b[14:], "below the minimum"),
        (lambda b: b[:6] + struct.pack(">q", 10**6) + b[14:], "runs past the end"),
        (lambda b: b[:-1], "runs past the end"),
    ],
)
def test_bad_framing_makes_a_corrupt_block_saying_why(
    log_writer: Any, tamper: Callable[[bytes], bytes], reason: str
) -> None:
    good = log_writer.block(BlockType.COMMAND, {0: "20240101000000000", 1: "20231231000000000", 3: "0"})
    block = only_block(tamper(good))
    assert block.block_type is BlockType.CORRUPT
    assert reason in (block.corrupt_reason or "")


def test_inconsistent_inner_lengths_are_corrupt(log_writer: Any) -> None:
    """Lengths inside the block must account for every byte before the reverse pointer."""
    body = struct.pack(">ii", 1, BlockType.COMMAND) + log_writer.pack_map({0: "1"})
    for tail in (
        struct.pack(">q", 5) + b"abc" + log_writer.pack_map({}),  # content length beyond the block
        struct.pack(">q", -1) + log_writer.pack_map({}),  # negative content length
        struct.pack(">q", 0) + log_writer.pack_map({}) + b"xx",  # bytes after the footer
        struct.pack(">q", 0) + struct.pack(">i", 1),  # footer entry missing
    ):
        inner = body + tail
        length = len(inner) + 8
        data = b"#HUDI#" + struct.pack(">q", length) + inner + struct.pack(">q", 14 + len(inner))
        assert only_block(data).block_type is BlockType.CORRUPT


def test_non_utf8_header_value_is_corrupt(log_writer: Any) -> None:
    good = log_writer.block(BlockType.COMMAND, {0: "2024"})
    bad = good.replace(b"2024", b"20\xff4")
    assert only_block(bad).block_type is BlockType.CORRUPT


def test_a_block_written_as_corrupt_stays_corrupt(log_writer: Any) -> None:
    block = only_block(log_writer.block(BlockType.CORRUPT, {}, b"whatever"))
    assert block.block_type is BlockType.CORRUPT
    assert block.corrupt_reason


def test_unknown_header_keys_are_dropped_after_their_length_is_checked(log_writer: Any) -> None:
    data = log_writer.block(BlockType.COMMAND, {0: "1", 42: "future", 9: "x", 3: "0"}, footer={5: "f"})
    block = only_block(data)
    assert block.block_type is BlockType.COMMAND
    assert dict(block.header) == {HeaderKey.INSTANT_TIME: "1", HeaderKey.COMMAND_BLOCK_TYPE: "0"}
    assert dict(block.footer) == {5: "f"}


def test_magic_inside_content_does_not_split_a_block(log_writer: Any, simple_schema: dict[str, Any]) -> None:
    records = [{"_hoodie_record_key": "#HUDI#" * 3, "value": 1}]
    data = log_writer.data_block("1", simple_schema, records) + log_writer.rollback_block("2", "0")
    blocks = list(iter_blocks(data))
    assert [b.block_type for b in blocks] == [BlockType.AVRO_DATA, BlockType.COMMAND]
    assert decode_data_block(blocks[0]).to_pylist() == records


def test_header_properties(log_writer: Any) -> None:
    header = {0: "3", 4: "1, 2,,", 7: "true", 8: "0"}
    block = only_block(log_writer.block(BlockType.AVRO_DATA, header))
    assert block.compacted_block_times == ("1", "2")
    assert block.is_partial
    assert block.header[HeaderKey.BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS] == "0"
    assert block.describe() == "AVRO_DATA block at offset 0"


# -- data block content --------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 3])
def test_avro_block_versions_share_one_layout(
    log_writer: Any, simple_schema: dict[str, Any], version: int
) -> None:
    records = [{"_hoodie_record_key": f"k{i}", "value": i} for i in range(5)] + [
        {"_hoodie_record_key": None, "value": -1}
    ]
    content = log_writer.avro_content(simple_schema, records, version=version)
    block = only_block(log_writer.block(BlockType.AVRO_DATA, {0: "1", 2: json.dumps(simple_schema)}, content))
    assert decode_data_block(block).to_pylist() == records


def test_cdc_blocks_decode_like_avro_blocks(log_writer: Any, simple_schema: dict[str, Any]) -> None:
    content = log_writer.avro_content(simple_schema, [{"_hoodie_record_key": "a", "value": 1}])
    block = only_block(log_writer.block(BlockType.CDC_DATA, {0: "1", 2: json.dumps(simple_schema)}, content))
    assert decode_data_block(block).num_rows == 1


def test_empty_avro_block_has_the_schema(log_writer: Any, simple_schema: dict[str, Any]) -> None:
    block = only_block(log_writer.data_block("1", simple_schema, []))
    table = decode_data_block(block)
    assert table.num_rows == 0
    assert table.schema == avro_to_arrow_schema(simple_schema)


def _avro_block(log_writer: Any, schema: Any, content: bytes, offset_pad: int = 0) -> LogBlock:
    header = (
        {0: "1"} if schema is None else {0: "1", 2: schema if isinstance(schema, str) else json.dumps(schema)}
    )
    data = b"\x00" * offset_pad + log_writer.block(BlockType.AVRO_DATA, header, content)
    return next(b for b in iter_blocks(data) if b.block_type is BlockType.AVRO_DATA)


def _bad_avro_contents(log_writer: Any, schema: dict[str, Any]) -> dict[str, tuple[Any, bytes]]:
    good = log_writer.avro_content(schema, [{"_hoodie_record_key": "abc", "value": 7}] * 2)
    (first_length,) = struct.unpack_from(">i", good, 8)
    return {
        "no SCHEMA header": (None, good),
        "SCHEMA header is unusable": ("{not json", good),
        "too short": (schema, b"\x00\x00"),
        "unknown Avro data block version 9": (schema, struct.pack(">i", 9) + good[4:]),
        "record count 1000": (schema, good[:4] + struct.pack(">i", 1000) + good[8:]),
        "record count -1": (schema, good[:4] + struct.pack(">i", -1) + good[8:]),
        "bytes after the last of 2 records": (schema, good + b"\x00"),
        "length -3 runs past": (schema, good[:8] + struct.pack(">i", -3) + good[12:]),
        "decodes to": (schema, good[:8] + struct.pack(">i", first_length + 1) + good[12:] + b"\x00"),
        "does not decode": (schema, good[:12] + b"\x02\x7f" + good[14:]),
    }


def test_avro_content_damage_raises_corrupt_log_block_naming_the_offset(
    log_writer: Any, simple_schema: dict[str, Any]
) -> None:
    for reason, (schema, content) in _bad_avro_contents(log_writer, simple_schema).items():
        block = _avro_block(log_writer, schema, content, offset_pad=100)
        with pytest.raises(CorruptLogBlock, match=rf"AVRO_DATA block at offset 100: .*{re.escape(reason)}"):
            decode_data_block(block)


def test_parquet_content_damage_raises_corrupt_log_block(vectors: Any) -> None:
    block = only_block(vectors.parquet.read_bytes())
    damaged = LogBlock(block.block_type, block.header, block.footer, block.content[:-30], 0, block.length)
    with pytest.raises(CorruptLogBlock, match="PARQUET_DATA block at offset 0: its Parquet content"):
        decode_data_block(damaged)


def test_hfile_blocks_are_refused_and_other_blocks_are_not_data(log_writer: Any, vectors: Any) -> None:
    with pytest.raises(UnsupportedTable, match="metadata table"):
        decode_data_block(only_block(log_writer.block(BlockType.HFILE_DATA, {0: "1"}, b"HFILE")))
    with pytest.raises(ValueError, match="not a data block"):
        decode_data_block(only_block(vectors.delete.read_bytes()))
    with pytest.raises(ValueError, match="not a delete block"):
        decode_delete_block(only_block(vectors.avro.read_bytes()))


# -- delete block content ------------------------------------------------------------------------------------

NEWEST = DELETE_RECORD_LIST_SCHEMAS["hudi-1.1"]
HUDI_014 = DELETE_RECORD_LIST_SCHEMAS["hudi-0.14"]
NS = "org.apache.hudi.avro.model."


def _delete_block(log_writer: Any, records: list[dict[str, Any]], schema: Any = NEWEST) -> LogBlock:
    content = log_writer.delete_content(schema, records)
    return only_block(log_writer.block(BlockType.DELETE, {0: "1"}, content))


def _del(key: str | None, ordering: Any = None) -> dict[str, Any]:
    return {"recordKey": key, "partitionPath": "p", "orderingVal": ordering}


@pytest.mark.parametrize(
    ("wrapper", "value", "arrow_type", "expected"),
    [
        ("BooleanWrapper", True, pa.bool_(), True),
        ("IntWrapper", -7, pa.int32(), -7),
        ("LongWrapper", 2**40, pa.int64(), 2**40),
        ("FloatWrapper", 1.5, pa.float32(), 1.5),
        ("DoubleWrapper", 2.25, pa.float64(), 2.25),
        ("BytesWrapper", b"\x01\x02", pa.binary(), b"\x01\x02"),
        ("StringWrapper", "zz", pa.string(), "zz"),
        ("DateWrapper", 19000, pa.date32(), dt.date(2022, 1, 8)),
        ("DecimalWrapper", Decimal("12.5"), pa.decimal128(30, 15), Decimal("12.500000000000000")),
        ("TimeMicrosWrapper", dt.time(1, 2, 3, 4), pa.time64("us"), dt.time(1, 2, 3, 4)),
        (
            "TimestampMicrosWrapper",
            1_700_000_000_000_001,
            pa.timestamp("us", tz="UTC"),
            dt.datetime(2023, 11, 14, 22, 13, 20, 1, tzinfo=dt.UTC),
        ),
    ],
)
@pytest.mark.parametrize("schema_version", ["hudi-1.1", "hudi-0.14"])
def test_delete_ordering_value_takes_the_type_of_its_wrapper(
    log_writer: Any, wrapper: str, value: Any, arrow_type: pa.DataType, expected: Any, schema_version: str
) -> None:
    if wrapper == "DecimalWrapper":
        value = value.quantize(Decimal(10) ** -15)  # Hudi scales decimals to the wrapper's scale
    records = [_del("a", (NS + wrapper, {"value": value})), _del("b")]
    table = decode_delete_block(
        _delete_block(log_writer, records, DELETE_RECORD_LIST_SCHEMAS[schema_version])
    )
    assert table.schema.field("ordering_value").type == arrow_type
    assert table.column("ordering_value").to_pylist() == [expected, None]
    assert table.column("_hoodie_record_key").to_pylist() == ["a", "b"]


def test_delete_ordering_values_of_several_number_types_widen(log_writer: Any) -> None:
    records = [
        _del("a", (NS + "IntWrapper", {"value": 1})),
        _del("b", (NS + "LongWrapper", {"value": 2**40})),
    ]
    column = decode_delete_block(_delete_block(log_writer, records)).column("ordering_value")
    assert (column.type, column.to_pylist()) == (pa.int64(), [1, 2**40])
    records.append(_del("c", (NS + "DoubleWrapper", {"value": 0.5})))
    column = decode_delete_block(_delete_block(log_writer, records)).column("ordering_value")
    assert (column.type, column.to_pylist()) == (pa.float64(), [1.0, float(2**40), 0.5])


def test_delete_without_any_ordering_value_has_a_null_column(log_writer: Any) -> None:
    table = decode_delete_block(_delete_block(log_writer, [_del("a"), _del(None)]))
    assert table.column("ordering_value").type == pa.null()
    assert table.column("_hoodie_record_key").to_pylist() == ["a", None]
    assert decode_delete_block(_delete_block(log_writer, [])).num_rows == 0


def test_delete_ordering_values_of_incomparable_types_are_refused(log_writer: Any) -> None:
    records = [
        _del("a", (NS + "StringWrapper", {"value": "x"})),
        _del("b", (NS + "LongWrapper", {"value": 1})),
    ]
    with pytest.raises(UnsupportedTable, match="mixes ordering values"):
        decode_delete_block(_delete_block(log_writer, records))


def test_composite_ordering_values_become_a_struct_per_position(log_writer: Any) -> None:
    def composite(ts: int, seq: str) -> tuple[str, dict[str, Any]]:
        values = [(NS + "LongWrapper", {"value": ts}), (NS + "StringWrapper", {"value": seq})]
        return (NS + "ArrayWrapper", {"wrappedValues": values})

    records = [_del("a", composite(5, "x")), _del("b"), _del("c", composite(6, "y"))]
    column = decode_delete_block(_delete_block(log_writer, records)).column("ordering_value")
    assert column.type == pa.struct([pa.field("0", pa.int64()), pa.field("1", pa.string())])
    assert column.to_pylist() == [{"0": 5, "1": "x"}, None, {"0": 6, "1": "y"}]


@pytest.mark.parametrize(
    ("tamper", "message"),
    [
        (lambda c: c + b"\x00", "payload length"),
        (lambda c: c[:4] + struct.pack(">i", len(c) - 7) + c[8:] + b"\x00", r"decodes \d+ of \d+ bytes"),
        (lambda c: struct.pack(">i", 4) + c[4:], "unknown delete block version 4"),
        (lambda c: c[:3], "too short"),
        (lambda c: c[:4] + struct.pack(">i", 3) + b"\x02\x02\x7f", "not a HoodieDeleteRecordList"),
    ],
)
def test_delete_content_damage_raises_corrupt_log_block(
    log_writer: Any, tamper: Callable[[bytes], bytes], message: str
) -> None:
    content = log_writer.delete_content(NEWEST, [_del("k", (NS + "IntWrapper", {"value": 1}))])
    block = only_block(log_writer.block(BlockType.DELETE, {0: "1"}, tamper(content)))
    with pytest.raises(CorruptLogBlock, match=message):
        decode_delete_block(block)


def _spec_schema(spec_dir: Path, version: str) -> dict[str, Any]:
    """Hudi's HoodieDeleteRecordList.avsc, the wrappers of HoodieMetadata.avsc inlined at first use."""

    def load(name: str) -> Any:
        text = (spec_dir / version / name).read_text()
        text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
        return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))

    wrappers: dict[str, Any] = {}

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            if node.get("type") == "record" and node.get("name", "").endswith("Wrapper"):
                wrappers[NS + node["name"]] = node
            for v in node.values():
                collect(v)
        elif isinstance(node, list):
            for v in node:
                collect(v)

    collect(load("HoodieMetadata.avsc"))
    defined: set[str] = set()

    def inline(node: Any) -> Any:
        if isinstance(node, str) and node in wrappers and node not in defined:
            defined.add(node)
            return inline(wrappers[node])
        if isinstance(node, dict):
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    return dict(inline(load("HoodieDeleteRecordList.avsc")))


@pytest.mark.parametrize(
    ("ours", "spec_version"),
    [("hudi-0.14", "hudi-0.15.0"), ("hudi-0.14", "hudi-1.0.0-branchpoint"), ("hudi-1.1", "hudi-master")],
)
def test_our_delete_schemas_are_hudis(fixtures_root: Path, ours: str, spec_version: str) -> None:
    spec_dir = fixtures_root.parent / "hudi-spec" / "avro"
    if not spec_dir.is_dir():
        pytest.skip(missing_message(spec_dir))
    assert dict(DELETE_RECORD_LIST_SCHEMAS[ours]) == _spec_schema(spec_dir, spec_version)


# -- every log block of real tables --------------------------------------------------------------------------

REAL_TABLES = [
    "hudi-rs/sample_table_mor_parquet_v6_nonpartitioned_rollback.zip",
    "apache-hudi/trips_logical_types_json_mor_read_v8.zip",
    "apache-hudi/trips_logical_types_json_mor_read_v6.zip",
    "apache-hudi/trips_logical_types_json_mor_read_v6_parquet_log.zip",
    "apache-hudi/trips_logical_types_json_mor_read_v9.zip",
    "apache-hudi/hudi_comprehensive_types_v6_mor.zip",
    "apache-hudi/hudi-v8-table-mor.zip",
    "apache-hudi/hudi-v6-table-payload-partial.zip",
    "apache-hudi/hudi_multi_pt_v8_mor.zip",
    "hudi-rs/quickstart_trips_table_mor_avro_v6_trips_8i3d.zip",
    "hudi-rs/quickstart_trips_table_mor_avro_v8_trips_8i3u1d.zip",
    "hudi-rs/sample_table_mor_avro_v9_txns_simple_meta.zip",
]


def data_log_files(base: Path) -> list[Path]:
    """The log files of a table's data (not its metadata table), skipping Hadoop .crc side files."""
    files = []
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = [d for d in dirnames if d != ".hoodie"]
        files += [Path(dirpath) / f for f in filenames if LogFile.try_parse(f) is not None]
    return sorted(files)


@pytest.mark.fixtures
@pytest.mark.parametrize("zip_name", REAL_TABLES)
def test_every_block_of_real_tables_decodes(unzip_table: Callable[[str], Path], zip_name: str) -> None:
    logs = data_log_files(unzip_table(zip_name))
    assert logs, f"{zip_name} has no log files"
    decoded = 0
    for path in logs:
        data = path.read_bytes()
        blocks = list(iter_blocks(data))
        assert_tiles(blocks, len(data))
        for block in blocks:
            assert block.block_type is not BlockType.CORRUPT, (path.name, block.corrupt_reason)
            assert block.instant_time is not None
            if block.block_type is BlockType.AVRO_DATA:
                table = decode_data_block(block)
                assert table.schema == avro_to_arrow_schema(block.schema or "")
                assert table.num_rows == struct.unpack_from(">i", block.content, 4)[0]
            elif block.block_type is BlockType.PARQUET_DATA:
                assert decode_data_block(block).num_rows > 0
            elif block.block_type is BlockType.DELETE:
                keys = decode_delete_block(block).column("_hoodie_record_key")
                assert keys.null_count == 0
                assert len(keys) > 0
            else:
                assert block.block_type is BlockType.COMMAND
            decoded += 1
    assert decoded >= len(logs)


def _decode_with_logical_types(block: LogBlock) -> list[dict[str, Any]]:
    """fastavro's own decoding, logical types on: the independent expectation for our fast path."""
    schema = fastavro.parse_schema(json.loads(block.schema or ""))
    content = block.content
    (count,) = struct.unpack_from(">i", content, 4)
    pos, out = 8, []
    for _ in range(count):
        (length,) = struct.unpack_from(">i", content, pos)
        out.append(fastavro.schemaless_reader(io.BytesIO(content[pos + 4 : pos + 4 + length]), schema))
        pos += 4 + length
    return out


@pytest.mark.fixtures
@pytest.mark.parametrize(
    "zip_name",
    [
        "apache-hudi/trips_logical_types_json_mor_read_v8.zip",
        "apache-hudi/hudi_comprehensive_types_v6_mor.zip",
    ],
)
def test_logical_type_values_match_fastavros_own_decoding(
    unzip_table: Callable[[str], Path], zip_name: str
) -> None:
    checked = 0
    for path in data_log_files(unzip_table(zip_name)):
        for block in iter_blocks(path.read_bytes()):
            if block.block_type is not BlockType.AVRO_DATA:
                continue
            table = decode_data_block(block)
            # pyarrow converts fastavro's datetimes, dates, Decimals and dicts itself: no casting of ints.
            expected = pa.array(_decode_with_logical_types(block), type=pa.struct(list(table.schema)))
            assert table.equals(pa.Table.from_batches([pa.RecordBatch.from_struct_array(expected)]))
            checked += table.num_rows
    assert checked > 0


def test_trips_logical_types_schema(unzip_table: Callable[[str], Path]) -> None:
    """The table's last deltacommit wrote every logical type (its first one, before an upgrade, did not)."""
    logs = data_log_files(unzip_table("apache-hudi/trips_logical_types_json_mor_read_v8.zip"))
    blocks = [b for path in logs for b in iter_blocks(path.read_bytes())]
    block = next(b for b in blocks if b.instant_time == "20251024182745309")
    schema = decode_data_block(block).schema
    assert schema.field("ts_millis").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("ts_micros").type == pa.timestamp("us", tz="UTC")
    assert schema.field("local_ts_millis").type == pa.timestamp("ms")
    assert schema.field("local_ts_micros").type == pa.timestamp("us")
    assert schema.field("event_date").type == pa.date32()
    assert schema.field("dec_fixed_small").type == pa.decimal128(5, 2)
    assert schema.field("dec_fixed_large").type == pa.decimal128(18, 9)
    assert not schema.field("ts_millis").nullable
    assert schema.field("_hoodie_record_key").nullable
