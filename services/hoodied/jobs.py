"""The Spark side every table-service job shares: a job group per instant, one Spark task per unit of work,
Hudi-style write tokens, and a readable reason when a task fails.

A job runs in the job group ``hoodied-<action>-<instant>`` so that it can be cancelled as a whole (a lost
claim, a shutdown). Each task's write token is Spark's ``<partition id>-<stage id>-<task attempt id>``, as
Hudi's: a retried or speculative attempt writes files of its own, which the driver deletes before it commits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

from hoodie.errors import HoodieError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_T = TypeVar("_T")
_R = TypeVar("_R")


def job_group(action: str, instant_time: str) -> str:
    return f"hoodied-{action}-{instant_time}"


def write_token(fallback_index: int) -> str:
    """The running Spark task's write token (``<index>-0-0`` outside Spark)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return f"{fallback_index}-0-0"
    return f"{ctx.partitionId()}-{ctx.stageId()}-{ctx.taskAttemptId()}"


def run_tasks(
    spark: SparkSession, group: str, description: str, tasks: Sequence[_T], fn: Callable[[_T], _R]
) -> list[_R]:
    """Run ``fn`` on every task, one Spark task each, in job group ``group``; returns the results in task
    order. A failed task raises whatever Spark raised (see :func:`task_error`)."""
    if not tasks:
        return []
    sc = spark.sparkContext
    sc.setJobGroup(group, description, interruptOnCancel=True)
    try:
        return sc.parallelize(list(tasks), len(tasks)).map(fn).collect()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]


def task_error(e: BaseException) -> str:
    """The line of a failed job's error that says what went wrong (Py4J wraps the task's Python traceback)."""
    text = str(e)
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line and ("Error" in line or "Exception" in line) and not line.startswith("at "):
            return line[:500]
    if isinstance(e, HoodieError):
        return text
    return text.splitlines()[0][:500] if text else type(e).__name__


__all__ = ["job_group", "run_tasks", "task_error", "write_token"]
