"""Clustering planning (pure), its configuration and trigger, and scheduling (writes the requested plan under
the table lock).

:func:`plan_clustering` is a function of a table view and a clustering instant time: it applies Hudi's
size-based plan strategy (``SparkSizeBasedClusteringPlanStrategy``) and returns a
:class:`~hoodie.timeline.metadata.ClusteringPlan`, or no plan and the reason. :func:`schedule_clustering`
takes the table lock, evaluates the trigger, takes a fresh instant time, re-reads the timeline, plans, and
writes ``<t>.clustering.requested`` (table versions 8, 9) or ``<t>.replacecommit.requested`` (version 6,
which has no clustering action) holding ``HoodieRequestedReplaceMetadata`` with operation type ``CLUSTER``.

Rules (Hudi's ``PartitionAwareClusteringPlanStrategy`` and ``ClusteringPlanStrategy``):

- COPY_ON_WRITE and MERGE_ON_READ tables cluster. A table with a metadata table is refused, as compaction
  refuses it (the replacecommit would leave the metadata table's file listing behind).
- Partitions: ``partition.selected`` (a comma list) when set, else every partition, narrowed by
  ``partition.regex.pattern`` (a full match, as Java's ``Pattern.matches``); then Hudi's partition filter
  mode, ``hoodie.clustering.plan.partition.filter.mode`` (:mod:`hoodie.clustering.partition_filter`:
  ``RECENT_DAYS`` skips the latest date partitions), which also orders them for the group cap.
- Eligible slices of a partition: the latest slice of every live (not replaced) file group whose base file
  is smaller than ``small.file.limit`` (a slice without a base file counts as 0 here), leaving out file
  groups in a pending compaction, log compaction or clustering.
- Beside writers (:mod:`hoodie.clustering.update_strategy`, :mod:`hoodie.clustering.recent_writes`): with
  the writers' update strategy ``hoodie.clustering.updates.strategy`` at Hudi's default
  (``SparkRejectUpdateStrategy``), a Hudi writer fails when its batch updates a file group under pending
  clustering, so the plan also leaves out the file groups that any of the last
  ``hoodie.clustering.hoodied.recent.write.commits`` (5) writer commits wrote and those a pending write is
  writing. With ``SparkAllowUpdateStrategy`` every eligible group is planned, as before, and a write that
  touches one before the clustering commits aborts the clustering (:mod:`hoodie.clustering.conflict`);
  setting the key explicitly makes such plans leave writers' groups out too (Hudi 1.x writers under
  optimistic concurrency fail their own commit on a pending clustering of a group they wrote).
- They are sorted by size, largest first (a slice without a base file counts as
  ``hoodie.parquet.max.file.size``; ties keep file-id order), and packed greedily: a new group starts when
  the current one is not empty and this slice would take it over ``max.bytes.per.group``. Every full group
  is kept; the last group of a partition only when it has more than one slice, or when
  ``single.group.clustering.enabled`` is on *and* sort columns are configured (rewriting one file unsorted
  gains nothing; Hudi keeps it whenever either is set, see :meth:`ClusteringConfig.keeps_single_group`). A
  group writes ``ceil(group bytes / target.file.max.bytes)`` new file groups.
- At most ``max.num.groups`` groups per partition, and at most that many in the whole plan (partitions in
  sorted order).
- Group metrics as Hudi's ``FileSliceMetricUtils``: ``TOTAL_LOG_FILES``, ``TOTAL_LOG_FILES_SIZE`` (bytes),
  ``TOTAL_IO_READ_MB`` (base and log bytes, whole MB), ``TOTAL_IO_WRITE_MB`` (base bytes, or the max file
  size for a slice without a base file, whole MB) and ``TOTAL_IO_MB`` (their sum).
- Slices name their files by full path, as Hudi writes them (an absent base file is ``""``); the plan's
  strategy is ``SparkSortAndSizeExecutionStrategy`` with ``sort.columns`` among its parameters when set (each
  must be a top-level column of the table schema), and ``preserveHoodieMetadata`` is true.
- Layout (:mod:`hoodie.clustering.layout`): with sort columns and ``hoodie.layout.optimize.strategy``
  ``z-order`` or ``hilbert``, the parameters also hold that key and
  ``hoodie.layout.optimize.curve.build.method`` (``direct``; ``sample`` is refused), and with two or more
  sort columns each must have a curve mapping. Hudi's executors read the layout from their own write
  config, not from the plan, so a Hudi job executing such a plan orders it the same way only when it is
  configured with the same key; hoodied's executor takes the plan's key. ``linear`` adds nothing, as Hudi's
  planners write it.
- Scheduling: no completed write and no table service may be at or after the clustering's instant time. On
  table version 6 (slices and conflict checks by instant time) no write may be pending with an earlier
  instant time: a write that completes after the plan must have a later instant time, or the commit's
  conflict check could not tell it from one the plan saw; we wait for it to complete or be rolled back.
- Trigger (hoodied's own scheduling; ``respect_trigger=False`` plans unconditionally, as Hudi's
  ``HoodieClusteringJob`` does): at least ``hoodie.clustering.async.max.commits`` completed writes
  (commits, deltacommits, replacecommits) with an instant time after the last completed clustering.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from hoodie.clustering.layout import LAYOUT_OPTIMIZE_STRATEGY, LayoutConfig, curve_problems
from hoodie.clustering.partition_filter import FilterMode, PartitionFilter
from hoodie.clustering.recent_writes import (
    RECENT_WRITE_COMMITS,
    RECENT_WRITE_COMMITS_DEFAULT,
    writer_groups,
)
from hoodie.clustering.update_strategy import UPDATES_STRATEGY, UPDATES_STRATEGY_DEFAULT, UpdateStrategy
from hoodie.compaction.plan import blocked_file_groups
from hoodie.errors import CorruptTimelineFile, InvalidWriteConfig
from hoodie.file_group.file_group import FileSlice
from hoodie.lock import LockProvider
from hoodie.metadata_table import refuse_metadata_table
from hoodie.settings import bool_setting, int_setting, setting
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import (
    CLUSTERING,
    COMPACTION,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    WRITE_ACTIONS,
    Instant,
    State,
)
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
    decode_requested_replace_metadata,
    plan_versions,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.base_file import PARQUET_MAX_FILE_SIZE, PARQUET_MAX_FILE_SIZE_DEFAULT
from hoodie.write.service_instant import Planned, request_planned

logger = logging.getLogger(__name__)

# -- config keys, with Hudi's defaults ---------------------------------------------------------------------

SMALL_FILE_LIMIT = "hoodie.clustering.plan.strategy.small.file.limit"
SMALL_FILE_LIMIT_DEFAULT = 300 * 1024 * 1024
MAX_BYTES_PER_GROUP = "hoodie.clustering.plan.strategy.max.bytes.per.group"
MAX_BYTES_PER_GROUP_DEFAULT = 2 * 1024 * 1024 * 1024
MAX_NUM_GROUPS = "hoodie.clustering.plan.strategy.max.num.groups"
MAX_NUM_GROUPS_DEFAULT = 30
TARGET_FILE_MAX_BYTES = "hoodie.clustering.plan.strategy.target.file.max.bytes"
TARGET_FILE_MAX_BYTES_DEFAULT = 1024 * 1024 * 1024
SORT_COLUMNS = "hoodie.clustering.plan.strategy.sort.columns"
SINGLE_GROUP_CLUSTERING_ENABLED = "hoodie.clustering.plan.strategy.single.group.clustering.enabled"
SINGLE_GROUP_CLUSTERING_ENABLED_DEFAULT = True
PARTITION_REGEX_PATTERN = "hoodie.clustering.plan.strategy.partition.regex.pattern"
PARTITION_SELECTED = "hoodie.clustering.plan.strategy.partition.selected"
ASYNC_MAX_COMMITS = "hoodie.clustering.async.max.commits"
ASYNC_MAX_COMMITS_DEFAULT = 4

#: The execution strategy hoodied runs (and writes into its plans): sort (optionally), then size.
EXECUTION_STRATEGY_CLASS = "org.apache.hudi.client.clustering.run.strategy.SparkSortAndSizeExecutionStrategy"
#: The operation type of a clustering's requested replace metadata and of its replacecommit.
OPERATION_TYPE = "CLUSTER"

# Metric names of HoodieClusteringGroup.metrics, as Hudi writes them.
TOTAL_IO_READ_MB = "TOTAL_IO_READ_MB"
TOTAL_IO_WRITE_MB = "TOTAL_IO_WRITE_MB"
TOTAL_IO_MB = "TOTAL_IO_MB"
TOTAL_LOG_FILES_SIZE = "TOTAL_LOG_FILES_SIZE"
TOTAL_LOG_FILES = "TOTAL_LOG_FILES"

_MB = 1024 * 1024


@dataclass(frozen=True)
class ClusteringConfig:
    """How clustering plans are made and when they are scheduled (Hudi's keys above; defaults as Hudi's)."""

    small_file_limit: int = SMALL_FILE_LIMIT_DEFAULT
    max_bytes_per_group: int = MAX_BYTES_PER_GROUP_DEFAULT
    max_num_groups: int = MAX_NUM_GROUPS_DEFAULT
    target_file_max_bytes: int = TARGET_FILE_MAX_BYTES_DEFAULT
    sort_columns: tuple[str, ...] = ()
    single_group_clustering_enabled: bool = SINGLE_GROUP_CLUSTERING_ENABLED_DEFAULT
    partition_regex: str | None = None
    partitions_selected: tuple[str, ...] = ()
    max_commits: int = ASYNC_MAX_COMMITS_DEFAULT
    max_file_bytes: int = PARQUET_MAX_FILE_SIZE_DEFAULT  # hoodie.parquet.max.file.size
    layout: LayoutConfig = field(default_factory=LayoutConfig)  # hoodie.layout.optimize.*
    partition_filter: PartitionFilter = field(default_factory=PartitionFilter)  # ...partition.filter.mode
    update_strategy: UpdateStrategy = UPDATES_STRATEGY_DEFAULT  # hoodie.clustering.updates.strategy
    #: hoodie.clustering.hoodied.recent.write.commits; ``None``: the update strategy's default (see below).
    recent_write_commits: int | None = None

    def __post_init__(self) -> None:
        for key, value, minimum in (
            (SMALL_FILE_LIMIT, self.small_file_limit, 0),
            (MAX_BYTES_PER_GROUP, self.max_bytes_per_group, 1),
            (MAX_NUM_GROUPS, self.max_num_groups, 1),
            (TARGET_FILE_MAX_BYTES, self.target_file_max_bytes, 1),
            (ASYNC_MAX_COMMITS, self.max_commits, 0),
            (PARQUET_MAX_FILE_SIZE, self.max_file_bytes, 1),
            (RECENT_WRITE_COMMITS, self.recent_write_commits or 0, 0),
        ):
            if value < minimum:
                raise InvalidWriteConfig(f"{key}={value!r}: must be at least {minimum}")
        if any(not c or c != c.strip() for c in self.sort_columns):
            raise InvalidWriteConfig(f"{SORT_COLUMNS}={','.join(self.sort_columns)!r}: empty column name")
        if len(set(self.sort_columns)) != len(self.sort_columns):
            raise InvalidWriteConfig(f"{SORT_COLUMNS}={','.join(self.sort_columns)!r}: a column is repeated")
        if self.partition_regex is not None:
            try:
                re.compile(self.partition_regex)
            except re.error as e:
                raise InvalidWriteConfig(f"{PARTITION_REGEX_PATTERN}={self.partition_regex!r}: {e}") from None

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ClusteringConfig:
        """Read the keys above from a configuration (unknown keys are left to their owners)."""
        return cls(
            small_file_limit=int_setting(config, SMALL_FILE_LIMIT, SMALL_FILE_LIMIT_DEFAULT, minimum=0),
            max_bytes_per_group=int_setting(
                config, MAX_BYTES_PER_GROUP, MAX_BYTES_PER_GROUP_DEFAULT, minimum=1
            ),
            max_num_groups=int_setting(config, MAX_NUM_GROUPS, MAX_NUM_GROUPS_DEFAULT, minimum=1),
            target_file_max_bytes=int_setting(
                config, TARGET_FILE_MAX_BYTES, TARGET_FILE_MAX_BYTES_DEFAULT, minimum=1
            ),
            sort_columns=_list(config, SORT_COLUMNS),
            single_group_clustering_enabled=bool_setting(
                config, SINGLE_GROUP_CLUSTERING_ENABLED, SINGLE_GROUP_CLUSTERING_ENABLED_DEFAULT
            ),
            partition_regex=(config.get(PARTITION_REGEX_PATTERN) or "").strip() or None,
            partitions_selected=_list(config, PARTITION_SELECTED),
            max_commits=int_setting(config, ASYNC_MAX_COMMITS, ASYNC_MAX_COMMITS_DEFAULT, minimum=0),
            max_file_bytes=int_setting(
                config, PARQUET_MAX_FILE_SIZE, PARQUET_MAX_FILE_SIZE_DEFAULT, minimum=1
            ),
            layout=LayoutConfig.from_config(config),
            partition_filter=PartitionFilter.from_config(config),
            update_strategy=UpdateStrategy.from_config(config),
            recent_write_commits=(
                int_setting(config, RECENT_WRITE_COMMITS, RECENT_WRITE_COMMITS_DEFAULT, minimum=0, bits=32)
                if setting(config, RECENT_WRITE_COMMITS) is not None
                else None
            ),
        )

    @property
    def avoids_writers(self) -> bool:
        """Whether plans leave out the file groups writers are working on: with reject-update writers
        always, with allow-update writers when ``recent.write.commits`` is set (see the module doc)."""
        return self.update_strategy is UpdateStrategy.REJECT or self.recent_write_commits is not None

    @property
    def recent_commits(self) -> int:
        """How many of the latest writer commits make a file group recently written (0 with allow-update
        writers unless set)."""
        if self.recent_write_commits is not None:
            return self.recent_write_commits
        return RECENT_WRITE_COMMITS_DEFAULT if self.update_strategy is UpdateStrategy.REJECT else 0

    @property
    def keeps_single_group(self) -> bool:
        """Whether a partition's last group is kept with a single slice (see the module doc)."""
        return self.single_group_clustering_enabled and bool(self.sort_columns)

    @property
    def strategy(self) -> ClusteringStrategy:
        """The execution strategy written into plans: the sort columns and, with them, a curve layout."""
        params = (
            {SORT_COLUMNS: ",".join(self.sort_columns), **self.layout.strategy_params()}
            if self.sort_columns
            else {}
        )
        return ClusteringStrategy(strategy_class_name=EXECUTION_STRATEGY_CLASS, strategy_params=params)

    def filter_partitions(self, partitions: Sequence[str], instant_time: str) -> list[str]:
        """The partitions whose slices a plan at ``instant_time`` may take, in planning order."""
        chosen = list(partitions)
        if self.partitions_selected:
            selected = set(self.partitions_selected)
            chosen = [p for p in chosen if p in selected]
        elif self.partition_regex is not None:
            pattern = re.compile(self.partition_regex)
            chosen = [p for p in chosen if pattern.fullmatch(p)]
        return self.partition_filter.apply(chosen, instant_time)

    def slice_size(self, file_slice: FileSlice) -> int:
        """A slice's size for grouping: its base file's, or the max file size without one (Hudi's guess)."""
        return file_slice.base_file_size if file_slice.base_file is not None else self.max_file_bytes

    def is_small(self, file_slice: FileSlice) -> bool:
        """Whether a slice is eligible by size (a slice without a base file always is)."""
        size = file_slice.base_file_size if file_slice.base_file is not None else 0
        return size < self.small_file_limit

    def group_slices(self, slices: Sequence[FileSlice]) -> list[tuple[tuple[FileSlice, ...], int]]:
        """Pack the eligible slices of one partition into groups, each with its number of output file groups
        (Hudi's ``buildClusteringGroupsForPartition``; see the module doc)."""
        ordered = sorted(slices, key=lambda s: s.file_id)
        ordered.sort(key=self.slice_size, reverse=True)  # stable: ties stay in file-id order
        groups: list[tuple[tuple[FileSlice, ...], int]] = []
        current: list[FileSlice] = []
        total = 0
        for s in ordered:
            size = self.slice_size(s)
            if current and total + size > self.max_bytes_per_group:
                groups.append((tuple(current), self.output_file_groups(total)))
                current, total = [], 0
                if len(groups) >= self.max_num_groups:
                    break
            current.append(s)
            total += size
        else:
            if len(current) > 1 or (current and self.keeps_single_group):
                groups.append((tuple(current), self.output_file_groups(total)))
        return groups

    def output_file_groups(self, group_bytes: int) -> int:
        """How many file groups a group of ``group_bytes`` is written into (at least one)."""
        return max(1, math.ceil(group_bytes / self.target_file_max_bytes))

    def metrics(self, slices: Sequence[FileSlice]) -> dict[str, float]:
        """A group's metrics, as Hudi's ``FileSliceMetricUtils.addFileSliceCommonMetrics``."""
        log_files = sum(len(s.log_files) for s in slices)
        log_bytes = sum(size for s in slices for size in s.log_file_sizes if size >= 0)
        base_bytes = sum(s.base_file_size for s in slices if s.base_file is not None)
        write_bytes = sum(
            s.base_file_size if s.base_file is not None and s.base_file_size > 0 else self.max_file_bytes
            for s in slices
        )
        read_mb = (base_bytes + log_bytes) // _MB
        write_mb = write_bytes // _MB
        # The order Java's HashMap iterates these keys in, which is the order Hudi's plans hold them.
        return {
            TOTAL_LOG_FILES: float(log_files),
            TOTAL_IO_MB: float(read_mb + write_mb),
            TOTAL_IO_READ_MB: float(read_mb),
            TOTAL_LOG_FILES_SIZE: float(log_bytes),
            TOTAL_IO_WRITE_MB: float(write_mb),
        }


def _list(config: Mapping[str, str], key: str) -> tuple[str, ...]:
    raw = config.get(key) or ""
    items = [item.strip() for item in raw.split(",")]
    if raw.strip() and any(not item for item in items):
        raise InvalidWriteConfig(f"{key}={raw!r}: an empty item in the comma-separated list")
    return tuple(item for item in items if item)


# -- results -----------------------------------------------------------------------------------------------


#: A plan, or ``None`` with the reason nothing was planned.
PlanResult = Planned[ClusteringPlan]


@dataclass(frozen=True)
class TriggerDecision:
    """Whether the trigger fires, with the numbers it looked at and a sentence saying why."""

    fire: bool
    commits: int
    last_clustering: str | None
    reason: str


@dataclass(frozen=True)
class ScheduleResult:
    """What :func:`schedule_clustering` did: the requested instant (or none) and why."""

    instant: Instant | None
    plan: ClusteringPlan | None
    reason: str
    trigger: TriggerDecision | None = None


# -- the rules ---------------------------------------------------------------------------------------------


def check_clusterable(table: Table) -> None:
    """Refuse tables clustering must not touch (a metadata table hoodied cannot update)."""
    refuse_metadata_table(table.storage, table.config, "clustering")


def check_sort_columns(table: Table, columns: Sequence[str], layout: LayoutConfig | None = None) -> None:
    """Every sort column must be a top-level column of the table schema and, on a curve over two or more of
    them, have a curve mapping; raises naming the key."""
    if not columns:
        return
    schema = table.read_schema()
    if schema is None:
        raise InvalidWriteConfig(
            f"{SORT_COLUMNS}={','.join(columns)!r}: {table.base_path} records no schema to check them against"
        )
    missing = [c for c in columns if c not in schema.names]
    if missing:
        raise InvalidWriteConfig(
            f"{SORT_COLUMNS}={','.join(columns)!r}: {', '.join(missing)} not (top-level) column(s) of the "
            f"table schema ({', '.join(schema.names)})"
        )
    if layout is not None and layout.strategy.is_curve and len(columns) > 1:
        problems = curve_problems(schema, columns)
        if problems:
            raise InvalidWriteConfig(
                f"{SORT_COLUMNS}={','.join(columns)!r} with {LAYOUT_OPTIMIZE_STRATEGY}="
                f"{layout.strategy.value}: {'; '.join(problems)}"
            )


def clustering_plan_of(table: Table, instant_time: str) -> ClusteringPlan | None:
    """The clustering plan in an instant's requested file, or ``None`` when it holds none (an INSERT
    OVERWRITE's replacecommit, an instant without a requested file)."""
    try:
        data = table.storage.read(table.timeline.file_of(instant_time, State.REQUESTED))
    except (KeyError, FileNotFoundError):  # no requested file, or removed since the timeline was listed
        return None
    return decode_requested_replace_metadata(data).clustering_plan


def is_clustering(table: Table, instant_time: str) -> bool:
    """Whether the instant is a clustering (v8+: requested as ``clustering``; v6: a replacecommit whose
    requested file holds a clustering plan, or whose commit metadata says CLUSTER)."""
    timeline = table.timeline
    if timeline.requested_action(instant_time) == CLUSTERING:
        return True
    instant = timeline.get(instant_time)
    if instant is None or instant.action != REPLACE_COMMIT:
        return False
    try:
        if clustering_plan_of(table, instant_time) is not None:
            return True
    except CorruptTimelineFile:
        pass
    if instant.is_completed:
        return table.commit_metadata(instant).operation_type == OPERATION_TYPE
    return False


def evaluate_clustering_trigger(table: Table, config: ClusteringConfig) -> TriggerDecision:
    """Hudi's async clustering trigger: enough completed writes after the last completed clustering."""
    timeline = table.timeline
    completed = timeline.completed_writes()
    last = next(
        (i.time for i in reversed(completed) if i.action == REPLACE_COMMIT and is_clustering(table, i.time)),
        None,
    )
    commits = sum(1 for i in completed if last is None or i.time > last)
    fire = commits >= config.max_commits
    since = f"since clustering {last}" if last else "with no clustering completed yet"
    verdict = "fires" if fire else "does not fire"
    return TriggerDecision(
        fire,
        commits,
        last,
        f"clustering trigger {verdict}: {commits} completed write(s) {since} "
        f"({ASYNC_MAX_COMMITS}={config.max_commits})",
    )


def scheduling_conflict(table: Table, instant_time: str) -> str | None:
    """Why a clustering at ``instant_time`` must not be scheduled now, or ``None`` (see the module doc)."""
    timeline = table.timeline
    services = (COMPACTION, LOG_COMPACTION, CLUSTERING)
    later = [
        i
        for i in timeline
        if i.time >= instant_time
        and ((i.is_completed and i.action in WRITE_ACTIONS) or (i.is_pending and i.action in services))
    ]
    if later:
        return (
            f"instant(s) {', '.join(str(i) for i in later[:3])} are at or after the clustering time "
            f"{instant_time}; clustering instants must be later than every write and table service"
        )
    if table.config.table_version < 8:
        pending = [
            i
            for i in timeline.pending()
            if i.action in WRITE_ACTIONS and i.time < instant_time and not is_clustering(table, i.time)
        ]
        if pending:
            return (
                f"write {pending[0]} is still pending with an earlier instant time than {instant_time}; on a "
                "version 6 table a write that completes after the plan must have a later instant time for "
                "the clustering's conflict check to see it; waiting for it to complete or be rolled back"
            )
    return None


def plan_clustering(table: Table, instant_time: str, config: ClusteringConfig) -> PlanResult:
    """The clustering plan at ``instant_time`` of the view ``table`` (see the module doc)."""
    check_clusterable(table)
    check_sort_columns(table, config.sort_columns, config.layout)
    conflict = scheduling_conflict(table, instant_time)
    if conflict is not None:
        return PlanResult(None, conflict)
    groups = table.file_groups()
    replaced = table.replaced_file_groups()
    blocked = blocked_file_groups(table)
    partitions = config.filter_partitions(sorted({gid.partition_path for gid in groups}), instant_time)
    if not partitions:
        why = "no partition selected for clustering"
        if config.partition_filter.mode is not FilterMode.NONE:
            why += f" ({config.partition_filter.describe()})"
        return PlanResult(None, why)
    writers = writer_groups(table, config.recent_commits) if config.avoids_writers else None
    allowed = set(partitions)
    eligible: dict[str, list[FileSlice]] = {p: [] for p in partitions}
    skipped_blocked = 0
    skipped_writers = 0
    for gid, group in groups.items():
        if gid.partition_path not in allowed or gid in replaced:
            continue
        latest = group.latest
        if latest is None or not config.is_small(latest):
            continue
        if gid in blocked:
            skipped_blocked += 1
            continue
        if writers is not None and gid in writers:
            skipped_writers += 1
            continue
        eligible[gid.partition_path].append(latest)
    storage = table.storage
    planned: list[ClusteringGroup] = []
    for partition in partitions:
        for slices, outputs in config.group_slices(eligible[partition]):
            planned.append(
                ClusteringGroup(
                    slices=tuple(_slice_info(storage, s) for s in slices),
                    metrics=config.metrics(slices),
                    num_output_file_groups=outputs,
                )
            )
        if len(planned) >= config.max_num_groups:
            planned = planned[: config.max_num_groups]
            break
    candidates = sum(len(v) for v in eligible.values())
    if not planned:
        why = (
            f"no partition has more than one file slice under {SMALL_FILE_LIMIT}={config.small_file_limit} "
            f"({candidates} eligible slice(s); a single one is clustered only with sort columns)"
        )
        if skipped_blocked:
            why += f"; {skipped_blocked} file group(s) held by pending compaction or clustering"
        if skipped_writers:
            why += "; " + _writers_note(config, skipped_writers)
        return PlanResult(None, why)
    plan = ClusteringPlan(
        input_groups=tuple(planned),
        strategy=config.strategy,
        extra_metadata={},
        version=plan_versions(table.config.table_version).clustering_plan,
        preserve_hoodie_metadata=True,
    )
    n_slices = sum(len(g.slices) for g in planned)
    outputs = sum(g.num_output_file_groups or 1 for g in planned)
    note = f"; {_writers_note(config, skipped_writers)}" if skipped_writers else ""
    return PlanResult(
        plan,
        f"{len(planned)} group(s): {n_slices} of {candidates} eligible file slice(s) into {outputs} new "
        f"file group(s){note}",
    )


def _writers_note(config: ClusteringConfig, skipped: int) -> str:
    return (
        f"{skipped} file group(s) left to writers (written by the last {config.recent_commits} writer "
        f"commit(s) or by a pending write; {UPDATES_STRATEGY}={config.update_strategy.simple_name}, "
        f"{RECENT_WRITE_COMMITS}={config.recent_commits})"
    )


def _slice_info(storage: Storage, file_slice: FileSlice) -> SliceInfo:
    return SliceInfo(
        file_id=file_slice.file_id,
        partition_path=file_slice.partition_path,
        data_file_path=_full(storage, file_slice.base_file_path) if file_slice.base_file_path else "",
        delta_file_paths=tuple(_full(storage, p) for p in file_slice.log_file_paths),
        bootstrap_file_path="",
        version=1,
    )


def _full(storage: Storage, rel: str) -> str:
    """The full path Hudi writes into plans for a file (``/abs/path`` locally, ``scheme://...`` else)."""
    return storage.full_path(rel)


def requested_action(table_version: int) -> str:
    """The action a clustering is requested under: ``clustering`` (v8+) or ``replacecommit`` (v6)."""
    return CLUSTERING if table_version >= 8 else REPLACE_COMMIT


def schedule_clustering(
    storage: Storage,
    lock: LockProvider,
    *,
    config: ClusteringConfig | None = None,
    respect_trigger: bool = True,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
    preview: bool = False,
) -> ScheduleResult:
    """Plan and request a clustering now.

    With ``respect_trigger`` the trigger must fire first (hoodied's own scheduling); without, the plan is
    made whenever there is something to cluster (``hoodied cluster --mode schedule``, as Hudi's
    ``HoodieClusteringJob``). Trigger and plan are first decided on a view read without the lock, at a
    provisional time: when nothing is due, no instant time is taken and the lock is never held; otherwise
    the plan is made again under the lock at the instant time.

    ``preview``: decide as above on the view and write nothing
    (:func:`~hoodie.write.service_instant.request_planned`).
    """
    config = config or ClusteringConfig()
    generator = time_generator or InstantTimeGenerator()
    table = view if view is not None else Table.load(storage)
    check_clusterable(table)
    check_sort_columns(table, config.sort_columns, config.layout)
    decision = None
    if respect_trigger:
        decision = evaluate_clustering_trigger(table, config)
        if not decision.fire:
            return ScheduleResult(None, None, decision.reason, decision)

    def request(view: Table, instant_time: str, plan: ClusteringPlan) -> Instant:
        version = view.config.table_version
        content = RequestedReplaceMetadata(
            operation_type=OPERATION_TYPE,
            clustering_plan=plan,
            extra_metadata={},
            version=plan_versions(version).requested_replace,
        )
        return TimelineWriter(storage, view.config, lock).request(
            requested_action(version), instant_time, content
        )

    instant, result = request_planned(
        storage,
        lock,
        table,
        generator,
        what="clustering",
        plan=lambda view, t: plan_clustering(view, t, config),
        request=request,
        preview=preview,
    )
    return ScheduleResult(instant, result.plan, result.reason, decision)


__all__ = [
    "ASYNC_MAX_COMMITS",
    "EXECUTION_STRATEGY_CLASS",
    "MAX_BYTES_PER_GROUP",
    "MAX_NUM_GROUPS",
    "OPERATION_TYPE",
    "PARTITION_REGEX_PATTERN",
    "PARTITION_SELECTED",
    "SINGLE_GROUP_CLUSTERING_ENABLED",
    "SMALL_FILE_LIMIT",
    "SORT_COLUMNS",
    "TARGET_FILE_MAX_BYTES",
    "ClusteringConfig",
    "PlanResult",
    "ScheduleResult",
    "TriggerDecision",
    "check_clusterable",
    "check_sort_columns",
    "clustering_plan_of",
    "evaluate_clustering_trigger",
    "is_clustering",
    "plan_clustering",
    "requested_action",
    "schedule_clustering",
    "scheduling_conflict",
]
