"""Avro schemas as Arrow schemas, and Avro records as Arrow tables.

Hudi describes a table's rows with an Avro schema (in commit metadata, in ``hoodie.properties`` and in the
``SCHEMA`` header of every log block); this module turns it into the Arrow schema the library reads with.

Mapping (Avro -> Arrow)::

    null                         -> null
    boolean, int, long           -> bool, int32, int64
    float, double                -> float32, float64
    bytes, string                -> binary, string
    enum                         -> string (the symbol)
    fixed(n)                     -> fixed_size_binary(n)
    record                       -> struct (fields in order)
    array<T>                     -> list<element: T>
    map<T>                       -> map<string, T>
    [null, T] / [T, null]        -> T, nullable
    [T1, T2, ...] (no null)      -> numeric branches: the widest number; string and enum: string; else refused
    decimal(p, s) on bytes/fixed -> decimal128(p, s) (decimal256 above 38 digits)
    date                         -> date32
    time-millis / time-micros    -> time32[ms] / time64[us]
    timestamp-millis/micros/nanos        -> timestamp[ms/us/ns, tz=UTC]
    local-timestamp-millis/micros/nanos  -> timestamp[ms/us/ns] (no time zone)
    uuid                         -> string (on string), fixed_size_binary(16) (on fixed)

A field (or list element, or map value) is nullable in Arrow iff its Avro type is a union containing ``null``.
Logical types on the wrong physical type, or unknown to us, are ignored as the Avro spec says.

Decoding is fast because Python never sees a datetime: the schema handed to fastavro
(:attr:`CompiledSchema.decode_schema`) has the date, time, timestamp and uuid logical types stripped, so
fastavro yields plain ints and strings, the records become one Arrow struct array in C++ (``pyarrow.array``),
and a single cast turns the int columns into their temporal types. Only decimals keep their logical type
(fastavro decodes them to :class:`decimal.Decimal`, which Arrow takes as is).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

import fastavro
import pyarrow as pa

from hoodie.errors import UnsupportedTable

__all__ = [
    "CompiledSchema",
    "arrow_to_avro_schema",
    "avro_records_to_arrow",
    "avro_to_arrow_schema",
    "compile_avro_schema",
]

AvroSchema = str | Mapping[str, Any]
"""An Avro schema: its JSON text, or the parsed JSON object of a record schema."""

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}

# Logical types decoded as their physical value and cast afterwards:
# (logical type, physical type) -> Arrow type.
_CAST_LOGICAL: dict[tuple[str, str], pa.DataType] = {
    ("date", "int"): pa.date32(),
    ("time-millis", "int"): pa.time32("ms"),
    ("time-micros", "long"): pa.time64("us"),
    ("timestamp-millis", "long"): pa.timestamp("ms", tz="UTC"),
    ("timestamp-micros", "long"): pa.timestamp("us", tz="UTC"),
    ("timestamp-nanos", "long"): pa.timestamp("ns", tz="UTC"),
    ("local-timestamp-millis", "long"): pa.timestamp("ms"),
    ("local-timestamp-micros", "long"): pa.timestamp("us"),
    ("local-timestamp-nanos", "long"): pa.timestamp("ns"),
    ("uuid", "string"): pa.string(),
}

# Numeric promotion for unions of several numeric branches (best effort; Spark never writes these).
_NUMERIC_RANK = {pa.int32(): 0, pa.int64(): 1, pa.float32(): 2, pa.float64(): 3}

_MAX_DECIMAL128_PRECISION = 38
_MAX_DECIMAL256_PRECISION = 76


@dataclass(frozen=True, slots=True)
class _Converted:
    """One Avro type, converted: Arrow type after casting, Arrow type fastavro's values fit, decode schema."""

    logical: pa.DataType
    physical: pa.DataType
    nullable: bool
    decode: Any


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """An Avro record schema prepared for decoding into Arrow.

    ``arrow_schema`` is what tables come out as; ``decode_schema`` is the (fastavro-parsed) schema to decode
    record bytes with: the writer schema with the logical types that we cast ourselves stripped. Records
    decoded against it turn into a table with :meth:`to_table`.
    """

    arrow_schema: pa.Schema
    physical_type: pa.StructType
    logical_type: pa.StructType
    decode_schema: dict[str, Any]

    @property
    def needs_cast(self) -> bool:
        return not self.physical_type.equals(self.logical_type)

    def to_table(self, records: Sequence[Mapping[str, Any]]) -> pa.Table:
        """Records decoded by fastavro against :attr:`decode_schema` as a table of :attr:`arrow_schema`.

        Also accepts records decoded with the logical types left on (datetime, date and time objects), for
        callers that decoded with the original schema; UUID objects are not accepted.
        """
        try:
            arr = pa.array(records, type=self.physical_type)
            if self.needs_cast:
                arr = arr.cast(self.logical_type)
        except (pa.ArrowTypeError, pa.ArrowInvalid):
            if not self.needs_cast:
                raise
            arr = pa.array(records, type=self.logical_type)
        batch = pa.RecordBatch.from_struct_array(arr)
        return pa.Table.from_batches([batch], schema=self.arrow_schema)


def avro_to_arrow_schema(avro_schema: AvroSchema) -> pa.Schema:
    """The Arrow schema of an Avro record schema (JSON text or parsed JSON); see the module docstring.

    Raises :class:`~hoodie.errors.UnsupportedTable` when the schema is not valid JSON, not a record,
    recursive, or holds a union Arrow cannot represent; the message names the field.
    """
    return compile_avro_schema(avro_schema).arrow_schema


def avro_records_to_arrow(records: Sequence[Mapping[str, Any]], avro_schema: AvroSchema) -> pa.Table:
    """Records of an Avro record schema (as fastavro decodes them) as an Arrow table.

    The fast path expects records decoded against ``compile_avro_schema(avro_schema).decode_schema`` (ints for
    dates and timestamps); records decoded with the original schema (datetime objects) work too, slower.
    """
    return compile_avro_schema(avro_schema).to_table(records)


def compile_avro_schema(avro_schema: AvroSchema) -> CompiledSchema:
    """Convert an Avro record schema once (cached by its JSON text) for decoding and Arrow conversion."""
    if isinstance(avro_schema, str):
        return _compile_cached(avro_schema)
    if isinstance(avro_schema, Mapping):
        return _compile_cached(json.dumps(avro_schema, sort_keys=True))
    raise UnsupportedTable(
        f"an Avro schema must be JSON text or a JSON object, not {type(avro_schema).__name__}"
    )


@lru_cache(maxsize=256)
def _compile_cached(schema_json: str) -> CompiledSchema:
    try:
        parsed = json.loads(schema_json)
    except ValueError as e:
        raise UnsupportedTable(f"the Avro schema is not valid JSON: {e}") from e
    converter = _Converter()
    top = converter.convert(parsed, namespace="", path="")
    if not isinstance(top.logical, pa.StructType) or not isinstance(top.physical, pa.StructType):
        raise UnsupportedTable(f"the Avro schema is not a record schema: {_short(parsed)}")
    try:
        decode_schema = cast(dict[str, Any], fastavro.parse_schema(top.decode))
    except Exception as e:  # fastavro raises several exception types for schemas it cannot use
        raise UnsupportedTable(f"the Avro schema cannot be used for decoding: {e}") from e
    return CompiledSchema(
        arrow_schema=pa.schema(list(top.logical)),
        physical_type=top.physical,
        logical_type=top.logical,
        decode_schema=decode_schema,
    )


class _Converter:
    """Walks one Avro schema, resolving named types by full name (Avro namespace rules)."""

    def __init__(self) -> None:
        self._named: dict[str, _Converted] = {}
        self._in_progress: set[str] = set()

    def convert(self, schema: Any, namespace: str, path: str) -> _Converted:
        if isinstance(schema, str):
            if schema in _PRIMITIVES:
                t = _PRIMITIVES[schema]
                return _Converted(t, t, schema == "null", schema)
            return self._reference(schema, namespace, path)
        if isinstance(schema, list):
            return self._union(schema, namespace, path)
        if isinstance(schema, Mapping):
            return self._complex(schema, namespace, path)
        raise UnsupportedTable(f"field {path or '<root>'}: {_short(schema)} is not an Avro schema")

    # -- named types -------------------------------------------------------------------------------------

    def _reference(self, name: str, namespace: str, path: str) -> _Converted:
        candidates = [name] if "." in name else [f"{namespace}.{name}" if namespace else name, name]
        for full in candidates:
            if full in self._in_progress:
                raise UnsupportedTable(
                    f"field {path or '<root>'}: record {full} refers to itself; "
                    "Arrow cannot hold recursive types"
                )
            if full in self._named:
                found = self._named[full]
                return _Converted(found.logical, found.physical, False, full)
        raise UnsupportedTable(f"field {path or '<root>'}: unknown Avro type {name!r}")

    @staticmethod
    def _full_name(schema: Mapping[str, Any], namespace: str, path: str) -> tuple[str, str]:
        """(full name, namespace for names inside it)."""
        name = schema.get("name")
        if not isinstance(name, str) or not name:
            raise UnsupportedTable(f"field {path or '<root>'}: a named Avro type has no name")
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        ns = schema.get("namespace")
        ns = namespace if ns is None else str(ns)
        return (f"{ns}.{name}" if ns else name), ns

    def _define(self, full: str, converted: _Converted, path: str) -> None:
        if full in self._named:
            raise UnsupportedTable(f"field {path or '<root>'}: Avro type {full} is defined twice")
        self._named[full] = converted

    # -- complex types -----------------------------------------------------------------------------------

    def _complex(self, schema: Mapping[str, Any], namespace: str, path: str) -> _Converted:
        kind = schema.get("type")
        if isinstance(kind, list | Mapping):
            return self.convert(kind, namespace, path)
        if not isinstance(kind, str):
            raise UnsupportedTable(f"field {path or '<root>'}: {_short(schema)} has no type")
        if kind in ("record", "error"):
            return self._record(schema, namespace, path)
        if kind == "enum":
            full, _ = self._full_name(schema, namespace, path)
            symbols = schema.get("symbols")
            if not isinstance(symbols, list):
                raise UnsupportedTable(f"field {path or '<root>'}: enum {full} has no symbols")
            converted = _Converted(
                pa.string(), pa.string(), False, {"type": "enum", "name": full, "symbols": symbols}
            )
            self._define(full, converted, path)
            return converted
        if kind == "fixed":
            return self._fixed(schema, namespace, path)
        if kind == "array":
            items = self.convert(schema.get("items"), namespace, f"{path}[]")
            return _Converted(
                pa.list_(pa.field("element", items.logical, items.nullable)),
                pa.list_(pa.field("element", items.physical, items.nullable)),
                False,
                {"type": "array", "items": items.decode},
            )
        if kind == "map":
            values = self.convert(schema.get("values"), namespace, f"{path}{{}}")
            return _Converted(
                pa.map_(pa.string(), pa.field("value", values.logical, values.nullable)),
                pa.map_(pa.string(), pa.field("value", values.physical, values.nullable)),
                False,
                {"type": "map", "values": values.decode},
            )
        if kind in _PRIMITIVES:
            return self._annotated_primitive(schema, kind)
        return self._reference(kind, namespace, path)

    def _record(self, schema: Mapping[str, Any], namespace: str, path: str) -> _Converted:
        full, inner_ns = self._full_name(schema, namespace, path)
        fields = schema.get("fields")
        if not isinstance(fields, list):
            raise UnsupportedTable(f"field {path or '<root>'}: record {full} has no fields")
        self._in_progress.add(full)
        logical: list[pa.Field] = []
        physical: list[pa.Field] = []
        decode_fields: list[dict[str, Any]] = []
        for field in fields:
            if not isinstance(field, Mapping) or not isinstance(field.get("name"), str):
                raise UnsupportedTable(f"field {path or '<root>'}: record {full} has a field without a name")
            name = field["name"]
            converted = self.convert(field.get("type"), inner_ns, f"{path}.{name}" if path else name)
            logical.append(pa.field(name, converted.logical, converted.nullable))
            physical.append(pa.field(name, converted.physical, converted.nullable))
            decode_fields.append({"name": name, "type": converted.decode})
        self._in_progress.discard(full)
        result = _Converted(
            pa.struct(logical),
            pa.struct(physical),
            False,
            {"type": "record", "name": full, "fields": decode_fields},
        )
        self._define(full, result, path)
        return result

    def _fixed(self, schema: Mapping[str, Any], namespace: str, path: str) -> _Converted:
        full, _ = self._full_name(schema, namespace, path)
        size = schema.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise UnsupportedTable(f"field {path or '<root>'}: fixed {full} has no valid size")
        decimal = _decimal_type(schema, max_bytes=size)
        if decimal is not None:
            decode = {"type": "fixed", "name": full, "size": size, "logicalType": "decimal"}
            decode.update(precision=schema["precision"], scale=schema.get("scale", 0))
            converted = _Converted(decimal, decimal, False, decode)
        else:
            t = pa.binary(size)
            converted = _Converted(t, t, False, {"type": "fixed", "name": full, "size": size})
        self._define(full, converted, path)
        return converted

    @staticmethod
    def _annotated_primitive(schema: Mapping[str, Any], kind: str) -> _Converted:
        base = _PRIMITIVES[kind]
        logical_type = schema.get("logicalType")
        if isinstance(logical_type, str):
            cast_to = _CAST_LOGICAL.get((logical_type, kind))
            if cast_to is not None:
                return _Converted(cast_to, base, False, kind)
            if logical_type == "decimal" and kind == "bytes":
                decimal = _decimal_type(schema, max_bytes=None)
                if decimal is not None:
                    decode = {"type": "bytes", "logicalType": "decimal"}
                    decode.update(precision=schema["precision"], scale=schema.get("scale", 0))
                    return _Converted(decimal, decimal, False, decode)
        return _Converted(base, base, kind == "null", kind)

    def _union(self, branches: list[Any], namespace: str, path: str) -> _Converted:
        converted = [self.convert(b, namespace, path) for b in branches]
        decode = [c.decode for c in converted]
        has_null = any(pa.types.is_null(c.logical) for c in converted)
        values = [c for c in converted if not pa.types.is_null(c.logical)]
        if not values:
            return _Converted(pa.null(), pa.null(), True, decode)
        if len(values) == 1:
            return _Converted(values[0].logical, values[0].physical, has_null, decode)
        # Best effort for unions of several value types: only numbers (-> the widest) and strings.
        if all(c.logical == c.physical and c.logical in _NUMERIC_RANK for c in values):
            widest = max((c.logical for c in values), key=lambda t: _NUMERIC_RANK[t])
            if widest == pa.float32() and any(c.logical == pa.int64() for c in values):
                widest = pa.float64()
            return _Converted(widest, widest, has_null, decode)
        if all(c.logical == pa.string() and c.physical == pa.string() for c in values):
            return _Converted(pa.string(), pa.string(), has_null, decode)
        names = ", ".join(str(c.logical) for c in values)
        raise UnsupportedTable(f"field {path or '<root>'}: a union of {names} has no Arrow equivalent")


def _decimal_type(schema: Mapping[str, Any], max_bytes: int | None) -> pa.DataType | None:
    """The Arrow decimal of a valid ``decimal`` annotation, else None (the annotation is then ignored)."""
    if schema.get("logicalType") != "decimal":
        return None
    precision = schema.get("precision")
    scale = schema.get("scale", 0)
    if not isinstance(precision, int) or not isinstance(scale, int) or isinstance(precision, bool):
        return None
    if precision <= 0 or scale < 0 or scale > precision or precision > _MAX_DECIMAL256_PRECISION:
        return None
    if max_bytes is not None and precision > _max_digits(max_bytes):
        return None
    if precision <= _MAX_DECIMAL128_PRECISION:
        return pa.decimal128(precision, scale)
    return pa.decimal256(precision, scale)


def _max_digits(size: int) -> int:
    """Most decimal digits a two's complement number of ``size`` bytes always holds."""
    if size <= 0:
        return 0
    return len(str(2 ** (8 * size - 1) - 1)) - 1


def _short(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= 80 else text[:77] + "..."


# -- Arrow -> Avro -----------------------------------------------------------------------------------------


def arrow_to_avro_schema(schema: pa.Schema, *, record_name: str, namespace: str) -> dict[str, Any]:
    """The Avro record schema a Hudi writer records for rows of this Arrow schema.

    As Spark's Avro conversion (which Hudi's Spark writer uses) produces it: record ``<record_name>`` in
    ``<namespace>``, nested records named ``<parent>.<field>`` in namespace ``<namespace>.<record_name>``, and
    every nullable field a union ``["null", T]`` with default null. Types are the inverse of the table in the
    module docstring; decimals become named ``fixed`` of the minimal size for their precision, as Spark
    writes them. Meta columns (``_hoodie_*``) are left out: Hudi records the schema without them.

    Raises :class:`~hoodie.errors.UnsupportedTable` naming the field for types Avro cannot hold (unsigned
    64-bit integers, unions, durations, maps with non-string keys).
    """
    fields = [f for f in schema if not f.name.startswith("_hoodie_") or f.name == "_hoodie_is_deleted"]
    return _avro_record(fields, record_name, namespace, path="")


def _avro_record(fields: Sequence[pa.Field], name: str, namespace: str, path: str) -> dict[str, Any]:
    out: list[dict[str, Any]] = []
    for f in fields:
        where = f"{path}.{f.name}" if path else f.name
        typ = _avro_type(f.type, f.name, f"{namespace}.{name}", where)
        if f.nullable:
            out.append({"name": f.name, "type": ["null", typ], "default": None})
        else:
            out.append({"name": f.name, "type": typ})
    return {"type": "record", "name": name, "namespace": namespace, "fields": out}


_ARROW_PRIMITIVE_TO_AVRO: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int8(): "int",
    pa.int16(): "int",
    pa.int32(): "int",
    pa.uint8(): "int",
    pa.uint16(): "int",
    pa.int64(): "long",
    pa.uint32(): "long",
    pa.float16(): "float",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.string_view(): "string",
    pa.binary(): "bytes",
    pa.large_binary(): "bytes",
    pa.binary_view(): "bytes",
}


def _avro_type(t: pa.DataType, name: str, namespace: str, where: str) -> Any:
    if t in _ARROW_PRIMITIVE_TO_AVRO:
        return _ARROW_PRIMITIVE_TO_AVRO[t]
    if pa.types.is_dictionary(t):
        return _avro_type(t.value_type, name, namespace, where)
    if pa.types.is_timestamp(t):
        if t.unit == "s":
            raise UnsupportedTable(f"field {where}: timestamp[s] has no Avro logical type; cast to ms first")
        unit = {"ms": "millis", "us": "micros", "ns": "nanos"}[t.unit]
        return {"type": "long", "logicalType": f"{'timestamp' if t.tz else 'local-timestamp'}-{unit}"}
    if pa.types.is_date32(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_time32(t):
        return {"type": "int", "logicalType": "time-millis"}
    if pa.types.is_time64(t):
        return {"type": "long", "logicalType": "time-micros"}
    if pa.types.is_decimal(t):
        size = _decimal_bytes(t.precision)
        return {
            "type": "fixed",
            "name": name,
            "namespace": namespace,
            "size": size,
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_fixed_size_binary(t):
        return {"type": "fixed", "name": name, "namespace": namespace, "size": t.byte_width}
    if pa.types.is_struct(t):
        return _avro_record([t.field(i) for i in range(t.num_fields)], name, namespace, where)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        item = _avro_type(t.value_type, name, namespace, f"{where}[]")
        return {"type": "array", "items": ["null", item] if t.value_field.nullable else item}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise UnsupportedTable(f"field {where}: Avro maps need string keys, not {t.key_type}")
        value = _avro_type(t.item_type, name, namespace, f"{where}{{}}")
        return {"type": "map", "values": ["null", value] if t.item_field.nullable else value}
    raise UnsupportedTable(f"field {where}: Arrow type {t} has no Avro equivalent")


def _decimal_bytes(precision: int) -> int:
    """The fewest bytes whose two's complement holds every ``precision``-digit value (Spark's rule)."""
    size = 1
    while 2 ** (8 * size - 1) - 1 < 10**precision - 1:
        size += 1
    return size
