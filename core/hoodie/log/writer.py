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

Avro records are encoded column-wise by :mod:`hoodie.avro.encoder`, to the bytes of Avro's Java
``BinaryEncoder``.

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
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.avro.encoder import (
    AvroRows,
    compile_record_schema,
    concat_rows,
    conform_record_columns,
    encode_record_chunks,
    minimal_twos_complement,
)
from hoodie.config import SUPPORTED_VERSIONS
from hoodie.errors import FileAlreadyExists, InvalidFileName, UnsupportedTable
from hoodie.log.block import (
    DELETE_RECORD_LIST_SCHEMAS,
    LOG_FORMAT_VERSION,
    MAGIC,
    ROLLBACK_PREVIOUS_BLOCK,
    BlockType,
    HeaderKey,
)
from hoodie.log.log_file import LogFile
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
    content = [_I32_PAIR.pack(AVRO_DATA_BLOCK_VERSION, table.num_rows)]
    for n, fields in encode_record_chunks(table, avro_schema):
        sizes = np.sum([np.diff(f.offsets) for f in fields], axis=0, dtype=np.int64) if fields else 0
        prefixes = AvroRows.fixed(np.broadcast_to(sizes, n).astype(">i4").view(np.uint8), 4)
        content.append(concat_rows([prefixes, *fields], n).data.tobytes())
    header = _header(
        {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: avro_schema}, extra_headers, header_order
    )
    return frame_block(BlockType.AVRO_DATA, header, b"".join(content))


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
    compiled = compile_record_schema(avro_schema)
    rows = pa.Table.from_batches(
        [pa.RecordBatch.from_struct_array(conform_record_columns(table, compiled))],
        schema=compiled.arrow_schema,
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
        digits = minimal_twos_complement(cast.fill_null(0))
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
