"""Change events: what announces that a table's timeline changed, so the poller reads it now instead of at
its next poll (issue 34: notifications as the main signal, polling as the safety net).

A source (Hudi's write-commit callback: :mod:`hoodied.commit_callback`) names a table by its base path; the
path is resolved to the table's identity (:func:`hoodie.storage.identity.table_identity`: every spelling
of one table is one identity) and queued. The poller takes the queue at the start of each poll
(:meth:`ChangeEvents.take`): an announced table it watches is polled at once, at its base interval again;
one it does not watch but a discovery root holds leads to a scan of that root; the rest are counted as
naming no table. An event is only a hint: a lost one costs the delay of the next sweep, never a result, and
a forged one at most a listing.

:meth:`ChangeEvents.wait` lets the daemon's poll loop sleep until the next poll *or* an event, whichever comes
first, which is what brings new work on an idle table to a start within a second or two.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from hoodie.errors import StorageError
from hoodie.storage.identity import table_identity

#: How many distinct tables may wait in the queue; more are dropped (and counted): the sweep finds them.
MAX_QUEUED = 100_000
#: The folders under ``.hoodie/`` whose changes say nothing of the timeline.
NOT_TIMELINE = (".aux/", ".heartbeat/", ".temp/", ".locks/", "metadata/", ".bucket_index/", ".schema/")


def table_prefix_of(name: str) -> str | None:
    """The key prefix of the table whose timeline (or ``hoodie.properties``) the object ``name`` (a key in
    its bucket or container, decoded) belongs to: its part before ``.hoodie/`` (``""`` for a table at the
    bucket's root), or ``None`` for any other object: data files, and the folders of :data:`NOT_TIMELINE`
    (the heartbeats, ``.aux``, the metadata table's own folder). A store's object events name keys; this is
    what turns one into a table."""
    marker = ".hoodie/"
    at = name.find(marker)
    while at > 0 and name[at - 1] != "/":  # a folder named "x.hoodie" is not the meta folder
        at = name.find(marker, at + 1)
    if at < 0:
        return None
    inside = name[at + len(marker) :]
    if not inside or inside.startswith(NOT_TIMELINE):
        return None
    return name[:at].rstrip("/")


@dataclass(frozen=True)
class Announcement:
    """One event: the table at ``base_path`` changed (``instant``: the instant announced, when known), from
    ``source`` (``commit_callback``, ``s3_sqs``), received at ``received`` (seconds since the epoch), the
    change itself made at ``sent`` when the source says (an S3 event's ``eventTime``: the queue's lag is
    ``received - sent``)."""

    base_path: str
    source: str
    instant: str | None = None
    received: float = 0.0
    sent: float | None = None


class ChangeEvents:
    """The queue of announced tables, by identity (thread-safe: sources add from their own threads)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._arrived = threading.Condition(self._guard)
        self._queued: dict[str, Announcement] = {}
        #: Events received, by source; dropped ones (queue full, or a path naming no place) by reason.
        self.received: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        #: The newest lag seen per source (seconds from the change to its event's arrival).
        self.lag: dict[str, float] = {}

    def announce(self, event: Announcement) -> str | None:
        """Queue ``event``; returns the table identity it names, or ``None`` when the path names no place
        (counted, dropped). A table already queued keeps one entry (the newest event)."""
        try:
            identity = table_identity(event.base_path)
        except StorageError:
            with self._guard:
                self.received[event.source] += 1
                self.dropped["no_place"] += 1
            return None
        with self._arrived:
            self.received[event.source] += 1
            if event.sent is not None and event.received:
                self.lag[event.source] = max(0.0, event.received - event.sent)
            if identity not in self._queued and len(self._queued) >= MAX_QUEUED:
                self.dropped["queue_full"] += 1
                return identity
            self._queued[identity] = event
            self._arrived.notify_all()
        return identity

    def drop(self, reason: str, n: int = 1) -> None:
        """Count ``n`` events a source dropped for ``reason`` (they named no table's timeline)."""
        with self._guard:
            self.dropped[reason] += n

    def take(self) -> dict[str, Announcement]:
        """Every table announced since the last take, by identity (the queue is emptied)."""
        with self._guard:
            taken, self._queued = self._queued, {}
        return taken

    def totals(self) -> tuple[dict[str, int], dict[str, int], dict[str, float]]:
        """A snapshot of the counts so far: events received by source, dropped by reason, lag by source."""
        with self._guard:
            return dict(self.received), dict(self.dropped), dict(self.lag)

    def pending(self) -> int:
        with self._guard:
            return len(self._queued)

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds, or until an event is queued; whether one is."""
        with self._arrived:
            if self._queued:
                return True
            self._arrived.wait(max(0.0, timeout))
            return bool(self._queued)


__all__ = [
    "MAX_QUEUED",
    "NOT_TIMELINE",
    "Announcement",
    "ChangeEvents",
    "table_prefix_of",
]
