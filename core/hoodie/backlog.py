"""How far behind a table's services are: the backlog figures the daemon exports, ranks work by and explains.

Measured from the active timeline and the metadata of the writes on it (each instant's metadata read once,
then kept in a :class:`BacklogCache`), so that a table whose timeline did not change costs nothing more:

- ``delta_commits_since_compaction``: completed deltacommits after the last completed compaction (all, when
  none completed); a pending compaction does not reset it, so that a stuck compaction still shows its lag;
- ``log_bytes_since_compaction``: bytes of the log files those deltacommits wrote (``totalWriteBytes`` of
  their log-file write stats): the log data a snapshot read merges until a compaction rewrites it;
- ``commits_since_clean``: completed writes (commit, deltacommit, replacecommit) after the last completed
  clean's ``lastCompletedCommitTimestamp`` (all, when none completed): the count the clean trigger fires on
  (Hudi's ``NUM_COMMITS``), so the figure and ``next clean`` agree; a write that completed while the clean
  was planned counts, though its time is before the clean's;
- ``small_files``: file groups whose newest base file, written after the last completed clustering, is below
  the clustering's ``hoodie.clustering.plan.strategy.small.file.limit``: an upper bound of what a clustering
  could pick up (its plan also leaves out groups the latest writes touched, groups pending compaction or
  clustering, and partitions outside its filter), measured without planning;
- ``active_timeline_instants``: every instant file group on the active timeline (archival bounds it);
- ``metadata_lag_instants``: completed data-table instants later than the metadata table's newest completed
  deltacommit that it has not applied (0 without a metadata table);
- ``last_success``: per service, the instant time and completion time of its newest completed instant.

Walking back for small files stops after :data:`MAX_WRITES_WALKED` writes, so that one table with a huge
active timeline cannot make a poll slow; the figure is then a lower bound (``small_files_capped``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from hoodie.config import TableConfig
from hoodie.errors import HoodieError
from hoodie.metadata.reader import METADATA_TABLE_PATH
from hoodie.table import Table
from hoodie.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    Instant,
    State,
)
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.metadata import decode_clean_metadata
from hoodie.timeline.timeline import Timeline

SMALL_FILE_LIMIT = "hoodie.clustering.plan.strategy.small.file.limit"
SMALL_FILE_LIMIT_DEFAULT = 300 * 1024 * 1024
#: The most completed writes read back for the small-file count of one table.
MAX_WRITES_WALKED = 500
#: Clustering's operation type in a v6 replacecommit's metadata.
CLUSTER_OPERATION = "cluster"
_BASE_SUFFIXES = (".parquet", ".orc", ".hfile")


@dataclass(frozen=True)
class WriteFigures:
    """What one completed write's metadata says, as the backlog needs it."""

    log_bytes: int
    base_files: tuple[tuple[str, int], ...]  # (file id, size) of each base file written
    clustering: bool


@dataclass
class BacklogCache:
    """Per-table memory of what was read for earlier measures (instant time -> figures)."""

    writes: dict[str, WriteFigures] = field(default_factory=dict)
    #: clean instant time -> the ``lastCompletedCommitTimestamp`` its metadata records ("" when none)
    clean_boundaries: dict[str, str] = field(default_factory=dict)

    def forget_except(self, times: set[str]) -> None:
        for t in [t for t in self.writes if t not in times]:
            del self.writes[t]


@dataclass(frozen=True)
class LastSuccess:
    instant: str
    completed: str  # completion time (v8+), else the instant time

    @cached_property
    def completed_at(self) -> dt.datetime | None:
        """The completion time (naive, in the timeline's zone), None when it does not parse; parsed once:
        the daemon asks at every poll."""
        try:
            return parse_instant_time(self.completed[:17])
        except (HoodieError, ValueError):
            return None


@dataclass(frozen=True)
class Backlog:
    """The backlog figures of one table (see the module docstring)."""

    delta_commits_since_compaction: int = 0
    log_bytes_since_compaction: int = 0
    commits_since_clean: int = 0
    small_files: int = 0
    small_files_capped: bool = False
    active_timeline_instants: int = 0
    metadata_lag_instants: int = 0
    last_success: Mapping[str, LastSuccess] = field(default_factory=dict)

    def seconds_since_success(self, now: dt.datetime) -> dict[str, float]:
        """Per service, seconds from its last success to ``now`` (naive, in the table's timeline zone)."""
        out: dict[str, float] = {}
        for service, last in self.last_success.items():
            if last.completed_at is not None:
                out[service] = max(0.0, (now - last.completed_at).total_seconds())
        return out

    def to_json(self, now: dt.datetime | None = None) -> dict[str, object]:
        out: dict[str, object] = {
            "delta_commits_since_compaction": self.delta_commits_since_compaction,
            "log_bytes_since_compaction": self.log_bytes_since_compaction,
            "commits_since_clean": self.commits_since_clean,
            "small_files": self.small_files,
            "active_timeline_instants": self.active_timeline_instants,
            "metadata_lag_instants": self.metadata_lag_instants,
        }
        if now is not None:
            out["seconds_since_success"] = self.seconds_since_success(now)
        return out


def service_of_completed(timeline: Timeline, instant: Instant, clustering: bool) -> str | None:
    """The table service a completed instant was (``None``: a write of a writer)."""
    requested = timeline.requested_action(instant.time)
    if requested == COMPACTION:
        return "compaction"
    if requested == LOG_COMPACTION:
        return "logcompaction"
    if requested == CLUSTERING or (instant.action == REPLACE_COMMIT and clustering):
        return "clustering"
    if instant.action == CLEAN:
        return "clean"
    if instant.action == "indexing":
        return "indexing"
    return None


def measure_backlog(table: Table, settings: Mapping[str, str], cache: BacklogCache) -> Backlog:
    """The backlog of ``table`` (its timeline as loaded); reads the metadata of completed writes not in
    ``cache`` yet, and the metadata table's timeline when the table has one."""
    timeline = table.timeline
    completed = timeline.completed()
    writes = [i for i in completed if i.action in (COMMIT, DELTA_COMMIT, REPLACE_COMMIT)]
    cache.forget_except({i.time for i in writes})

    def figures(instant: Instant) -> WriteFigures:
        found = cache.writes.get(instant.time)
        if found is None:
            found = _read_figures(table, instant)
            cache.writes[instant.time] = found
        return found

    last_compaction = next((i.time for i in reversed(completed) if timeline.was_compaction(i.time)), None)
    deltas = [
        i
        for i in writes
        if i.action == DELTA_COMMIT
        and timeline.requested_action(i.time) == DELTA_COMMIT
        and (last_compaction is None or i.time > last_compaction)
    ]
    log_bytes = sum(figures(i).log_bytes for i in deltas)

    commits_since_clean = commits_since_last_clean(table, cache.clean_boundaries)

    limit = _int(settings.get(SMALL_FILE_LIMIT), SMALL_FILE_LIMIT_DEFAULT)
    newest: dict[str, int] = {}
    capped = False
    for walked, instant in enumerate(reversed(writes)):
        if walked >= MAX_WRITES_WALKED:
            capped = True
            break
        f = figures(instant)
        if f.clustering:
            break
        for file_id, size in f.base_files:
            newest.setdefault(file_id, size)
    small = sum(1 for size in newest.values() if size < limit)

    last: dict[str, LastSuccess] = {}
    for instant in completed:
        clustering = instant.action == REPLACE_COMMIT and (
            timeline.requested_action(instant.time) == CLUSTERING
            or (instant.time in cache.writes and cache.writes[instant.time].clustering)
        )
        service = service_of_completed(timeline, instant, clustering)
        if service is not None:
            last[service] = LastSuccess(instant.time, instant.completion_time or instant.time)

    return Backlog(
        delta_commits_since_compaction=len(deltas),
        log_bytes_since_compaction=log_bytes,
        commits_since_clean=commits_since_clean,
        small_files=small,
        small_files_capped=capped,
        active_timeline_instants=len(timeline),
        metadata_lag_instants=metadata_lag(table),
        last_success=last,
    )


def commits_since_last_clean(table: Table, boundaries: dict[str, str] | None = None) -> int:
    """Completed writes after the last completed clean's ``lastCompletedCommitTimestamp`` (all, if none):
    what the clean trigger counts (Hudi's ``NUM_COMMITS``). ``boundaries`` keeps each clean's boundary once
    read (its completed file is then not read again)."""
    writes = table.timeline.completed_writes()
    last = next((i for i in reversed(table.timeline.completed()) if i.action == CLEAN), None)
    if last is None:
        return len(writes)
    boundary = boundaries.get(last.time) if boundaries is not None else None
    if boundary is None:
        data = table.storage.read(table.timeline.file_of(last.time, State.COMPLETED))
        boundary = decode_clean_metadata(data).last_completed_commit_timestamp or "" if data else ""
        if boundaries is not None:
            boundaries.clear()  # only the last clean's is needed again
            boundaries[last.time] = boundary
    if not boundary:
        return len(writes)
    return sum(1 for w in writes if w.time > boundary)


def metadata_lag(table: Table) -> int:
    """Completed data-table instants after the metadata table's newest completed deltacommit that it has
    not applied (a metadata-table deltacommit carries the data instant's time); 0 without a metadata table
    or when it cannot be read (the poll goes on; the metadata table's own readers report damage)."""
    if not table.config.metadata_partitions:
        return 0
    try:
        storage = table.storage.child(METADATA_TABLE_PATH)
        mdt = Timeline.load(storage, TableConfig.load(storage))
    except (HoodieError, OSError):
        return 0
    applied = {i.time for i in mdt.completed() if i.action == DELTA_COMMIT}
    if not applied:
        return len(table.timeline.completed())
    newest = max(applied)
    return sum(1 for i in table.timeline.completed() if i.time > newest and i.time not in applied)


def _read_figures(table: Table, instant: Instant) -> WriteFigures:
    try:
        metadata = table.commit_metadata(instant)
    except (HoodieError, KeyError, FileNotFoundError):
        return WriteFigures(0, (), False)
    log_bytes = 0
    base: list[tuple[str, int]] = []
    for stat in metadata.write_stats:
        name = stat.file_name or ""
        if stat.is_delta or ".log." in name:
            log_bytes += stat.total_write_bytes or stat.file_size_in_bytes or 0
        elif name.endswith(_BASE_SUFFIXES) and stat.file_id:
            base.append((stat.file_id, stat.file_size_in_bytes or stat.total_write_bytes or 0))
    clustering = instant.action == REPLACE_COMMIT and (
        table.timeline.requested_action(instant.time) == CLUSTERING
        or (metadata.operation_type or "").lower() == CLUSTER_OPERATION
    )
    return WriteFigures(log_bytes, tuple(base), clustering)


def _int(raw: str | None, default: int) -> int:
    try:
        return int(raw) if raw is not None and raw.strip() else default
    except ValueError:
        return default


__all__ = [
    "MAX_WRITES_WALKED",
    "Backlog",
    "BacklogCache",
    "LastSuccess",
    "WriteFigures",
    "measure_backlog",
    "metadata_lag",
    "service_of_completed",
]
