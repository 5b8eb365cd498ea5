"""Rolling back one instant of a restore: a completed or pending write, compaction or clustering, for good.

As Hudi's restore rolls back each instant (``CopyOnWriteRestoreActionExecutor`` /
``MergeOnReadRestoreActionExecutor`` with ``skipTimelinePublish``):

1. a ``rollback`` instant is requested with a ``HoodieRollbackPlan`` naming the files to delete (and, table
   version 6, the log files whose blocks are voided), then moved to inflight;
2. a completed instant loses its completed file first (``revertToInflight``): no reader counts it from then;
3. the files go; a v6 log file that also holds blocks of other instants (Hudi 0.x appends to log files) keeps
   them and gets a rollback command block in a new log file of its slice instead;
4. the instant's inflight and requested files are deleted, and its markers.

The rollback instant never completes and writes nothing to the metadata table: the restore removes it when it
completes and brings the metadata table along once for all its rollbacks. A rollback that died half-way is
resumed from its plan (the files it named, whatever the instant's state is now).

Which files an instant wrote (:func:`files_of_instant`): those its commit metadata names (the completed file,
else the inflight one), those its markers name, base files carrying its time, and (v8+) log files carrying its
time. The same rules serve the metadata table (HFile base files), whose instants a restore rolls back too.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hoodie.errors import CorruptTimelineFile, HoodieError
from hoodie.failpoints import failpoint
from hoodie.file_group.fs_view import DataFile
from hoodie.lock import LockProvider, held
from hoodie.log.block import BlockType, iter_blocks
from hoodie.log.log_file import LogFile
from hoodie.log.writer import encode_rollback_command_block, write_log_file
from hoodie.storage import Storage
from hoodie.timeline.instant import COMPLETED_ACTION_OF, ROLLBACK, WRITE_ACTIONS, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    InstantInfo,
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    RollbackRequest,
    decode_commit_metadata,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.heartbeat import heartbeat_path
from hoodie.write.markers import Markers
from hoodie.write.rollback import pending_rollback_of, planned_paths

logger = logging.getLogger(__name__)

__all__ = [
    "InstantFiles",
    "SharedLogFile",
    "files_of_instant",
    "plan_metadata",
    "plan_of",
    "rollback_for_restore",
]

#: Write token of the log files that carry a rollback command block.
COMMAND_BLOCK_TOKEN = "0-0-0"


@dataclass(frozen=True)
class InstantFiles:
    """What rolling back an instant does to files: ``delete`` (paths relative to the table) and ``void``
    (v6 log files holding other instants' blocks too: path -> size), by partition in the plan."""

    delete: tuple[str, ...] = ()
    void: dict[str, int] = field(default_factory=dict)


class SharedLogFile(HoodieError):
    """A log file holds blocks of the instant to roll back and of other instants, where no rollback command
    block can be written (the metadata table's log files)."""


def _partition_of(path: str) -> str:
    return posixpath.dirname(path)


def _written_by_metadata(
    storage: Storage, timeline: Timeline, instant: Instant, table_version: int
) -> set[str]:
    """Paths the instant's commit metadata names (its completed file, else its inflight one)."""
    action = timeline.requested_action(instant.time) or instant.action
    for state in (State.COMPLETED, State.INFLIGHT):
        try:
            data = storage.read(timeline.file_of(instant.time, state))
        except (KeyError, FileNotFoundError):
            continue
        if not data:
            continue
        done_action = COMPLETED_ACTION_OF.get(action, action) if state is State.COMPLETED else action
        try:
            md = decode_commit_metadata(data, table_version=table_version, action=done_action)
        except CorruptTimelineFile:
            if state is State.COMPLETED:
                raise
            continue  # an inflight that is not commit metadata (a clustering's) names nothing
        return set(md.written_file_paths)
    return set()


def files_of_instant(
    storage: Storage,
    timeline: Timeline,
    instant: Instant,
    *,
    table_version: int,
    listing: Sequence[DataFile],
    planned: Iterable[str] = (),
    voidable: bool = True,
) -> InstantFiles:
    """The files rolling back ``instant`` deletes or voids (see the module doc). ``listing`` is the table's
    data files; ``planned`` paths an earlier attempt's plan named. With ``voidable`` false (the metadata
    table), a log file shared with other instants raises :class:`SharedLogFile`."""
    t = instant.time
    candidates = set(planned) | _written_by_metadata(storage, timeline, instant, table_version)
    candidates.update(m.path for m in Markers(storage, t).list())
    for f in listing:
        own_base = f.base is not None and f.base.instant_time == t
        own_log = f.log is not None and table_version >= 8 and f.log.instant == t
        if own_base or own_log:
            candidates.add(f.path)
    delete: set[str] = set()
    void: dict[str, int] = {}
    for path in sorted(candidates):
        if not storage.exists(path):
            continue
        name = posixpath.basename(path)
        log = LogFile.try_parse(name)
        if log is None:
            delete.add(path)
            continue
        if table_version >= 8:
            if log.instant == t:
                delete.add(path)
            continue
        instants = {
            b.instant_time
            for b in iter_blocks(storage.read(path))
            if b.block_type is not BlockType.CORRUPT and b.instant_time
        }
        if instants <= {t}:
            delete.add(path)
        elif t in instants:
            if not voidable:
                raise SharedLogFile(
                    f"{storage.full_path(path)} holds blocks of {t} and of {sorted(instants - {t})[:3]}"
                )
            void[path] = storage.size(path)
    return InstantFiles(tuple(sorted(delete)), void)


def plan_of(storage: Storage, instant: Instant, files: InstantFiles) -> RollbackPlan:
    """The ``HoodieRollbackPlan`` rolling back ``instant``: one request per partition, full paths."""
    partitions = sorted({_partition_of(p) for p in (*files.delete, *files.void)})
    return RollbackPlan(
        instant_to_rollback=InstantInfo(instant.time, instant.action),
        rollback_requests=tuple(
            RollbackRequest(
                partition_path=p,
                file_id="",
                latest_base_instant="",
                files_to_be_deleted=tuple(
                    storage.full_path(f) for f in files.delete if _partition_of(f) == p
                ),
                log_blocks_to_be_deleted={
                    storage.full_path(f): size for f, size in files.void.items() if _partition_of(f) == p
                },
            )
            for p in partitions
        ),
    )


def plan_metadata(rollback_time: str, plan: RollbackPlan, *, took_ms: int = 0) -> RollbackMetadata:
    """The rollback metadata of a rollback that carried out ``plan`` (a restore records one per instant)."""
    target = plan.instant_to_rollback
    partitions = {
        r.partition_path: RollbackPartitionMetadata(
            partition_path=r.partition_path,
            success_delete_files=r.files_to_be_deleted,
        )
        for r in plan.rollback_requests
    }
    return RollbackMetadata(
        start_rollback_time=rollback_time,
        time_taken_in_millis=took_ms,
        total_files_deleted=sum(len(r.files_to_be_deleted) for r in plan.rollback_requests),
        commits_rollback=(target.commit_time,) if target is not None else (),
        partition_metadata=partitions,
        instants_rollback=(target,) if target is not None else (),
    )


def rollback_for_restore(
    storage: Storage,
    lock: LockProvider,
    writer: TimelineWriter,
    timeline: Timeline,
    instant: Instant,
    listing: Sequence[DataFile],
    *,
    time_generator: InstantTimeGenerator,
) -> RollbackMetadata:
    """Roll back ``instant`` (as it is on ``timeline``, read under the restore) for good, as the module doc
    says; returns what was done, as the restore's metadata records it. Failpoints
    ``restore.rollback_requested``, ``restore.rollback_reverted`` and ``restore.rollback_files_deleted``
    mark the steps."""
    started = time.monotonic()
    version = writer.config.table_version
    resumed = pending_rollback_of(storage, timeline, instant.time)
    planned = planned_paths(resumed[1]) if resumed is not None else []
    files = files_of_instant(
        storage, timeline, instant, table_version=version, listing=listing, planned=planned
    )
    if resumed is not None:
        rollback, plan = resumed
        if rollback.state is State.REQUESTED:
            rollback = writer.start(rollback)
    else:
        plan = plan_of(storage, instant, files)
        with held(lock):
            rollback_time = time_generator.next(storage, writer.config)
            requested = writer.request(ROLLBACK, rollback_time, plan)
        failpoint("restore.rollback_requested")
        rollback = writer.start(requested)
    pending: Instant | None = instant
    if instant.state is State.COMPLETED:
        with held(lock):
            pending = writer.revert_to_inflight(instant)
        failpoint("restore.rollback_reverted")
    deleted: dict[str, list[str]] = {}
    for path in files.delete:
        storage.delete(path)
        deleted.setdefault(_partition_of(path), []).append(storage.full_path(path))
    voided: dict[str, dict[str, int]] = {}
    for path in files.void:
        log = LogFile.parse(posixpath.basename(path))
        block = encode_rollback_command_block(instant_time=rollback.time, target_instant_time=instant.time)
        for w in write_log_file(
            storage,
            _partition_of(path),
            log.file_id,
            log.instant,
            [block],
            table_version=version,
            write_token=COMMAND_BLOCK_TOKEN,
        ):
            voided.setdefault(_partition_of(path), {})[storage.full_path(w.path)] = w.size_bytes
    failpoint("restore.rollback_files_deleted")
    if pending is not None:
        with held(lock):
            writer.delete_pending(pending)
    Markers(storage, instant.time).delete_all()
    if instant.action in WRITE_ACTIONS:
        storage.delete(heartbeat_path(instant.time))
    # What the plan named (an earlier attempt may have deleted some of it) and what this attempt did.
    for p, pmd in plan_metadata(rollback.time, plan).partition_metadata.items():
        deleted.setdefault(p, []).extend(pmd.success_delete_files)
    partitions = {
        p: RollbackPartitionMetadata(
            partition_path=p,
            success_delete_files=tuple(sorted(set(deleted.get(p, ())))),
            rollback_log_files=voided.get(p, {}),
        )
        for p in sorted(set(deleted) | set(voided))
    }
    metadata = RollbackMetadata(
        start_rollback_time=rollback.time,
        time_taken_in_millis=int((time.monotonic() - started) * 1000),
        total_files_deleted=sum(len(p.success_delete_files) for p in partitions.values()),
        commits_rollback=(instant.time,),
        partition_metadata=partitions,
        instants_rollback=(InstantInfo(instant.time, instant.action),),
    )
    logger.info(
        "restore: rolled back %s %s on %s (rollback %s): %d file(s) deleted, %d log file(s) voided",
        instant.action,
        instant.time,
        storage.uri,
        rollback.time,
        len(files.delete),
        len(files.void),
    )
    return metadata
