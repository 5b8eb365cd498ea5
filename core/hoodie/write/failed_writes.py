"""Failed writes: heartbeats, and rolling back a write whose writer died.

Under Hudi's ``LAZY`` failed-writes policy (``hoodie.clean.failed.writes.policy``, needed whenever several
writers or a separate table-service process share a table) a writer keeps a heartbeat for its instant: the
file ``.hoodie/.heartbeat/<instant>``, re-created every ``hoodie.client.heartbeat.interval_in_ms`` (60 s) and
deleted when the write ends. A pending write whose heartbeat is older than interval x
``hoodie.client.heartbeat.tolerable.misses`` (2), or missing, has failed; the clean rolls it back
(Hudi: ``rollbackFailedWrites`` before cleaning). Under ``EAGER`` (the single-writer default) only the writer
itself may roll back its failed writes when it starts again; hoodied leaves them alone.

:func:`rollback_failed_write` works as Hudi's marker-based rollback: a ``rollback`` instant is requested
with a ``HoodieRollbackPlan`` naming the files, moved to inflight, the files go, the failed instant's timeline
files are removed, and the rollback completes with ``HoodieRollbackMetadata``. The files are those the
instant's markers name, plus base files (and, v8+, log files) carrying the instant's time found by listing.
A v6 log file holding only the failed instant's blocks is deleted; one that also holds other instants'
blocks (Hudi 0.x appends to log files) keeps them and gets a rollback command block in a new log file of the
same slice, so no reader (hudi-rs, Hudi, ours) ever counts the failed blocks, even once the failed instant
is older than the active timeline. A rollback that died half-way is finished by the next call.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hoodie.errors import HoodieError
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.fs_view import DataFile
from hoodie.lock import LockProvider, held
from hoodie.log.block import BlockType, iter_blocks
from hoodie.log.log_file import LogFile
from hoodie.log.writer import encode_rollback_command_block, write_log_file
from hoodie.metadata.writer import forget_metadata_instant
from hoodie.storage import Storage
from hoodie.storage.local import partial_write_target
from hoodie.table import Table
from hoodie.timeline.instant import COMMIT, DELTA_COMMIT, ROLLBACK, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator, parse_instant_time
from hoodie.timeline.metadata import (
    InstantInfo,
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    RollbackRequest,
    decode_rollback_metadata,
    encode_rollback_metadata,
    encode_rollback_plan,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.heartbeat import HeartbeatConfig, heartbeat_path, last_heartbeat_ms
from hoodie.write.markers import Markers
from hoodie.write.orphaned_rollback import finish_orphaned_rollback, orphaned_rollbacks
from hoodie.write.rollback import complete_rollback, pending_rollback_of

logger = logging.getLogger(__name__)

# Pending instants of these actions are ingestion writes (replacecommits may be clustering: not ours).
FAILED_WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT})


def failed_writes(table: Table, config: HeartbeatConfig, now_ms: int | None = None) -> list[Instant]:
    """Pending ingestion writes whose heartbeat expired (or that have none), oldest first."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    out = []
    for instant in table.timeline.pending():
        if instant.action not in FAILED_WRITE_ACTIONS:
            continue
        if now - last_heartbeat_ms(table.storage, instant.time) > config.expiry_ms:
            out.append(instant)
    return out


@dataclass(frozen=True)
class FailedWriteRollback:
    """The rollback instant, the write it removed, the files deleted and the log files given a rollback
    command block."""

    rollback_instant: Instant
    rolled_back: str
    deleted: tuple[str, ...]
    command_blocks: tuple[str, ...]


def _files_of_failed_write(
    storage: Storage,
    table: Table,
    W: str,
    *,
    listing: Sequence[DataFile] | None = None,
    since_ns: int | None = None,
) -> tuple[list[str], dict[str, str]]:
    """(files to delete, v6 log files to void with a command block -> their partition) of the failed write at
    ``W``; v6 log files count when written after ``since_ns`` (default: the write's requested time)."""
    version = table.config.table_version
    delete: set[str] = set()
    appended: set[str] = set()
    for marker in Markers(storage, W).list():
        log = LogFile.try_parse(marker.file_name)
        if log is not None and version < 8:
            appended.add(marker.path)
        else:
            delete.add(marker.path)
    requested_ns = since_ns
    if requested_ns is None:
        with contextlib.suppress(KeyError, OSError, HoodieError):
            requested_ns = storage.info(table.timeline.file_of(W, State.REQUESTED)).mtime_ns
    files = table.data_files() if listing is None else listing
    for f in files:
        if f.base is not None:
            if f.base.instant_time == W:
                delete.add(f.path)
        elif f.log is not None:
            if version >= 8:
                if f.log.instant == W:
                    delete.add(f.path)
            elif requested_ns is not None and (f.mtime_ns or 0) >= requested_ns - 2_000_000_000:
                appended.add(f.path)  # written after the write began: it may hold the write's blocks
    # Files a killed writer left under their temporary names: only local storage writes through one (an
    # object store's upload is all or nothing), so only there is each partition listed for them.
    partitions: set[str] = set()
    if storage.is_local:
        partitions = {f.partition_path for f in files} | {posixpath.dirname(p) for p in delete | appended}
    for partition in sorted(partitions):
        for info in storage.list(partition):
            target = None if info.is_dir else partial_write_target(info.name)
            if target is None:
                continue
            base, log = BaseFile.try_parse(target), LogFile.try_parse(target)
            if (base is not None and base.instant_time == W) or (log is not None and log.instant == W):
                delete.add(info.path)
            elif log is not None and version < 8:
                appended.add(info.path)
    void: dict[str, str] = {}
    for path in sorted(appended):
        if not storage.exists(path):
            continue
        instants = {
            b.instant_time for b in iter_blocks(storage.read(path)) if b.block_type is not BlockType.CORRUPT
        }
        if W not in instants:
            continue
        if instants <= {W}:
            delete.add(path)
        else:
            void[path] = posixpath.dirname(path)
    return sorted(p for p in delete if storage.exists(p)), void


def rollback_failed_write(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    *,
    time_generator: InstantTimeGenerator | None = None,
    heartbeat: HeartbeatConfig | None = None,
) -> FailedWriteRollback | None:
    """Roll back the failed pending write ``instant`` (see the module doc); ``None`` when it is no longer
    pending (it completed, or another runner rolled it back) or, with ``heartbeat``, when its heartbeat is
    fresh again when looked at under the lock (its writer was only late: rolling it back would leave it
    writing files of an instant that is gone)."""
    generator = time_generator or InstantTimeGenerator()
    table = Table.load(storage)
    cfg = table.config
    version = cfg.table_version
    writer = TimelineWriter(storage, cfg, lock, time_generator=generator)
    current = table.timeline.get(instant.time)
    if current is None or current.state is State.COMPLETED or current.action not in FAILED_WRITE_ACTIONS:
        return None
    started = time.monotonic()
    pending = pending_rollback_of(storage, table.timeline, instant.time)
    delete, void = _files_of_failed_write(storage, table, current.time)
    if pending is not None:  # an earlier attempt's: finished, not duplicated
        rollback = pending[0] if pending[0].state is State.INFLIGHT else writer.start(pending[0])
    else:
        by_partition: dict[str, list[str]] = {}
        for path in delete:
            by_partition.setdefault(posixpath.dirname(path), []).append(storage.full_path(path))
        plan = RollbackPlan(
            instant_to_rollback=InstantInfo(current.time, current.action),
            rollback_requests=tuple(
                RollbackRequest(
                    partition_path=p, file_id="", latest_base_instant="", files_to_be_deleted=tuple(f)
                )
                for p, f in sorted(by_partition.items())
            ),
        )
        with held(lock):
            fresh = Table.load(storage).timeline.get(instant.time)
            if fresh is None or fresh.state is State.COMPLETED:
                return None
            beat = last_heartbeat_ms(storage, instant.time)
            if heartbeat is not None and beat and time.time() * 1000 - beat <= heartbeat.expiry_ms:
                logger.info("write %s on %s beats again: not rolled back", instant.time, storage.uri)
                return None
            rollback_time = generator.next(storage, cfg)
            requested = writer.request(
                ROLLBACK, rollback_time, encode_rollback_plan(plan, table_version=version)
            )
        rollback = writer.start(requested)
    deleted: dict[str, list[str]] = {}
    for path in delete:
        storage.delete(path)
        deleted.setdefault(posixpath.dirname(path), []).append(storage.full_path(path))
    voided = _void(storage, version, void, rollback.time, instant.time)
    metadata = _rollback_metadata(
        rollback.time, started, InstantInfo(instant.time, current.action), deleted, voided
    )
    with held(lock):
        forget_metadata_instant(storage, lock, instant.time)  # before the data instant goes
        writer.delete_pending(current)
        done = complete_rollback(
            storage, writer, rollback, encode_rollback_metadata(metadata, table_version=version)
        )
    if done is None:
        logger.info(
            "rollback %s of %s on %s was completed by another run", rollback.time, instant.time, storage.uri
        )
        return None
    Markers(storage, instant.time).delete_all()
    storage.delete(heartbeat_path(instant.time))
    logger.warning(
        "rolled back failed write %s %s on %s with rollback %s: %d file(s) deleted, %d rollback block(s)",
        current.action,
        instant.time,
        storage.uri,
        rollback.time,
        sum(len(v) for v in deleted.values()),
        len(void),
    )
    return FailedWriteRollback(
        done, instant.time, tuple(sorted(delete)), tuple(sorted(p for v in voided.values() for p in v))
    )


def _rollback_metadata(
    rollback_time: str,
    started: float,
    target: InstantInfo,
    deleted: Mapping[str, Sequence[str]],
    voided: Mapping[str, Mapping[str, int]],
) -> RollbackMetadata:
    """The metadata of a failed write's rollback that deleted ``deleted`` and voided ``voided`` (by partition:
    full paths, and new log files with their sizes), started at monotonic time ``started``."""
    return RollbackMetadata(
        start_rollback_time=rollback_time,
        time_taken_in_millis=int((time.monotonic() - started) * 1000),
        total_files_deleted=sum(len(v) for v in deleted.values()),
        commits_rollback=(target.commit_time,),
        partition_metadata={
            p: RollbackPartitionMetadata(
                partition_path=p,
                success_delete_files=tuple(deleted.get(p, ())),
                rollback_log_files=dict(voided.get(p, {})),
            )
            for p in sorted(set(deleted) | set(voided))
        },
        instants_rollback=(target,),
    )


def _void(
    storage: Storage, version: int, void: Mapping[str, str], rollback_time: str, target: str
) -> dict[str, dict[str, int]]:
    """Give each v6 log file in ``void`` (path -> partition) a rollback command block voiding ``target``'s
    blocks; returns the new log files by partition (full path -> size)."""
    voided: dict[str, dict[str, int]] = {}
    for path, partition in void.items():
        log = LogFile.parse(posixpath.basename(path))
        block = encode_rollback_command_block(instant_time=rollback_time, target_instant_time=target)
        written = write_log_file(
            storage, partition, log.file_id, log.instant, [block], table_version=version, write_token="0-0-0"
        )
        for w in written:
            voided.setdefault(partition, {})[storage.full_path(w.path)] = w.size_bytes
    return voided


#: How long after a failed write's rollback its files are looked for again (see
#: :func:`sweep_rolled_back_files`): a writer rolled back while alive goes on until it tries to commit.
SWEEP_WINDOW_SECONDS = 3600.0


def sweep_rolled_back_files(storage: Storage, now: float | None = None) -> list[str]:
    """Delete the files of failed writes that appeared after their rollback; returns them.

    A writer whose heartbeat went stale while it was alive (a full disk or a failing store ate its beats, a
    long pause) is rolled back as failed and goes on writing files of its instant until its commit finds
    the instant gone. Hudi's readers count those files as committed once archival moves the timeline past
    the instant (ours do not while the rollback is active: :meth:`hoodie.timeline.timeline.Timeline.
    is_committed`), so they must go: each LAZY pass looks again for files of the writes that completed
    rollbacks of the last :data:`SWEEP_WINDOW_SECONDS` removed, as their rollback would find them (v6 log
    files holding other instants' blocks get a rollback command block of that rollback)."""
    table = Table.load(storage)
    zone_now = InstantTimeGenerator().now_in_zone(table.config).timestamp() if now is None else now
    targets: dict[str, tuple[str, int | None]] = {}  # write -> (its rollback, when that started, ns)
    for rollback in table.timeline.completed():
        if rollback.action != ROLLBACK:
            continue
        with contextlib.suppress(HoodieError, ValueError):
            if zone_now - parse_instant_time(rollback.time).timestamp() > SWEEP_WINDOW_SECONDS:
                continue
        metadata = decode_rollback_metadata(
            storage.read(table.timeline.file_of(rollback.time, State.COMPLETED))
        )
        for info in metadata.instants_rollback:
            if info.action in FAILED_WRITE_ACTIONS and table.timeline.get(info.commit_time) is None:
                since = None
                with contextlib.suppress(KeyError, OSError, HoodieError):
                    since = storage.info(table.timeline.file_of(rollback.time, State.REQUESTED)).mtime_ns
                targets[info.commit_time] = (rollback.time, since)
    if not targets:
        return []
    listing = table.data_files()
    swept: list[str] = []
    for W, (rollback_time, since) in sorted(targets.items()):
        delete, void = _files_of_failed_write(storage, table, W, listing=listing, since_ns=since)
        for path in delete:
            storage.delete(path)
        _void(storage, table.config.table_version, void, rollback_time, W)
        Markers(storage, W).delete_all()
        if delete or void:
            logger.warning(
                "files of failed write %s appeared after its rollback %s on %s (its writer went on): "
                "%d deleted, %d log file(s) voided",
                W,
                rollback_time,
                storage.uri,
                len(delete),
                len(void),
            )
        swept.extend(delete)
    return swept


def rollback_failed_writes(
    storage: Storage,
    lock: LockProvider,
    config: HeartbeatConfig | None = None,
    *,
    now_ms: int | None = None,
) -> list[FailedWriteRollback]:
    """Roll back every pending write whose heartbeat expired (the ``LAZY`` policy's step before a clean),
    after finishing the rollbacks of failed writes that stopped once their write was already gone
    (:func:`finish_orphaned_rollbacks`), then delete what failed writers wrote after their rollback
    (:func:`sweep_rolled_back_files`)."""
    finish_orphaned_rollbacks(storage, lock)
    table = Table.load(storage)
    out = []
    config = config or HeartbeatConfig()
    for instant in failed_writes(table, config, now_ms):
        done = rollback_failed_write(storage, lock, instant, heartbeat=config)
        if done is not None:
            out.append(done)
    sweep_rolled_back_files(storage)
    return out


def finish_orphaned_rollbacks(storage: Storage, lock: LockProvider) -> list[str]:
    """Finish the pending rollbacks of writes that are no longer on the timeline
    (:mod:`hoodie.write.orphaned_rollback`): a rollback stopped after it removed its write's instant (a
    crash, a full disk) has nothing left to find it by, and would stay pending for ever. Returns what was
    done, one sentence each."""
    table = Table.load(storage)
    done: list[str] = []
    for orphan in orphaned_rollbacks(storage, table.timeline):
        target = orphan.plan.instant_to_rollback
        if target is None or target.action not in FAILED_WRITE_ACTIONS:
            continue
        finished = finish_orphaned_rollback(storage, lock, orphan.rollback.time)
        if finished is not None:
            done.append(finished)
    return done


__all__ = [
    "FailedWriteRollback",
    "failed_writes",
    "finish_orphaned_rollbacks",
    "rollback_failed_write",
    "rollback_failed_writes",
    "sweep_rolled_back_files",
]
