"""Writing Hudi log files: the blocks (byte-compatible with Hudi's ``HoodieLogFormatWriter``) and the files.

Blocks follow the grammar of :mod:`hoodie.log.block` (all integers big-endian)::

    block   := "#HUDI#" int64 length, int32 1, int32 type, header, int64 content-length, content,
               footer (always int32 0), int64 reverse-pointer (= length + 6)
    header  := int32 count, count * (int32 key, int32 byte length, UTF-8 bytes)

    AVRO_DATA     header INSTANT_TIME, SCHEMA (+ extras)
                  content := int32 3, int32 count, count * (int32 length, Avro binary of the record in SCHEMA)
    PARQUET_DATA  header INSTANT_TIME, SCHEMA (+ extras)
                  content := a whole Parquet file of the records, GZIP by default
                             (``hoodie.parquet.compression.codec``), footer ``parquet.avro.schema`` = SCHEMA
    DELETE        header INSTANT_TIME (+ extras; Hudi's writers also add SCHEMA)
                  content := int32 3, int32 length, Avro binary (not a container) of HoodieDeleteRecordList
                             in the union order of the table version's Hudi: 0.14-1.0 for table versions 6
                             and 8, 1.1 (ArrayWrapper for composite ordering values) for 9
    COMMAND       header INSTANT_TIME, TARGET_INSTANT_TIME, COMMAND_BLOCK_TYPE "0" (rollback); no content

Hudi keeps a block's header in a ``java.util.HashMap`` keyed by an enum whose hash codes are identity hashes,
so the order of header entries in its files differs from one JVM run to the next (the fixture tables show
INSTANT_TIME before SCHEMA and after it). Readers look entries up by key. Our encoders write ascending key
order unless given ``header_order`` -- which is how an existing block is re-encoded byte for byte.

Avro records are encoded column-wise: the Arrow columns are cast to the ints the Avro schema's logical types
want, then each Avro type is encoded with numpy for all rows at once (zig-zag varints, length-prefixed
strings, two's complement decimals, union branch indexes, nested records, arrays and maps) and the per-row
byte strings of the fields are interleaved. The bytes are those of Avro's Java ``BinaryEncoder`` (minimal
two's complement decimals, one array block followed by a zero count). Only unions of two or more non-null
types (which Spark never writes) go through fastavro's ``schemaless_writer``, value by value; fastavro picks
the first branch a value fits, where Java goes by the value's class, so those bytes may differ from Hudi's.

Log files (see :mod:`hoodie.log.log_file` for the name grammar)::

    <partition>/.<fileId>_<instant>.log.<version>_<writeToken>

    table version 6   instant = the base instant of the file slice the blocks belong to
    table version 8+  instant = the instant of the deltacommit that writes the blocks

Each :func:`write_log_file` call creates new files and never appends to an existing one: the first file takes
the version after the highest one present for (file id, instant) in the partition (1 when there is none),
and each later file of the same call the next. Hudi 0.x appends to the latest log file where the file system
can append; object stores cannot, so there Hudi rolls over to a new version for every write too, and its
readers take the files of a slice in version order either way. For 8+ a deltacommit's files normally start
at version 1; a file already there (a retried task) moves the write to the next version. A file is rolled
over when the next block would take it past ``max_file_bytes`` (``hoodie.logfile.max.size``); a block larger
than that still goes alone in its own file. Files are created with the storage's atomic create-if-absent; a
name taken meanwhile by a concurrent writer moves the file to the next free version.
"""

from __future__ import annotations

import io
import posixpath
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.config import SUPPORTED_VERSIONS
from hoodie.errors import FileAlreadyExists, InvalidFileName, SchemaMismatch, UnsupportedTable
from hoodie.log.block import (
    DELETE_RECORD_LIST_SCHEMAS,
    LOG_FORMAT_VERSION,
    MAGIC,
    ROLLBACK_PREVIOUS_BLOCK,
    BlockType,
    HeaderKey,
)
from hoodie.log.log_file import LogFile
from hoodie.schema import CompiledSchema, compile_avro_schema
from hoodie.storage import Storage, check_relative
from hoodie.timeline.instant import check_time

__all__ = [
    "AVRO_DATA_BLOCK_VERSION",
    "DELETE_BLOCK_VERSION",
    "MAX_LOG_FILE_BYTES",
    "PARQUET_COMPRESSION_CODEC",
    "WrittenLogFile",
    "encode_avro_data_block",
    "encode_delete_block",
    "encode_parquet_data_block",
    "encode_rollback_command_block",
    "frame_block",
    "write_log_file",
]

AVRO_DATA_BLOCK_VERSION = 3
"""Content version of the Avro data blocks we write (Hudi's ``HoodieAvroDataBlock`` since 0.x)."""
DELETE_BLOCK_VERSION = 3
"""Content version of the delete blocks we write: Avro ``HoodieDeleteRecordList`` (Hudi 0.14+)."""
MAX_LOG_FILE_BYTES = 1024 * 1024 * 1024
"""``hoodie.logfile.max.size``: a log file is rolled over before it grows past this (Hudi's default)."""
PARQUET_COMPRESSION_CODEC = "gzip"
"""``hoodie.parquet.compression.codec``: Hudi's default, also for Parquet log blocks."""

# Hudi codec name -> (pyarrow codec, level): parquet-mr compresses GZIP at zlib's default level 6 (Hadoop's
# GzipCodec) and ZSTD at level 3 (parquet.compression.codec.zstd.level); pyarrow's own defaults differ.
_PARQUET_CODECS: dict[str, tuple[str, int | None]] = {
    "gzip": ("gzip", 6),
    "snappy": ("snappy", None),
    "zstd": ("zstd", 3),
    "lz4": ("lz4", None),
    "brotli": ("brotli", None),
    "uncompressed": ("none", None),
    "none": ("none", None),
}

_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I32_PAIR = struct.Struct(">ii")
_EMPTY_MAP = _I32.pack(0)
_WRITE_TOKEN_RE = re.compile(r"\d+-\d+-\d+")
_CREATE_ATTEMPTS = 100
_ROWS_PER_CHUNK = 65_536  # bounds the numpy temporaries of the Avro encoder


# -- framing -------------------------------------------------------------------------------------------------


def frame_block(block_type: BlockType, header: Mapping[int, str], content: bytes) -> bytes:
    """A whole block: magic, lengths, format version 1, ``block_type``, ``header`` (entries in the mapping's
    order), ``content``, an empty footer and the reverse pointer. Header keys must be :class:`HeaderKey`
    values (Hudi's readers fail on others)."""
    parts = [_I32_PAIR.pack(LOG_FORMAT_VERSION, int(BlockType(block_type))), _I32.pack(len(header))]
    for key, value in header.items():
        raw = value.encode("utf-8")
        parts.append(_I32_PAIR.pack(int(HeaderKey(key)), len(raw)))
        parts.append(raw)
    parts.append(_I64.pack(len(content)))
    parts.append(content)
    parts.append(_EMPTY_MAP)
    body_length = sum(len(p) for p in parts)
    length = body_length + 8  # the reverse pointer is counted in the block length
    return b"".join([MAGIC, _I64.pack(length), *parts, _I64.pack(len(MAGIC) + 8 + body_length)])


def _header(
    own: Mapping[HeaderKey, str],
    extra: Mapping[int, str] | None,
    order: Sequence[int] | None,
) -> dict[int, str]:
    """The header of a block: the encoder's own entries and the caller's extras, in ``order`` (default:
    ascending key)."""
    entries: dict[HeaderKey, str] = dict(own)
    for key, value in (extra or {}).items():
        try:
            k = HeaderKey(key)
        except ValueError:
            raise ValueError(
                f"{key} is not a log block header key (known: {[int(k) for k in HeaderKey]})"
            ) from None
        if k in entries:
            raise ValueError(f"header {k.name} is set by the encoder, not through extra_headers")
        if not isinstance(value, str):
            raise TypeError(f"header {k.name} must be a string, not {type(value).__name__}")
        entries[k] = value
    if order is None:
        return {int(k): entries[k] for k in sorted(entries)}
    keys = [HeaderKey(k) for k in order]
    if len(keys) != len(entries) or set(keys) != set(entries):
        names = sorted(k.name for k in entries)
        raise ValueError(f"header_order must list each header key once: {names}")
    return {int(k): entries[k] for k in keys}


# -- Avro data blocks ----------------------------------------------------------------------------------------


def encode_avro_data_block(
    table: pa.Table,
    avro_schema: str,
    *,
    instant_time: str,
    extra_headers: Mapping[int, str] | None = None,
    header_order: Sequence[int] | None = None,
) -> bytes:
    """An AVRO_DATA block of the rows of ``table`` in the Avro record schema ``avro_schema`` (JSON text,
    written as is in the SCHEMA header).

    Columns are matched to the schema's fields by name and cast to the Arrow types of
    :func:`hoodie.schema.avro_to_arrow_schema` (safe casts only); a field missing from ``table`` is written as
    null if its type allows. Raises :class:`SchemaMismatch` naming the column when the rows do not fit (a
    column the schema does not have, a cast that would lose data, a null where the type has no null, an
    unknown enum symbol), :class:`UnsupportedTable` for a schema we cannot use.
    """
    check_time(instant_time)
    compiled = _compile(avro_schema)
    physical = _conform(table, compiled)
    if compiled.needs_cast:
        physical = physical.cast(compiled.physical_type)
    encode = _record_encoder(avro_schema)
    n = len(physical)
    content = [_I32_PAIR.pack(AVRO_DATA_BLOCK_VERSION, n)]
    for start in range(0, n, _ROWS_PER_CHUNK):
        chunk = physical.slice(start, _ROWS_PER_CHUNK)
        fields = encode(chunk)
        sizes = np.sum([np.diff(f.offsets) for f in fields], axis=0, dtype=np.int64) if fields else 0
        prefixes = _Rows.fixed(np.broadcast_to(sizes, len(chunk)).astype(">i4").view(np.uint8), 4)
        content.append(_concat([prefixes, *fields], len(chunk)).data.tobytes())
    header = _header(
        {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: avro_schema}, extra_headers, header_order
    )
    return frame_block(BlockType.AVRO_DATA, header, b"".join(content))


def encode_avro_records(table: pa.Table, avro_schema: str) -> list[bytes]:
    """The Avro binary of each row of ``table`` in the record schema ``avro_schema``, column-wise as
    :func:`encode_avro_data_block` encodes them, without block framing (values of the metadata table's
    HFiles)."""
    compiled = _compile(avro_schema)
    physical = _conform(table, compiled)
    if compiled.needs_cast:
        physical = physical.cast(compiled.physical_type)
    encode = _record_encoder(avro_schema)
    out: list[bytes] = []
    for start in range(0, len(physical), _ROWS_PER_CHUNK):
        chunk = physical.slice(start, _ROWS_PER_CHUNK)
        rows = _concat(encode(chunk), len(chunk))
        data, offsets = rows.data.tobytes(), rows.offsets.tolist()
        out.extend(data[offsets[i] : offsets[i + 1]] for i in range(len(chunk)))
    return out


def _compile(avro_schema: str) -> CompiledSchema:
    if not isinstance(avro_schema, str):
        raise TypeError(f"avro_schema must be the schema's JSON text, not {type(avro_schema).__name__}")
    return compile_avro_schema(avro_schema)


def _conform(table: pa.Table, compiled: CompiledSchema) -> pa.StructArray:
    """The rows of ``table`` as a struct array of the schema's Arrow types (logical: timestamps etc.)."""
    if isinstance(table, pa.RecordBatch):
        table = pa.Table.from_batches([table])
    wanted = compiled.arrow_schema
    extra = [name for name in table.column_names if wanted.get_field_index(name) < 0]
    if extra:
        raise SchemaMismatch(f"columns {extra} are not fields of the Avro schema ({wanted.names})")
    if len(set(table.column_names)) != len(table.column_names):
        raise SchemaMismatch(f"the rows have duplicate column names: {table.column_names}")
    n = table.num_rows
    columns = []
    for f in wanted:
        if f.name in table.column_names:
            column = table.column(f.name).combine_chunks()
            if not column.type.equals(f.type):
                try:
                    column = column.cast(f.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                    raise SchemaMismatch(
                        f"column {f.name}: {column.type} cannot be written as {f.type}: {e}"
                    ) from e
        elif f.nullable:
            column = pa.nulls(n, f.type)
        else:
            raise SchemaMismatch(f"column {f.name} is missing and its Avro type {f.type} is not nullable")
        if not f.nullable and column.null_count:
            raise SchemaMismatch(f"column {f.name}: null value(s) where its Avro type has no null")
        columns.append(column)
    return (
        pa.StructArray.from_arrays(columns, fields=list(wanted))
        if columns
        else pa.array([{}] * n, pa.struct([]))
    )


# -- the column-wise Avro encoder ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Rows:
    """The Avro binary of n values: value i is ``data[offsets[i]:offsets[i + 1]]``; ``offsets[0] == 0``.
    ``width`` is set when every value has that many bytes."""

    offsets: npt.NDArray[np.int64]
    data: npt.NDArray[np.uint8]
    width: int | None = None

    @staticmethod
    def fixed(data: npt.NDArray[np.uint8], width: int) -> _Rows:
        n = len(data) // width if width else 0
        return _Rows(np.arange(n + 1, dtype=np.int64) * width, data, width)

    @staticmethod
    def constant(n: int, value: bytes) -> _Rows:
        return _Rows.fixed(np.tile(np.frombuffer(value, np.uint8), n), len(value))

    @staticmethod
    def empty(n: int) -> _Rows:
        return _Rows(np.zeros(n + 1, np.int64), np.empty(0, np.uint8), 0)


_Encoder = Callable[[Any], list[_Rows]]
"""Encodes every value of an Arrow array (of the schema's physical type) to Avro binary: the encoding of
value i is the concatenation of row i of every part returned (parts are only joined where they must be, so
that each byte is copied once more at most)."""


def _offsets(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _concat(parts: Sequence[_Rows], n: int) -> _Rows:
    """Row i of the result is row i of every part, in order (the fields of a record, a prefix and a value)."""
    if not parts:
        return _Rows.empty(n)
    if len(parts) == 1:
        return parts[0]
    lengths = [np.diff(p.offsets) for p in parts]
    offsets = _offsets(np.sum(lengths, axis=0, dtype=np.int64))
    data = np.empty(int(offsets[-1]), np.uint8)
    start = offsets[:-1].copy()
    for part, length in zip(parts, lengths, strict=True):
        if part.data.size:
            if part.width is not None:
                index = (start[:, None] + np.arange(part.width, dtype=np.int64)).ravel()
            else:
                index = np.repeat(start - part.offsets[:-1], length) + np.arange(
                    part.data.size, dtype=np.int64
                )
            data[index] = part.data
        start += length
    return _Rows(offsets, data)


def _expand(present: _Rows, valid: npt.NDArray[np.bool_]) -> _Rows:
    """Rows of ``present`` at the valid positions, empty rows elsewhere."""
    lengths = np.zeros(len(valid), np.int64)
    lengths[valid] = np.diff(present.offsets)
    return _Rows(_offsets(lengths), present.data)


def _zigzag(values: npt.NDArray[Any]) -> npt.NDArray[np.uint64]:
    v = values.astype(np.int64, copy=False)
    return ((v << np.int64(1)) ^ (v >> np.int64(63))).view(np.uint64)


def _varints(z: npt.NDArray[np.uint64]) -> _Rows:
    """Avro's variable-length encoding of unsigned (already zig-zagged) longs: 7 bits a byte, low first."""
    n = len(z)
    seven = np.uint64(7)
    sizes = np.ones(n, np.int64)
    rest = z >> seven
    while True:
        more = rest != 0
        if not more.any():
            break
        sizes += more
        rest >>= seven
    if n == 0 or int(sizes.max()) == 1:
        return _Rows.fixed(z.astype(np.uint8), 1)
    offsets = _offsets(sizes)
    data = np.empty(int(offsets[-1]), np.uint8)
    rows = np.arange(n)
    value = z.copy()
    j = 0
    while rows.size:
        low = (value & np.uint64(0x7F)).astype(np.uint8)
        last = sizes[rows] == j + 1
        data[offsets[rows] + j] = np.where(last, low, low | np.uint8(0x80))
        keep = ~last
        rows = rows[keep]
        value = value[keep] >> seven
        j += 1
    return _Rows(offsets, data)


def _no_nulls(arr: Any, path: str, avro_type: str) -> None:
    if arr.null_count:
        raise SchemaMismatch(
            f"{path or '<record>'}: null value(s) where the Avro type {avro_type} has no null"
        )


def _long_encoder(path: str, avro_type: str) -> _Encoder:
    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, avro_type)
        return [_varints(_zigzag(arr.to_numpy(zero_copy_only=False)))]

    return encode


def _float_encoder(path: str, avro_type: str, dtype: str) -> _Encoder:
    width = np.dtype(dtype).itemsize

    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, avro_type)
        values = np.ascontiguousarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)
        return [_Rows.fixed(values.view(np.uint8), width)]

    return encode


def _boolean_encoder(path: str) -> _Encoder:
    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, "boolean")
        return [_Rows.fixed(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.uint8), 1)]

    return encode


def _null_encoder(path: str) -> _Encoder:
    def encode(arr: Any) -> list[_Rows]:
        if arr.null_count != len(arr):
            raise SchemaMismatch(f"{path or '<record>'}: value(s) where the Avro type is null")
        return []

    return encode


def _binary_encoder(path: str, avro_type: str) -> _Encoder:
    """string and bytes: the length, then the bytes (Arrow string/binary with int32 offsets)."""

    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, avro_type)
        n = len(arr)
        if not n:
            return [_Rows.empty(0)]
        buffers = arr.buffers()
        offsets = np.frombuffer(buffers[1], np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
        first, last = int(offsets[0]), int(offsets[-1])
        data = np.frombuffer(buffers[2], np.uint8)[first:last] if last > first else np.empty(0, np.uint8)
        return [_varints(_zigzag(np.diff(offsets))), _Rows(offsets - first, data)]

    return encode


def _fixed_encoder(path: str, size: int) -> _Encoder:
    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, f"fixed({size})")
        n = len(arr)
        if not n:
            return [_Rows.empty(0)]
        data = np.frombuffer(arr.buffers()[1], np.uint8, count=n * size, offset=arr.offset * size)
        return [_Rows.fixed(data, size)]

    return encode


_BIT_LENGTH = np.array([i.bit_length() for i in range(256)], np.int64)


def _big_endian(arr: Any) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """The unscaled values of an Arrow decimal array as big-endian two's complement rows, and their signs."""
    n, width = len(arr), arr.type.byte_width
    if not n:
        return np.empty((0, width), np.uint8), np.empty(0, np.bool_)
    raw = np.frombuffer(arr.buffers()[1], np.uint8, count=n * width, offset=arr.offset * width)
    rows = np.ascontiguousarray(raw.reshape(n, width)[:, ::-1])
    return rows, rows[:, 0] >= 0x80


def _minimal_twos_complement(arr: Any) -> _Rows:
    """Java's ``BigInteger.toByteArray`` of each unscaled value: the fewest bytes holding it and its sign."""
    rows, negative = _big_endian(arr)
    n, width = rows.shape
    magnitude = np.where(negative[:, None], ~rows, rows)
    nonzero = magnitude != 0
    first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), width)
    top = magnitude[np.arange(n), np.minimum(first, width - 1)]
    bits = np.where(first < width, (width - first - 1) * 8 + _BIT_LENGTH[top], 0)
    sizes = bits // 8 + 1
    offsets = _offsets(sizes)
    within = np.arange(int(offsets[-1]), dtype=np.int64) - np.repeat(offsets[:-1], sizes)
    source = np.repeat(np.arange(n, dtype=np.int64) * width + width - sizes, sizes) + within
    return _Rows(offsets, rows.reshape(-1)[source])


def _decimal_bytes_encoder(path: str) -> _Encoder:
    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, "decimal")
        digits = _minimal_twos_complement(arr)
        return [_varints(_zigzag(np.diff(digits.offsets))), digits]

    return encode


def _decimal_fixed_encoder(path: str, size: int) -> _Encoder:
    """Sign-extended (or cut) to the fixed size, as Avro's ``DecimalConversion.toFixed``."""

    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, f"decimal fixed({size})")
        rows, negative = _big_endian(arr)
        width = rows.shape[1]
        if size <= width:
            out = rows[:, width - size :]
        else:
            fill = np.repeat(np.where(negative, 0xFF, 0x00).astype(np.uint8)[:, None], size - width, axis=1)
            out = np.hstack([fill, rows])
        return [_Rows.fixed(np.ascontiguousarray(out).reshape(-1), size)]

    return encode


def _enum_encoder(path: str, symbols: Sequence[str]) -> _Encoder:
    value_set = pa.array(list(symbols), pa.string())

    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, "enum")
        index = pc.index_in(arr, value_set=value_set)
        if index.null_count:
            unknown = pc.unique(arr.filter(index.is_null())).to_pylist()
            raise SchemaMismatch(f"{path}: {unknown[:5]} are not symbols of the enum {list(symbols)}")
        return [_varints(_zigzag(index.to_numpy(zero_copy_only=False)))]

    return encode


def _record_fields_encoder(fields: Sequence[tuple[str, _Encoder]], path: str) -> _Encoder:
    """A record: its fields one after the other."""

    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, "record")
        return [part for i, (_, field) in enumerate(fields) for part in field(arr.field(i))]

    return encode


def _repeated_encoder(items: _Encoder, path: str, avro_type: str) -> _Encoder:
    """array and map: per row one block (item count, then the items) when not empty, then a zero count."""

    def encode(arr: Any) -> list[_Rows]:
        _no_nulls(arr, path, avro_type)
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        first = int(offsets[0])
        values = arr.values.slice(first, int(offsets[-1]) - first)
        encoded = _concat(items(values), len(values))
        counts = np.diff(offsets)
        present = counts > 0
        return [
            _expand(_varints(_zigzag(counts[present])), present),
            _Rows(encoded.offsets[offsets - first], encoded.data),
            _Rows.constant(len(arr), b"\x00"),
        ]

    return encode


def _union_encoder(branches: Sequence[Any], names: Mapping[str, Any], path: str) -> _Encoder:
    """A union with at most one non-null branch: the branch index (a zig-zag varint), then the value."""
    nulls = [i for i, b in enumerate(branches) if b == "null"]
    values = [i for i, b in enumerate(branches) if b != "null"]
    if len(values) > 1:
        return _fastavro_encoder(list(branches), names, path)
    null_tag = bytes([nulls[0] << 1]) if nulls else None  # zig-zag of a small index: one byte
    value_tag = bytes([values[0] << 1]) if values else None
    value = _encoder(branches[values[0]], names, path) if values else _null_encoder(path)

    def encode(arr: Any) -> list[_Rows]:
        n = len(arr)
        if value_tag is not None and not arr.null_count:
            return [_Rows.constant(n, value_tag), *value(arr)]
        if null_tag is None:
            raise SchemaMismatch(f"{path}: null value(s) where the union {list(branches)} has no null")
        if value_tag is None:
            return [_Rows.constant(n, null_tag), *value(arr)]
        valid = arr.is_valid()
        mask = valid.to_numpy(zero_copy_only=False)
        tags = _Rows.fixed(np.where(mask, value_tag[0], null_tag[0]).astype(np.uint8), 1)
        return [tags, *(_expand(part, mask) for part in value(arr.filter(valid)))]

    return encode


def _fastavro_encoder(schema: Any, names: Mapping[str, Any], path: str) -> _Encoder:
    """Value by value with fastavro, for what the column-wise encoder does not do (multi-type unions)."""
    wrapper = {
        "type": "record",
        "name": "hoodie_writer_value",
        "fields": [{"name": "v", "type": _inline(schema, names, set())}],
    }
    parsed = fastavro.parse_schema(wrapper)
    writer = fastavro.schemaless_writer

    def encode(arr: Any) -> list[_Rows]:
        buf = io.BytesIO()
        lengths = np.empty(len(arr), np.int64)
        for i, v in enumerate(arr.to_pylist(maps_as_pydicts="strict")):
            start = buf.tell()
            try:
                writer(buf, parsed, {"v": v})
            except (ValueError, TypeError, KeyError, OverflowError) as e:
                raise SchemaMismatch(f"{path}: value {v!r} does not fit its Avro type: {e}") from e
            lengths[i] = buf.tell() - start
        return [_Rows(_offsets(lengths), np.frombuffer(buf.getvalue(), np.uint8))]

    return encode


def _inline(schema: Any, names: Mapping[str, Any], defined: set[str]) -> Any:
    """A self-contained copy of a parsed sub-schema: named types referred to by name are defined inline at
    their first use, fastavro's bookkeeping keys dropped."""
    if isinstance(schema, str):
        if schema in names and schema not in defined:
            return _inline(names[schema], names, defined)
        return schema
    if isinstance(schema, list):
        return [_inline(s, names, defined) for s in schema]
    out = {k: v for k, v in schema.items() if not k.startswith("__")}
    if "name" in out and out.get("type") in ("record", "error", "enum", "fixed"):
        defined.add(out["name"])
    if "fields" in out:
        out["fields"] = [{**f, "type": _inline(f["type"], names, defined)} for f in out["fields"]]
    for key in ("items", "values"):
        if key in out:
            out[key] = _inline(out[key], names, defined)
    return out


def _encoder(schema: Any, names: Mapping[str, Any], path: str) -> _Encoder:
    """The encoder of one (fastavro-parsed, logical types stripped but decimal) Avro type."""
    if isinstance(schema, list):
        return _union_encoder(schema, names, path)
    if isinstance(schema, str):
        if schema in names:
            return _encoder(names[schema], names, path)
        return _primitive_encoder(schema, path)
    kind = schema["type"]
    if isinstance(kind, list | dict):
        return _encoder(kind, names, path)
    if kind in ("record", "error"):
        fields = [
            (f["name"], _encoder(f["type"], names, f"{path}.{f['name']}" if path else f["name"]))
            for f in schema["fields"]
        ]
        return _record_fields_encoder(fields, path)
    if kind == "enum":
        return _enum_encoder(path, schema["symbols"])
    if kind == "fixed":
        if schema.get("logicalType") == "decimal":
            return _decimal_fixed_encoder(path, schema["size"])
        return _fixed_encoder(path, schema["size"])
    if kind == "array":
        return _repeated_encoder(_encoder(schema["items"], names, f"{path}[]"), path, "array")
    if kind == "map":
        key = _binary_encoder(f"{path}{{key}}", "string")
        value = _encoder(schema["values"], names, f"{path}{{}}")

        def entry(arr: Any) -> list[_Rows]:
            return [*key(arr.field(0)), *value(arr.field(1))]

        return _repeated_encoder(entry, path, "map")
    if kind == "bytes" and schema.get("logicalType") == "decimal":
        return _decimal_bytes_encoder(path)
    if kind in names:
        return _encoder(names[kind], names, path)
    return _primitive_encoder(kind, path)


def _primitive_encoder(kind: str, path: str) -> _Encoder:
    if kind in ("int", "long"):
        return _long_encoder(path, kind)
    if kind == "float":
        return _float_encoder(path, kind, "<f4")
    if kind == "double":
        return _float_encoder(path, kind, "<f8")
    if kind == "boolean":
        return _boolean_encoder(path)
    if kind in ("string", "bytes"):
        return _binary_encoder(path, kind)
    if kind == "null":
        return _null_encoder(path)
    raise UnsupportedTable(f"field {path or '<root>'}: unknown Avro type {kind!r}")


@lru_cache(maxsize=64)
def _record_encoder(avro_schema: str) -> _Encoder:
    decode_schema = compile_avro_schema(avro_schema).decode_schema
    names = decode_schema.get("__named_schemas", {})
    return _encoder(decode_schema, names, "")


# -- Parquet data blocks -------------------------------------------------------------------------------------


def encode_parquet_data_block(
    table: pa.Table,
    avro_schema: str,
    *,
    instant_time: str,
    compression: str = PARQUET_COMPRESSION_CODEC,
    extra_headers: Mapping[int, str] | None = None,
    header_order: Sequence[int] | None = None,
) -> bytes:
    """A PARQUET_DATA block (``hoodie.logfile.data.block.format=parquet``): the rows of ``table``, conformed
    to ``avro_schema`` as for :func:`encode_avro_data_block`, as one Parquet file compressed with
    ``compression`` (a ``hoodie.parquet.compression.codec`` value: gzip, snappy, zstd, lz4, uncompressed).

    Like Hudi's (parquet-avro) blocks the file's footer carries ``parquet.avro.schema`` (the schema text) and
    ``writer.model.name`` ``avro``. The Parquet bytes themselves differ from parquet-mr's (another writer).
    """
    check_time(instant_time)
    codec = _PARQUET_CODECS.get(compression.lower())
    if codec is None:
        raise ValueError(
            f"hoodie.parquet.compression.codec={compression!r} is not one of {sorted(_PARQUET_CODECS)}"
        )
    compiled = _compile(avro_schema)
    rows = pa.Table.from_batches(
        [pa.RecordBatch.from_struct_array(_conform(table, compiled))], schema=compiled.arrow_schema
    )
    sink = pa.BufferOutputStream()
    name, level = codec
    with pq.ParquetWriter(
        sink,
        rows.schema,
        compression=name,
        compression_level=level,
        store_schema=False,
        write_page_checksum=True,  # as parquet-mr (Hudi) does: damaged pages are caught on read
    ) as writer:
        writer.write_table(rows)
        writer.add_key_value_metadata({"parquet.avro.schema": avro_schema, "writer.model.name": "avro"})
    header = _header(
        {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: avro_schema}, extra_headers, header_order
    )
    return frame_block(BlockType.PARQUET_DATA, header, sink.getvalue().to_pybytes())


# -- delete blocks -------------------------------------------------------------------------------------------

_NS = "org.apache.hudi.avro.model."
# Arrow type -> (wrapper record of the ordering value, the Arrow type its value is taken from). Hudi wraps by
# the Java class of the value (HoodieAvroUtils.wrapValueIntoAvro): Integer, Long, Float, Double, ByteBuffer,
# String, Boolean, java.sql.Date, BigDecimal, java.sql.Timestamp. Hudi never wraps a time itself (its reader
# takes a TimeMicrosWrapper as the plain long); we write Arrow times that way rather than refuse them.
_WRAPPERS: tuple[tuple[Callable[[Any], bool], str, pa.DataType], ...] = (
    (pa.types.is_boolean, "BooleanWrapper", pa.bool_()),
    (lambda t: pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t), "IntWrapper", pa.int32()),
    (lambda t: pa.types.is_uint8(t) or pa.types.is_uint16(t), "IntWrapper", pa.int32()),
    (
        lambda t: pa.types.is_int64(t) or pa.types.is_uint32(t) or pa.types.is_uint64(t),
        "LongWrapper",
        pa.int64(),
    ),
    (lambda t: pa.types.is_float16(t) or pa.types.is_float32(t), "FloatWrapper", pa.float32()),
    (pa.types.is_float64, "DoubleWrapper", pa.float64()),
    (
        lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t),
        "BytesWrapper",
        pa.binary(),
    ),
    (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "StringWrapper", pa.string()),
    (pa.types.is_date, "DateWrapper", pa.date32()),
    (pa.types.is_decimal, "DecimalWrapper", pa.decimal128(30, 15)),
    (pa.types.is_time, "TimeMicrosWrapper", pa.time64("us")),
    (pa.types.is_timestamp, "TimestampMicrosWrapper", pa.timestamp("us")),
)
_PHYSICAL = {pa.date32(): pa.int32(), pa.time64("us"): pa.int64(), pa.timestamp("us"): pa.int64()}


def _delete_schema_version(table_version: int) -> str:
    _check_table_version(table_version)
    # Table version 9 is written by Hudi 1.1, whose union adds ArrayWrapper (composite ordering values) at
    # the end; the branches before it are the same, so scalar ordering values encode alike in both.
    return "hudi-1.1" if table_version >= 9 else "hudi-0.14"


@lru_cache(maxsize=4)
def _delete_writer_schema(version: str) -> Any:
    return fastavro.parse_schema(dict(DELETE_RECORD_LIST_SCHEMAS[version]))


def encode_delete_block(
    record_keys: pa.Array | pa.ChunkedArray,
    partition_paths: pa.Array | pa.ChunkedArray,
    ordering_values: pa.Array | pa.ChunkedArray | None,
    *,
    instant_time: str,
    table_version: int,
    extra_headers: Mapping[int, str] | None = None,
    header_order: Sequence[int] | None = None,
) -> bytes:
    """A DELETE block (content version 3) of the keys ``record_keys`` in ``partition_paths`` (strings, one per
    key; a null partition path is written as null).

    ``ordering_values`` (None: none at all) are wrapped as Hudi wraps Java values: booleans, ints (8-32 bit),
    longs (also unsigned 32/64 bit), floats, doubles, bytes, strings, dates (DateWrapper), decimals (rescaled
    to decimal(30, 15), DecimalWrapper), times (TimeMicrosWrapper) and timestamps (micros,
    TimestampMicrosWrapper); a null value is the null branch. A struct array holds composite ordering values
    (one wrapped value per field, ArrayWrapper), table version 9 only. The union order is that of the Hudi
    version of ``table_version``. Raises :class:`UnsupportedTable` for other types and table versions.
    """
    check_time(instant_time)
    version = _delete_schema_version(table_version)
    keys = _strings(record_keys, "record_keys")
    partitions = _strings(partition_paths, "partition_paths")
    if len(keys) != len(partitions):
        raise ValueError(f"{len(keys)} record keys but {len(partitions)} partition paths")
    if keys.null_count:
        raise ValueError(f"{keys.null_count} record key(s) are null: a delete names its record by key")
    n = len(keys)
    if ordering_values is None:
        ordering: list[Any] = [None] * n
    else:
        values = _combine(ordering_values)
        if len(values) != n:
            raise ValueError(f"{n} record keys but {len(values)} ordering values")
        ordering = _wrap_ordering(values, composite=version == "hudi-1.1")
    records = [
        {"recordKey": k, "partitionPath": p, "orderingVal": o}
        for k, p, o in zip(keys.to_pylist(), partitions.to_pylist(), ordering, strict=True)
    ]
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _delete_writer_schema(version), {"deleteRecordList": records})
    payload = buf.getvalue()
    content = _I32_PAIR.pack(DELETE_BLOCK_VERSION, len(payload)) + payload
    header = _header({HeaderKey.INSTANT_TIME: instant_time}, extra_headers, header_order)
    return frame_block(BlockType.DELETE, header, content)


def _combine(values: pa.Array | pa.ChunkedArray) -> Any:
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def _strings(values: pa.Array | pa.ChunkedArray, what: str) -> Any:
    arr = _combine(values)
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_null(arr.type)):
        raise TypeError(f"{what} must be strings, not {arr.type}")
    return arr.cast(pa.string())


def _wrap_ordering(values: Any, *, composite: bool) -> list[Any]:
    """Per row the ordering value as fastavro's union notation ``(wrapper name, record)``, or None."""
    t = values.type
    if pa.types.is_null(t):
        return [None] * len(values)
    if pa.types.is_struct(t):
        if not composite:
            raise UnsupportedTable(
                "composite ordering values (several ordering fields) came with Hudi 1.1 (table version 9)"
            )
        columns = [_wrap_scalars(values.field(i)) for i in range(t.num_fields)]
        valid = values.is_valid().to_pylist()
        return [
            (_NS + "ArrayWrapper", {"wrappedValues": list(items)}) if ok else None
            for ok, items in zip(
                valid, zip(*columns, strict=True) if columns else [()] * len(values), strict=True
            )
        ]
    return _wrap_scalars(values)


def _wrap_scalars(values: Any) -> list[Any]:
    t = values.type
    if pa.types.is_null(t):
        return [None] * len(values)
    found = next(((w, vt) for matches, w, vt in _WRAPPERS if matches(t)), None)
    if found is None:
        raise UnsupportedTable(f"ordering values of type {t} cannot be written in a delete block")
    wrapper, value_type = found
    try:
        cast = values.cast(value_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise UnsupportedTable(f"ordering values of type {t} do not fit the {wrapper} of Hudi: {e}") from e
    if wrapper == "DecimalWrapper":
        digits = _minimal_twos_complement(cast.fill_null(0))
        data = digits.data.tobytes()
        offsets = digits.offsets.tolist()
        plain: list[Any] = [data[offsets[i] : offsets[i + 1]] for i in range(len(cast))]
        plain = [v if ok else None for v, ok in zip(plain, cast.is_valid().to_pylist(), strict=True)]
    else:
        physical = _PHYSICAL.get(value_type)
        plain = (cast if physical is None else cast.cast(physical)).to_pylist()
    name = _NS + wrapper
    return [None if v is None else (name, {"value": v}) for v in plain]


# -- command blocks ------------------------------------------------------------------------------------------


def encode_rollback_command_block(
    *, instant_time: str, target_instant_time: str, header_order: Sequence[int] | None = None
) -> bytes:
    """A COMMAND block rolling back the blocks of ``target_instant_time`` (COMMAND_BLOCK_TYPE "0",
    ROLLBACK_BLOCK), written by the rollback ``instant_time``."""
    check_time(instant_time)
    check_time(target_instant_time)
    own = {
        HeaderKey.INSTANT_TIME: instant_time,
        HeaderKey.TARGET_INSTANT_TIME: target_instant_time,
        HeaderKey.COMMAND_BLOCK_TYPE: ROLLBACK_PREVIOUS_BLOCK,
    }
    return frame_block(BlockType.COMMAND, _header(own, None, header_order), b"")


# -- log files -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WrittenLogFile:
    """A log file :func:`write_log_file` created: its path relative to the table's base path, its parsed
    name, its size and the number of blocks in it."""

    path: str
    log_file: LogFile
    size_bytes: int
    blocks: int


def _check_table_version(table_version: int) -> None:
    if table_version not in SUPPORTED_VERSIONS:
        raise UnsupportedTable(
            f"table version {table_version} is not supported for writing log files (supported: 6, 8, 9)"
        )


def write_log_file(
    storage: Storage,
    partition_path: str,
    file_id: str,
    instant: str,
    blocks: Sequence[bytes],
    *,
    table_version: int,
    write_token: str,
    max_file_bytes: int = MAX_LOG_FILE_BYTES,
    before_create: Callable[[LogFile], None] | None = None,
) -> list[WrittenLogFile]:
    """Write ``blocks`` (framed, e.g. by the ``encode_*`` functions) to new log files of file group
    ``file_id`` in ``partition_path`` ("" when the table is not partitioned), in order; see the module doc for
    the naming and rollover rules. ``instant`` is the slice's base instant for table version 6 and the
    deltacommit's instant for 8+.

    Returns the files written, in version order (none for no blocks). If a create fails half-way, the files
    already written stay: they belong to an instant that is not complete, so readers ignore them, and a
    rollback of the instant removes them. Raises :class:`InvalidFileName` for a file id or write token that
    does not make a valid name, :class:`FileAlreadyExists` when no free version is found after many tries.
    ``before_create`` is called with each file's name before it is created (to write its marker).
    """
    _check_table_version(table_version)
    check_time(instant)
    partition = check_relative(partition_path)
    if not _WRITE_TOKEN_RE.fullmatch(write_token):
        raise InvalidFileName(
            f"write token {write_token!r} is not <taskPartitionId>-<stageId>-<taskAttemptId>"
        )
    probe = LogFile(file_id, instant, 1, write_token)
    if "/" in file_id or not file_id or LogFile.try_parse(probe.file_name) != probe:
        raise InvalidFileName(f"file id {file_id!r} does not make a log file name that parses back")
    if max_file_bytes <= 0:
        raise ValueError(f"hoodie.logfile.max.size must be positive, not {max_file_bytes}")
    for i, block in enumerate(blocks):
        if not block.startswith(MAGIC):
            raise ValueError(f"block {i} does not start with the block magic {MAGIC!r}")
    written: list[WrittenLogFile] = []
    version = 0
    for group in _roll_over(blocks, max_file_bytes):
        data = b"".join(group)
        version = max(version + 1, _next_version(storage, partition, file_id, instant))
        for _ in range(_CREATE_ATTEMPTS):
            log_file = LogFile(file_id, instant, version, write_token)
            path = posixpath.join(partition, log_file.file_name) if partition else log_file.file_name
            if before_create is not None:
                before_create(log_file)
            try:
                storage.create(path, data)
                break
            except FileAlreadyExists:
                version = max(version + 1, _next_version(storage, partition, file_id, instant))
        else:
            raise FileAlreadyExists(
                f"no free log file version for {file_id} at {instant} in {partition or '<table>'} after "
                f"{_CREATE_ATTEMPTS} tries (last {path})"
            )
        written.append(WrittenLogFile(path, log_file, len(data), len(group)))
    return written


def _roll_over(blocks: Sequence[bytes], max_file_bytes: int) -> list[list[bytes]]:
    """Blocks grouped into files: a file takes blocks while they fit in ``max_file_bytes`` (at least one)."""
    files: list[list[bytes]] = []
    current: list[bytes] = []
    size = 0
    for block in blocks:
        if current and size + len(block) > max_file_bytes:
            files.append(current)
            current, size = [], 0
        current.append(block)
        size += len(block)
    if current:
        files.append(current)
    return files


def _next_version(storage: Storage, partition: str, file_id: str, instant: str) -> int:
    """One more than the highest version of the log files of (``file_id``, ``instant``), or 1."""
    highest = 0
    for info in storage.list(partition):
        parsed = LogFile.try_parse(info.name)
        if (
            parsed is not None
            and parsed.extension == "log"
            and parsed.file_id == file_id
            and parsed.instant == instant
        ):
            highest = max(highest, parsed.version)
    return highest + 1
