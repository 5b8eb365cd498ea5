"""Who started an inflight table-service instant, and when hoodied may take one over.

hoodied records every instant it starts. Right before a run moves a requested instant to inflight (or
restarts one of its own), it writes ``.hoodie/.aux/hoodied/started/<service>-<instant>.json`` naming the
replica, host, pid and time (:func:`record_start`); the record goes when the instant completes or hoodied
rolls it back to requested (:func:`forget_start`). So an inflight instant with a record is one of ours, and
one nobody claims was abandoned by a runner that died: it is taken over by today's claim rules
(``jobs.takeover_grace`` unclaimed). One without a record is *foreign*: a Hudi writer's own async compaction
or clustering, Hudi's ``HoodieCompactor`` run by hand, a Flink job. Its owner holds no hoodied claim, and Hudi
records no liveness for table services (their executions write no heartbeat: WAVE2-FACTS section 8), so an
unclaimed foreign instant says nothing about whether its owner still writes. Rolling it back under a live
owner would delete files it is writing and make two processes complete one plan.

So hoodied takes over a foreign instant only when its owner is provably gone (:func:`decide`):

1. the instant's Hudi heartbeat ``.hoodie/.heartbeat/<instant>`` exists and expired (older than
   ``hoodie.client.heartbeat.interval_in_ms`` x ``hoodie.client.heartbeat.tolerable.misses``: Hudi's own rule
   for failed writes). A missing heartbeat proves nothing here, since table services never write one; or
2. its inflight file is older than the table's ``takeover_foreign_after`` (default: never), an operator's
   statement that no run of theirs lasts that long.

Otherwise it is left alone, and the poll's log and ``hoodied status`` say why. A fresh heartbeat holds back
our own abandoned instants too (its writer is alive).

A record is written before the inflight file, so an instant hoodied moved to inflight always has one. A
record without an inflight instant (a crash in between, a start that lost its race) is harmless: records are
read only for inflight instants. A start re-checks its claim right before it records itself (a replica
whose claim lapsed while it prepared once wrote its record over the new holder's, lost the start, and
removed it: that inflight instant then looked foreign; found by the chaos campaign), and one that lost the
race to another process removes its own record only (each record names its attempt). A run that read the
record when it took its claim (:func:`read_start`) writes its own by compare-and-set on that read
(:func:`record_start` with ``seen``): woken from a pause after another run recorded itself, it changes
nothing.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from hoodie.errors import FileAlreadyExists, VersionConflict
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import Instant
from hoodie.write.heartbeat import HeartbeatConfig, read_lease
from hoodied.coordination import claim_name
from hoodied.errors import ClaimLost

STARTED_FOLDER = ".hoodie/.aux/hoodied/started"

#: ``takeover_foreign_after: never`` (the default): a foreign instant is taken over only on its heartbeat.
NEVER = math.inf

logger = logging.getLogger(__name__)


def _record_path(service: str, instant_time: str) -> str:
    return f"{STARTED_FOLDER}/{claim_name(service, instant_time)}.json"


class StartRaced(ClaimLost):
    """The start record changed since the run read it (:func:`read_start`): another run recorded its start
    meanwhile, so this one's claim lapsed while it prepared. Nothing was written."""


@dataclass(frozen=True)
class SeenStart:
    """The start record of an instant as a run read it before deciding to start: its version (None: there
    was none; ``""``: the store has no compare-and-set) for :func:`record_start`'s compare-and-set."""

    record: Mapping[str, object] | None
    version: str | None


def read_start(storage: Storage, service: str, instant_time: str) -> SeenStart:
    """The start record and its version, read when the run decides to start (right after it takes its claim
    and lease), for :func:`record_start`."""
    path = _record_path(service, instant_time)
    try:
        data, found = storage.read_for_update(path)
        version = found or ""
    except FileNotFoundError:
        return SeenStart(None, None)
    try:
        value = json.loads(data)
    except ValueError:
        return SeenStart({"unreadable": True}, version)
    return SeenStart(value if isinstance(value, dict) else {"unreadable": True}, version)


def record_start(
    storage: Storage,
    service: str,
    instant_time: str,
    replica: str,
    attempt: str,
    *,
    seen: SeenStart | None = None,
) -> str:
    """Record that hoodied's ``replica`` starts ``service``'s instant as ``attempt`` (written before its
    inflight file); returns the attempt, which :func:`forget_start` needs to remove this record and no
    other.

    With ``seen`` (:func:`read_start`, read when the run took its claim) the write is conditional on what
    was read: created only if there was no record then, else replaced only at the version read. A run whose
    claim lapsed while it prepared, and whose record another run has written over since, gets
    :class:`StartRaced` and changes nothing (a re-check of the claim right before the write still leaves a
    pause between the two). Without ``seen``, or where the store has no compare-and-set, the record is
    overwritten, fenced only by that re-check."""
    record = {
        "replica": replica,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started_at_ms": int(time.time() * 1000),
        "attempt": attempt,
    }
    path = _record_path(service, instant_time)
    data = json.dumps(record).encode("utf-8")
    if seen is None or not storage.compare_and_set:
        storage.create(path, data, overwrite=True)
        return attempt
    try:
        if seen.version is None:
            storage.create(path, data)
        else:
            storage.replace_if_version(path, data, seen.version)
    except (FileAlreadyExists, VersionConflict):
        raise StartRaced(
            f"the start record of {service} {instant_time} changed since this run read it (now: "
            f"{started_by(storage, service, instant_time)}): another run started it; not recording {attempt}"
        ) from None
    return attempt


def forget_start(storage: Storage, service: str, instant_time: str, attempt: str | None = None) -> None:
    """Remove the record: the instant completed (``attempt`` None: whoever's it is), or the start of
    ``attempt`` did not happen or was rolled back to requested (only that attempt's record: one another
    run wrote meanwhile is theirs, and without it their inflight instant would pass for foreign). Best
    effort: a record left behind only matters while its instant is inflight."""
    path = _record_path(service, instant_time)
    try:
        if attempt is not None:
            record = started_by(storage, service, instant_time)
            if record is None or record.get("attempt") != attempt:
                return
        storage.delete(path)
    except Exception as e:
        logger.warning("could not remove the start record of %s %s: %s", service, instant_time, e)


def started_by(storage: Storage, service: str, instant_time: str) -> Mapping[str, object] | None:
    """The record of the hoodied run that started the instant, or ``None`` when hoodied did not start it."""
    path = _record_path(service, instant_time)
    if not storage.exists(path):
        return None
    try:
        value = json.loads(storage.read(path))
    except ValueError:
        return {"unreadable": True}
    return value if isinstance(value, dict) else {"unreadable": True}


@dataclass(frozen=True)
class Takeover:
    """Whether an unclaimed inflight instant may be taken over (rolled back and run again), and why."""

    allowed: bool
    reason: str
    #: Whether hoodied did not start the instant.
    foreign: bool


def describe_starter(record: Mapping[str, object]) -> str:
    return (
        f"hoodied replica {record.get('replica', '?')} ({record.get('host', '?')}:{record.get('pid', '?')})"
    )


def decide(
    table: Table,
    service: str,
    instant: Instant,
    settings: Mapping[str, str],
    foreign_after: float = NEVER,
    now: float | None = None,
) -> Takeover:
    """The takeover rule of the module docstring for an inflight ``instant`` of ``service`` that nobody
    claims; ``settings`` hold the heartbeat keys, ``foreign_after`` is the table's
    ``takeover_foreign_after`` in seconds (:data:`NEVER` by default), ``now`` is epoch seconds."""
    storage = table.storage
    now = time.time() if now is None else now
    record = started_by(storage, service, instant.time)
    lease = read_lease(storage, instant.time)
    beat_ms = lease.beat_ms
    if lease.alive(HeartbeatConfig.from_config(settings), int(now * 1000)):
        who = lease.holder.describe() if lease.holder is not None else "its writer"
        return Takeover(
            False,
            f"its heartbeat is fresh (written {max(0.0, now - beat_ms / 1000):.0f} s ago): {who} is alive "
            "(a fresh heartbeat is never taken over)",
            record is None,
        )
    if record is not None:
        return Takeover(
            True, f"started by {describe_starter(record)}, which no longer holds its claim", False
        )
    if beat_ms:
        return Takeover(
            True,
            f"not started by hoodied; its Hudi heartbeat expired {now - beat_ms / 1000:.0f} s ago",
            True,
        )
    never = "not started by hoodied, and its owner is not provably gone (no expired Hudi heartbeat)"
    if foreign_after == NEVER:
        return Takeover(False, f"{never}: left alone (takeover_foreign_after: never)", True)
    age = now - _inflight_since(table, instant)
    if age >= foreign_after:
        return Takeover(
            True,
            f"not started by hoodied; inflight for {age:.0f} s, over takeover_foreign_after "
            f"({foreign_after:.0f} s)",
            True,
        )
    return Takeover(
        False,
        f"{never}: inflight for {age:.0f} s, taken over at takeover_foreign_after ({foreign_after:.0f} s)",
        True,
    )


def _inflight_since(table: Table, instant: Instant) -> float:
    """When the instant's inflight file was written (epoch seconds): when its owner started running it."""
    name = instant.file_name_for(table.config.timeline_layout_version)
    info = table.storage.info(f"{table.config.timeline_path}/{name}")
    return (info.mtime_ns or 0) / 1e9


__all__ = [
    "NEVER",
    "STARTED_FOLDER",
    "SeenStart",
    "StartRaced",
    "Takeover",
    "decide",
    "describe_starter",
    "forget_start",
    "read_start",
    "record_start",
    "started_by",
]
