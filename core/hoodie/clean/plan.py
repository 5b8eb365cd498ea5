"""Clean planning (pure) and scheduling (writes ``clean.requested`` under the table lock).

:func:`plan_clean` is a function of a table view, the configuration and "now": it picks the file slices a
clean may delete and returns a :class:`~hoodie.timeline.metadata.CleanerPlan`, or no plan and the reason.
:func:`schedule_clean` evaluates the trigger, takes a fresh instant time under the table lock, plans on the
view at that time and writes the plan.

Policies (Hudi's ``CleanPlanner``; keys and defaults in :class:`CleanConfig`):

- ``KEEP_LATEST_COMMITS`` (default, ``hoodie.clean.commits.retained`` = 10): the earliest commit to retain
  is the N-th latest completed write (commit, deltacommit, replacecommit), but never later than the
  earliest pending write, compaction or clustering. In each file group, every slice whose base instant is
  before it is deleted, except the group's latest slice and the latest slice before it (what a time-travel
  read of the earliest retained commit reads). Nothing is cleaned while there are at most N commits.
- ``KEEP_LATEST_BY_HOURS`` (``hoodie.clean.hours.retained`` = 24): the same with the earliest completed write
  requested at or after now minus N hours (in the table's timeline timezone).
- ``KEEP_LATEST_FILE_VERSIONS`` (``hoodie.clean.fileversions.retained`` = 3): each file group keeps its N
  latest slices (one fewer besides the slice of a pending compaction, which is always kept); no time-travel
  guarantee.
- With no policy set, the policy follows the retention key that is set (Hudi 0.14+), else the default.

Whatever the policy, a clean never deletes: the latest slice of a file group; a slice a pending compaction,
log compaction or clustering reads; a slice holding a file of a completed savepoint; files of uncommitted
writes (they are not in the view; failed writes are rolled back, see :mod:`hoodie.write.failed_writes`).
File groups replaced by a completed replacecommit go entirely (every slice, savepointed files excepted)
once the replacecommit is before the earliest commit to retain (``KEEP_LATEST_FILE_VERSIONS``: at once).
A partition whose file groups are all replaced (a ``DELETE_PARTITION`` replaced them all) goes with them, as
Hudi's ``CleanPlanner`` decides (:func:`emptied_partitions`): it is listed in the plan's
``partitionsToBeDeleted``, and the clean deletes its folder after its files.

Trigger (``hoodie.clean.trigger.strategy`` = ``NUM_COMMITS``): a clean is scheduled once at least
``hoodie.clean.max.commits`` (1) writes completed after the last clean's ``lastCompletedCommitTimestamp``.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from hoodie.backlog import commits_since_last_clean
from hoodie.errors import InvalidWriteConfig
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroup, FileGroupId, FileSlice
from hoodie.lock import LockProvider, held
from hoodie.log.log_file import LogFile
from hoodie.metadata_table import refuse_metadata_table
from hoodie.settings import int_setting, setting
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMPACTION,
    LOG_COMPACTION,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
)
from hoodie.timeline.instant_time import InstantTimeGenerator, format_instant_time
from hoodie.timeline.metadata import (
    ActionInstant,
    CleanerPlan,
    CleanFileInfo,
    decode_compaction_plan,
    decode_savepoint_metadata,
    encode_cleaner_plan,
)
from hoodie.timeline.writer import TimelineWriter

logger = logging.getLogger(__name__)

POLICY = "hoodie.clean.policy"
POLICY_LEGACY = "hoodie.cleaner.policy"
COMMITS_RETAINED = "hoodie.clean.commits.retained"
COMMITS_RETAINED_LEGACY = "hoodie.cleaner.commits.retained"
COMMITS_RETAINED_DEFAULT = 10
HOURS_RETAINED = "hoodie.clean.hours.retained"
HOURS_RETAINED_LEGACY = "hoodie.cleaner.hours.retained"
HOURS_RETAINED_DEFAULT = 24
FILE_VERSIONS_RETAINED = "hoodie.clean.fileversions.retained"
FILE_VERSIONS_RETAINED_LEGACY = "hoodie.cleaner.fileversions.retained"
FILE_VERSIONS_RETAINED_DEFAULT = 3
TRIGGER_STRATEGY = "hoodie.clean.trigger.strategy"
MAX_COMMITS = "hoodie.clean.max.commits"
MAX_COMMITS_DEFAULT = 1
FAILED_WRITES_POLICY = "hoodie.clean.failed.writes.policy"
FAILED_WRITES_POLICY_LEGACY = "hoodie.cleaner.policy.failed.writes"


class CleanPolicy(StrEnum):
    KEEP_LATEST_COMMITS = "KEEP_LATEST_COMMITS"
    KEEP_LATEST_BY_HOURS = "KEEP_LATEST_BY_HOURS"
    KEEP_LATEST_FILE_VERSIONS = "KEEP_LATEST_FILE_VERSIONS"


class FailedWritesPolicy(StrEnum):
    """Who rolls back failed writes: the next writer (``EAGER``, single writer) or the clean (``LAZY``,
    multi-writer: writes whose heartbeat expired)."""

    EAGER = "EAGER"
    LAZY = "LAZY"
    NEVER = "NEVER"


@dataclass(frozen=True)
class CleanConfig:
    """How cleans are planned and triggered (Hudi's keys above; defaults as Hudi's)."""

    policy: CleanPolicy = CleanPolicy.KEEP_LATEST_COMMITS
    commits_retained: int = COMMITS_RETAINED_DEFAULT
    hours_retained: int = HOURS_RETAINED_DEFAULT
    file_versions_retained: int = FILE_VERSIONS_RETAINED_DEFAULT
    max_commits: int = MAX_COMMITS_DEFAULT
    failed_writes: FailedWritesPolicy = FailedWritesPolicy.EAGER

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> CleanConfig:
        """Read the keys above (Hudi 1.x names, or the 0.x ``hoodie.cleaner.*`` ones) from a configuration."""
        commits = int_setting(
            config, COMMITS_RETAINED, COMMITS_RETAINED_DEFAULT, aliases=(COMMITS_RETAINED_LEGACY,)
        )
        hours = int_setting(config, HOURS_RETAINED, HOURS_RETAINED_DEFAULT, aliases=(HOURS_RETAINED_LEGACY,))
        versions = int_setting(
            config,
            FILE_VERSIONS_RETAINED,
            FILE_VERSIONS_RETAINED_DEFAULT,
            aliases=(FILE_VERSIONS_RETAINED_LEGACY,),
        )
        raw_policy = setting(config, POLICY, (POLICY_LEGACY,))
        if raw_policy is not None:
            policy = _enum(CleanPolicy, raw_policy, POLICY)
        elif setting(config, COMMITS_RETAINED, (COMMITS_RETAINED_LEGACY,)) is not None:
            policy = CleanPolicy.KEEP_LATEST_COMMITS
        elif setting(config, HOURS_RETAINED, (HOURS_RETAINED_LEGACY,)) is not None:
            policy = CleanPolicy.KEEP_LATEST_BY_HOURS
        elif setting(config, FILE_VERSIONS_RETAINED, (FILE_VERSIONS_RETAINED_LEGACY,)) is not None:
            policy = CleanPolicy.KEEP_LATEST_FILE_VERSIONS
        else:
            policy = CleanPolicy.KEEP_LATEST_COMMITS
        trigger = config.get(TRIGGER_STRATEGY)
        if trigger is not None and trigger.strip().upper() != "NUM_COMMITS":
            raise InvalidWriteConfig(
                f"{TRIGGER_STRATEGY}={trigger!r}: Hudi's only clean trigger is NUM_COMMITS"
            )
        raw_failed = setting(config, FAILED_WRITES_POLICY, (FAILED_WRITES_POLICY_LEGACY,))
        failed = (
            _enum(FailedWritesPolicy, raw_failed, FAILED_WRITES_POLICY)
            if raw_failed is not None
            else FailedWritesPolicy.EAGER
        )
        return cls(
            policy=policy,
            commits_retained=commits,
            hours_retained=hours,
            file_versions_retained=versions,
            max_commits=int_setting(config, MAX_COMMITS, MAX_COMMITS_DEFAULT),
            failed_writes=failed,
        )

    def __post_init__(self) -> None:
        if self.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS and self.file_versions_retained < 1:
            raise InvalidWriteConfig(
                f"{FILE_VERSIONS_RETAINED}={self.file_versions_retained}: must keep at least one version"
            )


@dataclass(frozen=True)
class CleanPlanResult:
    """A plan, or ``None`` with the reason nothing was planned; ``bytes_to_delete`` as listed at planning."""

    plan: CleanerPlan | None
    reason: str
    bytes_to_delete: int = 0


@dataclass(frozen=True)
class CleanScheduleResult:
    """What :func:`schedule_clean` did: the requested instant (or none) and why."""

    instant: Instant | None
    plan: CleanerPlan | None
    reason: str
    bytes_to_delete: int = 0


# -- trigger -----------------------------------------------------------------------------------------------


def clean_due(table: Table, config: CleanConfig) -> tuple[bool, str]:
    """Whether the trigger fires, and why (Hudi's ``NUM_COMMITS``)."""
    n = commits_since_last_clean(table)
    if n >= config.max_commits:
        return True, f"{n} commit(s) since the last clean (>= {MAX_COMMITS}={config.max_commits})"
    return False, f"{n} commit(s) since the last clean (< {MAX_COMMITS}={config.max_commits})"


# -- planning ----------------------------------------------------------------------------------------------


def earliest_commit_to_retain(table: Table, config: CleanConfig, now: dt.datetime) -> Instant | None:
    """The earliest completed write every retained time travel may start at (``None``: retain all)."""
    timeline = table.timeline
    writes = timeline.completed_writes()
    if config.policy is CleanPolicy.KEEP_LATEST_COMMITS:
        if len(writes) <= config.commits_retained:
            return None
        nth = writes[len(writes) - config.commits_retained]
        pending = [
            i
            for i in timeline.pending()
            if i.action in WRITE_ACTIONS or i.action in (COMPACTION, LOG_COMPACTION, CLUSTERING)
        ]
        if pending and nth.time > pending[0].time:
            before = [w for w in writes if w.time < pending[0].time]
            return before[-1] if before else None
        return nth
    if config.policy is CleanPolicy.KEEP_LATEST_BY_HOURS:
        bound = format_instant_time(now - dt.timedelta(hours=config.hours_retained))
        return next((w for w in writes if w.time >= bound), None)
    return None


def _protected_slices(table: Table) -> dict[FileGroupId, set[str]]:
    """Base instants of the slices pending compactions, log compactions and clusterings read."""
    out: dict[FileGroupId, set[str]] = {}
    for instant in table.timeline.pending():
        if instant.action in (COMPACTION, LOG_COMPACTION):
            data = table.storage.read(table.timeline.file_of(instant.time, State.REQUESTED))
            for op in decode_compaction_plan(data).operations:
                out.setdefault(FileGroupId(op.partition_path, op.file_id), set()).add(op.base_instant_time)
    for gid in table.pending_clustering_file_groups():
        out.setdefault(gid, set()).add("*")
    return out


def savepointed_files(table: Table) -> set[str]:
    """``partition/name`` of every file a completed savepoint holds."""
    out: set[str] = set()
    for instant in table.timeline.completed():
        if instant.action != SAVEPOINT:
            continue
        data = table.storage.read(table.timeline.file_of(instant.time, State.COMPLETED, action=SAVEPOINT))
        md = decode_savepoint_metadata(data)
        for partition, pmd in md.partition_metadata.items():
            for name in pmd.savepoint_data_file:
                base = name.rsplit("/", 1)[-1]
                out.add(f"{partition}/{base}" if partition else base)
    return out


def _slice_files(s: FileSlice) -> list[tuple[str, int]]:
    """(``partition/name``, size) of a slice's files."""
    p = s.group.partition_path
    join = (lambda n: f"{p}/{n}") if p else (lambda n: n)
    out = []
    if s.base_file is not None:
        out.append((join(s.base_file.file_name), s.base_file_size))
    out.extend((join(lf.file_name), size) for lf, size in zip(s.log_files, s.log_file_sizes, strict=False))
    return out


def plan_clean(table: Table, config: CleanConfig, now: dt.datetime) -> CleanPlanResult:
    """The clean plan of the view ``table`` at ``now`` (see the module doc)."""
    timeline = table.timeline
    writes = timeline.completed_writes()
    if not writes:
        return CleanPlanResult(None, "no completed write to clean after")
    last_completed = writes[-1].time
    ectr = earliest_commit_to_retain(table, config, now)
    by_commits = config.policy is not CleanPolicy.KEEP_LATEST_FILE_VERSIONS
    if by_commits and ectr is None:
        return CleanPlanResult(None, _retain_all_reason(config, len(writes)))
    protected = _protected_slices(table)
    saved = savepointed_files(table)
    replace_times = table.replace_times()
    groups = table.file_groups()

    to_delete: dict[str, list[tuple[str, int]]] = {}

    def delete_slice(s: FileSlice) -> None:
        files = _slice_files(s)
        if any(path in saved for path, _ in files):
            return
        to_delete.setdefault(s.group.partition_path, []).extend(files)

    for gid, group in sorted(groups.items(), key=lambda kv: (kv[0].partition_path, kv[0].file_id)):
        slices = list(reversed(group.ordered()))  # latest first
        if not slices:
            continue
        keep = protected.get(gid, set())
        replaced_at = replace_times.get(gid)
        if replaced_at is not None and "*" not in keep:
            if not by_commits or (ectr is not None and replaced_at < ectr.time):
                for s in slices:
                    if s.base_instant not in keep:
                        delete_slice(s)
            continue
        if "*" in keep:
            continue
        if by_commits:
            assert ectr is not None
            latest = slices[0].base_instant
            before = next((s.base_instant for s in slices if s.base_instant < ectr.time), None)
            for s in slices:
                if s.base_instant in (latest, before) or s.base_instant in keep:
                    continue
                if s.base_instant < ectr.time:
                    delete_slice(s)
        else:
            # Hudi counts the slice a pending compaction reads as one of the versions kept; the latest slice
            # is kept whatever the count (a reader's snapshot reads it).
            candidates = [s for s in slices if s.base_instant not in keep]
            versions = config.file_versions_retained - (1 if keep else 0)
            for s in candidates[max(versions, 0) :]:
                if s.base_instant != slices[0].base_instant:
                    delete_slice(s)

    if not to_delete:
        what = f"earliest commit to retain {ectr.time}" if ectr is not None else config.policy.value
        return CleanPlanResult(None, f"nothing to clean ({config.policy.value}, {what})")
    storage = table.storage
    emptied = emptied_partitions(table, groups, replace_times, ectr if by_commits else None, saved)
    plan = CleanerPlan(
        policy=config.policy.value,
        earliest_instant_to_retain=(
            ActionInstant(ectr.time, ectr.action, "COMPLETED") if ectr is not None else None
        ),
        last_completed_commit_timestamp=last_completed,
        files_to_be_deleted_per_partition={},
        file_paths_to_be_deleted_per_partition={
            partition: tuple(CleanFileInfo(storage.full_path(path), False) for path, _ in files)
            for partition, files in sorted(to_delete.items())
        },
        partitions_to_be_deleted=emptied,
    )
    n = sum(len(f) for f in to_delete.values())
    size = sum(s for files in to_delete.values() for _, s in files)
    reason = f"{n} file(s), {size} byte(s) in {len(to_delete)} partition(s) by {config.policy.value}"
    if ectr is not None:
        reason += f", earliest commit to retain {ectr.time}"
    return CleanPlanResult(plan, reason, size)


def emptied_partitions(
    table: Table,
    groups: Mapping[FileGroupId, FileGroup],
    replace_times: Mapping[FileGroupId, str],
    ectr: Instant | None,
    saved: set[str],
) -> tuple[str, ...]:
    """The partitions a clean deletes (Hudi's ``CleanPlanner``: ``toDeletePartition``): no file group of the
    partition is live (every one in the view was replaced), none was replaced at or after the earliest
    commit to retain (``ectr``; by-commits policies only, so their files go in this same clean), and its
    listing holds no data file of another file group (a pending write's: Hudi's ``hasPendingFiles``). A
    partition still holding a savepointed file is kept: Hudi would delete its folder, savepointed files
    and all."""
    by_partition: dict[str, list[FileGroupId]] = {}
    for gid in groups:
        by_partition.setdefault(gid.partition_path, []).append(gid)
    out = []
    for partition, gids in sorted(by_partition.items()):
        if any(gid not in replace_times for gid in gids):
            continue
        if ectr is not None and any(replace_times[gid] >= ectr.time for gid in gids):
            continue
        prefix = f"{partition}/" if partition else ""
        if any(p.startswith(prefix) and "/" not in p[len(prefix) :] for p in saved):
            continue
        if _other_data_files(table.storage, partition, replace_times):
            continue
        out.append(partition)
    return tuple(out)


def _other_data_files(storage: Storage, partition: str, replaced: Mapping[FileGroupId, str]) -> bool:
    """Whether the partition's folder holds a data file of a file group that is not replaced."""
    for info in storage.list(partition):
        if info.is_dir:
            continue
        name = info.name
        parsed = BaseFile.try_parse(name) or LogFile.try_parse(name)
        if parsed is not None and FileGroupId(partition, parsed.file_id) not in replaced:
            return True
    return False


def _retain_all_reason(config: CleanConfig, n_writes: int) -> str:
    if config.policy is CleanPolicy.KEEP_LATEST_COMMITS:
        return (
            f"{n_writes} completed commit(s), at most {COMMITS_RETAINED}={config.commits_retained} "
            "(or pending writes hold the earliest): nothing to clean"
        )
    return f"no completed commit older than {HOURS_RETAINED}={config.hours_retained} hours: nothing to clean"


# -- scheduling --------------------------------------------------------------------------------------------


def pending_cleans(table: Table) -> list[Instant]:
    """Cleans requested or inflight, oldest first."""
    return [i for i in table.timeline.pending() if i.action == CLEAN]


def schedule_clean(
    storage: Storage,
    lock: LockProvider,
    *,
    config: CleanConfig | None = None,
    respect_trigger: bool = False,
    now: dt.datetime | None = None,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
) -> CleanScheduleResult:
    """Plan and request a clean now (not while another clean is pending).

    With ``respect_trigger`` the trigger must fire first (hoodied's own scheduling); without, a plan is made
    whenever there is something to clean (``hoodied clean --mode schedule``). Trigger and plan are first
    decided on a view read without the lock: when there is nothing to clean, no instant time is taken and
    the lock is never held; otherwise the plan is made again under the lock at the instant time.
    """
    config = config or CleanConfig()
    generator = time_generator or InstantTimeGenerator()

    def decide(table: Table) -> CleanScheduleResult | CleanPlanResult:
        refuse_metadata_table(storage, table.config, "clean")
        pending = pending_cleans(table)
        if pending:
            return CleanScheduleResult(None, None, f"clean {pending[0].time} is still pending; run it first")
        if respect_trigger:
            due, why = clean_due(table, config)
            if not due:
                return CleanScheduleResult(None, None, why)
        result = plan_clean(table, config, now or generator.now_in_zone(table.config))
        return result if result.plan is not None else CleanScheduleResult(None, None, result.reason)

    table = view if view is not None else Table.load(storage)
    ahead = decide(table)
    if isinstance(ahead, CleanScheduleResult):
        logger.debug("clean of %s not scheduled: %s", storage.uri, ahead.reason)
        return ahead
    with held(lock):
        instant_time = generator.next(storage, table.config)
        table = Table.load(storage)  # the view at the instant time, under the lock
        result = decide(table)
        if isinstance(result, CleanScheduleResult):
            logger.debug("clean of %s not scheduled: %s", storage.uri, result.reason)
            return result
        assert result.plan is not None
        content = encode_cleaner_plan(result.plan, table_version=table.config.table_version)
        instant = TimelineWriter(storage, table.config, lock).request(CLEAN, instant_time, content)
    logger.debug("scheduled clean %s on %s: %s", instant_time, storage.uri, result.reason)
    return CleanScheduleResult(instant, result.plan, result.reason, result.bytes_to_delete)


_T = TypeVar("_T", CleanPolicy, FailedWritesPolicy)


def _enum(kind: type[_T], raw: str, key: str) -> _T:
    try:
        return kind(raw.strip().upper())
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise InvalidWriteConfig(f"{key}={raw!r}: not one of {known}") from None


__all__ = [
    "CleanConfig",
    "CleanPlanResult",
    "CleanPolicy",
    "CleanScheduleResult",
    "FailedWritesPolicy",
    "clean_due",
    "commits_since_last_clean",
    "earliest_commit_to_retain",
    "emptied_partitions",
    "pending_cleans",
    "plan_clean",
    "savepointed_files",
    "schedule_clean",
]
