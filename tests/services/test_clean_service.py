"""``hoodied clean`` end to end: the CLI, SIGKILL at every step followed by a re-run, failed writes rolled
back under the LAZY policy, and a large plan deleted by a Spark job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hoodie import Table
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.clean.service import Clean
from hoodie.errors import WriteConflict
from hoodie.failpoints import ENV as FAILPOINTS
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import CLEAN, ROLLBACK, State
from hoodie.timeline.metadata import decode_cleaner_plan
from hoodied.jobs import run_service_job
from support.clean_checks import capture_reads, check_clean, data_bytes


def _cow(root: Path, commits: int = 5) -> None:
    generate_table(
        str(root),
        GenerateSpec(
            table_type="COPY_ON_WRITE",
            table_version=8,
            rows=200,
            commits=commits,
            update_fraction=0.3,
            partitions=2,
            seed=9,
        ),
    )


def _cli(root: Path, *args: str, failpoint: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(FAILPOINTS, None)
    if failpoint:
        env[FAILPOINTS] = failpoint
    cmd = [sys.executable, "-m", "hoodied.cli", "clean", str(root), *args]
    cmd += ["--conf", "hoodie.write.lock.filesystem.expire=0.05"]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)


POINTS = ["clean.after_schedule", "clean.after_inflight", "clean.mid_deletes", "clean.before_commit"]


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_any_step_then_a_rerun_finishes_the_clean(tmp_path: Path, point: str) -> None:
    root = tmp_path / "t"
    _cow(root)
    before = capture_reads(root)
    args = ("--conf", "hoodie.clean.commits.retained=2")
    killed = _cli(root, *args, failpoint=point)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    table = Table.open(str(root))
    cleans = [i for i in table.timeline if i.action == CLEAN]
    assert len(cleans) == 1
    assert cleans[0].state is not State.COMPLETED
    # Whatever the clean had deleted, every retained read is intact while it is pending.
    assert table.read().num_rows == before.latest.num_rows
    rerun = _cli(root, *args)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert f"completed clean {cleans[0].time}" in rerun.stdout
    table = Table.open(str(root))
    plan = decode_cleaner_plan((root / table.timeline.file_of(cleans[0].time, State.REQUESTED)).read_bytes())
    md = check_clean(root, before, cleans[0].time, plan, f"after SIGKILL at {point}")
    assert md.total_files_deleted > 0
    # The rerun scheduled nothing new: one clean, completed.
    assert [i.time for i in table.timeline if i.action == CLEAN] == [cleans[0].time]


def test_cli_modes_and_messages(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _cow(root, commits=3)
    nothing = _cli(root, "--mode", "schedule")
    assert nothing.returncode == 0
    assert "no clean scheduled" in nothing.stdout
    assert "at most hoodie.clean.commits.retained=10" in nothing.stdout
    scheduled = _cli(
        root,
        "--mode",
        "schedule",
        "--policy",
        "KEEP_LATEST_FILE_VERSIONS",
        "--conf",
        "hoodie.clean.fileversions.retained=1",
    )
    assert scheduled.returncode == 0, scheduled.stderr
    assert "scheduled clean" in scheduled.stdout
    run = _cli(root, "--mode", "execute")
    assert run.returncode == 0, run.stderr
    assert "completed clean" in run.stdout
    assert "file(s) deleted" in run.stdout
    again = _cli(root, "--mode", "execute")
    assert "no pending clean" in again.stdout
    bad = _cli(root, "--policy", "KEEP_EVERYTHING")
    assert bad.returncode == 2
    assert "hoodie.clean.policy='KEEP_EVERYTHING'" in bad.stderr


def test_lazy_policy_rolls_back_failed_writes_before_cleaning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    _cow(root)
    before = capture_reads(root)

    def die(*_: object) -> None:
        raise WriteConflict("writer died")

    live = Table.open(str(root)).read(columns=["uuid", "city"]).slice(0, 20)
    rows = TripGenerator(5, 2).rows(live.column("uuid").to_pylist(), live.column("city").to_pylist())
    with monkeypatch.context() as m:
        m.setattr(TableWriter, "_check_conflicts", die)
        with pytest.raises(WriteConflict):
            TableWriter.open(str(root)).upsert(rows)
    failed = Table.open(str(root)).timeline.pending()[0].time
    eager = _cli(root, "--conf", "hoodie.clean.commits.retained=2")
    assert eager.returncode == 0, eager.stderr
    assert "rolled back" not in eager.stdout
    assert Table.open(str(root)).timeline.get(failed) is not None, "EAGER: only the writer rolls back"
    lazy = _cli(
        root, "--conf", "hoodie.clean.commits.retained=2", "--conf", "hoodie.clean.failed.writes.policy=LAZY"
    )
    assert lazy.returncode == 0, lazy.stderr
    assert f"rolled back failed write {failed}" in lazy.stdout
    table = Table.open(str(root))
    assert table.timeline.get(failed) is None
    assert any(i.action == ROLLBACK for i in table.timeline.completed())
    assert not [p for p in root.rglob(f"*_{failed}.parquet")]
    assert table.read().num_rows == before.latest.num_rows


@pytest.mark.spark
def test_a_large_plan_deletes_through_spark(tmp_path: Path, spark: Any) -> None:
    root = tmp_path / "t"
    _cow(root, commits=6)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture_reads(root)
    scheduled = schedule_clean(
        storage,
        lock,
        config=CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1),
    )
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    job = run_service_job(spark, Clean(executor_min_files=1, parallelism=3), storage, lock)
    assert job.on_executors
    check_clean(root, before, scheduled.instant.time, scheduled.plan, "Spark clean")
    assert before.data_bytes - data_bytes(root) == job.done.bytes_deleted == scheduled.bytes_to_delete
