"""The value types of column statistics (Hudi's ``ValueType``), the Avro wrappers their minima and maxima
travel in, and how the ranges of several files merge into one (Hudi's ``HoodieColumnRangeMetadata`` merge).

Kept apart from :mod:`hoodie.metadata.stats` (which builds records from Parquet footers) because combining two
versions of a stats record (:func:`hoodie.metadata.records.combine`) needs the merge and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum
from typing import Any

import pyarrow as pa

__all__ = [
    "BYTES_WRAPPER",
    "LEGACY_WRAPPER",
    "V9_WRAPPER",
    "WRAPPER_NS",
    "ValueType",
    "merge_column_stats",
    "value_type_of",
]

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


WRAPPER_NS = "org.apache.hudi.avro.model."
_BOOLEAN, _INT, _LONG = "BooleanWrapper", "IntWrapper", "LongWrapper"
_FLOAT, _DOUBLE, _STRING, BYTES_WRAPPER = "FloatWrapper", "DoubleWrapper", "StringWrapper", "BytesWrapper"
_DATE, _DECIMAL = "DateWrapper", "DecimalWrapper"

# Table version 9: the wrapper is the one of the value type's primitive form.
V9_WRAPPER = {
    ValueType.BOOLEAN: _BOOLEAN,
    ValueType.INT: _INT,
    ValueType.LONG: _LONG,
    ValueType.FLOAT: _FLOAT,
    ValueType.DOUBLE: _DOUBLE,
    ValueType.STRING: _STRING,
    ValueType.BYTES: BYTES_WRAPPER,
    ValueType.FIXED: BYTES_WRAPPER,
    ValueType.DECIMAL: BYTES_WRAPPER,
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
LEGACY_WRAPPER = {**V9_WRAPPER, ValueType.DATE: _DATE, ValueType.DECIMAL: _DECIMAL}

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


# -- merging ranges ---------------------------------------------------------------------------------------


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
