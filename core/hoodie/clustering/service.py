"""Clustering as a :class:`~hoodie.table_service.TableService`: Hudi's clustering (a ``replacecommit``, or a
``clustering`` action from table version 8), which rewrites small or unsorted file groups into new ones.

Scheduling and its trigger are :mod:`hoodie.clustering.plan`; execution is :mod:`hoodie.clustering.execute`,
one task per plan group. A failed attempt's files are rolled back in the plan's partitions (new file groups
have no id before they are written).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hoodie.clustering.execute import (
    ClusteringResult,
    ClusteringTask,
    TaskResult,
    commit_clustering,
    pending_clusterings,
    prepare_clustering,
    run_clustering_task,
)
from hoodie.clustering.layout import LayoutConfig
from hoodie.clustering.plan import (
    ClusteringConfig,
    ScheduleResult,
    evaluate_clustering_trigger,
    schedule_clustering,
)
from hoodie.lock import NO_LOCK, LockProvider
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import (
    Done,
    Fence,
    Scheduled,
    ServiceJob,
    TableService,
    rolled_back_note,
)
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.write.base_file import ParquetOptions


class Clustering(TableService):
    name = "clustering"
    priority = 4  # the most expensive

    @property
    def verb(self) -> str:
        return "cluster"

    def check_settings(self, settings: Mapping[str, str]) -> None:
        ClusteringConfig.from_config(settings)
        ParquetOptions.from_config(settings)

    def pending(self, table: Table) -> list[Instant]:
        return pending_clusterings(table)

    def schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None = None,
        *,
        respect_trigger: bool = True,
    ) -> Scheduled:
        result = self._schedule(table, lock, settings, time_generator, respect_trigger, preview=False)
        return Scheduled(result.instant, result.reason)

    def preview(self, table: Table, settings: Mapping[str, str]) -> str | None:
        return self._schedule(table, NO_LOCK, settings, None, True, preview=True).reason

    def _schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None,
        respect_trigger: bool,
        *,
        preview: bool,
    ) -> ScheduleResult:
        """:meth:`schedule`, or with ``preview`` its decision on the view alone, nothing written."""
        return schedule_clustering(
            table.storage,
            lock,
            config=ClusteringConfig.from_config(settings),
            respect_trigger=respect_trigger,
            time_generator=time_generator,
            view=table,
            preview=preview,
        )

    def trigger_state(self, table: Table, settings: Mapping[str, str]) -> str | None:
        return evaluate_clustering_trigger(table, ClusteringConfig.from_config(settings)).reason

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[ClusteringTask, TaskResult]:
        prepared = prepare_clustering(
            storage,
            lock,
            instant_time,
            parquet=ParquetOptions.from_config(settings) if settings else None,
            view=table,
            fence=fence,
            # A plan naming no layout (Hudi's never do) is ordered as this table's settings say, as Hudi's
            # executors take it from their own config.
            layout=LayoutConfig.from_config(settings) if settings else None,
        )
        rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0

        def commit(results: Sequence[TaskResult], fence: Fence | None) -> Done:
            return _done(commit_clustering(storage, lock, prepared, results, fence=fence), rolled)

        return ServiceJob(
            self.name,
            prepared.instant,
            prepared.tasks,
            run_clustering_task,
            commit,
            rollback_groups=tuple((p, None) for p in prepared.partitions),
            rolled_back_files=rolled,
            table_name=prepared.config.name,
            task_bytes=prepared.task_bytes,
        )


def _done(result: ClusteringResult, rolled: int) -> Done:
    summary = (
        f"{result.file_groups_replaced} file group(s) rewritten into {len(result.metadata.write_stats)} "
        f"file(s), {result.records_written} record(s), {result.bytes_written} byte(s)"
        + rolled_back_note(rolled)
    )
    return Done(result.instant, summary, result.records_written, result.bytes_written, rolled)


CLUSTERING = Clustering()

__all__ = ["CLUSTERING", "Clustering"]
