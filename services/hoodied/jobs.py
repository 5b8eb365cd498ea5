"""The Spark side every table-service job shares: a job group per instant, one Spark task per unit of work,
Hudi-style write tokens, and a readable reason when a task fails.

A job runs in the job group ``hoodied-<action>-<instant>`` so that it can be cancelled as a whole (a lost
claim, a shutdown). Each task's write token is Spark's ``<partition id>-<stage id>-<task attempt id>``, as
Hudi's: a retried or speculative attempt writes files of its own, which the driver deletes before it commits.

When a task fails, Spark ends the job at once while the other tasks of the attempt may still be running (a
killed Python worker dies up to ``spark.python.task.killTimeout`` later): rolling back then would race them,
and a file they write after the rollback would be left behind. So a failed job's group is cancelled and
:func:`wait_for_group` waits until none of its tasks runs any more, up to :data:`TASK_STOP_TIMEOUT` seconds;
only then is the attempt rolled back. Tasks that do not stop in time leave the instant inflight (nothing is
rolled back under their feet): its next runner rolls it back once they are gone.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from hoodie.errors import HoodieError
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.timeline.instant import Instant
from hoodie.write.rollback import rollback_unfinished
from hoodied.errors import CORRUPT_DATA_ERRORS, CorruptData, JobFailed

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
_R = TypeVar("_R")

#: Seconds a failed job's other tasks get to stop before its rollback is given up.
TASK_STOP_TIMEOUT = 120.0


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


def run_service_tasks(
    spark: SparkSession,
    storage: Storage,
    lock: LockProvider,
    service: str,
    instant: Instant,
    tasks: Sequence[_T],
    fn: Callable[[_T], _R],
    groups: Iterable[tuple[str, str | None]],
    fence: Callable[[], None] | None = None,
) -> list[_R]:
    """:func:`run_tasks` for a table service's pending ``instant`` (compaction, clustering): a failed task is
    a definite failure, so the attempt's files in ``groups`` are rolled back, the instant goes back to
    requested, and :class:`~hoodied.errors.JobFailed` says why. Only the claim holder cleans up: ``fence``
    re-checks the claim first."""
    T = instant.time
    group = job_group(service, T)
    try:
        return run_tasks(spark, group, f"{service} {T} of {storage.uri}", tasks, fn)
    except Exception as e:  # Py4JJavaError carries the Python traceback of the failed task
        reason = task_error(e)
        logger.error("%s %s of %s failed in a task: %s", service, T, storage.uri, reason)
        if not wait_for_group(spark, group, TASK_STOP_TIMEOUT):
            raise JobFailed(
                f"{service} {T} of {storage.uri} failed ({reason}); some of its tasks did not stop within "
                f"{TASK_STOP_TIMEOUT:.0f} s, so it is left inflight for its next runner to roll back"
            ) from e
        if fence is not None:
            fence()
        rollback_unfinished(storage, lock, instant, groups)
        error = CorruptData if is_corrupt_data(e) else JobFailed
        raise error(f"{service} {T} of {storage.uri} failed (rolled back to requested): {reason}") from e


def wait_for_group(spark: SparkSession, group: str, timeout: float, poll: float = 0.1) -> bool:
    """Cancel job group ``group`` and wait until none of its tasks runs (True), or ``timeout`` seconds
    passed (False)."""
    sc = spark.sparkContext
    tracker = sc.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
    if any(j is not None and j.status == "RUNNING" for j in jobs):
        sc.cancelJobGroup(group)
    deadline = time.monotonic() + timeout
    while True:
        running = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            if job is None:
                continue
            for stage_id in job.stageIds:
                stage = tracker.getStageInfo(stage_id)
                running += stage.numActiveTasks if stage is not None else 0
            running += job.status == "RUNNING"
        if not running:
            return True
        if time.monotonic() >= deadline:
            logger.error("job group %s: tasks still running %.0f s after it was cancelled", group, timeout)
            return False
        time.sleep(poll)


def is_corrupt_data(e: BaseException) -> bool:
    """Whether a job failed because committed data is damaged: raised here, or named in a task's traceback
    (Spark hands the driver a task's Python error as text)."""
    if isinstance(e, CORRUPT_DATA_ERRORS):
        return True
    names = tuple(f"{cls.__module__}.{cls.__name__}" for cls in CORRUPT_DATA_ERRORS)
    return any(name in str(e) for name in names)


def task_error(e: BaseException) -> str:
    """The line of a failed job's error that says what went wrong.

    Spark hands the driver a failed task's Python traceback as text inside its own error (Py4J's); the line
    that matters is the exception line that ends the last traceback (``hoodie.errors.CorruptLogBlock: ...``).
    Without a traceback, the last line naming an error or exception, else the first line."""
    text = str(e)
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        for line in lines[starts[-1] + 1 :]:
            if line and not line[0].isspace():
                return _PYTHON_ERROR.sub(r"\1", line.strip())[:1000]
    for line in reversed(lines):
        line = line.strip()
        if line and ("Error" in line or "Exception" in line) and not line.startswith("at "):
            return line[:1000]
    if isinstance(e, HoodieError):
        return text
    return lines[0][:1000] if lines else type(e).__name__


#: A Python exception line as Spark quotes it: ``module.Name: message`` (the module path shortened away).
_PYTHON_ERROR = re.compile(r"^(?:[A-Za-z_][\w]*\.)*([A-Za-z_]\w*: .*)$")


__all__ = [
    "TASK_STOP_TIMEOUT",
    "is_corrupt_data",
    "job_group",
    "run_service_tasks",
    "run_tasks",
    "task_error",
    "wait_for_group",
    "write_token",
]
