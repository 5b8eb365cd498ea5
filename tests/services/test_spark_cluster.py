"""hoodied's jobs on a Spark standalone cluster (a Master and two one-core Workers on 127.0.0.1, each its own
JVM from pyspark's ``spark-class``) whose executors' Python has hoodied's dependencies but not hoodied: the
code the executors run is the code the driver ships. Judged by hudi-rs and our reader, with the event log as
the witness of where each task ran.

- the daemon (``hoodied run --once``) runs compaction, clustering and clean on the cluster; each job is named
  ``hoodied <action> <table> <instant>: <size>``;
- a clean of a large plan, an indexing and a compaction of an S3 table whose credentials only the driver
  holds: they reach the executors inside the tasks and appear in no event;
- executors with other code (``ship_code: never``): every task refuses before it touches the table;
- a Python worker killed with SIGKILL mid-task: the task is retried and the result is exact.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodied.spark import java_available
from support import compaction_checks
from support.daemon_tables import assert_same_snapshot, cow_table, mor_table, snapshot
from support.s3_server import S3Server
from support.shared import REPO_ROOT
from support.spark_cluster import StandaloneCluster, executor_python

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[StandaloneCluster, Path]]:
    """The cluster and its executors' Python (without hoodie)."""
    if not java_available():
        pytest.skip("Spark needs a Java runtime; .ci/run installs openjdk-17-jre-headless")
    folder = tmp_path_factory.mktemp("spark-cluster")
    python = executor_python(folder / "executor-python")
    running = StandaloneCluster(folder / "cluster", workers=2, cores=1, memory="1500m").start()
    yield running, python
    running.stop()


def _spark_conf(cluster: tuple[StandaloneCluster, Path], events: Path) -> dict[str, str]:
    events.mkdir(exist_ok=True)
    return {
        "spark.pyspark.python": str(cluster[1]),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "1g",
        "spark.eventLog.enabled": "true",
        "spark.eventLog.compress": "false",
        "spark.eventLog.dir": events.as_uri(),
    }


def _driver_env(**extra: str) -> dict[str, str]:
    """The driver's environment: this checkout's code, loopback (the executors' Python is in the Spark
    settings)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = f"{REPO_ROOT / 'core'}{os.pathsep}{REPO_ROOT / 'services'}"
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.pop("PYSPARK_PYTHON", None)
    env.update(extra)
    return env


def _run_once(config: Path) -> subprocess.CompletedProcess[str]:
    """One pass of the daemon (``hoodied run --once``) as its own process, the Spark driver."""
    return subprocess.run(
        ["hoodied", "run", "--once", "--config", str(config)],
        env=_driver_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _events(folder: Path) -> list[dict[str, object]]:
    return [json.loads(line) for f in _event_files(folder) for line in f.read_text().splitlines() if line]


def _event_files(folder: Path) -> list[Path]:
    """The event log's files (Hadoop's local file system writes a hidden checksum file beside each)."""
    return sorted(f for f in folder.rglob("*") if f.is_file() and not f.name.startswith("."))


def _jobs_and_executors(folder: Path) -> tuple[list[str], set[str]]:
    """The job names and the executors their tasks ran on, from the event log."""
    names: list[str] = []
    executors: set[str] = set()
    for e in _events(folder):
        if e["Event"] == "SparkListenerJobStart":
            names.append(str(e["Properties"].get("spark.job.description")))  # type: ignore[attr-defined]
        if e["Event"] == "SparkListenerTaskEnd":
            executors.add(str(e["Task Info"]["Executor ID"]))  # type: ignore[index]
    return names, executors


def test_the_daemon_runs_every_job_on_the_cluster_with_shipped_code(
    cluster: tuple[StandaloneCluster, Path], tmp_path: Path
) -> None:
    mor = mor_table(tmp_path / "orders", 8, seed=31)
    cow = cow_table(tmp_path / "events", 9, seed=32)
    before = {t.root: snapshot(t.root) for t in (mor, cow)}
    events = tmp_path / "events-log"
    conf = json.dumps(_spark_conf(cluster, events))
    config = tmp_path / "hoodied.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            replica: cluster-test
            metrics: {{port: null}}
            jobs: {{takeover_grace: 0s}}
            spark: {{master: "{cluster[0].master_url}", conf: {conf}, fair_pools: false}}
            tables: ["{mor.root}", "{cow.root}"]
            """
        )
    )
    run = _run_once(config)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "to the executors" in run.stderr
    for t in (mor, cow):
        table = Table.open(str(t.root))
        for instant in t.pending:
            assert table.timeline.get(instant.time).state is State.COMPLETED  # type: ignore[union-attr]
        assert_same_snapshot(before[t.root], snapshot(t.root), t.root.name)
    names, executors = _jobs_and_executors(events)
    compactions = [n for n in names if n.startswith("hoodied compaction trips ")]
    clusterings = [n for n in names if n.startswith("hoodied clustering trips ")]
    assert len(compactions) == 2, names
    assert len(clusterings) == 2, names
    assert all("task(s)" in n and "in (largest" in n for n in compactions + clusterings), names
    assert executors, names
    assert executors <= {"0", "1"}, executors  # on the workers' executors, never the driver


def test_large_clean_indexing_and_s3_credentials_on_the_cluster(
    cluster: tuple[StandaloneCluster, Path], tmp_path: Path, s3_server: S3Server
) -> None:
    local = tmp_path / "local"
    generate_table(str(local), GenerateSpec(table_version=8, rows=400, commits=3, partitions=2, seed=5))
    uri = s3_server.upload(local, "s3://lake/cluster-t")
    before = compaction_checks.capture(uri)
    events = tmp_path / "events-log"
    script = textwrap.dedent(
        f"""
        import json, sys
        from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
        from hoodie.clean.service import Clean
        from hoodie.compaction.service import COMPACTION
        from hoodie.compaction.plan import schedule_compaction
        from hoodie.indexing.execute import schedule_indexing
        from hoodie.indexing.service import Indexing
        from hoodie.lock.selection import lock_for_table
        from hoodie.storage import Storage
        from hoodied.jobs import run_service_job
        from hoodied.spark import SparkConfig, spark_session

        conf = {_spark_conf(cluster, events)!r}
        spark = spark_session(SparkConfig(master="{cluster[0].master_url}", conf=conf))
        storage = Storage.for_uri("{uri}")
        lock = lock_for_table(storage, {{}})  # the storage-based lock: S3 has no local file system
        out = {{}}
        schedule_compaction(storage, lock)
        out["compaction"] = run_service_job(spark, COMPACTION, storage, lock).on_executors
        schedule_indexing(storage, lock, ["column_stats"])
        out["indexing"] = run_service_job(spark, Indexing(parallelism=3), storage, lock).on_executors
        plan = schedule_clean(storage, lock, config=CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS,
                                                                 file_versions_retained=1))
        out["clean_bytes"] = plan.bytes_to_delete
        clean = Clean(executor_min_files=1, parallelism=3)
        out["clean"] = run_service_job(spark, clean, storage, lock).on_executors
        print(json.dumps(out))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script], env=_driver_env(), capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-4000:]
    out = json.loads(run.stdout.strip().splitlines()[-1])
    assert out["compaction"], out
    assert out["indexing"], out
    assert out["clean"], out
    assert out["clean_bytes"] > 0
    # Compacted, indexed and cleaned: ours and hudi-rs read what they read before.
    after = compaction_checks.capture(uri)
    assert before.theirs is not None
    assert after.theirs is not None
    assert_same_snapshot(before.ours, after.ours, "ours after the jobs on the cluster")
    assert_same_snapshot(before.theirs, after.theirs, "hudi-rs after the jobs on the cluster")
    table = Table.open(uri)
    assert not table.timeline.pending()
    assert "column_stats" in table.config.metadata_partitions
    names, executors = _jobs_and_executors(events)
    assert {n.split(" ")[1] for n in names} == {"compaction", "indexing", "clean"}, names
    assert executors <= {"0", "1"}
    # The executors had no credentials of their own; the tasks carried them, and no event shows them.
    secret = s3_server.environment()["AWS_SECRET_ACCESS_KEY"]
    text = "".join(f.read_text() for f in _event_files(events))
    assert secret not in text
    assert secret not in run.stderr


def test_executors_with_other_code_refuse_every_task(
    cluster: tuple[StandaloneCluster, Path], tmp_path: Path
) -> None:
    """Executors that import a hoodie differing by one comment from the driver's (and no shipped code)
    refuse the job; the compaction rolls back to requested and the table reads the same."""
    other = tmp_path / "other-code"
    shutil.copytree(REPO_ROOT / "core" / "hoodie", other / "hoodie")
    shutil.copytree(REPO_ROOT / "services" / "hoodied", other / "hoodied")
    with (other / "hoodie" / "table.py").open("a") as f:
        f.write("\n# a build the driver does not run\n")
    python = executor_python(tmp_path / "executor-python")
    site = next((tmp_path / "executor-python" / "lib").glob("python3*/site-packages"))
    (site / "other-code.pth").write_text(f"{other}\n")
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=200, commits=3, partitions=2, seed=9))
    storage = Storage.for_uri(str(root))
    scheduled = schedule_compaction(storage, FileSystemLock(storage))
    assert scheduled.instant is not None
    before = snapshot(root)
    conf = {**_spark_conf(cluster, tmp_path / "events-log"), "spark.pyspark.python": str(python)}
    config = tmp_path / "hoodied.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            jobs: {{takeover_grace: 0s, max_attempts: 1}}
            spark: {{master: "{cluster[0].master_url}", conf: {json.dumps(conf)}, ship_code: never}}
            tables: ["{root}"]
            """
        )
    )
    run = _run_once(config)
    assert run.returncode == 1, run.stderr[-3000:]
    assert "CodeMismatch: this executor imports hoodied" in run.stderr, run.stderr[-3000:]
    assert str(other) in run.stderr
    table = Table.open(str(root))
    assert table.timeline.get(scheduled.instant.time).state is State.REQUESTED  # type: ignore[union-attr]
    assert not list(root.rglob(f"*_{scheduled.instant.time}.parquet"))
    assert_same_snapshot(before, snapshot(root), "after a refused job")


def test_a_python_worker_killed_mid_task_is_retried_exactly(
    cluster: tuple[StandaloneCluster, Path], tmp_path: Path
) -> None:
    """Each compaction task pauses after writing its base file; one executor's Python worker is killed with
    SIGKILL there. Spark retries the task (a new attempt, a new write token); the killed attempt's file is
    deleted before the commit, and readers see the same rows."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=9, rows=300, commits=3, partitions=2, seed=13))
    storage = Storage.for_uri(str(root))
    scheduled = schedule_compaction(storage, FileSystemLock(storage))
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    T = scheduled.instant.time
    before = compaction_checks.capture(root)
    events = tmp_path / "events-log"
    conf = {
        **_spark_conf(cluster, events),
        "spark.executorEnv.HOODIE_FAILPOINTS": "compaction.task_after_write=sleep:6",
        "spark.python.worker.reuse": "false",
    }
    command = ["hoodied", "compact", str(root), "--mode", "execute", "--spark-master", cluster[0].master_url]
    command += [f"--conf={k}={v}" for k, v in conf.items()]
    driver = subprocess.Popen(
        command, env=_driver_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    python = cluster[1]
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and time.monotonic() < deadline and driver.poll() is None:
        # A forked worker is a pyspark.daemon process whose parent is one too; wait until it wrote its file.
        written = list(root.rglob(f"*_{T}.parquet"))
        workers = _forked_workers(python)
        if written and workers:
            os.kill(workers[0], signal.SIGKILL)
            killed = workers[0]
        time.sleep(0.2)
    out, err = driver.communicate(timeout=600)
    assert killed is not None, f"no task to kill: {err[-3000:]}"
    assert driver.returncode == 0, err[-4000:]
    md = compaction_checks.check_after(root, before, T, "a task retried after its worker was killed")
    assert len(md.write_stats) == len(scheduled.plan.operations)
    files = list(root.rglob(f"*_{T}.parquet"))
    assert len(files) == len(md.write_stats), "the killed attempt's file was removed"
    attempts = [e for e in _events(events) if e["Event"] == "SparkListenerTaskEnd"]
    failed = [e for e in attempts if e["Task End Reason"]["Reason"] != "Success"]  # type: ignore[index]
    assert failed, "the killed task attempt failed and was retried"
    assert "completed compaction" in out


def _forked_workers(python: Path) -> list[int]:
    pids = set(StandaloneCluster.python_workers(python))
    out = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent in pids:
            out.append(pid)
    return sorted(out)
