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
completion names its files, and the sweep needs no lock. A replica that dies before its sweeps leaves such
files to the orphan-file reclaim.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.write.decision import read_decision
from hoodie.write.rollback import discard_attempt_files

logger = logging.getLogger(__name__)

#: Seconds after which no held request lands any more on S3 or Azure Blob (their signed-request window).
LATE_REQUEST_HORIZON_SECONDS = 15 * 60.0


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


__all__ = ["LATE_REQUEST_HORIZON_SECONDS", "LateFiles"]
