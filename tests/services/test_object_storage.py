"""Every service and the daemon on tables in an S3-compatible store (moto's server on 127.0.0.1), configured
only by the standard environment variables, judged by hudi-rs reading the same ``s3://`` URI.

Tables are written locally (fast) and uploaded; the services then run on the ``s3://`` URI through the CLI
(in-process, the test session's Spark) or the daemon: timeline files by conditional PUT, data files by plain
PUT, the table lock Hudi's storage-based one (``.hoodie/.locks/table_lock.json``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from hoodie import Table
from hoodie.clean.plan import pending_cleans
from hoodie.clustering.update_strategy import UPDATES_STRATEGY, UpdateStrategy
from hoodie.lock.storage_based import LOCK_FILE
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodie.timeline.metadata import decode_cleaner_plan, decode_requested_replace_metadata
from hoodied.cli import main
from hoodied.config import DaemonConfig
from hoodied.daemon import Daemon
from support import clean_checks, clustering_checks, compaction_checks
from support.azurite import Azurite
from support.daemon_tables import PendingTable, cow_table, mor_table
from support.metadata_checks import check_metadata_table
from support.replicas import Cluster, completed_files, wait_completed
from support.s3_server import S3Server
from support.server_process import free_port
from support.shared import REPO_ROOT
from support.zk_server import ZooKeeperServer

pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.slow]


def _on_s3(server: S3Server, tmp_path: Path, spec: GenerateSpec) -> str:
    local = tmp_path / "local"
    generate_table(str(local), spec)
    return server.upload(local, f"s3://lake/{uuid.uuid4().hex[:10]}")


def _cli(*args: str) -> None:
    assert main([*args, "--spark-master", "local[2]"]) == 0


@pytest.mark.parametrize("version", [6, 8, 9])
def test_compaction(s3_server: S3Server, tmp_path: Path, spark: Any, version: int) -> None:
    uri = _on_s3(s3_server, tmp_path, GenerateSpec(table_version=version, rows=300, commits=3, partitions=2))
    before = compaction_checks.capture(uri)
    _cli("compact", uri, "--mode", "schedule-and-execute")
    table = Table.open(uri)
    (done,) = [i for i in table.timeline.completed() if table.timeline.was_compaction(i.time)]
    compaction_checks.check_after(uri, before, done.time, f"v{version} on S3")
    lock = json.loads(table.storage.read(LOCK_FILE))
    assert lock["expired"] is True  # the storage-based lock was taken, and released


@pytest.mark.parametrize("version", [6, 8, 9])
def test_clustering(s3_server: S3Server, tmp_path: Path, spark: Any, version: int) -> None:
    spec = GenerateSpec(table_type="COPY_ON_WRITE", table_version=version, rows=200, commits=4, partitions=1)
    uri = _on_s3(s3_server, tmp_path, spec)
    before = clustering_checks.capture(uri)
    # No writer beside the table: every candidate is planned (as with allow-update writers).
    allow = f"{UPDATES_STRATEGY}={UpdateStrategy.ALLOW.value}"
    _cli("cluster", uri, "--mode", "schedule-and-execute", "--sort-columns", "rider", "--conf", allow)
    table = Table.open(uri)
    (done,) = [i for i in table.timeline.completed() if i.action == "replacecommit"]
    requested = table.storage.read(table.timeline.file_of(done.time, State.REQUESTED))
    plan = decode_requested_replace_metadata(requested).clustering_plan
    assert plan is not None
    clustering_checks.check_after(uri, before, done.time, plan, "clustering on S3", sort_columns=("rider",))


@pytest.mark.parametrize("version", [6, 8, 9])
def test_clean(s3_server: S3Server, tmp_path: Path, spark: Any, version: int) -> None:
    spec = GenerateSpec(table_type="COPY_ON_WRITE", table_version=version, rows=200, commits=4, partitions=2)
    uri = _on_s3(s3_server, tmp_path, spec)
    before = clean_checks.capture_reads(uri)
    _cli("clean", uri, "--mode", "schedule", "--conf", "hoodie.clean.commits.retained=1")
    table = Table.open(uri)
    (pending,) = pending_cleans(table)
    plan = decode_cleaner_plan(table.storage.read(table.timeline.file_of(pending.time, State.REQUESTED)))
    _cli("clean", uri, "--mode", "execute")
    clean_checks.check_clean(uri, before, pending.time, plan, "clean on S3")
    assert clean_checks.data_bytes(uri) < before.data_bytes


@pytest.mark.parametrize("version", [6, 8, 9])
def test_indexing_and_metadata_table_upkeep(
    s3_server: S3Server, tmp_path: Path, spark: Any, version: int
) -> None:
    spec = GenerateSpec(table_version=version, rows=300, commits=3, partitions=2)
    uri = _on_s3(s3_server, tmp_path, spec)
    _cli("index", uri, "--mode", "schedule-and-execute", "--index-types", "column_stats,record_index")
    check_metadata_table(uri, "indexed on S3")  # type: ignore[arg-type]
    before = compaction_checks.capture(uri)
    _cli("compact", uri, "--mode", "schedule-and-execute")
    table = Table.open(uri)
    (done,) = [i for i in table.timeline.completed() if table.timeline.was_compaction(i.time)]
    compaction_checks.check_after(uri, before, done.time, "compaction with a metadata table on S3")
    check_metadata_table(uri, "kept up to date on S3")  # type: ignore[arg-type]


def test_the_embedded_daemon_on_s3(s3_server: S3Server, tmp_path: Path, spark: Any) -> None:
    """The embedded daemon serves an s3:// table (storage-based lock, claims as conditional PUTs); an idle
    poll afterwards costs one listing of the timeline folder."""
    uri = _on_s3(s3_server, tmp_path, GenerateSpec(table_version=8, rows=300, commits=4, partitions=2))
    before = compaction_checks.capture(uri)
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            reschedule_interval: 1h
            poll_interval_max: 30s  # every poll lists the table (below: what an idle poll costs)
            defaults:
              schedule: [compaction]
              hoodie: {{hoodie.compact.inline.max.delta.commits: 1}}
            tables: [{{path: "{uri}", name: lake_t}}]
            """
        )
    )
    daemon = Daemon(config, spark=spark)
    assert daemon.run(once=True, handle_signals=False) == 0
    table = Table.open(uri)
    compactions = [i for i in table.timeline.completed() if table.timeline.was_compaction(i.time)]
    assert len(compactions) == 1
    compaction_checks.check_after(uri, before, compactions[0].time, "embedded daemon on S3")
    requests = daemon.metrics.registry.get_sample_value(
        "hoodied_storage_requests_total", {"table": "lake_t", "service": "poll", "op": "LIST"}
    )
    assert requests, "the poll's requests are counted"
    assert daemon.supervisor is not None
    (watched,) = daemon.supervisor.tables()
    daemon.supervisor.poll()  # sees the completed compaction (a changed listing: scheduling re-evaluated)
    counted = watched.storage.requests.snapshot()
    daemon.supervisor.poll()
    daemon.supervisor.poll()
    after = watched.storage.requests.snapshot()
    idle = {op: after.get(op, 0) - counted.get(op, 0) for op in after}
    assert {op: n for op, n in idle.items() if n} == {"LIST": 2}, idle  # one LIST per idle poll


def test_storage_options_instead_of_the_environment(
    s3_server: S3Server, tmp_path: Path, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's --storage-option gives what the environment would (and wins over it)."""
    uri = _on_s3(s3_server, tmp_path, GenerateSpec(table_version=8, rows=100, commits=2, partitions=1))
    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ALLOW_HTTP"):
        monkeypatch.delenv(key)
    options = [
        f"endpoint={s3_server.endpoint}",
        "allow_http=true",
        "access_key_id=hoodied-test",
        "secret_access_key=hoodied-test-secret",
    ]
    args = [arg for option in options for arg in ("--storage-option", option)]
    started = time.monotonic()
    assert main(["timeline", uri, *args]) == 0
    _cli("compact", uri, "--mode", "schedule-and-execute", *args)
    assert time.monotonic() - started < 300
    table = Table.open(uri, dict(o.split("=", 1) for o in options))
    assert any(table.timeline.was_compaction(i.time) for i in table.timeline.completed())
    assert Storage.for_uri(uri, dict(o.split("=", 1) for o in options)).exists(LOCK_FILE)


def test_generate_writes_to_a_store_named_by_storage_options(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``hoodied generate`` takes ``--storage-option`` like every other command (issue 35: it had none, so a
    demo table on a store needed the environment)."""
    s3_server.bucket("lake")
    uri = f"s3://lake/{uuid.uuid4().hex[:10]}"
    for key in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ALLOW_HTTP"):
        monkeypatch.delenv(key)
    options = {
        "endpoint": s3_server.endpoint,
        "allow_http": "true",
        "access_key_id": "hoodied-test",
        "secret_access_key": "hoodied-test-secret",
    }
    args = [arg for k, v in options.items() for arg in ("--storage-option", f"{k}={v}")]
    assert main(["generate", uri, "--rows", "50", "--commits", "2", "--partitions", "1", *args]) == 0
    table = Table.open(uri, options)
    assert len(table.timeline.completed_writes()) == 2
    assert table.read().num_rows > 0


def test_a_one_off_fits_its_store_requests_inside_the_instant_lease(
    s3_server: S3Server, tmp_path: Path, spark: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """A one-off opens the store as the daemon does (issue 33: no write may outlast the lease): a request
    ``timeout`` longer than the instant lease guarantees is refused before anything is written, naming the
    keys on both sides; a ``retry_timeout`` too long for it is lowered with a warning, and the run
    completes."""
    uri = _on_s3(s3_server, tmp_path, GenerateSpec(table_version=8, rows=100, commits=2, partitions=1))
    before = sorted(i.file_name for i in Table.open(uri).timeline.instants)
    short_lease = ["--conf", "hoodie.client.heartbeat.interval_in_ms=5000"]  # 10 s expiry, 4 s guaranteed
    code = main(
        ["compact", uri, "--mode", "schedule-and-execute", *short_lease, "--storage-option", "timeout=30s"]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "LeaseMarginConfigError" in err
    assert "timeout=30 s" in err
    assert "hoodie.client.heartbeat.interval_in_ms" in err
    assert sorted(i.file_name for i in Table.open(uri).timeline.instants) == before
    options = ["--storage-option", "timeout=2s", "--storage-option", "retry_timeout=60s"]
    _cli("compact", uri, "--mode", "schedule-and-execute", *short_lease, *options)
    assert "retry_timeout lowered from 60s to 2000ms" in capsys.readouterr().err
    table = Table.open(uri)
    assert any(table.timeline.was_compaction(i.time) for i in table.timeline.completed())


# -- three replicas with ZooKeeper, tables on S3 -----------------------------------------------------------


def _upload_pending(s3_server: S3Server, tables: list[PendingTable]) -> list[str]:
    return [s3_server.upload(t.root, f"s3://lake/{uuid.uuid4().hex[:10]}") for t in tables]


@pytest.mark.zookeeper
@pytest.mark.parametrize(
    "versions",
    [pytest.param((9,), id="v9"), pytest.param((6, 8, 9), id="v6-v8-v9", marks=pytest.mark.campaign)],
)
def test_three_replicas_on_s3_run_every_instant_once_and_survive_a_kill(
    s3_server: S3Server,
    tmp_path: Path,
    zookeeper_server: ZooKeeperServer,
    cluster_factory: list[Cluster],
    versions: tuple[int, ...],
) -> None:
    """Three ``hoodied run`` processes share S3 tables (a v9 MOR one; in the campaign v6 MOR, v8 COW and v9
    MOR) through ZooKeeper; one is killed while its compaction's tasks have written: another takes the
    instant over and completes it. Every instant completes once, and hudi-rs reads the same rows from the same
    s3:// URIs."""
    make = {6: mor_table, 8: cow_table, 9: mor_table}
    # The first table is a MOR one: its compaction is where the victim is killed.
    order = sorted(versions, key=lambda v: make[v] is not mor_table)
    tables = [make[v](tmp_path / f"t{v}", v, seed=80 + v) for v in order]
    uris = _upload_pending(s3_server, tables)
    before = {u: compaction_checks.capture(u).theirs for u in uris}
    cluster = Cluster(tmp_path, zookeeper_server, uris)
    cluster_factory.append(cluster)
    victim = cluster.start("victim", failpoints="compaction.task_after_write=sleep:120", cores=2)
    first = next(i for i in tables[0].pending if i.action == "compaction")
    deadline = time.monotonic() + 180
    storage = Storage.for_uri(uris[0])
    while not any(f.name.endswith(f"_{first.time}.parquet") for f in storage.list("", recursive=True)):
        assert time.monotonic() < deadline, cluster.tail(victim)
        assert victim.proc.poll() is None, cluster.tail(victim)
        time.sleep(0.5)
    rescuers = [cluster.start(f"r{n}") for n in (1, 2)]
    os.killpg(victim.proc.pid, signal.SIGKILL)  # mid-job: its compaction's tasks have written
    victim.proc.wait(30)
    took = wait_completed(tables, 600, cluster, uris)
    codes = [cluster.stop(r) for r in rescuers]
    assert codes == [0, 0], [cluster.tail(r) for r in rescuers]
    for t, uri in zip(tables, uris, strict=True):
        for instant in t.pending:
            assert len(completed_files(uri, instant)) == 1, (uri, instant)
        after = compaction_checks.capture(uri).theirs
        assert before[uri] is not None
        assert after is not None
        compaction_checks.assert_same_rows(
            after,
            before[uri],
            ["_hoodie_partition_path", "_hoodie_record_key"],
            ignore_columns=("_hoodie_file_name",),
            context=uri,
        )
    print(
        f"{sum(len(t.pending) for t in tables)} instants on {len(tables)} S3 table(s) completed {took:.1f} s "
        "after the kill"
    )


@pytest.mark.zookeeper
def test_the_replicas_example_works_as_written_against_an_s3_endpoint(
    s3_server: S3Server, tmp_path: Path, zookeeper_server: ZooKeeperServer
) -> None:
    """config/replicas.yaml, changed only where a deployment must change it (the ZooKeeper address, a free
    metrics port), serves its s3://lake/hudi tables, the store reached through the environment alone."""
    orders = tmp_path / "orders"
    generate_table(str(orders), GenerateSpec(table_version=8, rows=200, commits=7, partitions=2, seed=91))
    clicks = tmp_path / "clicks"
    generate_table(str(clicks), GenerateSpec(table_version=6, rows=100, commits=7, partitions=1, seed=92))
    lake = f"hudi-{uuid.uuid4().hex[:6]}"  # a fresh prefix per run: the example's bucket is shared
    text = (REPO_ROOT / "config" / "replicas.yaml").read_text()
    text = text.replace("zk-0.zk:2181,zk-1.zk:2181,zk-2.zk:2181", zookeeper_server.connect)
    text = text.replace("port: 9464", f"port: {free_port()}").replace("s3://lake/hudi/", f"s3://lake/{lake}/")
    s3_server.upload(orders, f"s3://lake/{lake}/orders")
    s3_server.upload(clicks, f"s3://lake/{lake}/events/2026/clicks")
    config = tmp_path / "replicas.yaml"
    config.write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "hoodied.cli", "run", "--once", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for uri in (f"s3://lake/{lake}/orders", f"s3://lake/{lake}/events/2026/clicks"):
        timeline = Table.open(uri).timeline
        assert any(timeline.was_compaction(i.time) for i in timeline.completed()), uri


@pytest.mark.azure
def test_compaction_on_azure(azurite: Azurite, tmp_path: Path, spark: Any) -> None:
    """The same on Azure (Azurite): conditional writes are Azure's If-None-Match / If-Match."""
    local = tmp_path / "local"
    generate_table(str(local), GenerateSpec(table_version=8, rows=300, commits=3, partitions=2))
    uri = f"{azurite.container('lake')}/{uuid.uuid4().hex[:10]}"
    target = Storage.for_uri(uri)
    for path in sorted(local.rglob("*")):
        if path.is_file():
            target.create(path.relative_to(local).as_posix(), path.read_bytes(), overwrite=True)
    before = compaction_checks.capture(uri)
    assert before.theirs is not None, "hudi-rs reads the table on Azurite"
    _cli("compact", uri, "--mode", "schedule-and-execute")
    table = Table.open(uri)
    (done,) = [i for i in table.timeline.completed() if table.timeline.was_compaction(i.time)]
    compaction_checks.check_after(uri, before, done.time, "v8 on Azure")
    assert json.loads(table.storage.read(LOCK_FILE))["expired"] is True
