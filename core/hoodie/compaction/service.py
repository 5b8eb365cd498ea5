"""Compaction as a :class:`~hoodie.table_service.TableService`: Hudi's ``compaction`` action, which merges a
MERGE_ON_READ file slice's base file and log files into a new base file.

Scheduling (:mod:`hoodie.compaction.plan`) follows the table's trigger (:mod:`hoodie.compaction.trigger`)
and strategy (:mod:`hoodie.compaction.strategy`); execution is :mod:`hoodie.compaction.execute`, one task per
plan operation. A failed attempt's files are rolled back in the plan's file groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hoodie.compaction.execute import (
    CompactionResult,
    CompactionTask,
    TaskResult,
    commit_compaction,
    pending_compactions,
    prepare_compaction,
    run_compaction_task,
)
from hoodie.compaction.plan import ScheduleResult, schedule_compaction
from hoodie.compaction.strategy import CompactionConfig
from hoodie.compaction.trigger import TriggerConfig, evaluate_trigger
from hoodie.lock import NO_LOCK, LockProvider
from hoodie.metadata_table import refuse_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import (
    Done,
    Fence,
    Scheduled,
    ServiceJob,
    TableService,
    plan_bytes,
    rolled_back_note,
)
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.write.base_file import ParquetOptions


class Compaction(TableService):
    name = "compaction"
    priority = 2  # keeps reads fast
    merge_on_read_only = True

    @property
    def verb(self) -> str:
        return "compact"

    def check_settings(self, settings: Mapping[str, str]) -> None:
        CompactionConfig.from_config(settings)
        TriggerConfig.from_config(settings)
        ParquetOptions.from_config(settings)

    def pending(self, table: Table) -> list[Instant]:
        return pending_compactions(table)

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
        refuse_metadata_table(table.storage, table.config, self.name)
        return schedule_compaction(
            table.storage,
            lock,
            config=CompactionConfig.from_config(settings),
            trigger=TriggerConfig.from_config(settings) if respect_trigger else None,
            time_generator=time_generator,
            view=table,
            preview=preview,
        )

    def trigger_state(self, table: Table, settings: Mapping[str, str]) -> str | None:
        now = InstantTimeGenerator().now_in_zone(table.config)
        return evaluate_trigger(table.timeline, TriggerConfig.from_config(settings), now).reason

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[CompactionTask, TaskResult]:
        prepared = prepare_compaction(
            storage,
            lock,
            instant_time,
            parquet=ParquetOptions.from_config(settings) if settings else None,
            view=table,
            fence=fence,
        )
        rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0

        def commit(results: Sequence[TaskResult], fence: Fence | None) -> Done:
            return _done(commit_compaction(storage, lock, prepared, results, fence=fence), rolled)

        return ServiceJob(
            self.name,
            prepared.instant,
            prepared.tasks,
            run_compaction_task,
            commit,
            rollback_groups=tuple((op.partition_path, op.file_id) for op in prepared.plan.operations),
            rolled_back_files=rolled,
            table_name=prepared.config.name,
            task_bytes=tuple(plan_bytes(unit.metrics) for unit in prepared.plan.operations),
        )


def _done(result: CompactionResult, rolled: int) -> Done:
    summary = (
        f"{len(result.metadata.write_stats)} base file(s), {result.records_written} record(s), "
        f"{result.bytes_written} byte(s)" + rolled_back_note(rolled)
    )
    return Done(result.instant, summary, result.records_written, result.bytes_written, rolled)


COMPACTION = Compaction()

__all__ = ["COMPACTION", "Compaction"]
