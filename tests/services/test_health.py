"""Liveness and readiness as pure functions of heartbeats and a chosen ``now``; the health server."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from hoodied.health import (
    MAX_REQUEST_BYTES,
    HealthReport,
    HealthServer,
    Heartbeats,
    liveness,
    liveness_window,
    readiness,
)
from hoodied.metrics import Metrics

T0 = 1_800_000_000.0  # the daemon started here
POLL = 30.0  # poll interval: the liveness window is max(3 * 30, 60) = 90 s


def ready_beats() -> Heartbeats:
    """A daemon that has polled successfully at T0 + 100 and has everything it needs."""
    return Heartbeats(
        started_at=T0,
        last_poll_started=T0 + 100,
        last_poll_succeeded=T0 + 101,
        zookeeper_state="CONNECTED",
        spark_up=True,
    )


# -- liveness ------------------------------------------------------------------------------------------------


def test_liveness_window() -> None:
    assert liveness_window(30.0) == 90.0
    assert liveness_window(1.0) == 60.0  # never shorter than a minute
    assert liveness_window(600.0) == 1800.0


def test_alive_after_start_before_the_first_poll() -> None:
    beats = Heartbeats(started_at=T0)
    assert liveness(beats, T0, POLL) == HealthReport(True, ())
    assert liveness(beats, T0 + 90, POLL).ok


def test_dead_when_the_first_poll_never_starts() -> None:
    report = liveness(Heartbeats(started_at=T0), T0 + 91, POLL)
    assert not report.ok
    assert report.reasons == ("no poll started since the daemon started 91 s ago (limit 90 s)",)


def test_alive_while_polls_start() -> None:
    beats = Heartbeats(started_at=T0, last_poll_started=T0 + 1000)
    assert liveness(beats, T0 + 1000 + 90, POLL).ok  # long after start: the poll is what counts
    assert liveness(beats, T0 + 1000 - 5, POLL).ok  # the clock stepped back


def test_dead_when_the_loop_stops_beating() -> None:
    beats = Heartbeats(started_at=T0, last_poll_started=T0 + 1000, last_poll_succeeded=T0 + 1001)
    report = liveness(beats, T0 + 1000 + 91, POLL)
    assert report == HealthReport(False, ("no poll started nor table polled for 91 s (limit 90 s)",))


def test_a_long_first_poll_beats_with_every_table() -> None:
    """A first poll over thousands of tables outlasts the window; each table polled keeps the daemon alive."""
    beats = Heartbeats(started_at=T0, last_poll_started=T0)
    assert not liveness(beats, T0 + 91, POLL).ok
    beats.last_table_polled = T0 + 80
    assert liveness(beats, T0 + 91, POLL).ok
    assert not liveness(beats, T0 + 80 + 91, POLL).ok


def test_short_poll_intervals_get_a_minute() -> None:
    beats = Heartbeats(started_at=T0, last_poll_started=T0)
    assert liveness(beats, T0 + 60, 1.0).ok
    assert not liveness(beats, T0 + 61, 1.0).ok


def test_liveness_ignores_what_readiness_checks() -> None:
    beats = Heartbeats(
        started_at=T0, zookeeper_state="LOST", spark_up=False, draining=True, last_error="boom"
    )
    assert liveness(beats, T0 + 10, POLL).ok


# -- readiness -----------------------------------------------------------------------------------------------


def test_ready() -> None:
    assert readiness(ready_beats(), T0 + 110, POLL) == HealthReport(True, ())


def test_ready_without_zookeeper() -> None:
    assert readiness(replace(ready_beats(), zookeeper_state=None), T0 + 110, POLL).ok


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"draining": True}, "draining: shutting down"),
        ({"spark_up": False}, "Spark is not up"),
        ({"zookeeper_state": "SUSPENDED"}, "ZooKeeper is SUSPENDED, not CONNECTED"),
        ({"zookeeper_state": "LOST"}, "ZooKeeper is LOST, not CONNECTED"),
        ({"zookeeper_state": "CLOSED"}, "ZooKeeper is CLOSED, not CONNECTED"),
        ({"last_poll_succeeded": None}, "no poll has succeeded yet"),
        (
            {"last_poll_succeeded": None, "last_error": "table orders: timeline unreadable"},
            "no poll has succeeded yet (last error: table orders: timeline unreadable)",
        ),
    ],
)
def test_not_ready_because(change: dict[str, object], reason: str) -> None:
    beats = replace(ready_beats(), **change)  # type: ignore[arg-type]
    assert readiness(beats, T0 + 110, POLL) == HealthReport(False, (reason,))


def test_not_ready_when_not_alive() -> None:
    report = readiness(ready_beats(), T0 + 100 + 91, POLL)
    reason = "not alive: no poll started nor table polled for 91 s (limit 90 s)"
    assert report == HealthReport(False, (reason,))


def test_a_later_error_does_not_unready_a_daemon_that_polled() -> None:
    beats = replace(ready_beats(), last_error="one table failed")
    assert readiness(beats, T0 + 110, POLL).ok


def test_every_reason_at_once() -> None:
    beats = Heartbeats(started_at=T0, zookeeper_state="LOST", draining=True)
    report = readiness(beats, T0 + 500, POLL)
    assert report.reasons == (
        "not alive: no poll started since the daemon started 500 s ago (limit 90 s)",
        "draining: shutting down",
        "Spark is not up",
        "ZooKeeper is LOST, not CONNECTED",
        "no poll has succeeded yet",
    )


def test_report_json() -> None:
    assert json.loads(HealthReport(True).to_json()) == {"ok": True, "reasons": []}
    assert json.loads(HealthReport(False, ("a", "b")).to_json()) == {"ok": False, "reasons": ["a", "b"]}


# -- the server ----------------------------------------------------------------------------------------------

_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never through a proxy


def fetch(url: str) -> tuple[int, str, bytes]:
    """Status, content type and body of a GET (error statuses included)."""
    try:
        with _opener.open(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], response.read()
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers["Content-Type"], e.read()


@pytest.fixture
def beats() -> Heartbeats:
    return Heartbeats(started_at=time.time())


@pytest.fixture
def server(beats: Heartbeats) -> Iterator[HealthServer]:
    metrics = Metrics(version="9.9.9", replica="test")
    metrics.tables.set(3)
    status = {"tables": ["orders"], "since": T0}
    with HealthServer(metrics, beats, poll_interval=POLL, status_fn=lambda: status) as s:
        yield s


def test_metrics_endpoint(server: HealthServer) -> None:
    status, content_type, body = fetch(f"{server.url}/metrics")
    assert status == 200
    assert content_type == CONTENT_TYPE_LATEST
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    assert families["hoodied_tables"].samples[0].value == 3.0
    assert families["hoodied_info"].samples[0].labels == {"version": "9.9.9", "replica": "test"}


def test_healthz_and_readyz(server: HealthServer, beats: Heartbeats) -> None:
    status, content_type, body = fetch(f"{server.url}/healthz")
    assert (status, content_type, json.loads(body)) == (200, "application/json", {"ok": True, "reasons": []})

    status, content_type, body = fetch(f"{server.url}/readyz")
    assert (status, content_type) == (503, "application/json")
    assert json.loads(body) == {"ok": False, "reasons": ["Spark is not up", "no poll has succeeded yet"]}

    now = time.time()
    beats.spark_up = True
    beats.last_poll_started = now
    beats.last_poll_succeeded = now
    status, _, body = fetch(f"{server.url}/readyz")
    assert (status, json.loads(body)) == (200, {"ok": True, "reasons": []})

    beats.draining = True
    status, _, body = fetch(f"{server.url}/readyz")
    assert (status, json.loads(body)["reasons"]) == (503, ["draining: shutting down"])


def test_healthz_uses_the_time_of_the_request(server: HealthServer, beats: Heartbeats) -> None:
    beats.last_poll_started = time.time() - 3600  # a poll stuck for an hour
    status, _, body = fetch(f"{server.url}/healthz")
    assert status == 503
    (reason,) = json.loads(body)["reasons"]
    assert reason.startswith("no poll started nor table polled for 360")


def test_status_and_not_found(server: HealthServer) -> None:
    status, content_type, body = fetch(f"{server.url}/status")
    assert (status, content_type, json.loads(body)) == (
        200,
        "application/json",
        {"tables": ["orders"], "since": T0},
    )
    status, content_type, body = fetch(f"{server.url}/nope")
    assert (status, content_type) == (404, "application/json")
    assert json.loads(body) == {"error": "no such path: /nope"}
    assert fetch(f"{server.url}/metrics/")[0] == 404
    assert fetch(f"{server.url}/healthz?verbose=1")[0] == 200


def test_a_failing_status_fn_is_a_500(beats: Heartbeats, caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> object:
        raise RuntimeError("status unavailable")

    with HealthServer(Metrics(), beats, POLL, status_fn=broken) as server:
        status, _, body = fetch(f"{server.url}/status")
    assert (status, json.loads(body)) == (500, {"error": "status unavailable"})
    assert "GET /status failed" in caplog.text


def test_requests_are_logged_at_debug_not_on_stderr(
    server: HealthServer, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="hoodied.health")
    fetch(f"{server.url}/healthz")
    fetch(f"{server.url}/nope")
    assert capsys.readouterr().err == ""
    lines = [r for r in caplog.records if r.name == "hoodied.health" and r.levelno == logging.DEBUG]
    assert any('"GET /healthz HTTP/1.1" 200' in r.getMessage() for r in lines)
    assert any('"GET /nope HTTP/1.1" 404' in r.getMessage() for r in lines)


def test_lifecycle(beats: Heartbeats) -> None:
    server = HealthServer(Metrics(), beats, POLL)
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port
    server.stop()  # not started: nothing to do
    server.start()
    try:
        port = server.port
        assert port > 0
        with pytest.raises(RuntimeError, match="already started"):
            server.start()
        assert fetch(f"http://127.0.0.1:{port}/healthz")[0] == 200
    finally:
        server.stop()
    server.stop()
    with pytest.raises(urllib.error.URLError):
        fetch(f"http://127.0.0.1:{port}/healthz")  # the socket is closed


def test_two_servers_side_by_side(beats: Heartbeats) -> None:
    with HealthServer(Metrics(), beats, POLL) as a, HealthServer(Metrics(), beats, POLL) as b:
        assert a.port != b.port
        assert fetch(f"{a.url}/healthz")[0] == fetch(f"{b.url}/healthz")[0] == 200


def _connect(server: HealthServer) -> socket.socket:
    return socket.create_connection((server.host, server.port), timeout=10)


def test_a_silent_or_trickling_client_is_cut_off(beats: Heartbeats) -> None:
    """A client that connects and sends nothing, or trickles a byte at a time, is disconnected after the read
    timeout, and the server keeps answering others meanwhile."""
    with HealthServer(Metrics(), beats, POLL, read_timeout=0.5) as server:
        silent = _connect(server)
        trickle = _connect(server)
        started = time.monotonic()
        for byte in b"GET /hea":
            trickle.sendall(bytes([byte]))
            time.sleep(0.1)
        assert fetch(f"{server.url}/healthz")[0] == 200
        assert silent.recv(1024) == b""  # closed by the server
        assert trickle.recv(1024) == b""
        assert time.monotonic() - started < 5
        silent.close()
        trickle.close()


def test_connections_beyond_the_limit_are_refused_at_once(beats: Heartbeats) -> None:
    with HealthServer(Metrics(), beats, POLL, read_timeout=5.0, max_connections=3) as server:
        held = [_connect(server) for _ in range(3)]
        time.sleep(0.2)  # the three are being served (each waits for its request)
        extra = _connect(server)
        reply = extra.recv(1024)
        assert reply.startswith(b"HTTP/1.0 503"), reply
        extra.close()
        for s in held:
            s.close()
        deadline = time.monotonic() + 5
        while fetch(f"{server.url}/healthz")[0] != 200:  # slots come back as the held ones end
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_an_oversized_request_is_refused(server: HealthServer) -> None:
    s = _connect(server)
    s.sendall(b"GET /healthz HTTP/1.0\r\n" + b"X-Padding: " + b"a" * (MAX_REQUEST_BYTES + 10) + b"\r\n\r\n")
    reply = s.recv(1024)
    assert reply.startswith(b"HTTP/1.0 431"), reply
    s.close()
    assert fetch(f"{server.url}/healthz")[0] == 200
