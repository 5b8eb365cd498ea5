"""Compaction as a Spark job: the driver prepares and commits (:mod:`hoodie.compaction.execute`), one Spark
task per plan operation compacts a file slice with our format library.

The job runs in a job group named after the instant (``hoodied-compaction-<instant>``), so it can be
cancelled as a whole. Each task's write token is Spark's ``<partition id>-<stage id>-<task attempt id>``, as
Hudi's: a retried or speculative attempt writes a file of its own, and the driver deletes every file that
markers show but the results do not name before it commits.

A task failure is a definite failure: the attempt's files are rolled back and the instant goes back to
requested, ready for the next run. A lost claim or an unknown outcome leaves it inflight for the claim's next
holder, who rolls it back before running it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hoodie.compaction.execute import (
    CompactionResult,
    CompactionTask,
    TaskResult,
    commit_compaction,
    prepare_compaction,
    run_compaction_task,
)
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.write.base_file import ParquetOptions
from hoodied.jobs import run_service_tasks, write_token

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class CompactionJobResult:
    result: CompactionResult
    seconds: float
    rolled_back_files: int


def _spark_task(task: CompactionTask) -> TaskResult:
    return run_compaction_task(task, write_token(task.index))


def run_compaction_job(
    spark: SparkSession,
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    parquet: ParquetOptions | None = None,
    fence: Callable[[], None] | None = None,
) -> CompactionJobResult:
    """Run the pending compaction at ``instant_time`` (default: the earliest) as a Spark job and commit it.

    The caller holds the instant's claim (``fence`` re-checks it before the commit).
    """
    started = time.monotonic()
    prepared = prepare_compaction(storage, lock, instant_time, parquet=parquet)
    groups: list[tuple[str, str | None]] = [
        (op.partition_path, op.file_id) for op in prepared.plan.operations
    ]
    results = run_service_tasks(
        spark, storage, lock, "compaction", prepared.instant, prepared.tasks, _spark_task, groups, fence
    )
    result = commit_compaction(storage, lock, prepared, results, fence=fence)
    rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0
    return CompactionJobResult(result, time.monotonic() - started, rolled)


__all__ = ["CompactionJobResult", "run_compaction_job"]
