"""Operators steering three ``hoodied run`` replicas through one real ZooKeeper, with real Spark:
``hoodied ctl`` and the API's pause, resume, cancel, retry, drain and trigger reach every replica within a
poll, each is seen in the timeline and the table's history, a change without the admin token is refused (401)
and changes nothing, and readers see the same rows throughout (hudi-rs is the judge)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.storage import Storage
from hoodie.testing.generate import TripGenerator
from hoodie.testing.table_writer import TableWriter
from hoodied.history import HistoryRecord, read_history
from support.chromium import chromium_binary, png_scanlines, run_chromium
from support.compare import assert_same_rows
from support.daemon_tables import mor_table
from support.hudi_oracle import HudiOracle, OracleRows, Query
from support.replicas import POLL_INTERVAL, Cluster, Replica
from support.zk_server import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.spark, pytest.mark.slow]

TOKEN = "ops-t0ken"
#: Seconds within which every replica must see a command: one poll (interval plus its jitter) and the reply.
ONE_POLL = POLL_INTERVAL * 1.2 + 1.5


def _hudi_rs(root: Path) -> pa.Table:
    with tempfile.TemporaryDirectory(prefix="hoodie-oracle-") as work:
        result = HudiOracle(Path(work)).run(root, [Query.snapshot()])[0]
    assert isinstance(result, OracleRows), f"hudi-rs cannot read {root}: {result}"
    return result.table


def _wait(what: str, check: Callable[[], bool], timeout: float, cluster: Cluster) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if check():
            return time.monotonic() - began
        time.sleep(0.2)
    tails = "\n\n".join(f"{r.name}:\n{cluster.tail(r, 15)}" for r in cluster.replicas)
    raise AssertionError(f"{what}: not within {timeout} s\n{tails}")


def _table_status(replica: Replica, table: str) -> dict[str, object]:
    status, body = replica.get(f"/api/v1/tables/{table}")
    assert status == 200, body
    value = json.loads(body)
    assert isinstance(value, dict)
    return value


def _state(replica: Replica, table: str) -> str:
    control = _table_status(replica, table).get("control")
    return str(control.get("state")) if isinstance(control, dict) else "?"


def _history(root: Path) -> list[HistoryRecord]:
    return read_history(Storage.for_uri(str(root)), limit=200)


def _pending(root: Path) -> dict[str, str]:
    table = Table.open(str(root))
    return {i.time: i.state.name.lower() for i in table.timeline.pending()}


def _post(
    replica: Replica, table: str, command: str, token: str | None = TOKEN, **body: object
) -> dict[str, object]:
    status, text = replica.post(f"/api/v1/tables/{table}/{command}", dict(body), token)
    assert status == 200, (status, text)
    value = json.loads(text)
    assert isinstance(value, dict)
    return value


def test_operators_steer_three_replicas(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, cluster_factory: list[Cluster]
) -> None:
    a = mor_table(tmp_path / "a", 8, seed=71)  # two compactions and a clean pending
    b = mor_table(tmp_path / "b", 9, seed=72)
    before = _hudi_rs(a.root)
    token_file = tmp_path / "admin-token"
    token_file.write_text(TOKEN + "\n")
    cluster = Cluster(tmp_path, zookeeper_server, [a, b])
    cluster_factory.append(cluster)
    extra = f"admin: {{token_file: {token_file}}}"

    # -- pause with hoodied ctl before any replica runs: no replica claims a's instants --------------------
    config = cluster.config("ctl", 0, extra=extra)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hoodied.cli",
            "ctl",
            "pause",
            "a",
            "--config",
            str(config),
            "--reason",
            "window",
            "--by",
            "alice",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["control"]["state"] == "paused"

    # Compaction tasks take a while, so that a running job can be cancelled.
    replicas = [
        cluster.start(f"r{i}", extra=extra, failpoints="compaction.task_after_write=sleep:4")
        for i in range(3)
    ]
    for r in replicas:
        cluster.wait_ready(r)
    pending_a = _pending(a.root)
    _wait("b's instants all complete", lambda: not _pending(b.root), 240, cluster)
    time.sleep(3 * POLL_INTERVAL)
    assert _pending(a.root) == pending_a, "a paused table's instants were run"
    # Every replica holds the pause; the one that lists the table (hoodied.table_split) says why it waits.
    statuses = {r.name: _table_status(r, "a") for r in replicas}
    owners = {str(status["polled_by"]) for status in statuses.values()}
    assert len(owners) == 1, owners
    for status in statuses.values():
        assert status["control"]["state"] == "paused"  # type: ignore[index]
    owner = statuses[owners.pop()]
    assert set(owner["blocked"].values()) == {"paused"}  # type: ignore[union-attr]
    assert "table paused by alice: window" in owner["next"]["compaction"]  # type: ignore[index]
    assert not [h for h in _history(a.root) if h.kind == "job"]

    # -- a change without the token is refused and changes nothing ---------------------------------------
    for token in (None, "wrong"):
        status_code, _ = replicas[1].post("/api/v1/tables/a/resume", {"reason": "x"}, token)
        assert status_code == 401
    time.sleep(2 * POLL_INTERVAL)
    assert all(_state(r, "a") == "paused" for r in replicas)
    assert _pending(a.root) == pending_a

    # -- resume through one replica; cancel the compaction running on whichever replica took it ------------
    _post(replicas[1], "a", "resume", by="bob", reason="window over")
    target: dict[str, str] = {}

    def running() -> bool:
        for r in replicas:
            for job in json.loads(r.get("/api/v1/status")[1])["running"]:
                if job["table"] == "a" and job["action"] == "compaction":
                    target.update(instant=job["instant"], replica=r.name)
                    return True
        return False

    _wait("a compaction of a starts", running, 120, cluster)
    T = target["instant"]
    _post(replicas[2], "a", "cancel", service="compaction", instant=T, by="carol", reason="too slow")
    _wait(
        f"compaction {T} ends cancelled",
        lambda: any(h.instant == T and h.outcome == "cancelled" for h in _history(a.root)),
        120,
        cluster,
    )
    time.sleep(4 * POLL_INTERVAL)
    assert T in _pending(a.root), "a cancelled instant stays on the timeline"
    assert not any(h.instant == T and h.outcome == "done" for h in _history(a.root)), "cancelled ran again"
    # The status explains a service's first pending instant. Both compactions may have started together, and
    # T may be the second: the replica that lists the table shows T cancelled once the first has completed.
    _wait(
        f"the table's poller shows {T} cancelled",
        lambda: any(
            _table_status(r, "a")["blocked"].get("compaction") == "cancelled"  # type: ignore[union-attr]
            for r in replicas
        ),
        120,
        cluster,
    )
    assert T in _pending(a.root), "a cancelled instant stays on the timeline"
    assert not any(h.instant == T and h.outcome == "done" for h in _history(a.root)), "cancelled ran again"

    # -- retry: the cancelled compaction runs and completes ----------------------------------------------
    _post(replicas[0], "a", "retry", service="compaction", instant=T, by="carol", reason="go on")
    _wait(
        f"compaction {T} completes after retry",
        lambda: any(h.instant == T and h.outcome == "done" for h in _history(a.root)),
        180,
        cluster,
    )
    _wait("a's pending instants complete", lambda: not _pending(a.root), 240, cluster)

    # -- pause through one replica reaches all three within one poll -------------------------------------
    _post(replicas[2], "a", "pause", by="dave", reason="check propagation")
    seen = _wait(
        "all replicas see the pause", lambda: all(_state(r, "a") == "paused" for r in replicas), 30, cluster
    )
    assert seen <= ONE_POLL, (
        f"the pause took {seen:.1f} s to reach every replica (one poll: {ONE_POLL:.1f} s)"
    )

    # -- while paused: a write, and a trigger that waits; drain; resume: the trigger schedules a compaction --
    live = Table.open(str(a.root)).read(columns=["uuid", "city"])
    rows = TripGenerator(5, 2).rows(
        live.column("uuid").to_pylist()[:10], live.column("city").to_pylist()[:10]
    )
    TableWriter.open(str(a.root)).upsert(rows)
    expected = _hudi_rs(a.root)
    _post(replicas[0], "a", "resume", by="dave", reason="ok")
    _post(replicas[0], "a", "drain", by="erin", reason="node maintenance")
    _wait(
        "the drained table is paused", lambda: all(_state(r, "a") == "paused" for r in replicas), 30, cluster
    )
    _post(replicas[1], "a", "trigger", service="compaction", by="erin", reason="compact the new log now")
    time.sleep(3 * POLL_INTERVAL)
    assert not _pending(a.root), "a paused table was scheduled"
    _post(replicas[1], "a", "resume", by="erin", reason="maintenance over")

    def triggered_done() -> bool:
        # The job's history record comes after its commit: wait for it, not for the timeline alone.
        history = _history(a.root)
        instants = {h.instant for h in history if h.outcome == "triggered" and h.instant}
        done = {h.instant for h in history if h.outcome == "done"}
        return bool(instants) and instants <= done and not _pending(a.root)

    _wait("the triggered compaction completes", triggered_done, 180, cluster)
    [triggered] = [h for h in _history(a.root) if h.outcome == "triggered"]
    assert triggered.by == "erin"
    assert triggered.reason
    assert "scheduled" in triggered.reason
    timeline = Table.open(str(a.root)).timeline
    assert timeline.is_completed(triggered.instant)
    assert timeline.was_compaction(triggered.instant)
    assert any(h.instant == triggered.instant and h.outcome == "done" for h in _history(a.root))

    # -- the history tells the whole story, newest first; hoodied history prints it ------------------------
    outcomes = [h.outcome for h in reversed(_history(a.root)) if h.kind == "control"]
    for command in ("pause", "resume", "cancel", "retry", "drain", "drained", "trigger", "triggered"):
        assert command in outcomes, outcomes
    printed = subprocess.run(
        [sys.executable, "-m", "hoodied.cli", "history", "a", "--config", str(config), "--limit", "50"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert printed.returncode == 0
    assert "ctl cancel compaction" in printed.stdout
    assert "cancelled" in printed.stdout

    # -- readers see the same rows: the services changed the layout only --------------------------------
    key = ["_hoodie_partition_path", "_hoodie_record_key"]
    assert_same_rows(_hudi_rs(a.root), expected, key, ignore_columns=("_hoodie_file_name",), context="a")
    assert before.num_rows > 0

    # -- the status page of a live replica, in headless Chromium ----------------------------------------
    _post(replicas[0], "a", "pause", by="frank", reason="quiet hours")
    _wait(
        "all replicas see the pause", lambda: all(_state(r, "a") == "paused" for r in replicas), 30, cluster
    )
    _screenshot(replicas[0], tmp_path)
    for r in replicas:
        assert cluster.stop(r) == 0
    print(f"pause reached all three replicas in {seen:.2f} s (poll interval {POLL_INTERVAL} s)")


def _screenshot(replica: Replica, tmp_path: Path) -> None:
    """Render the replica's ``GET /`` in Chromium: the page names both tables, the pause with who and why,
    and the recent history; the screenshot is a picture, not a blank."""
    status, page = replica.get("/")
    assert status == 200
    for text in ("quiet hours", "frank", "triggered"):
        assert text in page, text
    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        return  # the page itself was checked; tests/services/test_status_page.py says why Chromium is absent
    binary = chromium_binary()
    shot = tmp_path / "hoodied-status-page-live.png"
    url = replica.url("/")
    run_chromium(binary, tmp_path / "profile-shot", "--window-size=1280,1600", f"--screenshot={shot}", url)
    dom = run_chromium(binary, tmp_path / "profile-dom", "--dump-dom", url).stdout
    width, height, rows = png_scanlines(shot.read_bytes())
    assert (width, height) == (1280, 1600)
    assert len(set(rows)) > 100, "the screenshot looks blank"
    for text in ("paused", "quiet hours", "triggered", "/a", "/b"):
        assert text in dom, text
    if os.environ.get("HOODIED_SCREENSHOT_DIR"):
        target = Path(os.environ["HOODIED_SCREENSHOT_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, target / shot.name)
