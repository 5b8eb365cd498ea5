"""Log compaction as a :class:`~hoodie.table_service.TableService`: Hudi's ``logcompaction`` action, which
merges the log blocks of a MERGE_ON_READ file slice into a new log file (completing as a ``deltacommit``),
leaving the base file alone: fewer blocks to read and merge until the next compaction.

Scheduling (:mod:`hoodie.logcompaction.plan`) waits for a write since the latest (log) compaction
(:mod:`hoodie.logcompaction.trigger`) and plans the slices with enough log files or valid blocks; execution is
:mod:`hoodie.logcompaction.execute`, one task per plan operation. A failed attempt's log files (those holding
only its blocks) are rolled back in the plan's file groups.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hoodie.lock import NO_LOCK, LockProvider
from hoodie.logcompaction.execute import (
    LogCompactionResult,
    LogCompactionTask,
    TaskResult,
    commit_log_compaction,
    pending_log_compactions,
    prepare_log_compaction,
    run_log_compaction_task,
)
from hoodie.logcompaction.plan import SERVICE, ScheduleResult, schedule_log_compaction
from hoodie.logcompaction.trigger import LogCompactionConfig, evaluate_trigger
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


class LogCompaction(TableService):
    name = SERVICE
    priority = 3  # keeps reads fast, as compaction does, and costs less
    merge_on_read_only = True

    @property
    def verb(self) -> str:
        return "log-compact"

    def check_settings(self, settings: Mapping[str, str]) -> None:
        LogCompactionConfig.from_config(settings)

    def pending(self, table: Table) -> list[Instant]:
        return pending_log_compactions(table)

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
        return schedule_log_compaction(
            table.storage,
            lock,
            config=LogCompactionConfig.from_config(settings),
            respect_trigger=respect_trigger,
            time_generator=time_generator,
            view=table,
            preview=preview,
        )

    def trigger_state(self, table: Table, settings: Mapping[str, str]) -> str | None:
        decision = evaluate_trigger(table.timeline)
        return f"log compaction trigger {'fires' if decision.fire else 'does not fire'}: {decision.reason}"

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[LogCompactionTask, TaskResult]:
        prepared = prepare_log_compaction(
            storage,
            lock,
            instant_time,
            settings=LogCompactionConfig.from_config(settings) if settings else None,
            view=table,
            fence=fence,
        )
        rolled = len(prepared.rolled_back.deleted) if prepared.rolled_back else 0

        def commit(results: Sequence[TaskResult], fence: Fence | None) -> Done:
            return _done(commit_log_compaction(storage, lock, prepared, results, fence=fence), rolled)

        return ServiceJob(
            self.name,
            prepared.instant,
            prepared.tasks,
            run_log_compaction_task,
            commit,
            rollback_groups=prepared.groups,
            rolled_back_files=rolled,
            table_name=prepared.config.name,
            task_bytes=tuple(plan_bytes(unit.metrics) for unit in prepared.plan.operations),
        )


def _done(result: LogCompactionResult, rolled: int) -> Done:
    summary = (
        f"{len(result.metadata.write_stats)} log file(s) from {result.blocks_read} block(s) read, "
        f"{result.records_written} record(s), {result.bytes_written} byte(s)" + rolled_back_note(rolled)
    )
    return Done(result.instant, summary, result.records_written, result.bytes_written, rolled)


LOG_COMPACTION = LogCompaction()

__all__ = ["LOG_COMPACTION", "LogCompaction"]
