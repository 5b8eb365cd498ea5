"""Clean as a job: the driver prepares and commits (:mod:`hoodie.clean.execute`); the deletes run as a Spark
job when the plan is large, on a thread pool in the driver when it is small (starting tasks for a handful of
deletes costs more than the deletes).

The Spark job runs in a job group named after the instant (``hoodied-clean-<instant>``). A delete that fails
is reported, not raised: the clean completes with it in ``failedDeleteFiles``. A job that fails as a whole
leaves the clean inflight; deleting is idempotent, so the next run simply runs it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hoodie.clean.execute import CleanResult, DeleteResult, commit_clean, delete_files, prepare_clean
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodied.errors import JobFailed
from hoodied.jobs import job_group, run_tasks, task_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

# Plans with at least this many files delete through Spark (Hudi: ``hoodie.cleaner.parallelism`` = 200 tasks).
SPARK_MIN_FILES = 1000
PARALLELISM = 200
THREADS = 8


@dataclass(frozen=True)
class CleanJobResult:
    result: CleanResult
    seconds: float
    used_spark: bool


def run_clean_job(
    spark: SparkSession | None,
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    fence: Callable[[], None] | None = None,
    spark_min_files: int = SPARK_MIN_FILES,
    parallelism: int = PARALLELISM,
) -> CleanJobResult:
    """Run the pending clean at ``instant_time`` (default: the earliest) and complete it.

    The caller holds the instant's claim (``fence`` re-checks it before the commit). ``spark`` may be
    ``None`` when the caller knows plans are small; then the deletes always run on threads.
    """
    started = time.monotonic()
    prepared = prepare_clean(storage, lock, instant_time)
    T = prepared.instant.time
    n = len(prepared.paths)
    use_spark = spark is not None and n >= spark_min_files
    results: list[DeleteResult] = []
    if use_spark:
        assert spark is not None
        batches = prepared.batches(storage, max(1, -(-n // parallelism)))
        try:
            for part in run_tasks(
                spark, job_group("clean", T), f"clean {T} of {storage.uri}", batches, delete_files
            ):
                results.extend(part)
        except Exception as e:  # Py4JJavaError
            raise JobFailed(
                f"clean {T} of {storage.uri} failed in Spark (stays inflight, re-runnable): {task_error(e)}"
            ) from e
    else:
        batches = prepared.batches(storage, 64)
        if batches:
            with ThreadPoolExecutor(max_workers=min(THREADS, len(batches))) as pool:
                for part in pool.map(delete_files, batches):
                    results.extend(part)
    result = commit_clean(storage, lock, prepared, results, started=started, fence=fence)
    return CleanJobResult(result, time.monotonic() - started, use_spark)


__all__ = ["PARALLELISM", "SPARK_MIN_FILES", "CleanJobResult", "run_clean_job"]
