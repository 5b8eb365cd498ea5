"""Clustering as a Spark job: the driver prepares and commits (:mod:`hoodie.clustering.execute`), one Spark
task per clustering group rewrites its file slices into new file groups with our format library.

The job runs in a job group named after the instant (``hoodied-clustering-<instant>``), so it can be
cancelled as a whole. Each task's write token is Spark's ``<partition id>-<stage id>-<task attempt id>``, as
Hudi's: a retried or speculative attempt writes files of its own, and the driver deletes every file that
markers show but the results do not name before it commits.

A task failure is a definite failure: the attempt's files are rolled back and the instant goes back to
requested, ready for the next run. A write that touched the plan's file groups meanwhile is a conflict: the
driver rolls the clustering back for good and raises :class:`~hoodie.clustering.execute.ClusteringConflict`
(a fresh plan is the next scheduling's). A lost claim or an unknown outcome leaves the instant inflight for
the claim's next holder, who rolls it back before running it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hoodie.clustering.execute import (
    ClusteringResult,
    ClusteringTask,
    TaskResult,
    commit_clustering,
    prepare_clustering,
    run_clustering_task,
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
class ClusteringJobResult:
    result: ClusteringResult
    seconds: float
    rolled_back_files: int


def _spark_task(task: ClusteringTask) -> TaskResult:
    return run_clustering_task(task, write_token(task.index))


def run_clustering_job(
    spark: SparkSession,
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    parquet: ParquetOptions | None = None,
    fence: Callable[[], None] | None = None,
) -> ClusteringJobResult:
    """Run the pending clustering at ``instant_time`` (default: the earliest) as a Spark job and commit it.

    The caller holds the instant's claim (``fence`` re-checks it before the commit).
    """
    started = time.monotonic()
    prepared = prepare_clustering(storage, lock, instant_time, parquet=parquet)
    T = prepared.instant.time
    try:
        results = run_tasks(
            spark, job_group("clustering", T), f"clustering {T} of {storage.uri}", prepared.tasks, _spark_task
        )
    except Exception as e:  # Py4JJavaError carries the Python traceback of the failed task
        reason = task_error(e)
        logger.error("clustering %s of %s failed in a task: %s", T, storage.uri, reason)
        if fence is not None:
            fence()  # only the claim holder may clean up
        groups: list[tuple[str, str | None]] = [(p, None) for p in prepared.partitions]
        rollback_unfinished(storage, lock, prepared.instant, groups)
        raise JobFailed(f"clustering {T} of {storage.uri} failed (rolled back to requested): {reason}") from e
    result = commit_clustering(storage, lock, prepared, results, fence=fence)
    rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0
    return ClusteringJobResult(result, time.monotonic() - started, rolled)


__all__ = ["ClusteringJobResult", "run_clustering_job"]
