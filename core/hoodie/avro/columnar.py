"""Column-at-a-time decoding of Avro records whose byte boundaries are known (Hudi's Avro data blocks).

Hudi's Avro data block stores each record behind its own length, so every record's start is known before
any is decoded. That allows decoding one *field* of all records at once with numpy: the positions of field 1
in every record are the record starts; decoding it (a vectorised varint, a gather of fixed-size values, or a
length-prefixed string gathered into an Arrow buffer) yields both the column and the positions of field 2.
No Python code runs per record, which makes it some 20 times faster than decoding record by record.

Supported: records of primitive fields (null, boolean, int, long, float, double, bytes, string), fixed,
decimals on fixed or bytes (up to 16 bytes, 38 digits), enums, and unions of ``null`` with one of these.
Anything else (nested records, arrays, maps, unions of several types) makes :func:`decode_columnar` return
``None`` and the caller decodes record by record. Malformed bytes also return ``None``: the record-by-record
decoder then reports exactly which record is bad, so errors read the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from hoodie.schema import CompiledSchema

_PAD = 16
_W = np.arange(10, dtype=np.int64)
_SHIFTS = (7 * np.arange(10)).astype(np.uint64)
_PRIMITIVE_KINDS = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class _Malformed(Exception):
    """The bytes do not decode as the schema says (the record-by-record decoder will say where)."""


def decode_columnar(
    content: bytes, starts: np.ndarray, ends: np.ndarray, compiled: CompiledSchema
) -> pa.Table | None:
    """Decode the records at ``content[starts[i]:ends[i]]`` into a table of ``compiled.arrow_schema``, or
    return ``None`` when the schema or the bytes need the record-by-record decoder."""
    schema = compiled.decode_schema
    fields = schema.get("fields") if isinstance(schema, Mapping) else None
    if not isinstance(fields, list) or len(fields) != compiled.physical_type.num_fields:
        return None
    plans = [_plan(f.get("type")) for f in fields]
    if any(p is None for p in plans):
        return None
    buf = np.frombuffer(content + b"\x00" * _PAD, dtype=np.uint8)
    pos = starts.astype(np.int64, copy=True)
    ends = ends.astype(np.int64, copy=False)
    arrays: list[pa.Array] = []
    try:
        for plan, target in zip(plans, compiled.physical_type, strict=True):
            assert plan is not None
            arr, pos = _decode_field(plan, buf, pos, ends, target.type)
            if not arr.type.equals(target.type):
                arr = arr.cast(target.type)
            arrays.append(arr)
        if not np.array_equal(pos, ends):
            raise _Malformed("records do not end where their lengths say")
        struct = pa.StructArray.from_arrays(arrays, fields=list(compiled.physical_type))
        if compiled.needs_cast:
            struct = struct.cast(compiled.logical_type)
    except (_Malformed, pa.ArrowException, ValueError, OverflowError):
        return None
    return pa.Table.from_batches([pa.RecordBatch.from_struct_array(struct)], schema=compiled.arrow_schema)


# -- plans: what one field's bytes are ---------------------------------------------------------------------


def _plan(t: Any) -> tuple[str, Any, bool, int] | None:
    """(kind, detail, nullable, null branch index) for a supported field type, else None."""
    if isinstance(t, list):
        non_null = [(i, b) for i, b in enumerate(t) if b != "null"]
        if len(t) != 2 or len(non_null) != 1:
            return None
        index, branch = non_null[0]
        inner = _plan(branch)
        if inner is None or inner[2]:
            return None
        return inner[0], inner[1], True, 1 - index
    if isinstance(t, str):
        return (t, None, False, -1) if t in _PRIMITIVE_KINDS else None
    if not isinstance(t, Mapping):
        return None
    kind = t.get("type")
    logical = t.get("logicalType")
    if kind == "fixed":
        size = t.get("size")
        if not isinstance(size, int) or size <= 0:
            return None
        if logical == "decimal":
            return ("decimal_fixed", size, False, -1) if size <= 16 else None
        return ("fixed", size, False, -1)
    if kind == "bytes" and logical == "decimal":
        return ("decimal_bytes", None, False, -1)
    if kind == "enum":
        symbols = t.get("symbols")
        return ("enum", list(symbols), False, -1) if isinstance(symbols, list) else None
    if isinstance(kind, str) and kind in _PRIMITIVE_KINDS and logical is None:
        return (kind, None, False, -1)
    return None


# -- decoding ----------------------------------------------------------------------------------------------


def _decode_field(
    plan: tuple[str, Any, bool, int], buf: np.ndarray, pos: np.ndarray, ends: np.ndarray, target: pa.DataType
) -> tuple[pa.Array, np.ndarray]:
    kind, detail, nullable, null_index = plan
    n = len(pos)
    if not nullable:
        return _decode_values(kind, detail, buf, pos, ends, target)
    branch, width = _varint(buf, pos, ends)
    if not np.all((branch == 0) | (branch == 1)):
        raise _Malformed("union branch out of range")
    pos = pos + width
    present = branch != null_index
    if present.all():
        return _decode_values(kind, detail, buf, pos, ends, target)
    rows = np.flatnonzero(present)
    values, new_pos = _decode_values(kind, detail, buf, pos[rows], ends[rows], target)
    pos = pos.copy()
    pos[rows] = new_pos
    # Scatter the present values into a column of n rows with nulls elsewhere.
    index = np.full(n, -1, dtype=np.int64)
    index[rows] = np.arange(len(rows), dtype=np.int64)
    taken = values.take(pa.array(index, mask=~present))
    return taken, pos


def _decode_values(
    kind: str, detail: Any, buf: np.ndarray, pos: np.ndarray, ends: np.ndarray, target: pa.DataType
) -> tuple[pa.Array, np.ndarray]:
    n = len(pos)
    if kind == "null":
        return pa.nulls(n), pos
    if kind in ("int", "long"):
        values, width = _varint(buf, pos, ends)
        if kind == "int" and len(values) and (values.min() < -(2**31) or values.max() >= 2**31):
            raise _Malformed("int out of range")
        return pa.array(values.astype(np.int32) if kind == "int" else values), pos + width
    if kind == "boolean":
        _check(pos + 1, ends)
        raw = buf[pos]
        if np.any(raw > 1):
            raise _Malformed("boolean byte not 0 or 1")
        return pa.array(raw.astype(bool)), pos + 1
    if kind in ("float", "double"):
        size = 4 if kind == "float" else 8
        raw = _gather(buf, pos, ends, size)
        dtype = np.dtype("<f4") if size == 4 else np.dtype("<f8")
        return pa.array(raw.reshape(-1).view(dtype)), pos + size
    if kind in ("string", "bytes", "decimal_bytes"):
        lengths, width = _varint(buf, pos, ends)
        start = pos + width
        if np.any(lengths < 0):
            raise _Malformed("negative length")
        _check(start + lengths, ends)
        if kind == "decimal_bytes":
            return _decimal(buf, start, lengths, target), start + lengths
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        total = int(offsets[-1])
        if total:
            idx = np.repeat(start - offsets[:-1], lengths) + np.arange(total, dtype=np.int64)
            data = buf[idx]
        else:
            data = np.empty(0, dtype=np.uint8)
        large = total >= 2**31 - 1
        typ = (pa.large_string() if large else pa.string()) if kind == "string" else pa.binary()
        if kind != "string" and large:
            typ = pa.large_binary()
        arr = pa.Array.from_buffers(
            typ,
            n,
            [None, pa.py_buffer(offsets.astype(np.int64 if large else np.int32)), pa.py_buffer(data)],
        )
        if kind == "string":
            arr.validate(full=True)  # UTF-8
        return arr, start + lengths
    if kind in ("fixed", "decimal_fixed"):
        size = int(detail)
        if kind == "decimal_fixed":
            _check(pos + size, ends)
            return _decimal(buf, pos, np.full(n, size, dtype=np.int64), target), pos + size
        raw = _gather(buf, pos, ends, size)
        return pa.Array.from_buffers(pa.binary(size), n, [None, pa.py_buffer(raw.tobytes())]), pos + size
    if kind == "enum":
        index, width = _varint(buf, pos, ends)
        symbols: list[str] = detail
        if len(index) and (index.min() < 0 or index.max() >= len(symbols)):
            raise _Malformed("enum index out of range")
        return pa.array(symbols, pa.string()).take(pa.array(index)), pos + width
    raise _Malformed(f"unsupported kind {kind}")


def _check(upto: np.ndarray, ends: np.ndarray) -> None:
    if np.any(upto > ends):
        raise _Malformed("a value runs past its record")


def _gather(buf: np.ndarray, pos: np.ndarray, ends: np.ndarray, size: int) -> np.ndarray:
    _check(pos + size, ends)
    return buf[pos[:, None] + np.arange(size, dtype=np.int64)]


def _varint(buf: np.ndarray, pos: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints (Avro int/long) at ``pos``: (values, widths in bytes)."""
    n = len(pos)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    _check(pos + 1, ends)
    first = buf[pos]
    if not np.any(first & 0x80):  # one byte each: the common case (union branches, small numbers)
        raw = first.astype(np.int64)
        return (raw >> 1) ^ -(raw & 1), np.ones(n, dtype=np.int64)
    win = buf[pos[:, None] + _W]
    cont = (win & 0x80) != 0
    if np.any(cont.all(axis=1)):
        raise _Malformed("varint longer than 10 bytes")
    width = np.argmin(cont, axis=1).astype(np.int64) + 1
    _check(pos + width, ends)
    mask = _W[None, :] < width[:, None]
    parts = np.where(mask, (win & 0x7F).astype(np.uint64) << _SHIFTS[None, :], np.uint64(0))
    raw_u = np.bitwise_or.reduce(parts, axis=1)
    values = (raw_u >> np.uint64(1)).astype(np.int64) ^ -(raw_u & np.uint64(1)).astype(np.int64)
    return values, width


def _decimal(buf: np.ndarray, start: np.ndarray, lengths: np.ndarray, target: pa.DataType) -> pa.Array:
    """Big-endian two's-complement unscaled values (at most 16 bytes) as ``target`` (a decimal128), whose
    values are the same unscaled integers in 16 little-endian bytes."""
    n = len(start)
    if not pa.types.is_decimal128(target):
        raise _Malformed(f"decimal column of type {target}")
    if np.any(lengths > 16):
        raise _Malformed("decimal wider than 16 bytes")
    j = np.arange(16, dtype=np.int64)[None, :]
    offset = (16 - lengths)[:, None]
    src = start[:, None] + j - offset
    inside = j >= offset
    gathered = buf[np.where(inside, src, 0)]
    first = buf[np.minimum(start, len(buf) - 1)]
    negative = (lengths > 0) & ((first & 0x80) != 0)
    fill = np.where(negative, 0xFF, 0x00).astype(np.uint8)[:, None]
    big_endian = np.where(inside, gathered, fill).astype(np.uint8)
    little = np.ascontiguousarray(big_endian[:, ::-1])
    return pa.Array.from_buffers(target, n, [None, pa.py_buffer(little.tobytes())])


__all__ = ["decode_columnar"]
