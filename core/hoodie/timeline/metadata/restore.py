"""The restore plan (``HoodieRestorePlan``, in ``restore.requested``) and the metadata of a completed restore
(``HoodieRestoreMetadata``): which instants a restore to a savepoint rolls back, and what each rollback did.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hoodie.errors import CorruptTimelineFile
from hoodie.timeline.metadata.fields import Fields, freeze, json_type, read, write
from hoodie.timeline.metadata.rollback import (
    InstantInfo,
    RollbackMetadata,
    decode_rollback_fields,
    rollback_metadata_record,
)
from hoodie.timeline.metadata.versions import plan_versions

__all__ = [
    "RestoreMetadata",
    "RestorePlan",
    "decode_restore_metadata",
    "decode_restore_plan",
    "encode_restore_metadata",
    "encode_restore_plan",
]


@dataclass(frozen=True)
class RestorePlan:
    """``HoodieRestorePlan``: the instants to roll back, in the order they are rolled back, and the savepoint
    restored to (absent in version 1 plans)."""

    instants_to_rollback: tuple[InstantInfo, ...] = ()
    savepoint_to_restore_timestamp: str | None = None
    version: int = 2

    def __post_init__(self) -> None:
        freeze(self, instants_to_rollback=tuple)


def decode_restore_plan(data: bytes) -> RestorePlan:
    """Decode a ``restore.requested`` file."""
    rec = read(data, "HoodieRestorePlan", "restore plan")
    return RestorePlan(
        instants_to_rollback=tuple(
            InstantInfo(i.get_str("commitTime"), i.get_str("action"))
            for i in rec.record_list("instantsToRollback")
        ),
        savepoint_to_restore_timestamp=rec.opt_str("savepointToRestoreTimestamp"),
        version=rec.get_int("version", 2),
    )


def encode_restore_plan(plan: RestorePlan, *, table_version: int) -> bytes:
    """Encode a restore plan in the version the table's Hudi writes (2)."""
    record = {
        "instantsToRollback": [
            {"commitTime": i.commit_time, "action": i.action} for i in plan.instants_to_rollback
        ],
        "version": plan_versions(table_version).restore_plan,
        "savepointToRestoreTimestamp": plan.savepoint_to_restore_timestamp,
    }
    return write(record, "HoodieRestorePlan", table_version)


@dataclass(frozen=True)
class RestoreMetadata:
    """``HoodieRestoreMetadata``, the content of a completed ``restore``: the times rolled back (in order),
    the rollback metadata of each, and the same instants with their actions."""

    start_restore_time: str
    time_taken_in_millis: int
    instants_to_rollback: tuple[str, ...] = ()
    hoodie_restore_metadata: dict[str, tuple[RollbackMetadata, ...]] = field(default_factory=dict)
    restore_instant_info: tuple[InstantInfo, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        freeze(
            self,
            instants_to_rollback=tuple,
            hoodie_restore_metadata=lambda m: {k: tuple(v) for k, v in m.items()},
            restore_instant_info=tuple,
        )


def decode_restore_metadata(data: bytes) -> RestoreMetadata:
    """Decode a completed ``restore`` file."""
    rec = read(data, "HoodieRestoreMetadata", "restore metadata")
    raw = rec.data.get("hoodieRestoreMetadata") or {}
    if not isinstance(raw, dict):
        raise CorruptTimelineFile(f"restore metadata: field 'hoodieRestoreMetadata' is a {json_type(raw)}")
    by_time: dict[str, tuple[RollbackMetadata, ...]] = {}
    for time, entries in raw.items():
        what = f"restore metadata.hoodieRestoreMetadata[{time!r}]"
        if not isinstance(entries, list):
            raise CorruptTimelineFile(f"{what} is a {json_type(entries)}, expected a list")
        by_time[time] = tuple(decode_rollback_fields(Fields(r, what)) for r in entries if r is not None)
    return RestoreMetadata(
        start_restore_time=rec.get_str("startRestoreTime"),
        time_taken_in_millis=rec.get_int("timeTakenInMillis"),
        instants_to_rollback=rec.str_list("instantsToRollback"),
        hoodie_restore_metadata=by_time,
        restore_instant_info=tuple(
            InstantInfo(i.get_str("commitTime"), i.get_str("action"))
            for i in rec.record_list("restoreInstantInfo")
        ),
        version=rec.get_int("version", 1),
    )


def encode_restore_metadata(md: RestoreMetadata, *, table_version: int) -> bytes:
    """Encode restore metadata in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "startRestoreTime": md.start_restore_time,
        "timeTakenInMillis": md.time_taken_in_millis,
        "instantsToRollback": list(md.instants_to_rollback),
        "hoodieRestoreMetadata": {
            time: [rollback_metadata_record(r, versions.rollback_metadata) for r in rollbacks]
            for time, rollbacks in md.hoodie_restore_metadata.items()
        },
        "version": versions.restore_metadata,
        "restoreInstantInfo": [
            {"commitTime": i.commit_time, "action": i.action} for i in md.restore_instant_info
        ],
    }
    return write(record, "HoodieRestoreMetadata", table_version)
