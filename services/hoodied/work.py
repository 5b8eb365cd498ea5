"""What the supervisor's parts hand each other: the tables it watches (:class:`WatchedTable`, with what the
last poll learnt), the work a poll finds (:class:`WorkItem`), what a job did (:class:`JobOutcome`), and the
last outcome per service kept in the table for ``hoodied status``."""

from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass, field

from hoodie.backlog import Backlog, BacklogCache
from hoodie.config import TableConfig
from hoodie.registry import SERVICES, service_named
from hoodie.storage import Storage
from hoodie.storage.identity import table_identity
from hoodie.timeline.instant import Instant
from hoodie.timeline.timeline import Timeline
from hoodie.write.late_files import LateFiles
from hoodied.config import TableSettings
from hoodied.control import TableControl
from hoodied.coordination import claim_name, table_key
from hoodied.urgency import order_key

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class WorkItem:
    """One pending instant of one table, offered to the workers."""

    table: WatchedTable
    service: str  # a name in hoodie.registry.SERVICE_NAMES
    instant: Instant
    urgency: float = 1.0  # hoodied.urgency: priority x (1 + lag), as of the poll that found it

    @property
    def claim_name(self) -> str:
        return claim_name(self.service, self.instant.time)

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.table.key, self.service, self.instant.time)

    def sort_key(self) -> tuple[float, str, int, str]:
        """Most urgent first, then oldest, then by the services' priority (cleans first: they free
        space): :func:`hoodied.urgency.order_key`."""
        return order_key(
            self.urgency, self.instant.time, service_named(self.service).priority, self.table.key
        )


@dataclass
class JobOutcome:
    """What one job did, as ``hoodied status`` and the metrics report it."""

    service: str
    instant: str
    ok: bool
    #: done | already_done | failed | claim_lost | conflict | cancelled | unknown | corrupt | foreign
    #: | lost_race
    kind: str
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

    uri: str  # the base path as configured or discovered (what its storage opens)
    name: str  # the operator's label: logs, metrics, hoodied ctl, the API
    settings: TableSettings
    storage: Storage
    #: What must be unique per table derives from this: the key of its claims and control document.
    key: str = ""
    #: The table's identity (:func:`hoodie.storage.identity.table_identity`; from ``uri`` when not given).
    identity: str = ""
    config: TableConfig | None = None
    listing: frozenset[str] | None = None
    #: The timeline folder's modification time vouching for ``listing`` (hoodied.listing; None: none does),
    #: and the poller's monotonic time of that listing.
    listed_folder_time_ns: int | None = None
    listed_at: float = float("-inf")
    #: The poller's monotonic time ``config`` was read (hoodied.listing reads it again after CONFIG_MAX_AGE).
    config_read_at: float = float("-inf")
    timeline: Timeline | None = None
    items: tuple[WorkItem, ...] = ()
    pending: dict[str, list[Instant]] = field(default_factory=dict)
    scheduled_at: float = float("-inf")  # monotonic time scheduling was last evaluated
    scheduled_listing: frozenset[str] | None = None
    failures: int = 0
    retry_at: float = 0.0
    #: Seconds between its polls now (hoodied.poll_interval; None before its first poll), and the poller's
    #: monotonic time from which it is due again.
    poll_interval: float | None = None
    poll_due_at: float = float("-inf")
    #: Its polls that succeeded (what draws each wait's jitter apart from the last).
    polls: int = 0
    #: Whether this replica lists and schedules it (:mod:`hoodied.table_split`), and which replica does.
    owned: bool = True
    owner: str | None = None
    #: Jobs of ours on the table that ended (the runner counts them), and that count as of its last poll: a
    #: job that ended since makes the table due at once.
    jobs_ended: int = 0
    jobs_ended_polled: int = 0
    last_error: str | None = None
    #: Its last poll overran its deadline (hoodied.table_polls; said once until a poll keeps to it again).
    overran: bool = False
    schedule_error: str | None = None  # why the last scheduling of a service failed (the poll went on)
    held: str | None = None  # why no service may run on the table now (a pending restore)
    unclaimed_since: dict[str, float] = field(default_factory=dict)
    #: Pending rollbacks by time, and the poller's monotonic time each was first seen pending (an orphaned
    #: one, whose instant is gone, is finished once seen for takeover_grace: hoodie.write.orphaned_rollback).
    rollbacks_seen: dict[str, float] = field(default_factory=dict)
    #: Where attempts voided by a takeover that completed here may still land files (the runner appends;
    #: thread-safe), and the sweeps of them the poller will make, with the monotonic time each is due
    #: (hoodie.write.late_files).
    late_files: deque[LateFiles] = field(default_factory=deque)
    late_sweeps: list[tuple[float, LateFiles]] = field(default_factory=list)
    #: The newest completed rollback its poller looked for recent void decisions after (None: none yet):
    #: sweeps outlive the replica that voided (hoodie.write.late_files.recent_late_files).
    voids_looked_after: str | None = None
    #: The timeline that look was made on (the next is made on a newer one), and whether the table's
    #: hoodied_late_sweeps_pending series exists (made at its first sweep: an idle fleet exports none).
    voids_timeline: Timeline | None = None
    late_sweeps_exported: bool = False
    #: Why an unclaimed inflight instant is left alone (not started by hoodied, owner maybe alive), by time.
    foreign: dict[str, str] = field(default_factory=dict)
    last_results: dict[str, JobOutcome] = field(default_factory=dict)
    #: The operators' word on the table (hoodied.control), as of the last poll.
    control: TableControl = field(default_factory=TableControl)
    #: Whether ``control`` was read from the store once (the first read reports no command: it may be old).
    control_read: bool = False
    #: How far behind its services are (hoodie.backlog), measured when the timeline changed.
    backlog: Backlog | None = None
    backlog_cache: BacklogCache = field(default_factory=BacklogCache)
    backlog_listing: frozenset[str] | None = None
    #: Per service: why the last scheduling did or did not request an instant.
    schedule_reasons: dict[str, str] = field(default_factory=dict)
    #: Per service: (code, sentence) saying why its next instant does not run now (hoodied.explain).
    blocked: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: Per service: a sentence saying why its next instant is or is not due (hoodied status, the page).
    next: dict[str, str] = field(default_factory=dict)
    #: Per service with pending work: its urgency as of the last poll (hoodied.urgency).
    urgency: dict[str, float] = field(default_factory=dict)
    #: What the last full evaluation of a table with nothing pending saw (its listing, control document and
    #: scheduling reasons; None after one that found work): the poll skips a table that still shows it
    #: (hoodied.poller: quiet).
    evaluated: tuple[frozenset[str] | None, TableControl, tuple[tuple[str, str], ...]] | None = None

    def __post_init__(self) -> None:
        self.identity = self.identity or table_identity(self.uri, self.settings.storage_options)
        self.key = self.key or table_key(self.identity)


@dataclass
class Attempts:
    """How often an instant failed here, and when it may run again."""

    failures: int = 0
    retry_at: float = 0.0
    given_up: bool = False


def table_settings(table: WatchedTable) -> dict[str, str]:
    """The table's properties overlaid with the operator's ``hoodie.*`` settings for it."""
    assert table.config is not None
    return {**table.config.props, **table.settings.hoodie}


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
    "RESULTS_FOLDER",
    "Attempts",
    "JobOutcome",
    "WatchedTable",
    "WorkItem",
    "read_last_results",
    "table_settings",
    "write_last_result",
]
