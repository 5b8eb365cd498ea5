"""Restoring a table to a savepoint (Hudi's ``restore`` action): every write after the savepoint is rolled
back, and the table reads again as it did at the savepointed commit.

Plan (:func:`plan_restore`, pure; Hudi's ``RestorePlanActionExecutor``): the instants to roll back, in order:

1. pending clusterings requested after the savepoint, newest first (they are rolled back before the writes
   they were planned on);
2. then every other instant of the write timeline (commits, deltacommits, replacecommits, compactions,
   clusterings; completed or pending), newest first by completion time, that compares after the savepointed
   commit: on a COPY_ON_WRITE table by completion time (a pending instant is after everything); on a
   MERGE_ON_READ table by requested time when the instant is a compaction or commit (a compaction scheduled
   before the savepoint belongs to it even if it completed after), else by completion time. Table version 6
   records no completion times: its instants compare by requested time (:mod:`hoodie.savepoint.ordering`).

Refused up front (:class:`~hoodie.errors.RestoreRefused`, nothing written): no completed savepoint at that
time; a later savepoint whose commit would be rolled back (Hudi fails half-way on it); a pending log
compaction to roll back (Hudi's MERGE_ON_READ restore throws on it half-way); another restore pending (to
another savepoint); ``hoodie.archive.beyond.savepoint=true`` (the archived history may hold instants a
restore would have to roll back); a pending write to roll back whose heartbeat is alive (its writer would go
on writing; Hudi expects writers stopped and does not look).

Execution (:func:`restore_to_savepoint`; ``BaseRestoreActionExecutor``), under the table lock where the
timeline changes:

    <r>.restore.requested   HoodieRestorePlan (r: a new instant time)
    <r>.restore.inflight    empty
    each planned instant still on the timeline: rolled back for good (:mod:`hoodie.savepoint.rollback`; its
                            rollback instant stays inflight)
    the metadata table      restored to the savepoint, or deleted (:mod:`hoodie.savepoint.metadata_table`)
    <r>[_<c>].restore       HoodieRestoreMetadata: each instant's rollback metadata
    then every rollback instant requested after the savepoint is deleted (all states), so the timeline shows
    the savepointed commit, the savepoint, the instants before and the restore.

A restore that died is resumed by the next call for the same savepoint (its plan is read back, instants
already rolled back are skipped). No table service may run while a restore is pending
(:func:`restore_pending`; Hudi refuses new commits too). Failpoints ``restore.*`` mark every step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from hoodie.archival.plan import BEYOND_SAVEPOINT
from hoodie.errors import CorruptTimelineFile, HoodieError, RestoreRefused
from hoodie.failpoints import failpoint
from hoodie.lock import LockProvider, held
from hoodie.savepoint.metadata_table import (
    delete_for_restore,
    hide_metadata_table,
    metadata_table_decision,
    restore_metadata_table,
)
from hoodie.savepoint.ordering import instants_after, requested_key
from hoodie.savepoint.rollback import plan_metadata, rollback_for_restore
from hoodie.settings import bool_setting
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import (
    CLUSTERING,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    State,
)
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    InstantInfo,
    RestoreMetadata,
    RestorePlan,
    RollbackMetadata,
    decode_requested_replace_metadata,
    decode_restore_plan,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.failed_writes import FAILED_WRITE_ACTIONS
from hoodie.write.heartbeat import HeartbeatConfig, last_heartbeat_ms
from hoodie.write.rollback import pending_rollback_of

logger = logging.getLogger(__name__)

__all__ = [
    "RestoreResult",
    "pending_clustering_times",
    "pending_restores",
    "plan_restore",
    "restore_pending",
    "restore_to_savepoint",
]


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did: the completed restore instant, the instants it rolled back (in order), the files
    it deleted, and what became of the metadata table."""

    instant: Instant
    savepoint_time: str
    rolled_back: tuple[InstantInfo, ...]
    files_deleted: int
    metadata_table: str
    resumed: bool = False


def restore_pending(timeline: Timeline) -> bool:
    """Whether a restore is requested or inflight: no table service may run until it completes."""
    return bool(pending_restores(timeline))


def pending_restores(timeline: Timeline) -> list[Instant]:
    """Restores requested or inflight, oldest first."""
    return [i for i in timeline.pending() if i.action == RESTORE]


# -- planning ------------------------------------------------------------------------------------------------


def pending_clustering_times(table: Table) -> frozenset[str]:
    """The times of the pending clusterings of ``table``: ``clustering`` instants, and pending
    replacecommits whose requested file holds a clustering plan (not an insert overwrite); what
    :func:`plan_restore` needs besides the timeline."""
    timeline = table.timeline
    clusterings = set()
    for instant in timeline.pending():
        if instant.action == CLUSTERING:
            clusterings.add(instant.time)
        elif instant.action == REPLACE_COMMIT:
            try:
                data = table.storage.read(timeline.file_of(instant.time, State.REQUESTED))
                if decode_requested_replace_metadata(data).clustering_plan is not None:
                    clusterings.add(instant.time)
            except (KeyError, FileNotFoundError, CorruptTimelineFile):
                continue  # no readable plan: an insert overwrite, not a clustering
    return frozenset(clusterings)


def plan_restore(
    timeline: Timeline,
    savepoint_time: str,
    *,
    merge_on_read: bool,
    clusterings: Collection[str] = (),
) -> RestorePlan:
    """The plan of a restore to the savepoint at ``savepoint_time`` (see the module doc): a function of the
    timeline, the table type and which pending replacecommits are clusterings
    (:func:`pending_clustering_times`). Raises :class:`~hoodie.errors.RestoreRefused` for the refusals of the
    module doc."""
    saved = [i for i in timeline.completed() if i.action == SAVEPOINT and i.time == savepoint_time]
    if not saved:
        raise RestoreRefused(
            f"no savepoint at {savepoint_time}: a restore goes back to a completed savepoint"
        )
    pending_clusterings = sorted(
        (
            i
            for i in timeline.pending()
            if (i.action == CLUSTERING or (i.action == REPLACE_COMMIT and i.time in clusterings))
            and i.time > savepoint_time
        ),
        key=requested_key,
        reverse=True,
    )
    first = {i.time for i in pending_clusterings}
    later = [
        i
        for i in instants_after(timeline, savepoint_time, merge_on_read=merge_on_read)
        if i.time not in first
    ]
    order = [*pending_clusterings, *later]
    blocked = sorted(
        s.time for s in timeline.completed() if s.action == SAVEPOINT and s.time in {i.time for i in order}
    )
    if blocked:
        raise RestoreRefused(
            f"savepoint(s) {', '.join(blocked)} would be rolled back by a restore to {savepoint_time}: "
            "delete them first (Hudi refuses to roll back a savepointed commit)"
        )
    log_compactions = [i.time for i in order if i.action == LOG_COMPACTION]
    if log_compactions:
        raise RestoreRefused(
            f"log compaction(s) {', '.join(log_compactions)} are pending after savepoint {savepoint_time}: "
            "Hudi's restore cannot roll them back; finish or roll them back first"
        )
    return RestorePlan(
        instants_to_rollback=tuple(InstantInfo(i.time, i.action) for i in order),
        savepoint_to_restore_timestamp=savepoint_time,
    )


# -- running ------------------------------------------------------------------------------------------------


def _refuse_live_writes(table: Table, plan: RestorePlan, heartbeats: HeartbeatConfig) -> None:
    """Refuse to roll back a pending write whose writer is alive (its heartbeat is fresh): it would go on
    writing files for an instant the restore removed. Hudi expects writers stopped and does not look."""
    now = int(time.time() * 1000)
    for info in plan.instants_to_rollback:
        instant = table.timeline.get(info.commit_time)
        if instant is None or instant.is_completed or instant.action not in FAILED_WRITE_ACTIONS:
            continue
        beat = last_heartbeat_ms(table.storage, instant.time)
        if beat and now - beat <= heartbeats.expiry_ms:
            raise RestoreRefused(
                f"write {instant.time} on {table.base_path} is alive (its heartbeat is {now - beat} ms old): "
                "stop the writers before restoring"
            )


def _read_plan(table: Table, instant: Instant) -> RestorePlan:
    path = table.timeline.file_of(instant.time, State.REQUESTED)
    try:
        return decode_restore_plan(table.storage.read(path))
    except CorruptTimelineFile as e:
        raise CorruptTimelineFile(f"{table.storage.full_path(path)}: {e}") from e


def _write_instant(timeline: Timeline, instant_time: str) -> Instant | None:
    """The instant of the write timeline at ``instant_time`` (not its savepoint), or ``None``."""
    entries = timeline.files.get(instant_time)
    if not entries:
        return None
    instant = entries[-1][0]
    return instant if instant.action not in (ROLLBACK, RESTORE, SAVEPOINT) else None


def _plan_on(table: Table, savepoint_time: str) -> RestorePlan:
    return plan_restore(
        table.timeline,
        savepoint_time,
        merge_on_read=table.config.is_mor,
        clusterings=pending_clustering_times(table),
    )


def restore_to_savepoint(
    storage: Storage,
    lock: LockProvider,
    savepoint_time: str,
    *,
    settings: Mapping[str, str] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> RestoreResult:
    """Restore the table on ``storage`` to the savepoint at ``savepoint_time`` (see the module doc), or
    finish a restore to it that died. ``settings``: the operator's ``hoodie.*`` settings over the table's
    properties (``hoodie.archive.beyond.savepoint``, ``hoodie.client.heartbeat.*``)."""
    table = Table.load(storage)
    effective = {**table.config.props, **(settings or {})}
    if bool_setting(effective, BEYOND_SAVEPOINT, False):
        raise RestoreRefused(
            f"restore is not supported when {BEYOND_SAVEPOINT} is enabled: archival may have taken instants "
            "after the savepoint out of the active timeline"
        )
    generator = time_generator or InstantTimeGenerator()
    pending = pending_restores(table.timeline)
    resumed: tuple[Instant, RestorePlan] | None = None
    if pending:
        plan = _read_plan(table, pending[-1])
        if plan.savepoint_to_restore_timestamp != savepoint_time:
            raise RestoreRefused(
                f"restore {pending[-1].time} to savepoint {plan.savepoint_to_restore_timestamp} is pending "
                f"on {storage.uri}: finish it first (restore to {plan.savepoint_to_restore_timestamp} again)"
            )
        resumed = (pending[-1], plan)
    else:
        plan = _plan_on(table, savepoint_time)  # refusals, before anything is written
        _refuse_live_writes(
            table, plan, HeartbeatConfig.from_config({**table.config.props, **(settings or {})})
        )
        if not plan.instants_to_rollback:
            finished = _finished_restore(table, savepoint_time)
            if finished is not None:  # a restore that died after completing: only its clean-up was left
                _remove_rollbacks(storage, lock, savepoint_time, generator)
                return RestoreResult(finished, savepoint_time, (), 0, "unchanged", resumed=True)
    decision = metadata_table_decision(storage, table.config, table.timeline, savepoint_time)
    note = None
    if decision.action == "delete":
        delete_for_restore(storage, lock, decision.reason)
        note = f"deleted ({decision.reason})"
        failpoint("restore.after_metadata_table_deleted")
    writer = TimelineWriter(storage, table.config, lock, time_generator=generator)
    if resumed is None:
        with held(lock):
            table = Table.load(storage)
            if pending_restores(table.timeline):
                raise RestoreRefused(f"another restore of {storage.uri} started meanwhile")
            plan = _plan_on(table, savepoint_time)
            restore_time = generator.next(storage, table.config)
            restore = writer.request(RESTORE, restore_time, plan)
        logger.info(
            "restore %s of %s to savepoint %s requested: %d instant(s) to roll back",
            restore_time,
            storage.uri,
            savepoint_time,
            len(plan.instants_to_rollback),
        )
        failpoint("restore.after_requested")
    else:
        restore, plan = resumed
        logger.warning("resuming restore %s of %s to savepoint %s", restore.time, storage.uri, savepoint_time)
    return _execute(storage, lock, writer, restore, plan, generator, resumed=resumed is not None, note=note)


def _execute(
    storage: Storage,
    lock: LockProvider,
    writer: TimelineWriter,
    restore: Instant,
    plan: RestorePlan,
    generator: InstantTimeGenerator,
    *,
    resumed: bool,
    note: str | None,
) -> RestoreResult:
    started = time.monotonic()
    savepoint_time = plan.savepoint_to_restore_timestamp or ""
    if restore.state is State.REQUESTED:
        restore = writer.start(restore)
        failpoint("restore.after_inflight")
    hide_metadata_table(storage, lock)
    listing = Table.load(storage).data_files()
    by_instant: dict[str, tuple[RollbackMetadata, ...]] = {}
    rolled: list[InstantInfo] = []
    for info in plan.instants_to_rollback:
        timeline = Timeline.load(storage, writer.config)
        current = _write_instant(timeline, info.commit_time)
        if current is None:
            found = pending_rollback_of(storage, timeline, info.commit_time)
            if found is not None:  # rolled back by an earlier attempt of this restore
                by_instant[info.commit_time] = (plan_metadata(found[0].time, found[1]),)
                rolled.append(info)
            else:
                logger.info(
                    "restore %s: %s %s is not on the timeline any more",
                    restore.time,
                    info.action,
                    info.commit_time,
                )
            continue
        md = rollback_for_restore(storage, lock, writer, timeline, current, listing, time_generator=generator)
        by_instant[info.commit_time] = (md,)
        rolled.append(InstantInfo(current.time, current.action))
    failpoint("restore.before_metadata_table")
    mdt = restore_metadata_table(storage, lock, savepoint_time, time_generator=generator)
    if mdt == "none" and note is not None:
        mdt = note
    failpoint("restore.after_metadata_table")
    metadata = RestoreMetadata(
        start_restore_time=restore.time,
        time_taken_in_millis=int((time.monotonic() - started) * 1000),
        instants_to_rollback=tuple(i.commit_time for i in rolled),
        hoodie_restore_metadata=by_instant,
        restore_instant_info=tuple(rolled),
    )
    with held(lock):
        done = writer.complete(restore, metadata)
    failpoint("restore.after_complete")
    _remove_rollbacks(storage, lock, savepoint_time, generator)
    _check_restored(storage, savepoint_time)
    files = sum(md.total_files_deleted for mds in by_instant.values() for md in mds)
    logger.info(
        "restore %s of %s to savepoint %s completed: %d instant(s) rolled back, %d file(s) deleted; "
        "metadata table: %s",
        restore.time,
        storage.uri,
        savepoint_time,
        len(rolled),
        files,
        mdt,
    )
    return RestoreResult(done, savepoint_time, tuple(rolled), files, mdt, resumed=resumed)


def _remove_rollbacks(
    storage: Storage, lock: LockProvider, savepoint_time: str, generator: InstantTimeGenerator
) -> int:
    """Delete every rollback instant requested after the savepoint, in all states (the restore's own, which
    never complete, and any other): newest first, completed file first."""
    with held(lock):
        table = Table.load(storage)
        writer = TimelineWriter(storage, table.config, lock, time_generator=generator)
        doomed = [i for i in table.timeline if i.action == ROLLBACK and i.time > savepoint_time]
        for instant in reversed(doomed):
            pending: Instant | None = instant
            if instant.state is State.COMPLETED:
                pending = writer.revert_to_inflight(instant)
            if pending is not None:
                writer.delete_pending(pending)
    return len(doomed)


def _finished_restore(table: Table, savepoint_time: str) -> Instant | None:
    """The latest completed restore, when it restored to ``savepoint_time`` and is the latest instant of the
    write and restore timelines (nothing was written after it)."""
    restores = [i for i in table.timeline.completed() if i.action == RESTORE]
    if not restores:
        return None
    latest = restores[-1]
    if _read_plan(table, latest).savepoint_to_restore_timestamp != savepoint_time:
        return None
    if any(w.time > latest.time for w in table.timeline.completed_writes()):
        return None
    return latest


def _check_restored(storage: Storage, savepoint_time: str) -> None:
    """Hudi's ``validateSavepointRestore``: no write of the timeline compares after the savepointed commit
    any more (it is the last commit)."""
    table = Table.load(storage)
    left = instants_after(table.timeline, savepoint_time, merge_on_read=table.config.is_mor)
    if left:
        raise HoodieError(
            f"restore of {storage.uri} to {savepoint_time} completed, but {left[0]} is still after the "
            "savepoint: the table needs a look before anything else runs"
        )
