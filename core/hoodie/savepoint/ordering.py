"""The order a restore compares instants in (Hudi's ``RestoreInstantComparatorFactory`` over its
``InstantComparators``).

Requested-time order: (requested time, action, state), where a compaction compares as a commit, a log
compaction as a deltacommit and a clustering as a replacecommit. Completion-time order: completed instants by
completion time (ties: requested-time order), every pending instant after every completed one, pending ones
among themselves in requested-time order. A restore to savepoint ``t`` rolls back the write-timeline instants
that compare after the savepoint, an instant (``t``, ``restore``) completed when the savepointed commit did:
on COPY_ON_WRITE tables in completion-time order; on MERGE_ON_READ tables in requested-time order when the
instant is a compaction or a commit (a compaction planned before ``t`` stays, its base files are what ``t``'s
log files apply to), else in completion-time order.

Timeline layout 1 (table version 6) names no completion times: a completed instant completes at its requested
time here, as every reader of such a table (Hudi 0.x, hudi-rs, ours) orders them; pending instants still come
after every completed one, as in Hudi 1.x. (Hudi 1.x takes a v6 instant's completion time from its file's
modification time, which a copy of the table can change; a restore does not depend on that.)
"""

from __future__ import annotations

from hoodie.timeline.instant import (
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    RESTORE,
    Instant,
    State,
)
from hoodie.timeline.timeline import Timeline

__all__ = [
    "WRITE_TIMELINE_ACTIONS",
    "completion_key",
    "completion_of",
    "instants_after",
    "requested_key",
]

#: Hudi's ``getWriteTimeline``.
WRITE_TIMELINE_ACTIONS = frozenset(
    {COMMIT, DELTA_COMMIT, COMPACTION, LOG_COMPACTION, REPLACE_COMMIT, CLUSTERING}
)
_COMPARABLE = {COMPACTION: COMMIT, LOG_COMPACTION: DELTA_COMMIT, CLUSTERING: REPLACE_COMMIT}
#: Instants a MERGE_ON_READ restore compares by requested time.
_BY_REQUESTED_ON_MOR = frozenset({COMPACTION, COMMIT})

RequestedKey = tuple[str, str, int]
CompletionKey = tuple[int, str, RequestedKey]


def requested_key(instant: Instant) -> RequestedKey:
    return (instant.time, _COMPARABLE.get(instant.action, instant.action), int(instant.state))


def completion_key(instant: Instant, completion: str | None) -> CompletionKey:
    """``completion``: the instant's completion time (``None`` while pending)."""
    if completion is None:
        return (1, "", requested_key(instant))
    return (0, completion, requested_key(instant))


def completion_of(instant: Instant) -> str | None:
    """An instant's completion time: ``None`` while pending; layout 1 names none, its requested time then."""
    if instant.state is not State.COMPLETED:
        return None
    return instant.completion_time or instant.time


def instants_after(timeline: Timeline, savepoint_time: str, *, merge_on_read: bool) -> list[Instant]:
    """The write-timeline instants that compare after the savepointed commit at ``savepoint_time`` (see the
    module doc), newest first in completion-time order."""
    saved = timeline.get(savepoint_time)
    saved_completion = completion_of(saved) if saved is not None and saved.is_completed else savepoint_time
    marker = Instant(savepoint_time, RESTORE, State.COMPLETED)
    marker_requested = requested_key(marker)
    marker_completion = completion_key(marker, saved_completion)
    out = []
    for instant in timeline:
        if instant.action not in WRITE_TIMELINE_ACTIONS:
            continue
        if merge_on_read and instant.action in _BY_REQUESTED_ON_MOR:
            after = requested_key(instant) > marker_requested
        else:
            after = completion_key(instant, completion_of(instant)) > marker_completion
        if after:
            out.append(instant)
    out.sort(key=lambda i: completion_key(i, completion_of(i)), reverse=True)
    return out
