"""The Avro schemas of Hudi's timeline files: the project's own copy, one set per Hudi line.

The ``.avsc`` files beside this module are copies of Apache Hudi's ``hudi-common/src/main/avro`` schemas with
the license comments removed: same names, field order, types, defaults and docs. A file named
``<Name>.avsc`` is the same in every supported Hudi line; where the lines differ there is one file per set,
``<Name>.v6.avsc`` and ``<Name>.v8.avsc``:

=============  ==================================================================================
set ``v6``     Hudi 0.15.0, which writes table version 6
set ``v8``     Hudi 1.0.x and master (1.1/1.2), which write table versions 8 and 9
=============  ==================================================================================

Table versions 8 and 9 share one set on purpose. The timeline files written by Hudi 1.0.1/1.0.2 (table version
8) embed exactly the schemas of Hudi master for every record kept here (``HoodieCommitMetadata`` with
``prevBaseFile``/``runtimeStats``/..., ``HoodieClusteringPlan`` and ``HoodieCompactionPlan`` with
``missingSchedulePartitions``); only the 1.0.0 release still wrote the older 1.0.0-branch schemas. Writing the
newer set loses nothing a 1.0.0 reader needs: Avro resolution skips fields a reader does not know.

:func:`load_schema` returns a record schema made self-contained (named types defined at their first use,
referenced by name afterwards, as Avro's Java ``Schema.toString()`` does), both parsed for fastavro and as the
JSON text Hudi's Java writer embeds in a container file (see :attr:`AvroSchema.java_json`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

import fastavro

from hoodie.errors import UnsupportedTable

__all__ = [
    "NAMESPACE",
    "AvroSchema",
    "load_schema",
    "schema_set",
]

NAMESPACE = "org.apache.hudi.avro.model"

# Table version -> schema set. Anything else is refused up front.
_SET_OF_TABLE_VERSION = {6: "v6", 8: "v8", 9: "v8"}

# Schema files in load order (Hudi's own import order; every file only references types of earlier ones).
_FILES = (
    "HoodieCommitMetadata",
    "HoodieCompactionStrategy",
    "HoodieCompactionOperation",
    "HoodieSavePointMetadata",
    "HoodieCompactionMetadata",
    "HoodieCleanPartitionMetadata",
    "HoodieCleanMetadata",
    "HoodieCleanerPlan",
    "HoodieInstantInfo",
    "HoodieRollbackMetadata",
    "HoodieRollbackPlan",
    "HoodieRestoreMetadata",
    "HoodieRestorePlan",
    "HoodieReplaceCommitMetadata",
    "HoodieSliceInfo",
    "HoodieClusteringGroup",
    "HoodieClusteringStrategy",
    "HoodieClusteringPlan",
    "HoodieRequestedReplaceMetadata",
    "HoodieIndexPartitionInfo",
    "HoodieIndexPlan",
    "HoodieIndexCommitMetadata",
    "HoodieArchivedMetaEntry",
)

_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = frozenset({"record", "error", "enum", "fixed"})
# Attributes Avro's Java parser reserves (never kept as properties) on types and on fields.
_SCHEMA_RESERVED = frozenset(
    {"doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"}
)
_FIELD_RESERVED = frozenset({"default", "doc", "name", "order", "type", "aliases"})
# Hudi's generated classes use java.lang.String: the Avro compiler marks every string and map with this.
_JAVA_STRING = ("avro.java.string", "String")


@dataclass(frozen=True)
class AvroSchema:
    """One record schema of a set, ready to read and write with.

    ``name`` is the full name (``org.apache.hudi.avro.model.HoodieCommitMetadata``), ``definition`` the
    self-contained schema as JSON data, ``parsed`` the same parsed by fastavro, and ``java_json`` the text
    that Hudi's Java writer puts under ``avro.schema`` in a container's header for this schema (compact JSON,
    ``avro.java.string`` marks, reserved attributes dropped), so that what we write matches Hudi's files.
    """

    name: str
    set_name: str
    definition: dict[str, Any]
    parsed: Any
    java_json: str

    @property
    def short_name(self) -> str:
        """The name without namespace (``HoodieCommitMetadata``)."""
        return self.name.rsplit(".", 1)[-1]


def schema_set(table_version: int) -> str:
    """The schema set (``"v6"`` or ``"v8"``) for a table version; other versions raise UnsupportedTable."""
    try:
        return _SET_OF_TABLE_VERSION[table_version]
    except KeyError:
        raise UnsupportedTable(
            f"table version {table_version!r} is not supported (supported: 6, 8, 9)"
        ) from None


def load_schema(name: str, table_version: int) -> AvroSchema:
    """The self-contained schema of record ``name`` (short or full name) for a table version."""
    return _load(_full_name(name), schema_set(table_version))


def _full_name(name: str, namespace: str | None = NAMESPACE) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


@cache
def _load(full_name: str, set_name: str) -> AvroSchema:
    registry = _registry(set_name)
    if full_name not in registry:
        raise KeyError(f"no Avro schema {full_name!r} in schema set {set_name}")
    definition = _expand(full_name, NAMESPACE, registry, set())
    if not isinstance(definition, dict) or definition.get("type") != "record":
        raise KeyError(f"{full_name!r} is not a record schema")
    parsed = fastavro.parse_schema(definition, _write_hint=False)
    java_json = "".join(_java_json(definition, None, set()))
    return AvroSchema(full_name, set_name, definition, parsed, java_json)


@cache
def _registry(set_name: str) -> dict[str, tuple[dict[str, Any], str]]:
    """Every named type of a set: full name -> (its JSON definition, the namespace it was defined in)."""
    registry: dict[str, tuple[dict[str, Any], str]] = {}
    folder = resources.files(__package__).joinpath("schemas")
    for stem in _FILES:
        specific = folder.joinpath(f"{stem}.{set_name}.avsc")
        path = specific if specific.is_file() else folder.joinpath(f"{stem}.avsc")
        _collect(json.loads(path.read_text(encoding="utf-8")), "", registry)
    return registry


def _collect(schema: Any, namespace: str, registry: dict[str, tuple[dict[str, Any], str]]) -> None:
    if isinstance(schema, list):
        for branch in schema:
            _collect(branch, namespace, registry)
        return
    if not isinstance(schema, dict):
        return
    kind = schema.get("type")
    if kind in _NAMED:
        full = _full_name(schema["name"], schema.get("namespace", namespace))
        space = full.rsplit(".", 1)[0] if "." in full else ""
        registry[full] = (schema, space)
        for field in schema.get("fields", ()):
            _collect(field["type"], space, registry)
    elif kind == "array":
        _collect(schema["items"], namespace, registry)
    elif kind == "map":
        _collect(schema["values"], namespace, registry)
    elif isinstance(kind, (dict, list)):
        _collect(kind, namespace, registry)


def _expand(
    schema: Any, namespace: str, registry: dict[str, tuple[dict[str, Any], str]], defined: set[str]
) -> Any:
    """Inline named types at their first use (depth first, in field order); later uses stay references."""
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return schema
        full = _full_name(schema, namespace)
        if full in defined:
            return full
        definition, space = registry[full]
        return _expand(definition, space, registry, defined)
    if isinstance(schema, list):
        return [_expand(branch, namespace, registry, defined) for branch in schema]
    kind = schema.get("type")
    out = dict(schema)
    if kind in _NAMED:
        full = _full_name(schema["name"], schema.get("namespace", namespace))
        if full in defined:
            return full
        defined.add(full)
        space = full.rsplit(".", 1)[0] if "." in full else ""
        out["name"] = full.rsplit(".", 1)[-1]
        out["namespace"] = space
        if "fields" in schema:
            out["fields"] = [
                {**field, "type": _expand(field["type"], space, registry, defined)}
                for field in schema["fields"]
            ]
    elif kind == "array":
        out["items"] = _expand(schema["items"], namespace, registry, defined)
    elif kind == "map":
        out["values"] = _expand(schema["values"], namespace, registry, defined)
    elif isinstance(kind, (dict, list)):
        return _expand(kind, namespace, registry, defined)
    return out


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _java_json(schema: Any, space: str | None, written: set[str]) -> list[str]:
    """Avro Java's ``Schema.toString()`` of a schema compiled with ``stringType=String`` (see module doc)."""
    if isinstance(schema, str):
        if schema == "string":
            return [_compact({"type": "string", _JAVA_STRING[0]: _JAVA_STRING[1]})]
        if schema in _PRIMITIVES:
            return [_compact(schema)]
        name_space, _, short = schema.rpartition(".")
        return [_compact(short if name_space == (space or "") else schema)]
    if isinstance(schema, list):
        parts = ["["]
        for i, branch in enumerate(schema):
            if i:
                parts.append(",")
            parts.extend(_java_json(branch, space, written))
        parts.append("]")
        return parts
    kind = schema["type"]
    props = [(k, v) for k, v in schema.items() if k not in _SCHEMA_RESERVED and k != "logicalType"]
    if kind in _PRIMITIVES:
        if kind == "string":
            props = [_JAVA_STRING, *props]
        if not props:
            return [_compact(kind)]
        return [_compact({"type": kind, **dict(props)})]
    parts = ["{", f'"type":{_compact(kind)}']
    if kind == "array":
        parts.append(',"items":')
        parts.extend(_java_json(schema["items"], space, written))
    elif kind == "map":
        parts.append(',"values":')
        parts.extend(_java_json(schema["values"], space, written))
        props = [_JAVA_STRING, *props]
    elif kind in _NAMED:
        full = _full_name(schema["name"], schema.get("namespace", space))
        written.add(full)
        own_space, _, short = full.rpartition(".")
        parts.append(f',"name":{_compact(short)}')
        if own_space != (space or ""):
            parts.append(f',"namespace":{_compact(own_space)}')
        if "doc" in schema:
            parts.append(f',"doc":{_compact(schema["doc"])}')
        if kind in ("record", "error"):
            parts.append(',"fields":[')
            for i, field in enumerate(schema["fields"]):
                if i:
                    parts.append(",")
                parts.extend(_java_field_json(field, own_space, written))
            parts.append("]")
        elif kind == "enum":
            parts.append(f',"symbols":{_compact(schema["symbols"])}')
        else:
            parts.append(f',"size":{_compact(schema["size"])}')
    else:
        raise ValueError(f"unknown Avro type {kind!r}")
    for key, value in props:
        parts.append(f",{_compact(key)}:{_compact(value)}")
    parts.append("}")
    return parts


def _java_field_json(field: dict[str, Any], space: str, written: set[str]) -> list[str]:
    parts = ["{", f'"name":{_compact(field["name"])}', ',"type":']
    parts.extend(_java_json(field["type"], space, written))
    if "doc" in field:
        parts.append(f',"doc":{_compact(field["doc"])}')
    if "default" in field:
        parts.append(f',"default":{_compact(field["default"])}')
    if field.get("order", "ascending") != "ascending":
        parts.append(f',"order":{_compact(field["order"])}')
    for key, value in field.items():
        if key not in _FIELD_RESERVED:
            parts.append(f",{_compact(key)}:{_compact(value)}")
    parts.append("}")
    return parts
