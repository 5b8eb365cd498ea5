"""The rollback plan (``HoodieRollbackPlan``, in ``rollback.requested``) and the metadata of a completed
rollback (``HoodieRollbackMetadata``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hoodie.timeline.metadata.fields import Fields, freeze, read, write
from hoodie.timeline.metadata.paths import check_in_partition
from hoodie.timeline.metadata.versions import plan_versions

__all__ = [
    "InstantInfo",
    "RollbackMetadata",
    "RollbackPartitionMetadata",
    "RollbackPlan",
    "RollbackRequest",
    "decode_rollback_fields",
    "decode_rollback_metadata",
    "decode_rollback_plan",
    "encode_rollback_metadata",
    "encode_rollback_plan",
    "rollback_metadata_record",
]


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
        freeze(self, files_to_be_deleted=tuple, log_blocks_to_be_deleted=dict)


@dataclass(frozen=True)
class RollbackPlan:
    """``HoodieRollbackPlan``, in ``rollback.requested``."""

    instant_to_rollback: InstantInfo | None = None
    rollback_requests: tuple[RollbackRequest, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        freeze(self, rollback_requests=tuple)


def decode_rollback_plan(data: bytes) -> RollbackPlan:
    """Decode a ``rollback.requested`` file; every path must lie in its request's partition."""
    rec = read(data, "HoodieRollbackPlan", "rollback plan")
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
        check_in_partition(
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
    return write(record, "HoodieRollbackPlan", table_version)


@dataclass(frozen=True)
class RollbackPartitionMetadata:
    """What a rollback did in one partition (full paths, as Hudi records them)."""

    partition_path: str
    success_delete_files: tuple[str, ...] = ()
    failed_delete_files: tuple[str, ...] = ()
    rollback_log_files: dict[str, int] = field(default_factory=dict)
    log_files_from_failed_commit: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        freeze(
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
        freeze(self, commits_rollback=tuple, partition_metadata=dict, instants_rollback=tuple)


def decode_rollback_metadata(data: bytes) -> RollbackMetadata:
    """Decode a completed ``rollback`` file."""
    return decode_rollback_fields(read(data, "HoodieRollbackMetadata", "rollback metadata"))


def decode_rollback_fields(rec: Fields) -> RollbackMetadata:
    """Rollback metadata from a decoded ``HoodieRollbackMetadata`` record (a rollback file's, or one a
    restore's metadata holds)."""
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
    record = rollback_metadata_record(md, versions.rollback_metadata)
    return write(record, "HoodieRollbackMetadata", table_version)


def rollback_metadata_record(md: RollbackMetadata, version: int) -> dict[str, Any]:
    """The ``HoodieRollbackMetadata`` record of ``md`` with ``version`` (a restore's metadata nests them)."""
    return {
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
        "version": version,
        "instantsRollback": [{"commitTime": i.commit_time, "action": i.action} for i in md.instants_rollback],
    }
