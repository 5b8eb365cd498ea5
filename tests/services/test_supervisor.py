"""The supervisor's rules, in this process (embedded coordination, the test session's Spark): a failing
instant backs off and is given up after its attempts while other work goes on; an abandoned inflight instant
is taken over only after the grace, and one hoodied did not start only once its owner is provably gone;
SIGTERM drains a running job and exits 0, leaving it retryable."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie import Table
from hoodie.compaction.execute import prepare_compaction, run_compaction_task
from hoodie.errors import StorageError
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.storage.local import LocalBackend
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import Instant, State
from hoodied.config import DaemonConfig
from hoodied.coordination import EmbeddedCoordination
from hoodied.daemon import status_report
from hoodied.health import Heartbeats
from hoodied.metrics import Metrics
from hoodied.ownership import record_start
from hoodied.supervisor import Supervisor
from support.compare import assert_same_rows
from support.daemon_tables import assert_same_snapshot, mor_table, snapshot
from support.replicas import start_daemon

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _supervisor(config: DaemonConfig, spark: Any, clock: Clock) -> Supervisor:
    metrics = Metrics(replica="t")
    return Supervisor(
        config,
        EmbeddedCoordination(metrics),
        metrics,
        Heartbeats(started_at=time.time()),
        lambda: spark,
        clock=clock,
    )


def _pass(supervisor: Supervisor) -> None:
    assert supervisor.run_pass(timeout=300)


def _value(s: Supervisor, name: str, **labels: str) -> float:
    return s.metrics.registry.get_sample_value(name, labels) or 0.0


def test_a_failing_instant_backs_off_and_is_given_up_while_others_run(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    bad = mor_table(tmp_path / "bad", 8, seed=21)
    good = mor_table(tmp_path / "good", 8, seed=22)
    broken = bad.pending[1]  # a compaction whose plan we damage
    table = Table.open(str(bad.root))
    plan_file = bad.root / table.timeline.file_of(broken.time, State.REQUESTED)
    plan_file.write_bytes(b"Obj\x01 not a plan")
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            jobs: {{max_attempts: 2, backoff: 30s}}
            tables: [{bad.root}, {good.root}]
            """
        )
    )
    clock = Clock()
    s = _supervisor(config, spark, clock)
    _pass(s)
    assert not Table.open(str(good.root)).timeline.pending()
    assert _value(s, "hoodied_jobs_failed_total", table="bad", action="compaction", kind="failed") == 1
    assert _value(s, "hoodied_jobs_succeeded_total", table="bad", action="compaction") == 1  # the other one
    assert (
        f"compaction {broken.time} of bad failed (attempt 1 of 2), retrying in 30 s: CorruptTimelineFile"
        in (caplog.text)
    )

    _pass(s)  # backing off: not retried yet
    assert _value(s, "hoodied_jobs_failed_total", table="bad", action="compaction", kind="failed") == 1
    clock.now += 31
    _pass(s)  # second attempt fails: given up
    assert _value(s, "hoodied_jobs_failed_total", table="bad", action="compaction", kind="failed") == 2
    assert _value(s, "hoodied_instants_given_up_total", table="bad", action="compaction") == 1
    assert f"compaction {broken.time} of bad failed 2 times; giving up until restart" in caplog.text
    clock.now += 3600
    _pass(s)
    assert _value(s, "hoodied_jobs_failed_total", table="bad", action="compaction", kind="failed") == 2
    # Nothing lost: the damaged instant is still requested, every committed row reads as before.
    now = Table.open(str(bad.root)).timeline.get(broken.time)
    assert now is not None
    assert now.state is State.REQUESTED
    assert _value(s, "hoodied_pending_instants", table="bad", action="compaction") == 1


def test_an_abandoned_inflight_instant_is_taken_over_after_the_grace(tmp_path: Path, spark: Any) -> None:
    t = mor_table(tmp_path / "orders", 6, seed=23)
    before = snapshot(t.root)
    storage = Storage.for_uri(str(t.root))
    target = t.pending[1]
    record_start(storage, "compaction", target.time, "dead", "a1")  # a hoodied runner that then died
    prepare_compaction(storage, FileSystemLock(storage), target.time)
    config = DaemonConfig.parse(
        f"metrics: {{port: null}}\njobs: {{takeover_grace: 60s}}\ntables: [{t.root}]\n"
    )
    clock = Clock()
    s = _supervisor(config, spark, clock)
    _pass(s)
    now = Table.open(str(t.root)).timeline.get(target.time)
    assert now is not None
    assert now.state is State.INFLIGHT  # within the grace: left alone
    assert len(Table.open(str(t.root)).timeline.pending()) == 1
    clock.now += 61
    _pass(s)
    now = Table.open(str(t.root)).timeline.get(target.time)
    assert now is not None
    assert now.is_completed
    assert_same_snapshot(before, snapshot(t.root), "after the takeover")


def test_an_inflight_instant_hoodied_did_not_start_waits_until_its_owner_is_provably_gone(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A compaction another process started (Hudi's HoodieCompactor, a writer's async compaction) is not
    touched while its owner may be writing: not after the grace, not with a fresh heartbeat; it is taken over
    once its heartbeat expired (one instant) or once it is older than takeover_foreign_after (the other)."""
    t = mor_table(tmp_path / "orders", 8, seed=25)
    before = snapshot(t.root)
    storage = Storage.for_uri(str(t.root))
    by_heartbeat, by_age = t.pending[1], t.pending[2]
    written: list[str] = []
    for target in (by_heartbeat, by_age):  # the foreign owner started both and wrote a base file of each
        prepared = prepare_compaction(storage, FileSystemLock(storage), target.time)
        written.append(run_compaction_task(prepared.tasks[0], "0-0-0").stat.path or "")
    assert all(written)
    assert all((t.root / f).exists() for f in written)
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            jobs: {{takeover_grace: 60s}}
            tables: [{{path: {t.root}, takeover_foreign_after: 1h}}]
            """
        )
    )
    clock = Clock()
    s = _supervisor(config, spark, clock)

    def state(instant: Instant) -> State:
        now = Table.open(str(t.root)).timeline.get(instant.time)
        assert now is not None
        return now.state

    _pass(s)
    clock.now += 61  # past the grace: still left alone, and said why
    with caplog.at_level(logging.WARNING, logger="hoodied.poller"):
        _pass(s)
    assert state(by_heartbeat) is State.INFLIGHT
    assert state(by_age) is State.INFLIGHT
    assert all((t.root / f).exists() for f in written)  # nothing of the owner's was rolled back
    reason = "not started by hoodied, and its owner is not provably gone (no expired Hudi heartbeat)"
    assert f"compaction {by_heartbeat.time} of orders is inflight and unclaimed: {reason}" in caplog.text
    [entry] = status_report(config)
    owners = entry["inflight"]
    assert isinstance(owners, dict)
    assert owners[f"compaction-{by_age.time}"].startswith(f"left alone: {reason}: inflight for ")

    heartbeat = t.root / ".hoodie" / ".heartbeat" / by_heartbeat.time
    heartbeat.parent.mkdir(exist_ok=True)
    heartbeat.touch()  # the owner is alive
    clock.now += 61
    _pass(s)
    assert state(by_heartbeat) is State.INFLIGHT
    old = time.time() - 600  # its heartbeat stopped 10 minutes ago (expiry: 2 x 60 s)
    os.utime(heartbeat, (old, old))
    _pass(s)
    assert state(by_heartbeat) is State.COMPLETED
    assert state(by_age) is State.INFLIGHT
    inflight = t.root / ".hoodie" / "timeline" / f"{by_age.time}.compaction.inflight"
    started = time.time() - 7200  # started two hours ago: over takeover_foreign_after
    os.utime(inflight, (started, started))
    _pass(s)
    assert state(by_age) is State.COMPLETED
    assert not any((t.root / f).exists() for f in written)  # the owner's files were rolled back first
    assert_same_snapshot(before, snapshot(t.root), "after both takeovers")


def test_sigterm_drains_then_cancels_a_running_job_and_exits_0(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "orders", 8, seed=24)
    before = snapshot(t.root)
    config = tmp_path / "hoodied.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            poll_interval: 1s
            spark: {{master: "local[2]", max_concurrent_jobs: 1}}
            metrics: {{port: null}}
            jobs: {{shutdown_grace: 3s, takeover_grace: 0s}}
            tables: [{t.root}]
            """
        )
    )
    env = {**os.environ, "HOODIE_FAILPOINTS": "compaction.task_after_write=sleep:300"}
    log = tmp_path / "daemon.log"
    proc = start_daemon(config, log, env)
    try:
        deadline = time.monotonic() + 120
        first = t.pending[1].time
        while not any(first in p.name for p in t.root.rglob("*.parquet")):
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            assert proc.poll() is None, log.read_text()[-3000:]
            time.sleep(0.3)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0, log.read_text()[-3000:]
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    text = log.read_text()
    assert "cancelled the jobs still running" in text, text[-3000:]
    assert took < 3 + 30, took
    # Retryable: another run completes every instant, and no committed row was lost.
    env.pop("HOODIE_FAILPOINTS")
    done = subprocess.run(
        [sys.executable, "-m", "hoodied.cli", "run", "--config", str(config), "--once"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not Table.open(str(t.root)).timeline.pending()
    assert_same_snapshot(before, snapshot(t.root), "after drain and re-run")


class ReadOnlyStorage(Storage):
    """A table on storage that refuses every write (a read-only mount or bucket policy)."""

    def create(self, path: str, data: bytes, *, overwrite: bool = False) -> str | None:
        raise StorageError(f"read-only: cannot write {path}")

    def create_stream(self, path: str, *, overwrite: bool = False) -> Any:
        raise StorageError(f"read-only: cannot write {path}")

    def delete(self, path: str, *, missing_ok: bool = True) -> bool:
        raise StorageError(f"read-only: cannot delete {path}")

    def delete_dir(self, path: str) -> None:
        raise StorageError(f"read-only: cannot delete {path}")


def test_a_read_only_table_keeps_its_pending_work_in_view(tmp_path: Path, spark: Any) -> None:
    """Scheduling and claiming need writes; a table that refuses them is polled all the same: its pending
    instants stay in the metrics and in status, scheduling says why it failed, and a job attempt is a
    failed attempt (backed off), not a crash of the worker."""
    t = mor_table(tmp_path / "orders", 8, seed=31)
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            jobs: {{max_attempts: 3, backoff: 30s}}
            tables:
              - {{path: {t.root}, name: orders, schedule: [compaction, clean]}}
            """
        )
    )
    s = _supervisor(config, spark, Clock())
    s.refresh_tables()
    (watched,) = s.tables()
    plain = watched.storage
    watched.storage = ReadOnlyStorage(LocalBackend(), plain.full_path(""), plain.uri)
    items = s.poll()
    assert watched.last_error is None
    assert watched.schedule_error is not None
    assert "read-only" in watched.schedule_error
    pending = len([i for i in t.pending if i.action == "compaction"])
    assert _value(s, "hoodied_pending_instants", table="orders", action="compaction") == pending
    assert len(items) == len(t.pending)
    outcome = s.run_item(items[0])
    assert outcome is not None
    assert outcome.kind == "failed"
    assert "cannot claim" in outcome.message
    assert _value(s, "hoodied_jobs_failed_total", table="orders", action=items[0].service, kind="failed") == 1


def test_the_daemon_schedules_and_runs_log_compaction(tmp_path: Path, spark: Any) -> None:
    """A service added to the registry is run by the daemon like the others: log compaction is scheduled
    where ``schedule`` lists it, claimed and run as a Spark job, and counted; the rows stay the same."""
    root = tmp_path / "orders"
    spec = GenerateSpec(table_version=8, rows=200, commits=5, partitions=1, seed=5, update_fraction=0.5)
    generate_table(str(root), spec)
    before = Table.open(str(root)).read()
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            tables:
              - path: {root}
                name: orders
                schedule: [logcompaction]
                hoodie: {{hoodie.log.compaction.blocks.threshold: '3'}}
            """
        )
    )
    s = _supervisor(config, spark, Clock())
    _pass(s)
    table = Table.open(str(root))
    done = [
        i for i in table.timeline.completed() if table.timeline.requested_action(i.time) == "logcompaction"
    ]
    assert len(done) == 1, [str(i) for i in table.timeline]
    assert _value(s, "hoodied_instants_scheduled_total", table="orders", action="logcompaction") == 1
    assert _value(s, "hoodied_jobs_succeeded_total", table="orders", action="logcompaction") == 1
    assert not table.timeline.pending()
    assert_same_rows(table.read(), before, ["_hoodie_record_key", "_hoodie_partition_path"])


def test_an_instant_offered_again_after_this_replica_completed_it_is_not_blamed_on_another_runner(
    tmp_path: Path, spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 35: a single replica logged "done by another runner" about its own clean, offered again by a poll
    that read the table before the clean completed. Its own completion is known from its last result."""
    t = mor_table(tmp_path / "t", 8, seed=29)
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            tables:
              - {{path: {t.root}, name: orders, schedule: []}}
            """
        )
    )
    s = _supervisor(config, spark, Clock())
    s.refresh_tables()
    (clean,) = [i for i in s.poll() if i.service == "clean"]
    failed = {"table": "orders", "action": "clean", "kind": "failed"}
    assert s.metrics.registry.get_sample_value("hoodied_jobs_failed_total", failed) == 0.0  # from the poll on
    done = s.run_item(clean)
    assert done is not None
    assert done.ok, done
    caplog.set_level(logging.DEBUG, logger="hoodied.runner")
    assert s.run_item(clean) is None
    said = [r for r in caplog.records if r.name == "hoodied.runner" and clean.instant.time in r.getMessage()]
    assert [r.levelno for r in said] == [logging.DEBUG], [r.getMessage() for r in said]
    assert "completed here already" in said[0].getMessage()
    assert not any("another runner" in r.getMessage() for r in caplog.records)
