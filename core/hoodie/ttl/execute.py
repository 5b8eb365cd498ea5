"""Partition TTL execution: the driver's steps around the tasks, and the task that reads a partition's keys.

Hudi runs a TTL as one write (``HoodieTTLJob``, or inline after a commit): ``startDeletePartitionCommit``
requests ``<T>.replacecommit`` (operation ``DELETE_PARTITION``, no plan), then
``SparkPartitionTTLActionExecutor`` decides at ``T`` which partitions expired and
``SparkDeletePartitionCommitActionExecutor`` replaces every file group of theirs. hoodied splits the same
write at the request (:func:`~hoodie.ttl.plan.schedule_ttl`) and runs the rest in three steps:

1. :func:`prepare_ttl` (driver): picks the TTL instant (the earliest pending by default) and decides again at
   its time ``T`` with the settings it was scheduled with (:func:`~hoodie.ttl.plan.plan_ttl`), leaving out
   partitions written since (see *Writes during a TTL*). When a pending compaction, log compaction or
   clustering reads one of the partitions (Hudi: the run does nothing), or nothing is left to delete, the
   instant is rolled back for good (a rollback instant records it; Hudi leaves it to the failed-writes
   rollback) and :class:`TTLAborted` or :class:`NothingToExpire` says why. Otherwise it moves the instant to
   inflight, holding commit metadata with the operation type and no write stats (Hudi's
   ``saveWorkloadProfileMetadataToInflight`` of an empty workload), and returns one task per partition with
   the live file slices it saw. An inflight TTL is an attempt that died: it wrote nothing, so it is resumed.
2. :func:`read_partition_keys` (executor): when the table has a record index, the record keys of those
   slices (every key of the base file, and the merged keys of slices with log files); otherwise nothing.
3. :func:`commit_ttl` (driver): under the table lock re-checks the claim (``fence``) and that the instant is
   still inflight, takes the partitions' live file slices again, leaves out those written or claimed by a
   table service since step 1, writes the metadata table's deltacommit (below), and completes the
   ``replacecommit``: ``partitionToReplaceFileIds`` = each partition's live file groups, no write stats,
   operation ``DELETE_PARTITION``, ``extraMetadata`` the table schema (Hudi's writer records its write
   schema there).

Readers stop returning the partitions at once: a completed replacecommit hides the file groups it replaced.
No file is deleted here: the clean deletes the replaced files later (once the replacecommit is older than
its earliest commit to retain) and then the partition folder (``partitionsToBeDeleted``), as Hudi's.

The metadata table (Hudi's ``HoodieBackedTableMetadataWriter`` at a ``DELETE_PARTITION``): the file listing is
unchanged until the clean; the record index loses the keys of the replaced slices (Hudi removes those of the
latest base files only, which would leave the keys of log-only inserts behind; we remove the log keys too);
``partition_stats`` gets a deleted entry per indexed column of each partition. A table with expression or
secondary indexes is refused (Hudi refuses ``DELETE_PARTITION`` on a secondary index).

Writes during a TTL: a partition is left out (logged, and named in the result) when a write that completed
after ``T`` wrote to it (v8+: completion time after ``T``; v6: instant time after ``T``), when a pending write
has started writing in it (its markers or inflight metadata), when a pending table service reads it, or when
its live file slices changed between steps 1 and 3. Deleting it then would delete data written after the TTL
decided, or hide a table service's input. Hudi leaves this to its writers' conflict resolution.

A crash anywhere leaves the instant pending (or completed): the next run resumes it; the metadata table's
deltacommit of an attempt that died before completing is replaced by the next attempt's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

from hoodie.config import TableConfig
from hoodie.errors import CommitConflict, CorruptBaseFile, NothingToDo
from hoodie.failpoints import failpoint
from hoodie.file_group.file_group import FileSlice
from hoodie.lock import LockProvider
from hoodie.metadata.records import MetadataPartition
from hoodie.metadata.writer import (
    MetadataUpdate,
    MetadataWriter,
    maintain_metadata_table,
    write_metadata_update,
)
from hoodie.storage import Storage, StorageRef
from hoodie.table import Table
from hoodie.timeline.instant import REPLACE_COMMIT, WRITE_ACTIONS, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import CommitMetadata
from hoodie.timeline.writer import TimelineWriter
from hoodie.ttl.plan import (
    OPERATION_TYPE,
    TTLConfig,
    TTLPlan,
    blocking_services,
    check_deletable,
    pending_ttls,
    plan_ttl,
    scheduled_config,
)
from hoodie.write.attempt import AttemptFence
from hoodie.write.decision import forget_decision
from hoodie.write.markers import Markers
from hoodie.write.partition_delete import slice_keys, update_for_partition_delete
from hoodie.write.rollback import rollback_unfinished
from hoodie.write.service_commit import (
    complete_decided,
    held_to_complete,
    void_superseded,
    without_meta_fields,
)

logger = logging.getLogger(__name__)

SERVICE = "ttl"


class NothingToExpire(NothingToDo):
    """No pending TTL (or not the one asked for), or nothing left to delete at its time."""


class TTLAborted(CommitConflict):
    """A pending table service reads a partition the TTL would delete: the TTL definitely did not commit and
    was rolled back for good (Hudi's delete-partition refuses the same); a later run tries again."""


@dataclass(frozen=True)
class TTLTask:
    """One partition's live file slices, to read their record keys from (when ``read_keys``); picklable."""

    storage: StorageRef
    instant_time: str
    partition: str
    slices: tuple[FileSlice, ...]
    config: TableConfig
    read_keys: bool


@dataclass(frozen=True)
class PartitionKeys:
    """What one task read: the record keys of each slice (``None``: its files were gone)."""

    partition: str
    keys: tuple[tuple[str, ...] | None, ...]


@dataclass(frozen=True)
class PreparedTTL:
    """A TTL moved to inflight: the partitions it deletes, their live slices as seen, and the tasks."""

    instant: Instant
    config: TTLConfig
    plan: TTLPlan
    slices: Mapping[str, tuple[FileSlice, ...]]
    tasks: tuple[TTLTask, ...]
    table_config: TableConfig
    #: Expired partitions left out, and why.
    left_out: Mapping[str, str] = field(default_factory=dict)

    @property
    def partitions(self) -> tuple[str, ...]:
        return tuple(self.slices)


@dataclass(frozen=True)
class TTLResult:
    """A completed TTL."""

    instant: Instant
    metadata: CommitMetadata
    left_out: Mapping[str, str]
    keys_removed: int

    @property
    def partitions_deleted(self) -> tuple[str, ...]:
        return tuple(self.metadata.partition_to_replace_file_ids)

    @property
    def file_groups_replaced(self) -> int:
        return len(self.metadata.replaced_file_ids)

    def summary(self) -> str:
        parts = self.partitions_deleted
        text = (
            f"{len(parts)} partition(s) deleted ({', '.join(parts[:5])}{', ...' if len(parts) > 5 else ''}), "
            f"{self.file_groups_replaced} file group(s) replaced"
        )
        if self.keys_removed:
            text += f", {self.keys_removed} key(s) out of the record index"
        if self.left_out:
            why = "; ".join(f"{p}: {w}" for p, w in self.left_out.items())
            text += f"; {len(self.left_out)} left out ({why})"
        return text


def inflight_metadata() -> CommitMetadata:
    """What a TTL's inflight file holds (Hudi's empty workload profile)."""
    return CommitMetadata(operation_type=OPERATION_TYPE, compacted=False)


# -- what the TTL must not delete --------------------------------------------------------------------------


def live_slices(table: Table, partitions: Sequence[str]) -> dict[str, tuple[FileSlice, ...]]:
    """The slice a snapshot reads of every live file group of each partition, by file id."""
    wanted = set(partitions)
    found: dict[str, list[FileSlice]] = {p: [] for p in partitions}
    for s in table.file_slices():
        if s.partition_path in wanted:
            found[s.partition_path].append(s)
    return {p: tuple(sorted(found[p], key=lambda s: s.file_id)) for p in partitions}


def touched_since(table: Table, instant_time: str, partitions: set[str]) -> dict[str, str]:
    """Partitions (of ``partitions``) written after the TTL at ``instant_time`` began, and by what: writes
    that completed after it, and pending writes that have started writing there."""
    T = instant_time
    v8 = table.config.table_version >= 8
    out: dict[str, str] = {}
    for other in table.timeline.completed_writes():
        if other.time == T:
            continue
        after = (other.completion_time or other.time) > T if v8 else other.time > T
        if not after:
            continue
        md = table.commit_metadata(other)
        written = {s.partition_path or "" for s in md.write_stats} | set(md.partition_to_replace_file_ids)
        for p in sorted(written & partitions):
            out.setdefault(p, f"{other.action} {other.time} wrote to it after the TTL began")
    for other in table.timeline.pending():
        if other.time == T or other.action not in WRITE_ACTIONS:
            continue
        for p in sorted(_pending_partitions(table, other) & partitions):
            out.setdefault(p, f"pending {other.action} {other.time} is writing to it")
    return out


def _pending_partitions(table: Table, instant: Instant) -> set[str]:
    """Partitions a pending write has written to so far: its markers, and its inflight metadata's stats."""
    out = {m.partition for m in Markers(table.storage, instant.time).list()}
    md = table.inflight_metadata(instant)
    if md is not None:
        out |= {s.partition_path or "" for s in md.write_stats if s.file_id or s.path}
    return out


# -- step 1: the driver prepares ---------------------------------------------------------------------------


def prepare_ttl(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
) -> PreparedTTL:
    """Decide at the TTL's time and move it to inflight (see the module doc). Raises
    :class:`NothingToExpire` when there is no such pending TTL, or (after rolling it back for good) nothing
    left to delete; :class:`TTLAborted` (likewise rolled back) when a pending table service reads one of the
    partitions."""
    table = view if view is not None else Table.load(storage)
    check_deletable(table)
    pending = pending_ttls(table)
    if instant_time is None:
        if not pending:
            raise NothingToExpire(f"{storage.uri} has no pending partition TTL")
        instant = pending[0]
    else:
        found = table.timeline.get(instant_time)
        if found is None or found not in pending:
            done = found is not None and found.is_completed and found.action == REPLACE_COMMIT
            raise NothingToExpire(
                f"partition TTL {instant_time} of {storage.uri} "
                + ("has already completed" if done else "is not a pending partition TTL on the timeline"),
                unknown=not done,
            )
        instant = found
    T = instant.time
    config = scheduled_config(table, T)
    assert config is not None  # pending_ttls holds TTL instants only
    plan = plan_ttl(table, T, config)
    if plan.blocked:
        _abort(storage, lock, instant, time_generator, TTLAborted, plan.reason)
    touched = touched_since(table, T, set(plan.expired))
    partitions = [p for p in plan.expired if p not in touched]
    if not partitions:
        why = (
            plan.reason
            if not plan.expired
            else "every expired partition was written to since: "
            + "; ".join(f"{p}: {w}" for p, w in touched.items())
        )
        _abort(storage, lock, instant, time_generator, NothingToExpire, why)
    for p, why in touched.items():
        logger.warning("partition TTL %s of %s leaves %s out: %s", T, storage.uri, p, why)
    if instant.state is State.REQUESTED:
        writer = TimelineWriter(storage, table.config, lock, time_generator=time_generator)
        instant = writer.start(instant, inflight_metadata())
    failpoint("ttl.after_inflight")
    slices = live_slices(table, partitions)
    read_keys = MetadataPartition.RECORD_INDEX in MetadataWriter.partitions_of(table.config)
    tasks = tuple(
        TTLTask(storage.ref(), T, p, slices[p], table.config, read_keys) for p in partitions if slices[p]
    )
    return PreparedTTL(instant, config, plan, slices, tasks, table.config, touched)


def _abort(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    generator: InstantTimeGenerator | None,
    error: type[NothingToExpire] | type[TTLAborted],
    why: str,
) -> NoReturn:
    """Roll the TTL back for good (it wrote nothing) and raise ``error``."""
    rollback = rollback_unfinished(storage, lock, instant, (), time_generator=generator, remove=True)
    message = (
        f"partition TTL {instant.time} of {storage.uri} deletes nothing: {why}. It was rolled back by "
        f"rollback {rollback.rollback_instant.time}; a later run decides again"
    )
    logger.info("%s", message)
    raise error(message)


# -- step 2: a task reads one partition's record keys --------------------------------------------------------


def read_partition_keys(task: TTLTask, write_token: str) -> PartitionKeys:
    """The record keys of the task's slices (see the module doc); reads nothing without a record index."""
    keys: list[tuple[str, ...] | None] = []
    if task.read_keys:
        table = Table.load(task.storage.open(), task.config)
        for s in task.slices:
            try:
                keys.append(slice_keys(table, s))
            except (FileNotFoundError, CorruptBaseFile):
                keys.append(None)  # gone since prepare: the commit reads them again, or leaves them out
    else:
        keys = [() for _ in task.slices]
    failpoint("ttl.task_after_read")
    return PartitionKeys(task.partition, tuple(keys))


# -- step 3: the driver commits ----------------------------------------------------------------------------


def commit_ttl(
    storage: Storage,
    lock: LockProvider,
    prepared: PreparedTTL,
    results: Sequence[PartitionKeys],
    *,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> TTLResult:
    """Complete the TTL (see the module doc). ``fence`` re-checks the caller's claim under the table lock
    right before the completing write and raises when it was lost (then nothing is committed)."""
    instant = prepared.instant
    T = instant.time
    read: dict[str, PartitionKeys] = {r.partition: r for r in results}
    failpoint("ttl.before_commit")
    writer = TimelineWriter(storage, prepared.table_config, lock, time_generator=time_generator)
    left_out = dict(prepared.left_out)
    done: Instant | None = None
    metadata = CommitMetadata()
    removed = 0
    run = fence if isinstance(fence, AttemptFence) else None
    with held_to_complete(lock) as completion:
        if fence is not None:
            fence()
        current = Table.load(storage)
        found = current.timeline.get(T)
        if found is None or found.state is not State.INFLIGHT or found.action != REPLACE_COMMIT:
            raise CommitConflict(
                f"partition TTL {T} is no longer inflight ({found or 'gone'}); another runner finished or "
                "rolled it back"
            )
        check_deletable(current)
        partitions = prepared.partitions
        now = live_slices(current, partitions)
        touched = touched_since(current, T, set(partitions))
        blocked = blocking_services(current, frozenset(partitions))
        replace: dict[str, tuple[str, ...]] = {}
        keys: dict[str, None] = {}
        for p in partitions:
            if p in touched:
                left_out[p] = touched[p]
            elif p in blocked:
                left_out[p] = f"pending table service(s) {', '.join(blocked[p])} read it"
            elif now[p] != prepared.slices[p] or not now[p]:
                left_out[p] = "its file slices changed since the TTL began"
            else:
                replace[p] = tuple(s.file_id for s in now[p])
                keys.update(dict.fromkeys(_keys_of(current, prepared, read.get(p), p)))
        if replace:
            schema = current.latest_avro_schema()
            metadata = CommitMetadata(
                extra_metadata={"schema": without_meta_fields(schema) if schema else ""},
                operation_type=OPERATION_TYPE,
                compacted=False,
                partition_to_replace_file_ids=dict(sorted(replace.items())),
                replace=True,
            )
            removed = len(keys)
            failpoint("ttl.during_commit")
            replaced, dropped = tuple(replace), tuple(keys)

            def build(cfg: TableConfig) -> MetadataUpdate:
                return update_for_partition_delete(storage, cfg, current, T, replaced, dropped)

            if run is None:
                write_metadata_update(
                    storage,
                    current.config,
                    lock,
                    build,
                    service="partition TTL",
                    time_generator=time_generator,
                )
                failpoint("ttl.after_metadata_commit")
                done = completion.done = writer.complete(instant, metadata)
            else:
                # A TTL is resumed, not rolled back, when taken over: the attempts it superseded are voided
                # here, before it decides (hoodie.write.decision), so a stale one cannot complete it as well.
                void_superseded(storage, lock, T, run)
                done = completion.done = complete_decided(
                    storage, current.config, lock, writer, instant, metadata, run, build, "ttl", "ttl"
                )
    for p, why in left_out.items():
        if p not in prepared.left_out:
            logger.warning("partition TTL %s of %s leaves %s out: %s", T, storage.uri, p, why)
    if done is None:
        _abort(
            storage,
            lock,
            instant,
            time_generator,
            NothingToExpire,
            "every partition was left out (" + "; ".join(f"{p}: {w}" for p, w in left_out.items()) + ")",
        )
    if run is not None:
        forget_decision(storage, T, run.attempt)
    failpoint("ttl.after_commit")
    maintain_metadata_table(storage, lock, time_generator=time_generator)
    result = TTLResult(done, metadata, left_out, removed)
    logger.debug("completed partition TTL %s on %s: %s", T, storage.uri, result.summary())
    return result


def _keys_of(table: Table, prepared: PreparedTTL, read: PartitionKeys | None, partition: str) -> list[str]:
    """The record keys of a kept partition's slices: the task's, else (no record index: none; a slice the
    task could not read) read now."""
    task = next((t for t in prepared.tasks if t.partition == partition), None)
    if task is None or not task.read_keys:
        return []
    got = read.keys if read is not None and len(read.keys) == len(task.slices) else (None,) * len(task.slices)
    out: list[str] = []
    for s, keys in zip(task.slices, got, strict=True):
        out.extend(keys if keys is not None else slice_keys(table, s))
    return out


def ttl_in_process(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> TTLResult:
    """Run a pending TTL with its tasks in this process (tests and small tables; hoodied may run the tasks
    as a Spark job)."""
    prepared = prepare_ttl(storage, lock, instant_time, time_generator=time_generator)
    results = [read_partition_keys(t, f"{i}-0-{i}") for i, t in enumerate(prepared.tasks)]
    return commit_ttl(storage, lock, prepared, results, fence=fence, time_generator=time_generator)


__all__ = [
    "NothingToExpire",
    "PartitionKeys",
    "PreparedTTL",
    "TTLAborted",
    "TTLResult",
    "TTLTask",
    "commit_ttl",
    "inflight_metadata",
    "live_slices",
    "prepare_ttl",
    "read_partition_keys",
    "touched_since",
    "ttl_in_process",
]
