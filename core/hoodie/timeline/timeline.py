"""The active timeline of a table: every instant with its current state.

Layout 1 (table version 6) keeps the timeline files directly in ``.hoodie/``; layout 2 (v8, v9) in
``.hoodie/<hoodie.timeline.path>`` (default ``timeline``), with completion times in completed files' names.
An instant's state is the highest state whose file is present. Archived history (``.hoodie/archived`` in v6,
``.hoodie/timeline/history`` in v8+, :mod:`hoodie.timeline.archived`) is not part of the active timeline; a
timeline built by :class:`~hoodie.table.Table` asks it for the completion times of archived v8+ instants.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from hoodie.config import TableConfig
from hoodie.storage import Storage
from hoodie.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    COMPLETED_ACTION_OF,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
)


@dataclass(frozen=True)
class Timeline:
    """An immutable, time-ordered view of a table's instants (one entry per instant, in its latest state).

    ``files`` maps each instant time to every (state, file name) present, so the content of any state can be
    read (a compaction's plan lives in its ``.requested`` file even after it completed).

    A savepoint takes the time of the commit it savepoints (Hudi's ``SavepointActionExecutor``), so one time
    may carry two instants: the commit and its savepoint. The savepoint's files are kept apart
    (``savepoint_files``): :meth:`get`, :meth:`file_of` and :meth:`is_committed` answer for the commit, and
    ``instants`` lists the savepoint after it.
    """

    instants: tuple[Instant, ...]
    layout_version: int
    folder: str
    files: dict[str, tuple[tuple[Instant, str], ...]] = field(default_factory=dict, repr=False, compare=False)
    savepoint_files: dict[str, tuple[tuple[Instant, str], ...]] = field(
        default_factory=dict, repr=False, compare=False
    )
    #: Loads the completion times the archived history keeps (layout 2), on the first question about an
    #: instant older than the active timeline; ``None``: archived instants answer with their own time.
    history: Callable[[], Mapping[str, str]] | None = field(default=None, repr=False, compare=False)
    #: Loads the times of the instants the rollbacks on this timeline rolled back (or are rolling back), on
    #: the first question about an instant older than the write timeline's start: those never count as
    #: committed there (see :meth:`is_committed`); ``None``: every such instant does.
    rolled_back: Callable[[], frozenset[str]] | None = field(default=None, repr=False, compare=False)

    # -- loading -----------------------------------------------------------------------------------------

    @classmethod
    def load(cls, storage: Storage, config: TableConfig) -> Timeline:
        folder = config.timeline_path
        names = [f.name for f in storage.list(folder) if not f.is_dir]
        return cls.from_file_names(names, layout_version=config.timeline_layout_version, folder=folder)

    @classmethod
    def from_file_names(cls, names: Iterable[str], *, layout_version: int, folder: str) -> Timeline:
        """Build from a listing; names that are not timeline files are ignored."""
        by_time: dict[str, list[tuple[Instant, str]]] = {}
        savepoints: dict[str, list[tuple[Instant, str]]] = {}
        for name in names:
            instant = Instant.try_parse(name)
            if instant is None:
                continue
            if instant.completion_time is not None and layout_version < 2:
                continue
            into = savepoints if instant.action == SAVEPOINT else by_time
            into.setdefault(instant.time, []).append((instant, name))
        instants = []
        files: dict[str, tuple[tuple[Instant, str], ...]] = {}
        savepoint_files: dict[str, tuple[tuple[Instant, str], ...]] = {}
        for time in sorted(by_time.keys() | savepoints.keys()):
            for source, target in ((by_time, files), (savepoints, savepoint_files)):
                if time in source:
                    entries = sorted(source[time], key=lambda e: e[0].state)
                    target[time] = tuple(entries)
                    instants.append(entries[-1][0])
        return cls(tuple(instants), layout_version, folder, files, savepoint_files)

    # -- queries -----------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Instant]:
        return iter(self.instants)

    def __len__(self) -> int:
        return len(self.instants)

    def get(self, time: str) -> Instant | None:
        """The instant at ``time`` in its latest state, or ``None``."""
        entries = self.files.get(time) or self.savepoint_files.get(time)
        return entries[-1][0] if entries else None

    def completed(self) -> list[Instant]:
        return [i for i in self.instants if i.state is State.COMPLETED]

    def pending(self) -> list[Instant]:
        return [i for i in self.instants if i.state is not State.COMPLETED]

    def completed_writes(self) -> list[Instant]:
        """Completed commits, deltacommits and replacecommits (including finished compactions/clusterings)."""
        return [i for i in self.instants if i.state is State.COMPLETED and i.action in WRITE_ACTIONS]

    def is_completed(self, time: str) -> bool:
        instant = self.get(time)
        return instant is not None and instant.state is State.COMPLETED

    def write_timeline_start(self) -> str | None:
        """The first instant of the write timeline (completed writes, and compactions in any state).

        Instants before it were archived; Hudi's file-system view counts files and log blocks of such
        instants as committed (``containsOrBeforeTimelineStarts``), and so do we.
        """
        return self._write_start

    @cached_property
    def _write_start(self) -> str | None:
        for i in self.instants:
            if i.action in (COMPACTION, LOG_COMPACTION) or (
                i.state is State.COMPLETED and i.action in WRITE_ACTIONS
            ):
                return i.time
        return None

    def is_committed(self, time: str, as_of: str | None = None) -> bool:
        """Whether a write at ``time`` counts as committed as of ``as_of``: it completed on the active
        timeline, or it is older than the write timeline's start (archived) and no rollback on this timeline
        rolled it back.

        The exception is ours, not Hudi's: a writer that was rolled back as failed while it was still alive
        (its heartbeat went stale: a full disk, a long pause) goes on writing files of its instant after the
        rollback. Once archival moves the write timeline's start past that instant, Hudi's rule would count
        those files as committed, and a compaction or clustering would make their records part of the table
        for good (found by the chaos campaign). A rollback says the instant never committed, so its files
        are left out while the rollback is on the timeline (the LAZY clean deletes them meanwhile:
        :func:`hoodie.write.failed_writes.sweep_rolled_back_files`)."""
        if as_of is not None and time > as_of:
            return False
        instant = self.get(time)
        if instant is not None:
            return instant.state is State.COMPLETED and instant.action in WRITE_ACTIONS
        start = self._write_start
        if start is None or time >= start:
            return False
        return self.rolled_back is None or time not in self._rolled_back_times

    @cached_property
    def _rolled_back_times(self) -> frozenset[str]:
        assert self.rolled_back is not None
        return self.rolled_back()

    def completion_time_of(self, time: str) -> str:
        """When a committed write completed: its completion time (v8+), else its instant time (v6). An
        instant archived from a v8+ timeline answers from the history when :attr:`history` is set (read once,
        on the first such question), else with its own time."""
        instant = self.get(time)
        if instant is not None:
            return instant.completion_time or time
        if self.history is None or self.layout_version < 2:
            return time
        return self._archived_completions.get(time, time)

    @cached_property
    def _archived_completions(self) -> Mapping[str, str]:
        assert self.history is not None
        return self.history()

    def with_history(self, history: Callable[[], Mapping[str, str]]) -> Timeline:
        """This timeline, answering completion times of archived instants from ``history``."""
        return replace(self, history=history)

    def with_rolled_back(self, rolled_back: Callable[[], frozenset[str]]) -> Timeline:
        """This timeline, not counting the instants ``rolled_back`` names as committed
        (:meth:`is_committed`)."""
        return replace(self, rolled_back=rolled_back)

    def latest_completed_write(self) -> Instant | None:
        writes = self.completed_writes()
        return writes[-1] if writes else None

    def pending_compactions(self) -> list[Instant]:
        """Compactions requested or inflight (not yet completed as commits)."""
        return [i for i in self.pending() if i.action == COMPACTION]

    def pending_log_compactions(self) -> list[Instant]:
        return [i for i in self.pending() if i.action == LOG_COMPACTION]

    def pending_clusterings(self, *, table_version: int) -> list[Instant]:
        """Clusterings not yet completed: ``clustering`` (v8+) or ``replacecommit`` (v6) requested/inflight.

        In v6 a pending replacecommit may also be an insert-overwrite; callers that care read the requested
        metadata's operation type.
        """
        action = CLUSTERING if table_version >= 8 else REPLACE_COMMIT
        return [i for i in self.pending() if i.action == action]

    def requested_action(self, time: str) -> str | None:
        """The action an instant was requested under (``compaction`` for a compaction that completed as a
        ``commit``)."""
        entries = self.files.get(time) or self.savepoint_files.get(time)
        return entries[0][0].action if entries else None

    def was_compaction(self, time: str) -> bool:
        return self.requested_action(time) == COMPACTION

    def file_of(self, time: str, state: State | None = None, *, action: str | None = None) -> str:
        """Path (relative to the base path) of the instant's file in ``state`` (default: its latest state);
        ``action=SAVEPOINT`` for the savepoint at a commit's time."""
        if action == SAVEPOINT or time not in self.files:
            entries = self.savepoint_files.get(time)
        else:
            entries = self.files.get(time)
        if not entries:
            raise KeyError(f"no instant {time} on the timeline")
        if state is None:
            return f"{self.folder}/{entries[-1][1]}"
        for instant, name in entries:
            if instant.state is state:
                return f"{self.folder}/{name}"
        raise KeyError(f"instant {time} has no {state.name} file")

    def completed_writes_in_range(self, start: str | None, end: str | None) -> list[Instant]:
        """Completed write instants with ``start < time <= end`` (either bound may be open)."""
        writes = self.completed_writes()
        times = [i.time for i in writes]
        lo = 0 if start is None else bisect.bisect_right(times, start)
        hi = len(writes) if end is None else bisect.bisect_right(times, end)
        return writes[lo:hi]

    def filter_as_of(self, as_of: str | None) -> Timeline:
        """The timeline as it was visible at ``as_of``: instants requested at or before it."""
        if as_of is None:
            return self
        kept = tuple(i for i in self.instants if i.time <= as_of)
        files = {t: f for t, f in self.files.items() if t <= as_of}
        savepoint_files = {t: f for t, f in self.savepoint_files.items() if t <= as_of}
        return Timeline(
            kept, self.layout_version, self.folder, files, savepoint_files, self.history, self.rolled_back
        )


def completed_action(action: str) -> str:
    """The action an instant of ``action`` completes under."""
    return COMPLETED_ACTION_OF.get(action, action)


def write_action_for(table_is_mor: bool) -> str:
    """The action of an ingestion write on a table of this type."""
    return DELTA_COMMIT if table_is_mor else COMMIT


def times(instants: Sequence[Instant]) -> list[str]:
    return [i.time for i in instants]
