"""Is the daemon alive, is it ready: pure functions of its recorded :class:`Heartbeats` and a given ``now``,
and the small HTTP server that answers them with the metrics.

- **Alive** while the supervisor loop beats: a poll started, or a table of a poll was polled, within the
  liveness window (``max(3 * poll_interval, 60)`` seconds), or, before the first poll, the daemon started
  within it. A long first poll of a large fleet beats with every table; a stuck loop does not beat and should
  be restarted.
- **Ready** when alive, not draining after SIGTERM, Spark up, ZooKeeper CONNECTED (or no ZooKeeper at all)
  and at least one poll has succeeded. A daemon that is not ready should get no new work routed to it.

:class:`HealthServer` serves ``GET /metrics`` (Prometheus text), ``/healthz`` and ``/readyz`` (200 or 503 with
the :class:`HealthReport` as JSON), ``/status`` (JSON of whatever the daemon reports), and, given an
:class:`~hoodied.api.Api`, the status page ``GET /`` and the API ``/api/v1`` (``POST`` too) on the configured
``metrics.host`` (every interface by default, as a pod's probes and Prometheus need; the class itself
defaults to loopback). It is built to face a hostile network:

- one request per connection (HTTP/1.0), its request line and headers read within ``read_timeout``
  seconds in all (each read waits at most that long too): a client that connects and sends nothing, or
  trickles bytes, is cut off instead of holding a thread;
- at most ``max_connections`` connections served at once; one more is answered 503 at once and closed,
  without a thread;
- a request line and headers of at most :data:`MAX_REQUEST_BYTES`; bigger is answered 431 and closed; a
  request body (``POST``) of at most 8 KiB, else 413.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST

from hoodied.metrics import Metrics

if TYPE_CHECKING:
    from hoodied.api import Api, Reply

logger = logging.getLogger(__name__)

#: The shortest liveness window, seconds: a short poll interval must not make a slow poll look dead.
MIN_LIVENESS_WINDOW = 60.0

_JSON = "application/json"

#: The most bytes a request's line and headers may take (nothing here needs more than a few hundred).
MAX_REQUEST_BYTES = 16 * 1024
#: Seconds a connection has to send its whole request (and the most any one read may wait).
DEFAULT_READ_TIMEOUT = 10.0
#: Connections served at once; more are refused with 503.
DEFAULT_MAX_CONNECTIONS = 32
#: The most bytes of a POST body (the API's commands are a few hundred).
_MAX_BODY_BYTES = 8 * 1024


class _RequestTooLarge(Exception):
    pass


class _CappedReader:
    """The connection's reader, bounded in bytes and in time for one request's line and headers."""

    def __init__(self, inner: Any, limit: int, deadline: float) -> None:
        self._inner = inner
        self._left = limit
        self._deadline = deadline

    def _check(self, data: bytes) -> bytes:
        self._left -= len(data)
        if self._left < 0:
            raise _RequestTooLarge()
        if time.monotonic() > self._deadline:
            raise TimeoutError("the request took too long to arrive")
        return data

    def readline(self, limit: int = -1) -> bytes:
        cap = self._left + 1 if limit < 0 else min(limit, self._left + 1)
        return self._check(self._inner.readline(cap))

    def read(self, n: int = -1) -> bytes:
        cap = self._left + 1 if n < 0 else min(n, self._left + 1)
        return self._check(self._inner.read(cap))

    def close(self) -> None:
        self._inner.close()


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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 64

    def __init__(self, address: tuple[str, int], app: HealthServer) -> None:
        self.app = app
        self._slots = threading.BoundedSemaphore(app.max_connections)
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve on a thread of its own while a slot is free; else answer 503 here, at once, and close."""
        if not self._slots.acquire(blocking=False):
            try:
                request.settimeout(1.0)
                request.sendall(
                    b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\n\r\n"
                    b'{"error": "too many connections"}'
                )
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def handle_error(self, request: Any, client_address: Any) -> None:
        logger.debug("health server: a connection from %s failed", client_address, exc_info=True)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "hoodied"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.app.read_timeout)  # each read of the socket
        deadline = time.monotonic() + self.server.app.read_timeout
        self.rfile = _CappedReader(self.rfile, MAX_REQUEST_BYTES, deadline)  # type: ignore[assignment]

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except _RequestTooLarge:
            self.close_connection = True
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "request line and headers too large")
        except TimeoutError:
            self.close_connection = True

    def do_GET(self) -> None:
        app = self.server.app
        url = urlsplit(self.path)
        path = url.path
        try:
            if app.api is not None and app.api.handles(path):
                self._send(app.api.get(path, url.query))
            elif path == "/metrics":
                self._reply(HTTPStatus.OK, CONTENT_TYPE_LATEST, app.metrics.exposition())
            elif path in ("/healthz", "/readyz"):
                check = liveness if path == "/healthz" else readiness
                report = check(app.heartbeats, time.time(), app.poll_interval)
                status = HTTPStatus.OK if report.ok else HTTPStatus.SERVICE_UNAVAILABLE
                self._reply(status, _JSON, report.to_json().encode())
            elif path == "/status":
                body = json.dumps(app.status_fn(), default=str, indent=2)
                self._reply(HTTPStatus.OK, _JSON, body.encode())
            else:
                body = json.dumps({"error": f"no such path: {path}"})
                self._reply(HTTPStatus.NOT_FOUND, _JSON, body.encode())
        except Exception as e:
            logger.exception("health server: GET %s failed", path)
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, _JSON, json.dumps({"error": str(e)}).encode())

    def do_POST(self) -> None:
        app = self.server.app
        url = urlsplit(self.path)
        try:
            if app.api is None or not app.api.handles(url.path):
                body = json.dumps({"error": f"no such path: {url.path}"})
                self._reply(HTTPStatus.NOT_FOUND, _JSON, body.encode())
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if not 0 <= length <= _MAX_BODY_BYTES:
                self.close_connection = True
                body = json.dumps(
                    {"error": f"a body of at most {_MAX_BODY_BYTES} bytes, with Content-Length"}
                )
                self._reply(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, _JSON, body.encode())
                return
            data = self.rfile.read(length) if length else b""
            headers = {k.lower(): v for k, v in self.headers.items()}
            self._send(app.api.post(url.path, headers, data, self.client_address[0]))
        except (_RequestTooLarge, TimeoutError):
            raise
        except Exception as e:
            logger.exception("health server: POST %s failed", url.path)
            self._reply(HTTPStatus.INTERNAL_SERVER_ERROR, _JSON, json.dumps({"error": str(e)}).encode())

    def _send(self, reply: Reply) -> None:
        self._reply(reply.status, reply.content_type, reply.body, reply.headers)

    def _reply(
        self, status: HTTPStatus, content_type: str, body: bytes, headers: Mapping[str, str] | None = None
    ) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)


def _no_status() -> object:
    return {}


class HealthServer:
    """``/metrics``, ``/healthz``, ``/readyz`` and ``/status`` over HTTP, served from a daemon thread.

    ``port`` 0 binds a free port; :attr:`port` tells which once started. Use as a context manager, or call
    :meth:`start` and :meth:`stop`."""

    def __init__(
        self,
        metrics: Metrics,
        heartbeats: Heartbeats,
        poll_interval: float,
        status_fn: Callable[[], object] = _no_status,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        api: Api | None = None,
    ) -> None:
        """``api``: the status page and ``/api/v1`` (:mod:`hoodied.api`); without, only the paths above."""
        if read_timeout <= 0 or max_connections < 1:
            raise ValueError(f"read_timeout={read_timeout} and max_connections={max_connections} must be > 0")
        self.metrics = metrics
        self.heartbeats = heartbeats
        self.poll_interval = poll_interval
        self.status_fn = status_fn
        self.api = api
        self.host = host
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self._port = port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The port served on (the one bound when 0 was asked for). RuntimeError before :meth:`start`."""
        if self._server is None:
            raise RuntimeError("the health server is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port`` of the running server."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def start(self) -> None:
        """Bind and serve on a daemon thread. RuntimeError when already started."""
        if self._server is not None:
            raise RuntimeError("the health server is already started")
        server = _Server((self.host, self._port), self)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="hoodied-health", daemon=True
        )
        self._thread.start()
        logger.info("health server listening on %s", self.url)

    def stop(self) -> None:
        """Stop serving and close the socket; does nothing when not started."""
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = self._thread = None
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join()

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
    "MAX_REQUEST_BYTES",
    "MIN_LIVENESS_WINDOW",
    "HealthReport",
    "HealthServer",
    "Heartbeats",
    "liveness",
    "liveness_window",
    "readiness",
]
