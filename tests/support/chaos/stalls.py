"""The ``stall`` fault of a chaos trial (issue 33): a replica stopped at a chosen request, held past its
leases, then continued, so that the request it had prepared is sent late.

A lease (the replica's ZooKeeper session, its table lock, an instant's heartbeat, a claim) only says who
should write; a process that paused can wake after its lease passed to someone else and still send its write.
The injector (:mod:`support.chaos.faults`) arms a stall for one kind of request
(:data:`~support.stall_proxy.STALL_KINDS`: ``commit``, ``metadata``, ``plan``, ``manifest``, ``base``,
``delete``), to strike within a window; the first replica to send such a request (whichever is doing that
work: arming one chosen replica mostly missed) then has its whole process group stopped (SIGSTOP) for
``hold`` seconds (past the session timeout and the heartbeat expiry), is continued (SIGCONT), and its request
goes.

- **On S3** each replica reaches the store through a :class:`~support.stall_proxy.StallProxy` of its own
  (chained in front of the campaign's fault proxy): the stall strikes at the HTTP request itself, so the held
  request is the very write, sent late.
- **On local disk** there is no request to hold, so the stall strikes at the failpoint right before the write
  (:data:`LOCAL_POINTS`; ``HOODIE_FAILPOINTS`` ``NAME=until:GATE``, one gate file per replica and kind, open
  unless armed): the replica waits at the closed gate, the stall sees its ``failpoint NAME: waiting for GATE``
  line in the replica's log, stops it, holds, opens the gate and continues it. The write it then sends is
  the one it had prepared.

After each stall, the replica's log in the next :data:`WATCH_AFTER` seconds tells whether its stale write was
refused (:data:`REFUSED`: ``lost the race``, a voided attempt, a ``CommitConflict``, a failed precondition or
``VersionConflict``, a plan withdrawn); on S3 the held request's answer too (409 or 412: the store refused
it). :meth:`Staller.counts` gives ``stall_<kind>`` (stalls that struck), ``stall_<kind>_refused``,
``stall_<kind>_store_refused`` and ``stall_missed`` (armed, but no such request came in the window).
"""

from __future__ import annotations

import functools
import logging
import re
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from support.stall_proxy import STALL_KINDS, StallProxy, stop_group

logger = logging.getLogger(__name__)

#: The failpoints a local stall stops a replica at, by kind: each right before the write of that kind.
LOCAL_POINTS: Mapping[str, tuple[str, ...]] = {
    # After the completion's decision (the write a stale holder must lose) or after the metadata table's
    # deltacommit, before the completed file.
    "commit": (
        *(
            f"{s}.{point}"
            for s in ("compaction", "logcompaction", "clustering", "clean")
            for point in ("decided", "after_metadata_commit")
        ),
        "indexing.decided",
        "rollback.decided",
    ),
    # The metadata table's deltacommit, its log files written, before its completed file.
    "metadata": ("metadata.before_completed_file",),
    # Under the table lock, before the instant time and the requested file.
    "plan": ("schedule.under_lock",),
    "manifest": ("archival.before_history_write",),
    # In a Spark task, after its files were written and before the task reports them.
    "base": tuple(f"{s}.task_after_write" for s in ("compaction", "logcompaction", "clustering")),
    "delete": ("clean.mid_deletes",),
}
#: Seconds of a replica's log after a stall that may show its stale write refused.
WATCH_AFTER = 30.0
REFUSED = re.compile(
    r"lost the race|voided|CommitConflict|[Pp]recondition|VersionConflict|withdr|requested file is gone|"
    r"requested file deleted"
)


@dataclass
class Struck:
    """One stall that struck: which replica, what kind, and where its log stood when it was continued."""

    replica: str
    kind: str
    offset: int = 0
    end: int | None = None  # where the log stood WATCH_AFTER seconds later (None: not yet)
    store_status: int | None = None


class Staller:
    """Arms and carries out the trial's stalls. ``pid_of(name)`` is the process (group) id of replica
    ``name`` now (None while it is down); ``log_of(name)`` its log; ``upstream`` the S3 endpoint the replicas
    would reach otherwise (None for a local table: then the failpoint gates under ``work`` are used)."""

    def __init__(
        self,
        work: Path,
        replicas: tuple[str, ...],
        pid_of: Callable[[str], int | None],
        log_of: Callable[[str], Path],
        upstream: str | None,
    ) -> None:
        self.work = work
        self.pid_of = pid_of
        self.log_of = log_of
        self.struck: list[Struck] = []
        self.missed = 0
        self._guard = threading.Lock()
        self.replicas = replicas
        self._cancel = threading.Event()
        self._paused_at: dict[str, int] = {}  # where the replica's log stood when it was stopped
        self._threads: list[threading.Thread] = []
        self.proxies: dict[str, StallProxy] = {}
        self.gates = work / "stall-gates"
        if upstream is not None:
            for name in replicas:
                pause = functools.partial(self._pause, name)
                self.proxies[name] = StallProxy(upstream, pause=pause, resume=self._resume).start()
        else:
            self.gates.mkdir(parents=True, exist_ok=True)
            for name in replicas:
                for kind in STALL_KINDS:
                    self._gate(name, kind).touch()

    def env(self, name: str) -> dict[str, str]:
        """What replica ``name``'s environment needs: its proxy's endpoint (S3), or its failpoint gates
        (``HOODIE_FAILPOINTS`` entries, comma-separated, to join the replica's others)."""
        if self.proxies:
            return {"AWS_ENDPOINT_URL": self.proxies[name].endpoint} if name in self.proxies else {}
        points = [
            f"{point}=until:{self._gate(name, kind)}"
            for kind, names in LOCAL_POINTS.items()
            for point in names
        ]
        return {"HOODIE_FAILPOINTS": ",".join(points)}

    def _gate(self, name: str, kind: str) -> Path:
        return self.gates / f"{name}-{kind}"

    # -- the fault -------------------------------------------------------------------------------------------

    def arm(self, kind: str, hold: float, window: float) -> str:
        """Stall the first replica that sends a request of ``kind`` within ``window`` seconds, for ``hold``
        (whichever replica is doing that work then; the others are left alone)."""
        cancel = self._cancel = threading.Event()
        if self.proxies:
            taken = threading.Lock()
            before = {name: len(proxy.held) for name, proxy in self.proxies.items()}
            for proxy in self.proxies.values():
                proxy.arm(kind, hold, window, claim=functools.partial(taken.acquire, False))
            thread = threading.Thread(
                target=self._follow_proxies, args=(before, window + hold + 2.0, cancel), daemon=True
            )
        else:
            for name in self.replicas:
                self._gate(name, kind).unlink(missing_ok=True)
            thread = threading.Thread(
                target=self._stall_local, args=(kind, hold, window, cancel), daemon=True
            )
        self._threads.append(thread)
        thread.start()
        return f"at the next {kind} request within {window:.1f} s, for {hold:.1f} s"

    def disarm(self) -> None:
        """End the stall: disarmed, and a request held now goes at once (its replica continued first)."""
        for proxy in self.proxies.values():
            proxy.disarm()
        self._cancel.set()

    def close(self) -> None:
        self.disarm()
        for thread in self._threads:
            thread.join(10)
        for proxy in self.proxies.values():
            proxy.stop()

    def _pause(self, name: str) -> int | None:
        pid = self.pid_of(name)
        with self._guard:
            self._paused_at[name] = _size(self.log_of(name))
        logger.info("chaos: stall of %s (pid %s)", name, pid)
        return pid if stop_group(pid, signal.SIGSTOP) else None

    def _resume(self, stopped: object) -> None:
        assert isinstance(stopped, int)
        stop_group(stopped, signal.SIGCONT)

    def _follow_proxies(self, before: Mapping[str, int], patience: float, cancel: threading.Event) -> None:
        """Wait for a proxy's stall to strike and end, then note it (or that none struck)."""
        deadline = time.monotonic() + patience
        while time.monotonic() < deadline:
            for name, proxy in self.proxies.items():
                if len(proxy.held) > before[name] and proxy.held[before[name]].seconds > 0:
                    held = proxy.held[before[name]]
                    time.sleep(0.5)  # the held request's answer
                    self._note(name, held.kind, held.status)
                    return
            if cancel.is_set() and not any(len(p.held) > before[n] for n, p in self.proxies.items()):
                break
            time.sleep(0.2)
        with self._guard:
            self.missed += 1

    def _stall_local(self, kind: str, hold: float, window: float, cancel: threading.Event) -> None:
        offsets = {name: _size(self.log_of(name)) for name in self.replicas}
        deadline = time.monotonic() + window
        try:
            while time.monotonic() < deadline and not cancel.is_set():
                for name in self.replicas:
                    gate = self._gate(name, kind)
                    lines = tuple(f"failpoint {point}: waiting for {gate}" for point in LOCAL_POINTS[kind])
                    if not any(line in _read(self.log_of(name), offsets[name]) for line in lines):
                        continue
                    for other in self.replicas:  # the others go on
                        if other != name:
                            self._gate(other, kind).touch()
                    stopped = self._pause(name)
                    try:
                        cancel.wait(hold)
                    finally:
                        gate.touch()
                        if stopped is not None:
                            self._resume(stopped)
                    self._note(name, kind, None)
                    return
                time.sleep(0.2)
            with self._guard:
                self.missed += 1
        finally:
            for name in self.replicas:
                self._gate(name, kind).touch()

    def _note(self, name: str, kind: str, status: int | None) -> None:
        with self._guard:
            struck = Struck(name, kind, self._paused_at.get(name, 0), store_status=status)
            self.struck.append(struck)

        def later() -> None:
            struck.end = _size(self.log_of(name))

        timer = threading.Timer(WATCH_AFTER, later)
        timer.daemon = True
        timer.start()

    # -- what it did -----------------------------------------------------------------------------------------

    def counts(self) -> Counter[str]:
        """``stall_<kind>`` (stalls that struck), ``stall_<kind>_refused`` (the replica's log then shows a
        refused write), ``stall_<kind>_store_refused`` (the held request's answer was 409 or 412) and
        ``stall_missed``."""
        out: Counter[str] = Counter()
        with self._guard:
            struck = list(self.struck)
            out["stall_missed"] = self.missed
        for s in struck:
            out[f"stall_{s.kind}"] += 1
            log = self.log_of(s.replica)
            end = s.end if s.end is not None else _size(log)
            if REFUSED.search(_read(log, s.offset, end)):
                out[f"stall_{s.kind}_refused"] += 1
            if s.store_status in (409, 412):
                out[f"stall_{s.kind}_store_refused"] += 1
        return +out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def _read(path: Path, start: int, end: int | None = None) -> str:
    try:
        with path.open("rb") as f:
            f.seek(start)
            data = f.read() if end is None else f.read(max(0, end - start))
    except OSError:
        return ""
    return data.decode(errors="replace")


__all__ = ["LOCAL_POINTS", "REFUSED", "Staller", "Struck"]
