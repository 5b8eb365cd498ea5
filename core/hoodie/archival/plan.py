"""Which instants archival moves out of the active timeline: Hudi's rules (``TimelineArchiverV2`` for timeline
layout 2, table versions 8+; ``TimelineArchiverV1`` for layout 1, version 6), as a pure function of a view.

Commits (completed ``commit``, ``deltacommit``, ``replacecommit``: compactions and clusterings included) are
archived only while more than ``hoodie.keep.max.commits`` (30) are active, down to
``hoodie.keep.min.commits`` (20), oldest first. When the cleaner retains more than that (its earliest commit
to retain, ECTR, computed from the clean settings as ``ArchivalUtils`` does, "now" being the latest commit's
time), the minimum grows to the commits after the ECTR plus 2, and the maximum with it. No commit is archived
at or after any of:

- the earliest pending write (commit, deltacommit, compaction, log compaction, replacecommit, clustering):
  the latest completed commit before it, or the pending instant itself, stays, so a rollback or the
  pending service still finds what it needs;
- for MERGE_ON_READ with a commit-count compaction trigger, the deltacommits the next compaction will count
  (``CompactionUtils.getEarliestInstantToRetainForCompaction``);
- replacecommits and clusterings the last clean has not yet cleaned past (their replaced file groups must be
  gone before the instant that hides them leaves the timeline, or readers would see them again):
  ``ClusteringUtils.getEarliestInstantToRetainForClustering``, with the savepoint guard of its clean plan;
- where the table has a metadata table: the first commit that completed after the metadata table's latest
  compaction (none yet: nothing is archived), so that the metadata table never holds log records of
  instants the data timeline no longer knows; layout 1 applies it to every candidate, cleans included;
- the first savepoint (``hoodie.archive.beyond.savepoint`` false, the default), or with it true exactly the
  savepointed commits are kept;
- ours, not Hudi's: a MERGE_ON_READ deltacommit that completed after the compaction of its file slice was
  planned, while its log file lies in a latest slice (:func:`_earliest_straddling_log`);
- ours, not Hudi's: an instant a takeover removed recently while voiding attempts whose held requests may
  still land files (:mod:`hoodie.write.late_files`): the latest completed commit before it stays, as for a
  pending write, so such a file is not taken for an archived commit's before it is swept.

Then completed cleans and rollbacks older than the newest archived commit go too (layout 1: per action, those
beyond ``hoodie.keep.max.commits`` down to the minimum). Savepoints, restores and indexing instants are never
archived. For a metadata table, the data table's first commit and earliest pending instant bound the archive
as well (``TimelineUtils.getEarliestInstantForMetadataArchival``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hoodie.clean.plan import CleanConfig, CleanPolicy, earliest_commit_to_retain
from hoodie.compaction.trigger import TriggerConfig, TriggerStrategy
from hoodie.config import TableType
from hoodie.errors import InvalidInstant, InvalidWriteConfig
from hoodie.settings import bool_setting, int_setting
from hoodie.table import Table
from hoodie.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    WRITE_ACTIONS,
    Instant,
    State,
)
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.metadata import CleanerPlan
from hoodie.timeline.timeline import Timeline

MIN_COMMITS = "hoodie.keep.min.commits"
MIN_COMMITS_DEFAULT = 20
MAX_COMMITS = "hoodie.keep.max.commits"
MAX_COMMITS_DEFAULT = 30
BEYOND_SAVEPOINT = "hoodie.archive.beyond.savepoint"
AUTOMATIC = "hoodie.archive.automatic"
#: LSM history: files of one level merged into the next once this many are there.
TIMELINE_COMPACTION_BATCH = "hoodie.timeline.compaction.batch.size"
TIMELINE_COMPACTION_BATCH_DEFAULT = 10
#: Archive log (v6): records per Avro data block.
ARCHIVAL_BATCH = "hoodie.commits.archival.batch"
ARCHIVAL_BATCH_DEFAULT = 10
#: Hudi's key for the savepoints a clean plan kept files for (comma-separated instant times).
SAVEPOINTED_TIMESTAMPS = "savepointed_timestamps"

#: The actions of pending instants that hold archival back (Hudi's write timeline).
_PENDING_WRITE_ACTIONS = frozenset(WRITE_ACTIONS) | {COMPACTION, LOG_COMPACTION, CLUSTERING}


@dataclass(frozen=True)
class ArchivalConfig:
    """Hudi's archival keys (``HoodieArchivalConfig``), defaults as Hudi's."""

    min_commits: int = MIN_COMMITS_DEFAULT
    max_commits: int = MAX_COMMITS_DEFAULT
    beyond_savepoint: bool = False
    automatic: bool = True
    timeline_compaction_batch: int = TIMELINE_COMPACTION_BATCH_DEFAULT
    archival_batch: int = ARCHIVAL_BATCH_DEFAULT

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ArchivalConfig:
        """Read the keys above; Hudi's own check applies: the maximum must exceed the minimum, and the minimum
        must exceed the commits the cleaner retains (else archival would take what the cleaner keeps)."""
        archival = cls(
            min_commits=int_setting(config, MIN_COMMITS, MIN_COMMITS_DEFAULT, minimum=1),
            max_commits=int_setting(config, MAX_COMMITS, MAX_COMMITS_DEFAULT, minimum=1),
            beyond_savepoint=bool_setting(config, BEYOND_SAVEPOINT, False),
            automatic=bool_setting(config, AUTOMATIC, True),
            timeline_compaction_batch=int_setting(
                config, TIMELINE_COMPACTION_BATCH, TIMELINE_COMPACTION_BATCH_DEFAULT, minimum=2
            ),
            archival_batch=int_setting(config, ARCHIVAL_BATCH, ARCHIVAL_BATCH_DEFAULT, minimum=1),
        )
        if archival.max_commits <= archival.min_commits:
            raise InvalidWriteConfig(
                f"{MAX_COMMITS}={archival.max_commits} must be greater than "
                f"{MIN_COMMITS}={archival.min_commits}"
            )
        clean = CleanConfig.from_config(config)
        if clean.policy is CleanPolicy.KEEP_LATEST_COMMITS and archival.min_commits <= clean.commits_retained:
            raise InvalidWriteConfig(
                f"{MIN_COMMITS}={archival.min_commits} must be greater than the commits the cleaner retains "
                f"(hoodie.clean.commits.retained={clean.commits_retained}), as Hudi requires"
            )
        return archival


@dataclass(frozen=True)
class MetadataTableState:
    """What archival needs to know of the table's metadata table: whether there is one, and the requested time
    of its latest completed compaction (``None``: none yet)."""

    present: bool
    latest_compaction: str | None = None


@dataclass(frozen=True)
class ArchivalInputs:
    """Everything the rules read, loaded once (:func:`archival_inputs`): the table's view, the cleaner plan of
    its latest completed clean, its metadata table's state, and for a metadata table the data table's
    timeline."""

    table: Table
    last_clean_plan: CleanerPlan | None
    metadata_table: MetadataTableState
    data_timeline: Timeline | None = None
    #: Instants removed within the late-request horizon whose voided attempts may land files late.
    removed_with_late_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class ArchivalPlan:
    """The instants to archive (latest state each, oldest first) and why (or why none)."""

    instants: tuple[Instant, ...]
    reason: str
    min_commits: int
    max_commits: int


def commits(timeline: Timeline) -> list[Instant]:
    """The completed commits archival counts (Hudi's completed commits timeline)."""
    return timeline.completed_writes()


def keep_bounds(table: Table, config: ArchivalConfig, clean: CleanConfig) -> tuple[int, int]:
    """``(min, max)`` commits to keep: the configured ones, raised to the cleaner's retention
    (``ArchivalUtils.getMinAndMaxInstantsToKeep``)."""
    done = commits(table.timeline)
    ectr = earliest_commit_to_retain(table, clean, _newest_calendar_time(done))
    if ectr is None:
        return config.min_commits, config.max_commits
    by_cleaning = sum(1 for c in done if c.time > ectr.time) + 2
    if config.min_commits < by_cleaning:
        return by_cleaning, by_cleaning + config.max_commits - config.min_commits
    return config.min_commits, config.max_commits


def _newest_calendar_time(done: Sequence[Instant]) -> dt.datetime:
    """The newest completed commit's time, as a calendar time (now when there is none). A metadata table
    starts with instants below every calendar time (``00000000000000000``, ``...010``: its initialization),
    which say nothing of when now is: they are passed over (found by the chaos campaign: archival of a
    table whose metadata table had just been created failed with ``InvalidInstant``)."""
    for instant in reversed(done):
        try:
            return parse_instant_time(instant.time)
        except InvalidInstant:
            continue
    return dt.datetime.now()


def plan_archival(
    inputs: ArchivalInputs,
    config: ArchivalConfig,
    clean: CleanConfig,
    trigger: TriggerConfig,
) -> ArchivalPlan:
    """The instants to archive now, by the rules of the module doc (pure: reads ``inputs`` only)."""
    table = inputs.table
    timeline = table.timeline
    low, high = keep_bounds(table, config, clean)
    done = commits(timeline)
    if len(done) <= high:
        return ArchivalPlan((), f"{len(done)} commit(s) active (<= {high} to keep)", low, high)
    layout = timeline.layout_version
    bounds = _boundaries(inputs, clean, trigger)
    if bounds is None:
        return ArchivalPlan((), "the metadata table has no compaction yet: nothing is archived", low, high)
    savepoints = [i.time for i in timeline.completed() if i.action == SAVEPOINT]
    if config.beyond_savepoint:
        eligible = [c for c in done if c.time not in savepoints]
    else:
        eligible = [c for c in done if not savepoints or c.time < savepoints[0]]
    if bounds:
        eligible = [c for c in eligible if all(c.time < b for b in bounds.values())]
    chosen = eligible[: len(done) - low]
    if layout >= 2:
        if chosen:
            newest = chosen[-1].time
            chosen += [i for i in timeline.completed() if i.action in (CLEAN, ROLLBACK) and i.time < newest]
    else:
        chosen += _v1_clean_and_rollback(timeline, low, high, bounds.get("metadata table"))
    chosen.sort(key=lambda i: i.time)
    if not chosen:
        held = ", ".join(f"{name} at {time}" for name, time in sorted(bounds.items(), key=lambda kv: kv[1]))
        return ArchivalPlan(
            (),
            f"{len(done)} commit(s) active, but none may go" + (f" (held by {held})" if held else ""),
            low,
            high,
        )
    n_commits = sum(1 for i in chosen if i.action in WRITE_ACTIONS)
    reason = (
        f"{len(done)} commit(s) active (> {high}): archiving {n_commits} commit(s) and "
        f"{len(chosen) - n_commits} clean/rollback instant(s), keeping at least {low}"
    )
    return ArchivalPlan(tuple(chosen), reason, low, high)


def _boundaries(inputs: ArchivalInputs, clean: CleanConfig, trigger: TriggerConfig) -> dict[str, str] | None:
    """Each rule's first instant time that must stay (exclusive bound), by rule name; ``None`` when the
    metadata table forbids archiving anything yet."""
    table = inputs.table
    timeline = table.timeline
    done = commits(timeline)
    out: dict[str, str] = {}
    pending = [i for i in timeline.pending() if i.action in _PENDING_WRITE_ACTIONS]
    if pending:
        before = [c for c in done if c.time < pending[0].time]
        out["the earliest pending write"] = before[-1].time if before else pending[0].time
    if inputs.removed_with_late_files:
        removed = min(inputs.removed_with_late_files)
        before = [c for c in done if c.time < removed]
        out["an instant removed while late files may land"] = before[-1].time if before else removed
    if table.config.table_type is TableType.MERGE_ON_READ and trigger.strategy in (
        TriggerStrategy.NUM_COMMITS,
        TriggerStrategy.NUM_AND_TIME,
    ):
        compaction = _earliest_for_compaction(timeline, trigger.max_delta_commits)
        if compaction is not None:
            out["the next compaction's deltacommits"] = compaction
    clustering = _earliest_for_clustering(timeline, inputs.last_clean_plan, clean)
    if clustering is not None:
        out["replacecommits not yet cleaned"] = clustering
    if inputs.data_timeline is None:
        straddling = _earliest_straddling_log(table)
        if straddling is not None:
            out["a deltacommit that completed after its slice's compaction was planned"] = straddling
    mdt = inputs.metadata_table
    if mdt.present:
        if mdt.latest_compaction is None:
            return None
        after = [c for c in done if timeline.completion_time_of(c.time) > mdt.latest_compaction]
        if timeline.layout_version >= 2:
            if after:
                out["the metadata table's latest compaction"] = after[0].time
        else:
            out["metadata table"] = mdt.latest_compaction
    if inputs.data_timeline is not None:
        data_bound = _earliest_for_metadata_archival(inputs.data_timeline)
        if data_bound is not None:
            out["the data table's timeline"] = data_bound
    return out


def _earliest_straddling_log(table: Table) -> str | None:
    """The earliest deltacommit whose log file lies in a latest file slice with a younger base file, or
    ``None``. Such a deltacommit was still running when the compaction that made the base file was planned,
    and completed after it: its log file belongs to the new slice by its completion time only. Once it is
    archived, a reader that slices by the active timeline alone (hudi-rs; Hudi's own readers load archived
    completion times) places the log file in the slice before and misses its records (found by the chaos
    campaign). It stays until a newer compaction or clustering rewrote its file group. A first look at the
    timeline (a deltacommit completed after a later-planned compaction) spares the listing of file slices
    when nothing straddles."""
    timeline = table.timeline
    if table.config.table_type is not TableType.MERGE_ON_READ or timeline.layout_version < 2:
        return None
    compactions = [i.time for i in timeline.instants if timeline.was_compaction(i.time)]
    suspects = [
        w
        for w in timeline.completed()
        if w.action == DELTA_COMMIT
        and w.completion_time is not None
        and any(w.time < c < w.completion_time for c in compactions)
    ]
    if not suspects:
        return None
    suspect_times = {w.time for w in suspects}
    straddling = [
        log.instant
        for s in table.file_slices()
        for log in s.log_files
        if log.instant < s.base_instant and log.instant in suspect_times
    ]
    return min(straddling) if straddling else None


def _earliest_for_compaction(timeline: Timeline, max_delta_commits: int) -> str | None:
    """``CompactionUtils.getEarliestInstantToRetainForCompaction``: the deltacommits since the latest
    completed compaction (by completion time; pending ones by requested time) stay, up to the trigger's
    count."""
    last = next((i for i in reversed(timeline.completed()) if i.action == COMMIT), None)
    deltas = [i for i in timeline.instants if i.action == DELTA_COMMIT]
    if last is not None:
        since = [
            d
            for d in deltas
            if (timeline.completion_time_of(d.time) if d.state is State.COMPLETED else d.time) > last.time
        ]
        anchor = last.time
    elif deltas:
        since, anchor = deltas, deltas[0].time
    else:
        return None
    if len(since) < max_delta_commits:
        return anchor
    return since[len(since) - max_delta_commits].time


def _earliest_for_clustering(timeline: Timeline, plan: CleanerPlan | None, clean: CleanConfig) -> str | None:
    """``ClusteringUtils.getEarliestInstantToRetainForClustering``: the first replacecommit or clustering
    (any state) at or after what the latest clean retained (its savepoint guard first), or the first one at
    all when no clean completed."""
    replaces = [i for i in timeline.instants if i.action in (REPLACE_COMMIT, CLUSTERING)]
    if not replaces:
        return None
    cleans = [i for i in timeline.completed() if i.action == CLEAN]
    if not cleans:
        return replaces[0].time
    lower = _replaced_savepoint_in_clean(timeline, clean, plan)
    if lower is None:
        retained = (
            plan.earliest_instant_to_retain.timestamp if plan and plan.earliest_instant_to_retain else ""
        )
        lower = retained or cleans[-1].time
    later = [i for i in replaces if i.time >= lower]
    return later[0].time if later else None


def _replaced_savepoint_in_clean(
    timeline: Timeline, clean: CleanConfig, plan: CleanerPlan | None
) -> str | None:
    """The earliest savepoint the clean kept files for, while a completed replacecommit between it and the
    clean's earliest retained instant still hides files that only a clean after the savepoint's deletion
    removes (``ClusteringUtils.getEarliestReplacedSavepointInClean``)."""
    if plan is None or clean.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        return None
    savepoints = sorted(s for s in plan.extra_metadata.get(SAVEPOINTED_TIMESTAMPS, "").split(",") if s)
    retained = plan.earliest_instant_to_retain.timestamp if plan.earliest_instant_to_retain else ""
    if not savepoints or not retained:
        return None
    earliest = savepoints[0]
    if retained > earliest:
        between = [
            i for i in timeline.completed() if i.action == REPLACE_COMMIT and earliest <= i.time <= retained
        ]
        if not between:
            return None
    return earliest


def _earliest_for_metadata_archival(data: Timeline) -> str | None:
    """``TimelineUtils.getEarliestInstantForMetadataArchival``: a metadata table keeps everything from the
    data table's first commit and from its earliest pending instant on."""
    candidates = []
    first_commit = next(iter(data.completed_writes()), None)
    if first_commit is not None:
        candidates.append(first_commit.time)
    first_pending = next(iter(data.pending()), None)
    if first_pending is not None:
        candidates.append(first_pending.time)
    return min(candidates) if candidates else None


def _v1_clean_and_rollback(
    timeline: Timeline, low: int, high: int, metadata_bound: str | None
) -> list[Instant]:
    """Layout 1: per action, completed cleans and rollbacks beyond the maximum go down to the minimum (held by
    the metadata table's latest compaction like every candidate)."""
    out: list[Instant] = []
    for action in (CLEAN, ROLLBACK):
        done = [i for i in timeline.completed() if i.action == action]
        if len(done) > high:
            out += [i for i in done[: len(done) - low] if metadata_bound is None or i.time < metadata_bound]
    return out


__all__ = [
    "ARCHIVAL_BATCH",
    "AUTOMATIC",
    "BEYOND_SAVEPOINT",
    "MAX_COMMITS",
    "MIN_COMMITS",
    "TIMELINE_COMPACTION_BATCH",
    "ArchivalConfig",
    "ArchivalInputs",
    "ArchivalPlan",
    "MetadataTableState",
    "commits",
    "keep_bounds",
    "plan_archival",
]
