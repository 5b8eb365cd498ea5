"""Files a voided attempt's held requests land after another run completed its instant, found and deleted.

A run paused mid-job (a long GC, a frozen VM, a request held in the network) may have a data file's PUT on
its way when its lease passes on. The takeover voids the attempt (:mod:`hoodie.write.decision`), rolls back
the files of it that are there, and completes the instant with its own attempt's files. The held PUT can
land after all that: a file named with the completed instant's time and the voided attempt's write token
(:mod:`hoodie.write.attempt`). No completion names it, and a woken attempt deletes its own files when it
finds it lost (:func:`~hoodie.write.rollback.discard_attempt_files`), but one whose process died meanwhile
never does (found by the chaos campaign, seed 766: a base-file PUT held 20 s, the replica killed while
held). Left there, a reader that lists files instead of reading the metadata table sees two base files of one
file slice at one completed instant, and may take the voided attempt's.

So a run that voided earlier attempts (however it ended: completed, or the instant removed on a conflict)
tells its caller where they may land files, as :class:`LateFiles`, and the daemon sweeps them a few times
(``hoodied.poller``): soon after (a held request usually lands within seconds), a minute after, and
:data:`LATE_REQUEST_HORIZON_SECONDS` after (S3 and Azure Blob refuse a request signed more than 15 minutes
before it arrives, so no held PUT lands after that). A file is deleted only when its
token names an attempt whose decision is ``void``: such an attempt can never complete the instant, so no
completion names its files, and the sweep needs no lock.

The sweeps outlive the replica that voided: void decisions stay on storage, so the replica polling the table
finds the recent ones (:func:`recent_late_files`, one listing of the decisions folder) whenever its timeline
shows a rollback it has not looked at (every takeover rolls the voided attempt back) and sweeps them too.

Until swept, a late file is visible only where its instant counts as committed: completed (a second copy of
the takeover's file in the same slice), or removed and older than the active timeline's first commit, which
readers take as archived. Archival therefore keeps the first commit before an instant removed within the
horizon (:func:`removed_instants_with_late_files`, read by :mod:`hoodie.archival.plan`), so such a file stays
invisible until the sweep at the horizon deletes it. A Hudi writer's own inline archival does not know this.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections import defaultdict
from dataclasses import dataclass

from hoodie.errors import CommitConflict
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.timeline import Timeline
from hoodie.write.decision import DECISIONS_FOLDER, read_decision
from hoodie.write.rollback import discard_attempt_files

logger = logging.getLogger(__name__)

#: Seconds after which no held request lands any more on S3 or Azure Blob (their signed-request window).
LATE_REQUEST_HORIZON_SECONDS = 15 * 60.0
#: How far the store's clock (a decision's modification time) may be behind or ahead of ours.
CLOCK_SKEW_SECONDS = 5 * 60.0


@dataclass(frozen=True)
class LateFiles:
    """Where the voided ``attempts`` of the instant ``instant_time`` may still land files: the file groups the
    instant's job writes (``(partition, file id)``; a file id of ``None``: any file of the partition), or
    ``None`` for every partition of the table (looked up at each sweep: a run that prepared no job)."""

    instant_time: str
    groups: tuple[tuple[str, str | None], ...] | None
    attempts: frozenset[int]

    def sweep(self, storage: Storage) -> list[str]:
        """Delete the files of the attempts that are void (see the module doc); returns them."""
        deleted: list[str] = []
        groups = self.groups
        for attempt in sorted(self.attempts):
            decision = read_decision(storage, self.instant_time, attempt)
            if decision is None or decision.verdict != "void":
                continue  # not voided: not provably nobody's
            if groups is None:
                groups = tuple(sorted({(g.partition_path, None) for g in Table.load(storage).file_groups()}))
            deleted += discard_attempt_files(storage, self.instant_time, groups, attempt)
        if deleted:
            logger.warning(
                "%s on %s: deleted %d file(s) that voided attempt(s) %s landed after a takeover",
                self.instant_time,
                storage.uri,
                len(deleted),
                ", ".join(str(a) for a in sorted(self.attempts)),
            )
        return deleted


def recent_late_files(
    storage: Storage, *, horizon: float = LATE_REQUEST_HORIZON_SECONDS, now: float | None = None
) -> list[LateFiles]:
    """Where attempts voided within ``horizon`` seconds (plus :data:`CLOCK_SKEW_SECONDS`) of ``now`` may still
    land files, one :class:`LateFiles` per instant over every partition; found by listing the decisions
    folder once (a decision without a modification time counts as recent). A decision that cannot be read
    is passed over with a warning: it decides nothing, so none of its files would be deleted anyway."""
    now = time.time() if now is None else now
    since_ns = int((now - horizon - CLOCK_SKEW_SECONDS) * 1_000_000_000)
    try:
        listed = storage.list(DECISIONS_FOLDER, recursive=True)
    except FileNotFoundError:
        return []
    voided: dict[str, set[int]] = defaultdict(set)
    for info in listed:
        if info.is_dir or not info.name.endswith(".json") or (info.mtime_ns or since_ns) < since_ns:
            continue
        instant_time = posixpath.basename(posixpath.dirname(info.path))
        try:
            attempt = int(info.name.removesuffix(".json"))
            decision = read_decision(storage, instant_time, attempt)
        except (ValueError, CommitConflict) as e:
            logger.warning("%s: passing over the decision %s: %s", storage.uri, info.path, e)
            continue
        if decision is not None and decision.verdict == "void":
            voided[instant_time].add(attempt)
    return [LateFiles(t, None, frozenset(a)) for t, a in sorted(voided.items())]


def removed_instants_with_late_files(
    storage: Storage, timeline: Timeline, *, horizon: float = LATE_REQUEST_HORIZON_SECONDS
) -> list[str]:
    """The instants, oldest first, that a takeover removed from ``timeline`` within ``horizon`` while voiding
    attempts that may still land files (see the module doc): neither pending nor completed there, and after
    its first instant. One before it is either archived (completed: archival does not change what its files
    show) or already read as archived, which holding archival back cannot undo."""
    on_timeline = {i.time for i in timeline.instants}
    if not on_timeline:
        return []
    start = min(on_timeline)
    return [
        late.instant_time
        for late in recent_late_files(storage, horizon=horizon)
        if late.instant_time not in on_timeline and late.instant_time > start
    ]


__all__ = [
    "CLOCK_SKEW_SECONDS",
    "LATE_REQUEST_HORIZON_SECONDS",
    "LateFiles",
    "recent_late_files",
    "removed_instants_with_late_files",
]
