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
from hoodied.jobs import run_service_tasks, write_token

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


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
    groups: list[tuple[str, str | None]] = [(p, None) for p in prepared.partitions]
    results = run_service_tasks(
        spark, storage, lock, "clustering", prepared.instant, prepared.tasks, _spark_task, groups, fence
    )
    result = commit_clustering(storage, lock, prepared, results, fence=fence)
    rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0
    return ClusteringJobResult(result, time.monotonic() - started, rolled)


__all__ = ["ClusteringJobResult", "run_clustering_job"]
