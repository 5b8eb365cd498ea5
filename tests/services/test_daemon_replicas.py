"""Several ``hoodied run`` processes against one real ZooKeeper, with real Spark: every pending instant
completes exactly once, a replica killed or cut off mid-job leaves its instant to another, which completes it,
and readers see the same rows throughout (hudi-rs is the judge)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie.timeline.instant import Instant
from support.compare import assert_same_rows
from support.daemon_tables import PendingTable, cow_table, mor_table
from support.hudi_oracle import HudiOracle, OracleRows, Query
from support.replicas import (
    POLL_INTERVAL,
    SESSION_TIMEOUT,
    TAKEOVER_GRACE,
    Cluster,
    Replica,
    completed_files,
    wait_completed,
)
from support.zk_server import ZooKeeperServer

pytestmark = [pytest.mark.zookeeper, pytest.mark.spark, pytest.mark.slow]


def _hudi_rs(root: Path) -> pa.Table:
    with tempfile.TemporaryDirectory(prefix="hoodie-oracle-") as work:
        result = HudiOracle(Path(work)).run(root, [Query.snapshot()])[0]
    assert isinstance(result, OracleRows), f"hudi-rs cannot read {root}: {result}"
    return result.table


def _same(before: pa.Table, after: pa.Table, context: str) -> None:
    key = ["_hoodie_partition_path", "_hoodie_record_key"]
    assert_same_rows(after, before, key, ignore_columns=("_hoodie_file_name",), context=context)


def _service(instant: Instant) -> str:
    return {"replacecommit": "clustering"}.get(instant.action, instant.action)


def _events(replicas: list[Replica], phrase: str) -> Counter[tuple[str, str, str]]:
    """(replica, action, instant) of log records whose message starts with ``phrase``."""
    out: Counter[tuple[str, str, str]] = Counter()
    for r in replicas:
        for rec in r.records():
            msg = str(rec.get("msg", ""))
            if msg.startswith(phrase) and "instant" in rec:
                out[(r.name, str(rec.get("action")), str(rec["instant"]))] += 1
    return out


def _started_at(replica: Replica, instants: set[str]) -> dict[str, datetime]:
    """When ``replica`` logged starting each of ``instants`` (its last start of each)."""
    out: dict[str, datetime] = {}
    for rec in replica.records():
        if str(rec.get("msg", "")).startswith("running ") and rec.get("instant") in instants:
            out[str(rec["instant"])] = datetime.fromisoformat(str(rec["ts"]).replace("Z", "+00:00"))
    assert set(out) == instants, f"{replica.name} started {sorted(out)}, not all of {sorted(instants)}"
    return out


def _build(tmp: Path, count: int) -> list[PendingTable]:
    tables = []
    for i in range(count):
        version = (6, 8, 9)[i % 3]
        make = mor_table if i % 2 == 0 else cow_table
        tables.append(make(tmp / f"t{i}_v{version}", version, seed=40 + i))
    return tables


@pytest.mark.parametrize(
    "n_tables",
    [pytest.param(4, id="12-instants"), pytest.param(10, id="30-instants", marks=pytest.mark.campaign)],
)
def test_three_replicas_run_thirty_instants_exactly_once(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, cluster_factory: list[Cluster], n_tables: int
) -> None:
    tables = _build(tmp_path / "tables", n_tables)
    pending = [(t, i) for t in tables for i in t.pending]
    assert len(pending) == 3 * n_tables
    before = {t.root: _hudi_rs(t.root) for t in tables}

    cluster = Cluster(tmp_path, zookeeper_server, tables)
    cluster_factory.append(cluster)
    replicas = [cluster.start(f"r{n}") for n in (1, 2, 3)]
    took = wait_completed(tables, 600, cluster)
    time.sleep(3 * POLL_INTERVAL)  # one more poll each: the pending gauges fall to 0
    final = [r.scrape() for r in replicas]
    codes = [cluster.stop(r) for r in replicas]
    assert codes == [0, 0, 0], [cluster.tail(r) for r in replicas]

    # Exactly once: one completed file per instant, one run and one completion in the logs of all replicas.
    for t, instant in pending:
        files = completed_files(t.root, instant)
        assert len(files) == 1, f"{t.root.name} {instant}: {files}"
    runs = _events(replicas, "running ")
    finished: Counter[tuple[str, str]] = Counter()
    for r in replicas:
        for rec in r.records():
            msg = str(rec.get("msg", ""))
            if " completed in " in msg and "instant" in rec:
                finished[(str(rec.get("action")), str(rec["instant"]))] += 1
    started: Counter[tuple[str, str]] = Counter()
    for (_, action, instant), n in runs.items():
        started[(action, instant)] += n
    for t, instant in pending:
        key = (_service(instant), instant.time)
        assert started[key] == 1, f"{t.root.name} {key} ran {started[key]} times"
        assert finished[key] == 1, f"{t.root.name} {key} completed {finished[key]} times"
    by_replica = Counter(r for (r, _, _) in runs)
    assert sum(by_replica.values()) == len(pending)

    # Readers: hudi-rs reads every table as before.
    for t in tables:
        _same(before[t.root], _hudi_rs(t.root), t.root.name)

    # Metrics scraped during the run: the jobs, and the pending gauge falling to 0 on every replica.
    succeeded = sum(s.get("hoodied_jobs_succeeded_total", 0) for s in final if s)
    assert succeeded == len(pending), final
    # Each table is listed by one replica (hoodied.table_split): the owners saw the pending instants, every
    # table is owned once, and no replica still reports one pending.
    assert sum(max(s.get("hoodied_pending_instants", 0) for s in r.scrapes) for r in replicas) > 0
    assert sum(last.get("hoodied_tables_owned", 0) for last in final if last) == n_tables, final
    for r, last in zip(replicas, final, strict=True):
        assert last is not None, r.name
        assert last.get("hoodied_pending_instants", 0) == 0, (r.name, last)
        assert last["hoodied_zookeeper_connected"] == 1
    # Through ZooKeeper (a replica that took no table's lock has no series: the histogram is by table).
    assert sum(last.get("hoodied_lock_wait_seconds_count", 0) for last in final if last) > 0
    print(
        f"{len(pending)} instants on {n_tables} tables by 3 replicas in {took:.1f} s; "
        f"runs per replica: {dict(by_replica)}"
    )


def _claims_of(zk: ZooKeeperServer, base_path: str) -> dict[str, dict[str, object]]:
    from kazoo.client import KazooClient

    client = KazooClient(hosts=zk.connect)
    client.start(10)
    try:
        out: dict[str, dict[str, object]] = {}
        root = f"{base_path}/claims"
        if not client.exists(root):
            return out
        for scope in client.get_children(root):
            for name in client.get_children(f"{root}/{scope}"):
                data, _ = client.get(f"{root}/{scope}/{name}")
                out[name] = json.loads(data)
        return out
    finally:
        client.stop()
        client.close()


def _wait_claimed_by(cluster: Cluster, replica: str, names: set[str], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        claims = _claims_of(cluster.zk, cluster.base_path)
        if all(claims.get(n, {}).get("replica") == replica for n in names):
            return
        time.sleep(0.3)
    raise AssertionError(f"{replica} did not claim {names}: {_claims_of(cluster.zk, cluster.base_path)}")


def _wait_files_written(root: Path, instant_times: set[str], timeout: float = 60.0) -> None:
    """Until a base file of one of ``instant_times`` is written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(
            p.name.rsplit("_", 1)[-1].removesuffix(".parquet") in instant_times
            for p in root.rglob("*.parquet")
        ):
            return
        time.sleep(0.3)
    raise AssertionError(f"no file of {sorted(instant_times)} appeared in {root}")


def _one_base_file_per_group(root: Path, instant_time: str) -> None:
    ids = [p.name.split("_", 1)[0] for p in root.rglob("*.parquet") if f"_{instant_time}." in p.name]
    assert ids, f"no base file of {instant_time}"
    dupes = [i for i, n in Counter(ids).items() if n > 1]
    assert not dupes, f"two base files of {instant_time} for file groups {dupes}"


def _compactions(t: PendingTable) -> list[Instant]:
    return [i for i in t.pending if i.action == "compaction"]


def _replica_mid_job(
    tmp_path: Path,
    zk: ZooKeeperServer,
    factory: list[Cluster],
    *,
    version: int,
    seed: int,
    name: str,
    sleep: int,
) -> tuple[PendingTable, pa.Table, Cluster, Replica, list[Instant]]:
    """A MOR table with two pending compactions, and a replica that claimed both and is mid-job: its tasks
    wrote a file, then sleep ``sleep`` seconds. Returns the table, hudi-rs's snapshot before, the cluster,
    the replica and the compactions."""
    t = mor_table(tmp_path / "orders", version, seed=seed)
    before = _hudi_rs(t.root)
    cluster = Cluster(tmp_path, zk, [t])
    factory.append(cluster)
    replica = cluster.start(name, failpoints=f"compaction.task_after_write=sleep:{sleep}", cores=2)
    target = _compactions(t)
    _wait_claimed_by(cluster, name, {f"compaction-{i.time}" for i in target})
    # Mid-job: one compaction's tasks wrote (which one runs first is Spark's choice; the other's may queue).
    _wait_files_written(t.root, {i.time for i in target})
    return t, before, cluster, replica, target


def test_a_replica_killed_mid_job_leaves_the_instant_to_another(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, cluster_factory: list[Cluster]
) -> None:
    t, before, cluster, victim, target = _replica_mid_job(
        tmp_path, zookeeper_server, cluster_factory, version=8, seed=71, name="victim", sleep=120
    )
    status = subprocess.run(
        [sys.executable, "-m", "hoodied.cli", "status", "--config", str(tmp_path / "victim.yaml"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    claims = json.loads(status.stdout)[0]["claims"]
    for i in target:
        holder = claims[f"compaction-{i.time}"]
        assert holder["replica"] == "victim"
        assert holder["pid"] == victim.proc.pid
    rescuer = cluster.start("rescuer")
    cluster.wait_ready(rescuer)
    killed_at = datetime.now(UTC)
    os.killpg(victim.proc.pid, signal.SIGKILL)  # the pod is gone: driver, Spark JVM and Python workers
    victim.proc.wait(30)
    took = wait_completed([t], 120, cluster)
    # The bound is on the takeover (the rescuer starting each instant), not on the jobs' own run time, which
    # depends on how busy the machine is.
    bound = SESSION_TIMEOUT + POLL_INTERVAL + TAKEOVER_GRACE
    started = _started_at(rescuer, {i.time for i in target})
    late = {i: (at - killed_at).total_seconds() for i, at in started.items()}
    assert max(late.values()) <= bound + 10, f"taken over {late} s after the kill (bound {bound} s)"
    assert cluster.stop(rescuer) == 0
    for i in target:
        _one_base_file_per_group(t.root, i.time)
        assert len(completed_files(t.root, i)) == 1
    runs = _events([rescuer], "running ")
    assert {i for (_, _, i) in runs} >= {i.time for i in target}
    _same(before, _hudi_rs(t.root), "after the takeover")
    print(f"instants of a killed replica completed by another {took:.1f} s after the kill (bound {bound} s)")


def test_a_replica_whose_session_expires_does_not_commit(
    tmp_path: Path, zookeeper_server: ZooKeeperServer, cluster_factory: list[Cluster]
) -> None:
    t, before, cluster, cut_off, target = _replica_mid_job(
        tmp_path, zookeeper_server, cluster_factory, version=9, seed=72, name="cutoff", sleep=300
    )
    other = cluster.start("other")
    cluster.wait_ready(other)
    # Freeze the replica's driver (a long pause): its ZooKeeper session expires on the server, and the other
    # replica takes its instants over while it is frozen.
    os.kill(cut_off.proc.pid, signal.SIGSTOP)
    try:
        took = wait_completed([t], SESSION_TIMEOUT + 120, cluster)
    finally:
        os.kill(cut_off.proc.pid, signal.SIGCONT)
    # Woken up, the cut-off replica finds its session and its lease lost: it cancels its jobs, commits nothing
    # and deletes only its own attempt's files (the outcome is lost_race, or claim_lost when the claim's loss
    # is seen first).
    deadline = time.monotonic() + 60
    while not any(
        "lost the race" in str(r.get("msg", "")) or "claim lost, not committed" in str(r.get("msg", ""))
        for r in cut_off.records()
    ):
        assert time.monotonic() < deadline, cluster.tail(cut_off, 80)
        time.sleep(0.5)
    time.sleep(5)
    assert cluster.stop(other) == 0
    assert cluster.stop(cut_off) == 0, cluster.tail(cut_off)
    runs = _events([other], "running ")
    assert {i for (_, _, i) in runs} >= {i.time for i in target}
    for i in target:
        assert len(completed_files(t.root, i)) == 1
        _one_base_file_per_group(t.root, i.time)
    for rec in cut_off.records():
        msg = str(rec.get("msg", ""))
        if rec.get("instant") in {i.time for i in target}:
            assert " completed in " not in msg, msg
    _same(before, _hudi_rs(t.root), "after the expired session")
    print(f"the other replica completed the instants {took:.1f} s after the cut-off replica froze")
