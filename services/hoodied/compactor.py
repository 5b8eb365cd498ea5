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

import logging
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
from hoodie.write.rollback import rollback_unfinished
from hoodied.errors import JobFailed
from hoodied.jobs import job_group, run_tasks, task_error, write_token

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


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
    T = prepared.instant.time
    try:
        results = run_tasks(
            spark, job_group("compaction", T), f"compaction {T} of {storage.uri}", prepared.tasks, _spark_task
        )
    except Exception as e:  # Py4JJavaError carries the Python traceback of the failed task
        reason = task_error(e)
        logger.error("compaction %s of %s failed in a task: %s", T, storage.uri, reason)
        if fence is not None:
            fence()  # only the claim holder may clean up
        groups: list[tuple[str, str | None]] = [
            (op.partition_path, op.file_id) for op in prepared.plan.operations
        ]
        rollback_unfinished(storage, lock, prepared.instant, groups)
        raise JobFailed(f"compaction {T} of {storage.uri} failed (rolled back to requested): {reason}") from e
    result = commit_compaction(storage, lock, prepared, results, fence=fence)
    rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0
    return CompactionJobResult(result, time.monotonic() - started, rolled)


__all__ = ["CompactionJobResult", "run_compaction_job"]
