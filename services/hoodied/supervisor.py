"""The supervisor: which table-service instants to run, in what order, by whom.

One poll (:meth:`Supervisor.poll`) walks every table:

1. It lists the table's timeline folder. When the listing is the one seen last time, the previous answer is
   reused: a poll of an idle table costs one listing.
2. Where hoodied schedules services, it plans new instants with Hudi's strategies and triggers, under the
   table's ``schedule`` claim (one replica plans a table at a time) and the table lock. Scheduling is
   re-evaluated when the timeline changed, or every ``reschedule_interval`` for time-based triggers.
3. It records every pending compaction, clustering, clean and indexing instant (gauges: how many, how old)
   and offers the runnable ones as :class:`WorkItem`, oldest first.

Workers (``spark.max_concurrent_jobs`` threads) take items in that order. Each claims its instant (one
runner per instant across replicas), re-reads the timeline, and runs the job: Spark tasks in the job group
``hoodied-<action>-<instant>``, the commit fenced by the claim. A claim lost mid-job (ZooKeeper session
suspended or lost) cancels the job group; the job never commits and is left for the claim's next holder.

An inflight instant that nobody claims was abandoned by a runner that died: it is taken over once it has
been seen unclaimed for ``takeover_grace`` (and its Hudi heartbeat, when it has one, is stale), which leaves
a dying runner's tasks time to stop before the new runner rolls their files back.

A failing instant is retried after a back-off that doubles per failure, up to ``max_attempts``; then it is
given up (logged, counted) until the daemon restarts. A table that cannot be polled (unreadable, a version we
refuse, a metadata table with an index we cannot keep up to date) backs off the same way; other tables go
on.

Indexing instants are run, never scheduled: as in Hudi, an index is built on request (``hoodied index
--mode schedule``, Hudi's ``HoodieIndexer``), and the daemon completes the requested ones.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hoodie.config import TableConfig
from hoodie.errors import CommitConflict, HoodieError, NothingToDo
from hoodie.metadata_table import refuse_metadata_table
from hoodie.registry import SERVICES, service_named
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import TableService
from hoodie.timeline.instant import Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator, parse_instant_time
from hoodie.timeline.timeline import Timeline
from hoodie.write.failed_writes import HeartbeatConfig, last_heartbeat_ms
from hoodied.claims import Claim
from hoodied.config import DaemonConfig, DiscoveryRoot, TableSettings
from hoodied.coordination import SCHEDULE_CLAIM, Coordination, claim_name, table_key
from hoodied.errors import CORRUPT_DATA_ERRORS, ClaimHeld, ClaimLost, JobFailed
from hoodied.health import Heartbeats
from hoodied.jobs import job_group, run_service_job
from hoodied.logs import log_context
from hoodied.metrics import Metrics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkItem:
    """One pending instant of one table, offered to the workers."""

    table: WatchedTable
    service: str  # a name in hoodie.registry.SERVICE_NAMES
    instant: Instant

    @property
    def claim_name(self) -> str:
        return claim_name(self.service, self.instant.time)

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.table.key, self.service, self.instant.time)

    def sort_key(self) -> tuple[str, int, str]:
        # Among instants of the same age, by the services' priority (cleans first: they free space).
        return (self.instant.time, service_named(self.service).priority, self.table.key)


@dataclass
class JobOutcome:
    """What one job did, as ``hoodied status`` and the metrics report it."""

    service: str
    instant: str
    ok: bool
    kind: str  # done | already_done | failed | claim_lost | conflict | cancelled | unknown | corrupt
    message: str
    seconds: float
    records: int = 0
    bytes_written: int = 0
    files_deleted: int = 0
    replica: str = ""
    finished_at_ms: int = 0


@dataclass(eq=False)
class WatchedTable:
    """A table the supervisor maintains, with what the last poll learnt about it."""

    uri: str
    name: str
    settings: TableSettings
    storage: Storage
    key: str = ""
    config: TableConfig | None = None
    listing: frozenset[str] | None = None
    timeline: Timeline | None = None
    items: tuple[WorkItem, ...] = ()
    pending: dict[str, list[Instant]] = field(default_factory=dict)
    scheduled_at: float = float("-inf")  # monotonic time scheduling was last evaluated
    scheduled_listing: frozenset[str] | None = None
    failures: int = 0
    retry_at: float = 0.0
    last_error: str | None = None
    schedule_error: str | None = None  # why the last scheduling of a service failed (the poll went on)
    unclaimed_since: dict[str, float] = field(default_factory=dict)
    last_results: dict[str, JobOutcome] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.key = self.key or table_key(self.name, self.uri)


@dataclass
class _Attempts:
    failures: int = 0
    retry_at: float = 0.0
    given_up: bool = False


def discover_tables(root: DiscoveryRoot) -> list[str]:
    """Base paths of the tables below a discovery root (folders holding ``.hoodie/hoodie.properties``),
    not descending into a table or into hidden folders."""
    storage = Storage.for_uri(root.root, dict(root.settings.storage_options))
    found: list[str] = []

    def walk(rel: str, depth: int) -> None:
        if storage.exists(f"{rel}/.hoodie/hoodie.properties" if rel else ".hoodie/hoodie.properties"):
            if not any(p.search(rel) for p in root.exclude):
                found.append(storage.full_path(rel) if rel else root.root)
            return
        if depth >= root.max_depth:
            return
        for info in storage.list(rel):
            if info.is_dir and not info.name.startswith((".", "_")):
                walk(f"{rel}/{info.name}" if rel else info.name, depth + 1)

    walk("", 0)
    return sorted(found)


def _since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in after.items() if n - before.get(op, 0)}


def _label(uri: str) -> str:
    tail = uri.rstrip("/").rsplit("/", 1)[-1] or "table"
    return re.sub(r"[^A-Za-z0-9._-]", "_", tail)


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
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.coordination = coordination
        self.metrics = metrics
        self.heartbeats = heartbeats
        self._spark = spark
        self._clock = clock
        self._tables: dict[str, WatchedTable] = {}
        self._attempts: dict[tuple[str, str, str], _Attempts] = {}
        self._queue: list[WorkItem] = []
        self._running: dict[tuple[str, str, str], WorkItem] = {}
        self._cond = threading.Condition()
        self._stop = threading.Event()  # no new work
        self._cancelled = threading.Event()  # running jobs are being cancelled
        self._workers: list[threading.Thread] = []
        self._polled = threading.Event()
        self._poll_lock = threading.Lock()
        #: What failed since the daemon started (tables that could not be polled, jobs that definitely
        #: failed, stopped on damaged data or ended unknown), for ``run --once``'s exit status.
        self.failures: list[str] = []
        self._discovered_at = float("-inf")

    # -- tables -------------------------------------------------------------------------------------------

    def tables(self) -> list[WatchedTable]:
        return list(self._tables.values())

    def refresh_tables(self) -> None:
        """The configured tables plus what the discovery roots hold now (re-scanned every 10 polls' time)."""
        now = self._clock()
        if self._tables and now - self._discovered_at < 10 * self.config.poll_interval:
            return
        self._discovered_at = now
        wanted: dict[str, tuple[str | None, TableSettings]] = {}
        for entry in self.config.tables:
            wanted[entry.path] = (entry.name, entry.settings)
        for root in self.config.discover:
            try:
                paths = discover_tables(root)
            except Exception as e:
                logger.error("cannot scan the discovery root %s: %s", root.root, e)
                continue
            for path in paths:
                wanted.setdefault(path, (None, root.settings))
        names: set[str] = set()
        for uri, (name, settings) in wanted.items():
            if uri in self._tables:
                names.add(self._tables[uri].name)
                continue
            label = name or _label(uri)
            while label in names:  # two discovered tables with one folder name: keep labels unique
                label = f"{label}_"
            names.add(label)
            storage = Storage.for_uri(uri, dict(settings.storage_options))
            self._tables[uri] = WatchedTable(uri, label, settings, storage)
            logger.info(
                "watching table %s (%s): services %s, scheduling %s",
                label,
                uri,
                ",".join(settings.services),
                ",".join(settings.schedule) or "none",
            )
        for uri in [u for u in self._tables if u not in wanted]:
            gone = self._tables.pop(uri)
            self.metrics.forget_table(gone.name)
            logger.info("no longer watching table %s (%s)", gone.name, uri)
        self.metrics.tables.set(len(self._tables))

    # -- polling ------------------------------------------------------------------------------------------

    def poll(self) -> list[WorkItem]:
        """One pass over every table; returns the runnable work, highest priority first, and hands it to the
        workers."""
        with self._poll_lock:
            started = self._clock()
            self.heartbeats.last_poll_started = time.time()
            self.refresh_tables()
            items: list[WorkItem] = []
            errors = 0
            for table in self.tables():
                if self._stop.is_set():
                    break
                if self._clock() < table.retry_at:
                    items.extend(table.items)
                    continue
                t0 = self._clock()
                ok = True
                requests = table.storage.requests.snapshot()
                with log_context(table=table.name):
                    try:
                        self._poll_table(table)
                        table.failures, table.last_error = 0, None
                    except Exception as e:
                        ok = False
                        errors += 1
                        self._table_failed(table, e)
                self.metrics.table_poll_finished(table.name, self._clock() - t0, ok=ok)
                self.metrics.count_requests(
                    table.name, "poll", _since(requests, table.storage.requests.snapshot())
                )
                self.heartbeats.last_table_polled = time.time()
                items.extend(table.items)
            items.sort(key=WorkItem.sort_key)
            with self._cond:
                self._queue = items
                self._cond.notify_all()
            now = time.time()
            self.metrics.poll_finished(self._clock() - started, ok=True, now=now)
            self.heartbeats.last_poll_succeeded = now
            self._polled.set()
            if errors:
                self.heartbeats.last_error = f"{errors} table(s) failed to poll"
            return items

    def _table_failed(self, table: WatchedTable, e: BaseException) -> None:
        self.failures.append(f"table {table.name}: cannot poll: {type(e).__name__}: {e}")
        table.failures += 1
        delay = self.config.jobs.retry_delay(table.failures)
        table.retry_at = self._clock() + delay
        table.items = ()
        message = f"{type(e).__name__}: {e}"
        if message != table.last_error:
            logger.error(
                "cannot poll table %s (%s): %s; retrying in %.0f s", table.name, table.uri, message, delay
            )
        table.last_error = message

    def _poll_table(self, table: WatchedTable) -> None:
        storage = table.storage
        if table.config is None:
            table.config = TableConfig.load(storage)
        self._read_timeline(table)
        if table.settings.schedule and not self._stop.is_set() and self._scheduling_due(table):
            if self._schedule(table):
                self._read_timeline(table)
            table.scheduled_listing = table.listing
        # What is pending is reported and offered even when scheduling failed (a read-only table, a lock
        # that timed out): it says so in its log lines and in hoodied status.
        self._collect(table)

    @staticmethod
    def _read_timeline(table: WatchedTable) -> None:
        """List the timeline folder; parse it (and re-read the config) only when the listing changed."""
        assert table.config is not None
        storage = table.storage
        listing = frozenset(f.name for f in storage.list(table.config.timeline_path) if not f.is_dir)
        if listing == table.listing:
            return
        table.config = TableConfig.load(storage)  # an upgrade or a new property shows with new instants
        refuse_metadata_table(storage, table.config, "table service")
        table.timeline = Timeline.from_file_names(
            listing, layout_version=table.config.timeline_layout_version, folder=table.config.timeline_path
        )
        table.listing = listing

    def _scheduling_due(self, table: WatchedTable) -> bool:
        now = self._clock()
        if (
            table.listing != table.scheduled_listing
            or now - table.scheduled_at >= self.config.reschedule_interval
        ):
            table.scheduled_at = now
            return True
        return False

    def _table_settings(self, table: WatchedTable) -> dict[str, str]:
        assert table.config is not None
        return {**table.config.props, **table.settings.hoodie}

    def _schedule(self, table: WatchedTable) -> bool:
        """Schedule what is due on ``table``; true when something was scheduled. A service that cannot be
        scheduled (a read-only table, a lock that timed out, a bad setting) is logged and recorded in
        :attr:`WatchedTable.schedule_error`; the other services and the poll go on."""
        assert table.config is not None
        storage = table.storage
        try:
            claim = self.coordination.claim(storage, table.key, SCHEDULE_CLAIM)
        except ClaimHeld:
            logger.debug("another replica is scheduling %s", table.name)
            return False
        except Exception as e:
            self._schedule_failed(table, "any service", e)
            return False
        scheduled = False
        errors = False
        try:
            generator = InstantTimeGenerator()
            for service in table.settings.schedule:
                try:
                    instant, reason = self._schedule_service(table, service, generator)
                except Exception as e:
                    errors = True
                    self._schedule_failed(table, service, e)
                    continue
                if instant is not None:
                    scheduled = True
                    self.metrics.instants_scheduled.labels(table=table.name, action=service).inc()
                    with log_context(action=service, instant=instant.time):
                        logger.info("scheduled %s %s on %s: %s", service, instant.time, table.name, reason)
                else:
                    logger.debug("no %s scheduled on %s: %s", service, table.name, reason)
        finally:
            claim.release()
        if not errors:
            table.schedule_error = None
        return scheduled

    def _schedule_failed(self, table: WatchedTable, service: str, e: BaseException) -> None:
        message = f"cannot schedule {service}: {type(e).__name__}: {e}"
        if message != table.schedule_error:
            logger.error("table %s (%s): %s", table.name, table.uri, message)
        table.schedule_error = message

    def _schedule_service(
        self, table: WatchedTable, name: str, generator: InstantTimeGenerator
    ) -> tuple[Instant | None, str]:
        """Schedule one service on ``table`` if its trigger fires and there is something to plan."""
        assert table.config is not None
        assert table.timeline is not None
        service = service_named(name)
        storage, config = table.storage, table.config
        not_here = service.applies_to(config)
        if not_here is not None:
            return None, not_here
        lock = self.coordination.table_lock(storage, config, table.settings.hoodie)
        view = Table(storage, config, table.timeline)
        scheduled = service.schedule(view, lock, self._table_settings(table), generator)
        if scheduled.files_deleted:
            self.metrics.files_deleted.labels(table=table.name, action="rollback").inc(
                scheduled.files_deleted
            )
        return scheduled.instant, scheduled.reason

    def _collect(self, table: WatchedTable) -> None:
        """Record the table's pending instants (gauges) and the runnable ones (work items)."""
        assert table.timeline is not None
        assert table.config is not None
        view = Table(table.storage, table.config, table.timeline)
        pending: dict[str, list[Instant]] = {s.name: s.pending(view) for s in SERVICES}
        table.pending = pending
        now_wall = time.time()
        zone_now = InstantTimeGenerator().now_in_zone(table.config)
        items: list[WorkItem] = []
        seen_inflight: set[str] = set()
        for service, instants in pending.items():
            oldest = 0.0
            if instants:
                with contextlib.suppress(HoodieError):
                    oldest = max(0.0, (zone_now - parse_instant_time(instants[0].time)).total_seconds())
            self.metrics.set_pending(table.name, service, len(instants), oldest)
            if service not in table.settings.services:
                continue
            for instant in instants:
                item = WorkItem(table, service, instant)
                if instant.state is State.INFLIGHT and not self._takeover_due(item, now_wall):
                    seen_inflight.add(instant.time)
                    continue
                seen_inflight.add(instant.time)
                items.append(item)
        for t in [t for t in table.unclaimed_since if t not in seen_inflight]:
            del table.unclaimed_since[t]
        table.items = tuple(items)

    def _takeover_due(self, item: WorkItem, now_wall: float) -> bool:
        """An inflight instant is runnable when we run it, or when nobody has claimed it for
        ``takeover_grace`` and its Hudi heartbeat (if any) is stale."""
        table = item.table
        if item.ident in self._running:
            return False
        try:
            holder = self.coordination.holder(table.storage, table.key, item.claim_name)
        except Exception as e:
            logger.warning("cannot read the claim of %s %s: %s", item.service, item.instant.time, e)
            return False
        if holder is not None:
            table.unclaimed_since.pop(item.instant.time, None)
            return False
        first = table.unclaimed_since.setdefault(item.instant.time, self._clock())
        if self._clock() - first < self.config.jobs.takeover_grace:
            return False
        beat = last_heartbeat_ms(table.storage, item.instant.time)
        expiry = HeartbeatConfig.from_config(self._table_settings(table)).expiry_ms
        return not (beat and now_wall * 1000 - beat < expiry)

    # -- workers ------------------------------------------------------------------------------------------

    def start_workers(self, *, until_idle: bool = False) -> None:
        """Start the worker threads; ``until_idle``: they exit when the queue runs dry (``run --once``)."""
        self._workers = [t for t in self._workers if t.is_alive()]
        for i in range(self.config.spark.max_concurrent_jobs):
            t = threading.Thread(
                target=self._worker, args=(until_idle,), name=f"hoodied-worker-{i}", daemon=True
            )
            t.start()
            self._workers.append(t)

    def run_pass(self, timeout: float | None = None) -> bool:
        """One pass (``run --once``): poll, run what it found, return when nothing runnable is left (True) or
        after ``timeout`` seconds (False)."""
        self.poll()
        self.start_workers(until_idle=True)
        return self.wait_idle(timeout)

    def _next_item(self, until_idle: bool) -> WorkItem | None:
        """The first queued item nobody here runs and that is not backing off; with ``until_idle``, ``None``
        as soon as there is none (one pass), else wait for the next poll."""
        with self._cond:
            while not self._stop.is_set():
                now = self._clock()
                for i, item in enumerate(self._queue):
                    if item.ident in self._running or self._backing_off(item, now):
                        continue
                    del self._queue[i]
                    self._running[item.ident] = item
                    return item
                if until_idle:
                    return None
                self._cond.wait(timeout=self.config.poll_interval)
            return None

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
                return outcome
            self.metrics.claims_held.inc()
            try:
                return self._run_claimed(item, claim)
            finally:
                claim.release()
                self.metrics.claims_held.dec()

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
            logger.info("%s %s is no longer pending (done by another runner)", item.service, T)
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
        except CommitConflict as e:
            outcome = self._outcome(item, False, "conflict", f"aborted on a conflicting write: {e}", started)
        except NothingToDo as e:
            outcome = self._outcome(item, True, "already_done", str(e), started)
        except CORRUPT_DATA_ERRORS as e:
            outcome = self._outcome(item, False, "corrupt", f"{type(e).__name__}: {e}", started)
        except (JobFailed, HoodieError) as e:
            kind = "claim_lost" if lost.is_set() else "cancelled" if self._cancelled.is_set() else "failed"
            outcome = self._outcome(item, False, kind, f"{type(e).__name__}: {e}", started)
        except Exception as e:
            kind = "claim_lost" if lost.is_set() else "cancelled" if self._cancelled.is_set() else "unknown"
            logger.exception("%s %s of %s: unexpected error", item.service, T, table.name)
            outcome = self._outcome(item, False, kind, f"{type(e).__name__}: {e}", started)
        self._record(item, outcome)
        return outcome

    def _outcome(self, item: WorkItem, ok: bool, kind: str, message: str, started: float) -> JobOutcome:
        return JobOutcome(item.service, item.instant.time, ok, kind, message, self._clock() - started)

    def _execute(self, item: WorkItem, claim: Claim, current: Table) -> JobOutcome:
        table = item.table
        service: TableService = service_named(item.service)
        storage = current.storage
        settings = {**current.config.props, **table.settings.hoodie}
        lock = self.coordination.table_lock(storage, current.config, table.settings.hoodie)
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
            self.failures.append(f"{item.service} {T} of {table.name}: {outcome.kind}: {outcome.message}")
        if outcome.ok:
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
            self._attempts.setdefault(item.ident, _Attempts()).given_up = True
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
        elif outcome.kind in ("failed", "unknown"):
            attempts = self._attempts.setdefault(item.ident, _Attempts())
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

    # -- shutdown -----------------------------------------------------------------------------------------

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
            self._stop.set()
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


# -- last results (hoodied status) ---------------------------------------------------------------------------

RESULTS_FOLDER = ".hoodie/.aux/hoodied/results"


def write_last_result(storage: Storage, outcome: JobOutcome) -> None:
    """Keep the outcome of each service's last job in the table, for ``hoodied status`` (any replica's)."""
    try:
        storage.create(
            f"{RESULTS_FOLDER}/{outcome.service}.json",
            json.dumps(outcome.__dict__, sort_keys=True).encode("utf-8"),
            overwrite=True,
        )
    except Exception as e:  # the result is informational; the job's outcome stands
        logger.warning("could not record the last %s result: %s", outcome.service, e)


def read_last_results(storage: Storage) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for service in (s.name for s in SERVICES):
        try:
            value = json.loads(storage.read(f"{RESULTS_FOLDER}/{service}.json"))
        except Exception:
            continue
        if isinstance(value, dict):
            out[service] = value
    return out


__all__ = [
    "JobOutcome",
    "Supervisor",
    "WatchedTable",
    "WorkItem",
    "discover_tables",
    "read_last_results",
    "write_last_result",
]
