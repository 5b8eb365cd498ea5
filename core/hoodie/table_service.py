"""The shape every table service shares, so that the daemon, the CLI and the metrics handle them alike.

A table service (compaction, clustering, clean, indexing, ...) is one :class:`TableService` object. It
answers the same five questions for every kind of work:

1. **pending**: which of its instants a timeline view holds that are requested or inflight, oldest first
   (pure: it reads the view it is given and at most the plans the view names);
2. **schedule**: decide from the table's settings whether something is due and, if so, plan it and request
   an instant (under the table lock; the decision is first made on the view it is handed, so an idle table
   costs no lock);
3. **prepare**: move one pending instant to inflight (rolling back an abandoned attempt first) and split its
   plan into picklable tasks: a :class:`ServiceJob`;
4. **run a task**: ``job.run_task(task, write_token)``, a module-level function an executor can run;
5. **commit**: ``job.commit(results, fence)``: re-read the table under the lock, check the tasks' results,
   complete the instant, and say what was done (:class:`Done`).

A run that finds nothing to do (the instant completed meanwhile, or never existed) raises
:class:`~hoodie.errors.NothingToDo`; every service's own "nothing to ..." error derives from it.

A service that works without instants of its own (archival: Hudi records no action for it) has no pending
work and nothing to prepare; it does its whole run in :meth:`TableService.maintain`, which the daemon calls
after the other services of each table that lists it, under the table's ``schedule`` claim.

Where the tasks run is the caller's business: :func:`run_in_process` runs them here (tests, benchmarks, small
tables), the daemon's runner as a Spark job. A job whose tasks write files names the file groups they write
in (``rollback_groups``), so a failed attempt can be rolled back; a job whose tasks write nothing (clean's
deletes, indexing's record builds) leaves ``None``, and a failed run simply stays pending.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from hoodie.config import TableConfig, TableType
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.write.attempt import Attempt

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")

#: Re-checks the caller's claim on the instant right before the completing write; raises when it was lost.
Fence = Callable[[], None]


@dataclass(frozen=True)
class Scheduled:
    """What scheduling decided: the requested instant, or ``None`` and why not."""

    instant: Instant | None
    reason: str
    #: Files deleted on the way (clean's lazy rollback of failed writes), for the metrics.
    files_deleted: int = 0


@dataclass(frozen=True)
class Done:
    """What a completed run did, in the terms every service reports (logs, metrics, ``hoodied status``)."""

    instant: Instant
    summary: str  # e.g. "3 base file(s), 1200 record(s), 40960 byte(s)"
    records: int = 0
    bytes_written: int = 0
    files_deleted: int = 0
    bytes_deleted: int = 0


@dataclass(frozen=True)
class Maintained:
    """What one run of a service without instants did to a table (and its metadata table)."""

    changed: bool
    summary: str
    #: Timeline (or other) files it removed.
    files_deleted: int = 0
    #: What it moved or processed, in the service's own unit (archival: instants archived).
    items: int = 0


@dataclass(frozen=True)
class ServiceJob(Generic[TaskT, ResultT]):
    """A pending instant made ready to run: inflight, its plan split into tasks.

    ``run_task`` must be a module-level function (executors import it by name); ``commit`` runs in the
    driver only. ``tasks`` run in any order, each at most once per attempt; ``commit`` gets their results in
    task order.
    """

    service: str
    instant: Instant
    tasks: tuple[TaskT, ...]
    run_task: Callable[[TaskT, str], ResultT]
    commit: Callable[[Sequence[ResultT], Fence | None], Done]
    #: The (partition, file id or ``None`` for the whole partition) an attempt writes in, for its rollback;
    #: ``None`` when the tasks write nothing and a failed run stays pending as it is.
    rollback_groups: tuple[tuple[str, str | None], ...] | None = None
    #: The tasks are too small to be worth an executor each: run them on threads in the driver.
    in_driver: bool = False
    #: Files of an abandoned earlier attempt that ``prepare`` rolled back.
    rolled_back_files: int = 0
    #: The table's name (``hoodie.table.name``), for job names.
    table_name: str = ""
    #: Each task's input bytes as its plan states them (:func:`plan_bytes`), in task order; empty when the
    #: plan states none (the job is then sized by its task count alone).
    task_bytes: tuple[int, ...] = ()


def plan_bytes(metrics: Mapping[str, float]) -> int:
    """The bytes a plan's unit of work reads, from its metrics as Hudi's planners (and ours) write them:
    ``TOTAL_IO_READ_MB`` (base and log files, whole MB), else ``TOTAL_LOG_FILES_SIZE`` (bytes), else 0."""
    read_mb = metrics.get("TOTAL_IO_READ_MB")
    if read_mb:
        return int(read_mb * 1024 * 1024)
    return int(metrics.get("TOTAL_LOG_FILES_SIZE") or 0)


class TableService(abc.ABC):
    """One table service: see the module doc for the five steps."""

    #: The service's name: configuration, claims, metrics labels, Spark pools and job groups use it.
    name: ClassVar[str]
    #: Priority among instants of the same age (lower first).
    priority: ClassVar[int]
    #: Whether hoodied schedules it on its own (indexing is requested by an operator: ``hoodied index``).
    schedulable: ClassVar[bool] = True
    #: For a service hoodied does not schedule: who requests its instants, and how.
    requested_by: ClassVar[str] = ""
    #: Whether only MERGE_ON_READ tables have this service's work.
    merge_on_read_only: ClassVar[bool] = False
    #: Whether the service works through instants of its own (pending -> prepare -> tasks -> commit); one
    #: that does not (archival) runs through :meth:`maintain`.
    has_instants: ClassVar[bool] = True

    def applies_to(self, config: TableConfig) -> str | None:
        """Why this service has nothing to do on a table of this kind, or ``None`` when it applies."""
        if self.merge_on_read_only and config.table_type is not TableType.MERGE_ON_READ:
            return f"only MERGE_ON_READ tables {self.verb}"
        return None

    @property
    def verb(self) -> str:
        return self.name

    @abc.abstractmethod
    def check_settings(self, settings: Mapping[str, str]) -> None:
        """Parse the ``hoodie.*`` settings this service reads, so a bad one fails at start-up and names
        itself (raises :class:`~hoodie.errors.HoodieError` or :class:`ValueError`)."""

    @abc.abstractmethod
    def pending(self, table: Table) -> list[Instant]:
        """This service's requested and inflight instants in ``table``'s timeline, oldest first."""

    @abc.abstractmethod
    def schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None = None,
        *,
        respect_trigger: bool = True,
    ) -> Scheduled:
        """Request an instant if the service's trigger fires and there is something to plan.

        ``table`` is the caller's view (read without the lock); the plan that is requested is made again on
        a view read under the lock. ``settings`` are the table's properties overlaid with the operator's
        ``hoodie.*`` settings. ``respect_trigger=False`` plans whenever there is something to plan (an
        operator's ``hoodied ctl trigger``, Hudi's explicit schedule): the trigger is not consulted.
        """

    @abc.abstractmethod
    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[Any, Any]:
        """Move the pending instant at ``instant_time`` (default: the earliest) to inflight and split it.

        ``table``, when given, is a view the caller read after it claimed the instant; it saves a load.
        ``fence`` re-checks the caller's right to the instant (its claim and lease); it runs under the table
        lock right before an abandoned attempt's files are deleted, so a run that lost the instant meanwhile
        deletes nothing (:func:`~hoodie.write.rollback.rollback_unfinished`).
        Raises :class:`~hoodie.errors.NothingToDo` when there is no such pending instant.
        """

    def trigger_state(self, table: Table, settings: Mapping[str, str]) -> str | None:
        """Whether the service's trigger fires on ``table`` now and why, as a sentence ("trigger NUM_COMMITS
        does not fire: 3 deltacommit(s) (bound 5) ..."), for ``hoodied status``; None for a service without
        a trigger. Decided on the view; reads at most a few timeline files, never plans."""
        return None

    def preview(self, table: Table, settings: Mapping[str, str]) -> str | None:
        """What scheduling the service on ``table`` would do now and why, as one sentence, decided by the
        steps :meth:`schedule` takes (its trigger, then its plan on the view) with nothing written: the
        CLI's ``hoodied status`` says what the daemon would. Default: the trigger's sentence, for a service
        whose scheduling cannot be previewed without acting (clean rolls back failed writes first)."""
        return self.trigger_state(table, settings)

    def maintenance_due(self, table: Table, settings: Mapping[str, str]) -> bool:
        """Whether :meth:`maintain` may have work on ``table``, decided on the view alone (no I/O), so that an
        idle table costs no claim and no lock. Services with instants have nothing to maintain."""
        return False

    def maintain(self, table: Table, lock: LockProvider, settings: Mapping[str, str]) -> Maintained:
        """One run of a service without instants on ``table`` (the caller's view: a run with nothing to do
        takes no lock). Services with instants have nothing to maintain."""
        raise NotImplementedError(f"{self.name} works through its instants, not maintain()")


def rolled_back_note(files: int) -> str:
    """A summary's note on an abandoned attempt that ``prepare`` rolled back."""
    return f"; rolled back an unfinished attempt ({files} file(s))" if files else ""


def run_in_process(job: ServiceJob[TaskT, ResultT], fence: Fence | None = None, threads: int = 1) -> Done:
    """Run ``job``'s tasks in this process (on ``threads`` threads), as one attempt with write tokens of its
    own (:mod:`hoodie.write.attempt`), and commit it."""
    attempt = Attempt.new()
    tokens = [attempt.write_token(i) for i in range(len(job.tasks))]
    if threads > 1 and len(job.tasks) > 1:
        with ThreadPoolExecutor(max_workers=min(threads, len(job.tasks))) as pool:
            results = list(pool.map(job.run_task, job.tasks, tokens))
    else:
        results = [job.run_task(task, token) for task, token in zip(job.tasks, tokens, strict=True)]
    return job.commit(results, fence)


__all__ = [
    "Done",
    "Fence",
    "Maintained",
    "Scheduled",
    "ServiceJob",
    "TableService",
    "rolled_back_note",
    "run_in_process",
]
