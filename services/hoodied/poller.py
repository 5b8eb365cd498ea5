"""Polling: one pass over every watched table (:meth:`Poller.poll`).

1. It lists the table's timeline folder (:mod:`hoodied.listing`: on a local file system not again while the
   folder's modification time says nothing changed; object-store tables several at once, ahead of the
   walk). When the listing is the one seen last time, the previous answer is reused: a poll of an idle
   table costs one request.
2. Where hoodied schedules services, the :class:`~hoodied.scheduler.Scheduler` plans new instants.
3. It records every service's pending instants (gauges: how many, how old) and offers the runnable ones to
   the :class:`~hoodied.runner.Runner` as :class:`~hoodied.work.WorkItem`, oldest first. Work found on a
   table whose timeline changed is queued at once (an idle worker starts it without waiting for the walk
   over every other table); the end of the poll then orders the whole queue. The first poll only offers at
   its end, so that the backlog found at start-up is taken by urgency.

An inflight instant that nobody claims is offered once it has been seen unclaimed for ``takeover_grace``
(which leaves a dying runner's tasks time to stop before the new runner rolls their files back) and
:mod:`hoodied.ownership` allows its takeover: hoodied started it (an abandoned run of ours), or hoodied did
not and its owner is provably gone. A foreign instant left alone is said once in the log and kept in the
table's ``foreign`` notes for ``hoodied status``. A table that cannot be
polled (unreadable, a version we refuse, a metadata table) backs off on its own; other tables go on.

The watched tables are the configured ones plus what the discovery roots hold (re-scanned every ten polls'
time: :mod:`hoodied.discovery`), one per table identity (:func:`hoodie.storage.identity.table_identity`): a
table a ``tables`` entry names keeps that entry's name and settings when a root holds it too, and every
other path to a watched table (a link, a loop, a second root) is merged into it, logged once and shown in
``/status``, as is a root that does not exist or cannot be read.

Each poll starts by reading the operators' control documents (:mod:`hoodied.control`; one listing when no
table has one) and hands each table's to the runner (cancel, retry). When a table's timeline changed, its
backlog is measured again (:mod:`hoodie.backlog`; the metadata of new writes is read once) and exported; the
runnable work is ordered by urgency (:mod:`hoodied.urgency`), and every service's next step is explained
(:mod:`hoodied.explain`). A draining table with no job left on any replica is set to paused.

Each table is polled at an interval of its own (:mod:`hoodied.poll_interval`): the base ``poll_interval``,
growing while its polls find it quiet (listing unchanged, nothing pending, no job of ours running on it or
ended since, its control document unchanged) up to its ``poll_interval_max``, and back to the base at once
on any change. The poll skips a table that is not due yet as it skips one backing off (its items stay
offered); the control documents are read first, so an operator's command makes its table due in the same
poll, and a job of ours on a table that ended makes the table due at the next. A table whose services
hoodied schedules is due at the latest when its scheduling is (``reschedule_interval``: time-based
triggers). Between its polls a table's gauges keep their values, the seconds since each service's last
success included.

A *quiet* table costs its listing and little else: nothing was pending on it at its last evaluation, and
its listing, its control document and its scheduling reasons are still those of then. Its pending instants,
work, urgencies and explanations would come out the same, so they are neither computed nor exported again
(the gauges keep their values); only what changes with time alone is updated (the seconds since each
service's last success). A table with pending instants is evaluated at every poll: claims, the runner's
jobs and the takeover grace move without its timeline.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from hoodie.backlog import measure_backlog
from hoodie.config import TableConfig
from hoodie.errors import HoodieError
from hoodie.metadata_table import refuse_metadata_table
from hoodie.registry import MAINTENANCE, SERVICES
from hoodie.storage import Storage
from hoodie.storage.identity import table_identity
from hoodie.storage.redact import redact_uri
from hoodie.table import Table
from hoodie.timeline.instant import RESTORE, ROLLBACK, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator, parse_instant_time
from hoodie.timeline.timeline import Timeline
from hoodie.write.late_files import LateFiles, recent_late_files
from hoodie.write.orphaned_rollback import finish_orphaned_rollback, orphaned_rollbacks
from hoodied.change_events import ChangeEvents
from hoodied.config import DaemonConfig, DiscoveryRoot, TableSettings
from hoodied.control import DRAINING, PAUSED, ControlStore, Note, TableControl, commands_between
from hoodied.coordination import SCHEDULE_CLAIM, Coordination
from hoodied.discovery import Discovery, Found, Merged, discover
from hoodied.explain import RunnerView, explain
from hoodied.health import Heartbeats
from hoodied.history import append, control_record
from hoodied.listing import Listed, config_max_age, list_timeline
from hoodied.logs import log_context
from hoodied.metrics import Metrics
from hoodied.ownership import decide
from hoodied.poll_interval import PollIntervals
from hoodied.runner import Runner
from hoodied.scheduler import Scheduler
from hoodied.table_polls import TablePolls
from hoodied.table_split import TableSplit
from hoodied.urgency import urgency
from hoodied.work import WatchedTable, WorkItem, table_settings

logger = logging.getLogger(__name__)


def _since(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {op: n - before.get(op, 0) for op, n in after.items() if n - before.get(op, 0)}


#: What differs between two tellings of one store error: the request's latency ("in 419.2ms", "in 1.2s").
_LATENCY = re.compile(r" in \d+(\.\d+)?(ns|us|µs|ms|s)\b")


def _same_cause(message: str) -> str:
    """``message`` without what changes from one try to the next, to log one cause once."""
    return _LATENCY.sub("", message)


def _label(uri: str) -> str:
    tail = uri.rstrip("/").rsplit("/", 1)[-1] or "table"
    return re.sub(r"[^A-Za-z0-9._-]", "_", tail)


#: Seconds after a takeover at which its voided attempts' late files are swept: at once (raised to
#: ``takeover_grace``), then densely while held requests usually land (a file of a completed instant is
#: visible until swept), and at ``jobs.late_request_horizon``, after which the store refuses a held request.
LATE_SWEEPS_AFTER = (0.0, 10.0, 30.0, 60.0, 300.0)


def late_sweep_times(grace: float, horizon: float) -> list[float]:
    """Seconds after a takeover at which its late files are swept (:data:`LATE_SWEEPS_AFTER`, none before
    ``grace``, the last at ``horizon``)."""
    return sorted({max(grace, after) for after in LATE_SWEEPS_AFTER if after < horizon} | {horizon})


class Poller:
    """Polls the watched tables and hands the runnable work to the runner (see the module docstring)."""

    def __init__(
        self,
        config: DaemonConfig,
        coordination: Coordination,
        metrics: Metrics,
        heartbeats: Heartbeats,
        scheduler: Scheduler,
        runner: Runner,
        stopping: threading.Event,
        failures: list[str],
        *,
        control: ControlStore | None = None,
        clock: Callable[[], float] = time.monotonic,
        events: ChangeEvents | None = None,
        split: TableSplit | None = None,
    ) -> None:
        self.config = config
        self.coordination = coordination
        self.metrics = metrics
        self.heartbeats = heartbeats
        self._scheduler = scheduler
        self._runner = runner
        self._control = control
        self._control_error: str | None = None
        self._runner_view = RunnerView(
            running=runner.is_running_instant, given_up=runner.given_up_reason, at_cap=runner.at_cap
        )
        self._stopping = stopping
        self._failures = failures
        self._clock = clock
        self._tables: dict[str, WatchedTable] = {}  # by identity
        #: The last scan of each discovery root (``discover[i]``), for ``/status``.
        self.discovery: list[Discovery] = []
        self._last_found: dict[int, tuple[Found, ...]] = {}  # each root's tables as of its last good scan
        self._said: set[str] = set()  # discovery errors and merges logged (each once while it lasts)
        self._poll_lock = threading.Lock()
        self._discovered_at = float("-inf")
        self._polls_done = 0  # passes finished
        self._polls = TablePolls(config.poll_concurrency, config.poll_deadline_seconds, self._overran)
        self._restarts: set[str] = set()  # tables due at once after their running poll ends (by key)
        self._events = events
        self._split = split
        self._root_identities: dict[int, str] = {}  # discover[i] -> its root's identity, when it has one
        self._events_counted: dict[tuple[str, str], int] = {}  # the events' totals as counted in metrics

    def tables(self) -> list[WatchedTable]:
        return list(self._tables.values())

    def refresh_tables(self) -> None:
        """The configured tables plus what the discovery roots hold now (re-scanned every 10 polls' time),
        one :class:`WatchedTable` per identity: a table an entry of ``tables`` names is that entry's (its
        name and settings) however discovery also reaches it; one two roots reach is the first root's."""
        now = self._clock()
        if self._tables and now - self._discovered_at < 10 * self.config.poll_interval:
            return
        self._discovered_at = now
        wanted: dict[str, tuple[str, str | None, TableSettings]] = {}  # identity -> uri, name, settings
        for entry in self.config.tables:
            identity = entry.identity or table_identity(entry.path, entry.settings.storage_options)
            wanted.setdefault(identity, (entry.path, entry.name, entry.settings))
        scans: list[Discovery] = []
        for i, root in enumerate(self.config.discover):
            scan = self._scan(i, root)
            merged = list(scan.merged)
            for found in scan.tables:
                if found.identity in wanted:  # an entry of tables, or an earlier root, has it
                    if found.path != wanted[found.identity][0]:  # (an entry's own path is no news)
                        merged.append(Merged(found.path, found.identity, wanted[found.identity][0]))
                else:
                    wanted[found.identity] = (found.path, None, root.settings)
            scans.append(replace(scan, merged=tuple(merged)))
            for m in merged:
                self._say(f"discover[{i}] ({redact_uri(root.root)}): {m.describe()}")
        self.discovery = scans
        names: set[str] = set()
        for identity, (uri, name, settings) in wanted.items():
            if identity in self._tables:
                watched = self._tables[identity]
                names.add(watched.name)
                if watched.settings != settings:  # a reloaded configuration (hoodied.config_reload)
                    self._resettle(watched, settings)
                continue
            label = name or _label(uri)
            while label in names:  # two discovered tables with one folder name: keep labels unique
                label = f"{label}_"
            names.add(label)
            storage = Storage.for_uri(uri, dict(settings.storage_options))
            self._tables[identity] = WatchedTable(uri, label, settings, storage, identity=identity)
            logger.info(
                "watching table %s (%s): services %s, scheduling %s",
                label,
                redact_uri(uri),
                ",".join(settings.services),
                ",".join(settings.schedule) or "none",
            )
        for identity in [k for k in self._tables if k not in wanted]:
            gone = self._tables.pop(identity)
            self.metrics.forget_table(gone.name)
            logger.info("no longer watching table %s (%s)", gone.name, redact_uri(gone.uri))
        self.metrics.tables.set(len(self._tables))

    def reconfigure(self, config: DaemonConfig) -> None:
        """Watch the tables of ``config`` from the next poll on (a file read again:
        :mod:`hoodied.config_reload`): its entries and roots are read, and discovery scans again, at once."""
        self.config = config
        self._discovered_at = float("-inf")

    def _resettle(self, table: WatchedTable, settings: TableSettings) -> None:
        """Give a watched table its new ``settings`` (its storage opened again when its options changed); it
        is due at once, so that what they change (services, schedule, triggers) applies at the next poll."""
        if settings.storage_options != table.settings.storage_options:
            table.storage = Storage.for_uri(table.uri, dict(settings.storage_options))
        table.settings = settings
        self._restart_interval(table)
        logger.info(
            "table %s (%s): new settings: services %s, scheduling %s",
            table.name,
            redact_uri(table.uri),
            ",".join(settings.services),
            ",".join(settings.schedule) or "none",
        )

    def _scan(self, i: int, root: DiscoveryRoot) -> Discovery:
        """Scan ``discover[i]``; a scan that fails keeps the tables of the root's last good scan (a store that
        fails for a minute must not make the daemon forget them), and its error is logged once."""
        scan = discover(root)
        where = f"discover[{i}] ({redact_uri(root.root)})"
        if scan.error is None:
            self._last_found[i] = scan.tables
            if any(s.startswith(f"{where}: error: ") for s in self._said):
                logger.info("%s can be scanned again", where)
            self._said = {s for s in self._said if not s.startswith(f"{where}: error: ")}
            return scan
        self._say(f"{where}: error: {scan.error}", logging.ERROR)
        return replace(scan, tables=self._last_found.get(i, ()))

    def _say(self, message: str, level: int = logging.WARNING) -> None:
        """Log ``message`` once (discovery repeats its findings at every scan)."""
        if message not in self._said:
            self._said.add(message)
            logger.log(level, "%s", message)

    def poll(self, *, wait_all: bool = False) -> list[WorkItem]:
        """One pass over every table; returns the runnable work, highest priority first, and hands it to the
        workers. Each due table is polled on a worker of :class:`~hoodied.table_polls.TablePolls`; the pass
        waits for each up to ``poll_deadline`` (``wait_all``: until every one ended, as ``run --once``
        does)."""
        with self._poll_lock:
            started = self._clock()
            self.heartbeats.last_poll_started = time.time()
            self.refresh_tables()
            controls = self._read_controls()
            announced = self._take_events()  # (before the tables are taken: an event may discover one)
            tables = self.tables()
            self._apply_split(tables)
            commanded: set[WatchedTable] = set()  # tables whose control document changed
            if controls is not None:
                for table in tables:
                    control = controls.get(table.key, TableControl())
                    if control != table.control:
                        commanded.add(table)
                        self._restart_interval(table)
                        if table.control_read and table.owned:
                            self._report_commands(table, table.control, control)
                    table.control = control
                    table.control_read = True
            for table in tables:
                if self._stopping.is_set():
                    break
                self._runner.apply_control(table)
                self._sweep_late_files(table)  # where a job of this replica ran, owned by it now or not
                if not table.owned:  # another replica lists and schedules it (hoodied.table_split)
                    continue
                if self._polls.running(table):  # its last poll overran and goes on (hoodied.table_polls)
                    continue
                if table.key in self._restarts:
                    self._restarts.discard(table.key)
                    self._restart_interval(table)
                # Not backing off after a failure, and due by its poll interval.
                if self._clock() < table.retry_at or not self._interval_due(table, started):
                    continue
                body = self._poll_body(table, started, table in announced, table in commanded)
                self._polls.start(table, body)
            done = self._polls.wait(deadline=not wait_all, stopping=self._stopping)
            errors = sum(1 for _, ok in done.ended if not ok)
            items = [item for t in self.tables() if t.owned for item in t.items]
            items.sort(key=WorkItem.sort_key)
            self._runner.offer(items)
            self._polls_done += 1
            now = time.time()
            self.metrics.poll_finished(self._clock() - started, ok=True, now=now)
            self.heartbeats.last_poll_succeeded = now
            if errors or done.overran:
                overran = f"; {len(done.overran)} overran their deadline" if done.overran else ""
                self.heartbeats.last_error = f"{errors} table(s) failed to poll{overran}"
            return items

    def _poll_body(
        self, table: WatchedTable, started: float, announced: bool, commanded: bool
    ) -> Callable[[], bool]:
        """One table's poll as a :class:`~hoodied.table_polls.TablePolls` worker runs it (true when it
        succeeded): :meth:`_poll_table`, its pace, its metrics, and the work it found queued at once when its
        timeline changed (after the first pass)."""

        def body() -> bool:
            t0 = self._clock()
            ok = True
            requests = table.storage.requests.snapshot()
            jobs_ended = table.jobs_ended
            # A sweep (a poll no event asked for) that finds a change: an event was lost or late.
            sweep = table.settings.change_notifications and table.listing is not None and not announced
            with log_context(table=table.name):
                try:
                    changed = self._poll_table(table, announced=announced)
                    table.failures, table.last_error = 0, None
                    if changed and sweep:
                        self.metrics.sweep_found_changes.labels(table.name).inc()
                    self._pace(table, started, jobs_ended, changed=changed or commanded)
                    if changed and table.items and self._polls_done:
                        self._runner.add(table.items)
                    if table.overran:
                        logger.info("table %s polled within its deadline again", table.name)
                        table.overran = False
                except Exception as e:
                    ok = False
                    self._table_failed(table, e)
            self.metrics.table_poll_finished(table.name, self._clock() - t0, ok=ok)
            made = _since(requests, table.storage.requests.snapshot())
            self.metrics.count_requests(table.name, "poll", made)
            self.heartbeats.last_table_polled = time.time()
            if table.identity not in self._tables:  # no longer watched while it polled
                self.metrics.forget_table(table.name)
            return ok

        return body

    def _overran(self, table: WatchedTable, seconds: float) -> None:
        """A table's poll overran its deadline (:mod:`hoodied.table_polls`): the pass goes on without it."""
        self.metrics.table_poll_overruns.labels(table.name).inc()
        if not table.overran:
            logger.warning(
                "the poll of table %s (%s) is still running after %.0f s (poll_deadline): the other tables "
                "go on; it is polled again once this poll ends",
                table.name,
                redact_uri(table.uri),
                seconds,
            )
        table.overran = True

    def wait_polls(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for every table poll still running (one that overran included);
        true when none is left (the daemon's shutdown: a poll may be scheduling under the table lock)."""
        return self._polls.join(timeout)

    def _take_events(self) -> set[WatchedTable]:
        """The tables change events announced since the last poll (:mod:`hoodied.change_events`), each due
        now at its base interval. An event for a table nobody watches under a discovery root has that root
        scanned now; the rest named no table. Counted by source and outcome."""
        if self._events is None:
            return set()
        taken = self._events.take()
        received, dropped, lag = self._events.totals()
        for source, seconds in lag.items():
            self.metrics.change_event_lag_seconds.labels(source).set(seconds)
        for (source, outcome), n in [
            *(((source, "received"), n) for source, n in received.items()),
            *((("any", reason), n) for reason, n in dropped.items()),
        ]:
            counted = self._events_counted.get((source, outcome), 0)
            if n > counted:
                self.metrics.change_events.labels(source, outcome).inc(n - counted)
                self._events_counted[(source, outcome)] = n
        if not taken:
            return set()
        if any(i not in self._tables for i in taken) and any(
            self._under_root(i) for i in taken if i not in self._tables
        ):
            self._discovered_at = float("-inf")  # a new table under a root: scan now
            self.refresh_tables()
        announced: set[WatchedTable] = set()
        for identity, event in taken.items():
            table = self._tables.get(identity)
            if table is None:
                outcome = "discovered" if self._under_root(identity) else "no_table"
                self.metrics.change_events.labels(event.source, outcome).inc()
                continue
            self.metrics.change_events.labels(event.source, "table").inc()
            announced.add(table)
            self._restart_interval(table)
        return announced

    def _under_root(self, identity: str) -> bool:
        """Whether a discovery root's folder holds the table ``identity``."""
        for i, root in enumerate(self.config.discover):
            if i not in self._root_identities:
                try:
                    self._root_identities[i] = table_identity(root.root, root.settings.storage_options)
                except Exception:
                    self._root_identities[i] = ""
            prefix = self._root_identities[i].rstrip("/")
            if prefix and identity.startswith(prefix + "/"):
                return True
        return False

    def _apply_split(self, tables: list[WatchedTable]) -> None:
        """Which tables this replica lists and schedules (:mod:`hoodied.table_split`), read once a poll; a
        table that becomes this replica's is due at once."""
        if self._split is None:
            return
        self._split.refresh()
        owned = 0
        given_away: list[str] = []
        for table in tables:
            table.owner = self._split.owner(table.key)
            mine = table.owner == self._split.replica
            if self._polls.running(table):  # decided once its poll, which overran, ended
                owned += table.owned
                continue
            if mine and not table.owned:
                self._restart_interval(table)
            elif table.owned and not mine:
                # Another replica's now: this one's view of it goes, its gauges too (the owner exports
                # them), and it is read afresh should it come back.
                given_away.append(table.name)
                table.items, table.pending, table.evaluated = (), {}, None
                table.listing, table.listed_folder_time_ns, table.backlog = None, None, None
            table.owned = mine
            owned += mine
        if given_away:
            self.metrics.forget_table_state(*given_away)
        self.metrics.tables_owned.set(owned)

    def _read_controls(self) -> dict[str, TableControl] | None:
        """Every table's control document; None (keep the last) when the store cannot be read now."""
        if self._control is None:
            return None
        try:
            controls = self._control.read_all()
        except Exception as e:
            message = f"{type(e).__name__}: {e}"
            if message != self._control_error:
                logger.error("cannot read the control documents (keeping the last ones): %s", message)
            self._control_error = message
            return None
        if self._control_error is not None:
            logger.info("the control documents are readable again")
            self._control_error = None
        return controls

    def _intervals(self, table: WatchedTable) -> PollIntervals:
        return PollIntervals(self.config.poll_interval, self.config.poll_ceiling(table.settings))

    def _interval_due(self, table: WatchedTable, now: float) -> bool:
        """The table's poll interval passed since its last poll, or a job of ours on it ended since then."""
        return now >= table.poll_due_at or table.jobs_ended != table.jobs_ended_polled

    def _restart_interval(self, table: WatchedTable) -> None:
        """Back to the base interval, and due at once (an operator's command, a failed poll); for a table
        whose poll is running (it overran), once that poll ends (its pace would undo it)."""
        if self._polls.running(table):
            self._restarts.add(table.key)
            return
        self._base_interval(table)

    def _base_interval(self, table: WatchedTable) -> None:
        table.poll_interval = self.config.poll_interval
        table.poll_due_at = float("-inf")
        self.metrics.table_poll_interval_seconds.labels(table.name).set(table.poll_interval)

    def _pace(self, table: WatchedTable, started: float, jobs_ended: int, *, changed: bool) -> None:
        """Set the table's poll interval (:mod:`hoodied.poll_interval`) after a poll that began at
        ``started``: grown when the poll found it quiet, else the base. ``jobs_ended``: the runner's count of
        the table's ended jobs when its poll began; ``changed``: its listing or its control document
        changed."""
        quiet = (
            not changed
            and not any(table.pending.values())
            and table.jobs_ended == table.jobs_ended_polled
            and not any(item.table is table for item in self._runner.running)
        )
        intervals = self._intervals(table)
        table.poll_interval = intervals.after(table.poll_interval, quiet=quiet)
        table.jobs_ended_polled = jobs_ended
        table.polls += 1
        table.poll_due_at = started + intervals.wait(table.poll_interval, table.key, table.polls)
        if table.settings.schedule and table.control.claims_allowed and table.held is None:
            # Time-based triggers: its scheduling comes due every reschedule_interval without a change.
            due = table.scheduled_at + self.config.reschedule_interval - intervals.base / 2
            table.poll_due_at = min(table.poll_due_at, due)
        self.metrics.table_poll_interval_seconds.labels(table.name).set(table.poll_interval)

    def _table_failed(self, table: WatchedTable, e: BaseException) -> None:
        self._failures.append(f"table {table.name}: cannot poll: {type(e).__name__}: {e}")
        table.failures += 1
        delay = self.config.jobs.retry_delay(table.failures)
        table.retry_at = self._clock() + delay
        self._base_interval(table)
        table.items = ()
        table.evaluated = None
        table.listed_folder_time_ns = None
        message = f"{type(e).__name__}: {e}"
        if _same_cause(message) != _same_cause(table.last_error or ""):
            logger.error(
                "cannot poll table %s (%s): %s; retrying in %.0f s", table.name, table.uri, message, delay
            )
        table.last_error = message

    def _poll_table(self, table: WatchedTable, *, announced: bool = False) -> bool:
        """Poll one table (``announced``: a change event named it); true when its timeline changed."""
        age = config_max_age(table, announced=announced)
        listed = list_timeline(table, table.config, self._clock(), config_max_age=age)
        changed = self._take(table, listed)
        schedules = (
            table.settings.schedule
            or table.control.triggers
            or any(s in table.settings.services for s in MAINTENANCE)
        )
        if table.held is None and schedules and not self._stopping.is_set() and self._scheduler.due(table):
            if self._scheduler.schedule(table):
                changed |= self._take(table, list_timeline(table, table.config, self._clock()))
            table.scheduled_listing = table.listing
        self._measure(table)
        self._check_drained(table)
        self._finish_orphaned_rollbacks(table)
        evaluated = (table.listing, table.control, tuple(table.schedule_reasons.items()))
        if table.evaluated == evaluated:
            return changed  # quiet (the module docstring): what follows would come out as it did
        # What is pending is reported and offered even when scheduling failed (a read-only table, a lock
        # that timed out): it says so in its log lines and in hoodied status.
        self._collect(table)
        explanation = explain(table, self._runner_view)
        table.blocked, table.next = explanation.blocked, explanation.next
        self.metrics.set_blocked(
            table.name, {s: code for s, (code, _) in table.blocked.items()}, not table.control.claims_allowed
        )
        table.evaluated = None if any(table.pending.values()) else evaluated
        return changed

    def _finish_orphaned_rollbacks(self, table: WatchedTable) -> None:
        """Finish the pending rollbacks whose instant is gone from the timeline once each was seen pending
        for ``takeover_grace`` (:mod:`hoodie.write.orphaned_rollback`: nothing else would ever finish them,
        and archival stops at them), under the table lock, where hoodied runs services and the table is
        neither paused nor held by a restore. A failure is logged and tried again at the next poll."""
        assert table.timeline is not None
        assert table.config is not None
        pending = {i.time for i in table.timeline.pending() if i.action == ROLLBACK}
        now = self._clock()
        table.rollbacks_seen = {t: table.rollbacks_seen.get(t, now) for t in pending}
        due = {t for t, seen in table.rollbacks_seen.items() if now - seen >= self.config.jobs.takeover_grace}
        if not due or not table.settings.services or table.held or not table.control.claims_allowed:
            return
        try:
            orphans = [o for o in orphaned_rollbacks(table.storage, table.timeline) if o.rollback.time in due]
            for orphan in orphans:
                lock = self.coordination.table_lock(
                    table.name, table.storage, table.config, table.settings.hoodie
                )
                done = finish_orphaned_rollback(table.storage, lock, orphan.rollback.time)
                if done is not None:
                    self.metrics.orphaned_rollbacks.labels(table.name).inc()
                    table.poll_due_at = float("-inf")  # the timeline changed: read it again next time
        except Exception as e:
            logger.error(
                "table %s (%s): cannot finish an orphaned rollback: %s: %s",
                table.name,
                redact_uri(table.uri),
                type(e).__name__,
                e,
            )

    def _report_commands(self, table: WatchedTable, before: TableControl, after: TableControl) -> None:
        """Log and count the operators' commands that changed ``table``'s control document since the last
        poll, whoever issued them (``hoodied ctl``, any replica's API): the replica that polls the table
        (its owner, hoodied.table_split) reports each once, when it first reads it."""
        for command, what, note in commands_between(before, after):
            on = "" if what == "table" else f" {what}"
            why = f": {note.reason}" if note.reason else ""
            logger.info("table %s: %s%s by %s%s", table.name, command, on, note.by or "?", why)
            self.metrics.control_commands.labels(table.name, command).inc()

    def _sweep_late_files(self, table: WatchedTable) -> None:
        """Sweep the files that attempts voided by a takeover may land late (:mod:`hoodie.write.late_files`)
        at the times of :func:`late_sweep_times` after this poller first heard of the takeover: from its own
        runner, or (the replica that polls the table) from the void decisions on storage, looked for when
        the timeline shows a completed rollback not looked after yet, so the sweeps outlive the replica that
        voided. A failure is logged and the sweep tried again at the next poll."""
        now = self._clock()
        jobs = self.config.jobs
        found: list[LateFiles] = []
        while table.late_files:
            found.append(table.late_files.popleft())
        if table.owned:
            found += self._recent_voids(table)
        for late in found:
            planned = [p for _, p in table.late_sweeps if p.instant_time == late.instant_time]
            if any(
                late.attempts <= p.attempts and (p.groups is None or p.groups == late.groups) for p in planned
            ):
                continue  # swept already as often, over at least as much
            times = late_sweep_times(jobs.takeover_grace, jobs.late_request_horizon)
            table.late_sweeps += [(now + after, late) for after in times]
        for entry in [(at, late) for at, late in table.late_sweeps if at <= now]:
            late = entry[1]
            try:
                deleted = late.sweep(table.storage)
            except Exception as e:
                logger.error(
                    "table %s (%s): cannot sweep the late files of %s: %s: %s",
                    table.name,
                    redact_uri(table.uri),
                    late.instant_time,
                    type(e).__name__,
                    e,
                )
                continue
            table.late_sweeps.remove(entry)
            if deleted:
                self.metrics.late_files_deleted.labels(table.name).inc(len(deleted))
        if table.late_sweeps or table.late_sweeps_exported:  # no series for a table that never had one
            self.metrics.late_sweeps_pending.labels(table.name).set(len(table.late_sweeps))
            table.late_sweeps_exported = True

    def _recent_voids(self, table: WatchedTable) -> list[LateFiles]:
        """The recent void decisions of ``table`` (:func:`~hoodie.write.late_files.recent_late_files`) when
        its timeline shows a completed rollback newer than the last one looked after (every takeover rolls
        the attempts it voids back); none otherwise, and none on a listing error (looked for again at the
        next poll). A timeline already looked at is not looked at again: an idle table costs nothing here."""
        if table.timeline is None or table.timeline is table.voids_timeline:
            return []
        timeline = table.timeline
        rollbacks = [i.time for i in timeline.completed() if i.action == ROLLBACK]
        if not rollbacks or (
            table.voids_looked_after is not None and rollbacks[-1] <= table.voids_looked_after
        ):
            table.voids_timeline = timeline
            return []
        try:
            found = recent_late_files(table.storage, horizon=self.config.jobs.late_request_horizon)
        except Exception as e:
            logger.warning(
                "table %s (%s): cannot look for recent void decisions: %s: %s",
                table.name,
                redact_uri(table.uri),
                type(e).__name__,
                e,
            )
            return []
        table.voids_looked_after = rollbacks[-1]
        table.voids_timeline = timeline
        return found

    def _measure(self, table: WatchedTable) -> None:
        """Measure the table's backlog when its timeline changed since the last measure, and export it."""
        assert table.config is not None
        assert table.timeline is not None
        if table.backlog is None or table.backlog_listing is not table.listing:
            try:
                view = Table(table.storage, table.config, table.timeline)
                table.backlog = measure_backlog(view, table_settings(table), table.backlog_cache)
                table.backlog_listing = table.listing
            except Exception as e:  # a figure we cannot measure must not stop the table's services
                logger.warning("cannot measure the backlog of %s: %s: %s", table.name, type(e).__name__, e)
                return
        assert table.backlog is not None
        self.metrics.set_backlog(table.name, table.backlog, InstantTimeGenerator().now_in_zone(table.config))

    def _check_drained(self, table: WatchedTable) -> None:
        """A draining table with no job left on any replica (no claim but scheduling's) becomes paused."""
        if table.control.state != DRAINING or self._control is None:
            return
        if any(item.table is table for item in self._runner.running):
            return
        try:
            holders = self.coordination.holders(table.storage, table.key)
        except Exception as e:
            logger.warning("cannot read the claims of draining table %s: %s", table.name, e)
            return
        if any(name != SCHEDULE_CLAIM for name in holders):
            return
        drain = table.control.note
        by, why = (drain.by, drain.reason) if drain else ("?", "")
        paused_note = Note(by, f"drained: {why}" if why else "drained", time.time())

        def to_paused(c: TableControl) -> TableControl:
            return replace(c, state=PAUSED, note=paused_note) if c.state == DRAINING else c

        try:
            table.control = self._control.update(table.key, to_paused)
        except Exception as e:
            logger.warning("cannot mark drained table %s paused: %s", table.name, e)
            return
        logger.info("table %s drained (no job running on any replica): paused, drain by %s", table.name, by)
        self.metrics.control_commands.labels(table.name, "drained").inc()
        append(
            table.storage,
            control_record(table.name, self.config.replica, "drained", by=by, reason=why),
            keep=self.config.admin.history_keep,
        )

    @staticmethod
    def _check_held(table: WatchedTable) -> None:
        """A pending restore holds every service back (Hudi refuses new commits until it completes, and a
        service running meanwhile would write on instants the restore is rolling back)."""
        assert table.timeline is not None
        restores = [i for i in table.timeline.pending() if i.action == RESTORE]
        held = (
            f"restore {restores[0].time} is {restores[0].state.name.lower()}: no table service runs until it "
            "completes (hoodied restore finishes an interrupted one)"
            if restores
            else None
        )
        if held != table.held:
            if held:
                logger.warning("table %s (%s): %s", table.name, table.uri, held)
            else:
                logger.info("table %s (%s): the restore completed; services run again", table.name, table.uri)
        table.held = held

    def _take(self, table: WatchedTable, listed: Listed) -> bool:
        """Take in a look at the timeline folder: parse a listing (re-read the config unless read just now,
        look for a pending restore) only when it changed; true when it did."""
        if not listed.fresh:
            return False
        if listed.config is not None:
            table.config, table.config_read_at = listed.config, self._clock()
        changed = listed.names != table.listing
        if changed:
            storage = table.storage
            if listed.config is None:  # an upgrade or a new property shows with new instants
                table.config, table.config_read_at = TableConfig.load(storage), self._clock()
            assert table.config is not None
            refuse_metadata_table(storage, table.config, "table service")
            table.timeline = Timeline.from_file_names(
                listed.names,
                layout_version=table.config.timeline_layout_version,
                folder=table.config.timeline_path,
            )
            table.listing = listed.names
            self._check_held(table)
        table.listed_folder_time_ns, table.listed_at = listed.folder_time_ns, self._clock()
        return changed

    def _collect(self, table: WatchedTable) -> None:
        """Record the table's pending instants (gauges) and the runnable ones (work items)."""
        assert table.timeline is not None
        assert table.config is not None
        view = Table(table.storage, table.config, table.timeline)
        self.metrics.active_timeline_instants.labels(table=table.name).set(len(table.timeline))
        if len(self._tables) <= self.config.metrics.zero_series_max_tables:
            self.metrics.count_from_zero(table.name, table.settings.services)
        pending: dict[str, list[Instant]] = {s.name: s.pending(view) for s in SERVICES if s.has_instants}
        table.pending = pending
        now_wall = time.time()
        zone_now = InstantTimeGenerator().now_in_zone(table.config)
        items: list[WorkItem] = []
        seen_inflight: set[str] = set()
        urgencies: dict[str, float] = {}
        for service, instants in pending.items():
            oldest = 0.0
            if instants:
                with contextlib.suppress(HoodieError):
                    oldest = max(0.0, (zone_now - parse_instant_time(instants[0].time)).total_seconds())
            self.metrics.set_pending(table.name, service, len(instants), oldest)
            if service not in table.settings.services or not instants:
                continue
            value = urgencies[service] = urgency(service, table.backlog, table.settings.priority)
            for instant in instants:
                if table.control.is_cancelled(service, instant.time) is not None:
                    seen_inflight.add(instant.time)
                    continue
                item = WorkItem(table, service, instant, value)
                if instant.state is State.INFLIGHT and not self._takeover_due(item, view, now_wall):
                    seen_inflight.add(instant.time)
                    continue
                seen_inflight.add(instant.time)
                items.append(item)
        for t in [t for t in table.unclaimed_since if t not in seen_inflight]:
            del table.unclaimed_since[t]
        for t in [t for t in table.foreign if t not in seen_inflight]:
            del table.foreign[t]
        table.urgency = urgencies
        self.metrics.set_urgency(table.name, urgencies)
        table.items = () if table.held or not table.control.claims_allowed else tuple(items)

    def _takeover_due(self, item: WorkItem, view: Table, now_wall: float) -> bool:
        """An inflight instant is runnable when nobody has claimed it for ``takeover_grace`` and
        :func:`hoodied.ownership.decide` allows its takeover (not while this replica runs it)."""
        table = item.table
        T = item.instant.time
        if self._runner.is_running(item):
            return False
        try:
            holder = self.coordination.holder(table.storage, table.key, item.claim_name)
        except Exception as e:
            logger.warning("cannot read the claim of %s %s: %s", item.service, T, e)
            return False
        if holder is not None:
            table.unclaimed_since.pop(T, None)
            table.foreign.pop(T, None)
            return False
        first = table.unclaimed_since.setdefault(T, self._clock())
        if self._clock() - first < self.config.jobs.takeover_grace:
            return False
        verdict = decide(
            view,
            item.service,
            item.instant,
            table_settings(table),
            table.settings.takeover_foreign_after,
            now_wall,
        )
        if verdict.allowed:
            table.foreign.pop(T, None)
            return True
        if table.foreign.get(T) is None:
            logger.warning(
                "%s %s of %s is inflight and unclaimed: %s", item.service, T, table.name, verdict.reason
            )
        table.foreign[T] = f"{item.service} {T}: {verdict.reason}"
        return False


__all__ = ["Poller"]
