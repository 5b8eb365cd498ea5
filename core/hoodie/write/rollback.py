"""Rolling back an unfinished table service (compaction, clustering) so that it can run again from its plan.

As Hudi's ``rollbackInflightCompaction`` / ``rollbackInflightClustering``: a ``rollback`` instant is
requested with a ``HoodieRollbackPlan`` naming the files the unfinished attempt wrote, moved to inflight,
the files are deleted, and the rollback completes with ``HoodieRollbackMetadata``; then the service's instant
goes back from inflight to requested (its plan stays) and its markers are removed. With ``remove=True`` the
instant is rolled back for good instead, as Hudi rolls back a pending clustering that conflicts with a write
(``hoodie.clustering.rollback.pending.replacecommit.on.conflict``): after the rollback completes, its inflight
and then its requested file are deleted, so its plan is gone and its file groups are free to plan again.

The files to delete are those the instant's markers name (every file is announced by a marker before it is
written) together with any base file of the instant found by listing the partitions of the plan's file
groups (a belt to the markers' braces: a file the attempt wrote is named ``<file id>_<token>_<instant>``).
A group given as ``(partition, None)`` matches every file id: clustering writes new file groups, whose ids
the plan cannot name. Log files (a log compaction writes new ones) count when an APPEND marker of the instant
names them or their name carries the instant, and only when they hold intact blocks and every one is the
instant's: a log file holding another instant's blocks (or none) is never deleted. Nothing else is ever
deleted: only files carrying the unfinished instant's time, in its plan's partitions.

The caller must know that nobody runs the instant any more (it holds the instant's claim and lease,
:mod:`hoodie.write.heartbeat`): rolling back a live attempt would delete files it is about to commit. The
rollback checks that right (``fence``) and the instant's state again under the table lock, right before it
deletes anything (:func:`rollback_unfinished`).

**One completion, however many finishers** (:func:`complete_rollback`): a pending rollback is finished by
whoever finds it (a takeover of its instant, the orphaned-rollback finisher, a failed write's rollback), each
deleting the same planned files. A finisher paused at its completing PUT past its lock could land it after
another one completed the rollback: on a v8+ timeline (the completion time in the name) a second completed
file. So each finisher first creates the one shared decision of the rollback
(:func:`~hoodie.write.decision.decide_shared`) and publishes whichever decision stands; the finisher whose
publish wrote the file does what follows (reverting or removing the rolled-back instant), the others stop.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from hoodie.errors import HoodieError, LostRace, PathOutsideTable
from hoodie.failpoints import failpoint
from hoodie.file_group.base_file import BaseFile
from hoodie.lock import LockProvider, held
from hoodie.log.block import BlockType, iter_blocks
from hoodie.log.log_file import LogFile
from hoodie.metadata.writer import forget_metadata_instant
from hoodie.storage import Storage
from hoodie.storage.local import partial_write_target
from hoodie.table import Table
from hoodie.timeline.instant import ROLLBACK, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    InstantInfo,
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    RollbackRequest,
    decode_rollback_plan,
    encode_rollback_metadata,
    encode_rollback_plan,
)
from hoodie.timeline.metadata.paths import file_name_in_partition
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.attempt import AttemptFence, attempt_of_file
from hoodie.write.decision import (
    SHARED_ATTEMPT,
    decide_shared,
    forget_decision,
    publish,
    roll_forward,
    void_attempts,
)
from hoodie.write.markers import IOType, Markers

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RollbackResult:
    """The rollback instant written and the files (relative paths) it deleted."""

    rollback_instant: Instant
    rolled_back: Instant
    deleted: tuple[str, ...]


def files_written_by(
    storage: Storage, instant_time: str, groups: Iterable[tuple[str, str | None]]
) -> list[str]:
    """Base files of ``instant_time`` in the given (partition, file id) groups (a file id of ``None``: any
    file id in that partition), plus every file its markers name, plus its own log files (module doc; paths
    relative to the base path, existing ones only)."""
    found: set[str] = set()
    logs: set[str] = set()
    markers = Markers(storage, instant_time)
    for marker in markers.list():
        if marker.io_type in (IOType.CREATE, IOType.MERGE):
            found.add(marker.path)
        else:  # an APPEND marker could name a shared v6 log file: checked below
            logs.add(marker.path)
    partitions: dict[str, set[str | None]] = {}
    for partition, file_id in groups:
        partitions.setdefault(partition, set()).add(file_id)
    for partition, ids in partitions.items():
        for info in storage.list(partition):
            if info.is_dir:
                continue
            path = f"{partition}/{info.name}" if partition else info.name
            name = partial_write_target(info.name) or info.name  # a killed writer's unlinked file too
            base = BaseFile.try_parse(name)
            if (
                base is not None
                and base.instant_time == instant_time
                and (None in ids or base.file_id in ids)
            ):
                found.add(path)
            log = LogFile.try_parse(name)
            if log is not None and log.instant == instant_time and (None in ids or log.file_id in ids):
                logs.add(path)
    found.update(p for p in logs if storage.exists(p) and _only_blocks_of(storage, p, instant_time))
    return sorted(p for p in found if storage.exists(p))


def discard_attempt_files(
    storage: Storage, instant_time: str, groups: Iterable[tuple[str, str | None]], attempt: int
) -> list[str]:
    """Delete the files of ``instant_time`` in ``groups`` that attempt number ``attempt`` wrote (their write
    tokens name it: :mod:`hoodie.write.attempt`), and nothing else; returns them. A run that lost its
    instant cleans up after itself this way: no other run, and so no commit, can name a file of its attempt,
    so this needs no lock and no re-read."""
    mine = [
        p
        for p in files_written_by(storage, instant_time, groups)
        if attempt_of_file(p.rsplit("/", 1)[-1]) == attempt
    ]
    for path in mine:
        storage.delete(path)
    if mine:
        logger.info("%s: deleted %d file(s) of lost attempt %d", instant_time, len(mine), attempt)
    return mine


def _only_blocks_of(storage: Storage, path: str, instant_time: str) -> bool:
    """Whether the log file ``path`` holds intact blocks and all of them were written by ``instant_time``
    (a v6 log file named after a compaction's instant holds the blocks of the writes into its slice)."""
    instants = {
        b.instant_time for b in iter_blocks(storage.read(path)) if b.block_type is not BlockType.CORRUPT
    }
    return instants == {instant_time}


def planned_paths(plan: RollbackPlan) -> list[str]:
    """The files (relative paths) a rollback plan names, deleted or voided."""
    out = []
    for request in plan.rollback_requests:
        for full in (*request.files_to_be_deleted, *request.log_blocks_to_be_deleted):
            try:
                name = file_name_in_partition(full, request.partition_path)
            except PathOutsideTable:
                continue
            out.append(f"{request.partition_path}/{name}" if request.partition_path else name)
    return out


def pending_rollback_plans(storage: Storage, timeline: Timeline) -> Iterator[tuple[Instant, RollbackPlan]]:
    """The pending rollbacks on ``timeline`` with their plans; one whose plan cannot be read (gone meanwhile)
    is passed over."""
    for pending in timeline.pending():
        if pending.action != ROLLBACK:
            continue
        try:
            plan = decode_rollback_plan(storage.read(timeline.file_of(pending.time, State.REQUESTED)))
        except (KeyError, FileNotFoundError):
            continue
        yield pending, plan


def pending_rollback_of(
    storage: Storage, timeline: Timeline, instant_time: str
) -> tuple[Instant, RollbackPlan] | None:
    """A pending rollback of ``instant_time`` on ``timeline`` (left by an earlier attempt), with its plan."""
    for pending, plan in pending_rollback_plans(storage, timeline):
        target = plan.instant_to_rollback
        if target is not None and target.commit_time == instant_time:
            return pending, plan
    return None


def _void_undone_attempts(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    files: Iterable[str],
    remove: bool,
    fence: Callable[[], None] | None,
) -> Table | None:
    """Void the attempts a rollback of ``instant`` undoes (:mod:`hoodie.write.decision`): those whose
    ``files`` it deletes and those the rolling-back run took the instant over from, so none of them
    completes the instant after this. One that decided to complete first wins: the instant is completed
    from its decision (rolled forward) and :class:`LostRace` raised, nothing deleted. Otherwise the timeline
    is read again (an attempt may have completed, and dropped its decision, between the first read and the
    void) and checked; returns it when it was read."""
    run = fence if isinstance(fence, AttemptFence) else None
    undone = {a for a in (attempt_of_file(posixpath.basename(p)) for p in files) if a is not None}
    if run is not None:
        undone |= run.superseded()  # a run rolling back its own attempt (giving up) voids it too
    if not undone:
        return None
    decided = void_attempts(storage, instant.time, undone, run.attempt if run is not None else None)
    if decided is not None:
        wrote = roll_forward(storage, lock, decided)
        raise LostRace(
            f"lost the race: {decided.describe()} before this run could void it; its completion "
            f"{'was published now' if wrote else 'was already published'}, nothing was rolled back"
        )
    table = Table.load(storage)
    _check_rollbackable(storage, table.timeline, instant, remove)
    return table


def rollback_unfinished(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    groups: Iterable[tuple[str, str | None]],
    *,
    time_generator: InstantTimeGenerator | None = None,
    remove: bool = False,
    fence: Callable[[], None] | None = None,
) -> RollbackResult:
    """Roll back the inflight table-service ``instant`` (whose plan covers ``groups``) to requested; with
    ``remove``, roll the pending (requested or inflight) instant back for good: its plan is deleted too.

    Everything from the decision to the last delete happens under the table lock: ``fence`` (the caller's
    right to the instant: its claim and lease) is checked, the timeline read again, and the instant must
    still be in the state the caller saw (inflight; pending with ``remove``): when another run completed
    it, rolled it back or removed it meanwhile, :class:`~hoodie.errors.LostRace` is raised and nothing is
    deleted, so a run that lost never touches the winner's files. Files are found by listing right there,
    so the list is of the same moment as the check.
    """
    started = time.monotonic()
    generator = time_generator or InstantTimeGenerator()
    with held(lock):
        if fence is not None:
            fence()
        table = Table.load(storage)  # the state that justifies the deletes, read under the lock
        _check_rollbackable(storage, table.timeline, instant, remove)
        cfg = table.config
        version = cfg.table_version
        writer = TimelineWriter(storage, cfg, lock, time_generator=generator)
        # An earlier rollback of this instant that did not finish is finished, not duplicated (Hudi reuses
        # a pending rollback the same way): a second one would leave the first pending for ever.
        resumed = pending_rollback_of(storage, table.timeline, instant.time)
        planned = planned_paths(resumed[1]) if resumed is not None else []
        files = sorted(
            {*files_written_by(storage, instant.time, groups), *(p for p in planned if storage.exists(p))}
        )
        table = _void_undone_attempts(storage, lock, instant, files, remove, fence) or table
        by_partition: dict[str, list[str]] = {}
        for path in files:
            partition = path.rsplit("/", 1)[0] if "/" in path else ""
            by_partition.setdefault(partition, []).append(path)
        if resumed is not None:
            rollback_time = resumed[0].time
            inflight = resumed[0] if resumed[0].state is State.INFLIGHT else writer.start(resumed[0])
        else:
            plan = RollbackPlan(
                instant_to_rollback=InstantInfo(instant.time, instant.action),
                rollback_requests=tuple(
                    RollbackRequest(
                        partition_path=partition,
                        file_id="",
                        latest_base_instant="",
                        files_to_be_deleted=tuple(storage.full_path(p) for p in paths),
                    )
                    for partition, paths in sorted(by_partition.items())
                ),
            )
            rollback_time = generator.next(storage, cfg)
            requested = writer.request(
                ROLLBACK, rollback_time, encode_rollback_plan(plan, table_version=version)
            )
            inflight = writer.start(requested)
        # The attempt may have written the metadata table before it died: that goes first.
        forget_metadata_instant(storage, lock, instant.time)
        deleted: dict[str, list[str]] = {}
        for partition, paths in sorted(by_partition.items()):
            for path in paths:
                storage.delete(path)
                deleted.setdefault(partition, []).append(storage.full_path(path))
        metadata = RollbackMetadata(
            start_rollback_time=rollback_time,
            time_taken_in_millis=int((time.monotonic() - started) * 1000),
            total_files_deleted=len(files),
            commits_rollback=(instant.time,),
            partition_metadata={
                partition: RollbackPartitionMetadata(
                    partition_path=partition, success_delete_files=tuple(paths)
                )
                for partition, paths in deleted.items()
            },
            instants_rollback=(InstantInfo(instant.time, instant.action),),
        )
        done = complete_rollback(
            storage, writer, inflight, encode_rollback_metadata(metadata, table_version=version)
        )
        if done is None:
            raise LostRace(
                f"lost the race: rollback {rollback_time} of {instant.time} was completed by another run "
                "meanwhile, which also reverts the instant"
            )
        current = table.timeline.get(instant.time) or instant
        if remove:
            writer.delete_pending(current)
        else:
            writer.revert_to_requested(current)
    Markers(storage, instant.time).delete_all()
    logger.info(
        "rolled back %s %s %s on %s with rollback %s: %d file(s) deleted",
        "and removed" if remove else "unfinished",
        instant.action,
        instant.time,
        storage.uri,
        rollback_time,
        len(files),
    )
    return RollbackResult(done, instant, tuple(files))


def complete_rollback(
    storage: Storage, writer: TimelineWriter, rollback: Instant, content: bytes
) -> Instant | None:
    """Complete the inflight ``rollback`` with ``content`` once, however many runs finish it (module doc):
    decide under the shared attempt, re-read the timeline (a decision landing after another run's was
    published and forgotten is withdrawn), publish the standing decision. Returns the completed instant
    when this call's publish wrote its file, ``None`` when another run completed it (that run does what
    follows)."""
    completed, path, data = writer.completion_of(rollback, content)
    try:
        standing = decide_shared(storage, rollback.time, path, data, action=completed.action)
    except LostRace:
        return None
    failpoint("rollback.decided")
    if Timeline.load(storage, writer.config).is_completed(rollback.time):
        if standing.content == data and standing.completed_file == path:
            forget_decision(storage, rollback.time, SHARED_ATTEMPT)  # ours, too late: withdrawn
        return None
    if not publish(storage, standing):
        return None
    forget_decision(storage, rollback.time, SHARED_ATTEMPT)
    return Instant.parse(posixpath.basename(standing.completed_file))


def _check_rollbackable(storage: Storage, timeline: Timeline, instant: Instant, remove: bool) -> None:
    """Raise unless ``instant`` is, on ``timeline`` (read under the lock), still what its rollback needs:
    inflight (pending, for ``remove``). Completed, gone or back to requested means another run won."""
    if remove:
        if instant.state is State.COMPLETED:
            raise HoodieError(f"{instant} has completed; only a pending instant is rolled back here")
    elif instant.state is not State.INFLIGHT:
        raise HoodieError(f"only an inflight instant is rolled back to requested; {instant} is not inflight")
    current = timeline.get(instant.time)
    still = current is not None and current.action == instant.action
    if (
        still
        and current is not None
        and ((not current.is_completed) if remove else current.state is State.INFLIGHT)
    ):
        return
    expected = "pending" if remove else "inflight"
    raise LostRace(
        f"{instant.action} {instant.time} of {storage.uri} is no longer {expected} ({current or 'gone'}): "
        "another run completed it or rolled it back; nothing of it is rolled back or deleted here"
    )


__all__ = [
    "RollbackResult",
    "complete_rollback",
    "discard_attempt_files",
    "files_written_by",
    "pending_rollback_of",
    "pending_rollback_plans",
    "planned_paths",
    "rollback_unfinished",
]
