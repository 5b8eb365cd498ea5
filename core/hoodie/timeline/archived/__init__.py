"""The archived timeline: instants moved out of the active timeline by archival, in either of Hudi's layouts.

- Timeline layout 2 (table version 8+): an LSM tree of Parquet files under
  ``.hoodie/<hoodie.timeline.path>/<hoodie.timeline.history.path>`` (default
  ``.hoodie/timeline/history``), one row per instant, made visible by ``manifest_<N>`` and ``_version_``
  (:mod:`hoodie.timeline.archived.lsm`).
- Timeline layouts 0/1 (table version 6): Hudi log files ``.commits_.archive.<N>_<token>`` under
  ``.hoodie/<hoodie.archivelog.folder>`` (default ``.hoodie/archived``) of Avro data blocks, one
  ``HoodieArchivedMetaEntry`` record per state file (:mod:`hoodie.timeline.archived.archive_log`).

Every archived instant is one an archiver took off the active timeline after the history held it. Readers see
an instant at most once: the history's copy and the active timeline's may overlap for the short while between
the history's commit and the deletion of the active files, and then the active timeline wins.

The two layouts differ in what they keep: the LSM keeps one row per instant (its completed action, completion
time, the completed file's bytes and the plan's bytes), the archive log one record per state file (each
state's decoded Avro payload). :class:`ArchivedInstant` holds either.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hoodie.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    Instant,
    State,
)


@dataclass(frozen=True)
class StateFile:
    """One file of the active timeline that archival moves into the history: the instant in the state that
    file records, its name in the timeline folder, its bytes and its modification time (v6 archive records
    keep it as ``stateTransitionTime``)."""

    instant: Instant
    name: str
    content: bytes
    modified: dt.datetime | None = None


@dataclass(frozen=True)
class ArchivedInstant:
    """One instant (LSM: its completed state) or one state of an instant (archive log) of the history.

    ``instant`` carries the requested time, the action as the completed file names it (a compaction is a
    ``commit``, a clustering a ``replacecommit``, a log compaction a ``deltacommit``; in the archive log each
    state's own action), the state and, where the layout keeps it, the completion time. LSM rows carry
    ``metadata`` (the completed file's bytes, ``None`` when it was empty) and ``plan`` (the plan file's bytes
    where the action has one); archive-log records carry ``record``, the decoded ``HoodieArchivedMetaEntry``.
    """

    instant: Instant
    metadata: bytes | None = None
    plan: bytes | None = None
    record: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def time(self) -> str:
        return self.instant.time

    @property
    def requested_action(self) -> str:
        """The action the instant was requested under, as far as the history tells: the archive log keeps
        every state's own action; an LSM row keeps the completed action and the plan, so a ``commit`` with a
        plan was a compaction, a ``deltacommit`` with one a log compaction, and a ``replacecommit`` with one a
        clustering or an insert-overwrite (told apart only by decoding the plan; taken as clustering)."""
        if self.record is not None or self.plan is None:
            return self.instant.action
        return {COMMIT: COMPACTION, DELTA_COMMIT: LOG_COMPACTION, REPLACE_COMMIT: CLUSTERING}.get(
            self.instant.action, self.instant.action
        )


@dataclass(frozen=True)
class ArchivedTimeline:
    """The history of a table as read: its instants ordered by requested time, then state.

    For the LSM layout there is one entry per instant (always completed); for the archive log one entry per
    archived state file. ``completed`` gives one completed entry per instant for either.
    """

    entries: tuple[ArchivedInstant, ...]

    def __iter__(self) -> Iterator[ArchivedInstant]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def completed(self) -> list[Instant]:
        """One completed instant per requested time, oldest first."""
        seen: dict[str, Instant] = {}
        for entry in self.entries:
            if entry.instant.state is State.COMPLETED:
                seen.setdefault(entry.time, entry.instant)
        return [seen[t] for t in sorted(seen)]

    def get(self, time: str) -> ArchivedInstant | None:
        """The completed entry at ``time`` (else its latest state), or ``None``."""
        found = [e for e in self.entries if e.time == time]
        if not found:
            return None
        return max(found, key=lambda e: e.instant.state)

    def requested_actions(self) -> dict[str, str]:
        """Requested time -> the action each completed instant was requested under (its earliest state's in
        the archive log; :attr:`ArchivedInstant.requested_action` of its row in the LSM)."""
        first: dict[str, str] = {}
        for entry in self.entries:  # by time, then state: a time's first entry is its earliest state
            first.setdefault(entry.time, entry.requested_action)
        return {i.time: first[i.time] for i in self.completed()}

    def completion_times(self) -> dict[str, str]:
        """Requested time -> completion time, for the instants whose completion time the history keeps."""
        return {
            e.time: e.instant.completion_time
            for e in self.entries
            if e.instant.state is State.COMPLETED and e.instant.completion_time is not None
        }

    @classmethod
    def of(cls, entries: Iterable[ArchivedInstant]) -> ArchivedTimeline:
        """Entries sorted by (requested time, state); the first one read of an equal pair wins."""
        unique: dict[tuple[str, State], ArchivedInstant] = {}
        for entry in entries:
            unique.setdefault((entry.time, entry.instant.state), entry)
        return cls(tuple(unique[k] for k in sorted(unique)))


__all__ = ["ArchivedInstant", "ArchivedTimeline", "StateFile"]
