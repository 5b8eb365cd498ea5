"""Column-at-a-time encoding of Arrow rows as Avro records (Hudi's Avro data blocks, the metadata table's
HFile values): the counterpart of :mod:`hoodie.avro.columnar`.

The Arrow columns are cast to the ints the Avro schema's logical types want, then each Avro type is encoded
with numpy for all rows at once (zig-zag varints, length-prefixed strings, two's complement decimals, union
branch indexes, nested records, arrays and maps) into an :class:`AvroRows` (a buffer and one offset per
value), and the per-row byte strings of the fields are interleaved once, at the end. The bytes are those of
Avro's Java ``BinaryEncoder`` (minimal two's complement decimals, one array block followed by a zero count).
Only unions of two or more non-null types (which Spark never writes) go through fastavro's
``schemaless_writer``, value by value; fastavro picks the first branch a value fits, where Java goes by the
value's class, so those bytes may differ from Hudi's.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import fastavro
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import SchemaMismatch, UnsupportedTable
from hoodie.schema import CompiledSchema, compile_avro_schema

ROWS_PER_CHUNK = 65_536  # bounds the numpy temporaries of the encoder


def encode_record_chunks(table: pa.Table, avro_schema: str) -> Iterator[tuple[int, list[AvroRows]]]:
    """The rows of ``table`` encoded in the Avro record schema ``avro_schema`` (JSON text), a chunk of at
    most :data:`ROWS_PER_CHUNK` rows at a time: ``(rows in the chunk, parts)``, record i of the chunk being
    row i of every part, concatenated (see :data:`Encoder`).

    Columns are matched to the schema's fields by name and cast to the Arrow types of
    :func:`hoodie.schema.avro_to_arrow_schema` (safe casts only); a field missing from ``table`` is written as
    null if its type allows. Raises :class:`SchemaMismatch` naming the column when the rows do not fit,
    :class:`UnsupportedTable` for a schema we cannot use.
    """
    compiled = compile_record_schema(avro_schema)
    physical = conform_record_columns(table, compiled)
    if compiled.needs_cast:
        physical = physical.cast(compiled.physical_type)
    encode = _record_encoder(avro_schema)
    for start in range(0, len(physical), ROWS_PER_CHUNK):
        chunk = physical.slice(start, ROWS_PER_CHUNK)
        yield len(chunk), encode(chunk)


def encode_avro_records(table: pa.Table, avro_schema: str) -> list[bytes]:
    """The Avro binary of each row of ``table`` in the record schema ``avro_schema``, without framing (the
    values of the metadata table's HFiles; Avro data blocks frame the same encoding)."""
    out: list[bytes] = []
    for n, parts in encode_record_chunks(table, avro_schema):
        rows = concat_rows(parts, n)
        data, offsets = rows.data.tobytes(), rows.offsets.tolist()
        out.extend(data[offsets[i] : offsets[i + 1]] for i in range(n))
    return out


def compile_record_schema(avro_schema: str) -> CompiledSchema:
    if not isinstance(avro_schema, str):
        raise TypeError(f"avro_schema must be the schema's JSON text, not {type(avro_schema).__name__}")
    return compile_avro_schema(avro_schema)


def conform_record_columns(table: pa.Table, compiled: CompiledSchema) -> pa.StructArray:
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


@dataclass(frozen=True, slots=True)
class AvroRows:
    """The Avro binary of n values: value i is ``data[offsets[i]:offsets[i + 1]]``; ``offsets[0] == 0``.
    ``width`` is set when every value has that many bytes."""

    offsets: npt.NDArray[np.int64]
    data: npt.NDArray[np.uint8]
    width: int | None = None

    @staticmethod
    def fixed(data: npt.NDArray[np.uint8], width: int) -> AvroRows:
        n = len(data) // width if width else 0
        return AvroRows(np.arange(n + 1, dtype=np.int64) * width, data, width)

    @staticmethod
    def constant(n: int, value: bytes) -> AvroRows:
        return AvroRows.fixed(np.tile(np.frombuffer(value, np.uint8), n), len(value))

    @staticmethod
    def empty(n: int) -> AvroRows:
        return AvroRows(np.zeros(n + 1, np.int64), np.empty(0, np.uint8), 0)


Encoder = Callable[[Any], list[AvroRows]]
"""Encodes every value of an Arrow array (of the schema's physical type) to Avro binary: the encoding of
value i is the concatenation of row i of every part returned (parts are only joined where they must be, so
that each byte is copied once more at most)."""


def _offsets(lengths: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    out = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def concat_rows(parts: Sequence[AvroRows], n: int) -> AvroRows:
    """Row i of the result is row i of every part, in order (the fields of a record, a prefix and a value)."""
    if not parts:
        return AvroRows.empty(n)
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
    return AvroRows(offsets, data)


def _expand(present: AvroRows, valid: npt.NDArray[np.bool_]) -> AvroRows:
    """Rows of ``present`` at the valid positions, empty rows elsewhere."""
    lengths = np.zeros(len(valid), np.int64)
    lengths[valid] = np.diff(present.offsets)
    return AvroRows(_offsets(lengths), present.data)


def _zigzag(values: npt.NDArray[Any]) -> npt.NDArray[np.uint64]:
    v = values.astype(np.int64, copy=False)
    return ((v << np.int64(1)) ^ (v >> np.int64(63))).view(np.uint64)


def _varints(z: npt.NDArray[np.uint64]) -> AvroRows:
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
        return AvroRows.fixed(z.astype(np.uint8), 1)
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
    return AvroRows(offsets, data)


def _no_nulls(arr: Any, path: str, avro_type: str) -> None:
    if arr.null_count:
        raise SchemaMismatch(
            f"{path or '<record>'}: null value(s) where the Avro type {avro_type} has no null"
        )


def _long_encoder(path: str, avro_type: str) -> Encoder:
    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, avro_type)
        return [_varints(_zigzag(arr.to_numpy(zero_copy_only=False)))]

    return encode


def _float_encoder(path: str, avro_type: str, dtype: str) -> Encoder:
    width = np.dtype(dtype).itemsize

    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, avro_type)
        values = np.ascontiguousarray(arr.to_numpy(zero_copy_only=False), dtype=dtype)
        return [AvroRows.fixed(values.view(np.uint8), width)]

    return encode


def _boolean_encoder(path: str) -> Encoder:
    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, "boolean")
        return [AvroRows.fixed(np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.uint8), 1)]

    return encode


def _null_encoder(path: str) -> Encoder:
    def encode(arr: Any) -> list[AvroRows]:
        if arr.null_count != len(arr):
            raise SchemaMismatch(f"{path or '<record>'}: value(s) where the Avro type is null")
        return []

    return encode


def _binary_encoder(path: str, avro_type: str) -> Encoder:
    """string and bytes: the length, then the bytes (Arrow string/binary with int32 offsets)."""

    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, avro_type)
        n = len(arr)
        if not n:
            return [AvroRows.empty(0)]
        buffers = arr.buffers()
        offsets = np.frombuffer(buffers[1], np.int32, count=n + 1, offset=arr.offset * 4).astype(np.int64)
        first, last = int(offsets[0]), int(offsets[-1])
        data = np.frombuffer(buffers[2], np.uint8)[first:last] if last > first else np.empty(0, np.uint8)
        return [_varints(_zigzag(np.diff(offsets))), AvroRows(offsets - first, data)]

    return encode


def _fixed_encoder(path: str, size: int) -> Encoder:
    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, f"fixed({size})")
        n = len(arr)
        if not n:
            return [AvroRows.empty(0)]
        data = np.frombuffer(arr.buffers()[1], np.uint8, count=n * size, offset=arr.offset * size)
        return [AvroRows.fixed(data, size)]

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


def minimal_twos_complement(arr: Any) -> AvroRows:
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
    return AvroRows(offsets, rows.reshape(-1)[source])


def _decimal_bytes_encoder(path: str) -> Encoder:
    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, "decimal")
        digits = minimal_twos_complement(arr)
        return [_varints(_zigzag(np.diff(digits.offsets))), digits]

    return encode


def _decimal_fixed_encoder(path: str, size: int) -> Encoder:
    """Sign-extended (or cut) to the fixed size, as Avro's ``DecimalConversion.toFixed``."""

    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, f"decimal fixed({size})")
        rows, negative = _big_endian(arr)
        width = rows.shape[1]
        if size <= width:
            out = rows[:, width - size :]
        else:
            fill = np.repeat(np.where(negative, 0xFF, 0x00).astype(np.uint8)[:, None], size - width, axis=1)
            out = np.hstack([fill, rows])
        return [AvroRows.fixed(np.ascontiguousarray(out).reshape(-1), size)]

    return encode


def _enum_encoder(path: str, symbols: Sequence[str]) -> Encoder:
    value_set = pa.array(list(symbols), pa.string())

    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, "enum")
        index = pc.index_in(arr, value_set=value_set)
        if index.null_count:
            unknown = pc.unique(arr.filter(index.is_null())).to_pylist()
            raise SchemaMismatch(f"{path}: {unknown[:5]} are not symbols of the enum {list(symbols)}")
        return [_varints(_zigzag(index.to_numpy(zero_copy_only=False)))]

    return encode


def _record_fields_encoder(fields: Sequence[tuple[str, Encoder]], path: str) -> Encoder:
    """A record: its fields one after the other."""

    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, "record")
        return [part for i, (_, field) in enumerate(fields) for part in field(arr.field(i))]

    return encode


def _repeated_encoder(items: Encoder, path: str, avro_type: str) -> Encoder:
    """array and map: per row one block (item count, then the items) when not empty, then a zero count."""

    def encode(arr: Any) -> list[AvroRows]:
        _no_nulls(arr, path, avro_type)
        offsets = arr.offsets.to_numpy(zero_copy_only=False).astype(np.int64)
        first = int(offsets[0])
        values = arr.values.slice(first, int(offsets[-1]) - first)
        encoded = concat_rows(items(values), len(values))
        counts = np.diff(offsets)
        present = counts > 0
        return [
            _expand(_varints(_zigzag(counts[present])), present),
            AvroRows(encoded.offsets[offsets - first], encoded.data),
            AvroRows.constant(len(arr), b"\x00"),
        ]

    return encode


def _union_encoder(branches: Sequence[Any], names: Mapping[str, Any], path: str) -> Encoder:
    """A union with at most one non-null branch: the branch index (a zig-zag varint), then the value."""
    nulls = [i for i, b in enumerate(branches) if b == "null"]
    values = [i for i, b in enumerate(branches) if b != "null"]
    if len(values) > 1:
        return _fastavro_encoder(list(branches), names, path)
    null_tag = bytes([nulls[0] << 1]) if nulls else None  # zig-zag of a small index: one byte
    value_tag = bytes([values[0] << 1]) if values else None
    value = _encoder(branches[values[0]], names, path) if values else _null_encoder(path)

    def encode(arr: Any) -> list[AvroRows]:
        n = len(arr)
        if value_tag is not None and not arr.null_count:
            return [AvroRows.constant(n, value_tag), *value(arr)]
        if null_tag is None:
            raise SchemaMismatch(f"{path}: null value(s) where the union {list(branches)} has no null")
        if value_tag is None:
            return [AvroRows.constant(n, null_tag), *value(arr)]
        valid = arr.is_valid()
        mask = valid.to_numpy(zero_copy_only=False)
        tags = AvroRows.fixed(np.where(mask, value_tag[0], null_tag[0]).astype(np.uint8), 1)
        return [tags, *(_expand(part, mask) for part in value(arr.filter(valid)))]

    return encode


def _fastavro_encoder(schema: Any, names: Mapping[str, Any], path: str) -> Encoder:
    """Value by value with fastavro, for what the column-wise encoder does not do (multi-type unions)."""
    wrapper = {
        "type": "record",
        "name": "hoodie_writer_value",
        "fields": [{"name": "v", "type": _inline(schema, names, set())}],
    }
    parsed = fastavro.parse_schema(wrapper)
    writer = fastavro.schemaless_writer

    def encode(arr: Any) -> list[AvroRows]:
        buf = io.BytesIO()
        lengths = np.empty(len(arr), np.int64)
        for i, v in enumerate(arr.to_pylist(maps_as_pydicts="strict")):
            start = buf.tell()
            try:
                writer(buf, parsed, {"v": v})
            except (ValueError, TypeError, KeyError, OverflowError) as e:
                raise SchemaMismatch(f"{path}: value {v!r} does not fit its Avro type: {e}") from e
            lengths[i] = buf.tell() - start
        return [AvroRows(_offsets(lengths), np.frombuffer(buf.getvalue(), np.uint8))]

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


def _encoder(schema: Any, names: Mapping[str, Any], path: str) -> Encoder:
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

        def entry(arr: Any) -> list[AvroRows]:
            return [*key(arr.field(0)), *value(arr.field(1))]

        return _repeated_encoder(entry, path, "map")
    if kind == "bytes" and schema.get("logicalType") == "decimal":
        return _decimal_bytes_encoder(path)
    if kind in names:
        return _encoder(names[kind], names, path)
    return _primitive_encoder(kind, path)


def _primitive_encoder(kind: str, path: str) -> Encoder:
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
def _record_encoder(avro_schema: str) -> Encoder:
    decode_schema = compile_avro_schema(avro_schema).decode_schema
    names = decode_schema.get("__named_schemas", {})
    return _encoder(decode_schema, names, "")
