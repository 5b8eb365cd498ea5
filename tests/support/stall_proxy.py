"""A stalling proxy in front of the S3 test server: a process stopped at a chosen request, its request held
past the process's leases, then sent late (issue 33).

A lease (a ZooKeeper session, a storage-based lock's expiry, an instant's heartbeat, a claim) only says who
should write. A process paused by a long GC or a frozen VM, or whose request sat in the network, can wake
after its lease passed to someone else and still send the write it had prepared. :class:`StallProxy` makes
that happen at a chosen step: it stands in front of the store for one process (point that process's
``AWS_ENDPOINT_URL`` at :attr:`~support.s3_faults.FaultProxy.endpoint`), forwards every request, and once
:meth:`StallProxy.arm` chose a kind, the first request of that kind

1. stops the sending process's whole process group (``pause``: SIGSTOP; its JVM and Python workers too, so
   its heartbeats and ZooKeeper pings stop as well),
2. is held ``hold`` seconds (longer than the leases, chosen by the caller),
3. continues the process (``resume``: SIGCONT), then is forwarded, and its response returned.

Kinds of request (:data:`STALL_KINDS`, :func:`kind_of`):

- ``commit``: a PUT of a completed timeline file (``T.commit``, ``T_C.deltacommit``, ``T_C.replacecommit``,
  ``T_C.clean``, ``T_C.rollback``, ``T_C.indexing``), or of a completion decision
  (:mod:`hoodie.write.decision`: the write that decides a completion, right before the metadata table's and
  the timeline's);
- ``metadata``: a PUT of the metadata table's completed deltacommit (a decided completion's, written between
  its decision and its completed file: the decision's PUT comes first, so ``commit`` never reaches it);
- ``plan``: a PUT of a ``.requested`` file (a compaction, log compaction or clustering plan, a clean's, a
  rollback's);
- ``manifest``: a PUT under the history (``archived/``, ``timeline/history/``) of a manifest, the
  ``_version_`` pointer or an archive log file;
- ``base``: a PUT of a data table's base file (``.parquet`` outside ``.hoodie``);
- ``delete``: a DELETE (one object) or a POST ``?delete`` (a batch of them).

It is a :class:`~support.s3_faults.FaultProxy` too (its faults apply to what it forwards); chained in front
of the campaign's shared fault proxy, the store's errors still reach the stalled process.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from support.s3_faults import CONTROL_PATH, FaultProxy, _Handler, _Server

STALL_KINDS = ("commit", "metadata", "plan", "manifest", "base", "delete")

_PUT_KINDS = (
    ("metadata", re.compile(r"/\.hoodie/metadata/\.hoodie/(timeline/)?\d{17}(_\d{17})?\.deltacommit(\?|$)")),
    (
        "commit",
        re.compile(r"/\d{17}(_\d{17})?\.(commit|deltacommit|replacecommit|clean|rollback|indexing)(\?|$)"),
    ),
    ("commit", re.compile(r"/\.hoodie/\.aux/hoodied/decisions/\d{17}/\d+\.json(\?|$)")),
    ("plan", re.compile(r"\.requested(\?|$)")),
    ("manifest", re.compile(r"/(archived|history)/(manifest|_version_|\.commits_\.archive)")),
    ("base", re.compile(r"^(?!.*/\.hoodie/)[^?]*\.parquet(\?|$)")),
)


def kind_of(method: str, path: str) -> str | None:
    """The stall kind of a request (its method, and its path with the query), or ``None``."""
    if method == "DELETE" or (method == "POST" and re.search(r"[?&]delete(=|&|$)", path)):
        return "delete"
    if method != "PUT":
        return None
    for kind, pattern in _PUT_KINDS:
        if pattern.search(path):
            return kind
    return None


@dataclass
class Held:
    """One request a stall held: what it was, how long, and what the store answered once it was sent
    (``None``: no answer reached the client, the process was killed meanwhile and its connection went)."""

    kind: str
    method: str
    path: str
    seconds: float = 0.0
    status: int | None = None
    error: str = ""


class StallProxy(FaultProxy):
    """The proxy (see the module doc). ``pause()`` stops the process behind the proxy and returns what
    ``resume`` needs to continue that very process (``None``: nothing to stop, e.g. it is being restarted);
    both run in the proxy's request thread."""

    def __init__(
        self,
        upstream: str,
        *,
        pause: Callable[[], object | None],
        resume: Callable[[object], None],
    ) -> None:
        super().__init__(upstream)
        self._pause = pause
        self._resume = resume
        self._armed: tuple[str, float, float] | None = None  # kind, hold, until (monotonic)
        self._claim: Callable[[], bool] | None = None
        self._release = threading.Event()
        self.held: list[Held] = []

    def start(self) -> StallProxy:
        handler = type("_BoundStallHandler", (_StallHandler,), {"proxy": self})
        server = _Server(("127.0.0.1", 0), handler)
        self._server = server
        self.port = int(server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=server.serve_forever, name="s3-stall", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.disarm()
        super().stop()

    def arm(self, kind: str, hold: float, window: float, *, claim: Callable[[], bool] | None = None) -> None:
        """Stall the first request of ``kind`` arriving within ``window`` seconds, for ``hold`` seconds.
        ``claim`` (when given) is asked once such a request arrived: False means another proxy armed with
        it struck first, and this one disarms instead (one stall among several proxies)."""
        if kind not in STALL_KINDS:
            raise ValueError(f"stall kind {kind!r}: one of {', '.join(STALL_KINDS)}")
        with self._lock:
            self._armed = (kind, hold, time.monotonic() + window)
            self._claim = claim
            self._release.clear()

    def disarm(self) -> None:
        """No more stalls; a request held now is sent at once (its process continued first)."""
        with self._lock:
            self._armed = None
            self._release.set()

    def stalled(self) -> Counter[str]:
        """Stalls that struck, by kind."""
        with self._lock:
            return Counter(h.kind for h in self.held)

    def _take(self, method: str, path: str) -> tuple[Held, float] | None:
        """The stall this request strikes (disarming it), with its hold; or ``None``."""
        with self._lock:
            if self._armed is None:
                return None
            kind, hold, until = self._armed
            if time.monotonic() > until:
                self._armed = None
                return None
            if kind_of(method, path) != kind:
                return None
            self._armed = None
            if self._claim is not None and not self._claim():
                return None
            held = Held(kind, method, urlsplit(path).path)
            self.held.append(held)
            return held, hold

    def _hold(self, held: Held, hold: float) -> None:
        """Stop the process, hold, continue it."""
        started = time.monotonic()
        stopped = self._pause()
        try:
            self._release.wait(hold)
        finally:
            if stopped is not None:
                self._resume(stopped)
            held.seconds = time.monotonic() - started


class _StallHandler(_Handler):
    proxy: StallProxy
    _held: Held | None = None  # the held request being answered

    def send_response_only(self, code: int, message: str | None = None) -> None:
        if self._held is not None:
            self._held.status = code  # before the client can see it
        super().send_response_only(code, message)

    def _serve(self) -> None:
        if urlsplit(self.path).path != CONTROL_PATH:
            taken = self.proxy._take(self.command, self.path)
            if taken is not None:
                held, hold = taken
                body = self._read_body()
                self.proxy._hold(held, hold)
                self._held = held
                try:
                    self._forward(self.command, body, None)
                except OSError as e:  # the client went (killed while stopped): the write was still sent
                    held.error = f"{type(e).__name__}: {e}"
                    self.close_connection = True
                finally:
                    self._held = None
                return
        super()._serve()


def stop_group(pid: int | None, signal_number: int) -> bool:
    """Send a signal to process group ``pid``; False when it is gone (or ``pid`` is None)."""
    if pid is None:
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal_number)
        return True
    return False


__all__ = ["STALL_KINDS", "Held", "StallProxy", "kind_of", "stop_group"]
