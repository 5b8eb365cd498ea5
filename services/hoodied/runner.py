"""Running the work a poll found: worker threads take :class:`WorkItem` s oldest first, claim each instant
(one runner per instant across replicas), re-read the table, and run the service's job through the one job
runner (:func:`hoodied.jobs.run_service_job`): Spark tasks in the job group ``hoodied-<action>-<instant>``,
the commit fenced by the claim. A claim lost mid-job (ZooKeeper session suspended or lost) cancels the job
group; the job never commits and is left for the claim's next holder.

A failing instant is retried after a back-off that doubles per failure, up to ``max_attempts``; then it is
given up (logged, counted) until the daemon restarts or an operator's ``hoodied ctl retry``. An instant that
stopped on damaged committed data is given up at once. Each outcome is recorded in metrics, logs, the table's
last results (``hoodied status``) and its history (:mod:`hoodied.history`).

The operators' word (:mod:`hoodied.control`) is applied here too: no item of a paused or draining table is
taken, nor a cancelled instant; ``cancel`` cancels the Spark job group of an instant running here (its outcome
is ``cancelled``, the instant stays retryable); ``retry`` forgets an instant's back-off once. A table's
``max_concurrent_jobs`` caps how many of its items run here at once; the workers take the next item instead.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING

from hoodie.errors import (
    CommitConflict,
    Deferred,
    HoodieError,
    LeaseLost,
    LostRace,
    NothingToDo,
    OverlappingPlan,
    WriteOutcomeUnknown,
)
from hoodie.registry import service_named
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import TableService
from hoodied.claims import Claim
from hoodied.config import DaemonConfig
from hoodied.control import Note
from hoodied.coordination import Coordination
from hoodied.errors import CORRUPT_DATA_ERRORS, ClaimHeld, ClaimLost, ForeignInstant, JobFailed
from hoodied.history import HistoryRecord, append
from hoodied.jobs import job_group, run_service_job
from hoodied.logs import log_context
from hoodied.metrics import Metrics
from hoodied.work import Attempts, JobOutcome, WatchedTable, WorkItem, write_last_result

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

#: Seconds before a deferred item (one waiting for other instants) is tried again, unless a job ends first.
DEFER_DELAY = 1.0


class Runner:
    """The worker threads and what they run (see the module docstring)."""

    def __init__(
        self,
        config: DaemonConfig,
        coordination: Coordination,
        metrics: Metrics,
        spark: Callable[[], SparkSession],
        stopping: threading.Event,
        failures: list[str],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.coordination = coordination
        self.metrics = metrics
        self._spark = spark
        self._stopping = stopping  # no new work
        self._failures = failures
        self._clock = clock
        self._attempts: dict[tuple[str, str, str], Attempts] = {}
        #: Items whose last run was deferred (they wait for other instants); queued again in a one-off pass.
        self._deferred: set[tuple[str, str, str]] = set()
        self._one_pass = False
        self._queue: list[WorkItem] = []
        self._running: dict[tuple[str, str, str], WorkItem] = {}
        self._cond = threading.Condition()
        self._cancelled = threading.Event()  # running jobs are being cancelled
        self._workers: list[threading.Thread] = []
        #: Running items an operator cancelled (hoodied ctl cancel), with the command's note.
        self._operator_cancelled: dict[tuple[str, str, str], Note] = {}
        #: The time of the last retry command applied per item, so that each is applied once.
        self._retries_applied: dict[tuple[str, str, str], float] = {}

    def offer(self, items: Sequence[WorkItem]) -> None:
        """Replace the queue with a poll's runnable work (highest priority first) and wake the workers."""
        with self._cond:
            self._queue = list(items)
            self._cond.notify_all()

    def add(self, items: Sequence[WorkItem]) -> None:
        """Queue work a poll found before it ends, each item in its place by priority (an idle worker starts
        it at once instead of after the walk over every other table), and wake the workers; an item queued or
        running already stays as it is. The poll's :meth:`offer` then replaces the queue."""
        with self._cond:
            known = {item.ident for item in self._queue} | self._running.keys()
            for item in items:
                if item.ident not in known:
                    bisect.insort(self._queue, item, key=WorkItem.sort_key)
            self._cond.notify_all()

    def is_running(self, item: WorkItem) -> bool:
        with self._cond:
            return item.ident in self._running

    def start_workers(self, *, until_idle: bool = False) -> None:
        """Start the worker threads; ``until_idle``: they exit when the queue runs dry (``run --once``)."""
        self._one_pass = until_idle
        self._workers = [t for t in self._workers if t.is_alive()]
        for i in range(self.config.spark.max_concurrent_jobs):
            t = threading.Thread(
                target=self._worker, args=(until_idle,), name=f"hoodied-worker-{i}", daemon=True
            )
            t.start()
            self._workers.append(t)

    def _next_item(self, until_idle: bool) -> WorkItem | None:
        """The first queued item nobody here runs and that is not backing off; with ``until_idle``, ``None``
        once there is none and no other job runs (one pass: a running job may be what a deferred item waits
        for), else wait for the next poll."""
        with self._cond:
            while not self._stopping.is_set():
                now = self._clock()
                for i, item in enumerate(self._queue):
                    if item.ident in self._running or self._backing_off(item, now) or self._held(item):
                        continue
                    del self._queue[i]
                    self._running[item.ident] = item
                    return item
                if until_idle and not (self._running and self._deferred):
                    return None
                self._cond.wait(timeout=DEFER_DELAY if until_idle else self.config.poll_interval)
            return None

    def _held(self, item: WorkItem) -> bool:
        """Held back by an operator (paused, draining, cancelled) or by the table's job cap (lock held)."""
        control = item.table.control
        if not control.claims_allowed or control.is_cancelled(item.service, item.instant.time):
            return True
        return self._full(item.table)

    def _full(self, table: WatchedTable) -> bool:
        """The table's ``max_concurrent_jobs`` are running here (the caller holds the lock)."""
        cap = table.settings.max_concurrent_jobs
        return cap is not None and sum(1 for item in self._running.values() if item.table is table) >= cap

    def at_cap(self, table: WatchedTable) -> bool:
        """The table's ``max_concurrent_jobs`` are running here."""
        with self._cond:
            return self._full(table)

    def is_running_instant(self, table: WatchedTable, service: str, instant: str) -> bool:
        with self._cond:
            return (table.key, service, instant) in self._running

    def given_up_reason(self, table: WatchedTable, service: str, instant: str) -> str | None:
        """Why this replica gave ``instant`` up (None: it did not)."""
        with self._cond:
            attempts = self._attempts.get((table.key, service, instant))
            if attempts is None or not attempts.given_up:
                return None
            failures = attempts.failures
        last = table.last_results.get(service)
        message = last.message if last is not None and last.instant == instant else ""
        what = f"after {failures} failure(s)" if failures else "on damaged data"
        return f"{what}" + (f": {message}" if message else "")

    def apply_control(self, table: WatchedTable) -> None:
        """Act on the table's control document: cancel the cancelled instants running here; forget the
        back-off of instants a new retry covers."""
        control = table.control
        if not control.cancelled and not control.retries:
            return  # nothing to act on (most tables, most polls)
        to_cancel: list[tuple[WorkItem, Note]] = []
        again: list[WorkItem] = []  # cancelled at an earlier poll and still running
        with self._cond:
            for ident, item in self._running.items():
                if item.table is not table:
                    continue
                if ident in self._operator_cancelled:
                    again.append(item)
                    continue
                note = control.is_cancelled(item.service, item.instant.time)
                if note is not None:
                    self._operator_cancelled[ident] = note
                    to_cancel.append((item, note))
            for ident in [i for i in self._attempts if i[0] == table.key]:
                note = control.retry_note(ident[1], ident[2])
                if note is not None and note.at > self._retries_applied.get(ident, 0.0):
                    self._retries_applied[ident] = note.at
                    del self._attempts[ident]
                    self._deferred.discard(ident)
                    logger.info(
                        "%s %s of %s: back-off forgotten, retry by %s (%s)",
                        ident[1],
                        ident[2],
                        table.name,
                        note.by,
                        note.reason,
                    )
            if to_cancel:
                self._cond.notify_all()
        for item, note in to_cancel:
            group = job_group(item.service, item.instant.time)
            logger.warning(
                "%s %s of %s cancelled by %s (%s): cancelling its Spark job group %s",
                item.service,
                item.instant.time,
                table.name,
                note.by,
                note.reason,
                group,
            )
            self._cancel_group(group)
        # Spark cancels only the jobs of a group that are active: a cancel that came before the job's first
        # Spark job (while it reads the plan) is lost, so the group is cancelled again at every poll until the
        # job ends.
        for item in again:
            self._cancel_group(job_group(item.service, item.instant.time))

    def _backing_off(self, item: WorkItem, now: float) -> bool:
        attempts = self._attempts.get(item.ident)
        return attempts is not None and (attempts.given_up or now < attempts.retry_at)

    def _worker(self, until_idle: bool) -> None:
        while True:
            item = self._next_item(until_idle)
            if item is None:
                return
            try:
                self.run_item(item)
            except Exception:  # a bug in bookkeeping must not kill the worker
                logger.exception("unexpected error running %s %s", item.service, item.instant.time)
            finally:
                with self._cond:
                    self._running.pop(item.ident, None)
                    for ident in self._deferred - {item.ident}:  # what they waited for may be done now
                        self._attempts[ident].retry_at = 0.0
                    self._cond.notify_all()

    def run_item(self, item: WorkItem) -> JobOutcome | None:
        """Claim and run one instant; ``None`` when another runner has it."""
        table = item.table
        with log_context(table=table.name, action=item.service, instant=item.instant.time):
            try:
                claim = self.coordination.claim(table.storage, table.key, item.claim_name)
            except ClaimHeld as e:
                logger.debug("skipping: %s", e)
                return None
            except Exception as e:  # a read-only table, a storage or ZooKeeper error: a failed attempt
                self.metrics.job_started(table.name, item.service)
                outcome = self._outcome(
                    item, False, "failed", f"cannot claim: {type(e).__name__}: {e}", self._clock()
                )
                self._record(item, outcome)
                self._ended(table)
                return outcome
            self.metrics.claims_held.inc()
            try:
                return self._run_claimed(item, claim)
            finally:
                claim.release()
                self.metrics.claims_held.dec()
                self._ended(table)

    def _ended(self, table: WatchedTable) -> None:
        """A job of ours on ``table`` ended (whatever its outcome): the poller polls the table at its next
        poll, at the base interval (:mod:`hoodied.poll_interval`), since the job may have changed it."""
        with self._cond:
            table.jobs_ended += 1

    def _run_claimed(self, item: WorkItem, claim: Claim) -> JobOutcome | None:
        table = item.table
        T = item.instant.time
        started = self._clock()
        # A storage of the job's own: its requests are counted apart from the polls'.
        job_storage = Storage.for_uri(table.uri, dict(table.settings.storage_options))
        try:
            current = Table.load(job_storage)
        except Exception as e:
            unread = self._outcome(
                item, False, "failed", f"cannot read the table: {type(e).__name__}: {e}", started
            )
            self._record(item, unread)
            return unread
        now = current.timeline.get(T)
        if now is None or now.is_completed:
            last = table.last_results.get(item.service)
            if last is not None and last.ok and last.instant == T and last.replica == self.config.replica:
                # Offered again by a poll that read the table before this replica's own job completed it.
                logger.debug("%s %s of %s: completed here already", item.service, T, table.name)
            else:
                logger.info(
                    "%s %s of %s is no longer pending: %s since the poll that offered it",
                    item.service,
                    T,
                    table.name,
                    "completed" if now is not None else "completed and archived, or rolled back,",
                )
            return None
        group = job_group(item.service, T)
        lost = threading.Event()

        def cancel() -> None:
            lost.set()
            logger.warning("claim on %s %s lost: cancelling its Spark job group %s", item.service, T, group)
            self._cancel_group(group)

        self.coordination.on_lost(claim, cancel)
        self.metrics.job_started(table.name, item.service)
        logger.info(
            "running %s %s of %s (%s) as replica %s",
            item.service,
            T,
            table.name,
            now.state.name.lower(),
            self.config.replica,
        )
        started = self._clock()  # the job's own time (not the table read before it)
        outcome: JobOutcome
        try:
            outcome = self._execute(item, claim, current)
            self.metrics.count_requests(table.name, item.service, job_storage.requests.snapshot())
        except ClaimLost as e:
            outcome = self._outcome(item, False, "claim_lost", f"claim lost, not committed: {e}", started)
        except (LostRace, LeaseLost) as e:
            logger.warning("%s %s of %s lost the race: %s", item.service, T, table.name, e)
            outcome = self._outcome(item, False, "lost_race", f"lost the race: {e}", started)
        except CommitConflict as e:
            outcome = self._outcome(item, False, "conflict", f"aborted on a conflicting write: {e}", started)
        except NothingToDo as e:
            outcome = self._outcome(item, True, "already_done", str(e), started)
        except ForeignInstant as e:
            outcome = self._outcome(item, False, "foreign", f"left alone: {e}", started)
        except Deferred as e:
            outcome = self._outcome(item, False, "deferred", str(e), started)
        except OverlappingPlan as e:
            outcome = self._outcome(item, False, "overlapping_plan", str(e), started)
        except CORRUPT_DATA_ERRORS as e:
            outcome = self._outcome(item, False, "corrupt", f"{type(e).__name__}: {e}", started)
        except WriteOutcomeUnknown as e:  # not "failed": the write may have landed
            outcome = self._outcome(item, False, "unknown", f"{type(e).__name__}: {e}", started)
        except (JobFailed, HoodieError) as e:
            kind = "claim_lost" if lost.is_set() else "cancelled" if self._cancelled.is_set() else "failed"
            outcome = self._outcome(item, False, kind, f"{type(e).__name__}: {e}", started)
        except Exception as e:
            kind = "claim_lost" if lost.is_set() else "cancelled" if self._cancelled.is_set() else "unknown"
            logger.exception("%s %s of %s: unexpected error", item.service, T, table.name)
            outcome = self._outcome(item, False, kind, f"{type(e).__name__}: {e}", started)
        cancelled = self._operator_cancelled.pop(item.ident, None)
        if cancelled is not None and not outcome.ok:
            outcome.kind = "cancelled"
            outcome.message = f"cancelled by {cancelled.by} ({cancelled.reason}): {outcome.message}"
        self._record(item, outcome)
        return outcome

    def _outcome(self, item: WorkItem, ok: bool, kind: str, message: str, started: float) -> JobOutcome:
        return JobOutcome(item.service, item.instant.time, ok, kind, message, self._clock() - started)

    def _execute(self, item: WorkItem, claim: Claim, current: Table) -> JobOutcome:
        table = item.table
        service: TableService = service_named(item.service)
        storage = current.storage
        settings = {**current.config.props, **table.settings.hoodie}
        lock = self.coordination.table_lock(table.name, storage, current.config, table.settings.hoodie)
        started = self._clock()
        spark = self._spark()
        if self.config.spark.fair_pools:
            spark.sparkContext.setLocalProperty("spark.scheduler.pool", item.service)
        try:
            run = run_service_job(
                spark,
                service,
                storage,
                lock,
                item.instant.time,
                settings=settings,
                fence=claim.check,
                table=current,
                sizing=self.config.spark.sizing,
                replica=self.config.replica,
                foreign_after=table.settings.takeover_foreign_after,
                cancelled=partial(self._cancelled_by_operator, item),
                late_files=table.late_files.append,  # swept by the poller (hoodie.write.late_files)
            )
        finally:
            if self.config.spark.fair_pools:
                spark.sparkContext.setLocalProperty("spark.scheduler.pool", None)  # type: ignore[arg-type]
        done = run.done
        return JobOutcome(
            item.service,
            item.instant.time,
            True,
            "done",
            done.summary,
            self._clock() - started,
            done.records,
            done.bytes_written,
            done.files_deleted,
        )

    def _cancelled_by_operator(self, item: WorkItem) -> str | None:
        """Who cancelled ``item`` and why, when an operator did (asked by its job before it commits)."""
        with self._cond:
            note = self._operator_cancelled.get(item.ident)
        return None if note is None else f"by {note.by} ({note.reason})"

    def _record(self, item: WorkItem, outcome: JobOutcome) -> None:
        table = item.table
        outcome.replica = self.config.replica
        outcome.finished_at_ms = int(time.time() * 1000)
        table.last_results[item.service] = outcome
        self.metrics.job_finished(
            table.name,
            item.service,
            outcome.seconds,
            ok=outcome.ok,
            kind="" if outcome.ok else outcome.kind,
            records=outcome.records,
            bytes_written=outcome.bytes_written,
            files_deleted=outcome.files_deleted,
        )
        T = item.instant.time
        if outcome.kind in ("failed", "unknown", "corrupt"):
            self._failures.append(f"{item.service} {T} of {table.name}: {outcome.kind}: {outcome.message}")
        was_deferred = item.ident in self._deferred
        self._deferred.discard(item.ident)
        if outcome.kind == "deferred":
            # Not a failure: it runs again once another job here ended, else after a while (a pass of
            # `run --once` tries again soon; the daemon at its next poll).
            with self._cond:
                self._deferred.add(item.ident)
                delay = DEFER_DELAY if self._one_pass else self.config.poll_interval
                self._attempts.setdefault(item.ident, Attempts()).retry_at = self._clock() + delay
                self._queue.append(item)
            logger.log(
                logging.DEBUG if was_deferred else logging.INFO,
                "%s %s of %s deferred: %s",
                item.service,
                T,
                table.name,
                outcome.message,
            )
        elif outcome.ok:
            self._attempts.pop(item.ident, None)
            logger.info(
                "%s %s of %s %s in %.1f s: %s",
                item.service,
                T,
                table.name,
                "completed" if outcome.kind == "done" else "needed nothing",
                outcome.seconds,
                outcome.message,
            )
        elif outcome.kind == "corrupt":
            # Retrying cannot mend damaged committed data: give the instant up now, and say so loudly.
            self._attempts.setdefault(item.ident, Attempts()).given_up = True
            self.metrics.corrupt_data.labels(table=table.name, action=item.service).inc()
            self.metrics.instants_given_up.labels(table=table.name, action=item.service).inc()
            logger.error(
                "%s %s of %s stopped on damaged committed data; given up until restart, the table needs a "
                "repair: %s",
                item.service,
                T,
                table.name,
                outcome.message,
            )
        elif outcome.kind == "overlapping_plan":
            # Running it again cannot help: a requested plan that yielded is gone, an inflight one waits for
            # an operator to roll one of the two plans back (then `hoodied ctl retry`).
            self._attempts.setdefault(item.ident, Attempts()).given_up = True
            self.metrics.instants_given_up.labels(table=table.name, action=item.service).inc()
            logger.error("%s %s of %s refused, not retried: %s", item.service, T, table.name, outcome.message)
        elif outcome.kind in ("failed", "unknown"):
            attempts = self._attempts.setdefault(item.ident, Attempts())
            attempts.failures += 1
            if attempts.failures >= self.config.jobs.max_attempts:
                attempts.given_up = True
                self.metrics.instants_given_up.labels(table=table.name, action=item.service).inc()
                logger.error(
                    "%s %s of %s failed %d times; giving up until restart: %s",
                    item.service,
                    T,
                    table.name,
                    attempts.failures,
                    outcome.message,
                )
            else:
                delay = self.config.jobs.retry_delay(attempts.failures)
                attempts.retry_at = self._clock() + delay
                logger.error(
                    "%s %s of %s failed (attempt %d of %d), retrying in %.0f s: %s",
                    item.service,
                    T,
                    table.name,
                    attempts.failures,
                    self.config.jobs.max_attempts,
                    delay,
                    outcome.message,
                )
        else:
            logger.warning("%s %s of %s: %s (%s)", item.service, T, table.name, outcome.message, outcome.kind)
        write_last_result(table.storage, outcome)
        finished = outcome.finished_at_ms / 1000
        append(
            table.storage,
            HistoryRecord(
                table=table.name,
                service=item.service,
                instant=T,
                replica=self.config.replica,
                started_at=finished - outcome.seconds,
                finished_at=finished,
                outcome=outcome.kind,
                ok=outcome.ok,
                rows=outcome.records,
                bytes=outcome.bytes_written,
                files=outcome.files_deleted,
                error=None if outcome.ok else outcome.message,
            ),
            keep=self.config.admin.history_keep,
        )

    def _cancel_group(self, group: str) -> None:
        try:
            self._spark().sparkContext.cancelJobGroup(group)
        except Exception as e:
            logger.warning("could not cancel Spark job group %s: %s", group, e)

    @property
    def running(self) -> list[WorkItem]:
        with self._cond:
            return list(self._running.values())

    def stop_claiming(self) -> None:
        with self._cond:
            self._stopping.set()
            self._queue = []
            self._cond.notify_all()

    def drain(self, grace: float) -> bool:
        """Stop taking work; wait up to ``grace`` seconds for running jobs, then cancel them (they stay
        retryable: a cancelled task rolls its instant back to requested, or leaves it for a takeover).
        True when every job ended within the grace period."""
        self.stop_claiming()
        deadline = time.monotonic() + grace
        for t in self._workers:
            t.join(max(0.0, deadline - time.monotonic()))
        if not any(t.is_alive() for t in self._workers):
            return True
        self._cancelled.set()
        for item in self.running:
            logger.warning(
                "shutdown grace over: cancelling %s %s of %s",
                item.service,
                item.instant.time,
                item.table.name,
            )
            self._cancel_group(job_group(item.service, item.instant.time))
        for t in self._workers:
            t.join(60.0)
        return False

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for ``until_idle`` workers to finish."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._workers:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._workers)


__all__ = ["Runner"]
