"""Commit metadata (``HoodieCommitMetadata``, ``HoodieReplaceCommitMetadata``) of commits, delta commits and
replace commits: the files each wrote, as v6 Jackson JSON or v8+ Avro.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hoodie.avro import load_schema, schema_set
from hoodie.avro.container import MAGIC, read_container, write_single_record
from hoodie.errors import CorruptTimelineFile
from hoodie.java_compat import jackson_pretty, java_hash_map_order, keep_order
from hoodie.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
)
from hoodie.timeline.metadata.fields import Fields, conform, freeze, json_type, tuple_map

__all__ = [
    "CommitMetadata",
    "RuntimeStats",
    "WriteStat",
    "commit_metadata_to_avro",
    "decode_commit_metadata",
    "encode_commit_metadata",
]


@dataclass(frozen=True)
class RuntimeStats:
    """``HoodieWriteStat.runtimeStats``: milliseconds spent scanning logs, merging and creating files."""

    total_scan_time: int | None = None
    total_upsert_time: int | None = None
    total_create_time: int | None = None


# (JSON/Avro name, attribute, kind) of every HoodieWriteStat field we know, in the Avro schema's order.
_WRITE_STAT_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("fileId", "file_id", "str"),
    ("path", "path", "str"),
    ("prevCommit", "prev_commit", "str"),
    ("numWrites", "num_writes", "int"),
    ("numDeletes", "num_deletes", "int"),
    ("numUpdateWrites", "num_update_writes", "int"),
    ("totalWriteBytes", "total_write_bytes", "int"),
    ("totalWriteErrors", "total_write_errors", "int"),
    ("partitionPath", "partition_path", "str"),
    ("totalLogRecords", "total_log_records", "int"),
    ("totalLogFiles", "total_log_files", "int"),
    ("totalUpdatedRecordsCompacted", "total_updated_records_compacted", "int"),
    ("numInserts", "num_inserts", "int"),
    ("totalLogBlocks", "total_log_blocks", "int"),
    ("totalCorruptLogBlock", "total_corrupt_log_block", "int"),
    ("totalRollbackBlocks", "total_rollback_blocks", "int"),
    ("fileSizeInBytes", "file_size_in_bytes", "int"),
    ("logVersion", "log_version", "int"),
    ("logOffset", "log_offset", "int"),
    ("baseFile", "base_file", "str"),
    ("logFiles", "log_files", "str_list"),
    ("cdcStats", "cdc_stats", "int_map"),
    ("prevBaseFile", "prev_base_file", "str"),
    ("minEventTime", "min_event_time", "int"),
    ("maxEventTime", "max_event_time", "int"),
    ("runtimeStats", "runtime_stats", "runtime"),
    ("totalLogFilesCompacted", "total_log_files_compacted", "int"),
    ("totalLogReadTimeMs", "total_log_read_time_ms", "int"),
    ("totalLogSizeCompacted", "total_log_size_compacted", "int"),
    ("tempPath", "temp_path", "str"),
    ("numUpdates", "num_updates", "int"),
)
_WRITE_STAT_ATTR = {name: attr for name, attr, _ in _WRITE_STAT_FIELDS}

# The JSON layout of Hudi 0.14's HoodieWriteStat (Jackson: fields in declaration order, superclass first),
# then HoodieDeltaWriteStat's own fields. Used for write stats we create; decoded ones keep their own layout.
_V6_STAT_KEYS = (
    "fileId",
    "path",
    "cdcStats",
    "prevCommit",
    "numWrites",
    "numDeletes",
    "numUpdateWrites",
    "numInserts",
    "totalWriteBytes",
    "totalWriteErrors",
    "tempPath",
    "partitionPath",
    "totalLogRecords",
    "totalLogFilesCompacted",
    "totalLogSizeCompacted",
    "totalUpdatedRecordsCompacted",
    "totalLogBlocks",
    "totalCorruptLogBlock",
    "totalRollbackBlocks",
    "fileSizeInBytes",
    "minEventTime",
    "maxEventTime",
    "runtimeStats",
)
_V6_DELTA_STAT_KEYS = ("logVersion", "logOffset", "baseFile", "logFiles", "recordsStats")
# Java primitives (long/int): Jackson writes 0, never null, for them.
_V6_PRIMITIVE_KEYS = frozenset(
    {
        "numWrites",
        "numDeletes",
        "numUpdateWrites",
        "numInserts",
        "totalWriteBytes",
        "totalWriteErrors",
        "totalLogRecords",
        "totalLogFilesCompacted",
        "totalLogSizeCompacted",
        "totalUpdatedRecordsCompacted",
        "totalLogBlocks",
        "totalCorruptLogBlock",
        "totalRollbackBlocks",
        "fileSizeInBytes",
        "logVersion",
        "logOffset",
    }
)


@dataclass(frozen=True)
class WriteStat:
    """One file written by a commit (``HoodieWriteStat``; delta commits add the log fields).

    Every field is nullable, as in Hudi's Avro schema, and kept exactly as read: ``None`` where the file has
    null or lacks the field. ``path`` is relative to the base path. Keys we do not know (``recordsStats``,
    ``columnStats`` of some writers...) are kept in ``extra`` with their JSON/Avro values, and ``json_keys``
    remembers the key order of a v6 JSON stat, so that re-encoding writes the same bytes.
    """

    file_id: str | None = None
    path: str | None = None
    partition_path: str | None = None
    prev_commit: str | None = None
    num_writes: int | None = None
    num_deletes: int | None = None
    num_update_writes: int | None = None
    num_inserts: int | None = None
    num_updates: int | None = None
    total_write_bytes: int | None = None
    total_write_errors: int | None = None
    file_size_in_bytes: int | None = None
    total_log_records: int | None = None
    total_log_files: int | None = None
    total_log_files_compacted: int | None = None
    total_log_size_compacted: int | None = None
    total_updated_records_compacted: int | None = None
    total_log_blocks: int | None = None
    total_corrupt_log_block: int | None = None
    total_rollback_blocks: int | None = None
    total_log_read_time_ms: int | None = None
    min_event_time: int | None = None
    max_event_time: int | None = None
    log_version: int | None = None
    log_offset: int | None = None
    base_file: str | None = None
    log_files: tuple[str, ...] | None = None
    prev_base_file: str | None = None
    temp_path: str | None = None
    cdc_stats: dict[str, int] | None = None
    runtime_stats: RuntimeStats | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    json_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        freeze(self, log_files=tuple, cdc_stats=dict, extra=dict, json_keys=tuple)

    @property
    def file_name(self) -> str | None:
        """The written file's name (last component of ``path``)."""
        return None if self.path is None else self.path.rsplit("/", 1)[-1]

    @property
    def is_delta(self) -> bool:
        """True for a log write of a delta commit (it names its slice's base file or log files)."""
        return self.log_version is not None or self.log_files is not None or self.base_file is not None


@dataclass(frozen=True)
class CommitMetadata:
    """The content of a commit, delta commit or replace commit (``HoodieCommitMetadata`` and
    ``HoodieReplaceCommitMetadata``).

    ``replace`` tells the two apart: completed replace commits hold the replace form, with
    ``partition_to_replace_file_ids`` (the file groups the commit replaced); inflight replace commits and all
    other actions hold the plain form. ``version`` is the Avro record's (Hudi leaves it null). ``extra`` keeps
    top-level JSON keys we do not know (older writers' derived totals); ``json_keys`` the key order of a
    v6 JSON file.
    """

    partition_to_write_stats: dict[str, tuple[WriteStat, ...]] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    operation_type: str | None = None
    compacted: bool | None = None
    partition_to_replace_file_ids: dict[str, tuple[str, ...]] = field(default_factory=dict)
    replace: bool = False
    version: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    json_keys: tuple[str, ...] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        freeze(
            self,
            partition_to_write_stats=tuple_map,
            extra_metadata=dict,
            partition_to_replace_file_ids=tuple_map,
            extra=dict,
            json_keys=tuple,
        )
        if self.partition_to_replace_file_ids and not self.replace:
            raise ValueError("partition_to_replace_file_ids needs replace=True (HoodieReplaceCommitMetadata)")

    @property
    def write_stats(self) -> tuple[WriteStat, ...]:
        """All write stats, partition by partition."""
        return tuple(s for stats in self.partition_to_write_stats.values() for s in stats)

    @property
    def written_file_paths(self) -> tuple[str, ...]:
        """Paths (relative to the base path) of every file the commit wrote."""
        return tuple(s.path for s in self.write_stats if s.path)

    @property
    def schema(self) -> str | None:
        """The writer's Avro schema (``extraMetadata["schema"]``); None when absent or empty."""
        return self.extra_metadata.get("schema") or None

    @property
    def replaced_file_ids(self) -> tuple[tuple[str, str], ...]:
        """(partition, file id) of every file group the commit replaced."""
        return tuple((p, f) for p, ids in self.partition_to_replace_file_ids.items() for f in ids)


_COMMIT_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, COMPACTION, LOG_COMPACTION, CLUSTERING})
_COMMIT_SCHEMA = "HoodieCommitMetadata"
_REPLACE_SCHEMA = "HoodieReplaceCommitMetadata"
_COMMIT_JSON_KEYS = ("partitionToWriteStats", "compacted", "extraMetadata", "operationType")
_REPLACE_JSON_KEY = "partitionToReplaceFileIds"


def decode_commit_metadata(data: bytes, *, table_version: int, action: str) -> CommitMetadata:
    """Decode the commit metadata of a ``commit``/``deltacommit``/``replacecommit`` file.

    The content decides the form: an Avro container (v8+) or Jackson JSON (v6, and legacy instants of
    upgraded v8+ tables). Empty content is empty metadata (Hudi writes empty requested files). Anything else,
    or JSON that is not an object of the expected shape, raises CorruptTimelineFile.
    """
    schema_set(table_version)
    _check_commit_action(action)
    if not data:
        return CommitMetadata()
    if data[:4] == MAGIC:
        container = read_container(data)
        kind = container.schema_short_name
        if kind not in (_COMMIT_SCHEMA, _REPLACE_SCHEMA):
            raise CorruptTimelineFile(f"{action} metadata: expected an Avro {_COMMIT_SCHEMA}, found {kind}")
        return _commit_from_avro(container.record, replace=kind == _REPLACE_SCHEMA, what=kind)
    try:
        text = bytes(data).decode("utf-8")
        document = json.loads(text)
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptTimelineFile(
            f"{action} metadata is neither an Avro container nor JSON: {type(e).__name__}: {e}"
        ) from None
    if not isinstance(document, dict):
        raise CorruptTimelineFile(
            f"{action} metadata JSON is a {json_type(document)}, expected an object "
            "with partitionToWriteStats, extraMetadata, ..."
        )
    return _commit_from_json(document, what=f"{action} metadata")


def encode_commit_metadata(md: CommitMetadata, *, table_version: int, action: str) -> bytes:
    """Encode commit metadata as the table's Hudi writes it: v6 Jackson JSON, v8+ an Avro container."""
    set_name = schema_set(table_version)
    _check_commit_action(action)
    if md.replace and action != REPLACE_COMMIT:
        raise ValueError(f"replace commit metadata belongs to a replacecommit, not a {action}")
    if set_name == "v6":
        return jackson_pretty(_commit_to_json(md)).encode("utf-8")
    schema = load_schema(_REPLACE_SCHEMA if md.replace else _COMMIT_SCHEMA, table_version)
    return write_single_record(conform(_commit_to_avro(md), schema), schema)


def commit_metadata_to_avro(md: CommitMetadata, *, table_version: int) -> dict[str, Any]:
    """The Avro record (``HoodieReplaceCommitMetadata`` when ``md.replace``, else ``HoodieCommitMetadata``, of
    the table version's schema set) of commit metadata decoded from either form.

    This is what Hudi's Jackson ``convertValue`` makes of v6 JSON metadata (the archive log stores it so):
    every field of the schema taken by name, null where the metadata has none (``version`` included), keys
    the schema lacks dropped.
    """
    schema = load_schema(_REPLACE_SCHEMA if md.replace else _COMMIT_SCHEMA, table_version)
    return conform(_commit_to_avro(md), schema)


def _check_commit_action(action: str) -> None:
    if action not in _COMMIT_ACTIONS:
        raise ValueError(f"{action!r} instants do not hold commit metadata")


def _write_stat_from(rec: Fields, *, json_keys: tuple[str, ...] | None) -> WriteStat:
    values: dict[str, Any] = {}
    for name, attr, kind in _WRITE_STAT_FIELDS:
        if kind == "str":
            values[attr] = rec.opt_str(name)
        elif kind == "int":
            values[attr] = rec.opt_int(name)
        elif kind == "str_list":
            values[attr] = rec.opt_str_list(name)
        elif kind == "int_map":
            values[attr] = rec.opt_int_map(name)
        else:
            runtime = rec.opt_record(name)
            values[attr] = (
                None
                if runtime is None
                else RuntimeStats(
                    runtime.opt_int("totalScanTime"),
                    runtime.opt_int("totalUpsertTime"),
                    runtime.opt_int("totalCreateTime"),
                )
            )
    extra = {k: v for k, v in rec.data.items() if k not in _WRITE_STAT_ATTR}
    return WriteStat(**values, extra=extra, json_keys=json_keys)


def _stats_map(rec: Fields, *, from_json: bool) -> dict[str, tuple[WriteStat, ...]]:
    raw = rec.data.get("partitionToWriteStats")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise CorruptTimelineFile(
            f"{rec.what}: partitionToWriteStats is a {json_type(raw)}, expected an object"
        )
    out: dict[str, tuple[WriteStat, ...]] = {}
    for partition, stats in raw.items():
        if not isinstance(stats, list):
            raise CorruptTimelineFile(
                f"{rec.what}: write stats of partition {partition!r} are a {json_type(stats)}, "
                "expected a list"
            )
        out[partition] = tuple(
            _write_stat_from(
                Fields(s, f"{rec.what}: write stat {i} of partition {partition!r}"),
                json_keys=tuple(s) if from_json and isinstance(s, dict) else None,
            )
            for i, s in enumerate(stats)
        )
    return out


def _commit_from_json(document: dict[str, Any], *, what: str) -> CommitMetadata:
    rec = Fields(document, what)
    known = (*_COMMIT_JSON_KEYS, _REPLACE_JSON_KEY)
    return CommitMetadata(
        partition_to_write_stats=_stats_map(rec, from_json=True),
        extra_metadata=rec.str_map("extraMetadata"),
        operation_type=rec.opt_str("operationType"),
        compacted=rec.opt_bool("compacted"),
        partition_to_replace_file_ids=rec.str_list_map(_REPLACE_JSON_KEY),
        replace=_REPLACE_JSON_KEY in document,
        extra={k: v for k, v in document.items() if k not in known},
        json_keys=tuple(document),
    )


def _commit_from_avro(record: dict[str, Any], *, replace: bool, what: str) -> CommitMetadata:
    rec = Fields(record, what)
    known = (*_COMMIT_JSON_KEYS, _REPLACE_JSON_KEY, "version")
    return CommitMetadata(
        partition_to_write_stats=_stats_map(rec, from_json=False),
        extra_metadata=rec.str_map("extraMetadata"),
        operation_type=rec.opt_str("operationType"),
        compacted=rec.opt_bool("compacted"),
        partition_to_replace_file_ids=rec.str_list_map(_REPLACE_JSON_KEY),
        replace=replace,
        version=rec.opt_int("version"),
        extra={k: v for k, v in record.items() if k not in known},
    )


def _runtime_json(r: RuntimeStats | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {
        "totalScanTime": r.total_scan_time,
        "totalUpsertTime": r.total_upsert_time,
        "totalCreateTime": r.total_create_time,
    }


def _stat_value(stat: WriteStat, name: str) -> Any:
    attr = _WRITE_STAT_ATTR.get(name)
    if attr is None:
        return stat.extra.get(name)
    value = getattr(stat, attr)
    if name == "runtimeStats":
        return _runtime_json(value)
    if name == "logFiles" and value is not None:
        return list(value)
    return value


def _stat_to_json(stat: WriteStat) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if stat.json_keys is not None:
        for key in stat.json_keys:
            out[key] = _stat_value(stat, key)
    else:
        for key in _V6_STAT_KEYS + (_V6_DELTA_STAT_KEYS if stat.is_delta else ()):
            value = _stat_value(stat, key)
            if value is None and key in _V6_PRIMITIVE_KEYS:
                value = 0
            elif value is None and key == "recordsStats":
                value = {"val": None}  # Jackson's rendering of an empty Option, as Hudi 0.14 writes it
            out[key] = value
    # Never drop what the stat holds: set fields and extra keys that the layout did not name.
    for name, attr, _ in _WRITE_STAT_FIELDS:
        if name not in out and getattr(stat, attr) is not None:
            out[name] = _stat_value(stat, name)
    for key, value in stat.extra.items():
        out.setdefault(key, value)
    return out


def _commit_to_json(md: CommitMetadata) -> dict[str, Any]:
    fresh = md.json_keys is None
    order = java_hash_map_order if fresh else keep_order
    values: dict[str, Any] = {
        "partitionToWriteStats": {
            p: [_stat_to_json(s) for s in ss] for p, ss in order(md.partition_to_write_stats).items()
        },
        "compacted": md.compacted,
        "extraMetadata": order(md.extra_metadata),
        "operationType": md.operation_type,
    }
    if md.replace:
        values[_REPLACE_JSON_KEY] = {k: list(v) for k, v in order(md.partition_to_replace_file_ids).items()}
    if fresh:
        out = values
    else:
        # The decoded file's layout; then whatever it lacked but the metadata now holds.
        out = {}
        for key in md.json_keys or ():
            if key in values:
                out[key] = values[key]
            elif key in md.extra:
                out[key] = md.extra[key]
        for key, value in values.items():
            if key not in out and value not in (None, {}):
                out[key] = value
    for key, value in md.extra.items():
        out.setdefault(key, value)
    return out


def _stat_to_avro(stat: WriteStat) -> dict[str, Any]:
    out: dict[str, Any] = dict(stat.extra)
    for name, attr, _ in _WRITE_STAT_FIELDS:
        value = getattr(stat, attr)
        if name == "runtimeStats" and value is not None:
            value = {
                "totalScanTime": value.total_scan_time,
                "totalCreateTime": value.total_create_time,
                "totalUpsertTime": value.total_upsert_time,
            }
        elif name == "logFiles" and value is not None:
            value = list(value)
        out[name] = value
    return out


def _commit_to_avro(md: CommitMetadata) -> dict[str, Any]:
    out: dict[str, Any] = dict(md.extra)
    out.update(
        partitionToWriteStats={
            p: [_stat_to_avro(s) for s in ss] for p, ss in md.partition_to_write_stats.items()
        },
        compacted=md.compacted,
        extraMetadata=dict(md.extra_metadata),
        version=md.version,
        operationType=md.operation_type,
    )
    if md.replace:
        out[_REPLACE_JSON_KEY] = {k: list(v) for k, v in md.partition_to_replace_file_ids.items()}
    return out
