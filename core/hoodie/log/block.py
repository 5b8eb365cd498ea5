"""Log blocks: the framing of a Hudi log file, and the content of its data and delete blocks.

A log file is a sequence of blocks, all integers big-endian (Java ``DataOutputStream``)::

    block    := magic length format-version type header content-length content footer reverse-pointer
    magic    := "#HUDI#"                        6 bytes
    length   := int64                           bytes after this field, up to and including reverse-pointer
    format-version := int32                     1
    type     := int32                           BlockType
    header   := map                             keys: HeaderKey
    content-length := int64
    content  := bytes[content-length]
    footer   := map                             always empty
    reverse-pointer := int64                    bytes of the block from magic up to, excluding, this field
                                                (= length + 6)
    map      := int32 count, count * (int32 key, int32 value-length, UTF-8 bytes[value-length])
                header keys this reader does not know (newer writers) are dropped, their lengths checked

A block whose magic, lengths, format version, type, header or reverse pointer do not check out, or which
the file ends inside, is returned as a block of type CORRUPT covering the damaged bytes, and scanning goes
on at the next magic after its start: a crashed writer leaves a torn last block, and a damaged byte in the
middle of a file must not hide the intact blocks after it. :func:`iter_blocks` never raises on bad bytes.

Content (decoded by :func:`decode_data_block` and :func:`decode_delete_block`)::

    AVRO_DATA    := int32 version (1-3), int32 count, count * (int32 length, Avro binary[length])
                    each record in the Avro schema of the SCHEMA header
    PARQUET_DATA := a whole Parquet file
    DELETE       := int32 version, int32 length, payload[length]
                    version 3: Avro binary (not a container) of HoodieDeleteRecordList
                    versions 1, 2: Kryo-serialized Java objects (Hudi < 0.14): refused
    COMMAND      := empty; header COMMAND_BLOCK_TYPE "0" = rollback the blocks of TARGET_INSTANT_TIME
    HFILE_DATA   := an HFile (metadata table only)
    CDC_DATA     := like AVRO_DATA, change-data-capture records

Content that does not decode inside a block whose framing checked out raises
:class:`~hoodie.errors.CorruptLogBlock` naming the block's offset: the format has no checksum, so this is the
only place such damage can still be noticed, and it must not silently drop rows.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from types import MappingProxyType
from typing import Any, cast

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.avro.columnar import decode_columnar
from hoodie.errors import CorruptLogBlock, HoodieError, UnsupportedTable
from hoodie.hfile.reader import HFileReader
from hoodie.schema import CompiledSchema, compile_avro_schema

__all__ = [
    "DELETE_ORDERING_VALUE",
    "DELETE_PARTITION_PATH",
    "DELETE_RECORD_KEY",
    "DELETE_RECORD_LIST_SCHEMAS",
    "LOG_FORMAT_VERSION",
    "MAGIC",
    "ROLLBACK_PREVIOUS_BLOCK",
    "BlockType",
    "HeaderKey",
    "LogBlock",
    "decode_data_block",
    "decode_delete_block",
    "iter_blocks",
]

MAGIC = b"#HUDI#"
LOG_FORMAT_VERSION = 1
ROLLBACK_PREVIOUS_BLOCK = "0"
"""COMMAND_BLOCK_TYPE of a rollback command block (Hudi's only command)."""

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32_PAIR = struct.Struct(">ii")
# format version + type + header count + content length + footer count + reverse pointer
_MIN_BLOCK_LENGTH = 4 + 4 + 4 + 8 + 4 + 8
_PREFIX = len(MAGIC) + 8  # magic + block length


class BlockType(IntEnum):
    """The type of a log block, as its ordinal is written in the block."""

    COMMAND = 0
    DELETE = 1
    CORRUPT = 2
    AVRO_DATA = 3
    HFILE_DATA = 4
    PARQUET_DATA = 5
    CDC_DATA = 6


class HeaderKey(IntEnum):
    """Keys of a block header (Hudi's ``HeaderMetadataType`` ordinals).

    IS_PARTIAL and BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS came with Hudi 1.0 (table version 8); the
    latter anchors RECORD_POSITIONS (a Base64 Roaring bitmap) to a base file.
    """

    INSTANT_TIME = 0
    TARGET_INSTANT_TIME = 1
    SCHEMA = 2
    COMMAND_BLOCK_TYPE = 3
    COMPACTED_BLOCK_TIMES = 4
    RECORD_POSITIONS = 5
    BLOCK_IDENTIFIER = 6
    IS_PARTIAL = 7
    BASE_FILE_INSTANT_TIME_OF_RECORD_POSITIONS = 8


_EMPTY: Mapping[Any, str] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class LogBlock:
    """One block of a log file: where it is (``offset`` of its magic, ``length`` in bytes including magic and
    reverse pointer), its header and footer, and its raw content.

    A CORRUPT block covers damaged bytes: ``content`` is those bytes, header and footer are empty and
    ``corrupt_reason`` says what did not check out.
    """

    block_type: BlockType
    header: Mapping[HeaderKey, str]
    footer: Mapping[int, str]
    content: bytes
    offset: int
    length: int
    corrupt_reason: str | None = field(default=None, compare=False)

    @property
    def end(self) -> int:
        """Offset of the first byte after the block."""
        return self.offset + self.length

    @property
    def instant_time(self) -> str | None:
        """The instant that wrote the block (INSTANT_TIME header)."""
        return self.header.get(HeaderKey.INSTANT_TIME)

    @property
    def target_instant_time(self) -> str | None:
        """The instant a command block acts on (TARGET_INSTANT_TIME header)."""
        return self.header.get(HeaderKey.TARGET_INSTANT_TIME)

    @property
    def schema(self) -> str | None:
        """The Avro schema (JSON) of a data block's records (SCHEMA header)."""
        return self.header.get(HeaderKey.SCHEMA)

    @property
    def command_type(self) -> str | None:
        """COMMAND_BLOCK_TYPE header ("0" is a rollback)."""
        return self.header.get(HeaderKey.COMMAND_BLOCK_TYPE)

    @property
    def compacted_block_times(self) -> tuple[str, ...]:
        """Instants whose blocks this log-compacted block replaces (COMPACTED_BLOCK_TIMES, a list)."""
        value = self.header.get(HeaderKey.COMPACTED_BLOCK_TIMES)
        if value is None:
            return ()
        return tuple(t for t in (part.strip() for part in value.split(",")) if t)

    @property
    def is_partial(self) -> bool:
        """Whether a data block holds partial updates (IS_PARTIAL "true", its SCHEMA lists the columns)."""
        return self.header.get(HeaderKey.IS_PARTIAL, "false").lower() == "true"

    def describe(self) -> str:
        """``<TYPE> block at offset <n>``, for messages."""
        return f"{self.block_type.name} block at offset {self.offset}"


# -- framing -------------------------------------------------------------------------------------------------


def iter_blocks(data: bytes) -> Iterator[LogBlock]:
    """The blocks of a log file's bytes, in file order; damaged ranges come out as CORRUPT blocks.

    Never raises on bad bytes and always advances: each block (corrupt or not) ends after it starts.
    """
    n = len(data)
    pos = 0
    while pos < n:
        if data.startswith(MAGIC, pos):
            parsed = _parse_block(data, pos)
            if isinstance(parsed, LogBlock):
                yield parsed
                pos = parsed.end
                continue
            reason = parsed
        else:
            reason = f"no block magic at offset {pos}"
        nxt = data.find(MAGIC, pos + 1)
        end = n if nxt < 0 else nxt
        yield LogBlock(BlockType.CORRUPT, _EMPTY, _EMPTY, bytes(data[pos:end]), pos, end - pos, reason)
        pos = end


def _parse_block(data: bytes, pos: int) -> LogBlock | str:
    """The block whose magic is at ``pos``, or why it does not check out."""
    n = len(data)
    if pos + _PREFIX > n:
        return "the file ends inside the block length"
    (block_length,) = _I64.unpack_from(data, pos + len(MAGIC))
    if block_length < _MIN_BLOCK_LENGTH:
        return f"block length {block_length} is below the minimum {_MIN_BLOCK_LENGTH}"
    end = pos + _PREFIX + block_length
    if end > n:
        return f"block length {block_length} runs past the end of the file ({n - pos - _PREFIX} bytes left)"
    limit = end - 8  # where the reverse pointer starts
    (reverse_pointer,) = _I64.unpack_from(data, limit)
    if reverse_pointer != limit - pos:
        return f"reverse pointer {reverse_pointer} does not match block length {block_length}"
    p = pos + _PREFIX
    version, type_id = _I32_PAIR.unpack_from(data, p)
    p += 8
    if version != LOG_FORMAT_VERSION:
        return f"unknown log format version {version}"
    try:
        block_type = BlockType(type_id)
    except ValueError:
        return f"unknown block type {type_id}"
    header = _read_map(data, p, limit, "header")
    if isinstance(header, str):
        return header
    raw_header, p = header
    if p + 8 > limit:
        return "no room for the content length"
    (content_length,) = _I64.unpack_from(data, p)
    p += 8
    if content_length < 0 or p + content_length > limit:
        return f"content length {content_length} does not fit in the block"
    content = bytes(data[p : p + content_length])
    p += content_length
    footer = _read_map(data, p, limit, "footer")
    if isinstance(footer, str):
        return footer
    raw_footer, p = footer
    if p != limit:
        return f"{limit - p} bytes between the footer and the reverse pointer"
    known = {HeaderKey(k): v for k, v in raw_header.items() if k in _HEADER_KEYS}
    return LogBlock(
        block_type=block_type,
        header=MappingProxyType(known),
        footer=MappingProxyType(raw_footer),
        content=content,
        offset=pos,
        length=end - pos,
        corrupt_reason="a block written with type CORRUPT" if block_type is BlockType.CORRUPT else None,
    )


_HEADER_KEYS = frozenset(int(k) for k in HeaderKey)


def _read_map(data: bytes, p: int, limit: int, what: str) -> tuple[dict[int, str], int] | str:
    """A header or footer map starting at ``p`` and ending before ``limit``, or why it does not check out.

    Keys are kept as ints; unknown keys are dropped by the caller (their lengths are still checked here).
    """
    if p + 4 > limit:
        return f"no room for the {what} entry count"
    (count,) = _I32.unpack_from(data, p)
    p += 4
    if count < 0 or p + 8 * count > limit:
        return f"{what} entry count {count} does not fit in the block"
    entries: dict[int, str] = {}
    for _ in range(count):
        if p + 8 > limit:
            return f"{what} entry runs past the block"
        key, length = _I32_PAIR.unpack_from(data, p)
        p += 8
        if length < 0 or p + length > limit:
            return f"{what} value length {length} (key {key}) does not fit in the block"
        try:
            entries[key] = bytes(data[p : p + length]).decode("utf-8")
        except UnicodeDecodeError:
            return f"{what} value of key {key} is not UTF-8"
        p += length
    return entries, p


# -- data blocks ---------------------------------------------------------------------------------------------

_AVRO_BLOCK_VERSIONS = frozenset({1, 2, 3})


def decode_data_block(block: LogBlock) -> pa.Table:
    """The rows of an AVRO_DATA, PARQUET_DATA or CDC_DATA block as an Arrow table.

    Avro records come out in the Arrow schema of :func:`hoodie.schema.avro_to_arrow_schema` of the block's
    SCHEMA header; a Parquet block as its Parquet file reads. Raises :class:`CorruptLogBlock` (naming the
    block's offset) when the content does not decode, :class:`UnsupportedTable` for an HFILE_DATA block.
    """
    if block.block_type in (BlockType.AVRO_DATA, BlockType.CDC_DATA):
        return _decode_avro_block(block)
    if block.block_type is BlockType.PARQUET_DATA:
        return _decode_parquet_block(block)
    if block.block_type is BlockType.HFILE_DATA:
        raise UnsupportedTable(
            f"{block.describe()}: HFile data blocks belong to the metadata table; "
            "data tables use Avro or Parquet"
        )
    raise ValueError(f"{block.describe()} is not a data block")


#: Arrow schema of a decoded HFILE_DATA block: the HFile's keys and values (Avro binary of the records).
HFILE_BLOCK_SCHEMA = pa.schema([pa.field("key", pa.string(), nullable=False), pa.field("value", pa.binary())])
#: Schema-metadata key under which :func:`decode_hfile_block` keeps the records' Avro writer schema (JSON).
AVRO_SCHEMA_METADATA = b"avro.schema"


def decode_hfile_block(block: LogBlock) -> pa.Table:
    """The entries of an HFILE_DATA block (the metadata table's log blocks) as an Arrow table of ``key``
    (string) and ``value`` (binary: the Avro binary of each record), in key order. The records' Avro writer
    schema (the SCHEMA header, else the HFile's ``schema`` file info) is in the schema metadata under
    :data:`AVRO_SCHEMA_METADATA`. Raises :class:`CorruptLogBlock` when the content is not a sound HFile."""
    if block.block_type is not BlockType.HFILE_DATA:
        raise ValueError(f"{block.describe()} is not an HFile data block")
    what = block.describe()
    try:
        reader = HFileReader(block.content, name=what)
        pairs = list(reader)
        info_schema = reader.file_info.get(b"schema")
    except HoodieError as e:
        raise CorruptLogBlock(f"{what}: its HFile does not read: {e}") from e
    try:
        keys = [k.decode("utf-8") for k, _ in pairs]
    except UnicodeDecodeError as e:
        raise CorruptLogBlock(f"{what}: an HFile key is not UTF-8: {e}") from e
    schema_json = block.schema or (info_schema.decode("utf-8", "replace") if info_schema else None)
    if schema_json is None:
        raise CorruptLogBlock(
            f"{what}: no SCHEMA header and no schema in the HFile, the records cannot be decoded"
        )
    table = pa.table(
        [pa.array(keys, pa.string()), pa.array([v for _, v in pairs], pa.binary())], schema=HFILE_BLOCK_SCHEMA
    )
    return table.replace_schema_metadata({AVRO_SCHEMA_METADATA: schema_json.encode("utf-8")})


def _decode_avro_block(block: LogBlock) -> pa.Table:
    what = block.describe()
    schema_json = block.schema
    if schema_json is None:
        raise CorruptLogBlock(f"{what}: no SCHEMA header, the records cannot be decoded")
    try:
        compiled = compile_avro_schema(schema_json)
    except HoodieError as e:
        raise CorruptLogBlock(f"{what}: its SCHEMA header is unusable: {e}") from e
    content = block.content
    size = len(content)
    if size < 8:
        raise CorruptLogBlock(f"{what}: {size} content bytes, too short for version and record count")
    version, count = _I32_PAIR.unpack_from(content, 0)
    if version not in _AVRO_BLOCK_VERSIONS:
        raise CorruptLogBlock(f"{what}: unknown Avro data block version {version}")
    if count < 0 or count > (size - 8) // 4:
        raise CorruptLogBlock(f"{what}: record count {count} does not fit in {size} content bytes")
    fast = _decode_avro_columnar(content, count, compiled)
    if fast is not None:
        return fast
    decode_schema = compiled.decode_schema
    reader = fastavro.schemaless_reader
    records: list[Any] = []
    stream = io.BytesIO(content)
    pos = 8
    try:
        for i in range(count):
            if pos + 4 > size:
                raise CorruptLogBlock(f"{what}: the content ends before record {i}")
            (length,) = _I32.unpack_from(content, pos)
            pos += 4
            if length < 0 or pos + length > size:
                raise CorruptLogBlock(f"{what}: record {i} length {length} runs past the content")
            stream.seek(pos)
            records.append(reader(stream, decode_schema))
            if stream.tell() != pos + length:
                raise CorruptLogBlock(
                    f"{what}: record {i} decodes to {stream.tell() - pos} bytes but its length says {length}"
                )
            pos += length
    except CorruptLogBlock:
        raise
    except Exception as e:  # fastavro raises many exception types on bad bytes
        raise CorruptLogBlock(
            f"{what}: record {len(records)} does not decode: {type(e).__name__}: {e}"
        ) from e
    if pos != size:
        raise CorruptLogBlock(f"{what}: {size - pos} bytes after the last of {count} records")
    try:
        return compiled.to_table(records)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as e:
        raise CorruptLogBlock(f"{what}: records do not fit their schema: {e}") from e


def _decode_avro_columnar(content: bytes, count: int, compiled: CompiledSchema) -> pa.Table | None:
    """The block's records decoded a column at a time (:mod:`hoodie.avro.columnar`), or None when the
    schema or the bytes need the record-by-record decoder (which then reports any damage precisely)."""
    size = len(content)
    starts = np.empty(count, dtype=np.int64)
    ends = np.empty(count, dtype=np.int64)
    unpack = _I32.unpack_from
    pos = 8
    for i in range(count):
        if pos + 4 > size:
            return None
        (length,) = unpack(content, pos)
        pos += 4
        if length < 0 or pos + length > size:
            return None
        starts[i] = pos
        pos += length
        ends[i] = pos
    if pos != size:
        return None
    return decode_columnar(content, starts, ends, compiled)


def _decode_parquet_block(block: LogBlock) -> pa.Table:
    try:
        return pq.ParquetFile(pa.BufferReader(block.content), page_checksum_verification=True).read()
    except (pa.ArrowException, OSError, ValueError, TypeError, IndexError) as e:
        raise CorruptLogBlock(f"{block.describe()}: its Parquet content does not read: {e}") from e


# -- delete blocks -------------------------------------------------------------------------------------------

DELETE_RECORD_KEY = "_hoodie_record_key"
DELETE_PARTITION_PATH = "_hoodie_partition_path"
DELETE_ORDERING_VALUE = "ordering_value"

_NS = "org.apache.hudi.avro.model"


def _wrapper(name: str, doc: str, value_type: Any) -> dict[str, Any]:
    """A Hudi ``*Wrapper`` record (HoodieMetadata.avsc): one field ``value`` holding an ordering value."""
    return {
        "namespace": _NS,
        "type": "record",
        "name": name,
        "doc": doc,
        "fields": [{"type": value_type, "name": "value"}],
    }


def _wrapped(kind: str) -> str:
    return f"A record wrapping {kind} type to be able to be used it w/in Avro's Union"


_SCALAR_WRAPPERS: tuple[dict[str, Any], ...] = (
    _wrapper("BooleanWrapper", _wrapped("boolean"), "boolean"),
    _wrapper("IntWrapper", _wrapped("int"), "int"),
    _wrapper("LongWrapper", _wrapped("long"), "long"),
    _wrapper("FloatWrapper", _wrapped("float"), "float"),
    _wrapper("DoubleWrapper", _wrapped("double"), "double"),
    _wrapper("BytesWrapper", _wrapped("bytes"), "bytes"),
    _wrapper("StringWrapper", _wrapped("string"), "string"),
    _wrapper("DateWrapper", _wrapped("Date logical"), {"type": "int"}),
    _wrapper(
        "DecimalWrapper",
        _wrapped("Decimal logical"),
        {"type": "bytes", "logicalType": "decimal", "precision": 30, "scale": 15},
    ),
    _wrapper(
        "TimeMicrosWrapper", _wrapped("Time-micros logical"), {"type": "long", "logicalType": "time-micros"}
    ),
    _wrapper("TimestampMicrosWrapper", _wrapped("Timestamp-micros logical"), {"type": "long"}),
)
_LOCAL_DATE_WRAPPER = _wrapper(
    "LocalDateWrapper",
    "A record wrapping Local Date type to be able to be used it w/in Avro's Union",
    {"type": "int"},
)
_ARRAY_WRAPPER: dict[str, Any] = {
    "namespace": _NS,
    "type": "record",
    "name": "ArrayWrapper",
    "doc": "A record containing a list of wrapped values.",
    "fields": [
        {
            "name": "wrappedValues",
            "doc": "An array where each element is one of the supported wrapper types.",
            "type": [
                "null",
                {
                    "type": "array",
                    "items": ["null", *(f"{_NS}.{w['name']}" for w in _SCALAR_WRAPPERS), _LOCAL_DATE_WRAPPER],
                },
            ],
            "default": None,
        }
    ],
}


def _delete_record_list_schema(ordering_branches: list[Any]) -> dict[str, Any]:
    return {
        "namespace": _NS,
        "type": "record",
        "name": "HoodieDeleteRecordList",
        "doc": "A list of delete records stored in the delete block in log block version 3",
        "fields": [
            {
                "name": "deleteRecordList",
                "doc": "A list of Hudi records to delete",
                "type": {
                    "type": "array",
                    "items": {
                        "name": "HoodieDeleteRecord",
                        "type": "record",
                        "doc": "Individual Hudi record to delete",
                        "fields": [
                            {
                                "name": "recordKey",
                                "doc": "Record key in String",
                                "type": ["null", "string"],
                                "default": None,
                            },
                            {
                                "name": "partitionPath",
                                "doc": "Partition path in String",
                                "type": ["null", "string"],
                                "default": None,
                            },
                            {
                                "name": "orderingVal",
                                "doc": "Ordering value determining the order of merging on the same key",
                                "type": ["null", *ordering_branches],
                                "default": None,
                            },
                        ],
                    },
                },
            }
        ],
    }


DELETE_RECORD_LIST_SCHEMAS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        # Hudi 1.1+ (table version 9): ArrayWrapper appended for multiple ordering fields (HUDI-9569).
        "hudi-1.1": _delete_record_list_schema([*_SCALAR_WRAPPERS, _ARRAY_WRAPPER]),
        # Hudi 0.14 to 1.0 (table versions 6 and 8): delete block version 3 (HUDI-5760).
        "hudi-0.14": _delete_record_list_schema(list(_SCALAR_WRAPPERS)),
    }
)
"""Our copy of ``HoodieDeleteRecordList`` (with ``HoodieDeleteRecord`` and the wrappers inlined) per Hudi
version, newest first: the order delete payloads are tried in. Wrapper definitions are inlined where first
used, since the originals live in HoodieMetadata.avsc."""

# The ordering value's wrapper records, each decoded under its own field name (a renamed field decodes the
# same bytes) so that Arrow sees which union branch a value took: (wrapper, field, decoded type, Arrow type).
_ORDERING_KINDS: tuple[tuple[str, str, pa.DataType, pa.DataType], ...] = (
    ("BooleanWrapper", "boolean", pa.bool_(), pa.bool_()),
    ("IntWrapper", "int", pa.int32(), pa.int32()),
    ("LongWrapper", "long", pa.int64(), pa.int64()),
    ("FloatWrapper", "float", pa.float32(), pa.float32()),
    ("DoubleWrapper", "double", pa.float64(), pa.float64()),
    ("BytesWrapper", "bytes", pa.binary(), pa.binary()),
    ("StringWrapper", "string", pa.string(), pa.string()),
    ("DateWrapper", "date", pa.int32(), pa.date32()),
    ("DecimalWrapper", "decimal", pa.decimal128(30, 15), pa.decimal128(30, 15)),
    ("TimeMicrosWrapper", "time_micros", pa.int64(), pa.time64("us")),
    ("TimestampMicrosWrapper", "timestamp_micros", pa.int64(), pa.timestamp("us", tz="UTC")),
    ("LocalDateWrapper", "local_date", pa.int32(), pa.date32()),
)
_KIND_FIELD = {f"{_NS}.{wrapper}": name for wrapper, name, _, _ in _ORDERING_KINDS}
_KIND_LOGICAL = {name: logical for _, name, _, logical in _ORDERING_KINDS}
_COMPOSITE = "array"
_SCALAR_STRUCT = pa.struct([pa.field(name, physical) for _, name, physical, _ in _ORDERING_KINDS])
_ORDERING_STRUCT = pa.struct(
    [
        *(pa.field(name, physical) for _, name, physical, _ in _ORDERING_KINDS),
        pa.field(_COMPOSITE, pa.list_(pa.field("element", _SCALAR_STRUCT))),
    ]
)
_DELETE_RECORD_STRUCT = pa.struct(
    [
        pa.field("recordKey", pa.string()),
        pa.field("partitionPath", pa.string()),
        pa.field("orderingVal", _ORDERING_STRUCT),
    ]
)
_INTEGERS = (pa.int32(), pa.int64())
_FLOATS = (pa.float32(), pa.float64())


def _decode_variant(schema: Any) -> Any:
    """The delete schema as we decode it: each wrapper's field renamed after its kind, time-micros as long."""
    if isinstance(schema, list):
        return [_decode_variant(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _decode_variant(v) for k, v in schema.items() if k not in ("doc", "default")}
    if out.get("type") == "record":
        full = out["name"] if "." in out["name"] else f"{out.get('namespace', _NS)}.{out['name']}"
        if full == f"{_NS}.ArrayWrapper":
            out["fields"] = [{**out["fields"][0], "name": _COMPOSITE}]
        elif full in _KIND_FIELD:
            value = out["fields"][0]["type"]
            if isinstance(value, dict) and value.get("logicalType") == "time-micros":
                value = "long"
            out["fields"] = [{"name": _KIND_FIELD[full], "type": value}]
    return out


_DELETE_DECODE_SCHEMAS: tuple[tuple[str, Any], ...] = tuple(
    (version, fastavro.parse_schema(_decode_variant(dict(schema))))
    for version, schema in DELETE_RECORD_LIST_SCHEMAS.items()
)


def decode_delete_block(block: LogBlock) -> pa.Table:
    """The deleted keys of a DELETE block: ``_hoodie_record_key``, ``_hoodie_partition_path`` (strings) and
    ``ordering_value`` (the Arrow type of the values' wrapper, numbers widened to a common type; null where a
    record has none, type null when none has one; a struct ``{"0": ..., "1": ...}`` for composite values).

    Raises :class:`CorruptLogBlock` (naming the offset) when the content does not decode as version 3, and for
    the Kryo-serialized versions 1 and 2 written before Hudi 0.14.
    """
    if block.block_type is not BlockType.DELETE:
        raise ValueError(f"{block.describe()} is not a delete block")
    what = block.describe()
    content = block.content
    if len(content) < 8:
        raise CorruptLogBlock(f"{what}: {len(content)} content bytes, too short for version and length")
    version, length = _I32_PAIR.unpack_from(content, 0)
    if version in (1, 2):
        raise CorruptLogBlock(
            f"{what}: delete block version {version} holds Kryo-serialized Java objects (Hudi before 0.14); "
            "only version 3 (Avro) can be read: compact the file group with Hudi first"
        )
    if version != 3:
        raise CorruptLogBlock(f"{what}: unknown delete block version {version}")
    if length < 0 or 8 + length != len(content):
        raise CorruptLogBlock(
            f"{what}: payload length {length} does not match {len(content) - 8} content bytes"
        )
    payload = content[8:]
    failures: list[str] = []
    for version_name, decode_schema in _DELETE_DECODE_SCHEMAS:
        stream = io.BytesIO(payload)
        try:
            decoded = fastavro.schemaless_reader(stream, decode_schema)
        except Exception as e:  # fastavro raises many exception types on bad bytes
            failures.append(f"{version_name}: {type(e).__name__}: {e}")
            continue
        if stream.tell() != len(payload):
            failures.append(f"{version_name}: decodes {stream.tell()} of {len(payload)} bytes")
            continue
        try:
            return _delete_table(cast(dict[str, Any], decoded)["deleteRecordList"])
        except UnsupportedTable as e:
            raise UnsupportedTable(f"{what}: {e}") from e
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as e:
            raise CorruptLogBlock(f"{what}: delete records do not convert: {e}") from e
    raise CorruptLogBlock(
        f"{what}: not a HoodieDeleteRecordList of any known Hudi version ({'; '.join(failures)})"
    )


def _delete_table(records: list[Any]) -> pa.Table:
    arr = pa.array(records, type=_DELETE_RECORD_STRUCT)
    key, partition, ordering = arr.flatten()
    return pa.table(
        {
            DELETE_RECORD_KEY: key,
            DELETE_PARTITION_PATH: partition,
            DELETE_ORDERING_VALUE: _unwrap_ordering(ordering),
        }
    )


def _unwrap_ordering(wrapped: pa.StructArray) -> pa.Array:
    """One column of ordering values out of the struct of per-kind columns (at most one set per row)."""
    children = dict(zip([f.name for f in wrapped.type], wrapped.flatten(), strict=True))
    present = [name for name, child in children.items() if child.null_count < len(child)]
    if not present:
        return pa.nulls(len(wrapped), pa.null())
    if _COMPOSITE in present:
        if len(present) > 1:
            raise UnsupportedTable("a delete block mixes composite and single ordering values")
        return _unwrap_composite(children[_COMPOSITE])
    return _coalesce_kinds({name: children[name] for name in present})


def _coalesce_kinds(columns: Mapping[str, pa.Array]) -> pa.Array:
    typed = {name: col.cast(_KIND_LOGICAL[name]) for name, col in columns.items()}
    if len(typed) == 1:
        return next(iter(typed.values()))
    types = {col.type for col in typed.values()}
    if types <= set(_INTEGERS):
        target = pa.int64()
    elif types <= set(_INTEGERS + _FLOATS):
        target = pa.float64()
    else:
        names = ", ".join(sorted(str(t) for t in types))
        raise UnsupportedTable(f"a delete block mixes ordering values of types {names}")
    return pc.coalesce(*(col.cast(target) for col in typed.values()))


def _unwrap_composite(lists: pa.ListArray) -> pa.Array:
    """Composite ordering values (ArrayWrapper) as a struct with one field per position, "0", "1", ..."""
    lengths = pc.list_value_length(lists)
    width = pc.max(lengths).as_py() or 0
    if pc.min(lengths).as_py() != width:
        raise UnsupportedTable("a delete block holds composite ordering values of different lengths")
    fields = []
    for i in range(width):
        element = pc.list_element(lists, i)
        fields.append(_unwrap_ordering(element))
    if not fields:
        return pa.nulls(len(lists), pa.null())
    return pa.StructArray.from_arrays(fields, names=[str(i) for i in range(width)], mask=lists.is_null())
