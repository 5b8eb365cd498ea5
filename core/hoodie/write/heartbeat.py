"""Heartbeats: Hudi's liveness file for an instant, and the lease hoodied holds through it while it runs one.

**Hudi's heartbeat** (``HoodieHeartbeatClient``, WAVE3-FACTS section 1): ``.hoodie/.heartbeat/<instant>``,
re-written every ``hoodie.client.heartbeat.interval_in_ms`` (60 s) by the writer of the instant and deleted
when its write ends. The instant's owner is alive while the file is at most interval x
``hoodie.client.heartbeat.tolerable.misses`` (2) old (*expired* strictly past that); a missing file reads
as expired. Hudi reads only the file's modification time (its own files are empty). :class:`Heartbeat` is a
writer's; :func:`last_heartbeat_ms` reads any.

**The lease** (:class:`InstantLease`): Hudi's table services write no heartbeat, so a run of a compaction
(or any service) is invisible to every process that does not share its claim: another daemon, a one-off
command, a second name of the same table. hoodied's runs therefore keep the same file, at the same
interval, for the whole run, and make it a lease that the store arbitrates:

- the file holds a small JSON record (:class:`LeaseHolder`: replica, host, pid, attempt, since when, last
  beat), which Hudi's readers ignore; its ``beat_ms`` is the holder's own clock, read from the same GET as
  the version, so that a freshness judgement and the version it is based on never belong to two writes;
- :meth:`InstantLease.take` creates the file if absent (create-if-absent) or replaces an *expired* one
  (or one whose holder provably ended: a process of this machine's process table that runs no more, so
  that a run killed here is not waited for) with a compare-and-set on the version read (``If-Match``;
  locally a compare under ``flock``): of two runs taking one instant exactly one wins, the other gets
  :class:`~hoodie.errors.LeaseHeld` naming the winner. A live lease of another attempt is never taken: not
  by ``takeover_grace``, not by ``--take-over`` (which waits for it to expire);
- every beat is again a compare-and-set on the version this run wrote last: a run that was paused past
  the expiry and taken over finds another version, and so do we, once: the lease is *lost*, for good. A
  run whose last successful beat is older than the expiry counts itself lost as well (Hudi's heartbeat
  client aborts itself the same way), even before it can reach the store;
- :meth:`InstantLease.check` (a fence) raises :class:`~hoodie.errors.LeaseLost` when the lease is lost, and
  with ``reread`` reads the file again and requires it to name this attempt: under the table lock, right
  before a commit or a delete, that is the re-read the rule "a lease is not a fence" asks for.

A store without compare-and-set (``conditional_put: false``, other pyarrow file systems) keeps the lease
with plain writes: the freshness check and the re-read under the table lock still hold, but two runs taking
an expired lease at the same moment are told apart only by that re-read.

Clocks: expiry compares a holder's ``beat_ms`` with the reader's clock, as Hudi compares a file's time with
its own; hosts are assumed to agree within a small fraction of the expiry (NTP), which Hudi assumes too.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime

from hoodie.errors import FileAlreadyExists, HoodieError, LeaseHeld, LeaseLost, VersionConflict
from hoodie.lease_margin import remaining_ms as lease_remaining_ms
from hoodie.lease_margin import require_margin
from hoodie.settings import int_setting
from hoodie.storage import Storage

logger = logging.getLogger(__name__)

HEARTBEAT_FOLDER = ".hoodie/.heartbeat"
HEARTBEAT_INTERVAL_MS = "hoodie.client.heartbeat.interval_in_ms"
HEARTBEAT_INTERVAL_MS_DEFAULT = 60_000
HEARTBEAT_TOLERABLE_MISSES = "hoodie.client.heartbeat.tolerable.misses"
HEARTBEAT_TOLERABLE_MISSES_DEFAULT = 2


@dataclass(frozen=True)
class HeartbeatConfig:
    interval_ms: int = HEARTBEAT_INTERVAL_MS_DEFAULT
    tolerable_misses: int = HEARTBEAT_TOLERABLE_MISSES_DEFAULT

    @property
    def expiry_ms(self) -> int:
        return self.interval_ms * self.tolerable_misses

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> HeartbeatConfig:
        return cls(
            int_setting(config, HEARTBEAT_INTERVAL_MS, HEARTBEAT_INTERVAL_MS_DEFAULT, minimum=1),
            int_setting(config, HEARTBEAT_TOLERABLE_MISSES, HEARTBEAT_TOLERABLE_MISSES_DEFAULT, minimum=1),
        )


def heartbeat_path(instant_time: str) -> str:
    return f"{HEARTBEAT_FOLDER}/{instant_time}"


class Heartbeat:
    """A writer's heartbeat for one instant: the file is written at once and every interval on a daemon
    thread until :meth:`stop`, which deletes it."""

    def __init__(self, storage: Storage, instant_time: str, config: HeartbeatConfig | None = None) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.config = config or HeartbeatConfig()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def beat(self) -> None:
        self.storage.create(heartbeat_path(self.instant_time), b"", overwrite=True)

    def start(self) -> Heartbeat:
        self.beat()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{self.instant_time}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.config.interval_ms / 1000):
            try:
                self.beat()
            except (OSError, HoodieError) as e:  # a missed beat; the next one may succeed
                logger.warning("heartbeat of %s on %s failed: %s", self.instant_time, self.storage.uri, e)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.storage.delete(heartbeat_path(self.instant_time))

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def last_heartbeat_ms(storage: Storage, instant_time: str) -> int:
    """When the instant's heartbeat was last written (epoch ms), 0 when it has none: the beat its holder
    recorded in a hoodied lease, else the file's modification time (Hudi's rule)."""
    path = heartbeat_path(instant_time)
    try:
        data = storage.read(path)
    except FileNotFoundError:
        return 0
    holder = LeaseHolder.parse(data)
    if holder is not None:
        return holder.beat_ms
    try:
        mtime = storage.info(path).mtime_ns
    except FileNotFoundError:
        return 0
    return (mtime or 0) // 1_000_000


def process_start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), ``None`` when no such process runs here."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _this_machine() -> str:
    """This kernel's boot and PID namespace (``<boot id>/<pid namespace>``): two processes with these equal
    see the same process table, so one can tell whether the other is still running. Empty where unknown."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


#: How many superseded attempts a lease's holder record carries (a chain of takeovers is short; this bounds
#: the file).
MAX_SUPERSEDED = 32


@dataclass(frozen=True)
class LeaseHolder:
    """Who holds an instant's lease (the heartbeat file's content): a hoodied run. ``machine`` and
    ``process_start`` let a process that shares the holder's process table see that it is gone
    (:meth:`gone`)."""

    replica: str
    host: str
    pid: int
    attempt: str
    since_ms: int
    beat_ms: int
    machine: str = ""
    process_start: int = -1
    #: The attempts this holder took the instant over from, newest first (their holders' own chain after
    #: their attempt): a later takeover voids them all (:mod:`hoodie.write.decision`).
    superseded: tuple[str, ...] = ()

    @classmethod
    def of_this_process(
        cls, replica: str, attempt: str, now_ms: int, superseded: tuple[str, ...] = ()
    ) -> LeaseHolder:
        pid = os.getpid()
        started = process_start_ticks(pid)
        return cls(
            replica,
            socket.gethostname(),
            pid,
            attempt,
            now_ms,
            now_ms,
            _this_machine(),
            -1 if started is None else started,
            superseded,
        )

    def chain(self) -> tuple[str, ...]:
        """This holder's attempt and those it superseded: what a run taking the lease over supersedes (the
        newest :data:`MAX_SUPERSEDED`)."""
        return (self.attempt, *(a for a in self.superseded if a != self.attempt))[:MAX_SUPERSEDED]

    def gone(self) -> bool:
        """Whether the holder's process provably ended: it ran in this process table (same boot, same PID
        namespace) and its pid runs no more, or runs a process started since. A holder elsewhere is never
        gone by this test (only by its heartbeat's expiry)."""
        machine = _this_machine()
        if not machine or self.machine != machine or self.process_start < 0:
            return False
        return process_start_ticks(self.pid) != self.process_start

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode("utf-8")

    @classmethod
    def parse(cls, data: bytes) -> LeaseHolder | None:
        """The holder a heartbeat file names; ``None`` for Hudi's empty file or anything else."""
        if not data.strip():
            return None
        try:
            value = json.loads(data)
            return cls(
                str(value["replica"]),
                str(value["host"]),
                int(value["pid"]),
                str(value["attempt"]),
                int(value["since_ms"]),
                int(value["beat_ms"]),
                str(value.get("machine", "")),
                int(value.get("process_start", -1)),
                tuple(str(a) for a in value.get("superseded", ())),
            )
        except (ValueError, KeyError, TypeError):
            return None

    def describe(self) -> str:
        since = datetime.fromtimestamp(self.since_ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f"replica {self.replica} ({self.host}, pid {self.pid}, attempt {self.attempt}) since {since}"


@dataclass(frozen=True)
class LeaseState:
    """An instant's heartbeat as read: its holder (``None``: Hudi's own file, or none), when it last beat
    (epoch ms, 0 when absent) and the version a compare-and-set must name (``None`` when absent)."""

    holder: LeaseHolder | None
    beat_ms: int
    version: str | None

    def fresh(self, config: HeartbeatConfig, now_ms: int) -> bool:
        """Hudi's rule: alive unless strictly older than the expiry (an absent file is expired)."""
        return self.beat_ms > 0 and now_ms - self.beat_ms <= config.expiry_ms

    def alive(self, config: HeartbeatConfig, now_ms: int) -> bool:
        """Fresh, and its holder not provably gone (a hoodied run killed on this machine need not be waited
        for: :meth:`LeaseHolder.gone`)."""
        return self.fresh(config, now_ms) and not (self.holder is not None and self.holder.gone())


def read_lease(storage: Storage, instant_time: str) -> LeaseState:
    """The instant's heartbeat, holder and version from one read (a Hudi writer's empty file: its time)."""
    path = heartbeat_path(instant_time)
    try:
        data, found = storage.read_for_update(path)
        version = found or ""
    except FileNotFoundError:
        return LeaseState(None, 0, None)
    holder = LeaseHolder.parse(data)
    if holder is not None:
        return LeaseState(holder, holder.beat_ms, version)
    return LeaseState(None, last_heartbeat_ms(storage, instant_time), version)


class InstantLease:
    """A run's lease on one instant, kept through the instant's heartbeat file (see the module doc).

    ``take`` it before the run touches the instant; a daemon thread beats every interval until ``release``;
    ``check`` is the fence. ``on_lost`` callbacks run (once, on the beating thread) when the lease is lost.
    """

    def __init__(
        self,
        storage: Storage,
        instant_time: str,
        config: HeartbeatConfig,
        *,
        replica: str,
        attempt: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.storage = storage
        self.instant_time = instant_time
        self.config = config
        self.attempt = attempt
        self._replica = replica
        self._clock = clock
        self._path = heartbeat_path(instant_time)
        self._holder: LeaseHolder | None = None
        self._version: str | None = None
        self._last_ok_ms = 0
        self._lost: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mutex = threading.Lock()
        self._on_lost: list[Callable[[str], None]] = []

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def remaining_ms(self) -> int:
        """What is left of the lease by this holder's clock (its last good beat, ``now`` taken before it was
        sent, plus the expiry), less the clock-skew bound (:mod:`hoodie.lease_margin`); -1 when it is not
        held or was lost."""
        with self._mutex:
            if self._lost is not None or self._holder is None:
                return -1
            last = self._last_ok_ms
        return lease_remaining_ms(last + self.config.expiry_ms, self._now_ms())

    def require_margin(self, deadline_ms: int) -> None:
        """Refuse (:class:`~hoodie.lease_margin.LeaseMarginTooShort`, a :class:`LeaseLost`) to start a write
        that may take ``deadline_ms`` when the lease may end first
        (:func:`hoodie.lease_margin.require_margin`)."""
        require_margin(
            self.remaining_ms(), deadline_ms, lease=f"the lease of {self.instant_time} on {self.storage.uri}"
        )

    def ensure_margin(self, deadline_ms: int) -> None:
        """:meth:`require_margin`, after one beat when the margin is short: a healthy holder right before a
        beat has less left than right after it, and a run must not give up a job for that. The beat is a
        compare-and-set like every other (a lease passed on is lost, not renewed); a store error in it is
        raised as it is (nothing was written)."""
        if deadline_ms <= 0 or self.remaining_ms() > deadline_ms:
            return
        self.beat()
        self.require_margin(deadline_ms)

    @property
    def superseded(self) -> frozenset[int]:
        """The attempts (numbers) this lease was taken over from, directly or down their chain (empty before
        :meth:`take`, or when the lease was free)."""
        with self._mutex:
            chain = self._holder.superseded if self._holder is not None else ()
        return frozenset(int(a) for a in chain if a.isdigit())

    @property
    def lost(self) -> str | None:
        """Why the lease was lost, or ``None`` while it is held (or not taken yet)."""
        return self._lost

    def on_lost(self, callback: Callable[[str], None]) -> None:
        self._on_lost.append(callback)

    def take(self) -> InstantLease:
        """Take the lease (see the module doc) and start beating; :class:`LeaseHeld` names the holder of a
        fresh lease of another attempt, or the run that took an expired one first."""
        now = self._now_ms()
        state = read_lease(self.storage, self.instant_time)
        if state.alive(self.config, now) and (state.holder is None or state.holder.attempt != self.attempt):
            raise LeaseHeld(self._held_message(state, now))
        before = (
            state.holder.chain() if state.holder is not None and state.holder.attempt != self.attempt else ()
        )
        holder = LeaseHolder.of_this_process(self._replica, self.attempt, now, before)
        try:
            version = self._write(holder, state.version)
        except (FileAlreadyExists, VersionConflict):
            raise LeaseHeld(
                self._held_message(read_lease(self.storage, self.instant_time), self._now_ms())
                + " (it took the lease first)"
            ) from None
        with self._mutex:
            self._holder, self._version, self._last_ok_ms = holder, version, now
        if state.version is not None:
            logger.info(
                "took the expired lease of %s on %s (%s)",
                self.instant_time,
                self.storage.uri,
                state.holder.describe() if state.holder else "a heartbeat without a hoodied holder",
            )
        self._thread = threading.Thread(target=self._run, name=f"lease-{self.instant_time}", daemon=True)
        self._thread.start()
        return self

    def _write(self, holder: LeaseHolder, version: str | None) -> str:
        """Create the file (``version`` None) or replace it at ``version``: conditional writes where the store
        has them (module doc); returns the new version (``""`` where the store keeps none)."""
        data = holder.encode()
        if not self.storage.compare_and_set:
            self.storage.create(self._path, data, overwrite=True)
            return ""
        if version is None:
            created = self.storage.create(self._path, data)
            # A store that gives no version on create: read it back (the file is ours: we created it).
            return created if created is not None else self.storage.read_versioned(self._path)[1]
        return self.storage.replace_if_version(self._path, data, version)

    def _held_message(self, state: LeaseState, now_ms: int) -> str:
        who = state.holder.describe() if state.holder else "a writer (Hudi heartbeat)"
        age = max(0, now_ms - state.beat_ms) / 1000
        return (
            f"instant {self.instant_time} of {self.storage.uri} is held by {who}: its heartbeat is fresh "
            f"(last beat {age:.1f} s ago, expires after {self.config.expiry_ms / 1000:.0f} s without one)"
        )

    def beat(self) -> None:
        """One beat: a compare-and-set on the version this run wrote last (module doc). Raises
        :class:`LeaseLost` once the lease is lost; a store error is raised as it is (a missed beat)."""
        with self._mutex:
            if self._lost is not None:
                raise LeaseLost(self._lost)
            holder, version = self._holder, self._version
            if holder is None or version is None:
                raise LeaseLost(f"the lease of {self.instant_time} was never taken")
            now = self._now_ms()
            if now - self._last_ok_ms > self.config.expiry_ms:
                self._lose_locked(
                    f"its last beat was {(now - self._last_ok_ms) / 1000:.1f} s ago, past the expiry "
                    f"({self.config.expiry_ms / 1000:.0f} s): another run may have taken the instant over"
                )
                raise LeaseLost(self._lost or "")
            beat = replace(holder, beat_ms=now)
            try:
                new_version = self._write(beat, version)
            except (VersionConflict, FileNotFoundError):
                state = read_lease(self.storage, self.instant_time)
                other = state.holder.describe() if state.holder else "nobody (the file is gone)"
                self._lose_locked(f"the heartbeat was replaced or removed; it now names {other}")
                raise LeaseLost(self._lost or "") from None
            self._holder, self._version, self._last_ok_ms = beat, new_version, now

    def _lose_locked(self, why: str) -> None:
        if self._lost is not None:
            return
        self._lost = f"lost the lease on {self.instant_time} of {self.storage.uri}: {why}"
        logger.warning("%s", self._lost)
        self._stop.set()
        for callback in self._on_lost:
            try:
                callback(self._lost)
            except Exception:
                logger.exception("a callback on the loss of the lease of %s failed", self.instant_time)

    def _run(self) -> None:
        while not self._stop.wait(self.config.interval_ms / 1000):
            try:
                self.beat()
            except LeaseLost:
                return
            except (OSError, HoodieError) as e:  # a missed beat; the next one may succeed (or find it late)
                logger.warning("heartbeat of %s on %s failed: %s", self.instant_time, self.storage.uri, e)

    def check(self, *, reread: bool = False) -> None:
        """Raise :class:`LeaseLost` unless the lease is still this run's: not lost, last beat within the
        expiry, and (``reread``) the file read now names this attempt."""
        with self._mutex:
            if self._lost is None and self._holder is not None:
                now = self._now_ms()
                if now - self._last_ok_ms > self.config.expiry_ms:
                    self._lose_locked(
                        f"its last beat was {(now - self._last_ok_ms) / 1000:.1f} s ago, past the expiry"
                    )
            if self._lost is not None:
                raise LeaseLost(self._lost)
            if self._holder is None:
                raise LeaseLost(f"the lease of {self.instant_time} was never taken")
        if reread:
            state = read_lease(self.storage, self.instant_time)
            if state.holder is None or state.holder.attempt != self.attempt:
                with self._mutex:
                    other = state.holder.describe() if state.holder else "nobody (the file is gone)"
                    self._lose_locked(f"the heartbeat now names {other}")
                raise LeaseLost(self._lost or "")

    def release(self) -> None:
        """Stop beating and, while the file still names this attempt, delete it (as Hudi's ``stop``). Never
        raises: a file the store would not delete is left to expire (the run's outcome stands either way)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._mutex:
            if self._holder is None:
                return
            self._holder = None
        if self._lost is not None:
            return
        try:
            state = read_lease(self.storage, self.instant_time)
            if state.holder is not None and state.holder.attempt == self.attempt:
                self.storage.delete(self._path)
        except (OSError, HoodieError) as e:
            logger.warning(
                "the heartbeat of %s on %s is left to expire: %s", self.instant_time, self.storage.uri, e
            )

    def __enter__(self) -> InstantLease:
        return self.take()

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = [
    "HEARTBEAT_FOLDER",
    "HEARTBEAT_INTERVAL_MS",
    "HEARTBEAT_INTERVAL_MS_DEFAULT",
    "HEARTBEAT_TOLERABLE_MISSES",
    "HEARTBEAT_TOLERABLE_MISSES_DEFAULT",
    "MAX_SUPERSEDED",
    "Heartbeat",
    "HeartbeatConfig",
    "InstantLease",
    "LeaseHolder",
    "LeaseState",
    "heartbeat_path",
    "last_heartbeat_ms",
    "process_start_ticks",
    "read_lease",
]
