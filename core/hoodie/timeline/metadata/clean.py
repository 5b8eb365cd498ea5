"""The cleaner plan (``HoodieCleanerPlan``, in ``clean.requested`` and ``clean.inflight``) and the metadata of
a completed clean (``HoodieCleanMetadata``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hoodie.errors import CorruptTimelineFile, PathOutsideTable
from hoodie.timeline.metadata.fields import Fields, freeze, read, tuple_map, write
from hoodie.timeline.metadata.paths import check_in_partition, file_name_in_partition
from hoodie.timeline.metadata.versions import plan_versions

__all__ = [
    "ActionInstant",
    "CleanFileInfo",
    "CleanMetadata",
    "CleanPartitionMetadata",
    "CleanerPlan",
    "decode_clean_metadata",
    "decode_cleaner_plan",
    "encode_clean_metadata",
    "encode_cleaner_plan",
]


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
        freeze(
            self,
            files_to_be_deleted_per_partition=tuple_map,
            file_paths_to_be_deleted_per_partition=tuple_map,
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
    rec = read(data, "HoodieCleanerPlan", "cleaner plan")
    earliest = rec.opt_record("earliestInstantToRetain")
    per_partition: dict[str, tuple[CleanFileInfo, ...]] = {}
    for partition, infos in _record_list_map(rec, "filePathsToBeDeletedPerPartition").items():
        per_partition[partition] = tuple(
            CleanFileInfo(i.opt_str("filePath"), i.opt_bool("isBootstrapBaseFile")) for i in infos
        )
        check_in_partition(
            (i.file_path for i in per_partition[partition] if not i.is_bootstrap_base_file),
            partition,
            "cleaner plan",
        )
    names = rec.str_list_map("filesToBeDeletedPerPartition")
    for partition, files in names.items():
        check_in_partition(files, partition, "cleaner plan")
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
    return write(record, "HoodieCleanerPlan", table_version)


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
        freeze(self, delete_path_patterns=tuple, success_delete_files=tuple, failed_delete_files=tuple)


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
        freeze(self, partition_metadata=dict, bootstrap_partition_metadata=dict, extra_metadata=dict)


def _clean_partition_from(rec: Fields, *, version: int, bootstrap: bool) -> CleanPartitionMetadata:
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
    rec = read(data, "HoodieCleanMetadata", "clean metadata")
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
    return write(record, "HoodieCleanMetadata", table_version)


def _record_list_map(rec: Fields, key: str) -> dict[str, list[Fields]]:
    raw = rec.data.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
        raise CorruptTimelineFile(f"{rec.what}: field {key!r} is not a map of lists")
    return {k: [Fields(x, f"{rec.what}.{key}[{k!r}][{i}]") for i, x in enumerate(v)] for k, v in raw.items()}
