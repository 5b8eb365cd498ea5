"""The records of Hudi's metadata table (``HoodieMetadataRecord``) and how two versions of one combine.

Every metadata-table partition holds records of one Avro schema, keyed by a string:

============================  ==================  =======================================================
partition (folder)            ``type``            key
============================  ==================  =======================================================
``files``                     1 ALL_PARTITIONS    ``__all_partitions__``: the data table's partition paths
``files``                     2 FILE_LIST         a data partition path (``.`` for a non-partitioned table)
``column_stats``              3 COLUMN_STATS      Base64 hashes of column name, partition path and file name
``bloom_filters``             4 BLOOM_FILTER      Base64 hashes of partition path and file name
``record_index``              5 RECORD_INDEX      the record key
``partition_stats``           6 PARTITION_STATS   Base64 hashes of column name and partition path
``secondary_index_<name>``    7 SECONDARY_INDEX   secondary key and record key
============================  ==================  =======================================================

A newer version of a key combines with the older one as Hudi's ``HoodieMetadataPayload`` does
(:func:`combine`): file lists merge (a file marked deleted leaves, a file seen twice keeps its larger size,
since v6 log files grow by appends), column and partition statistics of one file or partition merge
their ranges, every other kind is replaced by the newer version. Records are plain dicts as fastavro decodes
them (field names of the Avro schema); a union of several records (the statistics' minimum and maximum)
decodes as ``(record name, value)``, so that an ``IntWrapper`` stays distinguishable from a ``DateWrapper``
and a record written back keeps its branch.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Iterator, Mapping
from enum import IntEnum
from functools import lru_cache
from typing import Any

import fastavro

from hoodie.errors import CorruptMetadataTable
from hoodie.metadata.column_ranges import merge_column_stats

__all__ = [
    "ALL_PARTITIONS_KEY",
    "NON_PARTITIONED_NAME",
    "MetadataPartition",
    "MetadataRecord",
    "RecordType",
    "combine",
    "decode_records",
    "file_list",
    "is_deleted",
    "partition_key",
    "partition_path_of_key",
]

MetadataRecord = dict[str, Any]

#: The key of the ``files`` record that lists the data table's partitions.
ALL_PARTITIONS_KEY = "__all_partitions__"
#: How the ``files`` partition names the one partition of a non-partitioned table.
NON_PARTITIONED_NAME = "."


class RecordType(IntEnum):
    """``HoodieMetadataRecord.type``."""

    ALL_PARTITIONS = 1
    FILE_LIST = 2
    COLUMN_STATS = 3
    BLOOM_FILTER = 4
    RECORD_INDEX = 5
    PARTITION_STATS = 6
    SECONDARY_INDEX = 7


class MetadataPartition:
    """Folder names of the metadata table's partitions (secondary and expression indexes add a suffix)."""

    FILES = "files"
    COLUMN_STATS = "column_stats"
    BLOOM_FILTERS = "bloom_filters"
    RECORD_INDEX = "record_index"
    PARTITION_STATS = "partition_stats"
    SECONDARY_INDEX_PREFIX = "secondary_index_"
    EXPRESSION_INDEX_PREFIX = "expr_index_"


def partition_key(partition_path: str) -> str:
    """The ``files`` key of a data partition path."""
    return partition_path or NON_PARTITIONED_NAME


def partition_path_of_key(key: str) -> str:
    """The data partition path a ``files`` key names."""
    return "" if key == NON_PARTITIONED_NAME else key


@lru_cache(maxsize=64)
def _parsed(schema_json: str) -> Any:
    try:
        return fastavro.parse_schema(json.loads(schema_json), _write_hint=False)
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as e:
        raise CorruptMetadataTable(f"unusable metadata record schema: {e}") from e


def decode_records(
    schema_json: str, entries: Iterable[tuple[str, bytes]], *, where: str
) -> Iterator[MetadataRecord]:
    """Decode the Avro-binary ``HoodieMetadataRecord`` values of HFile entries ``(key, value)`` written with
    ``schema_json``. The HFile key is the record's key (Hudi leaves the ``key`` field of the values empty);
    raises :class:`CorruptMetadataTable` naming ``where`` when one does not decode."""
    try:
        parsed = _parsed(schema_json)
    except CorruptMetadataTable as e:
        raise CorruptMetadataTable(f"{where}: {e}") from e
    for i, (key, value) in enumerate(entries):
        try:
            record = fastavro.schemaless_reader(
                io.BytesIO(value),
                parsed,
                None,
                return_record_name=True,
                return_record_name_override=True,
            )
        except Exception as e:  # fastavro raises EOFError, ValueError, IndexError, UnicodeDecodeError...
            raise CorruptMetadataTable(f"{where}: record {i} does not decode: {e!r}") from e
        if not isinstance(record, dict) or "key" not in record or "type" not in record:
            raise CorruptMetadataTable(f"{where}: record {i} is not a HoodieMetadataRecord")
        record["key"] = key
        yield record


# -- combining versions of a key ------------------------------------------------------------------------

_STATS_FIELD = {
    RecordType.COLUMN_STATS: "ColumnStatsMetadata",
    RecordType.PARTITION_STATS: "ColumnStatsMetadata",
}
_PAYLOAD_FIELD = {
    RecordType.BLOOM_FILTER: "BloomFilterMetadata",
    RecordType.RECORD_INDEX: "recordIndexMetadata",
    RecordType.SECONDARY_INDEX: "SecondaryIndexMetadata",
}


def is_deleted(record: MetadataRecord) -> bool:
    """Whether a record says its subject is gone (a deleted file's stats, a deleted bloom filter or
    secondary-index entry). File lists are never deleted this way: their entries are."""
    kind = RecordType(record["type"])
    field = _STATS_FIELD.get(kind) or _PAYLOAD_FIELD.get(kind)
    if field is None:
        return False
    payload = record.get(field)
    return bool(payload and payload.get("isDeleted"))


def file_list(record: MetadataRecord) -> dict[str, int]:
    """The live files (name -> size) of a ``files`` record."""
    entries = record.get("filesystemMetadata") or {}
    return {name: int(info["size"]) for name, info in entries.items() if not info.get("isDeleted")}


def combine(older: MetadataRecord | None, newer: MetadataRecord) -> MetadataRecord:
    """The record a key holds after ``newer`` is written over ``older`` (see the module doc)."""
    if older is None:
        if newer.get("type") in (RecordType.ALL_PARTITIONS, RecordType.FILE_LIST):
            return _with_files(newer, _merge_files({}, newer.get("filesystemMetadata")))
        return newer
    kind = newer.get("type")
    if older.get("type") != kind:
        raise CorruptMetadataTable(
            f"metadata record {newer.get('key')!r} changes type from {older.get('type')} to {kind}"
        )
    if kind in (RecordType.ALL_PARTITIONS, RecordType.FILE_LIST):
        merged = _merge_files(older.get("filesystemMetadata") or {}, newer.get("filesystemMetadata"))
        return _with_files(newer, merged)
    if kind in _STATS_FIELD:
        return _merge_stats(older, newer)
    return newer


def _with_files(record: MetadataRecord, files: dict[str, dict[str, Any]]) -> MetadataRecord:
    out = dict(record)
    out["filesystemMetadata"] = files
    return out


def _merge_files(
    older: Mapping[str, Mapping[str, Any]], newer: Mapping[str, Mapping[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    merged = {name: dict(info) for name, info in older.items() if not info.get("isDeleted")}
    for name, info in (newer or {}).items():
        if info.get("isDeleted"):
            merged.pop(name, None)
            continue
        size = int(info["size"])
        before = merged.get(name)
        if before is not None:
            size = max(size, int(before["size"]))
        merged[name] = {"size": size, "isDeleted": False}
    return merged


def _merge_stats(older: MetadataRecord, newer: MetadataRecord) -> MetadataRecord:
    field = _STATS_FIELD[newer["type"]]
    old, new = older.get(field), newer.get(field)
    if not old or not new or new.get("isDeleted") or old.get("isDeleted") or new.get("isTightBound"):
        return newer  # a tight bound was computed over everything live: it replaces what came before
    merged = dict(new)
    merged.update(merge_column_stats([old, new])[new["columnName"]])
    merged["valueType"] = new.get("valueType", merged.get("valueType"))
    out = dict(newer)
    out[field] = merged
    return out
