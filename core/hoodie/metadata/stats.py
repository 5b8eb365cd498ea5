"""Column and partition statistics of the metadata table: reading them from a Parquet footer, and the
``HoodieMetadataRecord`` values Hudi writes for them (their keys: :mod:`hoodie.metadata.keys`; value types,
wrappers and range merging: :mod:`hoodie.metadata.column_ranges`).

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

import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from importlib import resources
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.errors import UnsupportedTable
from hoodie.metadata.column_ranges import (
    BYTES_WRAPPER,
    LEGACY_WRAPPER,
    V9_WRAPPER,
    WRAPPER_NS,
    ValueType,
    merge_column_stats,
    value_type_of,
)
from hoodie.metadata.keys import column_stats_key, partition_stats_key
from hoodie.metadata.records import MetadataRecord, RecordType
from hoodie.storage import Storage

__all__ = [
    "ColumnStats",
    "column_stats_records",
    "decode_metadata_record",
    "encode_metadata_record",
    "footer_column_stats",
    "metadata_record_schema",
    "parquet_column_stats",
    "partition_stats_records",
]

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
    return footer_column_stats(metadata, columns)


def footer_column_stats(metadata: pq.FileMetaData, columns: Iterable[str]) -> dict[str, ColumnStats]:
    """:func:`parquet_column_stats` of a footer read already."""
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
    table = V9_WRAPPER if table_version >= 9 else LEGACY_WRAPPER
    wrapper = table[stats.value_type]
    if wrapper == BYTES_WRAPPER and isinstance(value, Decimal):
        value = _unscaled_bytes(value, stats.type.scale)
    return (WRAPPER_NS + wrapper, {"value": value})


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


def _named_wrapper(wrapper: Any, value_type: Mapping[str, Any] | None, column: str) -> Any:
    if wrapper is None or isinstance(wrapper, tuple):
        return wrapper
    if value_type is not None and ValueType(value_type["typeOrdinal"]) in V9_WRAPPER:
        return (WRAPPER_NS + V9_WRAPPER[ValueType(value_type["typeOrdinal"])], wrapper)
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
