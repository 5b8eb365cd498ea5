"""Is the daemon alive, is it ready: pure functions of its recorded :class:`Heartbeats` and a given ``now``,
and the small HTTP server that answers them with the metrics.

- **Alive** while the supervisor loop beats: a poll started, or a table of a poll was polled, within the
  liveness window (``max(3 * poll_interval, 60)`` seconds), or, before the first poll, the daemon started
  within it. A long first poll of a large fleet beats with every table; a stuck loop does not beat and should
  be restarted.
- **Ready** when alive, not draining after SIGTERM, Spark up, ZooKeeper CONNECTED (or no ZooKeeper at all)
  and at least one poll has succeeded. A daemon that is not ready should get no new work routed to it.

:class:`HealthServer` serves ``GET /metrics`` (Prometheus text), ``/healthz`` and ``/readyz`` (200 or 503 with
the :class:`HealthReport` as JSON), ``/status`` (JSON of whatever the daemon reports for the tables the query
string selects, :class:`~hoodied.status.StatusQuery`, credentials in URIs redacted:
:func:`hoodie.storage.redact.dumps_redacted`), and, given an :class:`~hoodied.api.Api`, the status
page ``GET /`` and the API ``/api/v1`` (``POST`` too) on the configured ``metrics.host`` (every interface by
default, as a pod's probes and Prometheus need; the class itself defaults to loopback). Anyone who reaches
the port can talk to it, so it is built to face a hostile network.

**The server is waitress** (a maintained, pure-Python WSGI server), not the standard library's
``http.server``, whose documentation does not recommend it for production and which needed a thread per
connection: a client that trickled its request held that thread. Waitress reads every connection on one
thread, asynchronously, and hands a request to its pool of worker threads only once the request is whole, so
a slow client holds a socket, never a thread. It also bounds the request: line and headers at most
:data:`MAX_REQUEST_BYTES` (else 431), a body at most :data:`MAX_BODY_BYTES` (else 413).

What waitress lacks, and this module adds:

- **One deadline for the whole request.** Waitress's ``channel_timeout`` counts from the last byte received,
  so a client sending a byte every few seconds is never cut. Here a connection has ``read_timeout`` seconds
  from its accept to deliver its whole request (line, headers and body). The server's loop sleeps until the
  earliest deadline of the connections it reads (never longer than :data:`MAX_TICK`, or a tenth of
  ``read_timeout`` when that is shorter) and closes every connection past its deadline, whatever it has sent
  meanwhile: no read waits past the deadline, since waitress never waits on a read. Once the answer is
  ready, the client has ``read_timeout`` again to take it (a client that does not read its answer is cut
  too). One request per connection (``Connection: close``), as before.
- **Probes before anything else.** ``GET /healthz`` and ``/readyz`` run on :data:`PROBE_THREADS` threads of
  their own, never queued behind slow requests (the page or ``/status`` of a large fleet). At most
  ``max_connections`` connections are open at once for any request; beyond them :data:`PROBE_CONNECTIONS`
  more are accepted for probes only: such a connection has :data:`PROBE_DEADLINE` seconds to send its
  request; a probe is answered, anything else gets 503 at once. A slow-drip client that takes every
  connection therefore fails neither probe (the kubelet sends its request at once); one that fills the
  probe connections too holds each one :data:`PROBE_DEADLINE` seconds at most, and a probe waits in the
  listen backlog meanwhile, not longer. Waitress's own ``connection_limit`` is not used: it only stops
  accepting.

Request paths are written to the logs escaped (``repr``), never raw: a percent-encoded newline in a path must
not start a forged log line.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self, cast

from prometheus_client import CONTENT_TYPE_LATEST
from waitress import wasyncore
from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer
from waitress.task import ThreadedTaskDispatcher, WSGITask

from hoodie.storage.redact import dumps_redacted, redact_uris
from hoodied.metrics import Metrics
from hoodied.status import StatusQuery

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

    from hoodied.api import Api

logger = logging.getLogger(__name__)

#: The shortest liveness window, seconds: a short poll interval must not make a slow poll look dead.
MIN_LIVENESS_WINDOW = 60.0

_JSON = "application/json"

#: The most bytes a request's line and headers may take (nothing here needs more than a few hundred).
MAX_REQUEST_BYTES = 16 * 1024
#: The most bytes of a POST body. The API's commands are a few hundred; Hudi's commit callback
#: (:mod:`hoodied.commit_callback`) carries the commit's write stats, about 600 bytes a file written, so 4 MiB
#: holds some 6,000. A larger callback is refused (413, which Hudi's writer logs and ignores) and the table's
#: next sweep finds the commit.
MAX_BODY_BYTES = 4 * 1024 * 1024
#: Seconds a connection has to send its whole request (and, once answered, to take the answer).
DEFAULT_READ_TIMEOUT = 10.0
#: Connections open at once for any request; more are accepted for probes only.
DEFAULT_MAX_CONNECTIONS = 32
#: Connections accepted beyond ``max_connections``, for probes only.
PROBE_CONNECTIONS: Final = 8
#: Seconds such a connection has to send its probe (a probe sends its request as soon as it connects).
PROBE_DEADLINE: Final = 1.0
#: The paths answered on the probes' own threads, and on the probes' connections.
PROBE_PATHS: Final = frozenset({"/healthz", "/readyz"})
#: Threads answering the probes (and the 503s of the probes' connections): each answer takes microseconds.
PROBE_THREADS: Final = 2
#: Threads answering every other request (the page and the API read storage).
WORKER_THREADS: Final = 4
#: The longest the server's loop sleeps between looks at the deadlines, seconds.
MAX_TICK: Final = 1.0

#: The WSGI environment's key saying the request came on a probes' connection.
_PROBE_CONNECTION: Final = "hoodied.probe_connection"


@dataclass
class Heartbeats:
    """What the supervisor records as it runs (Unix times in seconds). Each field is written on its own by
    one thread and read by the health server's; no invariant spans two fields, so no lock is needed."""

    started_at: float
    last_poll_started: float | None = None
    #: The last table a poll finished (a poll over thousands of tables beats as it goes).
    last_table_polled: float | None = None
    last_poll_succeeded: float | None = None
    last_error: str | None = None
    #: kazoo's connection state (``CONNECTED``, ``SUSPENDED``, ``LOST``) or ``CLOSED``; None = no ZooKeeper.
    zookeeper_state: str | None = None
    spark_up: bool = False
    #: SIGTERM received: finishing running jobs, starting no new ones.
    draining: bool = False


@dataclass(frozen=True)
class HealthReport:
    """The answer of a health check: ``ok``, or the reasons why not (empty when ok)."""

    ok: bool
    reasons: tuple[str, ...] = ()

    def to_json(self) -> str:
        return json.dumps({"ok": self.ok, "reasons": list(self.reasons)})


def liveness_window(poll_interval: float) -> float:
    """Seconds without a poll starting after which the daemon is not alive."""
    return max(3.0 * poll_interval, MIN_LIVENESS_WINDOW)


def liveness(beats: Heartbeats, now: float, poll_interval: float) -> HealthReport:
    """Alive while the supervisor loop beats (see the module docstring)."""
    window = liveness_window(poll_interval)
    beats_seen = [b for b in (beats.last_poll_started, beats.last_table_polled) if b is not None]
    if beats_seen:
        since = now - max(beats_seen)
        if since > window:
            return HealthReport(
                False, (f"no poll started nor table polled for {since:.0f} s (limit {window:.0f} s)",)
            )
    else:
        since = now - beats.started_at
        if since > window:
            return HealthReport(
                False, (f"no poll started since the daemon started {since:.0f} s ago (limit {window:.0f} s)",)
            )
    return HealthReport(True)


def readiness(beats: Heartbeats, now: float, poll_interval: float) -> HealthReport:
    """Ready for work (see the module docstring); every reason it is not is listed."""
    reasons = [f"not alive: {r}" for r in liveness(beats, now, poll_interval).reasons]
    if beats.draining:
        reasons.append("draining: shutting down")
    if not beats.spark_up:
        reasons.append("Spark is not up")
    if beats.zookeeper_state is not None and beats.zookeeper_state.upper() != "CONNECTED":
        reasons.append(f"ZooKeeper is {beats.zookeeper_state}, not CONNECTED")
    if beats.last_poll_succeeded is None:
        reason = "no poll has succeeded yet"
        if beats.last_error:
            reason += f" (last error: {beats.last_error})"
        reasons.append(reason)
    return HealthReport(not reasons, tuple(reasons))


def _printable(text: str) -> str:
    """``text`` for a log line: control characters (a newline, an escape sequence) escaped as repr does."""
    return text if text.isprintable() else repr(text)[1:-1]


class _Task(WSGITask):
    """Waitress's task for one request, closing the connection after its answer and telling the application
    whether the request came on a probes' connection."""

    def execute(self) -> None:
        self.set_close_on_finish()  # one request per connection: the deadline counts from the accept
        super().execute()

    def get_environment(self) -> WSGIEnvironment:
        environ = super().get_environment()
        environ[_PROBE_CONNECTION] = cast(_Channel, self.channel).for_probes
        return environ


class _Channel(HTTPChannel):
    """Waitress's connection, with the clock of its deadline.

    ``since`` is when the connection began to wait for the client (its accept; once answered, when the
    answer was ready); ``serving`` is true from its request's completion until its answer is ready, the
    time the server, not the client, takes. Both are written by a worker thread only while the loop leaves
    the connection alone (``serving``), and ``since`` before ``serving`` is cleared."""

    task_class = _Task

    def __init__(self, server: _Server, sock: Any, addr: Any, adj: Adjustments, map: Any = None) -> None:
        self.since = time.monotonic()
        self.serving = False
        #: Accepted beyond ``max_connections``: for a probe only, within :data:`PROBE_DEADLINE`.
        self.for_probes = server.full()
        self.deadline = min(PROBE_DEADLINE, server.read_timeout) if self.for_probes else server.read_timeout
        super().__init__(server, sock, addr, adj, map)
        server.channels.add(self)

    def del_channel(self, map: Any = None) -> None:
        cast(_Server, self.server).channels.discard(self)
        super().del_channel(map)

    def service(self) -> None:
        try:
            super().service()
        finally:
            self.since = time.monotonic()
            self.serving = False


class _Server(TcpWSGIServer):
    """Waitress's listening socket with the deadline sweep, the probes' connections and their own threads;
    every method but :meth:`service`'s callers runs on the loop's thread."""

    channel_class = _Channel

    def __init__(self, owner: HealthServer, socket_map: dict[int, Any]) -> None:
        """Bind (OSError when the address is taken: nothing is left open) and start the threads."""
        self.read_timeout = owner.read_timeout
        self.max_connections = owner.max_connections
        self.channels: set[_Channel] = set()
        self.socket_map = socket_map
        self._trigger_lock = threading.Lock()
        self._closed = False
        host = f"[{owner.host}]" if ":" in owner.host else owner.host
        adjustments = Adjustments(
            listen=f"{host}:{owner.requested_port}",
            threads=WORKER_THREADS,
            ident="hoodied",
            max_request_header_size=MAX_REQUEST_BYTES,
            max_request_body_size=MAX_BODY_BYTES + 1,  # waitress refuses a body of this size or more
            log_socket_errors=False,  # a client that resets its connection is no error of ours
            asyncore_use_poll=True,  # select() stops at descriptor 1024
        )
        self.probe_dispatcher = ThreadedTaskDispatcher()
        dispatcher = ThreadedTaskDispatcher()
        try:
            super().__init__(owner.wsgi, map=socket_map, dispatcher=dispatcher, adj=adjustments)
        except BaseException:
            wasyncore.close_all(socket_map, ignore_all=True)
            raise
        self.probe_dispatcher.set_thread_count(PROBE_THREADS)
        dispatcher.set_thread_count(WORKER_THREADS)

    def full(self) -> bool:
        """Whether ``max_connections`` connections are open (a new one is then for probes only)."""
        return len(self.channels) >= self.max_connections

    def readable(self) -> bool:
        """Accept while fewer than ``max_connections`` + :data:`PROBE_CONNECTIONS` are open; more wait in the
        listen backlog. (Replaces waitress's check, with its ``connection_limit`` and ``channel_timeout``
        sweep: :meth:`sweep` does that job.)"""
        return bool(self.accepting) and len(self.channels) < self.max_connections + PROBE_CONNECTIONS

    def add_task(self, task: object) -> None:
        """Hand a whole request to a thread: a probe, an error waitress answers itself, and anything on a
        probes' connection (a 503) to the probes' threads, the rest to the workers. ``task`` is the channel,
        as waitress passes it."""
        channel = cast(_Channel, task)
        channel.serving = True
        request: Any = channel.requests[0]
        probe = request.command == "GET" and request.path in PROBE_PATHS
        if probe or channel.for_probes or request.error is not None:
            self.probe_dispatcher.add_task(cast(Any, channel))
        else:
            self.task_dispatcher.add_task(cast(Any, channel))

    def sweep(self, now: float) -> float:
        """Close every connection past its deadline (see the module docstring); returns the seconds until the
        next deadline (at most :data:`MAX_TICK`, or a tenth of ``read_timeout`` when shorter: a connection
        whose answer becomes ready on a worker thread starts a deadline the loop has not seen yet)."""
        wait = min(MAX_TICK, self.read_timeout / 10)
        for channel in list(self.channels):
            if channel.serving:
                continue
            left = channel.since + channel.deadline - now
            if left <= 0:
                logger.debug(
                    "health server: connection from %s closed at its deadline (%.1f s)",
                    channel.addr[0] if channel.addr else "?",
                    channel.deadline,
                )
                channel.handle_close()
            else:
                wait = min(wait, left)
        return wait

    def pull_trigger(self) -> None:
        """Wake the loop (a worker's answer is ready; :meth:`HealthServer.stop`), unless everything is closed:
        the pipe's descriptor may then belong to another file."""
        with self._trigger_lock:
            if not self._closed:
                super().pull_trigger()

    def close_all(self) -> None:
        """Let the threads finish what they answer (a second at most, then pending requests are dropped),
        then close every connection, the listening socket and the loop's pipe."""
        self.task_dispatcher.shutdown(timeout=1)
        self.probe_dispatcher.shutdown(timeout=1)
        with self._trigger_lock:
            self._closed = True
            wasyncore.close_all(self.socket_map, ignore_all=True)


def _no_status(query: StatusQuery) -> object:
    return {}


@dataclass(frozen=True)
class _Answer:
    status: HTTPStatus
    content_type: str
    body: bytes
    headers: Mapping[str, str] | None = None


def _json_answer(status: HTTPStatus, value: object) -> _Answer:
    return _Answer(status, _JSON, json.dumps(value).encode())


class HealthServer:
    """``/metrics``, ``/healthz``, ``/readyz`` and ``/status`` (and the API) over HTTP, served by waitress
    from a daemon thread (see the module docstring).

    ``port`` 0 binds a free port; :attr:`port` tells which once started. Use as a context manager, or call
    :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        metrics: Metrics,
        heartbeats: Heartbeats,
        poll_interval: float,
        status_fn: Callable[[StatusQuery], object] = _no_status,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        api: Api | None = None,
    ) -> None:
        """``read_timeout``: the request's deadline, seconds; ``max_connections``: connections open at once
        for any request; ``api``: the status page and ``/api/v1`` (:mod:`hoodied.api`); without, only the
        paths above."""
        if not read_timeout > 0 or max_connections < 1:
            raise ValueError(f"read_timeout={read_timeout} and max_connections={max_connections} must be > 0")
        self.metrics = metrics
        self.heartbeats = heartbeats
        self.poll_interval = poll_interval
        self.status_fn = status_fn
        self.api = api
        self.host = host
        self.requested_port = port
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    @property
    def port(self) -> int:
        """The port served on (the one bound when 0 was asked for). RuntimeError before :meth:`start`."""
        if self._server is None:
            raise RuntimeError("the health server is not started")
        return int(self._server.effective_port)  # type: ignore[attr-defined]  # missing from the stubs

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind and serve on a daemon thread. RuntimeError when already started."""
        if self._server is not None:
            raise RuntimeError("the health server is already started")
        socket_map: dict[int, Any] = {}
        server = _Server(self, socket_map)
        self._server = server
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._serve, args=(server, socket_map), name="hoodied-health", daemon=True
        )
        self._thread.start()
        logger.info("health server listening on %s", self.url)

    def stop(self) -> None:
        """Stop serving, close every connection and the socket; does nothing when not started."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.pull_trigger()  # wake the loop
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def _serve(self, server: _Server, socket_map: dict[int, Any]) -> None:
        """The loop: waitress's poll of every socket, then the deadlines; on stop, everything closed here."""
        try:
            wait = 0.0
            while not self._stopping.is_set():
                wasyncore.loop(timeout=wait, use_poll=True, map=socket_map, count=1)
                wait = server.sweep(time.monotonic())
        except Exception:
            logger.exception("health server: the loop failed; nothing is served any more")
        finally:
            server.close_all()

    # -- the application ----------------------------------------------------------------------------------

    def wsgi(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        """The WSGI application: every path of the module docstring."""
        method = str(environ.get("REQUEST_METHOD", ""))
        path = str(environ.get("PATH_INFO", ""))
        answer = self._answer(environ, method, path)
        headers = [
            *(answer.headers or {}).items(),
            ("Content-Type", answer.content_type),
            ("Content-Length", str(len(answer.body))),
            ("Cache-Control", "no-store"),
        ]
        start_response(f"{answer.status.value} {answer.status.phrase}", headers)
        logger.debug(
            '%s "%s %s %s" %d',
            environ.get("REMOTE_ADDR", "?"),
            method,
            _printable(str(environ.get("REQUEST_URI", path))),
            environ.get("SERVER_PROTOCOL", ""),
            answer.status.value,
        )
        return [answer.body]

    def _answer(self, environ: WSGIEnvironment, method: str, path: str) -> _Answer:
        if environ.get(_PROBE_CONNECTION) and not (method == "GET" and path in PROBE_PATHS):
            return _json_answer(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "too many connections"})
        try:
            if method == "GET":
                return self._get(path, str(environ.get("QUERY_STRING", "")))
            if method == "POST":
                return self._post(environ, path)
            return _Answer(
                HTTPStatus.METHOD_NOT_ALLOWED,
                _JSON,
                json.dumps({"error": f"method {_printable(method)} not allowed"}).encode(),
                {"Allow": "GET, POST"},
            )
        except Exception as e:
            logger.exception("health server: %s %s failed", method, _printable(path))
            return _json_answer(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": redact_uris(str(e))})

    def _get(self, path: str, query: str) -> _Answer:
        if self.api is not None and self.api.handles(path):
            reply = self.api.get(path, query)
            return _Answer(reply.status, reply.content_type, reply.body, reply.headers)
        if path == "/metrics":
            return _Answer(HTTPStatus.OK, CONTENT_TYPE_LATEST, self.metrics.exposition())
        if path in PROBE_PATHS:
            check = liveness if path == "/healthz" else readiness
            report = check(self.heartbeats, time.time(), self.poll_interval)
            status = HTTPStatus.OK if report.ok else HTTPStatus.SERVICE_UNAVAILABLE
            return _Answer(status, _JSON, report.to_json().encode())
        if path == "/status":
            try:
                selected = StatusQuery.parse(query)  # which tables (hoodied.status: a fleet is paged)
            except ValueError as e:
                return _json_answer(HTTPStatus.BAD_REQUEST, {"error": str(e)})
            # No indent: with one, json's pure-Python encoder runs (three times slower on a large fleet).
            body = dumps_redacted(self.status_fn(selected))
            return _Answer(HTTPStatus.OK, _JSON, body.encode())
        return _json_answer(HTTPStatus.NOT_FOUND, {"error": f"no such path: {path}"})

    def _post(self, environ: WSGIEnvironment, path: str) -> _Answer:
        if self.api is None or not self.api.handles(path):
            return _json_answer(HTTPStatus.NOT_FOUND, {"error": f"no such path: {path}"})
        data = environ["wsgi.input"].read()  # whole already: waitress completed (and capped) the body
        headers = {
            key.removeprefix("HTTP_").replace("_", "-").lower(): str(value)
            for key, value in environ.items()
            if key.startswith("HTTP_") or key in ("CONTENT_TYPE", "CONTENT_LENGTH")
        }
        reply = self.api.post(path, headers, data, str(environ.get("REMOTE_ADDR", "")))
        return _Answer(reply.status, reply.content_type, reply.body, reply.headers)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


__all__ = [
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_READ_TIMEOUT",
    "MAX_BODY_BYTES",
    "MAX_REQUEST_BYTES",
    "MIN_LIVENESS_WINDOW",
    "PROBE_CONNECTIONS",
    "PROBE_DEADLINE",
    "PROBE_PATHS",
    "PROBE_THREADS",
    "WORKER_THREADS",
    "HealthReport",
    "HealthServer",
    "Heartbeats",
    "liveness",
    "liveness_window",
    "readiness",
]
