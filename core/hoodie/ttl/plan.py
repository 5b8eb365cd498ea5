"""Partition TTL planning (pure) and scheduling (writes the requested ``replacecommit`` under the table lock).

:func:`plan_ttl` is a function of a table view, an instant time ``T`` and the settings: which partitions have
expired at ``T``. :func:`schedule_ttl` takes the table lock and a fresh instant time, plans again on the view
at that time and, when something expired, writes ``<T>.replacecommit.requested``; execution
(:mod:`hoodie.ttl.execute`) decides again at ``T`` and completes it.

What Hudi measures (1.x, ``KeepByTimeStrategy.getExpiredPartitionPaths`` at the TTL instant ``T``):

- Nothing when the table has no completed instant, ``days.retain`` <= 0 or no partition fields.
- The partitions looked at: ``partition.selected`` (a comma list) or every partition.
- ``KEEP_BY_TIME``: a partition's reference time is the greatest *base instant time* of the latest file
  slices at or before ``T`` (``getLatestFileSlicesBeforeOrOn(partition, T, true)``): over the file groups not
  replaced by a completed replacecommit at or before ``T``, the slices whose base instant is at or before
  ``T`` and is a completed write (or older than the active timeline) or a pending compaction. A pending
  compaction's slice counts as soon as it is requested on table versions 8+, and on version 6 only once a log
  file was written into it. So log files added to a slice (updates of a MERGE_ON_READ table) do not make
  its partition younger, while a compaction or clustering, whose new base files carry its instant, does.
  A partition with no such slice never expires.
- ``KEEP_BY_CREATION_TIME``: the reference is ``commitTime`` in the partition's
  ``.hoodie_partition_metadata`` (text or base-file form); a partition without one never expires.
- A partition has expired when ``T`` > reference + ``days.retain`` days (``instantTimePlusMillis``: the
  reference read as a wall-clock time in the timeline time zone, the days added as milliseconds; the
  comparison is of 17-digit instant strings).
- At most ``max.delete.partitions`` go per run: here the oldest first (then by name); Hudi takes them in a
  hash map's order.

Where this differs from Hudi on purpose:

- Hudi computes the TTL as ``days * 1000 * 3600 * 24`` in 32-bit ``int`` arithmetic, which overflows from 25
  days on (25 to 49 days: negative, TTL silently off; 365 days: about 17 days). hoodied takes the days as
  written (:func:`hudi_ttl_millis` is Hudi's figure; :meth:`TTLConfig.hudi_difference` says when they differ),
  never deleting data earlier than configured.
- Only partitions that hold a live file group are looked at: one without any has nothing to delete (Hudi's
  ``KEEP_BY_CREATION_TIME`` would commit an empty delete of an emptied partition again and again).
- ``partition.selected`` items are trimmed, and an empty item is refused (Hudi splits on "," as is).

Hudi refuses a delete-partition while a pending compaction, log compaction or clustering reads a file group
of one of the partitions (``DeletePartitionUtils``; the run then does nothing): :attr:`TTLPlan.blocked` names
them, and nothing is scheduled until they complete.

The requested file is Hudi's (``HoodieRequestedReplaceMetadata``, operation ``DELETE_PARTITION``, no plan,
version 1) with one difference: its ``extraMetadata`` records the TTL settings it was scheduled with (Hudi's
is empty). That tells a TTL instant apart from a writer's ``ALTER TABLE ... DROP PARTITION`` (whose requested
file is otherwise the same, and which hoodied must leave to its writer), and execution decides with the
settings the instant was scheduled with.

Trigger (hoodied's own scheduling; ``respect_trigger=False`` plans whenever something expired, as Hudi's
``HoodieTTLJob``): not while the table's writers run TTL themselves (``hoodie.partition.ttl.inline=true``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import pyarrow.parquet as pq

from hoodie.errors import CorruptTimelineFile, InvalidInstant, InvalidWriteConfig
from hoodie.file_group.fs_view import PARTITION_METAFILE
from hoodie.lock import LockProvider, held
from hoodie.metadata_table import refuse_metadata_table
from hoodie.settings import bool_setting, int_setting, setting
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import REPLACE_COMMIT, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator, format_instant_time, parse_instant_time
from hoodie.timeline.metadata import (
    RequestedReplaceMetadata,
    decode_requested_replace_metadata,
    plan_versions,
)
from hoodie.timeline.writer import TimelineWriter

logger = logging.getLogger(__name__)

# -- config keys, with Hudi's defaults (HoodieTTLConfig, all since 1.0.0) -----------------------------------

INLINE = "hoodie.partition.ttl.inline"
INLINE_DEFAULT = False
STRATEGY_TYPE = "hoodie.partition.ttl.management.strategy.type"
STRATEGY_CLASS = "hoodie.partition.ttl.strategy.class"  # overrides the type
DAYS_RETAIN = "hoodie.partition.ttl.strategy.days.retain"
DAYS_RETAIN_DEFAULT = -1  # off
PARTITION_SELECTED = "hoodie.partition.ttl.strategy.partition.selected"
MAX_DELETE_PARTITIONS = "hoodie.partition.ttl.strategy.max.delete.partitions"
MAX_DELETE_PARTITIONS_DEFAULT = 1000

#: The operation type of a TTL's requested file and of its replacecommit (Hudi's ``WriteOperationType``).
OPERATION_TYPE = "DELETE_PARTITION"
#: The partition metafile's key holding the instant that created the partition.
COMMIT_TIME_KEY = "commitTime"

_DAY_MS = 1000 * 3600 * 24
_STRATEGY_PACKAGE = "org.apache.hudi.table.action.ttl.strategy."


class Strategy(StrEnum):
    """Hudi's ``PartitionTTLStrategyType``."""

    KEEP_BY_TIME = "KEEP_BY_TIME"
    KEEP_BY_CREATION_TIME = "KEEP_BY_CREATION_TIME"

    @property
    def class_name(self) -> str:
        simple = "KeepByTimeStrategy" if self is Strategy.KEEP_BY_TIME else "KeepByCreationTimeStrategy"
        return _STRATEGY_PACKAGE + simple


@dataclass(frozen=True)
class TTLConfig:
    """The partition TTL settings (Hudi's keys above; defaults as Hudi's)."""

    strategy: Strategy = Strategy.KEEP_BY_TIME
    days_retain: int = DAYS_RETAIN_DEFAULT
    partitions_selected: tuple[str, ...] = ()
    max_delete_partitions: int = MAX_DELETE_PARTITIONS_DEFAULT
    inline: bool = INLINE_DEFAULT

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> TTLConfig:
        """Read the keys above from a configuration; a bad value raises naming its key."""
        return cls(
            strategy=_strategy(config),
            days_retain=int_setting(config, DAYS_RETAIN, DAYS_RETAIN_DEFAULT, minimum=-(2**31), bits=32),
            partitions_selected=_list(config, PARTITION_SELECTED),
            max_delete_partitions=int_setting(
                config, MAX_DELETE_PARTITIONS, MAX_DELETE_PARTITIONS_DEFAULT, minimum=0, bits=32
            ),
            inline=bool_setting(config, INLINE, INLINE_DEFAULT),
        )

    @property
    def enabled(self) -> bool:
        """Whether partitions can expire at all (Hudi: ``days.retain`` > 0)."""
        return self.days_retain > 0 and self.max_delete_partitions > 0

    @property
    def ttl_millis(self) -> int:
        """``days.retain`` in milliseconds, as configured (see the module doc for Hudi's overflow)."""
        return self.days_retain * _DAY_MS

    def hudi_difference(self) -> str | None:
        """What Hudi 1.x would do differently with this ``days.retain`` (its 32-bit overflow), or ``None``."""
        if self.days_retain <= 0:
            return None
        theirs = hudi_ttl_millis(self.days_retain)
        if theirs == self.ttl_millis:
            return None
        what = (
            "never expires anything"
            if theirs <= 0
            else f"expires partitions after {theirs / 3_600_000:.2f} h"
        )
        return (
            f"{DAYS_RETAIN}={self.days_retain}: Hudi computes the TTL in 32-bit int milliseconds, which "
            f"overflows, so Hudi's own TTL {what}; hoodied keeps the {self.days_retain} day(s) as written"
        )

    def recorded(self) -> dict[str, str]:
        """The settings a requested TTL instant records (its ``extraMetadata``)."""
        out = {
            STRATEGY_TYPE: self.strategy.value,
            DAYS_RETAIN: str(self.days_retain),
            MAX_DELETE_PARTITIONS: str(self.max_delete_partitions),
        }
        if self.partitions_selected:
            out[PARTITION_SELECTED] = ",".join(self.partitions_selected)
        return out

    def describe(self) -> str:
        return f"{self.strategy.value}, {DAYS_RETAIN}={self.days_retain}"


def _strategy(config: Mapping[str, str]) -> Strategy:
    """The strategy: ``strategy.class`` when set (one of Hudi's two), else ``management.strategy.type``."""
    raw_class = setting(config, STRATEGY_CLASS)
    if raw_class is not None:
        for strategy in Strategy:
            if raw_class == strategy.class_name:
                return strategy
        raise InvalidWriteConfig(
            f"{STRATEGY_CLASS}={raw_class!r}: hoodied runs Hudi's own strategies only "
            f"({', '.join(s.class_name for s in Strategy)})"
        )
    raw = setting(config, STRATEGY_TYPE)
    if raw is None:
        return Strategy.KEEP_BY_TIME
    try:
        return Strategy(raw.upper())
    except ValueError:
        known = ", ".join(s.value for s in Strategy)
        raise InvalidWriteConfig(f"{STRATEGY_TYPE}={raw!r}: not one of {known}") from None


def _list(config: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = config.get(key) or ""
    items = [item.strip() for item in raw.split(",")]
    if raw.strip() and any(not item for item in items):
        raise InvalidWriteConfig(f"{key}={raw!r}: an empty item in the comma-separated list")
    return tuple(item for item in items if item)


def hudi_ttl_millis(days: int) -> int:
    """Hudi's TTL: ``days * 1000 * 3600 * 24`` evaluated in Java ``int`` (wrapping at 32 bits), widened."""
    value = days * _DAY_MS & 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


# -- instant-time arithmetic (HoodieInstantTimeGenerator) ---------------------------------------------------


def fix_instant_time(instant_time: str) -> str:
    """Hudi's ``fixInstantTimeCompatibility``: a 14-digit (seconds) time gets ``999`` milliseconds, a longer
    one (metadata-table suffixes) is cut to 17 digits."""
    if len(instant_time) == 14:
        return instant_time + "999"
    return instant_time[:17]


def instant_time_plus_millis(instant_time: str, millis: int, timezone: str) -> str:
    """Hudi's ``instantTimePlusMillis``: the time read as a wall clock in ``timezone`` (``UTC`` or ``LOCAL``,
    this process's zone), ``millis`` later. A time that is no calendar time but digits is added to as a
    number, zero-padded to 17 digits, as Hudi does for test timestamps."""
    fixed = fix_instant_time(instant_time)
    try:
        moment = parse_instant_time(fixed)
    except InvalidInstant:
        if fixed.isdigit():
            return f"{int(fixed) + millis:017d}"
        raise
    delta = dt.timedelta(milliseconds=millis)
    if timezone == "UTC":
        return format_instant_time(moment + delta)
    local = moment.astimezone()  # a naive time read in the local zone, with its offset then
    return format_instant_time((local + delta).astimezone().replace(tzinfo=None))


# -- what a partition's age is -----------------------------------------------------------------------------


def newest_base_instants(table: Table, instant_time: str) -> dict[str, str]:
    """``KEEP_BY_TIME``: each partition's greatest base instant of the file slices Hudi's
    ``getLatestFileSlicesBeforeOrOn(partition, instant_time, true)`` returns (see the module doc); partitions
    without one are left out."""
    T = instant_time
    timeline = table.timeline
    replaced = {gid for gid, t in table.replace_times().items() if t <= T}
    pending = table.pending_compaction_file_groups() if table.config.is_mor else {}
    v8 = table.config.table_version >= 8
    out: dict[str, str] = {}
    for gid, group in table.file_groups().items():
        if gid in replaced:
            continue
        compaction = pending.get(gid)
        instants = [
            s.base_instant
            for s in group.ordered()
            if s.base_instant <= T and (s.base_instant == compaction or timeline.is_committed(s.base_instant))
        ]
        if v8 and compaction is not None and compaction <= T:
            instants.append(compaction)  # its slice counts while still empty (v8+)
        if instants:
            newest = max(instants)
            if newest > out.get(gid.partition_path, ""):
                out[gid.partition_path] = newest
    return out


def partition_created_time(storage: Storage, partition: str) -> str | None:
    """``commitTime`` of the partition's metafile (``.hoodie_partition_metadata``, else its Parquet form),
    or ``None`` when it has none."""
    text_path = f"{partition}/{PARTITION_METAFILE}" if partition else PARTITION_METAFILE
    try:
        data = storage.read(text_path)
    except FileNotFoundError:
        data = None
    if data is not None:
        for line in data.decode("utf-8", errors="replace").splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith(("#", "!")) and key.strip() == COMMIT_TIME_KEY:
                return value.strip() or None
        return None
    parquet_path = text_path + ".parquet"
    if not storage.exists(parquet_path):
        return None
    with storage.open_input_file(parquet_path) as f:
        meta: dict[bytes, bytes] = pq.read_metadata(f).metadata or {}
    created = meta.get(COMMIT_TIME_KEY.encode())
    return created.decode() if created else None


def live_partitions(table: Table) -> set[str]:
    """Partitions holding at least one live (not replaced) file group."""
    replaced = table.replaced_file_groups()
    return {gid.partition_path for gid in table.file_groups() if gid not in replaced}


def partition_references(table: Table, instant_time: str, config: TTLConfig) -> dict[str, str]:
    """The reference time of each partition the TTL looks at and can date (see the module doc)."""
    if config.strategy is Strategy.KEEP_BY_TIME:
        refs = newest_base_instants(table, instant_time)
    else:
        refs = {}
        for partition in live_partitions(table):
            created = partition_created_time(table.storage, partition)
            if created:
                refs[partition] = created
    if config.partitions_selected:
        selected = set(config.partitions_selected)
        refs = {p: r for p, r in refs.items() if p in selected}
    return refs


def blocking_services(table: Table, partitions: set[str] | frozenset[str]) -> dict[str, tuple[str, ...]]:
    """Pending compactions, log compactions and clusterings reading a file group of one of ``partitions``:
    partition -> their instant times (Hudi's ``DeletePartitionUtils.checkForPendingTableServiceActions``)."""
    found: dict[str, set[str]] = {}
    for groups in (
        table.pending_compaction_file_groups() if table.config.is_mor else {},
        table.pending_log_compaction_file_groups() if table.config.is_mor else {},
        table.pending_clustering_file_groups(),
    ):
        for gid, time in groups.items():
            if gid.partition_path in partitions:
                found.setdefault(gid.partition_path, set()).add(time)
    return {p: tuple(sorted(times)) for p, times in sorted(found.items())}


# -- the plan ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TTLPlan:
    """What the TTL decides at ``instant_time``: the partitions to delete (oldest first, at most
    ``max.delete.partitions``), the reference time of every partition it dated, the pending table services
    that block the deletion, and the earliest time another partition expires (``None``: none dated)."""

    instant_time: str
    expired: tuple[str, ...]
    references: Mapping[str, str] = field(default_factory=dict)
    blocked: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    next_expiry: str | None = None
    reason: str = ""

    @property
    def deletes(self) -> bool:
        """Whether the plan deletes anything (something expired and nothing blocks it)."""
        return bool(self.expired) and not self.blocked


def plan_ttl(table: Table, instant_time: str, config: TTLConfig) -> TTLPlan:
    """The partitions that have expired at ``instant_time`` on the view ``table`` (see the module doc)."""
    T = instant_time
    if not config.enabled:
        return TTLPlan(T, (), reason=_off_reason(config))
    if not table.config.partition_fields:
        return TTLPlan(T, (), reason="the table is not partitioned: partition TTL has nothing to delete")
    if not table.timeline.completed():
        return TTLPlan(T, (), reason="no completed instant yet")
    zone = table.config.timeline_timezone
    refs = partition_references(table, T, config)
    expiries = {p: instant_time_plus_millis(r, config.ttl_millis, zone) for p, r in refs.items()}
    now = fix_instant_time(T)
    expired = sorted((p for p, e in expiries.items() if now > e), key=lambda p: (refs[p], p))
    later = [e for e in expiries.values() if not now > e]
    next_expiry = min(later) if later else None
    if not expired:
        upcoming = f"; the next expires after {next_expiry}" if next_expiry else ""
        return TTLPlan(
            T,
            (),
            refs,
            next_expiry=next_expiry,
            reason=f"no partition expired at {T} ({len(refs)} dated, {config.describe()}){upcoming}",
        )
    chosen = tuple(expired[: config.max_delete_partitions])
    blocked = blocking_services(table, frozenset(chosen))
    reason = (
        f"{len(chosen)} of {len(expired)} expired partition(s) ({', '.join(chosen[:5])}"
        f"{', ...' if len(chosen) > 5 else ''}) by {config.describe()}"
    )
    if blocked:
        names = "; ".join(f"{p}: {', '.join(times)}" for p, times in list(blocked.items())[:3])
        reason += (
            f"; held back by pending table services on them ({names}): Hudi refuses to delete a partition "
            "a pending compaction or clustering reads, so the TTL waits for them"
        )
    return TTLPlan(T, chosen, refs, blocked, next_expiry, reason)


def _off_reason(config: TTLConfig) -> str:
    if config.days_retain <= 0:
        return f"partition TTL is off ({DAYS_RETAIN}={config.days_retain})"
    return f"partition TTL deletes nothing ({MAX_DELETE_PARTITIONS}={config.max_delete_partitions})"


# -- the instants ------------------------------------------------------------------------------------------


def requested_metadata(config: TTLConfig, table_version: int) -> RequestedReplaceMetadata:
    """The content of a TTL's ``replacecommit.requested`` (see the module doc)."""
    return RequestedReplaceMetadata(
        operation_type=OPERATION_TYPE,
        clustering_plan=None,
        extra_metadata=config.recorded(),
        version=plan_versions(table_version).requested_replace,
    )


def scheduled_config(table: Table, instant_time: str) -> TTLConfig | None:
    """The settings a TTL instant was scheduled with, or ``None`` when the instant is no TTL of hoodied's
    (another replacecommit, a writer's drop-partition, or gone)."""
    try:
        data = table.storage.read(table.timeline.file_of(instant_time, State.REQUESTED))
        md = decode_requested_replace_metadata(data)
    except (KeyError, FileNotFoundError, CorruptTimelineFile):
        return None
    if md.operation_type != OPERATION_TYPE or STRATEGY_TYPE not in md.extra_metadata:
        return None
    return TTLConfig.from_config(md.extra_metadata)


def pending_ttls(table: Table) -> list[Instant]:
    """hoodied's TTL instants requested or inflight, oldest first."""
    return [
        i
        for i in table.timeline.pending()
        if i.action == REPLACE_COMMIT and scheduled_config(table, i.time) is not None
    ]


def check_deletable(table: Table) -> None:
    """Refuse tables whose metadata table a delete-partition cannot keep consistent: expression indexes, and
    secondary indexes (Hudi refuses ``DELETE_PARTITION`` on those too: "Can not perform operation
    DELETE_PARTITION on secondary index")."""
    refuse_metadata_table(table.storage, table.config, "partition TTL", writer=True)


# -- scheduling --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TTLScheduleResult:
    """What :func:`schedule_ttl` did: the requested instant (or none), the plan it acted on, and why."""

    instant: Instant | None
    plan: TTLPlan | None
    reason: str


def schedule_ttl(
    storage: Storage,
    lock: LockProvider,
    *,
    config: TTLConfig | None = None,
    respect_trigger: bool = True,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
) -> TTLScheduleResult:
    """Request a TTL instant when partitions have expired (not while another TTL is pending).

    The decision is first made on ``view`` (read without the lock) at a provisional time: when nothing
    expired, no instant time is taken and the lock is never held; otherwise it is made again under the lock
    on the view at the instant time, which is then requested.
    """
    config = config or TTLConfig()
    generator = time_generator or InstantTimeGenerator()
    table = view if view is not None else Table.load(storage)
    check_deletable(table)
    if not config.enabled:
        return TTLScheduleResult(None, None, _off_reason(config))
    if respect_trigger and config.inline:
        return TTLScheduleResult(
            None, None, f"the table's writers run partition TTL after every commit ({INLINE}=true)"
        )
    pending = pending_ttls(table)
    if pending:
        return TTLScheduleResult(
            None, None, f"partition TTL {pending[0].time} is still pending; run it first"
        )
    ahead = plan_ttl(table, generator.provisional(table.config, table.timeline), config)
    if not ahead.deletes:
        logger.debug("partition TTL of %s not scheduled: %s", storage.uri, ahead.reason)
        return TTLScheduleResult(None, ahead, ahead.reason)
    with held(lock):
        instant_time = generator.next(storage, table.config)
        table = Table.load(storage)  # the view at the instant time, under the lock
        pending = pending_ttls(table)
        if pending:
            return TTLScheduleResult(None, None, f"partition TTL {pending[0].time} is still pending")
        plan = plan_ttl(table, instant_time, config)
        if not plan.deletes:
            logger.debug("partition TTL of %s not scheduled: %s", storage.uri, plan.reason)
            return TTLScheduleResult(None, plan, plan.reason)
        content = requested_metadata(config, table.config.table_version)
        instant = TimelineWriter(storage, table.config, lock).request(REPLACE_COMMIT, instant_time, content)
    logger.debug("scheduled partition TTL %s on %s: %s", instant_time, storage.uri, plan.reason)
    return TTLScheduleResult(instant, plan, plan.reason)


__all__ = [
    "COMMIT_TIME_KEY",
    "DAYS_RETAIN",
    "DAYS_RETAIN_DEFAULT",
    "INLINE",
    "MAX_DELETE_PARTITIONS",
    "MAX_DELETE_PARTITIONS_DEFAULT",
    "OPERATION_TYPE",
    "PARTITION_SELECTED",
    "STRATEGY_CLASS",
    "STRATEGY_TYPE",
    "Strategy",
    "TTLConfig",
    "TTLPlan",
    "TTLScheduleResult",
    "blocking_services",
    "check_deletable",
    "fix_instant_time",
    "hudi_ttl_millis",
    "instant_time_plus_millis",
    "live_partitions",
    "newest_base_instants",
    "partition_created_time",
    "partition_references",
    "pending_ttls",
    "plan_ttl",
    "requested_metadata",
    "schedule_ttl",
    "scheduled_config",
]
