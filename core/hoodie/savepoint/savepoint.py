"""Savepoints: a completed commit marked so that the cleaner keeps every file a read of it needs, and a
restore can take the table back to it (Hudi's ``SavepointActionExecutor`` and ``SavepointHelpers``).

A savepoint's instant time IS the savepointed commit's requested time: the timeline then holds two instants
at that time, the commit and its savepoint (:class:`~hoodie.timeline.timeline.Timeline` keeps them apart).
It has no requested state::

    <t>.savepoint.inflight                  empty
    <t>.savepoint / <t>_<c>.savepoint       HoodieSavepointMetadata (v6 / v8+)

Rules, as Hudi's:

- ``t`` must be a completed commit, deltacommit or replacecommit on the active timeline.
- ``t`` must not be older than what the cleaner guarantees to keep (:func:`last_commit_retained`): the last
  clean's ``earliestCommitToRetain`` (a pending clean: its plan's ``earliestInstantToRetain``), or the first
  completed commit when nothing was cleaned. An older commit's files may be gone already.
- The metadata names, per partition, the files of each file group's latest slice as of ``t``: the slice with
  the greatest base instant at or before ``t``, with every log file the table holds for it now (Hudi's
  ``getLatestFileSlicesBeforeOrOn(partition, t, true)``), in file groups not replaced at or before ``t``.
  The cleaner never deletes a file a savepoint names (:func:`hoodie.clean.plan.savepointed_files`).
- Deleting a savepoint removes the completed file, then the inflight one (Hudi's ``deleteSavepoint``); not
  while a restore is pending.
"""

from __future__ import annotations

import getpass
import logging
import time
from dataclasses import dataclass

from hoodie.errors import CorruptTimelineFile, SavepointRefused
from hoodie.failpoints import failpoint
from hoodie.lock import LockProvider, held
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import CLEAN, RESTORE, SAVEPOINT, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    SavepointMetadata,
    SavepointPartitionMetadata,
    decode_clean_metadata,
    decode_cleaner_plan,
    decode_savepoint_metadata,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter

logger = logging.getLogger(__name__)

__all__ = [
    "SavepointResult",
    "create_savepoint",
    "delete_savepoint",
    "last_commit_retained",
    "plan_savepoint",
    "read_savepoint",
    "savepoint_files",
    "savepoints",
]


@dataclass(frozen=True)
class SavepointResult:
    """The completed savepoint and what it holds."""

    instant: Instant
    metadata: SavepointMetadata

    @property
    def files(self) -> int:
        return sum(len(p.savepoint_data_file) for p in self.metadata.partition_metadata.values())


def savepoints(timeline: Timeline) -> list[Instant]:
    """The completed savepoints of a timeline, oldest first."""
    return [i for i in timeline.completed() if i.action == SAVEPOINT]


def read_savepoint(table: Table, instant_time: str) -> SavepointMetadata:
    """The metadata of the completed savepoint at ``instant_time``."""
    path = table.timeline.file_of(instant_time, State.COMPLETED, action=SAVEPOINT)
    try:
        return decode_savepoint_metadata(table.storage.read(path))
    except CorruptTimelineFile as e:
        raise CorruptTimelineFile(f"{table.storage.full_path(path)}: {e}") from e


def last_commit_retained(table: Table) -> str | None:
    """The oldest commit the cleaner guarantees to keep readable (Hudi's ``getLastCommitRetained``): the
    last clean's ``earliestCommitToRetain`` (a pending clean: its plan's ``earliestInstantToRetain``; a clean
    recording none: the last completed write at or before the clean, else the clean's own time), or the
    first completed commit when the table was never cleaned. ``None``: the table has no completed commit."""
    timeline = table.timeline
    cleans = [i for i in timeline if i.action == CLEAN]
    if not cleans:
        writes = timeline.completed_writes()
        return writes[0].time if writes else None
    clean = cleans[-1]
    retained: str | None
    if clean.state is State.COMPLETED:
        md = decode_clean_metadata(table.storage.read(timeline.file_of(clean.time, State.COMPLETED)))
        retained = md.earliest_commit_to_retain  # "" (nothing bounded): every time passes, as in Hudi
    else:
        plan = decode_cleaner_plan(table.storage.read(timeline.file_of(clean.time, State.REQUESTED)))
        earliest = plan.earliest_instant_to_retain
        retained = earliest.timestamp if earliest is not None else None
    if retained is not None:
        return retained
    before = [w for w in timeline.completed_writes() if w.time <= clean.time]
    return before[-1].time if before else clean.time


def savepoint_files(table: Table, instant_time: str) -> dict[str, tuple[str, ...]]:
    """Partition path -> names of the base and log files of each file group's latest slice as of
    ``instant_time`` (see the module doc); every partition holding a file group is named."""
    replaced = table.replace_times()
    out: dict[str, list[str]] = {}
    for gid, group in sorted(
        table.file_groups().items(), key=lambda kv: (kv[0].partition_path, kv[0].file_id)
    ):
        names = out.setdefault(gid.partition_path, [])
        replace_time = replaced.get(gid)
        if replace_time is not None and replace_time <= instant_time:
            continue
        before = [s for s in group.ordered() if s.base_instant <= instant_time]
        if not before:
            continue
        latest = before[-1]
        if latest.base_file is not None:
            names.append(latest.base_file.file_name)
        names.extend(lf.file_name for lf in latest.log_files)
    return {p: tuple(names) for p, names in out.items()}


def _refusal(table: Table, instant_time: str) -> str | None:
    """Why ``instant_time`` cannot be savepointed on ``table`` now, or ``None``."""
    timeline = table.timeline
    instant = timeline.get(instant_time)
    if instant is None or instant not in timeline.completed_writes():
        what = "not on the active timeline" if instant is None else f"a {instant.action} {instant.state.name}"
        return (
            f"could not savepoint {instant_time}: it is not a completed commit of {table.base_path} "
            f"({what}); a savepoint takes the time of a completed commit, deltacommit or replacecommit"
        )
    done = timeline.savepoint_files.get(instant_time)
    if done and any(i.state is State.COMPLETED for i, _ in done):
        return f"could not savepoint {instant_time}: {table.base_path} has a savepoint at that time already"
    retained = last_commit_retained(table)
    if retained is not None and instant_time < retained:
        return (
            f"could not savepoint {instant_time} on {table.base_path}: it is beyond the lookup window, older "
            f"than {retained}, the oldest commit the cleaner keeps readable (its files may be cleaned)"
        )
    return None


def plan_savepoint(
    table: Table, instant_time: str, *, user: str, comments: str, now_ms: int
) -> SavepointMetadata:
    """The metadata of a savepoint of ``instant_time`` on the view ``table`` (raises
    :class:`~hoodie.errors.SavepointRefused` when the rules of the module doc refuse it)."""
    why = _refusal(table, instant_time)
    if why is not None:
        raise SavepointRefused(why)
    files = savepoint_files(table, instant_time)
    return SavepointMetadata(
        savepointed_by=user,
        savepointed_at=now_ms,
        comments=comments,
        partition_metadata={p: SavepointPartitionMetadata(p, names) for p, names in files.items()},
    )


def create_savepoint(
    storage: Storage,
    lock: LockProvider,
    instant_time: str,
    *,
    user: str | None = None,
    comments: str = "",
    time_generator: InstantTimeGenerator | None = None,
) -> SavepointResult:
    """Savepoint the completed commit at ``instant_time``: ``<t>.savepoint.inflight``, then the completed
    savepoint with its metadata, both under the table lock after the rules were checked again on a fresh
    view. An inflight savepoint left by a failed attempt is completed. ``user`` defaults to the OS user."""
    who = user if user is not None else _os_user()
    why = _refusal(Table.load(storage), instant_time)  # refused without taking the lock
    if why is not None:
        raise SavepointRefused(why)
    with held(lock):
        table = Table.load(storage)
        metadata = plan_savepoint(
            table, instant_time, user=who, comments=comments, now_ms=int(time.time() * 1000)
        )
        writer = TimelineWriter(storage, table.config, lock, time_generator=time_generator)
        pending = table.timeline.savepoint_files.get(instant_time)
        inflight = pending[-1][0] if pending else writer.create_inflight(SAVEPOINT, instant_time)
        failpoint("savepoint.after_inflight")
        done = writer.complete(inflight, metadata)
    result = SavepointResult(done, metadata)
    logger.info("savepoint %s created on %s: %d file(s) kept", instant_time, storage.uri, result.files)
    return result


def delete_savepoint(
    storage: Storage,
    lock: LockProvider,
    instant_time: str,
    *,
    time_generator: InstantTimeGenerator | None = None,
) -> Instant:
    """Delete the savepoint at ``instant_time``: its completed file, then its inflight one (an inflight left
    by a failed creation goes too). Returns the savepoint deleted; raises
    :class:`~hoodie.errors.SavepointRefused` when there is none (Hudi only warns)."""
    with held(lock):
        table = Table.load(storage)
        entries = table.timeline.savepoint_files.get(instant_time)
        if not entries:
            raise SavepointRefused(f"{storage.uri} has no savepoint at {instant_time}: nothing to delete")
        restoring = [i.time for i in table.timeline.pending() if i.action == RESTORE]
        if restoring:
            raise SavepointRefused(
                f"restore {restoring[0]} of {storage.uri} is pending: finish it before deleting savepoints"
            )
        writer = TimelineWriter(storage, table.config, lock, time_generator=time_generator)
        latest = entries[-1][0]
        pending: Instant | None = latest
        if latest.state is State.COMPLETED:
            pending = writer.revert_to_inflight(latest)
            failpoint("savepoint.after_completed_deleted")
        if pending is not None:
            writer.delete_pending(pending)
    logger.info("savepoint %s deleted from %s", instant_time, storage.uri)
    return latest


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment or the password database
        return ""
