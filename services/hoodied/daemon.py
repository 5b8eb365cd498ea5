"""``hoodied run``: the long-running daemon, and ``hoodied status``.

Start-up: logging, metrics, ZooKeeper (or the embedded coordination, with a warning that several replicas
need ZooKeeper), the Spark session, the health server, then the supervisor: its poll runs on an APScheduler
interval (:func:`start_polling`: one poll at a time, a late poll coalesced, the replica's start offset by its
jitter), and its workers run the jobs.

Shutdown (SIGTERM or SIGINT): stop claiming; running jobs get ``jobs.shutdown_grace`` seconds to finish,
then their Spark job groups are cancelled (they stay retryable: rolled back to requested, or inflight for the
next claim holder); claims are released, ZooKeeper and Spark stopped; the exit status is 0. A second signal
exits at once (status 1). Signals are acted on by a thread of their own (:mod:`hoodied.signals`).

``--once``: one poll, run what it found (scheduling included), exit. For cron-style use and tests.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import random
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from hoodie.backlog import measure_backlog
from hoodie.failpoints import arm_for_children
from hoodie.registry import SERVICE_NAMES, SERVICES
from hoodie.storage.redact import redact_uri
from hoodie.table import Table
from hoodie.timeline.instant import State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodied.api import Api
from hoodied.azure_events import AzureQueueListener, AzureQueueRefused, AzureQueueSource
from hoodied.change_events import ChangeEvents
from hoodied.commit_callback import CommitCallback
from hoodied.config import DaemonConfig, TableSettings
from hoodied.config_reload import ConfigFile
from hoodied.control import ControlStore, FileControlStore, ZooKeeperControlStore, default_state_dir
from hoodied.coordination import (
    Coordination,
    EmbeddedCoordination,
    ZooKeeperCoordination,
    claim_name,
    identity,
)
from hoodied.explain import RunnerView, explain
from hoodied.health import HealthServer, Heartbeats
from hoodied.logs import setup_logging
from hoodied.metrics import Metrics
from hoodied.ownership import decide
from hoodied.queue_listener import QueueListener
from hoodied.s3_events import SqsListener, SqsSource
from hoodied.signals import StopSignals
from hoodied.spark import SparkConfig, spark_session
from hoodied.status import StatusQuery, select, summarize, table_status, who
from hoodied.supervisor import Supervisor
from hoodied.urgency import urgency
from hoodied.work import WatchedTable, read_last_results
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)


def _zookeeper(config: DaemonConfig, metrics: Metrics | None, heartbeats: Heartbeats | None) -> ZooKeeper:
    assert config.zookeeper is not None
    z = config.zookeeper
    zk = ZooKeeper(
        ZooKeeperConfig(
            connect=z.connect,
            base_path=z.base_path,
            session_timeout=z.session_timeout,
            connection_timeout=z.connection_timeout,
            auth=z.auth,
            acl=z.acl,
        ),
        identity(config.replica),
    )

    seen: list[str] = []

    def on_state(state: str) -> None:
        if seen and seen[-1] == state:
            return
        seen.append(state)
        if metrics is not None:
            metrics.set_zookeeper_state(state)
        if heartbeats is not None:
            heartbeats.zookeeper_state = state
        log = logger.info if state == "CONNECTED" else logger.warning
        log("ZooKeeper session %s", state.lower())

    zk.add_listener(on_state)
    zk.start()
    on_state(zk.state)
    return zk


def control_store(config: DaemonConfig, zookeeper: ZooKeeper | None) -> ControlStore:
    """Where the operators' commands live: ZooKeeper with one, else files under ``admin.state_dir``."""
    if zookeeper is not None:
        return ZooKeeperControlStore(zookeeper)
    return FileControlStore(config.admin.state_dir or default_state_dir())


#: One FAIR pool per service.
POOLS = SERVICE_NAMES


def spark_config(config: DaemonConfig, work_dir: str | None = None) -> SparkConfig:
    """The Spark session's settings; with ``fair_pools``, FAIR scheduling with one pool per action (so a
    long clustering does not hold back cleans and compactions), declared in ``work_dir``."""
    conf = dict(config.spark.conf)
    if config.spark.fair_pools:
        conf.setdefault("spark.scheduler.mode", "FAIR")
        if work_dir is not None and "spark.scheduler.allocation.file" not in conf:
            conf["spark.scheduler.allocation.file"] = _write_pools(work_dir)
    return SparkConfig(
        master=config.spark.master,
        app_name=f"hoodied-{config.replica}",
        conf=conf,
        ship_code=config.spark.ship_code,
    )


def _write_pools(work_dir: str) -> str:
    pools = "".join(
        f'  <pool name="{p}"><schedulingMode>FIFO</schedulingMode><weight>1</weight>'
        f"<minShare>0</minShare></pool>\n"
        for p in POOLS
    )
    path = os.path.join(work_dir, "fairscheduler.xml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f'<?xml version="1.0"?>\n<allocations>\n{pools}</allocations>\n')
    return path


class Daemon:
    """One replica: the pieces above wired together (``run`` blocks until shutdown)."""

    def __init__(self, config: DaemonConfig, *, spark: SparkSession | None = None) -> None:
        """``spark``: a session to run the jobs in (the caller's, left running); default: one of our own."""
        self.config = config
        self._own_spark = spark is None
        self.metrics = Metrics(replica=config.replica)
        self.heartbeats = Heartbeats(started_at=time.time())
        self.shutdown = threading.Event()
        self.zookeeper: ZooKeeper | None = None
        self.health: HealthServer | None = None
        self.admin: HealthServer | None = None  # the admin port's server (admin.port)
        self._spark: SparkSession | None = spark
        self._spark_lock = threading.Lock()
        self._work_dir: str | None = None
        self.supervisor: Supervisor | None = None
        #: The file the configuration came from, read again on SIGHUP and when it changes (none for a
        #: configuration given as text: tests, embedding).
        self.config_file = ConfigFile(config.source) if os.path.isfile(config.source) else None
        self._restart_needed: tuple[str, ...] = ()
        self._signals = StopSignals(
            self._on_stop_signal, on_reload=self.config_file.request if self.config_file else None
        )
        self._polling = threading.Lock()  # held by the poll under way (see _drain)
        #: Change events (commit callbacks, S3 event queues): a table they name is polled at once.
        self.events = ChangeEvents()
        self._listeners: list[QueueListener] = []

    def spark(self) -> SparkSession:
        with self._spark_lock:
            if self._spark is None:
                self._work_dir = self._work_dir or tempfile.mkdtemp(prefix="hoodied-")
                self._spark = spark_session(spark_config(self.config, self._work_dir))
            self.heartbeats.spark_up = True
            self.metrics.spark_up.set(1)
            return self._spark

    def _coordination(self) -> Coordination:
        timeout = self.config.jobs.lock_timeout
        if self.config.zookeeper is None:
            logger.warning(
                "no ZooKeeper configured: embedded mode, one replica with file claims and the file-system "
                "table lock. Several replicas (and Hudi writers on other machines) need zookeeper.connect."
            )
            self.metrics.set_zookeeper_state(None)
            return EmbeddedCoordination(self.metrics, timeout)
        self.zookeeper = _zookeeper(self.config, self.metrics, self.heartbeats)
        return ZooKeeperCoordination(self.zookeeper, self.config.zookeeper, self.metrics, timeout)

    def status(self, query: StatusQuery | None = None) -> dict[str, object]:
        """What ``/status``, ``/api/v1`` and the status page serve: this replica's view of the tables
        ``query`` selects (:mod:`hoodied.status`: by default the first :data:`~hoodied.status.DEFAULT_LIMIT`
        by name), with counts over every table (``summary``), and where the next page starts (``next``: the
        query string, or None). The API adds the histories it shows (:mod:`hoodied.api`)."""
        query = query or StatusQuery()
        supervisor = self.supervisor
        tables = supervisor.tables() if supervisor else []
        chosen, after = select(tables, query)
        holders: dict[str, Mapping[str, object]] = {}
        if supervisor is not None:
            for t in chosen:
                if not t.pending or not any(t.pending.values()):
                    continue
                try:
                    claims = supervisor.coordination.holders(t.storage, t.key)
                except Exception:
                    continue
                holders.update({f"{t.key}/{name}": h for name, h in claims.items()})
        return {
            "replica": self.config.replica,
            "zookeeper": self.heartbeats.zookeeper_state or "embedded",
            "generated_at": time.time(),
            "running": [
                {
                    "table": i.table.name,
                    "action": i.service,
                    "instant": i.instant.time,
                    "replica": self.config.replica,
                }
                for i in (supervisor.running if supervisor else [])
            ],
            "summary": summarize(tables),
            "tables": {t.name: table_status(t, holders) for t in chosen},
            "next": query.to_query(after) if after is not None else None,
            # Roots that do not exist or cannot be read, and the paths merged into one table, said here as
            # well as in the log (hoodied.discovery).
            "discovery": supervisor.discovery() if supervisor else [],
            "config": {
                "source": self.config.source,
                "error": self.config_file.error if self.config_file else None,
                "restart_needed": list(self._restart_needed),
            },
        }

    def run(self, *, once: bool = False, handle_signals: bool = True) -> int:
        """Run until SIGTERM/SIGINT (or :attr:`shutdown` is set), or one pass with ``once``; returns the exit
        status: 0, or with ``once`` 1 when a table could not be polled or a job failed (definitely, with an
        unknown outcome, or on damaged data). ``handle_signals=False`` leaves the process's signal handlers
        alone (embedding, tests)."""
        config = self.config
        logger.info("hoodied replica %s starting (%s)", config.replica, config.source)
        for warning in config.warnings:
            logger.warning("%s: %s", config.source, warning)
        coordination = self._coordination()
        self.spark()
        if handle_signals:  # after Spark, whose context puts a SIGINT handler of its own in place
            self._signals.install()
        store = control_store(config, self.zookeeper)
        self.supervisor = Supervisor(
            config, coordination, self.metrics, self.heartbeats, self.spark, control=store, events=self.events
        )
        changes_at: str | None = None
        if config.admin.port is not None:  # first: the metrics port's refusals name where it listens
            admin = self._server(store, config.admin.host, config.admin.port, changes_at=None)
            admin.start()
            self.admin = admin
            changes_at = admin.url
            logger.info("taking the API's changes on %s (admin.port)", admin.url)
        if config.metrics.port is not None:
            health = self._server(store, config.metrics.host, config.metrics.port, changes_at=changes_at)
            health.start()
            # Published once serving: other threads (the demo, tests) read its URL as soon as it is set.
            self.health = health
            logger.info(
                "serving on %s: /metrics, /healthz, /readyz, /status, /api/v1 and the status page /%s",
                health.url,
                "" if changes_at is None else " (changes on the admin port)",
            )
        try:
            if once:
                self.supervisor.poll(wait_all=True)
                self.supervisor.start_workers(until_idle=True)
                while not self.supervisor.wait_idle(timeout=0.5):
                    if self.shutdown.is_set():
                        break
                if self.shutdown.is_set():
                    self._drain()
                failures = self.supervisor.failures
                for failure in failures:
                    logger.error("this pass: %s", failure)
                return 1 if failures else 0
            self.supervisor.start_workers()
            self._listeners = [
                SqsListener(SqsSource(q.queue_url, q.region, q.endpoint), self.events).start()
                for q in config.notifications.s3_sqs
            ]
            for q in config.notifications.azure_queues:
                try:
                    listener = AzureQueueListener(AzureQueueSource(q.queue_url, q.idle_wait), self.events)
                except AzureQueueRefused as e:  # its tables are swept meanwhile: the daemon goes on
                    logger.error("not reading the Azure event queue: %s", e)
                    continue
                self._listeners.append(listener.start())
            scheduler = start_polling(self._poll, config.poll_interval, config.poll_jitter)
            while not self.shutdown.is_set():
                # A change event polls now (its table is due at once), between the scheduled polls: a poll
                # under way is waited for, and takes the events at its start.
                if self.events.wait(0.5) and not self.shutdown.is_set():
                    self._poll()
            scheduler.shutdown(wait=False)
            self._drain()
            return 0
        finally:
            self._close()

    def _poll(self) -> None:
        assert self.supervisor is not None
        with self._polling:
            if self.shutdown.is_set():
                return
            try:
                self._reload_config()
                self.supervisor.poll()
            except Exception as e:  # the schedule must survive anything a poll throws
                self.heartbeats.last_error = f"{type(e).__name__}: {e}"
                logger.exception("poll failed")

    def _server(self, store: ControlStore, host: str, port: int, *, changes_at: str | None) -> HealthServer:
        """The HTTP server of the metrics port or of the admin port: /metrics, the probes, /status, the
        page and the API, which takes the control commands unless ``changes_at`` names where they go."""
        config = self.config
        assert self.supervisor is not None
        return HealthServer(
            self.metrics,
            self.heartbeats,
            config.poll_interval,
            status_fn=self.status,
            host=host,
            port=port,
            read_timeout=config.metrics.read_timeout,
            max_connections=config.metrics.max_connections,
            api=Api(
                replica=config.replica,
                status=self.status,
                tables=self.supervisor.tables,
                store=store,
                token_file=config.admin.token_file,
                metrics=self.metrics,
                history_keep=config.admin.history_keep,
                commit_callback=CommitCallback(self.events, config.notifications.commit_callback_key_file),
                changes_at=changes_at,
            ),
        )

    def _reload_config(self) -> None:
        """Read the configuration file again when SIGHUP asked for it or it changed, and watch its tables
        from this poll on (:mod:`hoodied.config_reload`); a bad file leaves the old one in force."""
        if self.config_file is None or not self.config_file.due():
            return
        assert self.supervisor is not None
        result = self.config_file.reload(self.config)
        if result.error is not None:
            logger.error("configuration not reloaded, the old one stays in force: %s", result.error)
            self.metrics.config_reloads.labels("refused").inc()
            self.metrics.config_reload_ok.set(0)
            return
        self.metrics.config_reload_ok.set(1)
        if result.restart_needed and result.restart_needed != self._restart_needed:
            logger.warning(
                "configuration %s: %s changed, which applies only at a restart",
                self.config_file.path,
                ", ".join(result.restart_needed),
            )
        self._restart_needed = result.restart_needed
        if not result.changed:
            return
        self.config = result.config
        self.supervisor.reconfigure(result.config)
        self.metrics.config_reloads.labels("applied").inc()
        logger.info(
            "configuration %s reloaded: %d table entries, %d discovery roots",
            self.config_file.path,
            len(result.config.tables),
            len(result.config.discover),
        )

    def _drain(self) -> None:
        assert self.supervisor is not None
        self.heartbeats.draining = True
        grace = self.config.jobs.shutdown_grace
        running = self.supervisor.running
        logger.info("shutting down: %d job(s) running, waiting up to %.0f s", len(running), grace)
        began = time.monotonic()
        if self.supervisor.drain(grace):
            logger.info("every job ended; stopping")
        else:
            logger.warning("cancelled the jobs still running after %.0f s; they stay retryable", grace)
        # A poll under way may be scheduling under the table lock: ZooKeeper (and with it the lock) is closed
        # only once it ended, or the plan could be written by a process that no longer holds the lock.
        # A table's poll that overran its deadline goes on after its pass: waited for as well.
        if self._polling.acquire(timeout=max(1.0, grace - (time.monotonic() - began))):
            self._polling.release()
            if not self.supervisor.wait_polls(max(1.0, grace - (time.monotonic() - began))):
                logger.warning(
                    "a table's poll still under way after the shutdown grace; closing ZooKeeper all the same"
                )
        else:
            logger.warning("a poll still under way after the shutdown grace; closing ZooKeeper all the same")

    def _close(self) -> None:
        for listener in self._listeners:
            listener.stop(timeout=1.0)
        self._signals.restore()
        if self.health is not None:
            self.health.stop()
        if self.admin is not None:
            self.admin.stop()
        if self.zookeeper is not None:
            self.zookeeper.stop()
        with self._spark_lock:
            if self._spark is not None and self._own_spark:
                try:
                    self._spark.stop()
                except Exception as e:
                    logger.warning("stopping Spark: %s", e)
                self._spark = None
        if self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
        logger.info("hoodied replica %s stopped", self.config.replica)

    def stop(self) -> None:
        """Begin the shutdown: no new claims; :meth:`run` drains and returns."""
        if self.supervisor is not None:
            self.supervisor.stop_claiming()
        self.shutdown.set()

    def _on_stop_signal(self, signum: int, count: int) -> None:
        """The first SIGTERM/SIGINT drains (:meth:`stop`), the second exits at once. Called on the signal
        thread of :mod:`hoodied.signals`, never inside a signal handler."""
        name = signal.Signals(signum).name
        if count == 1:
            logger.info("%s received: draining", name)
            self.stop()
            return
        logger.warning("second %s: exiting now", name)
        for handler in logging.getLogger().handlers:
            with contextlib.suppress(Exception):
                handler.flush()
        os._exit(1)


def start_polling(poll: Callable[[], None], interval: float, jitter: float) -> BackgroundScheduler:
    """Run ``poll`` on a thread of its own after this replica's offset, then every ``interval`` seconds, one
    at a time (a run due while a poll still runs is skipped: a poll that overruns is followed at the next
    multiple of the interval); stop it with ``shutdown()``.

    The offset is drawn once, up to ``jitter`` x ``interval``: replicas started together spread out, while
    the polls of one stay exactly ``interval`` apart (a jitter drawn per poll adds up, and stretches the wait
    of an instant written just after its table was polled to the interval plus the jitter)."""
    offset = dt.timedelta(seconds=random.uniform(0.0, interval * jitter))
    scheduler = BackgroundScheduler(daemon=True)
    scheduler.add_job(
        poll,
        IntervalTrigger(seconds=interval),
        id="poll",
        max_instances=1,
        coalesce=True,
        next_run_time=dt.datetime.now(dt.UTC) + offset,
    )
    scheduler.start()
    return scheduler


def status_report(config: DaemonConfig) -> list[dict[str, object]]:
    """``hoodied status``: per table, its pending instants, who holds each claim, the operators' control
    state, the backlog, why each service's next instant is or is not due, and the last results any replica
    recorded. Reads the tables and ZooKeeper; changes nothing."""
    metrics = Metrics(replica=config.replica)
    heartbeats = Heartbeats(started_at=time.time())
    zk = _zookeeper(config, None, None) if config.zookeeper is not None else None
    try:
        coordination: Coordination
        if zk is not None:
            assert config.zookeeper is not None
            coordination = ZooKeeperCoordination(zk, config.zookeeper, metrics)
        else:
            coordination = EmbeddedCoordination(metrics)
        store = control_store(config, zk)
        supervisor = Supervisor(config, coordination, metrics, heartbeats, _no_spark)
        supervisor.refresh_tables()
        try:
            controls = store.read_all()
        except Exception as e:
            logger.warning("cannot read the control documents: %s", e)
            controls = {}
        out: list[dict[str, object]] = []
        for t in supervisor.tables():
            entry: dict[str, object] = {"table": t.name, "uri": redact_uri(t.uri), "identity": t.identity}
            try:
                table = Table.load(t.storage)
                entry["version"] = table.config.table_version
                entry["type"] = table.config.table_type.value
                entry["pending"] = [
                    {"instant": i.time, "action": i.action, "state": i.state.name.lower()}
                    for i in table.timeline.pending()
                ]
                claims = {k: dict(v) for k, v in coordination.holders(t.storage, t.key).items()}
                entry["claims"] = claims
                inflight = _inflight_owners(table, t.settings, claims)
                entry["inflight"] = inflight
                entry["last_results"] = read_last_results(t.storage)
                t.control = controls.get(t.key, t.control)
                entry["control"] = t.control.to_json()
                props = {**table.config.props, **t.settings.hoodie}
                t.backlog = measure_backlog(table, props, t.backlog_cache)
                entry["backlog"] = t.backlog.to_json(InstantTimeGenerator().now_in_zone(table.config))
                entry["next"] = _explain_offline(t, table, props, claims, inflight)
            except Exception as e:
                entry["error"] = f"{type(e).__name__}: {e}"
            out.append(entry)
        return out
    finally:
        if zk is not None:
            zk.stop()


def _inflight_owners(table: Table, settings: TableSettings, claims: Mapping[str, object]) -> dict[str, str]:
    """Per inflight table-service instant nobody claims (``<service>-<instant>``): who started it, and
    whether hoodied takes it over (:mod:`hoodied.ownership`)."""
    props = {**table.config.props, **settings.hoodie}
    out: dict[str, str] = {}
    for service in SERVICES:
        if not service.has_instants or service.name not in settings.services:
            continue
        for instant in service.pending(table):
            name = claim_name(service.name, instant.time)
            if instant.state is not State.INFLIGHT or name in claims:
                continue
            verdict = decide(table, service.name, instant, props, settings.takeover_foreign_after)
            out[name] = ("taken over: " if verdict.allowed else "left alone: ") + verdict.reason
    return out


def _explain_offline(
    t: WatchedTable,
    table: Table,
    props: Mapping[str, str],
    claims: Mapping[str, object],
    inflight: Mapping[str, str],
) -> dict[str, str]:
    """Why each service's next instant is or is not due, as a replica would say (:mod:`hoodied.explain`),
    from the table and the claims alone: a claimed instant runs on its holder, and scheduling is previewed
    by the steps a replica's takes (:meth:`~hoodie.table_service.TableService.preview`: trigger, then plan),
    so both say the same."""
    t.pending = {s.name: s.pending(table) for s in SERVICES if s.has_instants}
    for service in SERVICES:
        if service.name in t.settings.schedule:
            try:
                t.schedule_reasons[service.name] = service.preview(table, props) or "scheduled by hoodied"
            except Exception as e:
                t.schedule_reasons[service.name] = f"cannot evaluate the trigger: {type(e).__name__}: {e}"
    t.foreign = {name.split("-", 1)[1]: why for name, why in inflight.items() if why.startswith("left alone")}
    t.urgency = {
        s: urgency(s, t.backlog, t.settings.priority)
        for s, instants in t.pending.items()
        if instants and s in t.settings.services
    }
    view = RunnerView(
        running=lambda w, s, i: claim_name(s, i) in claims,
        given_up=lambda w, s, i: None,
        at_cap=lambda w: False,
    )
    out = explain(t, view).next
    for name, instants in t.pending.items():
        claimed = claims.get(claim_name(name, instants[0].time)) if instants else None
        if name in out and claimed is not None:
            out[name] = f"{instants[0].time} running on {who(claimed)}"
    return out


def _no_spark() -> SparkSession:
    raise RuntimeError("hoodied status runs no jobs")


def format_status(report: list[dict[str, object]]) -> str:
    lines: list[str] = []
    for entry in report:
        head = f"{entry['table']}  {entry['uri']}"
        if "error" in entry:
            lines.append(f"{head}\n  error: {entry['error']}")
            continue
        lines.append(f"{head}  (v{entry.get('version')}, {entry.get('type')})")
        claims = entry.get("claims")
        claims = claims if isinstance(claims, Mapping) else {}
        pending = entry.get("pending")
        for p in pending if isinstance(pending, list) else []:
            name = f"{_service_of(p['action'])}-{p['instant']}"
            holder = claims.get(name)
            owners = entry.get("inflight")
            owner = owners.get(name) if isinstance(owners, Mapping) else None
            by = f"claimed by {who(holder)}" if holder else f"unclaimed; {owner}" if owner else "unclaimed"
            lines.append(f"  pending {p['action']:<13} {p['instant']}  {p['state']:<9} {by}")
        if not pending:
            lines.append("  nothing pending")
        control = entry.get("control")
        if isinstance(control, Mapping) and control.get("state") != "active":
            note = control.get("note")
            noted = f" by {note.get('by')}: {note.get('reason')}" if isinstance(note, Mapping) else ""
            lines.append(f"  {control.get('state')}{noted}")
        backlog = entry.get("backlog")
        if isinstance(backlog, Mapping):
            lines.append(
                f"  backlog: {backlog.get('delta_commits_since_compaction')} delta commit(s) and "
                f"{backlog.get('log_bytes_since_compaction')} log bytes since compaction, "
                f"{backlog.get('commits_since_clean')} commit(s) since clean, "
                f"{backlog.get('small_files')} small file(s), "
                f"{backlog.get('active_timeline_instants')} active instants, metadata lag "
                f"{backlog.get('metadata_lag_instants')}"
            )
        nxt = entry.get("next")
        for service, why in nxt.items() if isinstance(nxt, Mapping) else []:
            lines.append(f"  next {service:<11} {why}")
        results = entry.get("last_results")
        for service, r in results.items() if isinstance(results, Mapping) else []:
            if isinstance(r, Mapping):
                when = time.strftime(
                    "%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(r.get("finished_at_ms", 0)) / 1000)
                )
                lines.append(
                    f"  last {service:<11} {r.get('instant')}  {r.get('kind')} on {r.get('replica')} "
                    f"at {when}: {r.get('message')}"
                )
    return "\n".join(lines)


def _service_of(action: str) -> str:
    return {"replacecommit": "clustering"}.get(action, action)


def status_json(report: list[dict[str, object]]) -> str:
    return json.dumps(report, indent=2, sort_keys=True, default=str)


def main_run(config_path: str, *, once: bool) -> int:
    arm_for_children()  # tests only: a crash point reached in a Spark task kills this replica, as a lost pod
    config = DaemonConfig.load(config_path)
    setup_logging(config.logging.level, config.logging.format)
    return Daemon(config).run(once=once)


__all__ = ["Daemon", "format_status", "main_run", "spark_config", "status_json", "status_report"]
