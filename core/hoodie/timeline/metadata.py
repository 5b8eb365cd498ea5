"""What timeline files hold: commit metadata and the plans of table services, decoded and encoded exactly.

Which file holds what (``t`` = requested time, see :mod:`hoodie.timeline.instant` for the names)::

    commit / deltacommit            requested: empty (v8+: sometimes commit metadata)
                                    inflight, completed: commit metadata        -> CommitMetadata
    replacecommit                   requested: HoodieRequestedReplaceMetadata   -> RequestedReplaceMetadata
                                    inflight: commit metadata, completed: replace commit metadata
    clustering (v8+)                requested: HoodieRequestedReplaceMetadata   -> ClusteringPlan
    compaction / logcompaction      requested: HoodieCompactionPlan             -> CompactionPlan
    clean                           requested, inflight: HoodieCleanerPlan      -> CleanerPlan
                                    completed: HoodieCleanMetadata              -> CleanMetadata
    rollback                        requested: HoodieRollbackPlan               -> RollbackPlan
                                    completed: HoodieRollbackMetadata           -> RollbackMetadata
    indexing                        requested: HoodieIndexPlan                  -> IndexPlan
                                    completed: HoodieIndexCommitMetadata        -> IndexCommitMetadata
    savepoint                       completed: HoodieSavepointMetadata          -> SavepointMetadata

Commit metadata is pretty-printed JSON (Jackson's ``DefaultPrettyPrinter``) in table version 6 and an Avro
object container in 8 and 9; v8+ tables upgraded from v6 keep their old JSON files, so decoding goes by the
content, not the version. Every plan is an Avro container in every version (:mod:`hoodie.avro.container`).

Decoders are pure (bytes in, value out) and raise :class:`~hoodie.errors.CorruptTimelineFile` naming the
problem. Encoders write what the table's Hudi writes: the Avro schema set of its line (:mod:`hoodie.avro`),
the plan versions of :data:`PLAN_VERSIONS`, and for v6 JSON the exact bytes of Jackson's output, key order
included (kept from the file for decoded metadata, Java's ``HashMap`` order for new maps).

Paths: version 1 compaction plans stored full paths, version 2 stores file names; we always hold names and
refuse entries that do not lie directly in their partition (:class:`~hoodie.errors.PathOutsideTable`).
Clustering slices, clean plans and rollback plans store full paths (of wherever the table lived when
planned); they are kept as written, checked to lie in their partition, and their names are available
through :func:`file_name_in_partition`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hoodie.avro import AvroSchema, load_schema, schema_set
from hoodie.avro.container import MAGIC, read_container, write_single_record
from hoodie.errors import CorruptTimelineFile, PathOutsideTable
from hoodie.file_group.base_file import BaseFile
from hoodie.log.log_file import LogFile
from hoodie.storage import check_relative
from hoodie.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
)

__all__ = [
    "PLAN_VERSIONS",
    "ActionInstant",
    "CleanFileInfo",
    "CleanMetadata",
    "CleanPartitionMetadata",
    "CleanerPlan",
    "ClusteringGroup",
    "ClusteringPlan",
    "ClusteringStrategy",
    "CommitMetadata",
    "CompactionOperation",
    "CompactionPlan",
    "CompactionStrategy",
    "IndexCommitMetadata",
    "IndexPartitionInfo",
    "IndexPlan",
    "InstantInfo",
    "PlanVersions",
    "RequestedReplaceMetadata",
    "RollbackMetadata",
    "RollbackPartitionMetadata",
    "RollbackPlan",
    "RollbackRequest",
    "RuntimeStats",
    "SavepointMetadata",
    "SavepointPartitionMetadata",
    "SliceInfo",
    "WriteStat",
    "decode_clean_metadata",
    "decode_cleaner_plan",
    "decode_clustering_plan",
    "decode_commit_metadata",
    "decode_compaction_plan",
    "decode_index_commit_metadata",
    "decode_index_plan",
    "decode_requested_replace_metadata",
    "decode_rollback_metadata",
    "decode_rollback_plan",
    "decode_savepoint_metadata",
    "encode_clean_metadata",
    "encode_cleaner_plan",
    "encode_clustering_plan",
    "encode_commit_metadata",
    "encode_compaction_plan",
    "encode_index_commit_metadata",
    "encode_index_plan",
    "encode_requested_replace_metadata",
    "encode_rollback_metadata",
    "encode_rollback_plan",
    "encode_savepoint_metadata",
    "file_name_in_partition",
    "plan_versions",
]

_T = TypeVar("_T")


# ---------------------------------------------------------------------------------------------------------
# Versions


@dataclass(frozen=True)
class PlanVersions:
    """The ``version`` each kind of timeline record carries when the table's Hudi writes it."""

    compaction_plan: int
    cleaner_plan: int
    clean_metadata: int
    clustering_plan: int
    requested_replace: int
    index_plan: int
    index_commit_metadata: int
    rollback_plan: int
    rollback_metadata: int
    savepoint_metadata: int


# Hudi 0.14/0.15 (v6) and 1.x (v8, v9) agree on all of them (checked against the fixture tables: v6 and v8
# compaction plans 2, cleaner plans 2, clean metadata 2, clustering plans 1, rollback plans and metadata 1,
# v8/v9 index plans 1; CompactionUtils, CleanerUtils and ClusteringPlanStrategy name the same "latest").
_SAME = PlanVersions(
    compaction_plan=2,
    cleaner_plan=2,
    clean_metadata=2,
    clustering_plan=1,
    requested_replace=1,
    index_plan=1,
    index_commit_metadata=1,
    rollback_plan=1,
    rollback_metadata=1,
    savepoint_metadata=1,
)
PLAN_VERSIONS: Mapping[int, PlanVersions] = {6: _SAME, 8: _SAME, 9: _SAME}


def plan_versions(table_version: int) -> PlanVersions:
    """The plan versions written for a table version; unsupported versions raise UnsupportedTable."""
    schema_set(table_version)  # refuses anything but 6, 8, 9 with a message naming the version
    return PLAN_VERSIONS[table_version]


# ---------------------------------------------------------------------------------------------------------
# Paths

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def _path_parts(path: str) -> list[str]:
    """The components of a path with any ``scheme:`` / ``scheme://authority`` prefix removed."""
    m = _SCHEME_RE.match(path)
    if m:
        path = path[m.end() :]
        if path.startswith("//"):
            slash = path.find("/", 2)
            path = "" if slash < 0 else path[slash:]
    return [p for p in path.split("/") if p != ""]


def file_name_in_partition(
    path: str, partition_path: str, *, base_path: str | None = None, allow_path: bool = True
) -> str:
    """The file name of a plan entry that must lie directly in ``partition_path``.

    ``path`` is a bare file name, a path relative to the base path, or a full path (any ``scheme:`` prefix is
    ignored); its parent folders must end with the partition's (and, given ``base_path``, be exactly the
    base path's followed by the partition's). With ``allow_path=False`` only a bare name is accepted.
    Anything else, ``..``, ``.`` or an empty name raises :class:`~hoodie.errors.PathOutsideTable`.
    """
    if not isinstance(path, str) or "\\" in path or "\x00" in path:
        raise PathOutsideTable(f"file path {path!r} is malformed")
    partition_parts = check_relative(partition_path).split("/") if partition_path not in ("", ".") else []
    raw = path.split("/")
    name = raw[-1]
    if name in ("", ".", ".."):
        raise PathOutsideTable(f"file path {path!r} does not end in a file name")
    if len(raw) == 1:
        return name
    if not allow_path:
        raise PathOutsideTable(f"{path!r} should be a file name in partition {partition_path!r}, not a path")
    parents = _path_parts(path)[:-1]
    if any(p in (".", "..") for p in parents):
        raise PathOutsideTable(f"file path {path!r} climbs out of its folder")
    if base_path is not None:
        expected = _path_parts(base_path) + partition_parts
        if parents != expected:
            raise PathOutsideTable(
                f"file path {path!r} is not in partition {partition_path!r} of the table at {base_path!r}"
            )
    elif partition_parts and parents[-len(partition_parts) :] != partition_parts:
        raise PathOutsideTable(f"file path {path!r} is not in partition {partition_path!r}")
    return name


def _check_in_partition(paths: Iterable[str | None], partition_path: str, what: str) -> None:
    for p in paths:
        if p:
            try:
                file_name_in_partition(p, partition_path)
            except PathOutsideTable as e:
                raise PathOutsideTable(f"{what}: {e}") from None


_FILE_ID_RE = re.compile(r"[^./\\_\x00][^/\\_\x00]*")


def check_file_group(file_id: str, partition_path: str, names: Iterable[str | None], what: str) -> None:
    """Check a plan's file group before anything is written for it: the file id is one name Hudi's file
    names can carry (no path separator, no ``_``, which separates a file name's fields, not hidden); the
    partition lies in the table; and every base or log file the plan names for it is a file of that group.
    Raises :class:`~hoodie.errors.PathOutsideTable`, naming ``what``."""
    if not _FILE_ID_RE.fullmatch(file_id or ""):
        raise PathOutsideTable(f"{what}: file id {file_id!r} is not a file id Hudi writes")
    if partition_path not in ("", "."):
        try:
            check_relative(partition_path)
        except PathOutsideTable as e:
            raise PathOutsideTable(f"{what}: {e}") from None
    for path in names:
        if not path:
            continue
        name = path.rsplit("/", 1)[-1]
        owner = _file_id_of(name)
        if owner != file_id:
            raise PathOutsideTable(
                f"{what}: {name!r} is not a base or log file of file group {file_id!r}"
                + (f" (it belongs to {owner!r})" if owner else "")
            )


def _file_id_of(name: str) -> str | None:
    base = BaseFile.try_parse(name)
    if base is not None:
        return base.file_id
    log = LogFile.try_parse(name)
    return log.file_id if log is not None else None


# ---------------------------------------------------------------------------------------------------------
# Reading fields of decoded JSON / Avro records, checking their types


class _Fields:
    """Typed access to one decoded record (Avro or JSON object); type errors are CorruptTimelineFile."""

    __slots__ = ("data", "what")

    def __init__(self, data: Any, what: str) -> None:
        if not isinstance(data, dict):
            raise CorruptTimelineFile(f"{what} is a {_json_type(data)}, expected an object")
        self.data: dict[str, Any] = data
        self.what = what

    def _bad(self, key: str, expected: str) -> CorruptTimelineFile:
        value = self.data.get(key)
        return CorruptTimelineFile(
            f"{self.what}: field {key!r} is a {_json_type(value)}, expected {expected}"
        )

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

    def opt_record(self, key: str) -> _Fields | None:
        v = self.data.get(key)
        return None if v is None else _Fields(v, f"{self.what}.{key}")

    def record_list(self, key: str) -> list[_Fields]:
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self._bad(key, "a list")
        return [_Fields(x, f"{self.what}.{key}[{i}]") for i, x in enumerate(v)]

    def record_map(self, key: str) -> dict[str, _Fields]:
        v = self.data.get(key)
        if v is None:
            return {}
        if not isinstance(v, dict):
            raise self._bad(key, "a map")
        return {k: _Fields(x, f"{self.what}.{key}[{k!r}]") for k, x in v.items()}


def _json_type(v: Any) -> str:
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


def _tuple_map(m: Mapping[str, Iterable[_T]]) -> dict[str, tuple[_T, ...]]:
    return {k: tuple(v) for k, v in m.items()}


def _freeze(obj: Any, **conversions: Any) -> None:
    """In a frozen dataclass's __post_init__: store normalised copies (tuples for sequences, dicts)."""
    for name, convert in conversions.items():
        value = getattr(obj, name)
        if value is not None:
            object.__setattr__(obj, name, convert(value))


# ---------------------------------------------------------------------------------------------------------
# Commit metadata


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
        _freeze(self, log_files=tuple, cdc_stats=dict, extra=dict, json_keys=tuple)

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
        _freeze(
            self,
            partition_to_write_stats=_tuple_map,
            extra_metadata=dict,
            partition_to_replace_file_ids=_tuple_map,
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
            f"{action} metadata JSON is a {_json_type(document)}, expected an object "
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
        return _jackson_pretty(_commit_to_json(md)).encode("utf-8")
    schema = load_schema(_REPLACE_SCHEMA if md.replace else _COMMIT_SCHEMA, table_version)
    return write_single_record(_conform(_commit_to_avro(md), schema), schema)


def _check_commit_action(action: str) -> None:
    if action not in _COMMIT_ACTIONS:
        raise ValueError(f"{action!r} instants do not hold commit metadata")


def _write_stat_from(rec: _Fields, *, json_keys: tuple[str, ...] | None) -> WriteStat:
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


def _stats_map(rec: _Fields, *, from_json: bool) -> dict[str, tuple[WriteStat, ...]]:
    raw = rec.data.get("partitionToWriteStats")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise CorruptTimelineFile(
            f"{rec.what}: partitionToWriteStats is a {_json_type(raw)}, expected an object"
        )
    out: dict[str, tuple[WriteStat, ...]] = {}
    for partition, stats in raw.items():
        if not isinstance(stats, list):
            raise CorruptTimelineFile(
                f"{rec.what}: write stats of partition {partition!r} are a {_json_type(stats)}, "
                "expected a list"
            )
        out[partition] = tuple(
            _write_stat_from(
                _Fields(s, f"{rec.what}: write stat {i} of partition {partition!r}"),
                json_keys=tuple(s) if from_json and isinstance(s, dict) else None,
            )
            for i, s in enumerate(stats)
        )
    return out


def _commit_from_json(document: dict[str, Any], *, what: str) -> CommitMetadata:
    rec = _Fields(document, what)
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
    rec = _Fields(record, what)
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
    order = _java_hash_map_order if fresh else _keep_order
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


# ---------------------------------------------------------------------------------------------------------
# Jackson's DefaultPrettyPrinter, byte for byte


def _java_string_hash(s: str) -> int:
    h = 0
    encoded = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h


def _java_hash_map_order(m: Mapping[str, _T]) -> dict[str, _T]:
    """``m`` in the iteration order of a java.util.HashMap filled in ``m``'s order (default capacity 16,
    doubled past a 0.75 load): by bucket index, insertion order within a bucket."""
    capacity = 16
    while len(m) > capacity * 0.75:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return {k: m[k] for k in sorted(m, key=bucket)}


def _keep_order(m: Mapping[str, _T]) -> dict[str, _T]:
    return dict(m)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_ESCAPE_RE = re.compile(r'["\\\x00-\x1f]')


def _jackson_string(s: str) -> str:
    """A JSON string as Jackson writes it: short escapes, other control characters as \\u00XX (upper-case
    hex), everything else (non-ASCII included) as is."""
    return '"' + _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES.get(m[0], f"\\u{ord(m[0]):04X}"), s) + '"'


def _java_double(x: float) -> str:
    """Java's ``Double.toString``: plain for 1e-3 <= |x| < 1e7, else ``d.dddE±n``; shortest digits."""
    if math.isnan(x) or math.isinf(x):
        return '"NaN"' if math.isnan(x) else ('"Infinity"' if x > 0 else '"-Infinity"')
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits, exponent = _shortest_digits(abs(x))
    if 1e-3 <= abs(x) < 1e7:
        point = exponent + 1
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exponent}"


def _shortest_digits(x: float) -> tuple[str, int]:
    """The shortest decimal digits of a positive float and the exponent of the first digit."""
    mantissa, _, exp = f"{x:.17e}".partition("e")
    for precision in range(1, 18):
        candidate = f"{x:.{precision - 1}e}"
        if float(candidate) == x:
            mantissa, _, exp = candidate.partition("e")
            break
    return mantissa.replace(".", "").rstrip("0") or "0", int(exp)


def _jackson_pretty(value: Any, level: int = 0) -> str:
    """Jackson ``writerWithDefaultPrettyPrinter()``: objects one entry a line, indented two spaces a level,
    ``"key" : value``; arrays on one line, ``[ a, b ]``; empty ones ``{ }`` and ``[ ]``; no final newline."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return _jackson_string(value)
    if isinstance(value, Mapping):
        if not value:
            return "{ }"
        inner = "  " * (level + 1)
        entries = ",".join(
            f"\n{inner}{_jackson_string(k)} : {_jackson_pretty(v, level + 1)}" for k, v in value.items()
        )
        return "{" + entries + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(_jackson_pretty(v, level) for v in value) + " ]"
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")


# ---------------------------------------------------------------------------------------------------------
# Fitting records to a schema before writing


def _conform(value: Any, schema: AvroSchema) -> dict[str, Any]:
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


def _read(data: bytes, expect: str, what: str) -> _Fields:
    if not data:
        raise CorruptTimelineFile(f"{what} is empty, expected an Avro {expect}")
    container = read_container(data)
    if container.schema_short_name != expect:
        raise CorruptTimelineFile(f"{what}: expected an Avro {expect}, found {container.schema_name}")
    return _Fields(container.record, expect)


def _write(record: dict[str, Any], schema_name: str, table_version: int) -> bytes:
    schema = load_schema(schema_name, table_version)
    return write_single_record(_conform(record, schema), schema)


# ---------------------------------------------------------------------------------------------------------
# Compaction plan


@dataclass(frozen=True)
class CompactionStrategy:
    """``HoodieCompactionStrategy``: the class that executes the plan and its parameters."""

    compactor_class_name: str | None = None
    strategy_params: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        _freeze(self, strategy_params=dict)


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact (``HoodieCompactionOperation``).

    ``data_file_path`` is the base file's name (None for a slice of log files only), ``delta_file_paths`` the
    log files' names, both within ``partition_path`` (plans of version 1 stored full paths; decoding keeps
    the names). ``metrics`` are the strategy's numbers (TOTAL_IO_MB, TOTAL_LOG_FILES, ...).
    """

    base_instant_time: str
    file_id: str
    partition_path: str
    data_file_path: str | None = None
    delta_file_paths: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    bootstrap_file_path: str | None = None

    def __post_init__(self) -> None:
        _freeze(self, delta_file_paths=tuple, metrics=dict)
        for name in (self.data_file_path, *self.delta_file_paths):
            if name is not None:
                file_name_in_partition(name, self.partition_path, allow_path=False)


@dataclass(frozen=True)
class CompactionPlan:
    """A compaction's requested plan (``HoodieCompactionPlan``), always in version 2 form (file names)."""

    operations: tuple[CompactionOperation, ...] = ()
    extra_metadata: dict[str, str] = field(default_factory=dict)
    strategy: CompactionStrategy | None = None
    preserve_hoodie_metadata: bool | None = False
    missing_schedule_partitions: tuple[str, ...] = ()
    version: int = 2
    #: ``extraMetadata`` was null rather than an empty map (the metadata table's plans): written back so.
    extra_metadata_null: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        _freeze(self, operations=tuple, extra_metadata=dict, missing_schedule_partitions=tuple)


def decode_compaction_plan(data: bytes, *, base_path: str | None = None) -> CompactionPlan:
    """Decode a ``compaction.requested`` (or ``logcompaction.requested``) file.

    Version 1 plans (full paths) are converted to version 2 (names), as Hudi's migration does; every entry
    must lie in its operation's partition (and under ``base_path`` when given), else PathOutsideTable.
    """
    rec = _read(data, "HoodieCompactionPlan", "compaction plan")
    version = rec.get_int("version", 1)
    if version not in (1, 2):
        raise CorruptTimelineFile(f"compaction plan version {version} is not one Hudi writes (1 or 2)")
    operations = []
    for op in rec.record_list("operations"):
        partition = op.get_str("partitionPath", "")
        data_file = op.opt_str("dataFilePath")
        deltas = op.str_list("deltaFilePaths")
        try:
            if data_file is not None:
                data_file = file_name_in_partition(
                    data_file, partition, base_path=base_path, allow_path=version == 1
                )
            deltas = tuple(
                file_name_in_partition(d, partition, base_path=base_path, allow_path=version == 1)
                for d in deltas
            )
        except PathOutsideTable as e:
            raise PathOutsideTable(f"compaction plan: file group {op.opt_str('fileId')!r}: {e}") from None
        check_file_group(op.get_str("fileId"), partition, (data_file, *deltas), "compaction plan")
        operations.append(
            CompactionOperation(
                base_instant_time=op.get_str("baseInstantTime"),
                file_id=op.get_str("fileId"),
                partition_path=partition,
                data_file_path=data_file,
                delta_file_paths=deltas,
                metrics=op.float_map("metrics"),
                bootstrap_file_path=op.opt_str("bootstrapFilePath"),
            )
        )
    strategy = rec.opt_record("strategy")
    return CompactionPlan(
        operations=tuple(operations),
        extra_metadata=rec.str_map("extraMetadata"),
        strategy=None
        if strategy is None
        else CompactionStrategy(
            strategy.opt_str("compactorClassName"),
            strategy.str_map("strategyParams"),
            strategy.opt_int("version"),
        ),
        preserve_hoodie_metadata=rec.opt_bool("preserveHoodieMetadata"),
        missing_schedule_partitions=rec.str_list("missingSchedulePartitions"),
        version=2,
        extra_metadata_null=rec.data.get("extraMetadata") is None,
    )


def encode_compaction_plan(plan: CompactionPlan, *, table_version: int) -> bytes:
    """Encode a compaction plan in the version the table's Hudi writes (2: file names)."""
    versions = plan_versions(table_version)
    record = {
        "operations": [
            {
                "baseInstantTime": op.base_instant_time,
                "deltaFilePaths": list(op.delta_file_paths),
                "dataFilePath": op.data_file_path,
                "fileId": op.file_id,
                "partitionPath": op.partition_path,
                "metrics": dict(op.metrics),
                "bootstrapFilePath": op.bootstrap_file_path,
            }
            for op in plan.operations
        ],
        "extraMetadata": None
        if plan.extra_metadata_null and not plan.extra_metadata
        else dict(plan.extra_metadata),
        "version": versions.compaction_plan,
        "strategy": None
        if plan.strategy is None
        else {
            "compactorClassName": plan.strategy.compactor_class_name,
            "strategyParams": dict(plan.strategy.strategy_params),
            "version": plan.strategy.version,
        },
        "preserveHoodieMetadata": plan.preserve_hoodie_metadata,
        "missingSchedulePartitions": list(plan.missing_schedule_partitions),
    }
    return _write(record, "HoodieCompactionPlan", table_version)


# ---------------------------------------------------------------------------------------------------------
# Clustering plan and the requested replace metadata that carries it


@dataclass(frozen=True)
class SliceInfo:
    """One file slice of a clustering group (``HoodieSliceInfo``); paths as the plan stores them (full)."""

    file_id: str
    partition_path: str
    data_file_path: str | None = None
    delta_file_paths: tuple[str, ...] = ()
    bootstrap_file_path: str | None = None
    version: int | None = 1

    def __post_init__(self) -> None:
        _freeze(self, delta_file_paths=tuple)

    @property
    def data_file_name(self) -> str | None:
        """The base file's name, checked to lie in the slice's partition."""
        if not self.data_file_path:
            return None
        return file_name_in_partition(self.data_file_path, self.partition_path)

    @property
    def delta_file_names(self) -> tuple[str, ...]:
        """The log files' names, checked to lie in the slice's partition."""
        return tuple(file_name_in_partition(p, self.partition_path) for p in self.delta_file_paths)


@dataclass(frozen=True)
class ClusteringGroup:
    """File slices rewritten together into ``num_output_file_groups`` new file groups."""

    slices: tuple[SliceInfo, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    num_output_file_groups: int | None = 1
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        _freeze(self, slices=tuple, metrics=dict, extra_metadata=dict)


@dataclass(frozen=True)
class ClusteringStrategy:
    """The execution strategy class of a clustering plan and its parameters."""

    strategy_class_name: str | None = None
    strategy_params: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        _freeze(self, strategy_params=dict)


@dataclass(frozen=True)
class ClusteringPlan:
    """``HoodieClusteringPlan``: the groups to rewrite, how, and whether to keep the meta columns."""

    input_groups: tuple[ClusteringGroup, ...] = ()
    strategy: ClusteringStrategy | None = None
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1
    preserve_hoodie_metadata: bool | None = None
    missing_schedule_partitions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _freeze(self, input_groups=tuple, extra_metadata=dict, missing_schedule_partitions=tuple)

    @property
    def slices(self) -> tuple[SliceInfo, ...]:
        """Every slice of every group."""
        return tuple(s for g in self.input_groups for s in g.slices)


@dataclass(frozen=True)
class RequestedReplaceMetadata:
    """``HoodieRequestedReplaceMetadata``: the content of ``clustering.requested`` (v8+) and of
    ``replacecommit.requested``. Clustering sets ``operation_type`` CLUSTER and a plan; an INSERT OVERWRITE's
    requested file holds no plan and, as Hudi writes it, null in every field (version included)."""

    operation_type: str | None = None
    clustering_plan: ClusteringPlan | None = None
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        _freeze(self, extra_metadata=dict)


def _slice_from(rec: _Fields) -> SliceInfo:
    info = SliceInfo(
        file_id=rec.get_str("fileId"),
        partition_path=rec.get_str("partitionPath", ""),
        data_file_path=rec.opt_str("dataFilePath"),
        delta_file_paths=rec.str_list("deltaFilePaths"),
        bootstrap_file_path=rec.opt_str("bootstrapFilePath"),
        version=rec.opt_int("version"),
    )
    _check_in_partition(
        (info.data_file_path, *info.delta_file_paths),
        info.partition_path,
        f"clustering slice {info.file_id!r}",
    )
    check_file_group(
        info.file_id, info.partition_path, (info.data_file_path, *info.delta_file_paths), "clustering plan"
    )
    return info


def _clustering_plan_from(rec: _Fields) -> ClusteringPlan:
    strategy = rec.opt_record("strategy")
    return ClusteringPlan(
        input_groups=tuple(
            ClusteringGroup(
                slices=tuple(_slice_from(s) for s in g.record_list("slices")),
                metrics=g.float_map("metrics"),
                num_output_file_groups=g.opt_int("numOutputFileGroups"),
                extra_metadata=g.str_map("extraMetadata"),
                version=g.opt_int("version"),
            )
            for g in rec.record_list("inputGroups")
        ),
        strategy=None
        if strategy is None
        else ClusteringStrategy(
            strategy.opt_str("strategyClassName"),
            strategy.str_map("strategyParams"),
            strategy.opt_int("version"),
        ),
        extra_metadata=rec.str_map("extraMetadata"),
        version=rec.opt_int("version"),
        preserve_hoodie_metadata=rec.opt_bool("preserveHoodieMetadata"),
        missing_schedule_partitions=rec.str_list("missingSchedulePartitions"),
    )


def decode_requested_replace_metadata(data: bytes) -> RequestedReplaceMetadata:
    """Decode a ``replacecommit.requested`` or ``clustering.requested`` file; empty content (some writers'
    INSERT OVERWRITE) is metadata without a plan."""
    if not data:
        return RequestedReplaceMetadata(version=None)
    rec = _read(data, "HoodieRequestedReplaceMetadata", "requested replace metadata")
    plan = rec.opt_record("clusteringPlan")
    return RequestedReplaceMetadata(
        operation_type=rec.opt_str("operationType"),
        clustering_plan=None if plan is None else _clustering_plan_from(plan),
        extra_metadata=rec.str_map("extraMetadata"),
        version=rec.opt_int("version"),
    )


def decode_clustering_plan(data: bytes) -> ClusteringPlan:
    """The clustering plan of a ``clustering.requested`` (or clustering ``replacecommit.requested``) file;
    a requested replace without a plan (INSERT OVERWRITE) raises CorruptTimelineFile."""
    md = decode_requested_replace_metadata(data)
    if md.clustering_plan is None:
        raise CorruptTimelineFile(
            f"requested replace metadata (operation {md.operation_type}) holds no clustering plan"
        )
    return md.clustering_plan


def _clustering_plan_record(plan: ClusteringPlan, versions: PlanVersions) -> dict[str, Any]:
    return {
        "inputGroups": [
            {
                "slices": [
                    {
                        "dataFilePath": s.data_file_path,
                        "deltaFilePaths": list(s.delta_file_paths),
                        "fileId": s.file_id,
                        "partitionPath": s.partition_path,
                        "bootstrapFilePath": s.bootstrap_file_path,
                        "version": s.version,
                    }
                    for s in g.slices
                ],
                "metrics": dict(g.metrics),
                "numOutputFileGroups": g.num_output_file_groups,
                # Hudi never fills a group's extra metadata and writes null; so do we when it is empty.
                "extraMetadata": dict(g.extra_metadata) or None,
                "version": g.version,
            }
            for g in plan.input_groups
        ],
        "strategy": None
        if plan.strategy is None
        else {
            "strategyClassName": plan.strategy.strategy_class_name,
            "strategyParams": dict(plan.strategy.strategy_params),
            "version": plan.strategy.version,
        },
        "extraMetadata": dict(plan.extra_metadata),
        "version": versions.clustering_plan,
        "preserveHoodieMetadata": plan.preserve_hoodie_metadata,
        "missingSchedulePartitions": list(plan.missing_schedule_partitions),
    }


def encode_requested_replace_metadata(md: RequestedReplaceMetadata, *, table_version: int) -> bytes:
    """Encode requested replace metadata; a plan is written in the table's clustering plan version, and the
    wrapper's version as held (1 for clustering, null for Hudi's plan-less INSERT OVERWRITE)."""
    versions = plan_versions(table_version)
    plan_less = md.clustering_plan is None and md.operation_type is None and md.version is None
    record = {
        "operationType": md.operation_type,
        "clusteringPlan": None
        if md.clustering_plan is None
        else _clustering_plan_record(md.clustering_plan, versions),
        "extraMetadata": None if plan_less and not md.extra_metadata else dict(md.extra_metadata),
        "version": md.version,
    }
    return _write(record, "HoodieRequestedReplaceMetadata", table_version)


def encode_clustering_plan(
    plan: ClusteringPlan, *, table_version: int, extra_metadata: Mapping[str, str] | None = None
) -> bytes:
    """Encode a ``clustering.requested`` (v6: ``replacecommit.requested``) file: the plan wrapped in requested
    replace metadata with operation type CLUSTER, as Hudi schedules clustering."""
    versions = plan_versions(table_version)
    md = RequestedReplaceMetadata(
        operation_type="CLUSTER",
        clustering_plan=plan,
        extra_metadata=dict(extra_metadata or {}),
        version=versions.requested_replace,
    )
    return encode_requested_replace_metadata(md, table_version=table_version)


# ---------------------------------------------------------------------------------------------------------
# Clean plan and clean metadata


@dataclass(frozen=True)
class ActionInstant:
    """``HoodieActionInstant``: an instant by time, action and state name (``COMPLETED``...)."""

    timestamp: str
    action: str
    state: str


@dataclass(frozen=True)
class CleanFileInfo:
    """A file a clean will delete: its full path and whether it is a bootstrap source file."""

    file_path: str | None
    is_bootstrap_base_file: bool | None = False


@dataclass(frozen=True)
class CleanerPlan:
    """``HoodieCleanerPlan``, in ``clean.requested`` and ``clean.inflight``.

    Version 2 (what Hudi writes) lists full paths in ``file_paths_to_be_deleted_per_partition``; version 1
    listed names in ``files_to_be_deleted_per_partition`` (convert with :meth:`with_full_paths`).
    """

    policy: str
    earliest_instant_to_retain: ActionInstant | None = None
    last_completed_commit_timestamp: str = ""
    files_to_be_deleted_per_partition: dict[str, tuple[str, ...]] = field(default_factory=dict)
    file_paths_to_be_deleted_per_partition: dict[str, tuple[CleanFileInfo, ...]] = field(default_factory=dict)
    partitions_to_be_deleted: tuple[str, ...] = ()
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int = 2

    def __post_init__(self) -> None:
        _freeze(
            self,
            files_to_be_deleted_per_partition=_tuple_map,
            file_paths_to_be_deleted_per_partition=_tuple_map,
            partitions_to_be_deleted=tuple,
            extra_metadata=dict,
        )

    def with_full_paths(self, base_path: str) -> CleanerPlan:
        """A version 1 plan converted to version 2, as Hudi's CleanPlanV2MigrationHandler does."""
        if self.version >= 2:
            return self
        base = base_path.rstrip("/")
        converted = {
            partition: tuple(
                CleanFileInfo(f"{base}/{partition}/{name}" if partition else f"{base}/{name}", False)
                for name in names
            )
            for partition, names in self.files_to_be_deleted_per_partition.items()
        }
        return CleanerPlan(
            policy=self.policy,
            earliest_instant_to_retain=self.earliest_instant_to_retain,
            last_completed_commit_timestamp=self.last_completed_commit_timestamp,
            files_to_be_deleted_per_partition={},
            file_paths_to_be_deleted_per_partition=converted,
            partitions_to_be_deleted=self.partitions_to_be_deleted,
            extra_metadata=self.extra_metadata,
            version=2,
        )


def decode_cleaner_plan(data: bytes) -> CleanerPlan:
    """Decode a ``clean.requested`` / ``clean.inflight`` file (any plan version, kept as written)."""
    rec = _read(data, "HoodieCleanerPlan", "cleaner plan")
    earliest = rec.opt_record("earliestInstantToRetain")
    per_partition: dict[str, tuple[CleanFileInfo, ...]] = {}
    for partition, infos in _record_list_map(rec, "filePathsToBeDeletedPerPartition").items():
        per_partition[partition] = tuple(
            CleanFileInfo(i.opt_str("filePath"), i.opt_bool("isBootstrapBaseFile")) for i in infos
        )
        _check_in_partition(
            (i.file_path for i in per_partition[partition] if not i.is_bootstrap_base_file),
            partition,
            "cleaner plan",
        )
    names = rec.str_list_map("filesToBeDeletedPerPartition")
    for partition, files in names.items():
        _check_in_partition(files, partition, "cleaner plan")
    return CleanerPlan(
        policy=rec.get_str("policy"),
        earliest_instant_to_retain=None
        if earliest is None
        else ActionInstant(
            earliest.get_str("timestamp"), earliest.get_str("action"), earliest.get_str("state")
        ),
        last_completed_commit_timestamp=rec.get_str("lastCompletedCommitTimestamp", ""),
        files_to_be_deleted_per_partition=names,
        file_paths_to_be_deleted_per_partition=per_partition,
        partitions_to_be_deleted=rec.str_list("partitionsToBeDeleted"),
        extra_metadata=rec.str_map("extraMetadata"),
        version=rec.get_int("version", 1),
    )


def encode_cleaner_plan(plan: CleanerPlan, *, table_version: int) -> bytes:
    """Encode a cleaner plan in the version the table's Hudi writes (2: full paths)."""
    versions = plan_versions(table_version)
    if plan.version < versions.cleaner_plan and plan.files_to_be_deleted_per_partition:
        raise ValueError(
            f"a version {plan.version} cleaner plan lists file names; convert it with "
            "with_full_paths(base_path) "
            f"before writing version {versions.cleaner_plan}"
        )
    e = plan.earliest_instant_to_retain
    record = {
        "earliestInstantToRetain": None
        if e is None
        else {"timestamp": e.timestamp, "action": e.action, "state": e.state},
        "lastCompletedCommitTimestamp": plan.last_completed_commit_timestamp,
        "policy": plan.policy,
        "filesToBeDeletedPerPartition": {
            k: list(v) for k, v in plan.files_to_be_deleted_per_partition.items()
        },
        "version": versions.cleaner_plan,
        "filePathsToBeDeletedPerPartition": {
            k: [{"filePath": i.file_path, "isBootstrapBaseFile": i.is_bootstrap_base_file} for i in v]
            for k, v in plan.file_paths_to_be_deleted_per_partition.items()
        },
        "partitionsToBeDeleted": list(plan.partitions_to_be_deleted),
        "extraMetadata": dict(plan.extra_metadata),
    }
    return _write(record, "HoodieCleanerPlan", table_version)


@dataclass(frozen=True)
class CleanPartitionMetadata:
    """What a clean did in one partition; file entries are names (version 2 metadata)."""

    partition_path: str
    policy: str
    delete_path_patterns: tuple[str, ...] = ()
    success_delete_files: tuple[str, ...] = ()
    failed_delete_files: tuple[str, ...] = ()
    is_partition_deleted: bool | None = False

    def __post_init__(self) -> None:
        _freeze(self, delete_path_patterns=tuple, success_delete_files=tuple, failed_delete_files=tuple)


@dataclass(frozen=True)
class CleanMetadata:
    """``HoodieCleanMetadata``, the content of a completed ``clean``; always version 2 form (file names)."""

    start_clean_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    earliest_commit_to_retain: str
    last_completed_commit_timestamp: str = ""
    partition_metadata: dict[str, CleanPartitionMetadata] = field(default_factory=dict)
    bootstrap_partition_metadata: dict[str, CleanPartitionMetadata] = field(default_factory=dict)
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int = 2

    def __post_init__(self) -> None:
        _freeze(self, partition_metadata=dict, bootstrap_partition_metadata=dict, extra_metadata=dict)


def _clean_partition_from(rec: _Fields, *, version: int, bootstrap: bool) -> CleanPartitionMetadata:
    partition = rec.get_str("partitionPath", "")

    def names(key: str) -> tuple[str, ...]:
        paths = rec.str_list(key)
        if bootstrap:
            return paths
        # Version 1 held full paths; Hudi's CleanMetadataV2MigrationHandler keeps the names.
        return tuple(file_name_in_partition(p, partition, allow_path=version == 1) for p in paths)

    return CleanPartitionMetadata(
        partition_path=partition,
        policy=rec.get_str("policy"),
        delete_path_patterns=names("deletePathPatterns"),
        success_delete_files=names("successDeleteFiles"),
        failed_delete_files=names("failedDeleteFiles"),
        is_partition_deleted=rec.opt_bool("isPartitionDeleted"),
    )


def decode_clean_metadata(data: bytes) -> CleanMetadata:
    """Decode a completed ``clean`` file; version 1 (full paths) is converted to version 2 (names)."""
    rec = _read(data, "HoodieCleanMetadata", "clean metadata")
    version = rec.get_int("version", 1)
    try:
        partitions = {
            k: _clean_partition_from(v, version=version, bootstrap=False)
            for k, v in rec.record_map("partitionMetadata").items()
        }
        bootstrap = {
            k: _clean_partition_from(v, version=version, bootstrap=True)
            for k, v in rec.record_map("bootstrapPartitionMetadata").items()
        }
    except PathOutsideTable as e:
        raise PathOutsideTable(f"clean metadata: {e}") from None
    return CleanMetadata(
        start_clean_time=rec.get_str("startCleanTime"),
        time_taken_in_millis=rec.get_int("timeTakenInMillis"),
        total_files_deleted=rec.get_int("totalFilesDeleted"),
        earliest_commit_to_retain=rec.get_str("earliestCommitToRetain", ""),
        last_completed_commit_timestamp=rec.get_str("lastCompletedCommitTimestamp", ""),
        partition_metadata=partitions,
        bootstrap_partition_metadata=bootstrap,
        extra_metadata=rec.str_map("extraMetadata"),
        version=max(version, 2),
    )


def _clean_partition_record(p: CleanPartitionMetadata) -> dict[str, Any]:
    return {
        "partitionPath": p.partition_path,
        "policy": p.policy,
        "deletePathPatterns": list(p.delete_path_patterns),
        "successDeleteFiles": list(p.success_delete_files),
        "failedDeleteFiles": list(p.failed_delete_files),
        "isPartitionDeleted": p.is_partition_deleted,
    }


def encode_clean_metadata(md: CleanMetadata, *, table_version: int) -> bytes:
    """Encode clean metadata in the version the table's Hudi writes (2)."""
    versions = plan_versions(table_version)
    record = {
        "startCleanTime": md.start_clean_time,
        "timeTakenInMillis": md.time_taken_in_millis,
        "totalFilesDeleted": md.total_files_deleted,
        "earliestCommitToRetain": md.earliest_commit_to_retain,
        "lastCompletedCommitTimestamp": md.last_completed_commit_timestamp,
        "partitionMetadata": {k: _clean_partition_record(v) for k, v in md.partition_metadata.items()},
        "version": versions.clean_metadata,
        "bootstrapPartitionMetadata": {
            k: _clean_partition_record(v) for k, v in md.bootstrap_partition_metadata.items()
        },
        "extraMetadata": dict(md.extra_metadata),
    }
    return _write(record, "HoodieCleanMetadata", table_version)


def _record_list_map(rec: _Fields, key: str) -> dict[str, list[_Fields]]:
    raw = rec.data.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise CorruptTimelineFile(f"{rec.what}: field {key!r} is not a map of lists")
    return {k: [_Fields(x, f"{rec.what}.{key}[{k!r}][{i}]") for i, x in enumerate(v)] for k, v in raw.items()}


# ---------------------------------------------------------------------------------------------------------
# Rollback plan and metadata


@dataclass(frozen=True)
class InstantInfo:
    """``HoodieInstantInfo``: an instant by time and action."""

    commit_time: str
    action: str


@dataclass(frozen=True)
class RollbackRequest:
    """Undo work of one file group: files to delete and log blocks to void (full paths -> sizes)."""

    partition_path: str
    file_id: str | None = None
    latest_base_instant: str | None = None
    files_to_be_deleted: tuple[str, ...] = ()
    log_blocks_to_be_deleted: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _freeze(self, files_to_be_deleted=tuple, log_blocks_to_be_deleted=dict)


@dataclass(frozen=True)
class RollbackPlan:
    """``HoodieRollbackPlan``, in ``rollback.requested``."""

    instant_to_rollback: InstantInfo | None = None
    rollback_requests: tuple[RollbackRequest, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        _freeze(self, rollback_requests=tuple)


def decode_rollback_plan(data: bytes) -> RollbackPlan:
    """Decode a ``rollback.requested`` file; every path must lie in its request's partition."""
    rec = _read(data, "HoodieRollbackPlan", "rollback plan")
    instant = rec.opt_record("instantToRollback")
    requests = []
    for r in rec.record_list("RollbackRequests"):
        request = RollbackRequest(
            partition_path=r.get_str("partitionPath", ""),
            file_id=r.opt_str("fileId"),
            latest_base_instant=r.opt_str("latestBaseInstant"),
            files_to_be_deleted=r.str_list("filesToBeDeleted"),
            log_blocks_to_be_deleted=r.int_map("logBlocksToBeDeleted"),
        )
        _check_in_partition(
            (*request.files_to_be_deleted, *request.log_blocks_to_be_deleted),
            request.partition_path,
            "rollback plan",
        )
        requests.append(request)
    return RollbackPlan(
        instant_to_rollback=None
        if instant is None
        else InstantInfo(instant.get_str("commitTime"), instant.get_str("action")),
        rollback_requests=tuple(requests),
        version=rec.get_int("version", 1),
    )


def encode_rollback_plan(plan: RollbackPlan, *, table_version: int) -> bytes:
    """Encode a rollback plan in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    i = plan.instant_to_rollback
    record = {
        "instantToRollback": None if i is None else {"commitTime": i.commit_time, "action": i.action},
        "RollbackRequests": [
            {
                "partitionPath": r.partition_path,
                "fileId": r.file_id,
                "latestBaseInstant": r.latest_base_instant,
                "filesToBeDeleted": list(r.files_to_be_deleted),
                "logBlocksToBeDeleted": dict(r.log_blocks_to_be_deleted),
            }
            for r in plan.rollback_requests
        ],
        "version": versions.rollback_plan,
    }
    return _write(record, "HoodieRollbackPlan", table_version)


@dataclass(frozen=True)
class RollbackPartitionMetadata:
    """What a rollback did in one partition (full paths, as Hudi records them)."""

    partition_path: str
    success_delete_files: tuple[str, ...] = ()
    failed_delete_files: tuple[str, ...] = ()
    rollback_log_files: dict[str, int] = field(default_factory=dict)
    log_files_from_failed_commit: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _freeze(
            self,
            success_delete_files=tuple,
            failed_delete_files=tuple,
            rollback_log_files=dict,
            log_files_from_failed_commit=dict,
        )


@dataclass(frozen=True)
class RollbackMetadata:
    """``HoodieRollbackMetadata``, the content of a completed ``rollback``."""

    start_rollback_time: str
    time_taken_in_millis: int
    total_files_deleted: int
    commits_rollback: tuple[str, ...] = ()
    partition_metadata: dict[str, RollbackPartitionMetadata] = field(default_factory=dict)
    instants_rollback: tuple[InstantInfo, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        _freeze(self, commits_rollback=tuple, partition_metadata=dict, instants_rollback=tuple)


def decode_rollback_metadata(data: bytes) -> RollbackMetadata:
    """Decode a completed ``rollback`` file."""
    rec = _read(data, "HoodieRollbackMetadata", "rollback metadata")
    partitions = {}
    for key, p in rec.record_map("partitionMetadata").items():
        partitions[key] = RollbackPartitionMetadata(
            partition_path=p.get_str("partitionPath", ""),
            success_delete_files=p.str_list("successDeleteFiles"),
            failed_delete_files=p.str_list("failedDeleteFiles"),
            rollback_log_files=p.int_map("rollbackLogFiles"),
            log_files_from_failed_commit=p.int_map("logFilesFromFailedCommit"),
        )
    return RollbackMetadata(
        start_rollback_time=rec.get_str("startRollbackTime"),
        time_taken_in_millis=rec.get_int("timeTakenInMillis"),
        total_files_deleted=rec.get_int("totalFilesDeleted"),
        commits_rollback=rec.str_list("commitsRollback"),
        partition_metadata=partitions,
        instants_rollback=tuple(
            InstantInfo(i.get_str("commitTime"), i.get_str("action"))
            for i in rec.record_list("instantsRollback")
        ),
        version=rec.get_int("version", 1),
    )


def encode_rollback_metadata(md: RollbackMetadata, *, table_version: int) -> bytes:
    """Encode rollback metadata in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "startRollbackTime": md.start_rollback_time,
        "timeTakenInMillis": md.time_taken_in_millis,
        "totalFilesDeleted": md.total_files_deleted,
        "commitsRollback": list(md.commits_rollback),
        "partitionMetadata": {
            k: {
                "partitionPath": p.partition_path,
                "successDeleteFiles": list(p.success_delete_files),
                "failedDeleteFiles": list(p.failed_delete_files),
                "rollbackLogFiles": dict(p.rollback_log_files),
                "logFilesFromFailedCommit": dict(p.log_files_from_failed_commit),
            }
            for k, p in md.partition_metadata.items()
        },
        "version": versions.rollback_metadata,
        "instantsRollback": [{"commitTime": i.commit_time, "action": i.action} for i in md.instants_rollback],
    }
    return _write(record, "HoodieRollbackMetadata", table_version)


# ---------------------------------------------------------------------------------------------------------
# Indexing


@dataclass(frozen=True)
class IndexPartitionInfo:
    """One metadata-table partition (index) to build, and the instant its initial build covers."""

    metadata_partition_path: str | None
    index_upto_instant: str | None = None
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        _freeze(self, extra_metadata=dict)


@dataclass(frozen=True)
class IndexPlan:
    """``HoodieIndexPlan``, in ``indexing.requested``."""

    index_partition_infos: tuple[IndexPartitionInfo, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        _freeze(self, index_partition_infos=tuple)


@dataclass(frozen=True)
class IndexCommitMetadata:
    """``HoodieIndexCommitMetadata``, the content of a completed ``indexing``."""

    index_partition_infos: tuple[IndexPartitionInfo, ...] = ()
    operation_type: str | None = None
    version: int = 1

    def __post_init__(self) -> None:
        _freeze(self, index_partition_infos=tuple)


def _index_infos(rec: _Fields) -> tuple[IndexPartitionInfo, ...]:
    return tuple(
        IndexPartitionInfo(
            metadata_partition_path=i.opt_str("metadataPartitionPath"),
            index_upto_instant=i.opt_str("indexUptoInstant"),
            extra_metadata=i.str_map("extraMetadata"),
            version=i.opt_int("version"),
        )
        for i in rec.record_list("indexPartitionInfos")
    )


def _index_info_records(infos: Sequence[IndexPartitionInfo]) -> list[dict[str, Any]]:
    return [
        {
            "version": i.version,
            "metadataPartitionPath": i.metadata_partition_path,
            "indexUptoInstant": i.index_upto_instant,
            "extraMetadata": dict(i.extra_metadata),
        }
        for i in infos
    ]


def decode_index_plan(data: bytes) -> IndexPlan:
    """Decode an ``indexing.requested`` file."""
    rec = _read(data, "HoodieIndexPlan", "index plan")
    return IndexPlan(_index_infos(rec), rec.get_int("version", 1))


def encode_index_plan(plan: IndexPlan, *, table_version: int) -> bytes:
    """Encode an index plan in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "version": versions.index_plan,
        "indexPartitionInfos": _index_info_records(plan.index_partition_infos),
    }
    return _write(record, "HoodieIndexPlan", table_version)


def decode_index_commit_metadata(data: bytes) -> IndexCommitMetadata:
    """Decode a completed ``indexing`` file."""
    rec = _read(data, "HoodieIndexCommitMetadata", "index commit metadata")
    return IndexCommitMetadata(_index_infos(rec), rec.opt_str("operationType"), rec.get_int("version", 1))


def encode_index_commit_metadata(md: IndexCommitMetadata, *, table_version: int) -> bytes:
    """Encode index commit metadata in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "version": versions.index_commit_metadata,
        "operationType": md.operation_type,
        "indexPartitionInfos": _index_info_records(md.index_partition_infos),
    }
    return _write(record, "HoodieIndexCommitMetadata", table_version)


# ---------------------------------------------------------------------------------------------------------
# Savepoint


@dataclass(frozen=True)
class SavepointPartitionMetadata:
    """The base files a savepoint keeps in one partition."""

    partition_path: str
    savepoint_data_file: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _freeze(self, savepoint_data_file=tuple)


@dataclass(frozen=True)
class SavepointMetadata:
    """``HoodieSavepointMetadata``, the content of a completed ``savepoint``."""

    savepointed_by: str
    savepointed_at: int
    comments: str
    partition_metadata: dict[str, SavepointPartitionMetadata] = field(default_factory=dict)
    version: int = 1

    def __post_init__(self) -> None:
        _freeze(self, partition_metadata=dict)


def decode_savepoint_metadata(data: bytes) -> SavepointMetadata:
    """Decode a completed ``savepoint`` file."""
    rec = _read(data, "HoodieSavepointMetadata", "savepoint metadata")
    return SavepointMetadata(
        savepointed_by=rec.get_str("savepointedBy", ""),
        savepointed_at=rec.get_int("savepointedAt"),
        comments=rec.get_str("comments", ""),
        partition_metadata={
            k: SavepointPartitionMetadata(p.get_str("partitionPath", ""), p.str_list("savepointDataFile"))
            for k, p in rec.record_map("partitionMetadata").items()
        },
        version=rec.get_int("version", 1),
    )


def encode_savepoint_metadata(md: SavepointMetadata, *, table_version: int) -> bytes:
    """Encode savepoint metadata in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "savepointedBy": md.savepointed_by,
        "savepointedAt": md.savepointed_at,
        "comments": md.comments,
        "partitionMetadata": {
            k: {"partitionPath": p.partition_path, "savepointDataFile": list(p.savepoint_data_file)}
            for k, p in md.partition_metadata.items()
        },
        "version": versions.savepoint_metadata,
    }
    return _write(record, "HoodieSavepointMetadata", table_version)
