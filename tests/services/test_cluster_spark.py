"""Clustering as a real Spark job (local mode): tables of every version cluster with nothing changed for
readers (hudi-rs and ours); a failed task rolls the attempt back to requested; a process killed with
SIGKILL inside a Spark task leaves a readable table and the next run finishes; a writer upserting from
another process while clustering runs loses no update (conflicting clusterings abort, the others commit)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie import Table
from hoodie.clustering.execute import ClusteringConflict, pending_clusterings
from hoodie.clustering.plan import ClusteringConfig, clustering_plan_of, schedule_clustering
from hoodie.clustering.service import CLUSTERING
from hoodie.clustering.update_strategy import UPDATES_STRATEGY, UpdateStrategy
from hoodie.failpoints import ENV as FAILPOINTS
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import ROLLBACK, State
from hoodied.claims import LocalClaim
from hoodied.errors import JobFailed
from hoodied.jobs import run_service_job
from support.clustering_checks import capture, check_after

pytestmark = pytest.mark.spark

#: No writer beside the table when it is planned: every candidate (as with allow-update writers).
SORTED = ClusteringConfig(sort_columns=("rider",), update_strategy=UpdateStrategy.ALLOW)


def _generate(
    root: Path, version: int, partitions: int, table_type: str = "MERGE_ON_READ", rows: int = 300
) -> None:
    generate_table(
        str(root),
        GenerateSpec(
            table_type=table_type,  # type: ignore[arg-type]
            table_version=version,
            rows=rows,
            commits=4,
            update_fraction=0.3,
            delete_fraction=0.1,
            partitions=partitions,
            seed=21,
        ),
    )


@pytest.mark.parametrize(
    ("version", "table_type", "partitions"),
    [
        pytest.param(6, "MERGE_ON_READ", 2, id="v6-mor-partitioned"),
        pytest.param(8, "COPY_ON_WRITE", 0, id="v8-cow-unpartitioned"),
        pytest.param(9, "MERGE_ON_READ", 3, id="v9-mor-partitioned"),
    ],
)
def test_spark_job_clusters_every_planned_group(
    spark: Any, tmp_path: Path, version: int, table_type: str, partitions: int
) -> None:
    root = tmp_path / "t"
    _generate(root, version, partitions, table_type)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture(root)
    scheduled = schedule_clustering(storage, lock, config=SORTED, respect_trigger=False)
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    T = scheduled.instant.time
    with LocalClaim(storage, "clustering", T) as claim:
        job = run_service_job(spark, CLUSTERING, storage, lock, fence=claim.check)
    md = check_after(root, before, T, scheduled.plan, f"spark v{version}", sort_columns=("rider",))
    assert len(md.write_stats) == len(scheduled.plan.input_groups)
    # Write tokens: Spark's partition id, the run's attempt number (one for every task), the task attempt id.
    tokens = {s.path.rsplit("_", 2)[-2] for s in md.write_stats if s.path}
    assert {int(t.split("-")[0]) for t in tokens} == set(range(len(scheduled.plan.input_groups)))
    assert len({t.split("-")[1] for t in tokens}) == 1  # one run: one attempt number
    assert job.done.records == sum(s.num_writes or 0 for s in md.write_stats)
    assert job.rolled_back_files == 0


def test_a_failed_task_rolls_the_attempt_back_to_requested(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8, 2)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_clustering(storage, lock, config=SORTED, respect_trigger=False)
    assert scheduled.plan is not None
    assert scheduled.instant is not None
    T = scheduled.instant.time
    # A base file the plan names disappears (deleted by hand, say): that group's task fails.
    victim = scheduled.plan.input_groups[-1].slices[-1]
    assert victim.data_file_name is not None
    (root / victim.partition_path / victim.data_file_name).unlink()
    with pytest.raises(JobFailed, match=f"clustering {T}") as failure:
        run_service_job(spark, CLUSTERING, storage, lock)
    assert "rolled back to requested" in str(failure.value)
    timeline = Table.open(str(root)).timeline
    assert timeline.get(T).state is State.REQUESTED  # type: ignore[union-attr]
    assert [i.action for i in timeline.completed() if i.action == ROLLBACK] == [ROLLBACK]
    assert not list(root.rglob(f"*_{T}.parquet")), "files of the failed attempt are left"
    assert not (root / ".hoodie" / ".temp" / T).exists()


KILLED_JOB = """
import sys
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.failpoints import arm_for_children
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.clustering.service import CLUSTERING
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodied.jobs import run_service_job
from hoodied.spark import SparkConfig, spark_session

arm_for_children()
storage = Storage.for_uri(sys.argv[1])
lock = FileSystemLock(storage, expire_seconds=2)
config = ClusteringConfig(sort_columns=("rider",), update_strategy=UpdateStrategy.ALLOW)
schedule_clustering(storage, lock, config=config, respect_trigger=False)
run_service_job(spark_session(SparkConfig(master="local[2]")), CLUSTERING, storage, lock)
"""


@pytest.mark.slow
def test_sigkill_in_a_spark_task_leaves_a_correct_table_and_the_next_run_finishes(
    spark: Any, tmp_path: Path
) -> None:
    root = tmp_path / "t"
    _generate(root, 9, 2)
    before = capture(root)
    env = {k: v for k, v in os.environ.items() if k != FAILPOINTS}
    env[FAILPOINTS] = "clustering.task_after_write"
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_JOB, str(root)], capture_output=True, text=True, env=env, timeout=600
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    table = Table.open(str(root))
    pending = pending_clusterings(table)
    assert len(pending) == 1
    assert pending[0].state is State.INFLIGHT
    T = pending[0].time
    assert list(root.rglob(f"*_{T}.parquet")), "the killed task wrote a file before dying"
    now = capture(root)
    assert now.ours.num_rows == before.ours.num_rows
    storage = Storage.for_uri(str(root))
    job = run_service_job(spark, CLUSTERING, storage, FileSystemLock(storage, acquire_timeout=30))
    assert job.rolled_back_files >= 1
    plan = clustering_plan_of(Table.open(str(root)), T)
    assert plan is not None
    check_after(root, before, T, plan, "killed in a Spark task", sort_columns=("rider",))


WRITER = """
import json, sys
import pyarrow as pa
import pyarrow.compute as pc
from hoodie import Table
from hoodie.errors import WriteConflict
from hoodie.testing.table_writer import TableWriter

root, batches, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
writer = TableWriter.open(root)
written = {}
for b in range(batches):
    full = Table.open(root).read().sort_by("uuid")
    start = (b * 37) % max(1, full.num_rows - 60)
    upd = full.slice(start, 60).drop_columns([c for c in full.column_names if c.startswith("_hoodie_")])
    fares = pa.array([float(10_000 + b * 100 + i) for i in range(upd.num_rows)])
    upd = upd.set_column(upd.schema.get_field_index("fare"), "fare", fares)
    upd = upd.set_column(upd.schema.get_field_index("ts"), "ts", pc.add(upd.column("ts"), 1_000_000_000))
    for attempt in range(20):
        try:
            writer.upsert(upd)
            break
        except WriteConflict:
            continue
    else:
        raise SystemExit("could not commit a batch in 20 attempts")
    written.update(zip(upd.column("uuid").to_pylist(), upd.column("fare").to_pylist()))
with open(out, "w") as f:
    json.dump(written, f)
"""


@pytest.mark.slow
def test_a_concurrent_writer_loses_no_update(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8, 2, rows=600)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    out = tmp_path / "written.json"
    log = tmp_path / "writer.log"
    with log.open("w") as log_file:
        writer = subprocess.Popen([sys.executable, str(script), str(root), "6", str(out)], stderr=log_file)
    outcomes: list[tuple[str, str]] = []
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            finished = writer.poll() is not None
            scheduled = schedule_clustering(storage, lock, config=SORTED, respect_trigger=False)
            if scheduled.instant is not None:
                T = scheduled.instant.time
                try:
                    with LocalClaim(storage, "clustering", T) as claim:
                        run_service_job(spark, CLUSTERING, storage, lock, fence=claim.check)
                    outcomes.append((T, "committed"))
                except ClusteringConflict as e:
                    outcomes.append((T, f"aborted by {e.conflicting_instant}"))
            if finished:
                break
            time.sleep(0.2)
    finally:
        if writer.poll() is None:
            writer.wait(timeout=300)
    assert writer.returncode == 0, log.read_text()
    assert any(o == "committed" for _, o in outcomes), outcomes
    assert not pending_clusterings(Table.open(str(root))), "an aborted clustering left its plan behind"
    written: dict[str, float] = json.loads(out.read_text())
    final = Table.open(str(root)).read()
    fares = dict(zip(final.column("uuid").to_pylist(), final.column("fare").to_pylist(), strict=True))
    lost = {k: (v, fares.get(k)) for k, v in written.items() if fares.get(k) != v}
    assert not lost, f"{len(lost)} update(s) lost, e.g. {list(lost.items())[:3]}; clusterings: {outcomes}"
    after = capture(root)
    assert after.theirs is not None
    theirs = dict(
        zip(after.theirs.column("uuid").to_pylist(), after.theirs.column("fare").to_pylist(), strict=True)
    )
    assert {k: theirs.get(k) for k in written} == written


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != FAILPOINTS}
    cmd = [sys.executable, "-m", "hoodied.cli", "cluster", str(root), *args]
    cmd += ["--spark-master", "local[2]", "--conf", "hoodie.write.lock.filesystem.expire=0.05"]
    # No writer beside the table: every candidate is planned (as with allow-update writers).
    cmd += ["--conf", f"{UPDATES_STRATEGY}={UpdateStrategy.ALLOW.value}"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)


def test_cli_schedules_and_executes_a_sorted_clustering(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8, 2)
    before = capture(root)
    bad = _cli(root, "--mode", "schedule", "--sort-columns", "no_such_column")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    assert "no_such_column" in bad.stderr
    done = _cli(root, "--mode", "schedule-and-execute", "--sort-columns", "rider")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "scheduled clustering" in done.stdout
    assert "completed clustering" in done.stdout
    T = done.stdout.split("completed clustering ", 1)[1].split(":", 1)[0]
    plan = clustering_plan_of(Table.open(str(root)), T)
    assert plan is not None
    check_after(root, before, T, plan, "hoodied cluster CLI", sort_columns=("rider",))
    again = _cli(root, "--mode", "execute")
    assert again.returncode == 0
    assert "no pending clustering" in again.stdout
