"""The daemon in embedded mode (no ZooKeeper), in this process with the test session's Spark: one pass runs
every pending instant of every kind it runs (a requested indexing too, keeping the metadata table up to
date), schedules where configured, survives a broken table or one with an index it cannot maintain, records
results for ``hoodied status`` and metrics for Prometheus."""

from __future__ import annotations

import json
import logging
import textwrap
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from hoodie import Table
from hoodie.compaction.plan import schedule_compaction
from hoodie.config import METADATA_PARTITIONS, TableConfig
from hoodie.indexing.execute import run_indexing, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodied.cli import main
from hoodied.config import DaemonConfig
from hoodied.control import FileControlStore
from hoodied.daemon import Daemon, format_status, status_report
from hoodied.work import read_last_results
from support.daemon_tables import assert_same_snapshot, cow_table, mor_table, snapshot
from support.metadata_checks import check_metadata_table

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _config(tmp_path: Path, body: str) -> DaemonConfig:
    path = tmp_path / "hoodied.yaml"
    path.write_text(textwrap.dedent(body))
    return DaemonConfig.load(path)


def _sample(daemon: Daemon, name: str, **labels: str) -> float:
    value = daemon.metrics.registry.get_sample_value(name, labels)
    return value or 0.0


def test_one_pass_runs_every_pending_instant_and_keeps_every_read(tmp_path: Path, spark: Any) -> None:
    mor = mor_table(tmp_path / "orders", 8, seed=1)
    cow = cow_table(tmp_path / "events", 6, seed=2)
    before = {t.root: snapshot(t.root) for t in (mor, cow)}
    config = _config(
        tmp_path,
        f"""
        replica: test-replica
        metrics: {{port: null}}
        jobs: {{takeover_grace: 0s}}
        tables:
          - {mor.root}
          - {{path: {cow.root}, name: events_v6}}
        """,
    )
    daemon = Daemon(config, spark=spark)
    assert daemon.run(once=True, handle_signals=False) == 0

    for t in (mor, cow):
        table = Table.open(str(t.root))
        for instant in t.pending:
            now = table.timeline.get(instant.time)
            assert now is not None, f"{t.root.name}: {instant} vanished"
            assert now.state is State.COMPLETED, f"{t.root.name}: {instant} is {now.state.name}"
        assert not table.timeline.pending(), table.timeline.pending()
        assert_same_snapshot(before[t.root], snapshot(t.root), t.root.name)
    last = read_last_results(Storage.for_uri(str(mor.root)))
    assert set(last) == {"compaction", "clean"}
    assert last["compaction"]["kind"] == "done"
    assert last["compaction"]["replica"] == "test-replica"
    assert _sample(daemon, "hoodied_jobs_succeeded_total", table="orders", action="compaction") == 2
    assert _sample(daemon, "hoodied_jobs_succeeded_total", table="orders", action="clean") == 1
    assert _sample(daemon, "hoodied_jobs_succeeded_total", table="events_v6", action="clustering") == 2
    assert _sample(daemon, "hoodied_jobs_succeeded_total", table="events_v6", action="clean") == 1
    assert _sample(daemon, "hoodied_records_written_total", table="orders", action="compaction") > 0
    assert _sample(daemon, "hoodied_files_deleted_total", table="events_v6", action="clean") > 0
    assert _sample(daemon, "hoodied_claims_held") == 0

    report = status_report(config)
    text = format_status(report)
    assert "orders" in text, text
    assert "events_v6" in text, text
    assert "nothing pending" in text
    assert "last compaction" in text, text
    assert "done on test-replica" in text, text


def test_scheduling_where_configured_then_running_it(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Also: each event is logged once, by the daemon (the format library logs its own lines of the same
    events at DEBUG; both at INFO doubled every scheduled and completed instant)."""
    root = tmp_path / "trips"
    generate_table(str(root), GenerateSpec(table_version=9, rows=200, commits=3, partitions=2, seed=4))
    before = snapshot(root)
    config = _config(
        tmp_path,
        f"""
        metrics: {{port: null}}
        tables:
          - path: {root}
            schedule: [compaction]
            hoodie: {{hoodie.compact.inline.max.delta.commits: 2}}
        """,
    )
    daemon = Daemon(config, spark=spark)
    caplog.set_level(logging.INFO)
    assert daemon.run(once=True, handle_signals=False) == 0
    table = Table.open(str(root))
    compactions = [i for i in table.timeline if table.timeline.was_compaction(i.time)]
    assert len(compactions) == 1, list(table.timeline)
    assert compactions[0].is_completed
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO]
    T = compactions[0].time
    assert len([m for m in said if m.startswith(f"scheduled compaction {T}")]) == 1, said
    assert len([m for m in said if f"compaction {T}" in m and "complete" in m]) == 1, said
    assert _sample(daemon, "hoodied_instants_scheduled_total", table="trips", action="compaction") == 1
    assert_same_snapshot(before, snapshot(root), "scheduled compaction")

    again = Daemon(config, spark=spark)  # nothing new: the trigger counts delta commits since that compaction
    assert again.run(once=True, handle_signals=False) == 0
    assert _sample(again, "hoodied_instants_scheduled_total", table="trips", action="compaction") == 0


def test_a_broken_table_does_not_stop_the_others(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    good = mor_table(tmp_path / "good", 6, seed=3)
    broken = tmp_path / "broken"
    (broken / ".hoodie").mkdir(parents=True)
    (broken / ".hoodie" / "hoodie.properties").write_text("hoodie.table.version=4\nhoodie.table.name=x\n")
    # A metadata table with an expression index: hoodied cannot keep it up to date, so it refuses the table.
    with_expr = cow_table(tmp_path / "with_expr", 8, seed=5)
    storage = Storage.for_uri(str(with_expr.root))
    lock = FileSystemLock(storage)
    assert schedule_indexing(storage, lock, ["column_stats"]).instant is not None
    run_indexing(storage, lock)
    config = TableConfig.load(storage)
    config.updated({METADATA_PARTITIONS: "column_stats,expr_index_x,files"}).store(storage)
    files = sorted(str(p.relative_to(with_expr.root)) for p in with_expr.root.rglob("*"))
    config = _config(
        tmp_path,
        f"""
        metrics: {{port: null}}
        tables: [{broken}, {good.root}, {with_expr.root}]
        """,
    )
    daemon = Daemon(config, spark=spark)
    with caplog.at_level("ERROR"):
        # The good table is served; the pass still exits 1, naming the two tables that failed.
        assert daemon.run(once=True, handle_signals=False) == 1
    assert "this pass: table broken: cannot poll" in caplog.text
    assert "this pass: table with_expr: cannot poll" in caplog.text
    assert not Table.open(str(good.root)).timeline.pending()
    assert _sample(daemon, "hoodied_table_poll_failures_total", table="broken") == 1
    assert _sample(daemon, "hoodied_table_poll_failures_total", table="with_expr") == 1
    assert "MetadataTableNotSupported" in caplog.text
    assert "expr_index_x" in caplog.text
    assert len(Table.open(str(with_expr.root)).timeline.pending()) == 3  # untouched
    assert sorted(str(p.relative_to(with_expr.root)) for p in with_expr.root.rglob("*")) == files
    assert _sample(daemon, "hoodied_jobs_started_total", table="with_expr", action="clean") == 0
    assert _sample(daemon, "hoodied_jobs_succeeded_total", table="good", action="compaction") == 2
    report = status_report(config)
    assert "error" in report[0], report[0]
    assert "version" in str(report[0]["error"]).lower(), report[0]


def test_a_table_with_a_metadata_table_is_served_and_a_requested_indexing_is_run(
    tmp_path: Path, spark: Any
) -> None:
    """The metadata table is kept up to date by every job; indexing is run, not scheduled (on request)."""
    t = cow_table(tmp_path / "events", 8, seed=7)
    storage = Storage.for_uri(str(t.root))
    lock = FileSystemLock(storage)
    requested = schedule_indexing(storage, lock, ["column_stats", "record_index"]).instant
    assert requested is not None
    before = snapshot(t.root)
    config = _config(
        tmp_path,
        f"""
        replica: test-replica
        metrics: {{port: null}}
        tables: [{t.root}]
        """,
    )
    daemon = Daemon(config, spark=spark)
    assert daemon.run(once=True, handle_signals=False) == 0

    table = Table.open(str(t.root))
    assert not table.timeline.pending(), table.timeline.pending()
    done = table.timeline.get(requested.time)
    assert done is not None
    assert done.state is State.COMPLETED
    assert sorted(table.config.metadata_partitions) == ["column_stats", "files", "record_index"]
    assert table.config.props["hoodie.table.metadata.partitions.inflight"] == ""
    check_metadata_table(t.root, "served by the daemon")
    assert_same_snapshot(before, snapshot(t.root), "indexed, clustered and cleaned")
    assert _sample(daemon, "hoodied_jobs_succeeded_total", table="events", action="indexing") == 1
    assert _sample(daemon, "hoodied_jobs_succeeded_total", table="events", action="clustering") == 2
    assert _sample(daemon, "hoodied_records_written_total", table="events", action="indexing") > 0
    last = read_last_results(storage)["indexing"]
    assert last["kind"] == "done"
    assert last["instant"] == requested.time
    assert str(last["message"]).startswith("built column_stats, record_index: "), last
    assert int(str(last["records"])) > 0
    text = format_status(status_report(config))
    assert "nothing pending" in text, text
    assert f"last indexing    {requested.time}  done on test-replica" in text, text


def test_status_command_prints_pending_instants_as_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = cow_table(tmp_path / "events", 8, seed=6)
    path = tmp_path / "hoodied.yaml"
    path.write_text(f"tables: [{t.root}]\n")
    assert main(["status", "--config", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [p["instant"] for p in report[0]["pending"]] == [i.time for i in t.pending]
    assert report[0]["claims"] == {}
    assert main(["status", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert out.count("unclaimed") == 3, out


def test_a_bad_configuration_is_an_error_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hoodied.yaml"
    path.write_text("tables:\n  - path: /x\n    schedule: [compact]\n")
    assert main(["run", "--config", str(path), "--once"]) == 2
    err = capsys.readouterr().err
    assert "tables[0].schedule[0]: 'compact' is not one of" in err, err


def test_damaged_committed_data_gives_the_instant_up_at_once(tmp_path: Path, spark: Any) -> None:
    """A compaction whose slice holds a damaged block inside a completed commit is refused in its Spark task;
    the daemon gives the instant up after that one attempt (retrying cannot mend data), counts it in
    ``hoodied_corrupt_data_total`` and keeps the table as it was: nothing committed, every read the same."""
    root = tmp_path / "orders"
    generate_table(str(root), GenerateSpec(table_version=8, rows=300, commits=3, partitions=1, seed=5))
    storage = Storage.for_uri(str(root))
    scheduled = schedule_compaction(storage, FileSystemLock(storage))
    assert scheduled.instant is not None
    log = next(p for p in sorted(root.rglob(".*.log.*")) if ".hoodie" not in p.relative_to(root).parts)
    data = bytearray(log.read_bytes())
    data[12] ^= 0x01  # the first block's length
    log.write_bytes(bytes(data))
    before = snapshot(root)
    config = _config(
        tmp_path,
        f"""
        replica: test-replica
        metrics: {{port: null}}
        jobs: {{max_attempts: 5, backoff: 0s}}
        tables:
          - {{path: {root}, name: orders, services: [compaction]}}
        """,
    )
    daemon = Daemon(config, spark=spark)
    assert daemon.run(once=True, handle_signals=False) != 0
    assert _sample(daemon, "hoodied_corrupt_data_total", table="orders", action="compaction") == 1
    failed = {"table": "orders", "action": "compaction", "kind": "corrupt"}
    assert _sample(daemon, "hoodied_jobs_failed_total", **failed) == 1
    assert _sample(daemon, "hoodied_instants_given_up_total", table="orders", action="compaction") == 1
    last = read_last_results(storage)["compaction"]
    assert last["kind"] == "corrupt"
    assert str(log.relative_to(root)) in str(last["message"])
    assert "CorruptLogBlock" in str(last["message"])
    now = Table.open(str(root)).timeline.get(scheduled.instant.time)
    assert now is not None
    assert now.state is State.REQUESTED
    assert_same_snapshot(before, snapshot(root), "orders")


def test_a_stop_waits_for_the_poll_scheduling_under_the_lock(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A stop while a poll schedules under the table lock ends the daemon only once the plan is written:
    closing the coordination first let the plan be written by a replica that no longer held the lock (found
    by the chaos campaign: "cannot schedule clustering: LockLost" after "stopped", and its plan on the
    timeline)."""
    root = tmp_path / "trips"
    generate_table(str(root), GenerateSpec(table_version=9, rows=100, commits=3, partitions=1, seed=5))
    config = _config(
        tmp_path,
        f"""
        metrics: {{port: null}}
        poll_interval: 1s
        tables:
          - path: {root}
            services: [compaction]
            schedule: [compaction]
            hoodie: {{hoodie.compact.inline.max.delta.commits: 2}}
        """,
    )
    monkeypatch.setenv("HOODIE_FAILPOINTS", "schedule.under_lock=sleep:4")
    daemon = Daemon(config, spark=spark)
    runner = threading.Thread(target=lambda: daemon.run(handle_signals=False), daemon=True)
    caplog.set_level(logging.INFO)
    runner.start()
    deadline = time.monotonic() + 60
    while not any("schedule.under_lock" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "the poll never scheduled"
        time.sleep(0.05)
    daemon.stop()
    runner.join(60)
    assert not runner.is_alive()
    stopped = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("scheduled compaction") for m in stopped), stopped  # before the daemon ended
    assert not any("cannot schedule" in m for m in stopped), stopped
    pending = Table.open(str(root)).timeline.pending_compactions()
    assert [i.state for i in pending] == [State.REQUESTED]


def test_a_reloaded_configuration_watches_a_new_table_without_interrupting_a_job(
    tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Three tables, then four (the file rewritten in place, as a ConfigMap is): the new table is polled
    within one poll interval and the compaction running meanwhile completes. A broken file after that is
    refused: the four tables stay watched, the error is in /status and hoodied_config_reload_ok is 0."""
    orders = mor_table(tmp_path / "orders", 8, seed=11)
    quiet = []
    for i in range(3):
        root = tmp_path / f"quiet{i}"
        generate_table(
            str(root), GenerateSpec(table_version=8, rows=30, commits=1, partitions=1, seed=20 + i)
        )
        quiet.append(root)

    def body(tables: list[Path]) -> str:
        entries = "".join(f"\n          - {{path: {t}, services: [compaction]}}" for t in tables)
        return f"""
        metrics: {{port: null}}
        poll_interval: 1s
        poll_interval_max: 1s
        tables:{entries}
        """

    config = _config(tmp_path, body([orders.root, *quiet[:2]]))
    path = tmp_path / "hoodied.yaml"
    monkeypatch.setenv("HOODIE_FAILPOINTS", "compaction.after_inflight=sleep:5")  # on the driver
    caplog.set_level(logging.INFO)
    daemon = Daemon(config, spark=spark)
    assert daemon.config_file is not None
    runner = threading.Thread(target=lambda: daemon.run(handle_signals=False), daemon=True)
    runner.start()

    def logged(text: str, timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while not any(text in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, f"not logged within {timeout} s: {text}"
            time.sleep(0.05)
        return time.monotonic()

    try:
        logged("running compaction", 120)  # then held at its failpoint for 5 s
        assert daemon.supervisor is not None
        assert len(daemon.supervisor.tables()) == 3
        path.write_text(textwrap.dedent(body([orders.root, *quiet])))
        changed = time.monotonic()
        polled = logged(f"watching table {quiet[2].name}", 30)
        assert polled - changed < 2 * config.poll_interval + 1.0  # the next poll: within one interval
        assert daemon.supervisor.running, "the job ended before the reload: it proves nothing"
        deadline = time.monotonic() + 30
        while not any(t.name == quiet[2].name and t.listing is not None for t in daemon.supervisor.tables()):
            assert time.monotonic() < deadline, "the new table was never listed"
            time.sleep(0.1)
        assert _sample(daemon, "hoodied_config_reloads_total", outcome="applied") == 1.0
        # The job running through the reload was not interrupted: it completes.
        deadline = time.monotonic() + 120
        while Table.open(str(orders.root)).timeline.pending_compactions():
            assert time.monotonic() < deadline, "the compaction never completed"
            time.sleep(0.5)
        outcomes = list(read_last_results(Storage.for_uri(str(orders.root))).values())
        assert outcomes, "no result recorded"
        assert all(o.get("ok") is True for o in outcomes), outcomes
        assert not any("cancel" in r.getMessage() for r in caplog.records)

        path.write_text("tables: [\n")  # not YAML
        daemon.config_file.request()  # as SIGHUP does
        deadline = time.monotonic() + 30
        while _sample(daemon, "hoodied_config_reload_ok") != 0.0:
            assert time.monotonic() < deadline, "the broken file was not refused"
            time.sleep(0.1)
        status = daemon.status()
        config_status = status["config"]
        assert isinstance(config_status, dict)
        assert "not valid YAML" in str(config_status["error"])
        assert len(daemon.supervisor.tables()) == 4
        assert _sample(daemon, "hoodied_config_reloads_total", outcome="refused") == 1.0
    finally:
        daemon.stop()
        runner.join(60)
    assert not runner.is_alive()


def test_with_an_admin_port_changes_are_taken_there_only(tmp_path: Path, spark: Any) -> None:
    """admin.port: the control commands are served on a server of their own (bound to admin.host), and the
    metrics port, open to probes and Prometheus, refuses them with 403 naming where they go; reads are
    served on both."""
    root = tmp_path / "orders"
    generate_table(str(root), GenerateSpec(table_version=8, rows=20, commits=1, partitions=1, seed=3))
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    config = _config(
        tmp_path,
        f"""
        poll_interval: 1s
        metrics: {{host: 127.0.0.1, port: 0}}
        admin: {{port: 0, host: 127.0.0.1, token_file: {token}, state_dir: {tmp_path / "state"}}}
        tables: [{{path: {root}, name: orders}}]
        """,
    )
    daemon = Daemon(config, spark=spark)
    runner = threading.Thread(target=lambda: daemon.run(handle_signals=False), daemon=True)
    runner.start()

    def post(base: str) -> tuple[int, dict[str, object]]:
        request = urllib.request.Request(
            f"{base}/api/v1/tables/orders/pause",
            data=json.dumps({"reason": "backfill"}).encode(),
            method="POST",
            headers={"Authorization": "Bearer s3cret"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    try:
        deadline = time.monotonic() + 60
        while daemon.health is None or daemon.admin is None or daemon.heartbeats.last_poll_succeeded is None:
            assert time.monotonic() < deadline, "the servers never started, or no poll ended"
            time.sleep(0.1)
        assert daemon.health.url != daemon.admin.url
        code, body = post(daemon.health.url)
        assert code == 403, body
        assert f"admin port only ({daemon.admin.url})" in str(body["error"])
        assert FileControlStore(tmp_path / "state").read_all() == {}
        code, body = post(daemon.admin.url)
        assert code == 200, body
        assert body["control"]["state"] == "paused"  # type: ignore[index]
        deadline = time.monotonic() + 30
        for base in (daemon.health.url, daemon.admin.url):  # as the next poll reads the control document
            while True:
                with urllib.request.urlopen(f"{base}/api/v1/tables/orders", timeout=10) as r:
                    if json.loads(r.read())["control"]["state"] == "paused":
                        break
                assert time.monotonic() < deadline, f"{base} never showed the pause"
                time.sleep(0.2)
    finally:
        daemon.stop()
        runner.join(60)
    assert not runner.is_alive()
