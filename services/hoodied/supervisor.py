"""The supervisor: which table-service instants to run, in what order, by whom. It is three parts around one
shutdown event:

- the :class:`~hoodied.poller.Poller` walks every table each poll (one listing of an idle table), records
  what is pending and offers the runnable instants oldest first;
- the :class:`~hoodied.scheduler.Scheduler`, called by the poll, requests new instants where hoodied
  schedules services (Hudi's strategies and triggers, under the table's ``schedule`` claim and lock);
- the :class:`~hoodied.runner.Runner`'s workers (``spark.max_concurrent_jobs`` threads) claim each instant,
  run it as a Spark job fenced by the claim, and retry or give up what fails.

Setting the shutdown event stops all three from starting anything new: the poll ends, scheduling stops
between services, workers take no further instant (running jobs finish, or are cancelled by
:meth:`Supervisor.drain`).

Indexing instants are run, never scheduled: as in Hudi, an index is built on request (``hoodied index
--mode schedule``, Hudi's ``HoodieIndexer``), and the daemon completes the requested ones.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from hoodied.change_events import ChangeEvents
from hoodied.config import DaemonConfig
from hoodied.control import ControlStore
from hoodied.coordination import Coordination
from hoodied.health import Heartbeats
from hoodied.metrics import Metrics
from hoodied.poller import Poller
from hoodied.runner import Runner
from hoodied.scheduler import Scheduler
from hoodied.table_split import TableSplit
from hoodied.work import JobOutcome, WatchedTable, WorkItem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class Supervisor:
    """Polls the tables and runs their pending table-service instants (see the module docstring)."""

    def __init__(
        self,
        config: DaemonConfig,
        coordination: Coordination,
        metrics: Metrics,
        heartbeats: Heartbeats,
        spark: Callable[[], SparkSession],
        *,
        control: ControlStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        events: ChangeEvents | None = None,
    ) -> None:
        """``control``: where the operators' commands are read (:mod:`hoodied.control`); None: none.
        ``events``: the change events that make a table due now (:mod:`hoodied.change_events`). With
        ZooKeeper, each table is listed and scheduled by one replica (:mod:`hoodied.table_split`)."""
        self.config = config
        self.coordination = coordination
        self.metrics = metrics
        self.heartbeats = heartbeats
        self.stopping = threading.Event()  # the one shutdown event: nothing new starts once it is set
        #: What failed since the daemon started (tables that could not be polled, jobs that definitely
        #: failed, stopped on damaged data or ended unknown), for ``run --once``'s exit status.
        self.failures: list[str] = []
        self.control = control
        self.scheduler = Scheduler(config, coordination, metrics, self.stopping, control=control, clock=clock)
        self.runner = Runner(config, coordination, metrics, spark, self.stopping, self.failures, clock=clock)
        self.poller = Poller(
            config,
            coordination,
            metrics,
            heartbeats,
            self.scheduler,
            self.runner,
            self.stopping,
            self.failures,
            control=control,
            clock=clock,
            events=events,
            split=TableSplit(config.replica, coordination) if not config.embedded else None,
        )

    def tables(self) -> list[WatchedTable]:
        return self.poller.tables()

    def refresh_tables(self) -> None:
        self.poller.refresh_tables()

    def reconfigure(self, config: DaemonConfig) -> None:
        """Watch ``config``'s tables from the next poll on (:mod:`hoodied.config_reload`: only its tables and
        discovery roots differ from the configuration the replica started with)."""
        self.config = config
        self.poller.reconfigure(config)

    def discovery(self) -> list[dict[str, object]]:
        """Each discovery root as its last scan saw it (tables found, paths merged, or why it could not be
        scanned), for ``/status``."""
        return [scan.to_json() for scan in self.poller.discovery]

    def poll(self, *, wait_all: bool = False) -> list[WorkItem]:
        """One pass over every table; returns the runnable work, highest priority first, as handed to the
        workers (``wait_all``: every table's poll waited for, however long it takes: hoodied.table_polls)."""
        return self.poller.poll(wait_all=wait_all)

    def wait_polls(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the table polls still running (one that overran its deadline
        included); true when none is left."""
        return self.poller.wait_polls(timeout)

    def start_workers(self, *, until_idle: bool = False) -> None:
        """Start the worker threads; ``until_idle``: they exit when the queue runs dry (``run --once``)."""
        self.runner.start_workers(until_idle=until_idle)

    def run_pass(self, timeout: float | None = None) -> bool:
        """One pass (``run --once``): poll, run what it found, return when nothing runnable is left (True) or
        after ``timeout`` seconds (False)."""
        self.poll(wait_all=True)
        self.start_workers(until_idle=True)
        return self.wait_idle(timeout)

    def run_item(self, item: WorkItem) -> JobOutcome | None:
        """Claim and run one instant; ``None`` when another runner has it."""
        return self.runner.run_item(item)

    @property
    def running(self) -> list[WorkItem]:
        return self.runner.running

    def stop_claiming(self) -> None:
        """Set the shutdown event: no new poll, schedule or claim."""
        self.runner.stop_claiming()

    def drain(self, grace: float) -> bool:
        """Stop taking work; wait up to ``grace`` seconds for running jobs, then cancel them. True when every
        job ended within the grace period."""
        return self.runner.drain(grace)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for ``until_idle`` workers to finish."""
        return self.runner.wait_idle(timeout)


__all__ = ["Supervisor"]
