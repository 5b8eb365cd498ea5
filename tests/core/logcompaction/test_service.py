"""Log compaction as a table service: the same steps as every other (schedule on the trigger, prepare into
picklable tasks, run, commit), refused on COPY_ON_WRITE tables, settings checked by name."""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.config import TableConfig
from hoodie.errors import InvalidWriteConfig
from hoodie.lock import FileSystemLock
from hoodie.logcompaction.service import LOG_COMPACTION
from hoodie.storage import Storage
from hoodie.table_service import run_in_process
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import DELTA_COMMIT, State

#: ``many_logs(version, log_format, partitions=2)``: a fresh copy of a generated table (see conftest).
TableFactory = Callable[..., Path]


def test_the_service_schedules_runs_and_commits(many_logs: TableFactory) -> None:
    root = many_logs(8, "parquet")
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = Table.open(str(root)).read()
    assert LOG_COMPACTION.name == "logcompaction"
    assert LOG_COMPACTION.schedulable
    assert LOG_COMPACTION.has_instants
    table = Table.open(str(root))
    assert LOG_COMPACTION.applies_to(table.config) is None
    assert LOG_COMPACTION.pending(table) == []
    settings = {**table.config.props, "hoodie.logfile.data.block.format": "parquet"}
    LOG_COMPACTION.check_settings(settings)
    scheduled = LOG_COMPACTION.schedule(table, lock, settings)
    assert scheduled.instant is not None, scheduled.reason
    T = scheduled.instant.time
    assert [i.time for i in LOG_COMPACTION.pending(Table.open(str(root)))] == [T]
    # The trigger: nothing new since this log compaction.
    assert LOG_COMPACTION.schedule(Table.open(str(root)), lock, settings).instant is None
    job = LOG_COMPACTION.prepare(storage, lock, None, settings)
    assert job.instant.time == T
    assert job.instant.state is State.INFLIGHT
    assert job.rollback_groups
    assert {(t.operation.partition_path, t.operation.file_id) for t in job.tasks} == set(job.rollback_groups)
    # Tasks and the task function travel to executors.
    tasks = pickle.loads(pickle.dumps(job.tasks))
    assert pickle.loads(pickle.dumps(job.run_task)) is job.run_task
    done = run_in_process(dataclasses.replace(job, tasks=tasks))
    assert done.instant.time == T
    assert done.records > 0
    assert done.bytes_written > 0
    assert "log file(s)" in done.summary
    after = Table.open(str(root))
    completed = after.timeline.get(T)
    assert completed is not None
    assert (completed.action, completed.state) == (DELTA_COMMIT, State.COMPLETED)
    assert after.read().num_rows == before.num_rows
    assert LOG_COMPACTION.pending(after) == []


def test_copy_on_write_tables_have_no_log_compaction(tmp_path: Path) -> None:
    generate_table(str(tmp_path / "t"), GenerateSpec(table_type="COPY_ON_WRITE", rows=10, commits=1))
    config = TableConfig.load(Storage.for_uri(str(tmp_path / "t")))
    assert LOG_COMPACTION.applies_to(config) == "only MERGE_ON_READ tables log-compact"


def test_bad_settings_are_refused() -> None:
    with pytest.raises(InvalidWriteConfig, match=r"hoodie\.log\.compaction\.blocks\.threshold"):
        LOG_COMPACTION.check_settings({"hoodie.log.compaction.blocks.threshold": "-2"})
