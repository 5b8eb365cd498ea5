"""Clean as a :class:`~hoodie.table_service.TableService`: Hudi's ``clean`` action, which deletes file
versions no query needs any more.

Scheduling is :mod:`hoodie.clean.plan` (policies, retention, trigger); under the ``LAZY`` failed-writes
policy, writes whose heartbeat expired are rolled back first, as Hudi does before it plans a clean.
Execution is :mod:`hoodie.clean.execute`: the deletes go out in batches, one task each, each batch deleting
``hoodie.clean.hoodied.delete.concurrency`` files at a time. Small plans are one batch in the driver
(starting executor tasks for a handful of deletes costs more than the deletes, and one batch keeps the
driver to the bound); a failed run stays pending and is simply run again (deleting is idempotent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from hoodie.clean.execute import (
    CleanResult,
    DeleteBatch,
    DeleteResult,
    commit_clean,
    delete_concurrency,
    delete_files,
    prepare_clean,
)
from hoodie.clean.plan import CleanConfig, FailedWritesPolicy, clean_due, pending_cleans, schedule_clean
from hoodie.lock import LockProvider
from hoodie.metadata_table import refuse_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import Done, Fence, Scheduled, ServiceJob, TableService
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.write.failed_writes import rollback_failed_writes
from hoodie.write.heartbeat import HeartbeatConfig

logger = logging.getLogger(__name__)

#: Plans with at least this many files delete on executors (Hudi: ``hoodie.cleaner.parallelism`` = 200
#: tasks); smaller ones as one batch in the driver.
EXECUTOR_MIN_FILES = 1000
PARALLELISM = 200


def delete_batch(batch: DeleteBatch, write_token: str) -> list[DeleteResult]:
    """One task: delete one batch (deletes write nothing, so the token is not used)."""
    return delete_files(batch)


class Clean(TableService):
    name = "clean"
    priority = 0  # frees space, blocks nothing

    def __init__(self, executor_min_files: int = EXECUTOR_MIN_FILES, parallelism: int = PARALLELISM) -> None:
        self.executor_min_files = executor_min_files
        self.parallelism = parallelism

    def check_settings(self, settings: Mapping[str, str]) -> None:
        CleanConfig.from_config(settings)
        HeartbeatConfig.from_config(settings)
        delete_concurrency(settings)

    def pending(self, table: Table) -> list[Instant]:
        return pending_cleans(table)

    def schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None = None,
        *,
        respect_trigger: bool = True,
    ) -> Scheduled:
        storage = table.storage
        config = CleanConfig.from_config(settings)
        refuse_metadata_table(storage, table.config, self.name)
        rolled = 0
        if config.failed_writes is FailedWritesPolicy.LAZY:
            for done in rollback_failed_writes(storage, lock, HeartbeatConfig.from_config(settings)):
                logger.info(
                    "rolled back failed write %s of %s (heartbeat expired): %d file(s) deleted",
                    done.rolled_back,
                    storage.uri,
                    len(done.deleted),
                )
                rolled += len(done.deleted)
            view = None if rolled else table  # a rollback changed the timeline
        else:
            view = table
        result = schedule_clean(
            storage,
            lock,
            config=config,
            respect_trigger=respect_trigger,
            time_generator=time_generator,
            view=view,
        )
        return Scheduled(result.instant, result.reason, files_deleted=rolled)

    def trigger_state(self, table: Table, settings: Mapping[str, str]) -> str | None:
        fires, why = clean_due(table, CleanConfig.from_config(settings))
        return f"clean trigger {'fires' if fires else 'does not fire'}: {why}"

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[DeleteBatch, list[DeleteResult]]:
        started = time.monotonic()
        concurrency = delete_concurrency(settings)  # a bad value fails before the clean goes inflight
        prepared = prepare_clean(storage, lock, instant_time, view=table)
        n = len(prepared.paths)
        in_driver = n < self.executor_min_files
        size = n if in_driver else max(1, -(-n // self.parallelism))

        def commit(results: Sequence[list[DeleteResult]], fence: Fence | None) -> Done:
            flat = [r for part in results for r in part]
            return _done(commit_clean(storage, lock, prepared, flat, started=started, fence=fence))

        return ServiceJob(
            self.name,
            prepared.instant,
            tuple(prepared.batches(storage, size, concurrency)),
            delete_batch,
            commit,
            in_driver=in_driver,
        )


def _done(result: CleanResult) -> Done:
    summary = (
        f"{result.files_deleted} file(s) deleted, {result.bytes_deleted} byte(s) freed, "
        f"{len(result.failed)} failed"
    )
    return Done(
        result.instant, summary, files_deleted=result.files_deleted, bytes_deleted=result.bytes_deleted
    )


CLEAN = Clean()

__all__ = ["CLEAN", "EXECUTOR_MIN_FILES", "PARALLELISM", "Clean", "delete_batch"]
