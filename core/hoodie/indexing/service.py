"""Indexing as a :class:`~hoodie.table_service.TableService`: Hudi's ``indexing`` action, which builds
metadata-table partitions (column stats, bloom filters, record index, partition stats) of an existing table.

An operator requests it (``hoodied index --mode schedule``, Hudi's ``HoodieIndexer``): hoodied does not
schedule it on its own. The driver reads the plan and records the write instants completed at that moment
(``seen``): the build reads the table as they left it. The latest file slices are split into tasks of a few
slices each (:func:`shares`); a task returns the records of its slices, the record index's as compact key
locations (:func:`~hoodie.indexing.execute.build_index_share`). The commit makes and merges them into one
update and, under the table lock, completes the indexing (:func:`~hoodie.indexing.execute.complete_indexing`),
which catches up with the writes that completed while the tasks ran.

Tasks write nothing: a failed task, a failed run or a lost claim leaves the instant pending and its
partitions inflight (writers keep them up to date meanwhile), and the next run builds again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hoodie.config import TableConfig
from hoodie.file_group.file_group import FileSlice
from hoodie.indexing.execute import (
    IndexingResult,
    IndexShare,
    build_index_share,
    complete_indexing,
    index_slices,
    pending_indexing,
    pending_indexing_plan,
    refuse_while_older_writes_pend,
)
from hoodie.lock import LockProvider
from hoodie.metadata.records import MetadataRecord
from hoodie.metadata.writer import MetadataUpdate
from hoodie.storage import Storage, StorageRef
from hoodie.table import Table
from hoodie.table_service import Done, Fence, Scheduled, ServiceJob, TableService
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator

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


def build_share(task: IndexTask, write_token: str) -> IndexShare:
    """One task: a share of the slices (a build writes nothing, so the token is not used); the driver makes
    the records (:meth:`~hoodie.indexing.execute.IndexShare.to_update`)."""
    storage = task.storage.open()
    return build_index_share(storage, task.config, task.instant_time, task.partitions, task.slices)


def shares(slices: Sequence[FileSlice], parallelism: int) -> list[tuple[FileSlice, ...]]:
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


class Indexing(TableService):
    name = "indexing"
    priority = 5
    schedulable = False  # requested by an operator, with the indexes to build
    requested_by = (
        "as in Hudi, an index is built on request (hoodied index PATH --mode schedule, or Hudi's "
        "HoodieIndexer); the daemon runs the requested indexing instants of tables whose services list "
        "indexing"
    )

    def __init__(self, parallelism: int = PARALLELISM) -> None:
        self.parallelism = parallelism

    @property
    def verb(self) -> str:
        return "index"

    def check_settings(self, settings: Mapping[str, str]) -> None:
        """Indexing reads no ``hoodie.*`` setting: an operator names the indexes when requesting one."""

    def pending(self, table: Table) -> list[Instant]:
        return pending_indexing(table)

    def schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None = None,
        *,
        respect_trigger: bool = True,
    ) -> Scheduled:
        return Scheduled(None, self.requested_by)

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[IndexTask, IndexShare]:
        view = table if table is not None else Table.load(storage)
        instant, partitions = pending_indexing_plan(view, instant_time)
        refuse_while_older_writes_pend(view, instant.time, partitions)
        seen = frozenset(i.time for i in view.timeline.completed_writes())
        tasks = tuple(
            IndexTask(storage.ref(), view.config, instant.time, n, partitions, share)
            for n, share in enumerate(shares(index_slices(view), self.parallelism))
        )

        def commit(results: Sequence[IndexShare], fence: Fence | None) -> Done:
            update = merge_updates(instant.time, [share.to_update(view.config) for share in results])
            return _done(complete_indexing(storage, lock, instant, update, seen, fence=fence), len(tasks))

        return ServiceJob(
            self.name,
            instant,
            tasks,
            build_share,
            commit,
            table_name=view.config.name,
            task_bytes=tuple(sum(s.base_file_size + sum(s.log_file_sizes) for s in t.slices) for t in tasks),
        )


def _done(result: IndexingResult, tasks: int) -> Done:
    summary = (
        f"built {', '.join(result.partitions)}: {result.records} record(s) from {tasks} task(s), "
        f"{len(result.caught_up)} write(s) caught up"
    )
    return Done(result.instant, summary, result.records)


INDEXING = Indexing()

__all__ = ["INDEXING", "PARALLELISM", "IndexTask", "Indexing", "build_share", "merge_updates", "shares"]
