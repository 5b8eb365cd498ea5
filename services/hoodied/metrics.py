"""The daemon's Prometheus metrics: one :class:`Metrics` per daemon, each with a registry of its own (several
daemons may share a process, as they do in tests), and the few helpers the supervisor and the services call.

Every family is named ``hoodied_*``; the attribute holding it drops that prefix (``hoodied_pending_instants``
is ``metrics.pending_instants``). Label sets:

- per table and action: pending instants and the age of the oldest, jobs started / succeeded / failed (by
  ``kind``, one of :data:`FAILURE_KINDS`), records and bytes written, files deleted, instants scheduled and
  instants given up on;
- per action only: jobs running and the job duration histogram (the table would multiply the buckets);
- none: the daemon-wide gauges and histograms (claims, the table lock, ZooKeeper, Spark, polls).

:data:`METRIC_NAMES` lists the names a dashboard or an alert may use.
"""

from __future__ import annotations

import datetime as dt
import socket
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, generate_latest
from prometheus_client.metrics_core import Metric

from hoodie.backlog import Backlog
from hoodied import package_version

#: ``kind`` label values of ``hoodied_jobs_failed_total``: ``failed`` = definitely failed (rolled back),
#: ``claim_lost`` = our claim was taken (the job must not commit), ``conflict`` = a conflicting write won,
#: ``cancelled`` = stopped on shutdown or on request, ``unknown`` = the outcome of the commit is not known,
#: ``corrupt`` = committed data the job must rewrite is damaged (given up at once), ``lost_race`` = another
#: run of the same instant (another daemon, a one-off command) completed or took it over first: nothing
#: committed, only the run's own files deleted; ``overlapping_plan`` = the instant's plan shares file groups
#: with an older pending plan (or a newer started one) and was refused (given up at once: a requested plan
#: was deleted, an inflight one waits for a human; :mod:`hoodie.write.plan_overlap`).
#: Failure kinds whose counters exist at 0 from a table's first poll (:meth:`Metrics.count_from_zero`):
#: those the alerting rules read, a job that failed for good or whose outcome is unknown or damaged data.
FAILURES_FROM_ZERO: Final = ("failed", "unknown", "corrupt")
FAILURE_KINDS: Final = frozenset(
    {
        "failed",
        "claim_lost",
        "conflict",
        "cancelled",
        "unknown",
        "corrupt",
        "foreign",
        "deferred",
        "lost_race",
        "overlapping_plan",
    }
)

#: States of ``hoodied_zookeeper_state``: kazoo's connection states, CLOSED after the daemon closed its
#: client, EMBEDDED when the daemon runs without ZooKeeper (claims on one machine).
ZOOKEEPER_STATES: Final = ("CONNECTED", "SUSPENDED", "LOST", "CLOSED", "EMBEDDED")

#: Seconds: one table-service job, 1 s .. 4 h.
JOB_DURATION_BUCKETS: Final = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400)
#: Seconds: waiting to acquire a table lock, 1 ms .. 120 s.
LOCK_WAIT_BUCKETS: Final = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
#: Seconds: one supervisor poll over every table, 10 ms .. 10 min.
POLL_DURATION_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
#: Seconds: one table's poll (reading its timeline), 5 ms .. 2 min.
TABLE_POLL_BUCKETS: Final = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)

#: Every metric family of :class:`Metrics` as its ``# TYPE`` line names it in the text exposition
#: (``/metrics``): a counter under its ``_total`` sample name (``hoodied_jobs_started_total``), a histogram
#: under its base name (its samples add ``_bucket``, ``_sum`` and ``_count``), the info metric as
#: ``hoodied_info`` and the enum as ``hoodied_zookeeper_state`` (one sample per state, labelled with it).
#: The ``<name>_created`` series prometheus_client adds for counters and histograms are not exported
#: (:meth:`Metrics.exposition`).
METRIC_NAMES: Final = frozenset(
    {
        "hoodied_info",
        "hoodied_tables",
        "hoodied_pending_instants",
        "hoodied_oldest_pending_age_seconds",
        "hoodied_jobs_started_total",
        "hoodied_jobs_succeeded_total",
        "hoodied_jobs_failed_total",
        "hoodied_jobs_running",
        "hoodied_job_duration_seconds",
        "hoodied_records_written_total",
        "hoodied_bytes_written_total",
        "hoodied_files_deleted_total",
        "hoodied_instants_scheduled_total",
        "hoodied_instants_given_up_total",
        "hoodied_corrupt_data_total",
        "hoodied_claims_held",
        "hoodied_lock_wait_seconds",
        "hoodied_lock_hold_seconds",
        "hoodied_zookeeper_connected",
        "hoodied_zookeeper_state",
        "hoodied_spark_up",
        "hoodied_poll_duration_seconds",
        "hoodied_table_poll_seconds",
        "hoodied_last_successful_poll_timestamp_seconds",
        "hoodied_table_poll_failures_total",
        "hoodied_table_poll_overruns_total",
        "hoodied_orphaned_rollbacks_total",
        "hoodied_late_files_deleted_total",
        "hoodied_late_sweeps_pending",
        "hoodied_config_reloads_total",
        "hoodied_config_reload_ok",
        "hoodied_table_poll_interval_seconds",
        "hoodied_storage_requests_total",
        "hoodied_active_timeline_instants",
        "hoodied_instants_archived_total",
        "hoodied_table_delta_commits_since_compaction",
        "hoodied_table_log_bytes_since_compaction",
        "hoodied_table_commits_since_clean",
        "hoodied_table_small_files",
        "hoodied_table_metadata_lag_instants",
        "hoodied_table_seconds_since_success",
        "hoodied_table_blocked_info",
        "hoodied_table_paused",
        "hoodied_table_urgency",
        "hoodied_control_commands_total",
        "hoodied_change_events_total",
        "hoodied_change_event_lag_seconds",
        "hoodied_sweep_found_changes_total",
        "hoodied_tables_owned",
    }
)

_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")
_HISTOGRAMS = frozenset(
    {
        "hoodied_job_duration_seconds",
        "hoodied_lock_wait_seconds",
        "hoodied_lock_hold_seconds",
        "hoodied_poll_duration_seconds",
        "hoodied_table_poll_seconds",
    }
)

#: Every sample name of :class:`Metrics` a PromQL query may select: :data:`METRIC_NAMES` with each histogram
#: replaced by its ``_bucket``, ``_sum`` and ``_count`` series (``_created`` series left out, as above).
SAMPLE_NAMES: Final = frozenset(
    (METRIC_NAMES - _HISTOGRAMS) | {h + s for h in _HISTOGRAMS for s in _HISTOGRAM_SUFFIXES}
)

_TABLE_ACTION = ("table", "action")


class Metrics:
    """The metrics of one daemon, in a registry of their own (:attr:`registry`)."""

    def __init__(self, *, version: str | None = None, replica: str | None = None) -> None:
        """``version`` defaults to the installed hoodied's, ``replica`` to the host name."""
        self.registry = CollectorRegistry(auto_describe=True)
        # The metrics with a ``table`` label and their label names, for forget_table().
        self._by_table: list[tuple[Gauge | Counter | Histogram, tuple[str, ...]]] = []
        self._state_by_table: list[tuple[Gauge | Counter, tuple[str, ...]]] = []  # the gauges alone
        # The label values set per table by set_blocked and set_urgency, so that each replaces only its own.
        self._blocked_series: dict[str, set[tuple[str, ...]]] = {}
        self._urgency_series: dict[str, set[tuple[str, ...]]] = {}
        # The backlog last exported per table, so that an unchanged one is not set again.
        self._backlogs: dict[str, Backlog] = {}
        self._counted: dict[str, frozenset[str]] = {}  # per table: the actions whose job counters exist

        self.info = Info(
            "hoodied", "The hoodied version and the replica this daemon is.", registry=self.registry
        )
        self.info.info({"version": version or package_version(), "replica": replica or socket.gethostname()})
        self.tables = self._gauge("hoodied_tables", "Tables this daemon watches.")

        self.pending_instants = self._gauge(
            "hoodied_pending_instants",
            "Table-service instants requested or inflight on the timeline, by table and action.",
            _TABLE_ACTION,
        )
        self.oldest_pending_age_seconds = self._gauge(
            "hoodied_oldest_pending_age_seconds",
            "Age of the oldest pending table-service instant, by table and action (0 when none is pending).",
            _TABLE_ACTION,
        )

        self.jobs_started = self._counter(
            "hoodied_jobs_started_total", "Table-service jobs started.", _TABLE_ACTION
        )
        self.jobs_succeeded = self._counter(
            "hoodied_jobs_succeeded_total", "Table-service jobs that committed.", _TABLE_ACTION
        )
        self.jobs_failed = self._counter(
            "hoodied_jobs_failed_total",
            "Table-service jobs that did not commit, by kind: failed (definitely failed, rolled back), "
            "claim_lost, conflict, cancelled, unknown (the commit's outcome is not known), corrupt "
            "(committed data is damaged), lost_race (another run of the instant completed or took it over "
            "first), foreign (left to its live owner), deferred, overlapping_plan (its plan shares file "
            "groups with an older pending one: refused, not retried).",
            (*_TABLE_ACTION, "kind"),
        )
        self.jobs_running = self._gauge(
            "hoodied_jobs_running", "Table-service jobs running now, by action.", ("action",)
        )
        self.job_duration_seconds = self._histogram(
            "hoodied_job_duration_seconds",
            "Wall time of one table-service job, from its start to its commit or failure, by table, action.",
            JOB_DURATION_BUCKETS,
            ("table", "action"),
        )

        self.records_written = self._counter(
            "hoodied_records_written_total", "Records written by table-service jobs.", _TABLE_ACTION
        )
        self.bytes_written = self._counter(
            "hoodied_bytes_written_total", "Bytes of files written by table-service jobs.", _TABLE_ACTION
        )
        self.files_deleted = self._counter(
            "hoodied_files_deleted_total", "Files deleted by table-service jobs.", _TABLE_ACTION
        )
        self.instants_scheduled = self._counter(
            "hoodied_instants_scheduled_total",
            "Table-service instants this daemon scheduled itself.",
            _TABLE_ACTION,
        )
        self.instants_given_up = self._counter(
            "hoodied_instants_given_up_total",
            "Pending instants this daemon stopped retrying (retries exhausted, or damaged data).",
            _TABLE_ACTION,
        )
        self.active_timeline_instants = self._gauge(
            "hoodied_active_timeline_instants",
            "Instants on a table's active timeline (every action and state), as of its last poll; archival "
            "keeps it within hoodie.keep.max.commits plus the instants it may not move yet.",
            ("table",),
        )
        self.instants_archived = self._counter(
            "hoodied_instants_archived_total",
            "Instants archival moved from the active timeline into the table's history (table: the data "
            "table's name, also for its metadata table's instants).",
            ("table",),
        )
        self.corrupt_data = self._counter(
            "hoodied_corrupt_data_total",
            "Jobs stopped because committed data they must rewrite is damaged (a log block or base file "
            "inside a completed commit); the instant is given up at once and the table needs a repair.",
            _TABLE_ACTION,
        )

        self.claims_held = self._gauge("hoodied_claims_held", "Instant claims this daemon holds now.")
        self.lock_wait_seconds = self._histogram(
            "hoodied_lock_wait_seconds",
            "Time spent waiting to acquire a table's lock, by table.",
            LOCK_WAIT_BUCKETS,
            ("table",),
        )
        self.lock_hold_seconds = self._histogram(
            "hoodied_lock_hold_seconds",
            "Time a table's lock was held (writers of the table wait that long), by table.",
            LOCK_WAIT_BUCKETS,
            ("table",),
        )
        self.zookeeper_connected = self._gauge(
            "hoodied_zookeeper_connected",
            "1 while the ZooKeeper session is connected, else 0 (also 0 when running without ZooKeeper).",
        )
        self.zookeeper_state = Enum(
            "hoodied_zookeeper_state",
            "State of the ZooKeeper connection: CLOSED until connected, EMBEDDED when there is no ZooKeeper.",
            states=list(ZOOKEEPER_STATES),
            registry=self.registry,
        )
        self.zookeeper_state.state("CLOSED")  # not the Enum's default, its first state (CONNECTED)
        self.spark_up = self._gauge("hoodied_spark_up", "1 while the Spark session is usable, else 0.")

        self.poll_duration_seconds = self._histogram(
            "hoodied_poll_duration_seconds",
            "Wall time of one supervisor poll over every table.",
            POLL_DURATION_BUCKETS,
        )
        self.table_poll_seconds = self._histogram(
            "hoodied_table_poll_seconds",
            "Wall time of polling one table (reading its timeline, choosing work).",
            TABLE_POLL_BUCKETS,
        )
        self.last_successful_poll_timestamp_seconds = self._gauge(
            "hoodied_last_successful_poll_timestamp_seconds",
            "Unix time at which the last supervisor poll succeeded.",
        )
        self.table_poll_failures = self._counter(
            "hoodied_table_poll_failures_total", "Polls of a table that failed, by table.", ("table",)
        )
        self.table_poll_overruns = self._counter(
            "hoodied_table_poll_overruns_total",
            "Polls of a table still running at their deadline (poll_deadline): the other tables went on "
            "without them (hoodied.table_polls).",
            ("table",),
        )
        self.orphaned_rollbacks = self._counter(
            "hoodied_orphaned_rollbacks_total",
            "Pending rollbacks whose instant was gone, finished (or withdrawn when stale) by this replica "
            "(hoodie.write.orphaned_rollback).",
            ("table",),
        )
        self.late_files_deleted = self._counter(
            "hoodied_late_files_deleted_total",
            "Files that attempts voided by a takeover landed after the instant completed (held requests), "
            "deleted by this replica's sweeps (hoodie.write.late_files).",
            ("table",),
        )
        self.config_reloads = self._counter(
            "hoodied_config_reloads_total",
            "Re-reads of the configuration file (SIGHUP, or the file changed) that changed the tables "
            "watched (outcome=applied) or were refused, the old configuration staying (outcome=refused).",
            ("outcome",),
        )
        self.config_reload_ok = self._gauge(
            "hoodied_config_reload_ok",
            "1 unless the last re-read of the configuration file was refused (then 0 until a good one).",
        )
        self.config_reload_ok.set(1)
        self.late_sweeps_pending = self._gauge(
            "hoodied_late_sweeps_pending",
            "Sweeps of files that attempts voided by a takeover may still land, planned by this replica and "
            "not yet made (the last one at jobs.late_request_horizon).",
            ("table",),
        )
        self.table_poll_interval_seconds = self._gauge(
            "hoodied_table_poll_interval_seconds",
            "Seconds between a table's polls now: poll_interval, growing while the table stays quiet up to "
            "its poll_interval_max (hoodied.poll_interval).",
            ("table",),
        )
        # -- backlog (hoodie.backlog) and the control plane (hoodied.control) --------------------------------
        self.table_delta_commits_since_compaction = self._gauge(
            "hoodied_table_delta_commits_since_compaction",
            "Completed deltacommits since the table's last completed compaction (0 on copy-on-write).",
            ("table",),
        )
        self.table_log_bytes_since_compaction = self._gauge(
            "hoodied_table_log_bytes_since_compaction",
            "Bytes of log files those deltacommits wrote: the log data awaiting compaction.",
            ("table",),
        )
        self.table_commits_since_clean = self._gauge(
            "hoodied_table_commits_since_clean",
            "Completed writes (commit, deltacommit, replacecommit) since the last completed clean.",
            ("table",),
        )
        self.table_small_files = self._gauge(
            "hoodied_table_small_files",
            "File groups whose newest base file, written since the last clustering, is below the "
            "clustering's small-file limit: an upper bound of what a clustering could take (its plan also "
            "leaves out groups the latest writes touched, groups pending compaction or clustering, and "
            "partitions outside its filter; hoodied status says why the last plan took fewer).",
            ("table",),
        )
        self.table_metadata_lag_instants = self._gauge(
            "hoodied_table_metadata_lag_instants",
            "Completed data-table instants the metadata table has not applied (0 without one).",
            ("table",),
        )
        self.table_seconds_since_success = self._gauge(
            "hoodied_table_seconds_since_success",
            "Seconds since the table service's newest completed instant (absent while none completed).",
            _TABLE_ACTION,
        )
        self.table_blocked_info = self._gauge(
            "hoodied_table_blocked_info",
            "1 per table and action whose next instant does not run now, labelled with why: paused, "
            "draining, held (a pending restore), cancelled, given_up, cap (the table's job cap), blocked "
            "(another instant must go first).",
            (*_TABLE_ACTION, "reason"),
        )
        self.table_paused = self._gauge(
            "hoodied_table_paused",
            "1 while an operator paused the table or is draining it (hoodied ctl), else 0.",
            ("table",),
        )
        self.table_urgency = self._gauge(
            "hoodied_table_urgency",
            "Urgency of the table's next instant of the action: its priority x (1 + lag) (hoodied.urgency).",
            _TABLE_ACTION,
        )
        self.control_commands = self._counter(
            "hoodied_control_commands_total",
            "Operator commands (hoodied ctl or any replica's API), counted by the replica that polls the "
            "table when it reads them, and those it applied (drained, triggered), by table and command.",
            ("table", "command"),
        )
        self.change_events = self._counter(
            "hoodied_change_events_total",
            "Change events (hoodied.change_events), by source (commit_callback, s3_sqs; any for drops) and "
            "outcome: received; refused or malformed on arrival; then per table announced: table (a watched "
            "one, polled now), discovered (led a discovery root's scan) or no_table; dropped: "
            "not_a_timeline (a bucket event outside any timeline), no_place, queue_full.",
            ("source", "outcome"),
        )
        self.change_event_lag_seconds = self._gauge(
            "hoodied_change_event_lag_seconds",
            "Seconds from a change to its event's arrival, the newest seen per source (an S3 event's "
            "eventTime to its receipt from SQS: the queue's lag).",
            ("source",),
        )
        self.sweep_found_changes = self._counter(
            "hoodied_sweep_found_changes_total",
            "Polls of a table with change_notifications that no event had asked for and that found its "
            "timeline changed: an event lost, late or never sent.",
            ("table",),
        )
        self.tables_owned = self._gauge(
            "hoodied_tables_owned",
            "Tables this replica lists and schedules (hoodied.table_split: one replica per table).",
        )
        self.storage_requests = self._counter(
            "hoodied_storage_requests_total",
            "Requests to a table's storage by this replica, by table, service (poll, or the job's action: "
            "its driver side; the tasks' are the executors') and op (LIST, GET, HEAD, PUT, DELETE).",
            ("table", "service", "op"),
        )

    def _gauge(self, name: str, documentation: str, labels: tuple[str, ...] = ()) -> Gauge:
        gauge = Gauge(name, documentation, labels, registry=self.registry)
        if "table" in labels:
            self._by_table.append((gauge, labels))
            self._state_by_table.append((gauge, labels))
        return gauge

    def _counter(self, name: str, documentation: str, labels: tuple[str, ...] = ()) -> Counter:
        counter = Counter(name, documentation, labels, registry=self.registry)
        if "table" in labels:
            self._by_table.append((counter, labels))
        return counter

    def _histogram(
        self, name: str, documentation: str, buckets: Sequence[float], labels: tuple[str, ...] = ()
    ) -> Histogram:
        histogram = Histogram(name, documentation, labels, buckets=buckets, registry=self.registry)
        if "table" in labels:  # what this replica did on a table: kept while it is watched, as counters are
            self._by_table.append((histogram, labels))
        return histogram

    def set_pending(self, table: str, action: str, count: int, oldest_age_seconds: float | None) -> None:
        """Record the pending instants of ``action`` on ``table`` and the age of the oldest (None or 0 when
        none is pending)."""
        self.pending_instants.labels(table, action).set(count)
        self.oldest_pending_age_seconds.labels(table, action).set(oldest_age_seconds or 0.0)

    def set_backlog(self, table: str, backlog: Backlog, now: dt.datetime) -> None:
        """Record a table's backlog; ``now`` is naive, in the table's timeline zone. The figures are set only
        when ``backlog`` is not the one set last for the table (a poll of an unchanged timeline keeps it),
        the seconds since each service's last success always (they grow with time alone)."""
        if self._backlogs.get(table) is not backlog:
            self._backlogs[table] = backlog
            self.table_delta_commits_since_compaction.labels(table).set(
                backlog.delta_commits_since_compaction
            )
            self.table_log_bytes_since_compaction.labels(table).set(backlog.log_bytes_since_compaction)
            self.table_commits_since_clean.labels(table).set(backlog.commits_since_clean)
            self.table_small_files.labels(table).set(backlog.small_files)
            self.table_metadata_lag_instants.labels(table).set(backlog.metadata_lag_instants)
        for action, seconds in backlog.seconds_since_success(now).items():
            self.table_seconds_since_success.labels(table, action).set(seconds)

    def set_blocked(self, table: str, blocked: Mapping[str, str], paused: bool) -> None:
        """Record why each action of ``table`` is held back (action -> reason code), replacing the last
        (a table's own series only: a poll over thousands of tables stays linear)."""
        wanted: set[tuple[str, ...]] = {(table, action, reason) for action, reason in blocked.items()}
        self._replace(self.table_blocked_info, self._blocked_series, table, wanted)
        self.table_paused.labels(table).set(1 if paused else 0)

    def set_urgency(self, table: str, urgencies: Mapping[str, float]) -> None:
        """Record the urgency of each action of ``table`` with pending work, replacing the last."""
        self._replace(self.table_urgency, self._urgency_series, table, {(table, a) for a in urgencies})
        for action, value in urgencies.items():
            self.table_urgency.labels(table, action).set(value)

    @staticmethod
    def _replace(
        metric: Gauge, series: dict[str, set[tuple[str, ...]]], table: str, wanted: set[tuple[str, ...]]
    ) -> None:
        """Keep exactly the ``wanted`` label values of ``table`` in ``metric`` (1 each, until set)."""
        had = series.get(table, set())
        for labelvalues in had - wanted:
            metric.remove(*labelvalues)
        for labelvalues in wanted - had:
            metric.labels(*labelvalues).set(1)
        if wanted:
            series[table] = wanted
        else:
            series.pop(table, None)

    def count_from_zero(self, table: str, actions: Iterable[str]) -> None:
        """Make ``table``'s job counters of each of ``actions`` exist at 0 (started, succeeded, and failed of
        the kinds :data:`FAILURES_FROM_ZERO`), before any job ran: ``increase()`` over a series that appears
        at its first failure sees nothing, so an alert on it would miss that failure (issue 35). The other
        failure kinds appear when they happen (each kind on each table on each action would multiply a
        fleet's series)."""
        wanted = frozenset(actions)
        if self._counted.get(table) == wanted:
            return
        for action in wanted - self._counted.get(table, frozenset()):
            self.jobs_started.labels(table, action)
            self.jobs_succeeded.labels(table, action)
            for kind in FAILURES_FROM_ZERO:
                self.jobs_failed.labels(table, action, kind)
        self._counted[table] = wanted

    def forget_table(self, table: str) -> None:
        """Remove every series of ``table`` (a table no longer watched), leaving other tables' series."""
        self._forget({table}, self._by_table)
        self._counted.pop(table, None)

    def forget_table_state(self, *tables: str) -> None:
        """Remove the gauges of ``tables`` (what each is like now: pending, backlog, interval...), keeping
        the counters of what this replica did on them: another replica lists them now
        (:mod:`hoodied.table_split`), and exports their state; a counter that vanished would read as a reset.
        One walk over the series for all of them (a replica handing 650 tables over walked them 650 times)."""
        self._forget(set(tables), self._state_by_table)

    def _forget(
        self, tables: set[str], metrics: Sequence[tuple[Gauge | Counter | Histogram, tuple[str, ...]]]
    ) -> None:
        for table in tables:
            self._blocked_series.pop(table, None)
            self._urgency_series.pop(table, None)
            self._backlogs.pop(table, None)
        for metric, names in metrics:
            position = names.index("table")
            for family in metric.collect():
                values = {tuple(s.labels[n] for n in names) for s in family.samples}
                for labelvalues in values:
                    if labelvalues[position] in tables:
                        metric.remove(*labelvalues)

    def job_started(self, table: str, action: str) -> None:
        """A job of ``action`` on ``table`` started."""
        self.jobs_started.labels(table, action).inc()
        self.jobs_running.labels(action).inc()

    def job_finished(
        self,
        table: str,
        action: str,
        seconds: float,
        *,
        ok: bool,
        kind: str = "",
        records: int = 0,
        bytes_written: int = 0,
        files_deleted: int = 0,
    ) -> None:
        """A job started with :meth:`job_started` ended after ``seconds``: committed (``ok``) or not, then
        ``kind`` (one of :data:`FAILURE_KINDS`) says how it failed. The counts are what the job wrote or
        deleted (a failed job's too: its files were written, then rolled back).

        Raises ValueError for a missing or unknown ``kind`` on failure, or a ``kind`` given on success."""
        if ok and kind:
            raise ValueError(f"job_finished: kind {kind!r} given for a job that succeeded")
        if not ok and kind not in FAILURE_KINDS:
            raise ValueError(f"job_finished: failure kind {kind!r} is not one of {sorted(FAILURE_KINDS)}")
        self.jobs_running.labels(action).dec()
        self.job_duration_seconds.labels(table, action).observe(seconds)
        if ok:
            self.jobs_succeeded.labels(table, action).inc()
        else:
            self.jobs_failed.labels(table, action, kind).inc()
        if records:
            self.records_written.labels(table, action).inc(records)
        if bytes_written:
            self.bytes_written.labels(table, action).inc(bytes_written)
        if files_deleted:
            self.files_deleted.labels(table, action).inc(files_deleted)

    def set_zookeeper_state(self, state: str | None) -> None:
        """Record the ZooKeeper connection state (kazoo's ``CONNECTED``, ``SUSPENDED``, ``LOST``, or
        ``CLOSED``; any case), or None when the daemon runs without ZooKeeper (``EMBEDDED``).

        Raises ValueError for any other state."""
        name = "EMBEDDED" if state is None else state.upper()
        if name not in ZOOKEEPER_STATES or (state is not None and name == "EMBEDDED"):
            raise ValueError(
                f"unknown ZooKeeper state {state!r}; expected one of {ZOOKEEPER_STATES[:4]} or None"
            )
        self.zookeeper_state.state(name)
        self.zookeeper_connected.set(1 if name == "CONNECTED" else 0)

    def count_requests(self, table: str, service: str, counts: Mapping[str, int]) -> None:
        """Add ``counts`` (requests by op) made for ``service`` on ``table``."""
        for op, n in counts.items():
            if n:
                self.storage_requests.labels(table, service, op).inc(n)

    def observe_lock_wait(self, table: str, seconds: float) -> None:
        """``table``'s lock was acquired (or given up on) after waiting ``seconds``."""
        self.lock_wait_seconds.labels(table).observe(seconds)

    def observe_lock_hold(self, table: str, seconds: float) -> None:
        """``table``'s lock was released after being held ``seconds``."""
        self.lock_hold_seconds.labels(table).observe(seconds)

    def poll_finished(self, seconds: float, *, ok: bool, now: float) -> None:
        """A supervisor poll over every table ended at ``now`` (Unix time) after ``seconds``."""
        self.poll_duration_seconds.observe(seconds)
        if ok:
            self.last_successful_poll_timestamp_seconds.set(now)

    def table_poll_finished(self, table: str, seconds: float, *, ok: bool) -> None:
        """The poll of one table ended after ``seconds``; a failure counts against the table."""
        self.table_poll_seconds.observe(seconds)
        if not ok:
            self.table_poll_failures.labels(table).inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (``prometheus_client.CONTENT_TYPE_LATEST``), without the
        ``<name>_created`` series prometheus_client adds to counters and histograms: a gauge per labelled
        child that no chart or alert reads, doubling the series a fleet exports (issue 35). Left out here, not
        by prometheus_client's process-wide switch, so an embedding process keeps its own metrics as they
        are."""
        return generate_latest(_WithoutCreated(self.registry))


class _WithoutCreated:
    """A collector yielding ``registry``'s families without their ``_created`` samples."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self.registry.collect():
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


__all__ = [
    "FAILURES_FROM_ZERO",
    "FAILURE_KINDS",
    "JOB_DURATION_BUCKETS",
    "LOCK_WAIT_BUCKETS",
    "METRIC_NAMES",
    "POLL_DURATION_BUCKETS",
    "SAMPLE_NAMES",
    "TABLE_POLL_BUCKETS",
    "ZOOKEEPER_STATES",
    "Metrics",
]
