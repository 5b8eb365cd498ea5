"""Each table's poll runs on a worker thread, a bounded number at once, each waited for up to a deadline
(:class:`TablePolls`).

A table's poll is a few requests to its store (its timeline listing; scheduling, when due, reads more). One
table on a store that answers slowly or hangs must not hold up every other table, nor make the daemon skip
whole polls. So the poll walk hands each due table to :class:`TablePolls` and waits for the round:

- At most ``bound`` polls run at once (``poll_concurrency``), started in the order the walk hands them over:
  a fleet of ten thousand object-store tables lists many timelines at a time, as a round trip each needs.
- A poll still running ``deadline`` seconds after it started has *overrun*: the walk stops waiting for it and
  a fresh worker takes its place. It is not interrupted (a request under way cannot be taken back, and what
  a poll does is right whenever it ends: scheduling writes under the table lock after re-reading): it
  finishes on its own thread, its table is not polled again until then (:meth:`TablePolls.running`), and
  the work found on the table before stays offered meanwhile. Its outcome counts in the round that sees it
  end (:meth:`TablePolls.wait`).
- The deadline is measured on the real monotonic clock from the moment a worker takes the poll up, not from
  the walk's handing over: a table queued behind others is not late.

Workers stay for the next round (``bound`` of them at most, plus one for each overrunning poll, which ends
with it), and end after :data:`IDLE_SECONDS` without a poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from hoodied.work import WatchedTable

logger = logging.getLogger(__name__)

#: Seconds the walk sleeps at most between two looks at the running polls' deadlines.
_TICK = 0.25
#: Seconds a worker without a poll waits for one before it ends (started again when a round needs it).
IDLE_SECONDS = 60.0


@dataclass
class _Poll:
    table: WatchedTable
    body: Callable[[], bool]
    started: float | None = None  # real monotonic time a worker took it up
    overran: bool = False


@dataclass
class Round:
    """What :meth:`TablePolls.wait` found: each ended poll's table and whether it succeeded (a poll that
    overran in an earlier round included), and the tables whose polls overran in this one."""

    ended: list[tuple[WatchedTable, bool]] = field(default_factory=list)
    overran: list[WatchedTable] = field(default_factory=list)


class TablePolls:
    """Runs table polls on worker threads (see the module docstring). ``on_overrun`` is called (on the
    waiting thread) once for each poll that overruns, with its table and the seconds it has run."""

    def __init__(
        self,
        bound: int,
        deadline: float,
        on_overrun: Callable[[WatchedTable, float], None] = lambda table, seconds: None,
    ) -> None:
        if bound < 1:
            raise ValueError(f"poll_concurrency must be at least 1, not {bound}")
        self.bound = bound
        self.deadline = deadline
        self._on_overrun = on_overrun
        self._cond = threading.Condition()
        self._queue: deque[_Poll] = deque()
        self._polls: dict[str, _Poll] = {}  # by table key: handed over and not ended
        self._ended: list[tuple[WatchedTable, bool]] = []
        self._workers = 0  # worker threads alive
        self._overrunning = 0  # of which busy with a poll that overran
        self._closed = False

    def running(self, table: WatchedTable) -> bool:
        """Whether ``table``'s poll was handed over and has not ended (queued, running or overrunning)."""
        with self._cond:
            return table.key in self._polls

    def start(self, table: WatchedTable, body: Callable[[], bool]) -> bool:
        """Hand ``table``'s poll (``body``: true when it succeeded) to a worker; False when its last poll has
        not ended yet (nothing is handed over)."""
        with self._cond:
            if table.key in self._polls or self._closed:
                return False
            poll = _Poll(table, body)
            self._polls[table.key] = poll
            self._queue.append(poll)
            self._staff()
            self._cond.notify_all()
            return True

    def wait(self, *, deadline: bool = True, stopping: threading.Event | None = None) -> Round:
        """Wait until every poll handed over has ended or, with ``deadline``, overrun; a poll not taken up
        yet when ``stopping`` is set is dropped. Returns the round's ended and overrun polls."""
        overran: list[WatchedTable] = []
        with self._cond:
            while True:
                if stopping is not None and stopping.is_set():
                    for poll in self._queue:
                        del self._polls[poll.table.key]
                    self._queue.clear()
                now = time.monotonic()
                waiting = False
                for poll in list(self._polls.values()):
                    if poll.overran:
                        continue
                    if deadline and poll.started is not None and now - poll.started >= self.deadline:
                        poll.overran = True
                        self._overrunning += 1
                        overran.append(poll.table)
                        self._staff()
                        self._on_overrun(poll.table, now - poll.started)
                        continue
                    waiting = True
                if not waiting:
                    break
                self._cond.wait(timeout=_TICK)
            ended, self._ended = self._ended, []
        return Round(ended, overran)

    def join(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every poll handed over, overrunning ones included, to end (the
        daemon's shutdown: a poll may be scheduling under the table lock). True when none is left."""
        until = time.monotonic() + timeout
        with self._cond:
            while self._polls:
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(timeout=min(left, _TICK))
            return True

    def close(self) -> None:
        """Drop the polls not taken up and let the workers end once idle."""
        with self._cond:
            self._closed = True
            for poll in self._queue:
                del self._polls[poll.table.key]
            self._queue.clear()
            self._cond.notify_all()

    def _staff(self) -> None:
        """Start workers until ``bound`` of them are free of overrunning polls or every queued poll has one
        (the caller holds the lock)."""
        active = self._workers - self._overrunning
        busy = sum(1 for p in self._polls.values() if p.started is not None and not p.overran)
        while active < self.bound and active - busy < len(self._queue):
            self._workers += 1
            active += 1
            threading.Thread(target=self._work, name="hoodied-poll", daemon=True).start()

    def _work(self) -> None:
        while True:
            with self._cond:
                idle_until = time.monotonic() + IDLE_SECONDS
                while not self._queue and not self._closed and time.monotonic() < idle_until:
                    self._cond.wait(timeout=max(0.0, idle_until - time.monotonic()))
                if not self._queue:  # closed, or idle for long
                    self._workers -= 1
                    return
                poll = self._queue.popleft()
                poll.started = time.monotonic()
            ok = False
            try:
                ok = poll.body()
            except BaseException:  # the body reports its own failures; a worker must survive anything
                logger.exception("the poll of table %s failed", poll.table.name)
            with self._cond:
                del self._polls[poll.table.key]
                self._ended.append((poll.table, ok))
                if poll.overran:
                    self._overrunning -= 1
                    if self._workers - self._overrunning > self.bound:  # its stand-in stays instead
                        self._workers -= 1
                        self._cond.notify_all()
                        return
                self._cond.notify_all()


__all__ = ["IDLE_SECONDS", "Round", "TablePolls"]
