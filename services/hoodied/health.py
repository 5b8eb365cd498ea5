"""Is the daemon alive, is it ready: pure functions of its recorded :class:`Heartbeats` and a given ``now``,
and the small HTTP server that answers them with the metrics.

- **Alive** while the supervisor loop beats: a poll started within the liveness window
  (``max(3 * poll_interval, 60)`` seconds), or, before the first poll, the daemon started within it. A stuck
  loop is not alive and should be restarted.
- **Ready** when alive, not draining after SIGTERM, Spark up, ZooKeeper CONNECTED (or no ZooKeeper at all)
  and at least one poll has succeeded. A daemon that is not ready should get no new work routed to it.

:class:`HealthServer` serves ``GET /metrics`` (Prometheus text), ``/healthz`` and ``/readyz`` (200 or 503 with
the :class:`HealthReport` as JSON) and ``/status`` (JSON of whatever the daemon reports), on loopback by
default.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import urlsplit

from prometheus_client import CONTENT_TYPE_LATEST

from hoodied.metrics import Metrics

logger = logging.getLogger(__name__)

#: The shortest liveness window, seconds: a short poll interval must not make a slow poll look dead.
MIN_LIVENESS_WINDOW = 60.0

_JSON = "application/json"


@dataclass
class Heartbeats:
    """What the supervisor records as it runs (Unix times in seconds). Each field is written on its own by
    one thread and read by the health server's; no invariant spans two fields, so no lock is needed."""

    started_at: float
    last_poll_started: float | None = None
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
    if beats.last_poll_started is not None:
        since = now - beats.last_poll_started
        if since > window:
            return HealthReport(False, (f"no poll started for {since:.0f} s (limit {window:.0f} s)",))
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

    def __init__(self, address: tuple[str, int], app: HealthServer) -> None:
        self.app = app
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    server_version = "hoodied"

    def do_GET(self) -> None:
        app = self.server.app
        path = urlsplit(self.path).path
        try:
            if path == "/metrics":
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

    def _reply(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
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
    ) -> None:
        self.metrics = metrics
        self.heartbeats = heartbeats
        self.poll_interval = poll_interval
        self.status_fn = status_fn
        self.host = host
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
    "MIN_LIVENESS_WINDOW",
    "HealthReport",
    "HealthServer",
    "Heartbeats",
    "liveness",
    "liveness_window",
    "readiness",
]
