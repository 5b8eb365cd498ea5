"""Writing the timeline: every state transition of every action, for both timeline layouts.

An instant moves requested -> inflight -> completed, and every state is a new file (never a rename)::

    request(action, t)      <folder>/<t>.<action>.requested
    start(instant)          <folder>/<t>.<action>.inflight          (a commit's: <t>.inflight)
    complete(instant)       layout 1 (v6, folder .hoodie):           <t>.<completed action>
                            layout 2 (v8+, folder .hoodie/timeline): <t>_<completion time>.<completed action>

Compaction completes as ``commit``, log compaction as ``deltacommit`` and (v8+) clustering as
``replacecommit``; v6 clustering is a ``replacecommit`` from the start. Savepoints have no requested state
(:meth:`TimelineWriter.create_inflight`).

Every transition re-reads the instant's files, checks that the previous state's file is there and no later
state's is, then writes the new file with an atomic create-if-absent; whoever loses a race gets
:class:`~hoodie.errors.CommitConflict`, and nothing of theirs was written. With a lock provider the check and
the write run under the table lock. v8+ completions always need the lock: the completion time is taken under
it (greater than every time on the timeline), and it is what makes two completers with different completion
times exclude each other. Object stores have no create-if-absent, so there a lock is required for every
transition and the write is an overwrite after the check, under the lock.

What a state's file holds (FORMAT.md, checked against the fixture tables) is enforced when the content is
given as a value (:data:`TimelineRecord`) and encoded as the table's Hudi encodes it (v6 JSON commit
metadata, Avro for everything else); raw bytes are written as given, except that the states Hudi always
leaves empty (compaction, log compaction, clustering, indexing, rollback, restore and savepoint inflights)
refuse content. A clean's inflight repeats its plan: :meth:`TimelineWriter.start` copies it from the
requested file when no content is given.

Deleting the files of a failed write and the rollback's own work belong to the services; this module only
moves the rollback instant through its states.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from hoodie.config import TableConfig
from hoodie.errors import CommitConflict, FileAlreadyExists, LockRequired, UnsupportedTable
from hoodie.lock import DEFAULT_ACQUIRE_TIMEOUT_SECONDS, LockProvider
from hoodie.storage import Storage
from hoodie.timeline.instant import (
    ACTIONS,
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    COMPLETED_ACTION_OF,
    DELTA_COMMIT,
    INDEXING,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
)
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    CleanerPlan,
    CleanMetadata,
    ClusteringPlan,
    CommitMetadata,
    CompactionPlan,
    IndexCommitMetadata,
    IndexPlan,
    RequestedReplaceMetadata,
    RestoreMetadata,
    RestorePlan,
    RollbackMetadata,
    RollbackPlan,
    SavepointMetadata,
    encode_clean_metadata,
    encode_cleaner_plan,
    encode_clustering_plan,
    encode_commit_metadata,
    encode_compaction_plan,
    encode_index_commit_metadata,
    encode_index_plan,
    encode_requested_replace_metadata,
    encode_restore_metadata,
    encode_restore_plan,
    encode_rollback_metadata,
    encode_rollback_plan,
    encode_savepoint_metadata,
)

# The values a timeline file can hold (besides raw bytes).
TimelineRecord = (
    CommitMetadata
    | CompactionPlan
    | ClusteringPlan
    | RequestedReplaceMetadata
    | CleanerPlan
    | CleanMetadata
    | RollbackPlan
    | RollbackMetadata
    | IndexPlan
    | IndexCommitMetadata
    | SavepointMetadata
    | RestorePlan
    | RestoreMetadata
)

# Pending states Hudi always writes empty.
EMPTY_INFLIGHT = frozenset({COMPACTION, LOG_COMPACTION, CLUSTERING, INDEXING, ROLLBACK, RESTORE, SAVEPOINT})

# The values each state of each (requested) action may hold; absent: raw bytes only.
_ACCEPTED: dict[tuple[str, State], tuple[type, ...]] = {
    (COMMIT, State.REQUESTED): (CommitMetadata,),
    (DELTA_COMMIT, State.REQUESTED): (CommitMetadata,),
    (REPLACE_COMMIT, State.REQUESTED): (RequestedReplaceMetadata, ClusteringPlan),
    (CLUSTERING, State.REQUESTED): (ClusteringPlan, RequestedReplaceMetadata),
    (COMPACTION, State.REQUESTED): (CompactionPlan,),
    (LOG_COMPACTION, State.REQUESTED): (CompactionPlan,),
    (CLEAN, State.REQUESTED): (CleanerPlan,),
    (ROLLBACK, State.REQUESTED): (RollbackPlan,),
    (INDEXING, State.REQUESTED): (IndexPlan,),
    (RESTORE, State.REQUESTED): (RestorePlan,),
    (COMMIT, State.INFLIGHT): (CommitMetadata,),
    (DELTA_COMMIT, State.INFLIGHT): (CommitMetadata,),
    (REPLACE_COMMIT, State.INFLIGHT): (CommitMetadata,),
    (CLEAN, State.INFLIGHT): (CleanerPlan,),
    (COMMIT, State.COMPLETED): (CommitMetadata,),
    (DELTA_COMMIT, State.COMPLETED): (CommitMetadata,),
    (COMPACTION, State.COMPLETED): (CommitMetadata,),
    (LOG_COMPACTION, State.COMPLETED): (CommitMetadata,),
    (REPLACE_COMMIT, State.COMPLETED): (CommitMetadata,),
    (CLUSTERING, State.COMPLETED): (CommitMetadata,),
    (CLEAN, State.COMPLETED): (CleanMetadata,),
    (ROLLBACK, State.COMPLETED): (RollbackMetadata,),
    (INDEXING, State.COMPLETED): (IndexCommitMetadata,),
    (SAVEPOINT, State.COMPLETED): (SavepointMetadata,),
    (RESTORE, State.COMPLETED): (RestoreMetadata,),
}


def encode_content(
    content: bytes | TimelineRecord, *, table_version: int, action: str, state: State
) -> bytes:
    """The bytes of the timeline file of ``action`` (the action the instant was requested under) in
    ``state``, encoded as the table's Hudi writes them; raises ValueError for a value that does not belong
    in that file."""
    if isinstance(content, bytes | bytearray | memoryview):
        data = bytes(content)
        if data and state is State.INFLIGHT and action in EMPTY_INFLIGHT:
            raise ValueError(f"a {action} inflight file is always empty; got {len(data)} bytes")
        return data
    accepted = _ACCEPTED.get((action, state), ())
    if not isinstance(content, accepted):
        names = ", ".join(t.__name__ for t in accepted) or "nothing but raw bytes"
        raise ValueError(f"a {action} {state.name.lower()} file holds {names}, not {type(content).__name__}")
    file_action = COMPLETED_ACTION_OF.get(action, action) if state is State.COMPLETED else action
    if isinstance(content, CommitMetadata):
        if file_action == REPLACE_COMMIT and state is State.COMPLETED and not content.replace:
            raise ValueError("a completed replacecommit holds replace commit metadata (replace=True)")
        return encode_commit_metadata(content, table_version=table_version, action=file_action)
    if isinstance(content, CompactionPlan):
        return encode_compaction_plan(content, table_version=table_version)
    if isinstance(content, ClusteringPlan):
        return encode_clustering_plan(content, table_version=table_version)
    if isinstance(content, RequestedReplaceMetadata):
        return encode_requested_replace_metadata(content, table_version=table_version)
    if isinstance(content, CleanerPlan):
        return encode_cleaner_plan(content, table_version=table_version)
    if isinstance(content, CleanMetadata):
        return encode_clean_metadata(content, table_version=table_version)
    if isinstance(content, RollbackPlan):
        return encode_rollback_plan(content, table_version=table_version)
    if isinstance(content, RollbackMetadata):
        return encode_rollback_metadata(content, table_version=table_version)
    if isinstance(content, IndexPlan):
        return encode_index_plan(content, table_version=table_version)
    if isinstance(content, IndexCommitMetadata):
        return encode_index_commit_metadata(content, table_version=table_version)
    if isinstance(content, RestorePlan):
        return encode_restore_plan(content, table_version=table_version)
    if isinstance(content, RestoreMetadata):
        return encode_restore_metadata(content, table_version=table_version)
    return encode_savepoint_metadata(content, table_version=table_version)


class TimelineWriter:
    """Moves instants of one table through their states.

    ``lock`` is the table lock: required on object stores and for v8+ completions; when given, every
    transition runs under it (unless the caller already holds it, in which case the caller's critical section
    is used). ``time_generator`` hands out v8+ completion times (and :meth:`next_instant_time`).
    """

    def __init__(
        self,
        storage: Storage,
        config: TableConfig,
        lock: LockProvider | None = None,
        *,
        time_generator: InstantTimeGenerator | None = None,
        lock_timeout: float = DEFAULT_ACQUIRE_TIMEOUT_SECONDS,
    ) -> None:
        if lock is None and not storage.conditional_create:
            raise LockRequired(
                f"writing the timeline of {storage.uri} needs a lock provider: the store offers no atomic "
                "create-if-absent, so transitions must be checked and written under the table lock"
            )
        self.storage = storage
        self.config = config
        self.lock = lock
        self.layout_version = config.timeline_layout_version
        self.folder = config.timeline_path
        self.time_generator = time_generator or InstantTimeGenerator()
        self._lock_timeout = lock_timeout

    # -- transitions -------------------------------------------------------------------------------------

    def next_instant_time(self) -> str:
        """A new instant time, taken under the table lock (see :class:`InstantTimeGenerator`)."""
        if self.lock is None:
            raise LockRequired("instant times must be taken under the table lock; this writer has none")
        return self.time_generator.next(self.storage, self.config, self.lock)

    def request(self, action: str, time: str, content: bytes | TimelineRecord = b"") -> Instant:
        """Write ``<time>.<action>.requested``; the time must not be on the timeline yet."""
        self._check_action(action)
        if action == SAVEPOINT:
            raise ValueError("savepoints have no requested state: use create_inflight")
        instant = Instant(time, action, State.REQUESTED)
        data = self._encode(content, action, State.REQUESTED)
        with self._critical_section():
            self._check_time_unused(time, action)
            self._write(instant, data)
        return instant

    def create_inflight(self, action: str, time: str, content: bytes | TimelineRecord = b"") -> Instant:
        """Write ``<time>.<action>.inflight`` for an action without a requested state (savepoint). A
        savepoint takes the time of the completed commit it savepoints (Hudi's ``SavepointActionExecutor``):
        that commit may be at ``time``, nothing else."""
        self._check_action(action)
        if action != SAVEPOINT:
            raise ValueError(f"{action} instants start requested: use request, then start")
        instant = Instant(time, action, State.INFLIGHT)
        data = self._encode(content, action, State.INFLIGHT)
        with self._critical_section():
            self._check_time_unused(time, action)
            self._write(instant, data)
        return instant

    def start(self, instant: Instant, content: bytes | TimelineRecord = b"") -> Instant:
        """Requested -> inflight. A clean's inflight gets its plan copied from the requested file when no
        content is given."""
        if instant.state is not State.REQUESTED:
            raise ValueError(f"start() moves a requested instant; {instant} is {instant.state.name}")
        data = self._encode(content, instant.action, State.INFLIGHT)
        inflight = Instant(instant.time, instant.action, State.INFLIGHT)
        with self._critical_section():
            files = self._files_of(instant.time, instant.action)
            requested = self._expect(files, instant, State.REQUESTED)
            if instant.action == CLEAN and not data:
                data = self.storage.read(f"{self.folder}/{requested}")
            self._write(inflight, data)
        return inflight

    def complete(
        self, instant: Instant, content: bytes | TimelineRecord = b"", *, completion_time: str | None = None
    ) -> Instant:
        """Inflight -> completed, under the completed action's name; v8+ with a completion time taken under
        the lock, or ``completion_time`` when one was decided before (see :meth:`completion_of`)."""
        with self._critical_section():
            done, _, data = self.completion_of(instant, content, completion_time=completion_time)
            self._write(done, data)
        return done

    def completion_of(
        self, instant: Instant, content: bytes | TimelineRecord = b"", *, completion_time: str | None = None
    ) -> tuple[Instant, str, bytes]:
        """What completing the inflight ``instant`` with ``content`` writes: the completed instant (v8+ with a
        completion time taken now, under the lock), its file's path and bytes. Nothing is written: a decided
        completion (:mod:`hoodie.write.decision`) records them first and publishes them after.

        ``completion_time`` (v8+ only) is one taken earlier under the lock and recorded in a decision: every
        writer of that decision's metadata-table deltacommit names its completed file alike, so a stale
        writer's late create collides instead of adding a second completed file."""
        if instant.state is not State.INFLIGHT:
            raise ValueError(f"complete() moves an inflight instant; {instant} is {instant.state.name}")
        if completion_time is not None and self.layout_version < 2:
            raise ValueError(f"a v{self.config.table_version} timeline's file names carry no completion time")
        if self.layout_version >= 2 and self.lock is None:
            raise LockRequired(
                f"completing {instant} on a v{self.config.table_version} table needs the table lock: the "
                "completion time is taken under it"
            )
        data = self._encode(content, instant.action, State.COMPLETED)
        done_action = COMPLETED_ACTION_OF.get(instant.action, instant.action)
        with self._critical_section():
            files = self._files_of(instant.time, instant.action)
            self._expect(files, instant, State.INFLIGHT)
            completion = completion_time
            if self.layout_version >= 2 and completion is None:
                completion = self.time_generator.completion_time(self.storage, self.config, self.lock)
        done = Instant(instant.time, done_action, State.COMPLETED, completion)
        return done, f"{self.folder}/{done.file_name_for(self.layout_version)}", data

    def revert_to_requested(self, instant: Instant) -> Instant:
        """Inflight -> requested (Hudi's ``revertInstantFromInflightToRequested``): the inflight file is
        deleted; used after a rollback of an unfinished table service, which then runs again from its plan."""
        if instant.state is not State.INFLIGHT:
            raise ValueError(f"revert_to_requested() moves an inflight instant; {instant} is {instant.state}")
        with self._critical_section():
            files = self._files_of(instant.time, instant.action)
            name = self._expect(files, instant, State.INFLIGHT)
            if not any(i.action == instant.action for i, _ in files.get(State.REQUESTED, [])):
                raise CommitConflict(f"{instant} has no requested file to go back to")
            self.storage.delete(f"{self.folder}/{name}")
        return Instant(instant.time, instant.action, State.REQUESTED)

    def delete_pending(self, instant: Instant) -> None:
        """Remove a pending instant's files, inflight first, then requested (as Hudi's
        ``deleteInflightAndRequestedInstant`` after a rollback of a failed write). A completed instant is
        never removed."""
        if instant.state is State.COMPLETED:
            raise ValueError(f"delete_pending() removes a pending instant; {instant} is completed")
        with self._critical_section():
            files = self._files_of(instant.time, instant.action)
            if State.COMPLETED in files:
                raise CommitConflict(f"{instant} completed meanwhile; it is not deleted")
            for state in (State.INFLIGHT, State.REQUESTED):
                for found, name in files.get(state, []):
                    if found.action == instant.action:
                        self.storage.delete(f"{self.folder}/{name}")

    def revert_to_inflight(self, instant: Instant) -> Instant | None:
        """Completed -> pending (Hudi's ``revertToInflight``): the completed file is deleted, so the instant
        no longer counts, and its pending files stay for the caller to remove. Only a restore (rolling back
        a completed write) and the deletion of a savepoint do this. Returns the instant in the state its
        remaining files give (the action it was requested under: ``compaction`` for a compaction that
        completed as a ``commit``), or ``None`` when no pending file is left."""
        if instant.state is not State.COMPLETED:
            raise ValueError(f"revert_to_inflight() moves a completed instant; {instant} is {instant.state}")
        with self._critical_section():
            files = self._files_of(instant.time, instant.action)
            name = self._expect(files, instant, State.COMPLETED)
            self.storage.delete(f"{self.folder}/{name}")
        pending = [found for state in (State.INFLIGHT, State.REQUESTED) for found, _ in files.get(state, [])]
        return pending[0] if pending else None

    # -- checks ------------------------------------------------------------------------------------------

    def _check_action(self, action: str) -> None:
        if action not in ACTIONS:
            raise ValueError(f"unknown action {action!r}")
        if action == CLUSTERING and self.layout_version < 2:
            raise UnsupportedTable(
                f"table version {self.config.table_version} has no clustering action: v6 clustering is a "
                "replacecommit (request replacecommit with the clustering plan)"
            )

    def _encode(self, content: bytes | TimelineRecord, action: str, state: State) -> bytes:
        return encode_content(content, table_version=self.config.table_version, action=action, state=state)

    def _files_of(self, time: str, action: str | None = None) -> dict[State, list[tuple[Instant, str]]]:
        """The files of instant ``time`` on the timeline now, by state. A savepoint shares its commit's time
        but is an instant of its own (as :class:`~hoodie.timeline.timeline.Timeline` keeps it): given an
        ``action``, only the savepoint's files (``SAVEPOINT``) or only the others are returned."""
        found: dict[State, list[tuple[Instant, str]]] = {}
        for info in self.storage.list(self.folder):
            if info.is_dir:
                continue
            instant = Instant.try_parse(info.name)
            if instant is None or instant.time != time:
                continue
            if instant.completion_time is not None and self.layout_version < 2:
                continue
            if action is not None and (instant.action == SAVEPOINT) != (action == SAVEPOINT):
                continue
            found.setdefault(instant.state, []).append((instant, info.name))
        return found

    def _check_time_unused(self, time: str, action: str) -> None:
        """Refuse a time already on the timeline; a savepoint may take the time of a completed commit."""
        files = self._files_of(time)
        if action == SAVEPOINT:
            completed = [i for i, _ in files.get(State.COMPLETED, [])]
            savepointed = any(i.action == SAVEPOINT for entries in files.values() for i, _ in entries)
            if completed and all(i.action in WRITE_ACTIONS for i in completed) and not savepointed:
                return
        if files:
            names = sorted(name for entries in files.values() for _, name in entries)
            raise CommitConflict(f"instant time {time} is already on the timeline: {', '.join(names)}")

    def _expect(self, files: dict[State, list[tuple[Instant, str]]], instant: Instant, state: State) -> str:
        """Check the instant is in ``state`` (its file there, no later state's); return that file's name."""
        later = [name for s, entries in files.items() if s > state for _, name in entries]
        if later:
            raise CommitConflict(
                f"{instant} has moved on: {', '.join(sorted(later))} is already on the timeline"
            )
        for found, name in files.get(state, []):
            if found.action == instant.action:
                return name
        present = sorted(name for entries in files.values() for _, name in entries)
        raise CommitConflict(
            f"{instant} is not {state.name.lower()}: expected "
            f"{Instant(instant.time, instant.action, state).file_name_for(self.layout_version)} in "
            f"{self.folder}, found {', '.join(present) or 'no file of that instant'}"
        )

    # -- writing -----------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _critical_section(self) -> Iterator[None]:
        if self.lock is None or self.lock.is_held:
            yield
            return
        self.lock.acquire(self._lock_timeout)
        try:
            yield
        finally:
            self.lock.release()

    def _write(self, instant: Instant, data: bytes) -> None:
        name = instant.file_name_for(self.layout_version)
        path = f"{self.folder}/{name}"
        if self.storage.conditional_create:
            try:
                self.storage.create(path, data)
            except FileAlreadyExists:
                raise CommitConflict(f"{name} was written by another writer first") from None
            return
        # No create-if-absent here: we hold the table lock (the constructor insists on one).
        if self.storage.exists(path):
            raise CommitConflict(f"{name} was written by another writer first")
        self.storage.create(path, data, overwrite=True)
