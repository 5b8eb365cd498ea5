"""Liveness and readiness as pure functions of heartbeats and a chosen ``now``; the health server, on real
sockets on loopback, against hostile clients: a slow drip on every connection, silent and trickling clients,
every connection and every worker taken, oversized requests, credentials in the status."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import replace

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from hoodied.health import (
    MAX_BODY_BYTES,
    MAX_REQUEST_BYTES,
    PROBE_CONNECTIONS,
    PROBE_DEADLINE,
    WORKER_THREADS,
    HealthReport,
    HealthServer,
    Heartbeats,
    liveness,
    liveness_window,
    readiness,
)
from hoodied.metrics import Metrics
from hoodied.status import StatusQuery

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
    with HealthServer(metrics, beats, poll_interval=POLL, status_fn=lambda _query: status) as s:
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
    def broken(query: StatusQuery) -> object:
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


def _read_all(s: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    chunks = []
    while chunk := s.recv(4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _closed_after(s: socket.socket, since: float, limit: float = 10.0) -> float:
    """Seconds from ``since`` until the server closed ``s`` (read to its end; what it sent is dropped)."""
    s.settimeout(limit)
    try:
        while s.recv(4096):
            pass
    except ConnectionResetError:
        pass
    return time.monotonic() - since


def _ready(beats: Heartbeats) -> None:
    now = time.time()
    beats.spark_up = True
    beats.last_poll_started = beats.last_poll_succeeded = now


#: The request deadline of the slow-drip test (the daemon's default is 10 s) and its drip: one byte per
#: connection a second, the review's attack (a byte every 5 s against a 10 s deadline) scaled down.
DRIP_DEADLINE = 3.0
DRIP_INTERVAL = 1.0


def test_a_slow_drip_on_every_connection_fails_no_probe(beats: Heartbeats) -> None:
    """The adversarial review's attack: as many connections as the server serves (32, the default), each
    sending one byte of a request every second. The probes answer 200 throughout, at once, and every trickling
    connection is closed at the deadline, whatever it sent meanwhile (the old server waited for a read to
    return before it looked at the clock, and answered the probes 503 while the drip lasted)."""
    _ready(beats)
    request = b"GET /metrics HTTP/1.1\r\nHost: hoodied\r\nX-Padding: " + b"a" * 64
    with HealthServer(Metrics(), beats, POLL, read_timeout=DRIP_DEADLINE) as server:
        drips: list[tuple[socket.socket, float]] = []
        for _ in range(server.max_connections):
            s = _connect(server)
            drips.append((s, time.monotonic()))
        sent = [0] * len(drips)
        cut: dict[int, float] = {}
        stop = threading.Event()

        def drip() -> None:
            while not stop.is_set() and len(cut) < len(drips):
                for i, (s, _) in enumerate(drips):
                    if i in cut:
                        continue
                    try:
                        s.send(request[sent[i] : sent[i] + 1])
                        sent[i] += 1
                    except OSError:
                        pass  # closed: its watcher records when
                stop.wait(DRIP_INTERVAL)

        def watch(i: int) -> None:
            s, since = drips[i]
            cut[i] = _closed_after(s, since)

        threads = [threading.Thread(target=drip)] + [
            threading.Thread(target=watch, args=(i,)) for i in range(len(drips))
        ]
        for t in threads:
            t.start()
        answers: list[tuple[int, float]] = []
        try:
            until = time.monotonic() + DRIP_DEADLINE + 2.0
            while len(cut) < len(drips) and time.monotonic() < until:
                for path in ("/healthz", "/readyz"):
                    began = time.monotonic()
                    status = fetch(f"{server.url}{path}")[0]
                    answers.append((status, time.monotonic() - began))
                time.sleep(0.05)
        finally:
            stop.set()
            for t in threads:
                t.join(timeout=15)
            for s, _ in drips:
                s.close()

    statuses = [status for status, _ in answers]
    latencies = [took for _, took in answers]
    print(
        f"\nslow drip: {len(drips)} connections, a byte each every {DRIP_INTERVAL:.0f} s; probes: "
        f"{statuses.count(200)} of {len(answers)} answered 200, latency max {max(latencies) * 1000:.1f} ms, "
        f"median {sorted(latencies)[len(latencies) // 2] * 1000:.1f} ms; drips cut "
        f"{min(cut.values()):.3f}..{max(cut.values()):.3f} s after connecting (deadline {DRIP_DEADLINE} s); "
        f"bytes each sent before the cut: {min(sent)}..{max(sent)}"
    )
    assert len(cut) == len(drips), "a trickling connection was never closed"
    assert statuses == [200] * len(answers)
    assert len(answers) >= 20
    assert max(latencies) < 0.5
    assert all(DRIP_DEADLINE - 0.05 <= took <= DRIP_DEADLINE + 0.5 for took in cut.values()), sorted(
        cut.values()
    )
    assert min(sent) >= 3  # each kept sending up to the deadline: cut for its time, not for being idle


def test_a_silent_a_trickling_and_a_slow_body_client_are_cut_at_the_deadline(beats: Heartbeats) -> None:
    """One deadline for the whole request: line, headers and body. A client that sends nothing, one that
    trickles its headers and one that trickles its body are each closed ``read_timeout`` after connecting,
    and the server answers others meanwhile."""
    deadline = 0.5
    with HealthServer(Metrics(), beats, POLL, read_timeout=deadline) as server:
        silent, trickle, body = _connect(server), _connect(server), _connect(server)
        started = time.monotonic()
        body.sendall(b"POST /api/v1/tables/t/pause HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n")

        def trickling() -> None:
            for byte in b"GET /healthz HTTP/1.1\r\n":
                try:
                    trickle.send(bytes([byte]))
                    body.send(b"{")
                except OSError:
                    return
                time.sleep(0.05)

        dripper = threading.Thread(target=trickling)
        dripper.start()
        assert fetch(f"{server.url}/healthz")[0] == 200
        took = [_closed_after(s, started) for s in (silent, trickle, body)]
        dripper.join()
        for s in (silent, trickle, body):
            s.close()
    assert all(deadline - 0.05 <= t <= deadline + 0.4 for t in took), took


def test_connections_beyond_the_limit_are_for_probes(beats: Heartbeats) -> None:
    """With every connection taken, one more is accepted for a probe: a probe is answered, any other request
    503 at once, and a connection that sends nothing is closed after :data:`PROBE_DEADLINE`."""
    with HealthServer(Metrics(), beats, POLL, read_timeout=5.0, max_connections=3) as server:
        held = [_connect(server) for _ in range(3)]
        extra = _connect(server)  # accepted after the held ones (the listen backlog is first in, first out)
        extra.sendall(b"GET /metrics HTTP/1.1\r\nHost: h\r\n\r\n")
        reply = _read_all(extra)
        assert reply.startswith(b"HTTP/1.1 503"), reply
        assert reply.endswith(b'{"error": "too many connections"}'), reply
        extra.close()
        assert fetch(f"{server.url}/healthz")[0] == 200
        assert fetch(f"{server.url}/readyz")[0] == 503  # answered: not ready yet
        silent = _connect(server)
        took = _closed_after(silent, time.monotonic())
        silent.close()
        assert PROBE_DEADLINE - 0.05 <= took <= PROBE_DEADLINE + 0.4, took
        for s in held:
            s.close()
        deadline = time.monotonic() + 5
        while fetch(f"{server.url}/metrics")[0] != 200:  # slots come back as the held ones end
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_a_probe_waits_at_most_the_probe_deadline_when_every_connection_is_taken(beats: Heartbeats) -> None:
    """The worst case: every connection and every probes' connection held by clients that send nothing. A
    probe then waits in the listen backlog until the probes' connections are cut, and no longer."""
    with HealthServer(Metrics(), beats, POLL, read_timeout=30.0, max_connections=2) as server:
        held = [_connect(server) for _ in range(2 + PROBE_CONNECTIONS)]
        began = time.monotonic()
        assert fetch(f"{server.url}/healthz")[0] == 200
        took = time.monotonic() - began
        for s in held:
            s.close()
    assert took <= PROBE_DEADLINE + 0.5, took


def test_probes_do_not_queue_behind_slow_requests(beats: Heartbeats) -> None:
    """Requests that keep every worker busy (a slow ``/status``) do not delay the probes: they have threads of
    their own."""
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow(query: StatusQuery) -> object:
        entered.release()
        release.wait(10)
        return {"slow": True}

    with HealthServer(Metrics(), beats, POLL, status_fn=slow) as server:
        results: list[int] = []
        busy = [
            threading.Thread(target=lambda: results.append(fetch(f"{server.url}/status")[0]))
            for _ in range(8)
        ]
        for t in busy:
            t.start()
        for _ in range(WORKER_THREADS):  # every worker is in slow(), more requests queue behind them
            assert entered.acquire(timeout=10)
        latencies = []
        for _ in range(5):
            began = time.monotonic()
            assert fetch(f"{server.url}/healthz")[0] == 200
            latencies.append(time.monotonic() - began)
        release.set()
        for t in busy:
            t.join(timeout=15)
    assert results == [200] * 8
    assert max(latencies) < 0.3, latencies


def test_an_oversized_request_is_refused(server: HealthServer) -> None:
    s = _connect(server)
    s.sendall(b"GET /healthz HTTP/1.0\r\n" + b"X-Padding: " + b"a" * (MAX_REQUEST_BYTES + 10) + b"\r\n\r\n")
    reply = s.recv(1024)
    assert reply.split(b" ", 2)[1] == b"431", reply
    s.close()
    assert fetch(f"{server.url}/healthz")[0] == 200


def test_an_oversized_body_is_refused(server: HealthServer) -> None:
    s = _connect(server)
    head = f"POST /api/v1/tables/t/pause HTTP/1.1\r\nHost: h\r\nContent-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
    s.sendall(head.encode())
    reply = _read_all(s)
    assert reply.startswith(b"HTTP/1.1 413"), reply
    s.close()


def test_other_methods_are_refused(server: HealthServer) -> None:
    s = _connect(server)
    s.sendall(b"DELETE /healthz HTTP/1.1\r\nHost: h\r\n\r\n")
    reply = _read_all(s)
    s.close()
    assert reply.startswith(b"HTTP/1.1 405"), reply
    assert b"Allow: GET, POST" in reply


def test_credentials_in_uris_are_redacted_on_status(beats: Heartbeats) -> None:
    """``/status`` shows a table's URI and the errors quoting it without the credentials written in it."""
    status = {
        "tables": {
            "orders": {
                "uri": "s3://AKIAEXAMPLE:wJalrXUtnFEMI/K7MDENG@lake/orders",
                "last_error": "cannot open 'abfss://c@acct.dfs.core.windows.net/t?sv=2024&sig=SIGNATURE': "
                "403",
            }
        }
    }
    with HealthServer(Metrics(), beats, POLL, status_fn=lambda _query: status) as server:
        code, _, body = fetch(f"{server.url}/status")
    assert code == 200
    text = body.decode()
    for secret in ("AKIAEXAMPLE", "wJalrXUtnFEMI", "K7MDENG", "SIGNATURE", "2024"):
        assert secret not in text
    shown = json.loads(body)["tables"]["orders"]
    assert shown["uri"] == "s3://***@lake/orders"
    assert shown["last_error"] == "cannot open 'abfss://c@acct.dfs.core.windows.net/t?sv=***&sig=***': 403"


def test_a_taken_port_fails_start_and_leaves_nothing_open(beats: Heartbeats) -> None:
    with HealthServer(Metrics(), beats, POLL) as first:
        threads = threading.active_count()
        second = HealthServer(Metrics(), beats, POLL, port=first.port)
        with pytest.raises(OSError, match="in use"):
            second.start()
        assert threading.active_count() == threads  # no worker thread started
        with pytest.raises(RuntimeError, match="not started"):
            _ = second.port
        assert fetch(f"{first.url}/healthz")[0] == 200
