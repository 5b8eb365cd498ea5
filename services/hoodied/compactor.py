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
from hoodie.errors import HoodieError
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.write.base_file import ParquetOptions
from hoodie.write.rollback import rollback_unfinished
from hoodied.errors import JobFailed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompactionJobResult:
    result: CompactionResult
    seconds: float
    rolled_back_files: int


def job_group(action: str, instant_time: str) -> str:
    return f"hoodied-{action}-{instant_time}"


def _spark_task(task: CompactionTask) -> TaskResult:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    token = f"{ctx.partitionId()}-{ctx.stageId()}-{ctx.taskAttemptId()}" if ctx else f"{task.index}-0-0"
    return run_compaction_task(task, token)


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
    sc = spark.sparkContext
    group = job_group("compaction", T)
    sc.setJobGroup(group, f"compaction {T} of {storage.uri}", interruptOnCancel=True)
    try:
        tasks = list(prepared.tasks)
        results: list[TaskResult] = (
            sc.parallelize(tasks, max(1, len(tasks))).map(_spark_task).collect() if tasks else []
        )
    except Exception as e:  # Py4JJavaError carries the Python traceback of the failed task
        reason = _task_error(e)
        logger.error("compaction %s of %s failed in a task: %s", T, storage.uri, reason)
        if fence is not None:
            fence()  # only the claim holder may clean up
        groups = [(op.partition_path, op.file_id) for op in prepared.plan.operations]
        rollback_unfinished(storage, lock, prepared.instant, groups)
        raise JobFailed(f"compaction {T} of {storage.uri} failed (rolled back to requested): {reason}") from e
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    result = commit_compaction(storage, lock, prepared, results, fence=fence)
    rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0
    return CompactionJobResult(result, time.monotonic() - started, rolled)


def _task_error(e: BaseException) -> str:
    text = str(e)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line and ("Error" in line or "Exception" in line) and not line.startswith("at "):
            return line[:500]
    if isinstance(e, HoodieError):
        return text
    return text.splitlines()[0][:500] if text else type(e).__name__


__all__ = ["CompactionJobResult", "job_group", "run_compaction_job"]
