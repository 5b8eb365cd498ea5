"""Instants: one action at one time, in one state, and the timeline file names that record them.

Grammar of a timeline file name (both layouts)::

    <requested time>[_<completion time>].<action>[.<state>]

    requested / inflight:   20240402123035233.deltacommit.requested
                            20240402123035233.deltacommit.inflight
                            20240402123035233.inflight              (a commit's inflight has no action name)
    completed, layout 1:    20240402123035233.deltacommit           (table version 6, in .hoodie/)
    completed, layout 2:    20240402123035233_20240402123036001.deltacommit   (v8+, in .hoodie/timeline/)

Times are ``yyyyMMddHHmmssSSS`` (17 digits) or the older ``yyyyMMddHHmmss`` (14 digits); a few special times
(``00000000000000`` and the metadata table's ``00000000000000010``-style initial times) follow the same rule.
Files are never renamed: each state is its own file, and an instant's state is the highest one present.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

from hoodie.errors import InvalidInstant


class State(IntEnum):
    """States in the order an instant passes through them; the highest present is the instant's state."""

    REQUESTED = 0
    INFLIGHT = 1
    COMPLETED = 2


COMMIT = "commit"
DELTA_COMMIT = "deltacommit"
REPLACE_COMMIT = "replacecommit"
CLEAN = "clean"
ROLLBACK = "rollback"
SAVEPOINT = "savepoint"
RESTORE = "restore"
COMPACTION = "compaction"
LOG_COMPACTION = "logcompaction"
CLUSTERING = "clustering"
INDEXING = "indexing"
SCHEMA_COMMIT = "schemacommit"

ACTIONS = frozenset(
    {
        COMMIT,
        DELTA_COMMIT,
        REPLACE_COMMIT,
        CLEAN,
        ROLLBACK,
        SAVEPOINT,
        RESTORE,
        COMPACTION,
        LOG_COMPACTION,
        CLUSTERING,
        INDEXING,
        SCHEMA_COMMIT,
    }
)

# Actions that only exist while pending and complete under another action's name.
COMPLETED_ACTION_OF = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}

# Actions whose completion writes data files (what a query's snapshot is made of).
WRITE_ACTIONS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT})

_TIME = r"\d{14}(?:\d{3}){0,2}"  # 14 or 17 digits; the metadata table of v6 suffixes 3 more
_NAME_RE = re.compile(rf"^({_TIME})(?:_({_TIME}))?\.([a-z]+)(?:\.(requested|inflight))?$")
_TIME_RE = re.compile(rf"^{_TIME}$")


def check_time(t: str) -> str:
    """Return ``t`` if it is an instant time (14 or 17 digits; 20 for a v6 metadata table's suffixed
    instants), else raise :class:`InvalidInstant`."""
    if not isinstance(t, str) or not _TIME_RE.match(t):
        raise InvalidInstant(f"{t!r} is not an instant time (yyyyMMddHHmmss[SSS])")
    return t


@dataclass(frozen=True, order=False, slots=True)
class Instant:
    """An action at a requested time, in a state; completed v8+ instants also carry their completion time.

    For the pending states of compaction, log compaction and clustering the action is that name; once
    completed the action is the one Hudi completes them under (``commit``, ``deltacommit``,
    ``replacecommit``), exactly as the timeline files say.
    """

    time: str
    action: str
    state: State
    completion_time: str | None = None

    def __post_init__(self) -> None:
        check_time(self.time)
        if self.action not in ACTIONS:
            raise InvalidInstant(f"unknown action {self.action!r} for instant {self.time}")
        if self.completion_time is not None:
            check_time(self.completion_time)
            if self.state is not State.COMPLETED:
                raise InvalidInstant(f"instant {self.time}: only completed instants have a completion time")

    @classmethod
    def parse(cls, file_name: str) -> Instant:
        """Parse a timeline file name; raises :class:`InvalidInstant` for anything else."""
        m = _NAME_RE.match(file_name)
        if not m:
            raise InvalidInstant(f"{file_name!r} is not a timeline file name")
        time, completion, action, state_word = m.groups()
        if action == "inflight" and state_word is None and completion is None:
            return cls(time, COMMIT, State.INFLIGHT)
        if action not in ACTIONS:
            raise InvalidInstant(f"{file_name!r}: unknown action {action!r}")
        if state_word == "requested":
            state = State.REQUESTED
        elif state_word == "inflight":
            state = State.INFLIGHT
        else:
            state = State.COMPLETED
        if completion is not None and state is not State.COMPLETED:
            raise InvalidInstant(f"{file_name!r}: a pending instant has no completion time")
        return cls(time, action, state, completion)

    @classmethod
    def try_parse(cls, file_name: str) -> Instant | None:
        """Like :meth:`parse`, but ``None`` for names that are not timeline files (``.crc``, folders)."""
        try:
            return cls.parse(file_name)
        except InvalidInstant:
            return None

    def file_name_for(self, layout_version: int) -> str:
        """The timeline file name of this instant in timeline layout 1 (v6) or 2 (v8+)."""
        if self.state is State.REQUESTED:
            return f"{self.time}.{self.action}.requested"
        if self.state is State.INFLIGHT:
            if self.action == COMMIT:
                return f"{self.time}.inflight"
            return f"{self.time}.{self.action}.inflight"
        if layout_version >= 2:
            if self.completion_time is None:
                raise InvalidInstant(f"instant {self.time}: layout 2 needs a completion time")
            return f"{self.time}_{self.completion_time}.{self.action}"
        return f"{self.time}.{self.action}"

    @property
    def file_name(self) -> str:
        """The file name: layout 2 when the instant carries a completion time, else layout 1."""
        return self.file_name_for(2 if self.completion_time is not None else 1)

    @property
    def is_completed(self) -> bool:
        return self.state is State.COMPLETED

    @property
    def is_pending(self) -> bool:
        return self.state is not State.COMPLETED

    def __str__(self) -> str:
        done = f" -> {self.completion_time}" if self.completion_time else ""
        return f"[{self.time}{done}] {self.action} {self.state.name}"
