"""The daemon's configuration: one YAML file, read and validated once at start-up.

Every key, its default and its meaning (the README's configuration reference is this list)::

    replica: NAME                 # name in claims, logs, metrics (default: $HOODIED_REPLICA, or host name)
    poll_interval: 30s            # how often each table's timeline is polled (seconds, or 500ms, 30s, 5m, 1h)
    poll_interval_max: 10 x poll_interval   # a quiet table's interval grows up to this (5m by default;
                                  # >= poll_interval; equal: every table at every poll): hoodied.poll_interval
    poll_jitter: 0.1              # polls start up to this fraction of the interval late (drawn once)
    reschedule_interval: 5m       # scheduling is re-evaluated this often even when nothing changed
    poll_concurrency: 16          # tables polled at once (each a few store requests): hoodied.table_polls
    poll_deadline: null           # a table's poll running longer is left to end on its own while the
                                  # others go on (null: poll_interval): hoodied.table_polls
    zookeeper:                    # absent: embedded mode (one replica, file-system lock, local tables only)
      connect: host:2181[,host:2181][/chroot]
      base_path: /hoodied         # claims live under <base_path>/claims
      session_timeout: 30s        # the claims' heartbeat: a dead replica's claims vanish after this
      connection_timeout: 15s
      auth: [{scheme: digest, credential: "user:password"}]
      acl: open                   # open | creator (only the authenticated identity may touch our nodes)
      lock_base_path: /hudi/locks # Hudi's hoodie.write.lock.zookeeper.base_path, unless a table sets it
    spark:
      master: local[*]
      conf: {spark.executor.memory: 4g}
      max_concurrent_jobs: 2      # jobs running at once in this replica
      fair_pools: true            # spark.scheduler.mode=FAIR, one pool per action
      ship_code: auto             # zip hoodie+hoodied to executors: auto (non-local masters) | always | never
      sizing:                     # jobs sized from their plans' bytes (hoodied.job_sizing)
        driver_max_bytes: 0       # plans reading at most this run on the driver's threads (0: never)
        executor_python_memory: 0 # an executor's Python memory, for sizing (0: spark.executor.pyspark.memory)
        arrow_expansion: 4        # Arrow bytes per stored byte, for a task's memory estimate
        memory_factor: 3          # a task's peak memory / its largest slice's Arrow size
        max_task_cpus: 4          # cap of spark.task.cpus a job asks for to fit executors' Python memory
    metrics:
      host: 0.0.0.0               # /metrics, /healthz, /readyz, /status (every interface: probes, Prometheus)
      port: 9464                  # 0: a free port (logged); null: no HTTP server
      read_timeout: 10s           # a connection has this long to send its request, then is cut off
      max_connections: 32         # connections served at once; more are answered 503
      zero_series_max_tables: 2000  # job counters exist at 0 from the first poll for fleets up to this
    logging:
      level: INFO
      format: text                # text | json
    jobs:
      max_attempts: 5             # a failing instant is retried this often, then given up until restart
      backoff: 30s                # first retry delay, doubling per failure ...
      backoff_max: 30m            # ... up to this
      takeover_grace: 30s         # an inflight instant nobody claims is taken over after this long
      late_request_horizon: 15m   # a held request to the store lands no later than this (S3/Azure signing)
      shutdown_grace: 2m          # on SIGTERM, running jobs get this long before they are cancelled
      lock_timeout: 60s           # table-lock acquire wait (Hudi's default)
    admin:                        # the control plane (hoodied ctl, /api/v1): hoodied.control
      token_file: null            # file holding the bearer token mutating API calls need (a mounted
                                  # Kubernetes secret; re-read at each call); null: the API only reads
      state_dir: ~/.local/state/hoodied   # embedded mode: where the control documents live (ZooKeeper
                                  # keeps them under <base_path>/control otherwise)
      history_keep: 500           # records kept in each table's history (.hoodie/.aux/hoodied/history)
      port: null                  # null: changes are taken on the metrics port; a port: only there, served
      host: 127.0.0.1             # on this address (the pod's IP to reach it from other pods; 0: a free port)
    notifications:                # change events: a table is read when one names it (hoodied.change_events)
      commit_callback_key_file: null  # file holding the key Hudi writers' commit callback must carry
                                  # (hoodie.write.commit.callback.http.api.key; POST /api/v1/commits on
                                  # metrics.port); null: callbacks refused
      s3_sqs:                     # S3 Event Notifications of the tables' buckets, delivered to SQS queues
        - queue_url: https://sqs.us-east-1.amazonaws.com/123456789012/hudi-timelines
          region: us-east-1       # default: the environment's
          endpoint: null          # an S3-compatible store's own queue service
      azure_queues:               # Azure Blob Storage events (Event Grid), delivered to storage queues
        - queue_url: https://account.queue.core.windows.net/hudi-timelines   # a SAS may follow
          idle_wait: 5s           # the longest wait between two reads of an empty queue
      sweep_interval: 10m         # a table with change_notifications is listed at least this often anyway
    defaults:                     # table settings every table starts from
      services: [compaction, clustering, clean, indexing, archival]   # what hoodied runs
                                  # (archival: after the others, whenever a table has work for it)
      schedule: []                # which services hoodied also plans (Hudi's strategies and triggers);
                                  # not indexing: indexes are built on request (hoodied index), then run
      hoodie: {}                  # hoodie.* settings: strategies, triggers, retention, sort columns ...
                                  # and what the table's writers do: hoodie.clustering.updates.strategy
                                  # (README: Running beside Hudi writers)
      storage_options: {}         # options of the table's store (endpoint, region, credentials, retries
                                  # and timeouts...; the store's environment variables apply too: README,
                                  # Object stores)
      takeover_foreign_after: never   # an inflight instant hoodied did not start (a Hudi writer's own
                                  # compaction...) is taken over once this old; never: only when its
                                  # Hudi heartbeat expired (hoodied.ownership)
      priority: 1                 # weight of the table's urgency (hoodied.urgency); 0: runs only when no
                                  # other table has work due
      max_concurrent_jobs: null   # jobs of this table running at once in a replica (null: no cap but
                                  # spark.max_concurrent_jobs)
      poll_interval_max: null     # the table's own ceiling of its poll interval (null: the daemon's)
      change_notifications: false # its writers' commit callbacks or its bucket's events announce every
                                  # change: a quiet table is listed every notifications.sweep_interval
    tables:
      - path: /data/orders        # a table's base path or URI; two entries of one table (however written:
                                  # //, a trailing /, file://, a link, s3a:// for s3://) are an error
        name: orders              # label in metrics and logs (default: the last path segment)
        services / schedule / hoodie / storage_options / takeover_foreign_after / priority /
        max_concurrent_jobs / poll_interval_max / change_notifications: as in defaults (hoodie and
        storage_options merge)
    discover:
      - root: /data/warehouse     # every folder holding .hoodie/hoodie.properties below root, each table
                                  # once whatever links lead to it; one in tables keeps its entry there
        max_depth: 3
        exclude: ["^tmp_"]        # regular expressions on the path relative to root
        services / schedule / hoodie / storage_options / takeover_foreign_after / priority /
        max_concurrent_jobs / poll_interval_max / change_notifications: as in defaults

A bad key or value is a :class:`ConfigError` that names it (``tables[2].schedule[0]: 'compact' is not a
service (compaction, clustering, clean, indexing, archival)``). A table is one table however its path is
written: entries are compared by identity (:func:`hoodie.storage.identity.table_identity`), the key of its
claims and control document, so two entries of one table are refused (they would run each instant twice).
The ``hoodie.*`` settings are parsed with the same code the services run on, so a bad strategy or retention
fails at start-up, not at the first job.
"""

from __future__ import annotations

import math
import os
import re
import socket
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

import yaml

from hoodie.durations import duration_problem, duration_seconds
from hoodie.errors import HoodieError, StorageError
from hoodie.lease_margin import check_store_fits_lease
from hoodie.registry import SCHEDULABLE, SERVICE_NAMES, SERVICES, service_named
from hoodie.storage.identity import table_identity
from hoodie.storage.redact import redact_uri
from hoodied.errors import ServiceError
from hoodied.executor_code import SHIP_MODES
from hoodied.job_sizing import SizingSettings, parse_size
from hoodied.keys import check_keys
from hoodied.poll_interval import CEILING_FACTOR

_T = TypeVar("_T")


def default_replica() -> str:
    """``$HOODIED_REPLICA`` (a pod's name through the downward API), else the host name (a pod's name too)."""
    return os.environ.get("HOODIED_REPLICA", "").strip() or socket.gethostname()


class ConfigError(ServiceError):
    """The daemon's configuration file is wrong; the message names the key and the value."""


# -- values -------------------------------------------------------------------------------------------------


def parse_duration(value: object, where: str) -> float:
    """Seconds from a number or a string such as ``500ms``, ``30s``, ``5m``, ``1h``: finite, not negative and
    no longer than the longest wait (:func:`hoodie.durations.duration_problem`). YAML's ``.nan`` and ``.inf``
    and a number too long for a wait would pass for numbers here and break a wait hours later, so they are
    refused now, naming the key."""
    if isinstance(value, bool):
        raise ConfigError(f"{where}: {value!r} is not a duration (seconds, or e.g. 30s, 5m)")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:  # an integer of hundreds of digits: refused below
            seconds = math.inf
    elif isinstance(value, str) and (parsed := duration_seconds(value)) is not None:
        seconds = parsed
    else:
        raise ConfigError(f"{where}: {value!r} is not a duration (seconds, or e.g. 30s, 5m)")
    if (problem := duration_problem(seconds)) is not None:
        shown = f"{value!r}" if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
        raise ConfigError(f"{where}: {shown} {problem}: not a duration")
    if seconds < 0:
        raise ConfigError(f"{where}: {value!r} is negative")
    return seconds


def _poll_deadline(value: object, where: str) -> float | None:
    seconds = parse_duration(value, where)
    if seconds < 0.1:
        raise ConfigError(f"{where}: {value!r} is below 100ms")
    return seconds


class _Section:
    """Reads one mapping of the file, remembering which keys were used, so unknown keys are errors."""

    def __init__(self, raw: object, where: str, notes: list[str] | None = None) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where or 'the file'}: expected a mapping, got {type(raw).__name__}")
        self.raw: Mapping[str, Any] = raw
        self.where = where
        self.used: set[str] = set()
        #: Warnings about the file, shared by every section read from it (logged at start-up).
        self.notes: list[str] = notes if notes is not None else []

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def get(self, key: str, default: _T, parse: Callable[[object, str], _T]) -> _T:
        self.used.add(key)
        if key not in self.raw or self.raw[key] is None:
            return default
        return parse(self.raw[key], self.path(key))

    def section(self, key: str) -> _Section:
        self.used.add(key)
        return _Section(self.raw.get(key), self.path(key), self.notes)

    def has(self, key: str) -> bool:
        return key in self.raw and self.raw[key] is not None

    def done(self) -> None:
        unknown = sorted(str(k) for k in self.raw if k not in self.used)
        if unknown:
            known = ", ".join(sorted(self.used))
            raise ConfigError(f"{self.path(unknown[0])}: unknown key (expected one of: {known})")


def _str(value: object, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{where}: expected a non-empty string, got {value!r}")
    return value.strip()


def _int(minimum: int) -> Callable[[object, str], int]:
    def parse(value: object, where: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ConfigError(f"{where}: expected a whole number >= {minimum}, got {value!r}")
        return value

    return parse


def _port(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ConfigError(f"{where}: expected a port number (0-65535), got {value!r}")
    return value


def _fraction(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ConfigError(f"{where}: expected a fraction between 0 and 1, got {value!r}")
    return float(value)


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: expected true or false, got {value!r}")
    return value


def _choice(*choices: str) -> Callable[[object, str], str]:
    def parse(value: object, where: str) -> str:
        text = str(value).strip()
        for c in choices:
            if text.lower() == c.lower():
                return c
        raise ConfigError(f"{where}: {value!r} is not one of {', '.join(choices)}")

    return parse


def _string_map(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}: expected a mapping of settings, got {type(value).__name__}")
    out: dict[str, str] = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise ConfigError(f"{where}: {k!r} is not a setting name")
        if isinstance(v, Mapping | list):
            raise ConfigError(f"{where}.{k}: expected a single value, got {type(v).__name__}")
        out[k] = "true" if v is True else "false" if v is False else str(v)
    return out


def _duration_or_never(value: object, where: str) -> float:
    """A duration, or ``never`` (infinity): the one spelling of forever (``.inf`` is refused as in any
    duration, with a hint)."""
    if isinstance(value, str) and value.strip().lower() == "never":
        return math.inf
    try:
        return parse_duration(value, where)
    except ConfigError as e:
        raise ConfigError(f"{e} (forever is written never)") from None


def _services(value: object, where: str) -> tuple[str, ...]:
    return _names(value, where, SERVICE_NAMES)


def _schedulable(value: object, where: str) -> tuple[str, ...]:
    names = value.split(",") if isinstance(value, str) else value
    if isinstance(names, list):
        for i, item in enumerate(names):
            name = str(item).strip().lower()
            if name in SERVICE_NAMES and name not in SCHEDULABLE:
                raise ConfigError(
                    f"{where}[{i}]: {name!r} is not one of {', '.join(SCHEDULABLE)}: "
                    f"{service_named(name).requested_by}"
                )
    return _names(value, where, SCHEDULABLE)


def _names(value: object, where: str, allowed: Sequence[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [v for v in value.split(",") if v.strip()]
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list, got {value!r}")
    out: list[str] = []
    for i, item in enumerate(value):
        name = str(item).strip().lower()
        if name not in allowed:
            raise ConfigError(f"{where}[{i}]: {item!r} is not one of {', '.join(allowed)}")
        if name not in out:
            out.append(name)
    return tuple(out)


def _regexes(value: object, where: str) -> tuple[re.Pattern[str], ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        raise ConfigError(f"{where}: expected a list of regular expressions, got {value!r}")
    out = []
    for i, item in enumerate(value):
        try:
            out.append(re.compile(str(item)))
        except re.error as e:
            raise ConfigError(f"{where}[{i}]: {item!r} is not a regular expression: {e}") from None
    return tuple(out)


# -- sections -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ZooKeeperSettings:
    connect: str
    base_path: str = "/hoodied"
    session_timeout: float = 30.0
    connection_timeout: float = 15.0
    auth: tuple[tuple[str, str], ...] = ()
    acl: str = "open"
    lock_base_path: str = "/hudi/locks"


@dataclass(frozen=True)
class SparkSettings:
    master: str = "local[*]"
    conf: Mapping[str, str] = field(default_factory=dict)
    max_concurrent_jobs: int = 2
    fair_pools: bool = True
    #: Whether jobs ship hoodied's code to the executors (:mod:`hoodied.executor_code`): auto, always, never.
    ship_code: str = "auto"
    #: How jobs are sized from their plans (:mod:`hoodied.job_sizing`).
    sizing: SizingSettings = field(default_factory=SizingSettings)


@dataclass(frozen=True)
class MetricsSettings:
    host: str = "0.0.0.0"
    port: int | None = 9464
    read_timeout: float = 10.0
    max_connections: int = 32
    #: A replica watching more tables than this makes a table's job counters at its first job, not at 0
    #: from its first poll (35 series a table: 100,000 idle tables held 3.5 GB of them).
    zero_series_max_tables: int = 2000


@dataclass(frozen=True)
class LoggingSettings:
    level: str = "INFO"
    format: str = "text"


@dataclass(frozen=True)
class JobSettings:
    max_attempts: int = 5
    backoff: float = 30.0
    backoff_max: float = 1800.0
    takeover_grace: float = 30.0
    #: Seconds after which the store refuses a request sent earlier (S3 and Azure Blob: 15 minutes after it
    #: was signed): the files a takeover's voided attempts land late are swept until then.
    late_request_horizon: float = 900.0
    shutdown_grace: float = 120.0
    lock_timeout: float = 60.0

    def retry_delay(self, failures: int) -> float:
        """Seconds to wait after the ``failures``-th failure of an instant."""
        return float(min(self.backoff_max, self.backoff * 2 ** max(0, failures - 1)))


@dataclass(frozen=True)
class AdminSettings:
    #: The file holding the bearer token of mutating API calls (None: the API only reads).
    token_file: str | None = None
    #: Embedded mode: the folder of the control documents (:class:`hoodied.control.FileControlStore`).
    state_dir: str | None = None
    #: Records kept in each table's history.
    history_keep: int = 500
    #: Where the API takes changes (control commands) when not on the metrics port: its own server on
    #: ``host:port`` (None: the metrics port takes them). The metrics port is often open to a whole
    #: cluster (probes, Prometheus); the admin port need not be.
    port: int | None = None
    host: str = "127.0.0.1"


@dataclass(frozen=True)
class SqsQueueSettings:
    """One SQS queue S3 Event Notifications arrive on (:mod:`hoodied.s3_events`)."""

    queue_url: str
    region: str | None = None
    endpoint: str | None = None


@dataclass(frozen=True)
class AzureQueueSettings:
    """One Azure Storage queue Event Grid delivers blob events to (:mod:`hoodied.azure_events`)."""

    queue_url: str
    idle_wait: float = 5.0


@dataclass(frozen=True)
class NotificationSettings:
    """Where change events come from (:mod:`hoodied.change_events`), and how often a table they cover is
    listed anyway."""

    commit_callback_key_file: str | None = None
    s3_sqs: tuple[SqsQueueSettings, ...] = ()
    azure_queues: tuple[AzureQueueSettings, ...] = ()
    sweep_interval: float = 600.0


@dataclass(frozen=True)
class TableSettings:
    """What hoodied does for one table (or for every table a discovery root finds)."""

    services: tuple[str, ...] = SERVICE_NAMES
    schedule: tuple[str, ...] = ()
    hoodie: Mapping[str, str] = field(default_factory=dict)
    storage_options: Mapping[str, str] = field(default_factory=dict)
    #: An inflight instant hoodied did not start is taken over once this old (seconds; ``inf``: never, only
    #: on an expired Hudi heartbeat): :mod:`hoodied.ownership`.
    takeover_foreign_after: float = math.inf
    #: Weight of the table's urgency when work is ordered (:mod:`hoodied.urgency`); 0: only when nothing
    #: else is due.
    priority: float = 1.0
    #: Jobs of this table running at once in one replica (None: only spark.max_concurrent_jobs caps them).
    max_concurrent_jobs: int | None = None
    #: Seconds: the ceiling of the table's poll interval (:mod:`hoodied.poll_interval`; None: the daemon's
    #: ``poll_interval_max``).
    poll_interval_max: float | None = None
    #: Its changes are announced (commit callbacks, bucket events): when quiet it is listed every
    #: ``notifications.sweep_interval`` only, and at once when an event names it.
    change_notifications: bool = False


@dataclass(frozen=True)
class TableEntry:
    """One ``tables[]`` entry: the base path as written, the operator's label for it, its settings, and the
    table's identity (:func:`hoodie.storage.identity.table_identity`), what every key unique per table is
    derived from. No two entries of a file share an identity."""

    path: str
    name: str | None
    settings: TableSettings
    identity: str = ""


@dataclass(frozen=True)
class DiscoveryRoot:
    root: str
    max_depth: int
    exclude: tuple[re.Pattern[str], ...]
    settings: TableSettings


@dataclass(frozen=True)
class DaemonConfig:
    """The whole configuration (see the module docstring for every key)."""

    replica: str = field(default_factory=default_replica)
    poll_interval: float = 30.0
    #: The ceiling of a quiet table's poll interval (:mod:`hoodied.poll_interval`), unless its settings set
    #: their own; at least ``poll_interval``.
    poll_interval_max: float = 300.0
    poll_jitter: float = 0.1
    reschedule_interval: float = 300.0
    #: Tables polled at once, and the seconds a table's poll is waited for (None: ``poll_interval``):
    #: :mod:`hoodied.table_polls`.
    poll_concurrency: int = 16
    poll_deadline: float | None = None
    zookeeper: ZooKeeperSettings | None = None
    spark: SparkSettings = field(default_factory=SparkSettings)
    metrics: MetricsSettings = field(default_factory=MetricsSettings)
    logging: LoggingSettings = field(default_factory=LoggingSettings)
    jobs: JobSettings = field(default_factory=JobSettings)
    admin: AdminSettings = field(default_factory=AdminSettings)
    notifications: NotificationSettings = field(default_factory=NotificationSettings)
    tables: tuple[TableEntry, ...] = ()
    discover: tuple[DiscoveryRoot, ...] = ()
    source: str = "<defaults>"
    #: What the file holds that has no effect (``hoodie.*`` keys hoodied does not read), logged at start-up.
    warnings: tuple[str, ...] = ()

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> DaemonConfig:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"cannot read the configuration {path}: {e.strerror or e}") from None
        return cls.parse(text, source=str(path))

    @classmethod
    def parse(cls, text: str, source: str = "<config>") -> DaemonConfig:
        try:
            raw = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"{source}: not valid YAML: {e}") from None
        try:
            return _parse(raw, source)
        except ConfigError as e:
            raise ConfigError(f"{source}: {e}") from None

    @property
    def embedded(self) -> bool:
        return self.zookeeper is None

    @property
    def poll_deadline_seconds(self) -> float:
        """The seconds a poll waits for one table's poll (:mod:`hoodied.table_polls`)."""
        return self.poll_interval if self.poll_deadline is None else self.poll_deadline

    def poll_ceiling(self, settings: TableSettings) -> float:
        """The ceiling of the poll interval of a table with ``settings``: the sweep interval when its changes
        are announced, else its own ``poll_interval_max``, else the daemon's."""
        if settings.change_notifications:
            return max(self.poll_interval, self.notifications.sweep_interval)
        return self.poll_interval_max if settings.poll_interval_max is None else settings.poll_interval_max


def _parse(raw: object, source: str) -> DaemonConfig:
    top = _Section(raw, "")
    replica = top.get("replica", default_replica(), _str)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", replica):
        raise ConfigError(f"replica: {replica!r} may hold only letters, digits, '.', '_' and '-'")
    poll_interval = top.get("poll_interval", 30.0, parse_duration)
    if poll_interval < 0.1:
        raise ConfigError(f"poll_interval: {poll_interval} s is below 100ms")
    parse_ceiling = _poll_ceiling(poll_interval)
    config = DaemonConfig(
        replica=replica,
        poll_interval=poll_interval,
        poll_interval_max=top.get("poll_interval_max", CEILING_FACTOR * poll_interval, parse_ceiling),
        poll_jitter=top.get("poll_jitter", 0.1, _fraction),
        reschedule_interval=top.get("reschedule_interval", 300.0, parse_duration),
        poll_concurrency=top.get("poll_concurrency", 16, _int(1)),
        poll_deadline=top.get("poll_deadline", None, _poll_deadline),
        zookeeper=_zookeeper(top.section("zookeeper")) if top.has("zookeeper") else None,
        spark=_spark(top.section("spark")),
        metrics=_metrics(top.section("metrics")),
        logging=_logging(top.section("logging")),
        jobs=_jobs(top.section("jobs")),
        admin=_admin(top.section("admin")),
        notifications=_notifications(top.section("notifications")),
        source=source,
    )
    top.used.add("zookeeper")
    defaults_section = top.section("defaults")
    defaults = _table_settings(defaults_section, TableSettings(), parse_ceiling)
    defaults_section.done()
    tables = _tables(top.raw.get("tables"), defaults, top.notes, parse_ceiling)
    discover = _discover(top.raw.get("discover"), defaults, top.notes, parse_ceiling)
    top.used.update(("tables", "discover"))
    top.done()
    if not tables and not discover:
        raise ConfigError("tables: no tables and no discovery roots: nothing to maintain")
    names = [t.name for t in tables if t.name]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"tables: the name {dupes[0]!r} is given to more than one table")
    return DaemonConfig(
        **{
            **config.__dict__,
            "tables": tuple(tables),
            "discover": tuple(discover),
            "warnings": tuple(dict.fromkeys(top.notes)),
        }
    )


def _zookeeper(s: _Section) -> ZooKeeperSettings:
    connect = s.get("connect", "", _str)
    if not connect:
        raise ConfigError(f"{s.path('connect')}: required (host:port[,host:port][/chroot])")
    auth_raw: object = s.get("auth", None, lambda v, w: v) or []
    if not isinstance(auth_raw, list):
        raise ConfigError(f"{s.path('auth')}: expected a list of {{scheme, credential}}")
    auth = []
    for i, item in enumerate(auth_raw):
        a = _Section(item, f"{s.path('auth')}[{i}]")
        auth.append((a.get("scheme", "", _str), a.get("credential", "", _str)))
        a.done()
        if not all(auth[-1]):
            raise ConfigError(f"{a.where}: needs both scheme and credential")
    out = ZooKeeperSettings(
        connect=connect,
        base_path=s.get("base_path", "/hoodied", _zpath),
        session_timeout=s.get("session_timeout", 30.0, parse_duration),
        connection_timeout=s.get("connection_timeout", 15.0, parse_duration),
        auth=tuple(auth),
        acl=s.get("acl", "open", _choice("open", "creator")),
        lock_base_path=s.get("lock_base_path", "/hudi/locks", _zpath),
    )
    if out.acl == "creator" and not out.auth:
        raise ConfigError(f"{s.path('acl')}: 'creator' needs auth (whose nodes would they be?)")
    if out.session_timeout < 2:
        raise ConfigError(
            f"{s.path('session_timeout')}: {out.session_timeout} s is below ZooKeeper's minimum"
        )
    s.done()
    return out


def _zpath(value: object, where: str) -> str:
    text = _str(value, where)
    if not text.startswith("/") or (text.endswith("/") and text != "/") or "//" in text:
        raise ConfigError(f"{where}: {text!r} is not an absolute ZooKeeper path")
    return text


def _spark(s: _Section) -> SparkSettings:
    conf: dict[str, str] = s.get("conf", {}, _string_map)
    for key in conf:
        if not key.startswith("spark."):
            raise ConfigError(f"{s.path('conf')}.{key}: only spark.* settings belong here")
    out = SparkSettings(
        master=s.get("master", "local[*]", _str),
        conf=conf,
        max_concurrent_jobs=s.get("max_concurrent_jobs", 2, _int(1)),
        fair_pools=s.get("fair_pools", True, _bool),
        ship_code=s.get("ship_code", "auto", _choice(*SHIP_MODES)),
        sizing=_sizing(s.section("sizing")),
    )
    s.done()
    return out


def _sizing(s: _Section) -> SizingSettings:
    d = SizingSettings()
    out = SizingSettings(
        driver_max_bytes=s.get("driver_max_bytes", d.driver_max_bytes, _size),
        executor_python_memory=s.get("executor_python_memory", d.executor_python_memory, _size),
        arrow_expansion=s.get("arrow_expansion", d.arrow_expansion, _positive),
        memory_factor=s.get("memory_factor", d.memory_factor, _positive),
        max_task_cpus=s.get("max_task_cpus", d.max_task_cpus, _int(1)),
    )
    s.done()
    return out


def _size(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{where}: expected a size (bytes, or like 8MiB, 512m), got {value!r}")
    try:
        return parse_size(value)
    except ValueError as e:
        raise ConfigError(f"{where}: {e}") from e


def _positive(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: expected a number > 0, got {value!r}")
    return float(value)


def _metrics(s: _Section) -> MetricsSettings:
    port: int | None = 9464
    if "port" in s.raw:
        s.used.add("port")
        port = None if s.raw["port"] is None else _port(s.raw["port"], s.path("port"))
    out = MetricsSettings(
        host=s.get("host", "0.0.0.0", _str),
        port=port,
        read_timeout=s.get("read_timeout", 10.0, parse_duration),
        max_connections=s.get("max_connections", 32, _int(1)),
        zero_series_max_tables=s.get("zero_series_max_tables", 2000, _int(0)),
    )
    s.done()
    return out


def _logging(s: _Section) -> LoggingSettings:
    out = LoggingSettings(
        level=s.get("level", "INFO", _choice("DEBUG", "INFO", "WARNING", "ERROR")),
        format=s.get("format", "text", _choice("text", "json")),
    )
    s.done()
    return out


def _jobs(s: _Section) -> JobSettings:
    out = JobSettings(
        max_attempts=s.get("max_attempts", 5, _int(1)),
        backoff=s.get("backoff", 30.0, parse_duration),
        backoff_max=s.get("backoff_max", 1800.0, parse_duration),
        takeover_grace=s.get("takeover_grace", 30.0, parse_duration),
        late_request_horizon=s.get("late_request_horizon", 900.0, parse_duration),
        shutdown_grace=s.get("shutdown_grace", 120.0, parse_duration),
        lock_timeout=s.get("lock_timeout", 60.0, parse_duration),
    )
    s.done()
    return out


def _admin(s: _Section) -> AdminSettings:
    admin_port: int | None = None
    if s.raw.get("port") is not None:
        s.used.add("port")
        admin_port = _port(s.raw["port"], s.path("port"))
    elif "port" in s.raw:
        s.used.add("port")
    token_file = s.get("token_file", None, _str)
    state_dir = s.get("state_dir", None, _str)
    out = AdminSettings(
        token_file=os.path.expanduser(token_file) if token_file else None,
        state_dir=os.path.expanduser(state_dir) if state_dir else None,
        history_keep=s.get("history_keep", 500, _int(1)),
        port=admin_port,
        host=s.get("host", "127.0.0.1", _str),
    )
    s.done()
    return out


def _queue_entries(s: _Section, key: str, example: str) -> Iterator[tuple[_Section, str]]:
    """Each entry of the list of queues ``key`` with its ``queue_url`` (an http(s) URL like ``example``);
    the entry's other keys are the caller's to read, and an unknown one is refused once it has."""
    raw = s.raw.get(key)
    if raw is not None and not isinstance(raw, list):
        raise ConfigError(f"{s.path(key)}: expected a list of queues")
    s.used.add(key)
    for i, item in enumerate(raw or []):
        q = _Section(item, f"{s.path(key)}[{i}]")
        url = q.get("queue_url", None, _str)
        if not url or not url.startswith(("https://", "http://")):
            raise ConfigError(f"{q.path('queue_url')}: expected the queue's URL ({example})")
        yield q, url
        q.done()


def _notifications(s: _Section) -> NotificationSettings:
    key_file = s.get("commit_callback_key_file", None, _str)
    queues = [
        SqsQueueSettings(url, q.get("region", None, _str), q.get("endpoint", None, _str))
        for q, url in _queue_entries(s, "s3_sqs", "https://sqs....")
    ]
    azure: list[AzureQueueSettings] = []
    for q, url in _queue_entries(s, "azure_queues", "https://<account>.queue...."):
        idle = q.get("idle_wait", 5.0, parse_duration)
        if idle < 1.0:
            raise ConfigError(f"{q.path('idle_wait')}: {idle} s is below 1s")
        azure.append(AzureQueueSettings(url, idle))
    sweep = s.get("sweep_interval", 600.0, parse_duration)
    if sweep < 1.0:
        raise ConfigError(f"{s.path('sweep_interval')}: {sweep} s is below 1s")
    out = NotificationSettings(
        os.path.expanduser(key_file) if key_file else None,
        tuple(queues),
        tuple(azure),
        sweep_interval=sweep,
    )
    s.done()
    return out


def _priority(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"{where}: expected a number >= 0, got {value!r}")
    return float(value)


def _poll_ceiling(poll_interval: float) -> Callable[[object, str], float]:
    """The parser of a ``poll_interval_max``: a duration no shorter than ``poll_interval`` (a table polled
    more often than every poll cannot be)."""

    def parse(value: object, where: str) -> float:
        seconds = parse_duration(value, where)
        if seconds < poll_interval:
            raise ConfigError(
                f"{where}: {value!r} is below poll_interval ({poll_interval:g} s): a quiet table's interval "
                "grows from poll_interval up to it"
            )
        return seconds

    return parse


def _table_settings(
    s: _Section, base: TableSettings, parse_ceiling: Callable[[object, str], float]
) -> TableSettings:
    hoodie: dict[str, str] = s.get("hoodie", {}, _string_map)
    for key in hoodie:
        if not key.startswith("hoodie."):
            raise ConfigError(f"{s.path('hoodie')}.{key}: only hoodie.* settings belong here")
    report = check_keys(hoodie, s.path("hoodie"))
    if report.errors:
        raise ConfigError(report.errors[0])
    s.notes.extend(report.warnings)
    settings = TableSettings(
        services=s.get("services", base.services, _services),
        schedule=s.get("schedule", base.schedule, _schedulable),
        hoodie={**base.hoodie, **hoodie},
        storage_options={**base.storage_options, **s.get("storage_options", {}, _string_map)},
        takeover_foreign_after=s.get(
            "takeover_foreign_after", base.takeover_foreign_after, _duration_or_never
        ),
        priority=s.get("priority", base.priority, _priority),
        max_concurrent_jobs=s.get("max_concurrent_jobs", base.max_concurrent_jobs, _int(1)),
        poll_interval_max=s.get("poll_interval_max", base.poll_interval_max, parse_ceiling),
        change_notifications=s.get("change_notifications", base.change_notifications, _bool),
    )
    missing = [svc for svc in settings.schedule if svc not in settings.services]
    if missing and not s.has("schedule"):  # inherited: schedule what this table runs
        settings = replace(settings, schedule=tuple(x for x in settings.schedule if x in settings.services))
    elif missing:
        raise ConfigError(f"{s.path('schedule')}: {missing[0]} is scheduled but not among the services run")
    check_hoodie_settings(settings.hoodie, s.path("hoodie"))
    return settings


def _fit_store_to_lease(s: _Section, uri: str, settings: TableSettings) -> TableSettings:
    """The table's storage options with the store's request deadline inside its leases
    (:func:`hoodie.lease_margin.check_store_fits_lease`: ``retry_timeout`` clamped with a warning, a
    ``timeout`` no lease can hold refused), so a run never starts a store request that can outlast its
    instant lease or its storage lock."""
    try:
        fit = check_store_fits_lease(uri, settings.storage_options, settings.hoodie)
    except (HoodieError, StorageError) as e:
        raise ConfigError(f"{s.path('storage_options')}: {e}") from None
    s.notes.extend(f"{s.path('storage_options')}: {w}" for w in fit.warnings)
    if fit.options == settings.storage_options:
        return settings
    return replace(settings, storage_options=fit.options)


def check_hoodie_settings(settings: Mapping[str, str], where: str) -> None:
    """Parse the services' ``hoodie.*`` settings now, so a bad one fails at start-up and names itself."""
    for service in SERVICES:
        try:
            service.check_settings(settings)
        except (HoodieError, ValueError) as e:
            raise ConfigError(f"{where}: {e}") from None


def _tables(
    raw: object, defaults: TableSettings, notes: list[str], parse_ceiling: Callable[[object, str], float]
) -> list[TableEntry]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError("tables: expected a list of {path: ...}")
    out: list[TableEntry] = []
    by_identity: dict[str, int] = {}
    for i, item in enumerate(raw):
        s = _Section({"path": item} if isinstance(item, str) else item, f"tables[{i}]", notes)
        path = s.get("path", "", _str).rstrip("/")
        if not path:
            raise ConfigError(f"{s.path('path')}: required")
        name = s.get("name", None, _label)
        settings = _fit_store_to_lease(s, path, _table_settings(s, defaults, parse_ceiling))
        try:
            identity = table_identity(path, settings.storage_options)
        except StorageError as e:
            raise ConfigError(f"{s.path('path')}: {e}") from None
        if identity in by_identity:
            # Two entries of one table would claim its instants under two keys and run each twice (issue 32).
            j = by_identity[identity]
            raise ConfigError(
                f"{s.path('path')}: tables[{i}] ({_described(path, name)}) and tables[{j}] "
                f"({_described(out[j].path, out[j].name)}) are one table, {identity}: list it once"
            )
        by_identity[identity] = i
        out.append(TableEntry(path, name, settings, identity))
        s.done()
    return out


def _described(path: str, name: str | None) -> str:
    """An entry for a message: its name (when given) and its path, credentials hidden."""
    shown = redact_uri(path)
    return f"{name}: {shown}" if name else shown


def _label(value: object, where: str) -> str | None:
    text = _str(value, where)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", text):
        raise ConfigError(f"{where}: {text!r} may hold only letters, digits, '.', '_' and '-'")
    return text


def _discover(
    raw: object, defaults: TableSettings, notes: list[str], parse_ceiling: Callable[[object, str], float]
) -> list[DiscoveryRoot]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError("discover: expected a list of {root: ...}")
    out = []
    for i, item in enumerate(raw):
        s = _Section({"root": item} if isinstance(item, str) else item, f"discover[{i}]", notes)
        root = s.get("root", "", _str).rstrip("/")
        if not root:
            raise ConfigError(f"{s.path('root')}: required")
        out.append(
            DiscoveryRoot(
                root=root,
                max_depth=s.get("max_depth", 3, _int(1)),
                exclude=s.get("exclude", (), _regexes),
                settings=_fit_store_to_lease(s, root, _table_settings(s, defaults, parse_ceiling)),
            )
        )
        s.done()
    return out


__all__ = [
    "AdminSettings",
    "ConfigError",
    "DaemonConfig",
    "DiscoveryRoot",
    "JobSettings",
    "LoggingSettings",
    "MetricsSettings",
    "SparkSettings",
    "TableEntry",
    "TableSettings",
    "ZooKeeperSettings",
    "check_hoodie_settings",
    "parse_duration",
]
