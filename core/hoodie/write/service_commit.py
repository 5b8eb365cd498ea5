"""What the commits of the rewriting table services (compaction, clustering) share: the schema they record,
the check that their instant is still theirs to complete, the check of a written file's row count, and the
commit itself (:func:`complete_rewrite`).

A service's attempt completes its instant only while the instant is inflight: when it is not (another runner
completed it, or rolled it back), the attempt deletes the files it wrote that the winning commit does not
name and gives up with :class:`~hoodie.errors.LostRace`. "The files it wrote" are told by their names: each
run's write tokens carry its attempt number (:mod:`hoodie.write.attempt`), so a run never deletes a file of
another run of the same instant, whatever the markers (shared by every run of the instant) name.
"""

from __future__ import annotations

import contextlib
import json
import logging
import posixpath
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.config import TableConfig
from hoodie.errors import (
    CommitConflict,
    CorruptBaseFile,
    FileAlreadyExists,
    HoodieError,
    LockLost,
    LostRace,
    StorageError,
)
from hoodie.failpoints import failpoint
from hoodie.lock import LockProvider, held
from hoodie.metadata.updates import update_for_rewrite
from hoodie.metadata.writer import (
    MetadataUpdate,
    maintain_metadata_table,
    metadata_completion_time,
    open_metadata_table,
    write_metadata_update,
)
from hoodie.storage import Storage
from hoodie.table import META_COLUMNS, Table
from hoodie.timeline.instant import Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import CommitMetadata, WriteStat
from hoodie.timeline.writer import TimelineRecord, TimelineWriter
from hoodie.write.attempt import AttemptFence, attempt_of_file
from hoodie.write.decision import (
    Decision,
    MetadataStep,
    decide_complete,
    forget_decision,
    publish,
    roll_forward,
    void_attempts,
)
from hoodie.write.markers import Markers, unrecorded_files

logger = logging.getLogger(__name__)

_C = TypeVar("_C")


def without_meta_fields(avro_json: str) -> str:
    """The Avro schema (JSON) without Hudi's meta fields, as a service's commit metadata records it."""
    schema = json.loads(avro_json)
    if isinstance(schema, Mapping) and "fields" in schema:
        fields = [f for f in schema["fields"] if f.get("name") not in META_COLUMNS]
        if len(fields) != len(schema["fields"]):
            return json.dumps({**schema, "fields": fields}, separators=(",", ":"))
    return avro_json


def check_still_inflight(
    storage: Storage, table: Table, service: str, instant_time: str, action: str, stats: Sequence[WriteStat]
) -> None:
    """Raise :class:`LostRace` (after deleting this attempt's own files) unless the ``action`` instant at
    ``instant_time`` is inflight on ``table``'s timeline (read under the table lock)."""
    current = table.timeline.get(instant_time)
    if current is None or current.state is not State.INFLIGHT or current.action != action:
        discard_own_files(storage, table, instant_time, stats)
        raise LostRace(
            f"lost the race: {service} {instant_time} is no longer inflight ({current or 'gone'}); another "
            "run completed or rolled it back, so this attempt does not commit (only its own files were "
            "deleted; the winner's are untouched)"
        )


def own_attempts(stats: Sequence[WriteStat]) -> frozenset[int]:
    """The attempt numbers in the names of the files an attempt's results name (one, for one run)."""
    found = (attempt_of_file(posixpath.basename(stat.path)) for stat in stats if stat.path)
    return frozenset(a for a in found if a is not None)


def discard_own_files(storage: Storage, table: Table, instant_time: str, stats: Sequence[WriteStat]) -> None:
    """Delete the files this attempt wrote (``stats``: its own results) that no completed commit of the
    instant names (``table`` read under the lock)."""
    kept: set[str] = set()
    if table.timeline.is_completed(instant_time):
        kept = set(table.commit_metadata(instant_time).written_file_paths)
    for stat in stats:
        if stat.path and stat.path not in kept:
            storage.delete(stat.path)


def written_rows(storage: Storage, path: str) -> int:
    """The row count in the Parquet footer of ``path``; :class:`CorruptBaseFile` when unreadable."""
    try:
        with storage.open_input_file(path) as f:
            return int(pq.read_metadata(f).num_rows)
    except (OSError, HoodieError, pa.ArrowException) as e:
        raise CorruptBaseFile(f"{path} is unreadable: {e}") from e


def by_partition(stats: Sequence[WriteStat]) -> dict[str, tuple[WriteStat, ...]]:
    """``stats`` grouped by partition path (in order), as commit metadata holds them."""
    groups: dict[str, list[WriteStat]] = {}
    for stat in stats:
        groups.setdefault(stat.partition_path or "", []).append(stat)
    return {p: tuple(g) for p, g in groups.items()}


def complete_rewrite(
    storage: Storage,
    config: TableConfig,
    lock: LockProvider,
    instant: Instant,
    metadata: CommitMetadata,
    stats: Sequence[WriteStat],
    *,
    service: str,
    content: bytes | TimelineRecord,
    record_index: bool,
    fence: Callable[[], None] | None = None,
    conflict: Callable[[Table], _C | None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
    metadata_update: Callable[[TableConfig], MetadataUpdate] | None = None,
    metadata_step: MetadataStep | None = None,
) -> tuple[Instant | None, _C | None, tuple[str, ...]]:
    """Complete a rewriting service's inflight ``instant`` (of the table on ``storage`` with ``config``, as
    the caller prepared it) whose tasks' checked ``stats`` ``metadata`` holds. The table is read once, under
    the lock.

    1. Under the table lock: ``fence`` (the caller's claim and lease, raising when lost), the instant still
       inflight (:func:`check_still_inflight`), then the files the instant's markers name that ``metadata``
       does not and that this attempt wrote (failed or duplicate task attempts of this run; never another
       run's: :func:`own_attempts`) are deleted, and ``conflict`` (a conflicting write, given the table as of
       now) is looked for. Without a conflict it writes the metadata table's deltacommit of the same instant
       (files added and removed; record-index entries when ``record_index``, as records move between file
       groups; or what ``metadata_update`` builds for the table config of now: a log compaction's new log
       files), then completes the instant with ``content``. When ``fence`` is an
       :class:`~hoodie.write.attempt.AttemptFence`, the completion is decided before either write
       (:mod:`hoodie.write.decision`; ``metadata_step`` names the metadata update for a roll forward, by
       default the rewrite's that ``record_index`` says): an attempt a takeover voided raises
       :class:`LostRace` there, however late it woke, having written nothing anybody reads; a decided one
       writes the metadata table's deltacommit unless a roll forward did, then publishes its completed
       file.
    2. After the lock (only when completed): the markers go, and the metadata table is compacted and cleaned
       when due.

    Failpoints ``<service>.before_commit``, ``.during_commit``, ``.decided`` (fenced runs),
    ``.after_metadata_commit`` and ``.after_commit`` mark the steps. Returns the completed instant (None on
    a conflict), the conflict (None when completed) and the stray files deleted.
    """
    T = instant.time
    markers = Markers(storage, T)
    mine = own_attempts(stats)
    run = fence if isinstance(fence, AttemptFence) else None
    failpoint(f"{service}.before_commit")
    writer = TimelineWriter(storage, config, lock, time_generator=time_generator)
    with held_to_complete(lock) as completion:
        if fence is not None:
            fence()
        current = Table.load(storage)  # config too: indexes may have been added since the tasks ran
        check_still_inflight(storage, current, service, T, instant.action, stats)
        strays = tuple(
            path
            for path in unrecorded_files(markers.list(), metadata, table_version=config.table_version)
            if attempt_of_file(posixpath.basename(path)) in mine
        )
        for stray in strays:
            logger.info(
                "%s %s: deleting %s, written by a failed or duplicate task attempt", service, T, stray
            )
            storage.delete(stray)
        found = conflict(current) if conflict is not None else None
        if found is None:
            failpoint(f"{service}.during_commit")
            build = metadata_update or (
                lambda cfg: update_for_rewrite(storage, cfg, T, stats, record_index=record_index)
            )
            if run is None:
                write_metadata_update(
                    storage, current.config, lock, build, service=service, time_generator=time_generator
                )
                failpoint(f"{service}.after_metadata_commit")
                completion.done = writer.complete(instant, content)
            else:
                step = metadata_step or ("rewrite_moving_records" if record_index else "rewrite")
                completion.done = complete_decided(
                    storage, current.config, lock, writer, instant, content, run, build, step, service
                )
    done = completion.done
    if done is None:
        return None, found, strays
    if run is not None:
        forget_decision(storage, T, run.attempt)
    failpoint(f"{service}.after_commit")
    try:
        markers.delete_all()
    except StorageError as e:
        left_for_later(done, "deleting its markers", e)
    maintain_metadata_table(storage, lock, time_generator=time_generator)
    return done, None, strays


def decide_completion(
    storage: Storage,
    config: TableConfig,
    lock: LockProvider,
    writer: TimelineWriter,
    instant: Instant,
    content: bytes | TimelineRecord,
    run: AttemptFence,
    step: MetadataStep,
) -> tuple[Instant, Decision]:
    """Decide that attempt ``run`` completes the inflight ``instant`` with ``content``, its metadata table
    getting ``step`` (under the table lock, nothing else written): the metadata table's completion time (v8+)
    taken first, the data timeline's after it, both recorded. Returns the completed instant and the decision
    to publish; :class:`LostRace` when a takeover voided the attempt."""
    metadata_completion = metadata_completion_time(storage, config, lock, writer.time_generator)
    completed, path, data = writer.completion_of(instant, content)
    decision = decide_complete(
        storage,
        instant.time,
        run.attempt,
        path,
        data,
        action=completed.action,
        metadata_step=step,
        metadata_completion=metadata_completion or "",
    )
    return completed, decision


def complete_decided(
    storage: Storage,
    config: TableConfig,
    lock: LockProvider,
    writer: TimelineWriter,
    instant: Instant,
    content: bytes | TimelineRecord,
    run: AttemptFence,
    build: Callable[[TableConfig], MetadataUpdate],
    step: MetadataStep,
    service: str,
) -> Instant:
    """Complete the inflight ``instant`` with ``content`` as attempt ``run``, under the table lock (the
    caller's; ``fence`` checked and the instant found inflight there): decide first
    (:func:`~hoodie.write.decision.decide_complete`: :class:`LostRace` when a takeover voided the attempt,
    however late it woke), then the metadata table's deltacommit that ``build`` makes (``step`` names it for
    a roll forward; not replaced when a roll forward of this decision wrote it), then the completed file,
    published from the decision. Failpoints ``<service>.decided`` and ``.after_metadata_commit``. Returns
    the completed instant; the caller forgets the decision once out of the lock.

    The metadata table's completion time (v8+) is taken first, the data timeline's after it: the deltacommit
    completes before the instant it records, as Hudi's do."""
    completed, decision = decide_completion(storage, config, lock, writer, instant, content, run, step)
    failpoint(f"{service}.decided")
    _write_decided_metadata(storage, config, lock, build, service, writer.time_generator, decision)
    failpoint(f"{service}.after_metadata_commit")
    publish(storage, decision)
    return completed


def void_superseded(storage: Storage, lock: LockProvider, instant_time: str, run: AttemptFence) -> None:
    """Before a service that never rolls back (a clean re-runs its plan) completes ``instant_time`` as
    ``run``, under the table lock: void the attempts ``run`` took the instant over from, so none of them
    completes it after this one. One that decided first wins: its completion is rolled forward and
    :class:`LostRace` raised (this run's own work was the same plan's, done again)."""
    decided = void_attempts(storage, instant_time, run.superseded(), run.attempt)
    if decided is not None:
        wrote = roll_forward(storage, lock, decided)
        raise LostRace(
            f"lost the race: {decided.describe()} before this run could void it; its completion "
            f"{'was published now' if wrote else 'was already published'}"
        )


def _write_decided_metadata(
    storage: Storage,
    config: TableConfig,
    lock: LockProvider,
    build: Callable[[TableConfig], MetadataUpdate],
    service: str,
    time_generator: InstantTimeGenerator | None,
    decision: Decision,
) -> None:
    """The metadata-table deltacommit of a decided completion, completed at the decided time, unless a roll
    forward of the decision wrote it while this attempt was held up (its completed deltacommit is never
    replaced; a late create of it collides)."""
    instant_time = decision.instant_time
    try:
        write_metadata_update(
            storage,
            config,
            lock,
            build,
            service=service,
            time_generator=time_generator,
            replace_completed=False,
            completion_time=decision.metadata_completion or None,
        )
    except (CommitConflict, FileAlreadyExists) as e:
        mdt = open_metadata_table(storage, TableConfig.load(storage))
        if mdt is None or not mdt.timeline.is_completed(instant_time):
            raise
        logger.warning(
            "%s %s: the metadata table's deltacommit was written by a roll forward of this attempt's "
            "decision meanwhile (%s)",
            service,
            instant_time,
            e,
        )


@dataclass
class Completion:
    """What a critical section completed: it sets :attr:`done` (see :func:`held_to_complete`)."""

    done: Instant | None = None


@contextlib.contextmanager
def held_to_complete(lock: LockProvider) -> Iterator[Completion]:
    """Hold ``lock`` for a block that may complete an instant (setting ``.done`` of what it yields). A store
    failure once it completed (releasing the lock), or the lock found lost then, is logged, not raised
    (:func:`left_for_later`): the completion stands (it was decided by a conditional write, not by the
    lock), and reporting the run failed would have it retried, or its files cleaned up, under a commit."""
    completion = Completion()
    try:
        with held(lock):
            yield completion
    except (StorageError, LockLost) as e:
        if completion.done is None:
            raise
        left_for_later(completion.done, "releasing the table lock", e)


def left_for_later(completed: Instant, step: str, error: StorageError | LockLost) -> None:
    """A step after ``completed`` completed failed on the store. The instant is committed and visible, so the
    run is not reported failed: a caller would retry work that is done, or clean up what a reader now reads.
    What the step leaves is taken care of later: the markers of a completed instant are swept, a heartbeat
    expires, a lock the store still names expires (or this process takes it back)."""
    logger.warning("%s is committed; %s failed, left for later: %s", completed, step, error)


__all__ = [
    "Completion",
    "by_partition",
    "check_still_inflight",
    "complete_decided",
    "complete_rewrite",
    "decide_completion",
    "discard_own_files",
    "held_to_complete",
    "left_for_later",
    "own_attempts",
    "void_superseded",
    "without_meta_fields",
    "written_rows",
]
