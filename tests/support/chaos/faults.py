"""The faults of a chaos trial, and the injector that schedules them from the trial's seed.

Kinds (each undone after a while, except the kills, whose process is started again):

- ``kill_replica``: SIGKILL a replica's process group (its Spark JVM and Python workers with it), start it
  again 1-5 s later, as Kubernetes restarts a lost pod;
- ``kill_writer``: SIGKILL the writer mid-batch, start it again 0.5-3 s later;
- ``zk_cut``: drop a replica's ZooKeeper connections (it reconnects to the same session: SUSPENDED);
- ``zk_partition``: partition a replica from ZooKeeper past its session timeout: its session expires (LOST),
  its claims and table lock vanish on the server while it may be in the middle of a job or a commit;
- ``disk_full``: fill the file system the table lives on (a size-limited tmpfs) for 2-8 s;
- ``store_errors``: the object store answers a share of the requests with 503 SlowDown, 500, or a reset
  connection for 2-10 s (tables on the S3-compatible server, through a fault-injecting proxy);
- ``stop_replica``: SIGSTOP a daemon's process group (its Spark JVM and Python workers with it) for longer
  than its ZooKeeper session timeout and its instants' heartbeat expiry together, then SIGCONT it: it wakes
  holding claims, a lease and maybe the table lock that are all gone, as after a long GC pause or a frozen VM;
- ``stall``: stop the process group of the first replica to send a request of a chosen kind (a commit, a
  plan, a history manifest, a base file, a delete) and hold that request past the replica's session and
  heartbeat, then continue the replica and let the request go, late (:mod:`support.chaos.stalls`, issue 33);
- ``oneoff``: an operator runs ``hoodied compact|cluster|logcompact PATH --mode execute --instant T`` (some
  with ``--take-over``) on a pending instant a replica may be running (:mod:`support.chaos.actors`);
- ``cancel``: an operator cancels a running instant with ``hoodied ctl cancel`` (the replica rolls it back to
  requested) and retries it 2-6 s later with ``hoodied ctl retry``.

Only the kinds a trial can inflict are drawn (a tmpfs needs ``mount``; store errors need a table on S3).
"""

from __future__ import annotations

import contextlib
import errno
import heapq
import logging
import os
import random
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from support.stall_proxy import STALL_KINDS

logger = logging.getLogger(__name__)

KINDS = (
    "kill_replica",
    "kill_writer",
    "zk_cut",
    "zk_partition",
    "disk_full",
    "store_errors",
    "stop_replica",
    "stall",
    "oneoff",
    "cancel",
)

#: Relative weights of the kinds when drawn.
WEIGHTS = {
    "kill_replica": 3,
    "kill_writer": 2,
    "zk_cut": 2,
    "zk_partition": 2,
    "disk_full": 2,
    "store_errors": 3,
    "stop_replica": 2,
    "stall": 3,
    "oneoff": 3,
    "cancel": 1,
}

#: Relative weights of a stall's kinds: the completions and plans of issue 33 first; a history manifest is
#: rare in a short trial (archival needs ``hoodie.keep.max.commits`` commits first).
STALL_WEIGHTS = {"commit": 3, "metadata": 2, "plan": 3, "base": 2, "delete": 2, "manifest": 1}


@dataclass(frozen=True)
class OneOffOrder:
    """What the injector asks of an operator's one-off command (drawn from the trial's seed): whether it
    passes ``--take-over``, and a number that seeds its other choices (which pending instant, which spelling
    of the table's path)."""

    take_over: bool
    draw: int


class StoreFaults(Protocol):
    """Makes the object store misbehave (the fault-injecting S3 proxy)."""

    def fail(self, rate: float, seconds: float) -> None: ...

    def heal(self) -> None: ...


class Tmpfs:
    """A size-limited tmpfs mounted at a folder (needs root and ``mount``), and a ballast file filling it."""

    def __init__(self, folder: Path, size_mb: int) -> None:
        self.folder = folder
        self.size_mb = size_mb
        self.mounted = False
        self._ballast = folder / ".chaos-ballast"

    @staticmethod
    def unavailable(probe: Path) -> str | None:
        """Why a tmpfs cannot be mounted here, or ``None``."""
        probe.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(probe)],
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"cannot run mount: {e}"
        if done.returncode != 0:
            return f"mount -t tmpfs refused: {done.stderr.strip() or done.returncode}"
        subprocess.run(["umount", str(probe)], capture_output=True, timeout=10)
        return None

    def mount(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m", "tmpfs", str(self.folder)],
            check=True,
            capture_output=True,
            timeout=10,
        )
        self.mounted = True

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.folder)], capture_output=True, timeout=30)
            self.mounted = False

    def fill(self) -> int:
        """Write the ballast until the file system is full; returns its bytes."""
        written = 0
        chunk = b"\0" * (1 << 20)
        try:
            f = open(self._ballast, "ab")  # noqa: SIM115 (closed below)
        except OSError as e:  # the file system is full already: the fault is in force as it is
            if e.errno != errno.ENOSPC:
                raise
            return 0
        with f:
            while True:
                try:
                    f.write(chunk)
                    f.flush()
                    written += len(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
            with contextlib.suppress(OSError):  # the last partial chunk too
                os.fsync(f.fileno())
        return written

    def free(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._ballast.unlink()


@dataclass
class Targets:
    """What the injector acts on: the trial's callbacks and parts."""

    replicas: Sequence[str]
    kill_replica: Callable[[str], None]
    restart_replica: Callable[[str], None]
    kill_writer: Callable[[], None]
    restart_writer: Callable[[], None]
    zk_cut: Callable[[str], None]
    zk_block: Callable[[str], None]
    zk_unblock: Callable[[str], None]
    session_timeout: float
    disk: Tmpfs | None = None
    store: StoreFaults | None = None
    #: Daemons that ``stop_replica`` may freeze (the replicas, and any second daemon on the table).
    stoppable: Sequence[str] = ()
    #: SIGSTOP / SIGCONT a daemon; ``stop`` returns what ``resume`` needs to continue that very process.
    stop: Callable[[str], object] | None = None
    resume: Callable[[object], None] | None = None
    #: Seconds a stop lasts at least: the session timeout and the instants' heartbeat expiry together.
    stop_floor: float = 0.0
    #: Arm a stall of the first replica to send a request of a kind (:meth:`support.chaos.stalls.Staller.arm`:
    #: kind, hold, window; returns what it armed) and end it (:meth:`~support.chaos.stalls.Staller.disarm`).
    stall: Callable[[str, float, float], str] | None = None
    unstall: Callable[[], None] | None = None
    #: An operator's one-off command (returns at once; the command runs in the background).
    oneoff: Callable[[OneOffOrder], str] | None = None
    #: ``hoodied ctl cancel`` of a running instant: returns what was cancelled (for ``retry``), or None.
    cancel: Callable[[], object | None] | None = None
    retry: Callable[[object], None] | None = None


@dataclass
class Event:
    at: float  # seconds since the injection began
    kind: str
    target: str
    detail: str = ""


@dataclass
class FaultInjector:
    """Draws faults at seeded random moments for ``duration`` seconds (:meth:`run`), undoing each after its
    hold; :meth:`heal` undoes whatever is still in force."""

    targets: Targets
    rng: random.Random
    kinds: Sequence[str]
    mean_gap: float = 4.0
    events: list[Event] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    _undo: list[tuple[float, int, str, Callable[[], None]]] = field(default_factory=list)
    _seq: int = 0
    _down: set[str] = field(default_factory=set)  # replicas / "writer" killed and not yet restarted
    _blocked: set[str] = field(default_factory=set)
    _stopped: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    #: Why the injection stopped before its time (an exception in a fault): the trial then proved less than
    #: it claims, and fails.
    error: str | None = None

    def run(self, duration: float, stop: threading.Event) -> None:
        try:
            self._run(duration, stop)
        except Exception as e:
            self.error = f"the fault injection broke: {type(e).__name__}: {e}"
            self.heal()

    def _run(self, duration: float, stop: threading.Event) -> None:
        started = time.monotonic()
        next_fault = self.rng.uniform(1.0, 2 * self.mean_gap)
        while not stop.is_set():
            now = time.monotonic() - started
            if now >= duration:
                break
            due = min(next_fault, self._undo[0][0] if self._undo else duration, duration)
            if due > now:
                stop.wait(due - now)
                continue
            while self._undo and self._undo[0][0] <= now:
                _, _, what, undo = heapq.heappop(self._undo)
                self._safely(what, undo)
            if next_fault <= now:
                self._inject(now)
                next_fault = now + self.rng.uniform(0.5, 2 * self.mean_gap)
        self._wait_out_stops(started, stop)
        self.heal()

    def _wait_out_stops(self, started: float, stop: threading.Event) -> None:
        """A stop drawn near the end still lasts its whole hold (one cut short at the end would not outlast
        the session it is there to outlast); everything else drawn before it is undone on time meanwhile."""
        while self._stopped and self._undo and not stop.is_set():
            at = self._undo[0][0]
            now = time.monotonic() - started
            if at > now:
                stop.wait(at - now)
                continue
            _, _, what, undo = heapq.heappop(self._undo)
            self._safely(what, undo)

    def heal(self) -> None:
        """Undo every fault in force (restart what is down, unblock, free the disk, heal the store)."""
        while self._undo:
            _, _, what, undo = heapq.heappop(self._undo)
            self._safely(what, undo)

    def _safely(self, what: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as e:  # the trial judges the outcome; an undo that failed is reported, not fatal
            logger.error("chaos: %s failed: %s: %s", what, type(e).__name__, e)
            self.events.append(Event(-1.0, "error", what, f"{type(e).__name__}: {e}"))

    def _later(self, at: float, what: str, undo: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._undo, (at, self._seq, what, undo))

    def _inject(self, now: float) -> None:
        t = self.targets
        live = [r for r in t.replicas if r not in self._down]
        choices = [k for k in self.kinds if not (k == "kill_writer" and "writer" in self._down)]
        if not live:
            choices = [k for k in choices if k in ("kill_writer", "disk_full", "store_errors")]
        if "disk_full" in choices and (t.disk is None or "disk" in self._blocked):
            choices.remove("disk_full")
        if "store_errors" in choices and (t.store is None or "store" in self._blocked):
            choices.remove("store_errors")
        stoppable = [d for d in t.stoppable if d not in self._down and d not in self._stopped]
        # One daemon frozen at a time: with two, both could be frozen past their sessions at once.
        if "stop_replica" in choices and (t.stop is None or not stoppable or self._stopped):
            choices.remove("stop_replica")
        if "stall" in choices and (t.stall is None or not live or self._stopped):
            choices.remove("stall")
        if "oneoff" in choices and t.oneoff is None:
            choices.remove("oneoff")
        if "cancel" in choices and (t.cancel is None or "cancel" in self._blocked):
            choices.remove("cancel")
        if not choices:
            return
        kind = self.rng.choices(choices, weights=[WEIGHTS[k] for k in choices])[0]
        if kind == "kill_replica":
            name = self.rng.choice(live)
            t.kill_replica(name)
            self._down.add(name)
            self._later(now + self.rng.uniform(1.0, 5.0), f"restart {name}", lambda: self._restart(name))
            self._note(now, kind, name)
        elif kind == "kill_writer":
            t.kill_writer()
            self._down.add("writer")
            self._later(now + self.rng.uniform(0.5, 3.0), "restart writer", lambda: self._restart("writer"))
            self._note(now, kind, "writer")
        elif kind == "zk_cut":
            name = self.rng.choice(live)
            t.zk_cut(name)
            self._note(now, kind, name)
        elif kind == "zk_partition":
            name = self.rng.choice([r for r in live if r not in self._blocked] or live)
            hold = t.session_timeout + self.rng.uniform(1.0, 5.0)
            t.zk_block(name)
            self._blocked.add(name)
            self._later(now + hold, f"unblock {name}", lambda: self._unblock(name))
            self._note(now, kind, name, f"{hold:.1f} s")
        elif kind == "disk_full":
            assert t.disk is not None
            disk = t.disk
            filled = disk.fill()
            self._blocked.add("disk")
            hold = self.rng.uniform(2.0, 8.0)
            self._later(now + hold, "free the disk", lambda: self._free(disk))
            self._note(now, kind, "disk", f"{filled >> 20} MiB for {hold:.1f} s")
        elif kind == "store_errors":
            assert t.store is not None
            store = t.store
            rate = self.rng.choice((0.2, 0.4, 0.7, 1.0))
            hold = self.rng.uniform(2.0, 10.0)
            store.fail(rate, hold)
            self._blocked.add("store")
            self._later(now + hold, "heal the store", lambda: self._heal_store(store))
            self._note(now, kind, "store", f"{rate:.0%} of requests for {hold:.1f} s")
        elif kind == "stop_replica":
            assert t.stop is not None
            name = self.rng.choice(stoppable)
            hold = t.stop_floor + self.rng.uniform(1.0, 6.0)
            stopped = t.stop(name)
            self._stopped.add(name)
            self._later(now + hold, f"continue {name}", lambda: self._continue(name, stopped))
            self._note(now, kind, name, f"{hold:.1f} s")
        elif kind == "stall":
            assert t.stall is not None
            what = self.rng.choices(STALL_KINDS, weights=[STALL_WEIGHTS[k] for k in STALL_KINDS])[0]
            hold = t.stop_floor + self.rng.uniform(1.0, 6.0)
            # Completions come every 20-30 s once the first plans ran (none in a trial's first seconds):
            # a commit stall waits longer for one (in 14 trials, four armed with 10-30 s windows all missed).
            window = self.rng.uniform(25.0, 45.0) if what == "commit" else self.rng.uniform(10.0, 30.0)
            armed = t.stall(what, hold, window)
            # A daemon may be frozen (one at a time) until the window and a hold begun at its end are over.
            self._stopped.add("stall")
            self._later(now + window + hold + 1.0, "end the stall", self._unstall)
            self._note(now, kind, "replicas", f"{what} {armed}")
        elif kind == "oneoff":
            assert t.oneoff is not None
            order = OneOffOrder(take_over=self.rng.random() < 0.35, draw=self.rng.randrange(1 << 30))
            self._note(now, kind, "operator", t.oneoff(order))
        elif kind == "cancel":
            assert t.cancel is not None
            cancelled = t.cancel()
            if cancelled is None:
                return  # nothing running to cancel: not a fault
            self._blocked.add("cancel")
            hold = self.rng.uniform(2.0, 6.0)
            self._later(now + hold, f"retry {cancelled}", lambda: self._retry(cancelled))
            self._note(now, kind, "operator", f"{cancelled}, retried after {hold:.1f} s")

    def _note(self, now: float, kind: str, target: str, detail: str = "") -> None:
        self.counts[kind] += 1
        self.events.append(Event(round(now, 2), kind, target, detail))
        logger.info("chaos %6.1f s: %s %s %s", now, kind, target, detail)

    def _restart(self, name: str) -> None:
        self._down.discard(name)
        if name == "writer":
            self.targets.restart_writer()
        else:
            self.targets.restart_replica(name)

    def _unblock(self, name: str) -> None:
        self._blocked.discard(name)
        self.targets.zk_unblock(name)

    def _free(self, disk: Tmpfs) -> None:
        self._blocked.discard("disk")
        disk.free()

    def _heal_store(self, store: StoreFaults) -> None:
        self._blocked.discard("store")
        store.heal()

    def _continue(self, name: str, stopped: object) -> None:
        self._stopped.discard(name)
        assert self.targets.resume is not None
        self.targets.resume(stopped)

    def _unstall(self) -> None:
        self._stopped.discard("stall")
        assert self.targets.unstall is not None
        self.targets.unstall()

    def _retry(self, cancelled: object) -> None:
        self._blocked.discard("cancel")
        assert self.targets.retry is not None
        self.targets.retry(cancelled)


__all__ = ["KINDS", "Event", "FaultInjector", "OneOffOrder", "StoreFaults", "Targets", "Tmpfs"]
