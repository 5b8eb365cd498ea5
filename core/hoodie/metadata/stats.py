"""Column and partition statistics of the metadata table: their keys, reading them from a Parquet footer, and
the ``HoodieMetadataRecord`` values Hudi writes for them.

Keys (:func:`column_stats_key`, :func:`partition_stats_key`, :func:`bloom_filter_key`) are concatenated
Base64 strings (standard alphabet, with padding) of hashes, column first, then partition, then file::

    column_stats     B64(XXH64(column)) + B64(XXH64(partition)) + B64(MD5(file name))   48 characters
    partition_stats  B64(XXH64(column)) + B64(XXH64(partition))                          24 characters
    bloom_filters    B64(XXH64(partition)) + B64(MD5(file name))                         36 characters

XXH64 runs over the UTF-8 bytes with seed ``0xFFFFFFFFDABADABA`` (Hudi's int seed ``0xdabadaba`` widened to a
long) and is written as 8 big-endian bytes; MD5 gives 16. The partition is named as the ``files`` partition
names it: a non-partitioned table's ``""`` is ``"."``. :func:`file_group_index` says which file group of a
metadata-table partition holds a key.

Statistics of a base file come from its Parquet footer alone (:func:`parquet_column_stats`), summed over row
groups like Hudi's ``ParquetUtils``: ``value_count`` is the column chunks' value count (rows, nulls
included), ``total_size`` / ``total_uncompressed_size`` the chunks' compressed / uncompressed bytes.
:func:`column_stats_records` turns them into type-3 records, :func:`partition_stats_records` aggregates the
statistics of a partition's files into type-6 records. How a minimum or maximum is wrapped depends on the
table version (the one place where it branches):

=================  ======================================  ===============================================
value              table versions 6 and 8                  table version 9 (with ``valueType``)
=================  ======================================  ===============================================
date               ``DateWrapper`` (days)                  ``IntWrapper`` (days), DATE
decimal            ``DecimalWrapper`` (scale 15)           ``BytesWrapper`` (unscaled, two's complement),
                                                           DECIMAL with ``additionalInfo`` ``"p,s"``
timestamp, time    ``LongWrapper`` / ``IntWrapper`` of     the same, typed TIMESTAMP_/LOCAL_TIMESTAMP_
                   the raw Parquet value (unit kept)       MILLIS/MICROS/NANOS, TIME_MILLIS/MICROS
other              the wrapper of the Avro primitive       the same
=================  ======================================  ===============================================

Minima and maxima handed to fastavro name their union branch (``("org.apache.hudi.avro.model.LongWrapper",
{"value": 5})``): the wrappers all look alike as dicts, and fastavro would otherwise pick the first that fits.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from functools import cache
from importlib import resources
from typing import Any

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import UnsupportedTable
from hoodie.metadata.records import NON_PARTITIONED_NAME, MetadataRecord, RecordType
from hoodie.storage import Storage

__all__ = [
    "HASH_SEED",
    "ColumnStats",
    "ValueType",
    "bloom_filter_key",
    "column_stats_key",
    "column_stats_records",
    "decode_metadata_record",
    "encode_metadata_record",
    "file_group_index",
    "java_string_hash",
    "merge_column_stats",
    "metadata_record_schema",
    "parquet_column_stats",
    "partition_stats_key",
    "partition_stats_records",
    "xxh64",
]

# -- hashing ----------------------------------------------------------------------------------------------

#: The XXH64 seed of Hudi's ``HashID``: the int ``0xdabadaba`` sign-extended to a long.
HASH_SEED = 0xFFFFFFFFDABADABA

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK, 31) * _P1) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """The XXH64 hash of ``data`` as an unsigned 64-bit integer (the xxHash specification, in pure Python)."""
    seed &= _MASK
    n = len(data)
    pos = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed
        v4 = (seed - _P1) & _MASK
        while pos + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, pos)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            pos += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _MASK
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while pos + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, pos)
        h = (_rotl(h ^ _round(0, lane), 27) * _P1 + _P4) & _MASK
        pos += 8
    if pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl(h ^ ((word * _P1) & _MASK), 23) * _P2 + _P3) & _MASK
        pos += 4
    while pos < n:
        h = (_rotl(h ^ ((data[pos] * _P5) & _MASK), 11) * _P1) & _MASK
        pos += 1
    h = ((h ^ (h >> 33)) * _P2) & _MASK
    h = ((h ^ (h >> 29)) * _P3) & _MASK
    return h ^ (h >> 32)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _hash64(text: str) -> str:
    return _b64(struct.pack(">Q", xxh64(text.encode("utf-8"), HASH_SEED)))


def _hash128(text: str) -> str:
    return _b64(hashlib.md5(text.encode("utf-8"), usedforsecurity=False).digest())


def _partition_id(partition_path: str) -> str:
    return partition_path or NON_PARTITIONED_NAME


def column_stats_key(column: str, partition_path: str, file_name: str) -> str:
    """The ``column_stats`` key of one column of one file (``file_name`` without its partition folder)."""
    return _hash64(column) + _hash64(_partition_id(partition_path)) + _hash128(file_name)


def partition_stats_key(column: str, partition_path: str) -> str:
    """The ``partition_stats`` key of one column of one partition."""
    return _hash64(column) + _hash64(_partition_id(partition_path))


def bloom_filter_key(partition_path: str, file_name: str) -> str:
    """The ``bloom_filters`` key of one base file."""
    return _hash64(_partition_id(partition_path)) + _hash128(file_name)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``31 * h + c`` over the UTF-16 code units, wrapped to a signed int32."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _java_abs(x: int) -> int:
    # Math.abs(int): Integer.MIN_VALUE has no positive counterpart and stays negative.
    return x if x == -(1 << 31) else abs(x)


def _java_rem(a: int, n: int) -> int:
    # Java's % keeps the sign of the dividend.
    r = abs(a) % n
    return -r if a < 0 else r


def file_group_index(key: str, count: int) -> int:
    """Which of ``count`` file groups of a metadata-table partition holds ``key``: Hudi's
    ``mapRecordKeyToFileGroupIndex``, ``abs(abs(hashCode) % count)`` with Java's int arithmetic.
    (Secondary indexes of table version 9 hash only the ``"<secondary key>$"`` prefix of their keys.)"""
    if count <= 0:
        raise ValueError(f"a metadata-table partition has at least one file group, not {count}")
    return _java_abs(_java_rem(_java_abs(java_string_hash(key)), count))


def file_group_indexes(keys: Sequence[str], count: int) -> npt.NDArray[np.int64]:
    """:func:`file_group_index` of many keys at once (numpy over the keys' UTF-16 code units)."""
    if count <= 0:
        raise ValueError(f"a metadata-table partition has at least one file group, not {count}")
    n = len(keys)
    if not n:
        return np.zeros(0, np.int64)
    encoded = [k.encode("utf-16-le", "surrogatepass") for k in keys]
    lengths = np.fromiter((len(e) // 2 for e in encoded), np.int64, n)
    units = np.frombuffer(b"".join(encoded), "<u2").astype(np.uint64)
    starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    h = np.zeros(n, np.uint64)
    for j in range(int(lengths.max())):
        live = lengths > j
        h[live] = (h[live] * np.uint64(31) + units[starts[live] + j]) & np.uint64(0xFFFFFFFF)
    signed = h.astype(np.int64)
    signed[signed >= 1 << 31] -= 1 << 32
    # abs(abs(h) % count) with Java's int: abs(MIN_VALUE) stays negative, % keeps the dividend's sign
    absolute = np.where(signed == -(1 << 31), signed, np.abs(signed))
    remainder = np.abs(absolute) % count
    remainder = np.where(absolute < 0, -remainder, remainder)
    return np.asarray(np.abs(remainder), np.int64)


# -- value types and wrappers -----------------------------------------------------------------------------


class ValueType(IntEnum):
    """``HoodieValueTypeInfo.typeOrdinal`` of table version 9 (Hudi's ``ValueType`` enum, in its order)."""

    V1 = 0
    NULL = 1
    BOOLEAN = 2
    INT = 3
    LONG = 4
    FLOAT = 5
    DOUBLE = 6
    STRING = 7
    BYTES = 8
    FIXED = 9
    DECIMAL = 10
    UUID = 11
    DATE = 12
    TIME_MILLIS = 13
    TIME_MICROS = 14
    TIMESTAMP_MILLIS = 15
    TIMESTAMP_MICROS = 16
    TIMESTAMP_NANOS = 17
    LOCAL_TIMESTAMP_MILLIS = 18
    LOCAL_TIMESTAMP_MICROS = 19
    LOCAL_TIMESTAMP_NANOS = 20


_WRAPPER_NS = "org.apache.hudi.avro.model."
_BOOLEAN, _INT, _LONG = "BooleanWrapper", "IntWrapper", "LongWrapper"
_FLOAT, _DOUBLE, _STRING, _BYTES = "FloatWrapper", "DoubleWrapper", "StringWrapper", "BytesWrapper"
_DATE, _DECIMAL = "DateWrapper", "DecimalWrapper"

# Table version 9: the wrapper is the one of the value type's primitive form.
_V9_WRAPPER = {
    ValueType.BOOLEAN: _BOOLEAN,
    ValueType.INT: _INT,
    ValueType.LONG: _LONG,
    ValueType.FLOAT: _FLOAT,
    ValueType.DOUBLE: _DOUBLE,
    ValueType.STRING: _STRING,
    ValueType.BYTES: _BYTES,
    ValueType.FIXED: _BYTES,
    ValueType.DECIMAL: _BYTES,
    ValueType.UUID: _STRING,
    ValueType.DATE: _INT,
    ValueType.TIME_MILLIS: _INT,
    ValueType.TIME_MICROS: _LONG,
    ValueType.TIMESTAMP_MILLIS: _LONG,
    ValueType.TIMESTAMP_MICROS: _LONG,
    ValueType.TIMESTAMP_NANOS: _LONG,
    ValueType.LOCAL_TIMESTAMP_MILLIS: _LONG,
    ValueType.LOCAL_TIMESTAMP_MICROS: _LONG,
    ValueType.LOCAL_TIMESTAMP_NANOS: _LONG,
}
# Table versions 6 and 8 differ only where a Java object other than the primitive came out of Parquet.
_LEGACY_WRAPPER = {**_V9_WRAPPER, ValueType.DATE: _DATE, ValueType.DECIMAL: _DECIMAL}

_UNITS = {"s": None, "ms": "MILLIS", "us": "MICROS", "ns": "NANOS"}


def value_type_of(arrow_type: pa.DataType) -> ValueType | None:
    """The value type of a column of ``arrow_type``, or ``None`` for a type without statistics (nested,
    seconds-precision timestamps, ...)."""
    t = arrow_type
    if pa.types.is_boolean(t):
        return ValueType.BOOLEAN
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t):
        return ValueType.INT
    if pa.types.is_uint8(t) or pa.types.is_uint16(t):
        return ValueType.INT
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return ValueType.LONG
    if pa.types.is_float32(t):
        return ValueType.FLOAT
    if pa.types.is_float64(t):
        return ValueType.DOUBLE
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return ValueType.STRING
    if pa.types.is_fixed_size_binary(t):
        return ValueType.FIXED
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return ValueType.BYTES
    if pa.types.is_decimal(t):
        return ValueType.DECIMAL
    if pa.types.is_date32(t):
        return ValueType.DATE
    if pa.types.is_time32(t) and t.unit == "ms":
        return ValueType.TIME_MILLIS
    if pa.types.is_time64(t) and t.unit == "us":
        return ValueType.TIME_MICROS
    if pa.types.is_timestamp(t) and _UNITS.get(t.unit):
        prefix = "TIMESTAMP_" if t.tz is not None else "LOCAL_TIMESTAMP_"
        return ValueType[prefix + str(_UNITS[t.unit])]
    return None


# -- statistics of a Parquet file -------------------------------------------------------------------------


@dataclass(frozen=True)
class ColumnStats:
    """The statistics of one top-level column of one file.

    ``type`` is the column's Arrow type as the Parquet footer gives it and ``value_type`` what Hudi calls it
    (from ``type``; Hudi takes it from the table's Avro schema, which may say more than the file: an
    unannotated int64 that the table calls a local timestamp). ``min`` / ``max`` are ``None`` when the file
    has no value or no statistics for the column; otherwise ``bool``, ``int``, ``float``, ``str``, ``bytes``
    or ``Decimal`` (at the column's scale), and for dates, times and timestamps the raw integer Parquet
    stores (days; ticks of the column's unit), which is what Hudi records.
    """

    column: str
    type: pa.DataType
    value_type: ValueType | None
    min: Any
    max: Any
    value_count: int
    null_count: int
    total_size: int
    total_uncompressed_size: int


def _stat_value(value: Any, raw: Any, arrow_type: pa.DataType) -> Any:
    if pa.types.is_date(arrow_type) or pa.types.is_time(arrow_type) or pa.types.is_timestamp(arrow_type):
        return int(raw)
    if pa.types.is_decimal(arrow_type):
        scale = arrow_type.scale
        if isinstance(value, Decimal):
            return value.quantize(Decimal(1).scaleb(-scale))
        if isinstance(raw, int):
            return Decimal(raw).scaleb(-scale)
        return Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
    if (pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)) and isinstance(value, bytes):
        return value.decode("utf-8")
    return value


def parquet_column_stats(storage: Storage, path: str, columns: Iterable[str]) -> dict[str, ColumnStats]:
    """The statistics of the named top-level columns of the Parquet file at ``path`` (relative to
    ``storage``), read from its footer only and aggregated over its row groups. Columns the file does not
    have, and nested columns, are left out of the result."""
    with storage.open_input_file(path) as f:
        metadata = pq.ParquetFile(f).metadata
    arrow_schema = metadata.schema.to_arrow_schema()
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    out: dict[str, ColumnStats] = {}
    for column in columns:
        index = leaves.get(column)
        if index is None or column not in arrow_schema.names:
            continue
        arrow_type = arrow_schema.field(column).type
        lo: Any = None
        hi: Any = None
        values = nulls = size = uncompressed = 0
        for rg in range(metadata.num_row_groups):
            chunk = metadata.row_group(rg).column(index)
            values += chunk.num_values
            size += chunk.total_compressed_size
            uncompressed += chunk.total_uncompressed_size
            stats = chunk.statistics if chunk.is_stats_set else None
            if stats is None:
                continue
            if stats.has_null_count:
                nulls += stats.null_count
            if stats.has_min_max:
                a = _stat_value(stats.min, stats.min_raw, arrow_type)
                b = _stat_value(stats.max, stats.max_raw, arrow_type)
                lo = a if lo is None or a < lo else lo
                hi = b if hi is None or b > hi else hi
        out[column] = ColumnStats(
            column, arrow_type, value_type_of(arrow_type), lo, hi, values, nulls, size, uncompressed
        )
    return out


# -- records ----------------------------------------------------------------------------------------------

_SCHEMA_FILE = {6: "v6", 8: "v8", 9: "v9"}


def _schema_name(table_version: int) -> str:
    try:
        return _SCHEMA_FILE[table_version]
    except KeyError:
        raise UnsupportedTable(
            f"table version {table_version!r} is not supported (supported: 6, 8, 9)"
        ) from None


@cache
def metadata_record_schema(table_version: int) -> Any:
    """The parsed ``HoodieMetadataRecord`` schema (fastavro) Hudi writes with for a table version: Hudi
    0.15.0 for 6, 1.0.0 for 8, master (1.1/1.2) for 9; copies in ``hoodie/avro/schemas``."""
    name = f"HoodieMetadata.{_schema_name(table_version)}.avsc"
    text = resources.files("hoodie.avro").joinpath("schemas", name).read_text(encoding="utf-8")
    return fastavro.parse_schema(json.loads(text), _write_hint=False)


def encode_metadata_record(record: MetadataRecord, table_version: int) -> bytes:
    """The Avro binary of ``record`` under the table version's ``HoodieMetadataRecord`` schema."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, metadata_record_schema(table_version), record)
    return out.getvalue()


def decode_metadata_record(data: bytes, table_version: int) -> MetadataRecord:
    """The record :func:`encode_metadata_record` wrote, minima and maxima with their branch names."""
    record = fastavro.schemaless_reader(
        io.BytesIO(data),
        metadata_record_schema(table_version),
        None,
        return_record_name=True,
        return_record_name_override=True,
    )
    if not isinstance(record, dict):
        raise ValueError("not a HoodieMetadataRecord")
    return record


def _base_record(key: str, kind: RecordType, table_version: int) -> MetadataRecord:
    record: MetadataRecord = {
        "_hoodie_commit_time": None,
        "_hoodie_commit_seqno": None,
        "_hoodie_record_key": None,
        "_hoodie_partition_path": None,
        "_hoodie_file_name": None,
        "key": key,
        "type": int(kind),
        "filesystemMetadata": None,
        "BloomFilterMetadata": None,
        "ColumnStatsMetadata": None,
        "recordIndexMetadata": None,
    }
    if table_version >= 8:
        record["SecondaryIndexMetadata"] = None
    return record


def _unscaled_bytes(value: Decimal, scale: int) -> bytes:
    # Java's BigInteger.toByteArray: the shortest two's complement big-endian form.
    n = int(value.scaleb(scale))
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def _wrap(value: Any, stats: ColumnStats, table_version: int) -> Any:
    if value is None or stats.value_type is None:
        return None
    table = _V9_WRAPPER if table_version >= 9 else _LEGACY_WRAPPER
    wrapper = table[stats.value_type]
    if wrapper == _BYTES and isinstance(value, Decimal):
        value = _unscaled_bytes(value, stats.type.scale)
    return (_WRAPPER_NS + wrapper, {"value": value})


def _value_type_info(value_type: ValueType | None, arrow_type: pa.DataType | None) -> dict[str, Any]:
    if value_type is None:
        return {"typeOrdinal": int(ValueType.NULL), "additionalInfo": None}
    info = None
    if value_type is ValueType.DECIMAL and arrow_type is not None:
        info = f"{arrow_type.precision},{arrow_type.scale}"
    return {"typeOrdinal": int(value_type), "additionalInfo": info}


def _stats_payload(fields: dict[str, Any], table_version: int, *, tight: bool) -> dict[str, Any]:
    if table_version >= 8:
        fields["isTightBound"] = tight
    if table_version < 9:
        fields.pop("valueType", None)
    return fields


def column_stats_records(
    partition_path: str,
    file_name: str,
    stats: Mapping[str, ColumnStats],
    *,
    table_version: int,
    is_deleted: bool = False,
) -> list[MetadataRecord]:
    """The type-3 records of one file: one per column of ``stats``, in its order, ready for
    :func:`encode_metadata_record`.

    With ``is_deleted`` they are the tombstones Hudi writes when a file goes (``HoodieColumnRangeMetadata.
    stub``): file and column named, no minimum or maximum, every count ``-1``, ``isDeleted`` true (only the
    column names of ``stats`` are used then)."""
    _schema_name(table_version)
    records = []
    for column, s in stats.items():
        if is_deleted:
            fields: dict[str, Any] = {
                "fileName": file_name,
                "columnName": column,
                "minValue": None,
                "maxValue": None,
                "valueCount": -1,
                "nullCount": -1,
                "totalSize": -1,
                "totalUncompressedSize": -1,
                "isDeleted": True,
                "valueType": _value_type_info(None, None),
            }
        else:
            fields = {
                "fileName": file_name,
                "columnName": column,
                "minValue": _wrap(s.min, s, table_version),
                "maxValue": _wrap(s.max, s, table_version),
                "valueCount": s.value_count,
                "nullCount": s.null_count,
                "totalSize": s.total_size,
                "totalUncompressedSize": s.total_uncompressed_size,
                "isDeleted": False,
                "valueType": _value_type_info(s.value_type, s.type),
            }
        record = _base_record(
            column_stats_key(column, partition_path, file_name), RecordType.COLUMN_STATS, table_version
        )
        record["ColumnStatsMetadata"] = _stats_payload(fields, table_version, tight=False)
        records.append(record)
    return records


# -- partition statistics ---------------------------------------------------------------------------------


def _unwrap(wrapper: Any) -> Any:
    if isinstance(wrapper, tuple):
        wrapper = wrapper[1]
    if isinstance(wrapper, dict):
        return wrapper.get("value")
    return wrapper


def _order_key(wrapper: Any, value_type: Mapping[str, Any] | None) -> Any:
    value = _unwrap(wrapper)
    if isinstance(value, bytes) and value_type and value_type.get("typeOrdinal") == ValueType.DECIMAL:
        return int.from_bytes(value, "big", signed=True)  # unscaled, one scale per column
    return value


def _extreme(current: Any, candidate: Any, value_type: Mapping[str, Any] | None, *, lower: bool) -> Any:
    a, b = _order_key(current, value_type), _order_key(candidate, value_type)
    if b is None:
        return current
    if a is None or (b < a if lower else b > a):
        return candidate
    return current


def merge_column_stats(per_file: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Column name -> the ``ColumnStatsMetadata`` fields of the given files merged as Hudi merges ranges:
    the least minimum, the greatest maximum (wrappers kept as given), counts and sizes summed, in the given
    order (a file's base before its logs). Deleted entries are skipped; ``valueType`` is the first one
    given."""
    merged: dict[str, dict[str, Any]] = {}
    for stats in per_file:
        if stats.get("isDeleted"):
            continue
        column = stats["columnName"]
        into = merged.get(column)
        if into is None:
            merged[column] = {
                "columnName": column,
                "minValue": stats.get("minValue"),
                "maxValue": stats.get("maxValue"),
                "valueCount": stats.get("valueCount") or 0,
                "nullCount": stats.get("nullCount") or 0,
                "totalSize": stats.get("totalSize") or 0,
                "totalUncompressedSize": stats.get("totalUncompressedSize") or 0,
                "valueType": stats.get("valueType"),
            }
            continue
        lo, hi = stats.get("minValue"), stats.get("maxValue")
        try:
            value_type = into["valueType"] or stats.get("valueType")
            into["minValue"] = _extreme(into["minValue"], lo, value_type, lower=True)
            into["maxValue"] = _extreme(into["maxValue"], hi, value_type, lower=False)
        except TypeError:
            # The column changed type between files (a log file that typed a long partition field as a
            # string): the older range is in other units, the later file's range stands, as in Hudi.
            into["minValue"], into["maxValue"] = lo, hi
        for count in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
            into[count] += stats.get(count) or 0
        if into["valueType"] is None:
            into["valueType"] = stats.get("valueType")
    return merged


def _named_wrapper(wrapper: Any, value_type: Mapping[str, Any] | None, column: str) -> Any:
    if wrapper is None or isinstance(wrapper, tuple):
        return wrapper
    if value_type is not None and ValueType(value_type["typeOrdinal"]) in _V9_WRAPPER:
        return (_WRAPPER_NS + _V9_WRAPPER[ValueType(value_type["typeOrdinal"])], wrapper)
    raise ValueError(
        f"column {column!r}: the wrapper of {wrapper!r} has no branch name and no value type says which"
    )


def partition_stats_records(
    partition_path: str, per_file: Iterable[Mapping[str, Any]], *, table_version: int
) -> list[MetadataRecord]:
    """The type-6 records of one partition, one per column, from the ``ColumnStatsMetadata`` of its latest
    files (:func:`merge_column_stats`): ``fileName`` is the partition path, ``isTightBound`` true.

    Minima and maxima must name their wrapper (as :func:`column_stats_records` and
    :func:`decode_metadata_record` give them) unless a version-9 ``valueType`` says which it is: decoded
    without names, an ``IntWrapper`` cannot be told from a ``DateWrapper``. Raises ``ValueError`` then."""
    if table_version < 8:
        raise UnsupportedTable(f"table version {table_version} has no partition statistics (from 8)")
    records = []
    for column, merged in merge_column_stats(per_file).items():
        value_type = merged.get("valueType")
        fields = {
            "fileName": partition_path,
            "columnName": column,
            "minValue": _named_wrapper(merged["minValue"], value_type, column),
            "maxValue": _named_wrapper(merged["maxValue"], value_type, column),
            "valueCount": merged["valueCount"],
            "nullCount": merged["nullCount"],
            "totalSize": merged["totalSize"],
            "totalUncompressedSize": merged["totalUncompressedSize"],
            "isDeleted": False,
        }
        if table_version >= 9:
            fields["valueType"] = value_type
        record = _base_record(
            partition_stats_key(column, partition_path), RecordType.PARTITION_STATS, table_version
        )
        record["ColumnStatsMetadata"] = _stats_payload(fields, table_version, tight=True)
        records.append(record)
    return records
