"""Pending rollbacks whose instant is gone from the active timeline (:func:`orphaned_rollbacks`), finished
or, when their plan is stale, withdrawn (:func:`finish_orphaned_rollback`).

A rollback's plan (``R.rollback.requested``, naming the instant ``T`` and the files to delete) is written
before anything is deleted. One left pending while ``T`` is still on the timeline is resumed by the next run
of ``T`` (:func:`hoodie.write.rollback.pending_rollback_of`). One whose ``T`` is gone has nothing left to be
found by, and stays pending for ever, holding archival back. Two ways lead there:

- a rollback that stopped after it removed ``T``'s files (Hudi's writers remove them before completing);
- a paused holder's plan that landed after its lock passed on, once another run had rolled ``T`` back for
  good (the chaos campaign's seed 603: a plan PUT held 20 s by the network).

Both are finished as Hudi's ``rollbackFailedWrites`` finishes a pending rollback whose instant is gone: the
planned files still there are deleted, then the rollback completes. Their names carry ``T``'s time, which
no completed instant has, so nothing committed is touched; the metadata table forgets ``T`` first.

Unless ``T`` completed and was archived meanwhile: the plan is then stale (its holder decided to roll back an
instant that another run completed), and running it would delete committed files. A stale plan only
requested is withdrawn (its file deleted: no file was touched under it); one already inflight is refused
with :class:`~hoodie.errors.HoodieError`, naming the files an operator must check.

Everything is decided under the table lock from a timeline read there, and the deletes happen under it.
"""

from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass

from hoodie.errors import HoodieError
from hoodie.lock import LockProvider, held
from hoodie.metadata.writer import forget_metadata_instant
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.archived.load import load_archived_timeline
from hoodie.timeline.instant import RESTORE, Instant, State
from hoodie.timeline.metadata import (
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    encode_rollback_metadata,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.rollback import complete_rollback, pending_rollback_plans, planned_paths

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class OrphanedRollback:
    """A pending rollback whose instant is not on the active timeline, with its plan."""

    rollback: Instant
    plan: RollbackPlan

    @property
    def target(self) -> str:
        target = self.plan.instant_to_rollback
        return f"{target.action} {target.commit_time}" if target is not None else "(no instant)"


def orphaned_rollbacks(storage: Storage, timeline: Timeline) -> list[OrphanedRollback]:
    """The pending rollbacks on ``timeline`` whose instant is not on it; none while a restore is pending (its
    rollbacks complete with it). A plan that cannot be read is passed over (the next look reads it again)."""
    pending = timeline.pending()
    if any(i.action == RESTORE for i in pending):
        return []
    out: list[OrphanedRollback] = []
    for rollback, plan in pending_rollback_plans(storage, timeline):
        target = plan.instant_to_rollback
        if target is not None and timeline.get(target.commit_time) is None:
            out.append(OrphanedRollback(rollback, plan))
    return out


def finish_orphaned_rollback(storage: Storage, lock: LockProvider, rollback_time: str) -> str | None:
    """Finish (or withdraw, when stale) the orphaned rollback ``rollback_time`` (see the module docstring)
    under the table lock; returns what was done, or None when, read again under the lock, it is no longer an
    orphan (completed, resumed, its instant back)."""
    started = time.monotonic()
    with held(lock):
        table = Table.load(storage)
        found = {o.rollback.time: o for o in orphaned_rollbacks(storage, table.timeline)}
        orphan = found.get(rollback_time)
        if orphan is None:
            return None
        target = orphan.plan.instant_to_rollback
        assert target is not None
        writer = TimelineWriter(storage, table.config, lock)
        archived = load_archived_timeline(storage, table.config, start=None, end=target.commit_time)
        gone_for_good = archived.get(target.commit_time)
        if gone_for_good is not None and gone_for_good.instant.state is State.COMPLETED:
            if orphan.rollback.state is State.REQUESTED:
                writer.delete_pending(orphan.rollback)
                logger.warning(
                    "withdrew rollback %s of %s on %s: its plan is stale (the instant completed and was "
                    "archived since); no file was deleted",
                    rollback_time,
                    orphan.target,
                    storage.uri,
                )
                return f"withdrew stale rollback {rollback_time} of {orphan.target}"
            raise HoodieError(
                f"rollback {rollback_time} of {orphan.target} on {storage.uri} is inflight although its "
                "instant completed and was archived: it may have deleted committed files; check that these "
                "exist: " + ", ".join(planned_paths(orphan.plan))
            )
        forget_metadata_instant(storage, lock, target.commit_time)
        deleted: dict[str, list[str]] = {}
        for path in planned_paths(orphan.plan):
            if storage.exists(path):
                storage.delete(path)
                deleted.setdefault(posixpath.dirname(path), []).append(storage.full_path(path))
        metadata = RollbackMetadata(
            start_rollback_time=rollback_time,
            time_taken_in_millis=int((time.monotonic() - started) * 1000),
            total_files_deleted=sum(len(v) for v in deleted.values()),
            commits_rollback=(target.commit_time,),
            partition_metadata={
                p: RollbackPartitionMetadata(partition_path=p, success_delete_files=tuple(files))
                for p, files in sorted(deleted.items())
            },
            instants_rollback=(target,),
        )
        pending = orphan.rollback
        inflight = pending if pending.state is State.INFLIGHT else writer.start(pending)
        version = table.config.table_version
        done = complete_rollback(
            storage, writer, inflight, encode_rollback_metadata(metadata, table_version=version)
        )
    if done is None:
        return f"rollback {rollback_time} of {orphan.target} was finished by another run meanwhile"
    logger.warning(
        "finished rollback %s of %s on %s, left pending after its instant was removed: %d file(s) deleted",
        rollback_time,
        orphan.target,
        storage.uri,
        sum(len(v) for v in deleted.values()),
    )
    return f"finished rollback {rollback_time} of {orphan.target}"


__all__ = ["OrphanedRollback", "finish_orphaned_rollback", "orphaned_rollbacks"]
