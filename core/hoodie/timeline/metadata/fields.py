"""Typed access to the fields of decoded timeline records (Avro records, JSON objects), and the reading and
writing of the single-record Avro containers that hold them, fitted to the table's schema set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from hoodie.avro import AvroSchema, load_schema
from hoodie.avro.container import read_container, write_single_record
from hoodie.errors import CorruptTimelineFile

__all__ = [
    "Fields",
    "conform",
    "freeze",
    "json_type",
    "read",
    "tuple_map",
    "write",
]

_T = TypeVar("_T")


class Fields:
    """Typed access to one decoded record (Avro or JSON object); type errors are CorruptTimelineFile."""

    __slots__ = ("data", "what")

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, dict):
            raise CorruptTimelineFile(f"{what} is a {json_type(data)}, expected an object")
        self.data: dict[str, Any] = data
        self.what = what

    def _bad(self, key: str, expected: str) -> CorruptTimelineFile:
        value = self.data.get(key)
        return CorruptTimelineFile(f"{self.what}: field {key!r} is a {json_type(value)}, expected {expected}")

    def opt_str(self, key: str) -> str | None:
        v = self.data.get(key)
        if v is None or isinstance(v, str):
            return v
        raise self._bad(key, "a string")

    def get_str(self, key: str, default: str | None = None) -> str:
        v = self.opt_str(key)
        if v is None:
            if default is None:
                raise CorruptTimelineFile(f"{self.what}: required field {key!r} is missing")
            return default
        return v

    def opt_int(self, key: str) -> int | None:
        v = self.data.get(key)
        if v is None or (isinstance(v, int) and not isinstance(v, bool)):
            return v
        raise self._bad(key, "an integer")

    def get_int(self, key: str, default: int | None = None) -> int:
        v = self.opt_int(key)
        if v is None:
            if default is None:
                raise CorruptTimelineFile(f"{self.what}: required field {key!r} is missing")
            return default
        return v

    def opt_bool(self, key: str) -> bool | None:
        v = self.data.get(key)
        if v is None or isinstance(v, bool):
            return v
        raise self._bad(key, "a boolean")

    def opt_str_list(self, key: str) -> tuple[str, ...] | None:
        v = self.data.get(key)
        if v is None:
            return None
        if isinstance(v, list) and all(isinstance(x, str) for x in v):
            return tuple(v)
        raise self._bad(key, "a list of strings")

    def str_list(self, key: str) -> tuple[str, ...]:
        return self.opt_str_list(key) or ()

    def _map(self, key: str, check: Any, expected: str) -> dict[str, Any] | None:
        v = self.data.get(key)
        if v is None:
            return None
        if isinstance(v, dict) and all(isinstance(k, str) and check(x) for k, x in v.items()):
            return dict(v)
        raise self._bad(key, expected)

    def str_map(self, key: str) -> dict[str, str]:
        return self._map(key, lambda x: isinstance(x, str), "a map of strings") or {}

    def opt_int_map(self, key: str) -> dict[str, int] | None:
        return self._map(key, lambda x: isinstance(x, int) and not isinstance(x, bool), "a map of integers")

    def int_map(self, key: str) -> dict[str, int]:
        return self.opt_int_map(key) or {}

    def float_map(self, key: str) -> dict[str, float]:
        m = self._map(
            key, lambda x: isinstance(x, (int, float)) and not isinstance(x, bool), "a map of numbers"
        )
        return {k: float(x) for k, x in (m or {}).items()}

    def str_list_map(self, key: str) -> dict[str, tuple[str, ...]]:
        m = self._map(
            key,
            lambda x: isinstance(x, list) and all(isinstance(y, str) for y in x),
            "a map of string lists",
        )
        return {k: tuple(x) for k, x in (m or {}).items()}

    def opt_record(self, key: str) -> Fields | None:
        v = self.data.get(key)
        return None if v is None else Fields(v, f"{self.what}.{key}")

    def record_list(self, key: str) -> list[Fields]:
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._bad(key, "a list")
        return [Fields(x, f"{self.what}.{key}[{i}]") for i, x in enumerate(v)]

    def record_map(self, key: str) -> dict[str, Fields]:
        v = self.data.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self._bad(key, "a map")
        return {k: Fields(x, f"{self.what}.{key}[{k!r}]") for k, x in v.items()}


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, (list, tuple)):
        return "list"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def tuple_map(m: Mapping[str, Iterable[_T]]) -> dict[str, tuple[_T, ...]]:
    return {k: tuple(v) for k, v in m.items()}


def freeze(obj: Any, **conversions: Any) -> None:
    """In a frozen dataclass's __post_init__: store normalised copies (tuples for sequences, dicts)."""
    for name, convert in conversions.items():
        value = getattr(obj, name)
        if value is not None:
            object.__setattr__(obj, name, convert(value))


# ---------------------------------------------------------------------------------------------------------
# Fitting records to a schema before writing


def conform(value: Any, schema: AvroSchema) -> dict[str, Any]:
    """``value`` reduced to the fields of ``schema`` (missing ones take their default or null), recursively,
    so that one in-memory form writes with every schema set."""
    out = _conform_value(value, schema.definition, {})
    if not isinstance(out, dict):
        raise TypeError(f"a {schema.name} record must be a mapping")
    return out


def _conform_value(value: Any, schema: Any, named: dict[str, Any]) -> Any:
    if isinstance(schema, str):
        return _conform_value(value, named[schema], named) if schema in named else value
    if isinstance(schema, list):
        if value is None:
            return None
        for branch in schema:
            if branch != "null" and _fits(value, _kind(branch, named)):
                return _conform_value(value, branch, named)
        return value
    kind = schema.get("type")
    if kind == "record":
        full = f"{schema['namespace']}.{schema['name']}" if schema.get("namespace") else schema["name"]
        named[full] = schema
        if not isinstance(value, Mapping):
            return value
        return {
            f["name"]: _conform_value(value[f["name"]], f["type"], named)
            if f["name"] in value
            else f.get("default")
            for f in schema["fields"]
        }
    if kind == "array" and isinstance(value, (list, tuple)):
        return [_conform_value(v, schema["items"], named) for v in value]
    if kind == "map" and isinstance(value, Mapping):
        return {k: _conform_value(v, schema["values"], named) for k, v in value.items()}
    return value


def _kind(schema: Any, named: dict[str, Any]) -> str:
    if isinstance(schema, str):
        return str(named[schema]["type"]) if schema in named else schema
    return str(schema.get("type"))


def _fits(value: Any, kind: str) -> bool:
    if isinstance(value, Mapping):
        return kind in ("record", "map")
    if isinstance(value, (list, tuple)):
        return kind == "array"
    return kind not in ("record", "map", "array")


def read(data: bytes, expect: str, what: str) -> Fields:
    if not data:
        raise CorruptTimelineFile(f"{what} is empty, expected an Avro {expect}")
    container = read_container(data)
    if container.schema_short_name != expect:
        raise CorruptTimelineFile(f"{what}: expected an Avro {expect}, found {container.schema_name}")
    return Fields(container.record, expect)


def write(record: dict[str, Any], schema_name: str, table_version: int) -> bytes:
    schema = load_schema(schema_name, table_version)
    return write_single_record(conform(record, schema), schema)
