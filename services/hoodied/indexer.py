"""Indexing as a Spark job: the driver reads the plan and commits (:mod:`hoodie.metadata.indexing`), Spark
tasks build the records of the new metadata-table partitions, each for a share of the table's file slices.

The driver loads the table, decodes the pending indexing instant's plan, and records the write instants
completed at that moment (``seen``): the build reads the table as they left it. It splits the latest file
slices (:func:`~hoodie.metadata.indexing.index_slices`) into tasks of a few slices each; a task reopens the
storage from its URI and options and returns the records of its slices
(:func:`~hoodie.metadata.indexing.build_index_records`). The driver merges them into one update and, under the
table lock, re-checks the claim (``fence``) and completes the indexing
(:func:`~hoodie.metadata.indexing.complete_indexing`), which catches up with the writes that completed
while the job ran.

The job runs in a job group named after the instant (``hoodied-indexing-<instant>``), so it can be
cancelled as a whole. Tasks write nothing: a failed task, a failed job or a lost claim leaves the instant
pending and its partitions inflight (writers keep them up to date meanwhile), and the next run builds again.
A partition dropped while it was being built (Hudi's ``dropindex``) is not completed: the run fails with
nothing committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hoodie.config import TableConfig
from hoodie.file_group.file_group import FileSlice
from hoodie.lock import LockProvider
from hoodie.metadata.indexing import (
    IndexingFailed,
    IndexingResult,
    build_index_records,
    complete_indexing,
    index_slices,
    pending_indexing,
)
from hoodie.metadata.records import MetadataRecord
from hoodie.metadata.writer import MetadataUpdate
from hoodie.storage import Storage, StorageRef
from hoodie.table import Table
from hoodie.timeline.instant import State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import decode_index_plan
from hoodied.errors import CorruptData, JobFailed
from hoodied.jobs import is_corrupt_data, job_group, run_tasks, task_error

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Tasks per build at most (Hudi: ``hoodie.metadata.index.column.stats.parallelism`` = 200); below that,
#: one task per file slice.
PARALLELISM = 200


@dataclass(frozen=True)
class IndexTask:
    """Everything an executor needs to build the records of a share of the slices; small and picklable."""

    storage: StorageRef
    config: TableConfig
    instant_time: str
    index: int
    partitions: tuple[str, ...]
    slices: tuple[FileSlice, ...]


@dataclass(frozen=True)
class IndexingJobResult:
    result: IndexingResult
    seconds: float
    tasks: int


def _spark_task(task: IndexTask) -> MetadataUpdate:
    storage = task.storage.open()
    return build_index_records(storage, task.config, task.instant_time, task.partitions, task.slices)


def _shares(slices: Sequence[FileSlice], parallelism: int) -> list[tuple[FileSlice, ...]]:
    """``slices`` in at most ``parallelism`` runs of neighbours (a partition's slices stay together), their
    lengths differing by one at most."""
    n = len(slices)
    k = min(n, max(1, parallelism))
    return [tuple(slices[i * n // k : (i + 1) * n // k]) for i in range(k)]


def merge_updates(instant_time: str, updates: Sequence[MetadataUpdate]) -> MetadataUpdate:
    """One update holding every task's records, files and deleted keys, in task order."""
    added: dict[str, dict[str, int]] = {}
    deleted: dict[str, list[str]] = {}
    records: dict[str, list[MetadataRecord]] = {}
    deleted_keys: dict[str, list[str]] = {}
    for update in updates:
        for partition, files in update.files_added.items():
            added.setdefault(partition, {}).update(files)
        for partition, names in update.files_deleted.items():
            deleted.setdefault(partition, []).extend(names)
        for partition, recs in update.records.items():
            records.setdefault(partition, []).extend(recs)
        for partition, keys in update.deleted_keys.items():
            deleted_keys.setdefault(partition, []).extend(keys)
    return MetadataUpdate(instant_time, added, deleted, records, deleted_keys)


def run_indexing_job(
    spark: SparkSession,
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
    parallelism: int = PARALLELISM,
) -> IndexingJobResult:
    """Run the pending indexing at ``instant_time`` (default: the earliest) as a Spark job and complete it.

    The caller holds the instant's claim (``fence`` re-checks it under the table lock before the commit).
    """
    started = time.monotonic()
    table = Table.load(storage)
    chosen = [i for i in pending_indexing(table) if instant_time is None or i.time == instant_time]
    if not chosen:
        raise IndexingFailed(
            f"no pending indexing{' ' + instant_time if instant_time else ''} on {storage.uri}"
        )
    instant = chosen[0]
    T = instant.time
    plan = decode_index_plan(storage.read(table.timeline.file_of(T, State.REQUESTED)))
    partitions = tuple(i.metadata_partition_path or "" for i in plan.index_partition_infos)
    seen = frozenset(i.time for i in table.timeline.completed_writes())
    slices = index_slices(table)
    tasks = [
        IndexTask(storage.ref(), table.config, T, n, partitions, share)
        for n, share in enumerate(_shares(slices, parallelism))
    ]
    try:
        built = run_tasks(
            spark, job_group("indexing", T), f"indexing {T} of {storage.uri}", tasks, _spark_task
        )
    except Exception as e:  # Py4JJavaError carries the Python traceback of the failed task
        error = CorruptData if is_corrupt_data(e) else JobFailed
        raise error(
            f"indexing {T} of {storage.uri} failed in Spark (stays pending, re-runnable): {task_error(e)}"
        ) from e
    update = merge_updates(T, built)
    result = complete_indexing(
        storage, lock, instant, update, seen, fence=fence, time_generator=time_generator
    )
    return IndexingJobResult(result, time.monotonic() - started, len(tasks))


__all__ = ["PARALLELISM", "IndexTask", "IndexingJobResult", "merge_updates", "run_indexing_job"]
