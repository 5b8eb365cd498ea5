"""The Spark side of every job (:mod:`hoodied.jobs`): a failed job is rolled back only once its other tasks
stopped, so a slow task cannot leave a file behind the rollback."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import straggler_tasks
from pyspark import cloudpickle

from hoodie.compaction.execute import pending_compactions, prepare_compaction
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import FileSystemLock, LockProvider
from hoodie.registry import service_named
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import Done, Fence, Scheduled, ServiceJob, TableService
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import ROLLBACK, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodied.errors import JobCancelled, JobFailed
from hoodied.jobs import run_service_job, task_error

pytestmark = [pytest.mark.spark, pytest.mark.slow]

cloudpickle.register_pickle_by_value(straggler_tasks)


class Stragglers(TableService):
    """A compaction whose two tasks are a slow one that writes a file late and one that fails."""

    name = "compaction"
    priority = 1

    def check_settings(self, settings: Mapping[str, str]) -> None:
        pass

    def pending(self, table: Table) -> list[Instant]:
        return pending_compactions(table)

    def schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None = None,
    ) -> Scheduled:
        raise AssertionError("not asked")

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[straggler_tasks.StragglerTask, int]:
        prepared = prepare_compaction(storage, lock, fence=fence)
        T = prepared.instant.time
        op = prepared.plan.operations[0]
        tasks = tuple(
            straggler_tasks.StragglerTask(storage.uri, T, op.partition_path, op.file_id, role)
            for role in ("slow", "fail")
        )

        def commit(results: object, fence: Fence | None) -> Done:
            raise AssertionError("a failed job must not commit")

        groups = ((op.partition_path, op.file_id),)
        return ServiceJob(self.name, prepared.instant, tasks, straggler_tasks.run, commit, groups)


def scheduled_compaction(root: Path, commits: int) -> tuple[Storage, FileSystemLock, str]:
    """A small MOR table at ``root`` with a compaction scheduled: its storage, lock and instant time."""
    generate_table(str(root), GenerateSpec(table_version=8, rows=200, commits=commits, partitions=1, seed=9))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_compaction(storage, lock).instant
    assert scheduled is not None
    return storage, lock, scheduled.time


def test_the_rollback_of_a_failed_job_waits_for_its_other_tasks(tmp_path: Path, spark: Any) -> None:
    root = tmp_path / "t"
    storage, lock, T = scheduled_compaction(root, commits=2)
    with pytest.raises(JobFailed, match="rolled back to requested"):
        run_service_job(spark, Stragglers(), storage, lock)
    # The straggler wrote its file 1 s in, after the job had failed; the rollback waited for it to stop (Spark
    # kills its worker) and deleted the file. Nothing may appear afterwards.
    time.sleep(3)
    late = [p for p in root.rglob(f"*_{T}.parquet")]
    assert late == [], late
    assert not (root / ".hoodie" / ".temp" / T).exists()
    table = Table.open(str(root))
    assert table.timeline.get(T).state is State.REQUESTED  # type: ignore[union-attr]
    rollbacks = [i for i in table.timeline.completed() if i.action == ROLLBACK]
    assert len(rollbacks) == 1


def test_a_job_cancelled_after_its_tasks_is_rolled_back_not_committed(tmp_path: Path) -> None:
    """Spark cancels only a group's active jobs: a cancel that comes once the tasks are done (or a job run on
    the driver's threads) is caught right before the commit, and the instant goes back to requested."""
    root = tmp_path / "t"
    storage, lock, T = scheduled_compaction(root, commits=3)
    rows_before = Table.open(str(root)).read().num_rows
    asked: list[str] = []

    def cancelled() -> str | None:
        asked.append(T)
        return "by carol (too slow)"

    compaction = service_named("compaction")
    with pytest.raises(JobCancelled, match=r"cancelled by carol \(too slow\) before its commit.*rolled back"):
        run_service_job(None, compaction, storage, lock, cancelled=cancelled)
    assert asked == [T]  # once, when the tasks were done
    table = Table.open(str(root))
    assert table.timeline.get(T).state is State.REQUESTED  # type: ignore[union-attr]
    assert [p for p in root.rglob(f"*_{T}.parquet")] == []  # the tasks' files are rolled back
    assert len([i for i in table.timeline.completed() if i.action == ROLLBACK]) == 1
    # Nothing was lost, and the retry (nobody cancels it now) completes.
    assert table.read().num_rows == rows_before
    run_service_job(None, compaction, storage, lock, cancelled=lambda: None)
    after = Table.open(str(root))
    assert after.timeline.get(T).is_completed  # type: ignore[union-attr]
    assert after.read().num_rows == rows_before


def test_task_error_is_the_exception_line_of_the_last_traceback() -> None:
    text = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in f\n    g()\nhoodie.errors.CorruptLogBlock: p/.f_1.log.1_0-1-1: bad\n'
        " SQLSTATE: 38000)"
    )
    assert task_error(RuntimeError(text)) == "CorruptLogBlock: p/.f_1.log.1_0-1-1: bad"
