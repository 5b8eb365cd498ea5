"""Clustering execution: the driver's steps around the tasks, and the task that rewrites one clustering group.

The three steps, each usable from any engine (hoodied runs the tasks as a Spark job; tests and benchmarks
may run them in-process with :func:`cluster_in_process`):

1. :func:`prepare_clustering` (driver): picks the instant (the earliest pending clustering by default), rolls
   back an unfinished earlier attempt (the caller holds the instant's claim, so an inflight instant is
   abandoned), checks that no write touched the plan's file groups since it was made (see *Conflicts*),
   moves it to inflight and returns one :class:`ClusteringTask` per clustering group, or per run of its
   slices where the group splits (:mod:`hoodie.clustering.split`: groups without sort columns).
2. :func:`run_clustering_task` (executor): reads every slice of the group exactly as the plan names it (base
   file and log files, merged as of the clustering instant, deleted records dropped, conformed to the table
   schema; each slice's rows checked against its input keys, :mod:`hoodie.read.conservation`), takes their
   union (a key two slices hold stays twice), orders it by the plan's sort columns in the plan's layout
   (:mod:`hoodie.clustering.layout`: ``linear``, nulls last, or along a z-order or Hilbert curve; ties keep
   the plan's slice order, then each slice's row order; without sort columns the rows keep the plan's slice
   order), and splits it into the group's ``numOutputFileGroups`` files of about equal row counts (the copies
   of a repeated key kept in one: :mod:`hoodie.clustering.output_files`), each the first base file of a new
   file group ``<uuid>-0``: ``<file id>_<write token>_<clustering instant>.parquet``, announced by a CREATE
   marker first. Meta columns are kept as they were (commit time and sequence number included;
   ``preserveHoodieMetadata``), except ``_hoodie_file_name``, which names the new file; tables without meta
   fields are written without them. It returns Hudi's clustering write stats (``prevCommit`` "null", every
   row an insert).
3. :func:`commit_clustering` (driver): checks the results (one per task; each file holding the rows its task
   reported; the rows written equal to the group's merged input rows), deletes files that markers announce
   but no result names (failed or speculative task attempts), then under the table lock re-checks the claim
   (``fence``), that the instant is still inflight and that no write conflicts, and completes it as a
   ``replacecommit`` (operation CLUSTER, the input file groups as replaced file ids, the writer schema).

Conflicts: a write instant (commit, deltacommit, replacecommit; not this clustering) conflicts when it
touched one of the plan's file groups (its write stats or replaced file ids name it) and either completed
after the clustering was requested (v8+: completion time after the clustering's instant time; v6: instant
time after it, the scheduling rule making that enough), or is still pending (its markers or inflight
metadata name the group). Committing then would hide that write's records behind the new file groups. On a
conflict the clustering definitely does not commit: its files are deleted and the instant is rolled back for
good, requested plan included (a rollback instant records it), as Hudi does with
``hoodie.clustering.rollback.pending.replacecommit.on.conflict``. Rolling back only to requested would be
no safer and would never finish: the plan names the file slices as they were, so every re-run would conflict
again while holding its file groups away from compaction and from new plans. A fresh plan of the current
slices is made by the next scheduling. :class:`ClusteringConflict` names the conflicting instant.

Memory: a task holds about one slice, not its group. Each merged slice is sorted on its own and spilled to a
local temporary file as a sorted run (:mod:`hoodie.clustering.spill`; the files are removed when the task
ends, failed or not). Then the runs are merged back in bounded batches, in exactly the order one stable sort
of the whole group gives, and written file after file, a row group at a time. Row groups hold
``hoodie.parquet.block.size`` worth of rows at the group's average row size, and at most the merge budget
(half the largest slice's Arrow size, at least 16 MiB): files cut from a group of small slices have more
row groups than one written from memory would. The rows whose key hash repeats in the group are located by
one more merge pass over the keys alone (:func:`~hoodie.clustering.output_files.output_files`), so each
file's share and the copies it takes from later files are known before it is written, and one file is open
at a time. The peak is the largest slice's merge plus its sort (measured by
``benchmarks/bench_clustering_memory.py``), plus 8 bytes per row of the group for the key hashes.

Nothing becomes visible before step 3's atomic completion: readers ignore base files of a pending instant
and keep reading the replaced file groups until the replacecommit completes. A crash anywhere leaves the
instant inflight; the next attempt rolls it back and runs it again, and the completing create-if-absent lets
only one attempt commit.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NoReturn

from hoodie.clustering.conflict import Conflict, find_conflict
from hoodie.clustering.layout import LayoutConfig, LayoutStrategy, curve_problems
from hoodie.clustering.output_files import (
    MergedCursor,
    file_rows,
    group_keys,
    output_files,
    row_groups,
)
from hoodie.clustering.plan import (
    OPERATION_TYPE,
    SORT_COLUMNS,
    check_clusterable,
    clustering_plan_of,
    is_clustering,
    requested_action,
)
from hoodie.clustering.spill import SortedRuns, SpillSettings
from hoodie.clustering.split import split_group
from hoodie.config import TableConfig
from hoodie.errors import (
    CommitConflict,
    CorruptBaseFile,
    CorruptTimelineFile,
    HoodieError,
    NothingToDo,
    UnsupportedTable,
)
from hoodie.failpoints import failpoint
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId, FileSlice
from hoodie.lock import LockProvider
from hoodie.log.log_file import LogFile
from hoodie.memory import release_freed_heap
from hoodie.read.conform import conform_table
from hoodie.read.merge import drop_deleted_rows
from hoodie.storage import Storage, StorageRef
from hoodie.table import Table
from hoodie.timeline.instant import Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    ClusteringGroup,
    ClusteringPlan,
    CommitMetadata,
    RuntimeStats,
    SliceInfo,
    WriteStat,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.base_file import BaseFileStats, ParquetOptions, write_base_file_chunks
from hoodie.write.markers import IOType, Markers, sweep_completed
from hoodie.write.plan_overlap import ensure_alone, start_alone
from hoodie.write.rollback import RollbackResult, rollback_unfinished
from hoodie.write.service_commit import (
    by_partition,
    check_still_inflight,
    complete_rewrite,
    written_rows,
)
from hoodie.write.service_instant import pending_instant, restart_abandoned, results_by_task, writer_schema

logger = logging.getLogger(__name__)

FILE_NAME = "_hoodie_file_name"
# Execution strategies whose semantics are ours: sort by the plan's columns (if any), then size the files.
_SORT_AND_SIZE = ("SparkSortAndSizeExecutionStrategy", "JavaSortAndSizeExecutionStrategy")


class NothingToCluster(NothingToDo):
    """No pending clustering (or not the one asked for)."""


class ClusteringFailed(HoodieError):
    """A clustering definitely did not commit (its instant stays pending, to be rolled back and re-run)."""


class ClusteringConflict(CommitConflict):
    """A write touched the clustering's file groups after it was planned: the clustering definitely did not
    commit, its files were deleted and its instant rolled back for good (see the module doc)."""

    def __init__(self, message: str, conflicting_instant: str, rollback: RollbackResult | None) -> None:
        super().__init__(message)
        self.conflicting_instant = conflicting_instant
        self.rollback = rollback


@dataclass(frozen=True)
class ClusteringTask:
    """Everything an executor needs to rewrite one clustering group; small and picklable."""

    storage: StorageRef
    instant_time: str
    index: int
    partition_path: str
    group: ClusteringGroup
    sort_columns: tuple[str, ...]
    writer_schema: str  # the table's Avro schema (without meta fields), written to the new base files
    parquet: ParquetOptions
    config: TableConfig  # the table's, as the driver read it (a task lists the timeline only)
    layout: LayoutStrategy = LayoutStrategy.LINEAR  # how the rows are ordered by the sort columns


@dataclass(frozen=True)
class TaskResult:
    """What one task wrote: a write stat per new file group, and the rows its input merged to."""

    index: int
    stats: tuple[WriteStat, ...]
    input_rows: int
    write_token: str


@dataclass(frozen=True)
class PreparedClustering:
    """A clustering moved to inflight, with its plan and tasks."""

    instant: Instant
    plan: ClusteringPlan
    tasks: tuple[ClusteringTask, ...]
    writer_schema: str
    config: TableConfig
    rolled_back: RollbackResult | None = None
    #: Each task's input bytes on storage (its slices' files as the table view lists them).
    task_bytes: tuple[int, ...] = ()

    @property
    def partitions(self) -> list[str]:
        """The partitions of the plan's file groups (where this clustering writes)."""
        return sorted({s.partition_path for s in self.plan.slices})


@dataclass(frozen=True)
class ClusteringResult:
    """A completed clustering."""

    instant: Instant
    metadata: CommitMetadata
    strays_deleted: tuple[str, ...]

    @property
    def records_written(self) -> int:
        return sum(s.num_writes or 0 for s in self.metadata.write_stats)

    @property
    def bytes_written(self) -> int:
        return sum(s.total_write_bytes or 0 for s in self.metadata.write_stats)

    @property
    def file_groups_replaced(self) -> int:
        return sum(len(ids) for ids in self.metadata.partition_to_replace_file_ids.values())


# -- step 1: the driver prepares ---------------------------------------------------------------------------


def pending_clusterings(table: Table) -> list[Instant]:
    """Pending clusterings, oldest first (v6 pending replacecommits without a clustering plan, INSERT
    OVERWRITEs, are not clusterings)."""
    pending = table.timeline.pending_clusterings(table_version=table.config.table_version)
    return sorted((i for i in pending if is_clustering(table, i.time)), key=lambda i: i.time)


def prepare_clustering(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    parquet: ParquetOptions | None = None,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
    fence: Callable[[], None] | None = None,
    layout: LayoutConfig | None = None,
) -> PreparedClustering:
    """Move the clustering at ``instant_time`` (default: the earliest pending one) to inflight.

    The caller holds the instant's claim: an inflight instant is an abandoned attempt and is rolled back
    first. Raises :class:`NothingToCluster` when there is no such pending clustering, and
    :class:`ClusteringConflict` (after removing the stale plan) when a write touched its file groups since
    it was planned. ``layout`` is the executor's layout configuration, used for a plan whose strategy
    parameters name none (Hudi's planners never write one; Hudi's executors use their own config too).
    """
    generator = time_generator or InstantTimeGenerator()
    table = view if view is not None else Table.load(storage)
    check_clusterable(table)
    sweep_completed(storage, table.timeline.is_completed)
    instant = pending_instant(
        table.timeline,
        pending_clusterings(table),
        instant_time,
        what="clustering",
        where=storage.uri,
        completed=lambda t: is_clustering(table, t),
        nothing=NothingToCluster,
    )
    plan = clustering_plan_of(table, instant.time)
    if plan is None:  # pending_clusterings holds plans only
        raise CorruptTimelineFile(f"clustering {instant.time} of {storage.uri} holds no clustering plan")
    sort_columns, strategy = _check_executable(plan, instant.time, layout or LayoutConfig())
    _check_curve_columns(table, instant.time, sort_columns, strategy)
    withdrawn: list[Instant] = []
    if instant.state is State.INFLIGHT:  # an abandoned attempt that yields is left as it is, not rolled back
        withdrawn = ensure_alone(storage, lock, instant, what="clustering", config=table.config)
    instant, rolled_back = restart_abandoned(
        storage, lock, instant, _rollback_groups(plan), generator, fence=fence
    )
    if rolled_back is not None or withdrawn:  # the view lists the withdrawn plans, whose files are gone
        table = Table.load(storage)
    conflict = find_conflict(table, instant.time, plan)
    if conflict is not None:
        _abort(storage, lock, instant, plan, conflict, generator)
    schema = writer_schema(table, writes="base files", failed=ClusteringFailed)
    timeline_writer = TimelineWriter(storage, table.config, lock, time_generator=generator)
    inflight, withdrawn = start_alone(storage, lock, timeline_writer, instant, what="clustering")
    if withdrawn:  # the view lists the withdrawn plans, whose files are gone
        table = Table.load(storage)
    failpoint("clustering.after_inflight")
    options = parquet or ParquetOptions.from_config(table.config.props)
    stored = {
        (s.partition_path, s.file_id): s.base_file_size + sum(s.log_file_sizes) for s in table.file_slices()
    }

    def slice_bytes(info: SliceInfo) -> int:
        return stored.get((info.partition_path, info.file_id), 0)

    # With a record index a key lives in one file group, so splitting cannot part copies the rule would keep
    # together; without one, copies of a key in two of the plan's slices are only gathered in one task.
    split = "record_index" not in table.config.metadata_partitions
    groups = [
        part
        for group in plan.input_groups
        for part in (split_group(group, sort_columns, slice_bytes) if split else [group])
    ]
    tasks = tuple(
        ClusteringTask(
            storage=storage.ref(),
            instant_time=instant.time,
            index=i,
            partition_path=group.slices[0].partition_path,
            group=group,
            sort_columns=sort_columns,
            writer_schema=schema,
            parquet=options,
            config=table.config,
            layout=strategy,
        )
        for i, group in enumerate(groups)
    )
    task_bytes = tuple(sum(slice_bytes(s) for s in g.slices) for g in groups)
    return PreparedClustering(inflight, plan, tasks, schema, table.config, rolled_back, task_bytes=task_bytes)


def _check_executable(
    plan: ClusteringPlan, instant_time: str, layout: LayoutConfig
) -> tuple[tuple[str, ...], LayoutStrategy]:
    """Refuse plans hoodied cannot execute as planned; returns the sort columns and the layout (the plan's,
    else ``layout``'s: :meth:`LayoutConfig.for_plan`)."""
    strategy = plan.strategy
    name = (strategy.strategy_class_name if strategy else None) or _SORT_AND_SIZE[0]
    if name.rsplit(".", 1)[-1] not in _SORT_AND_SIZE:
        raise UnsupportedTable(
            f"clustering {instant_time}: execution strategy {name} is not one hoodied runs "
            f"({', '.join(_SORT_AND_SIZE)})"
        )
    params = strategy.strategy_params if strategy else {}
    layout_strategy = layout.for_plan(params, instant_time)
    for group in plan.input_groups:
        if not group.slices:
            raise CorruptTimelineFile(f"clustering {instant_time}: a clustering group without file slices")
        partitions = {s.partition_path for s in group.slices}
        if len(partitions) > 1:
            raise UnsupportedTable(
                f"clustering {instant_time}: a group spans partitions {sorted(partitions)}; hoodied clusters "
                "within a partition"
            )
        if any(s.bootstrap_file_path for s in group.slices):
            raise UnsupportedTable(f"clustering {instant_time}: bootstrap base files are not supported")
    raw = params.get(SORT_COLUMNS) or ""
    return tuple(c.strip() for c in raw.split(",") if c.strip()), layout_strategy


def _check_curve_columns(
    table: Table, instant_time: str, columns: tuple[str, ...], strategy: LayoutStrategy
) -> None:
    """A curve over two or more columns needs each to be a column of the table with a curve mapping (Hudi's
    executor fails on anything else); refused before the instant moves to inflight."""
    if not strategy.is_curve or len(columns) < 2:
        return
    schema = table.read_schema()
    if schema is None:
        raise UnsupportedTable(f"clustering {instant_time}: the table records no schema to order by")
    problems = curve_problems(schema, columns)
    if problems:
        raise UnsupportedTable(
            f"clustering {instant_time}: {SORT_COLUMNS} on a {strategy.value} curve: {'; '.join(problems)}"
        )


def _rollback_groups(plan: ClusteringPlan) -> list[tuple[str, str | None]]:
    """Where an attempt of ``plan`` wrote: new file groups (any file id) in the plan's partitions."""
    return [(p, None) for p in sorted({s.partition_path for s in plan.slices})]


def _abort(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    plan: ClusteringPlan,
    conflict: Conflict,
    generator: InstantTimeGenerator | None,
) -> NoReturn:
    """Roll the clustering back for good (files and plan) and raise :class:`ClusteringConflict`."""
    rollback = rollback_unfinished(
        storage, lock, instant, _rollback_groups(plan), time_generator=generator, remove=True
    )
    T = instant.time
    message = (
        f"clustering {T} of {storage.uri} conflicts: {conflict.describe()}. Nothing was committed: the "
        f"clustering was rolled back for good by rollback {rollback.rollback_instant.time} "
        f"({len(rollback.deleted)} file(s) deleted, its stale plan removed), so its file groups can be "
        "planned again"
    )
    logger.warning("%s", message)
    raise ClusteringConflict(message, conflict.instant.time, rollback)


# -- step 2: a task rewrites one group ---------------------------------------------------------------------


def run_clustering_task(
    task: ClusteringTask, write_token: str, *, spill: SpillSettings | None = None
) -> TaskResult:
    """Rewrite one clustering group into new file groups (see the module doc, *Memory* for how); ``spill``
    says where the sorted runs go and how finely they are merged (defaults: :class:`SpillSettings`)."""
    started = time.monotonic()
    storage = task.storage.open()
    table = Table.load(storage, task.config)
    cfg = table.config
    T = task.instant_time
    # A task attempt that outlived its job (rolled back meanwhile) must write nothing.
    check_still_inflight(storage, table, "clustering", T, requested_action(cfg.table_version), ())
    partition = task.partition_path
    schema = table.read_schema()
    scan_ms = 0
    with SortedRuns(task.sort_columns, task.layout, spill) as runs:
        for info in task.group.slices:
            file_slice = _slice_of(storage, info)
            merge = table.merge_file_slice(file_slice, as_of=T, strict=True)
            scan_ms += merge.scan_ms
            merged, ledger, log_keys = merge.table, merge.ledger, len(merge.log_keys)
            del merge  # each step below replaces the rows: one copy of the slice at a time
            if merged is not None:
                merged = drop_deleted_rows(merged)
                if schema is not None:
                    merged = conform_table(merged, schema).select(schema.names)
                ledger.written(table.record_keys_of(merged))
                runs.add(merged, group_keys(merged, cfg.populate_meta_fields, cfg.record_key_fields))
                del merged  # before the next slice is merged
                release_freed_heap()
            # The group's output is the union of its slices, each exactly as its readers see it.
            problems = ledger.problems()
            if problems:
                raise ClusteringFailed(
                    f"clustering {T}: slice {partition or '<table>'}/{file_slice.file_id} would not be "
                    f"written as its readers see it ({ledger.base_rows} live base rows, {log_keys} log keys, "
                    f"{ledger.written_rows} merged): {'; '.join(problems)}; refusing to write it"
                )
        stats = _write_files(task, write_token, storage, runs)
        n_rows = runs.rows
    logger.debug(
        "clustering %s: group %d (%d slice(s) in %s, %s) -> %d file(s), %d rows in %.2f s (scan %d ms)",
        T,
        task.index,
        len(task.group.slices),
        partition or "<table>",
        task.layout.value,
        len(stats),
        n_rows,
        time.monotonic() - started,
        scan_ms,
    )
    return TaskResult(task.index, tuple(stats), n_rows, write_token)


def _write_files(
    task: ClusteringTask, write_token: str, storage: Storage, runs: SortedRuns
) -> list[WriteStat]:
    """Write the group's files one after another from the merged runs (see the module doc, *Memory*)."""
    cfg = task.config
    T = task.instant_time
    partition = task.partition_path
    budget = runs.budget_rows()
    plan = output_files(
        runs, task.group.num_output_file_groups or 1, budget, cfg.populate_meta_fields, cfg.record_key_fields
    )
    per_row = max(1.0, runs.total_bytes / max(1, runs.rows))
    group_rows = max(1, min(budget, int(task.parquet.row_group_bytes / per_row)))
    name_column = cfg.populate_meta_fields and FILE_NAME in runs.columns
    merged = MergedCursor(runs.merged(budget))
    markers = Markers(storage, T)
    stats: list[WriteStat] = []
    try:
        for f in range(len(plan.bounds) - 1):
            rows = plan.rows(f)
            lo, hi = int(plan.bounds[f]), int(plan.bounds[f + 1])
            if rows == 0:  # every row left for an earlier file
                merged.skip(hi - lo)
                continue
            file_id = f"{uuid.uuid4()}-0"
            name = BaseFile(file_id, write_token, T, "parquet").file_name
            path = f"{partition}/{name}" if partition else name
            markers.create(partition, name, IOType.CREATE)
            write_started = time.monotonic()
            written, _ = write_base_file_chunks(
                storage,
                path,
                row_groups(file_rows(merged, runs, plan, f, budget), group_rows),
                avro_schema=task.writer_schema,
                options=task.parquet,
                populate_meta_fields=cfg.populate_meta_fields,
                key_fields=cfg.record_key_fields,
                constants={FILE_NAME: name} if name_column else None,
                keep_keys=False,
            )
            if written.num_rows != rows:
                raise ClusteringFailed(
                    f"clustering {T}: {path} got {written.num_rows} rows where its share is {rows}"
                )
            failpoint("clustering.task_after_write")
            stats.append(
                _write_stat(cfg.table_version, file_id, path, partition, rows, written, write_started)
            )
    finally:
        merged.close()
    return stats


def _write_stat(
    table_version: int,
    file_id: str,
    path: str,
    partition: str,
    rows: int,
    written: BaseFileStats,
    write_started: float,
) -> WriteStat:
    """Hudi's write stat of a file clustering created (as the fixtures' replacecommits hold them)."""
    size = written.file_size_bytes
    v8 = table_version >= 8
    return WriteStat(
        file_id=file_id,
        path=path,
        partition_path=partition,
        prev_commit="null",
        num_writes=rows,
        num_deletes=0,
        num_update_writes=0,
        num_inserts=rows,
        num_updates=0 if v8 else None,
        total_write_bytes=size,
        total_write_errors=0,
        file_size_in_bytes=size,
        total_log_records=0,
        total_log_files_compacted=0,
        total_log_size_compacted=0,
        total_updated_records_compacted=0,
        total_log_blocks=0,
        total_corrupt_log_block=0,
        total_rollback_blocks=0,
        total_log_read_time_ms=0 if v8 else None,
        runtime_stats=RuntimeStats(
            total_scan_time=0,
            total_upsert_time=0,
            total_create_time=int((time.monotonic() - write_started) * 1000),
        ),
    )


def _slice_of(storage: Storage, info: SliceInfo) -> FileSlice:
    """The file slice a plan's slice names (files by name in its partition), with their sizes on storage."""
    partition = info.partition_path
    base_name = info.data_file_name
    base = BaseFile.parse(base_name) if base_name else None
    logs = tuple(sorted((LogFile.parse(n) for n in info.delta_file_names), key=lambda lf: lf.sort_key))
    if base is not None:
        base_instant = base.instant_time
    elif logs:
        base_instant = logs[0].instant
    else:
        raise CorruptTimelineFile(f"clustering slice {partition}/{info.file_id} names no file")
    if any(f.file_id != info.file_id for f in (base, *logs) if f is not None):
        raise CorruptTimelineFile(
            f"clustering slice {partition}/{info.file_id} names a file of another group"
        )
    rel = (lambda n: f"{partition}/{n}") if partition else (lambda n: n)
    return FileSlice(
        FileGroupId(partition, info.file_id),
        base_instant,
        base,
        storage.size(rel(base.file_name)) if base else 0,
        logs,
        tuple(storage.size(rel(lf.file_name)) for lf in logs),
    )


def commit_clustering(
    storage: Storage,
    lock: LockProvider,
    prepared: PreparedClustering,
    results: Sequence[TaskResult],
    *,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> ClusteringResult:
    """Check the tasks' results and complete the clustering (see the module doc).

    ``fence`` re-checks the caller's claim on the instant; it runs under the table lock right before the
    completing write and raises when the claim was lost (then nothing is committed). A conflicting write
    raises :class:`ClusteringConflict` after the clustering was rolled back for good.
    """
    instant = prepared.instant
    T = instant.time
    all_stats = [s for r in results for s in r.stats]
    try:
        stats = _check_results(storage, prepared, results)
    except HoodieError:  # a stale attempt (rolled back or completed by another runner) says so instead
        check_still_inflight(storage, Table.load(storage), "clustering", T, instant.action, all_stats)
        raise
    replaced: dict[str, list[str]] = {}
    for s in prepared.plan.slices:
        replaced.setdefault(s.partition_path, []).append(s.file_id)
    metadata = CommitMetadata(
        partition_to_write_stats=by_partition(stats),
        extra_metadata={"schema": prepared.writer_schema},
        operation_type=OPERATION_TYPE,
        compacted=False,
        partition_to_replace_file_ids={p: tuple(ids) for p, ids in replaced.items()},
        replace=True,
    )
    done, conflict, strays = complete_rewrite(
        storage,
        prepared.config,
        lock,
        instant,
        metadata,
        stats,
        service="clustering",
        content=metadata,
        record_index=True,  # records move to new file groups
        fence=fence,
        conflict=lambda current: find_conflict(current, T, prepared.plan),
        time_generator=time_generator,
    )
    if conflict is not None:
        _abort(storage, lock, instant, prepared.plan, conflict, time_generator)
    assert done is not None
    result = ClusteringResult(done, metadata, strays)
    logger.debug(
        "completed clustering %s on %s: %d file group(s) replaced by %d, %d record(s), %d byte(s)",
        T,
        storage.uri,
        result.file_groups_replaced,
        len(stats),
        result.records_written,
        result.bytes_written,
    )
    return result


def _check_results(
    storage: Storage, prepared: PreparedClustering, results: Sequence[TaskResult]
) -> list[WriteStat]:
    T = prepared.instant.time
    indexes = [t.index for t in prepared.tasks]
    by_index = results_by_task(
        results, indexes, what=f"clustering {T}", unit="group", failed=ClusteringFailed
    )
    inputs = {s.file_id for s in prepared.plan.slices}
    stats: list[WriteStat] = []
    for task in prepared.tasks:
        result = by_index[task.index]
        expected = max(1, task.group.num_output_file_groups or 1)
        if len(result.stats) > expected:
            raise ClusteringFailed(
                f"clustering {T}: group {task.index} wrote {len(result.stats)} files, planned {expected}"
            )
        for stat in result.stats:
            if (
                (stat.partition_path or "") != task.partition_path
                or not stat.path
                or not stat.file_id
                or stat.file_id in inputs
                or not stat.path.endswith(f"_{T}.parquet")
            ):
                raise ClusteringFailed(f"clustering {T}: group {task.index} reported a file it cannot have")
            try:
                rows = written_rows(storage, stat.path)
            except CorruptBaseFile as e:
                raise ClusteringFailed(f"clustering {T}: group {task.index}: {e}") from e
            if rows != stat.num_writes:
                raise ClusteringFailed(
                    f"clustering {T}: {stat.path} holds {rows} rows, its task reported {stat.num_writes}"
                )
            stats.append(stat)
        written = sum(s.num_writes or 0 for s in result.stats)
        if written != result.input_rows:
            raise ClusteringFailed(
                f"clustering {T}: group {task.index} merged {result.input_rows} records but wrote {written}"
            )
    if len({s.file_id for s in stats}) != len(stats):
        raise ClusteringFailed(f"clustering {T}: two results name the same new file group")
    return stats


def cluster_in_process(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    parquet: ParquetOptions | None = None,
    fence: Callable[[], None] | None = None,
) -> ClusteringResult:
    """Run a pending clustering with its tasks in this process, one after another (tests, benchmarks and
    small tables; hoodied runs the tasks as a Spark job)."""
    prepared = prepare_clustering(storage, lock, instant_time, parquet=parquet)
    results = [run_clustering_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    return commit_clustering(storage, lock, prepared, results, fence=fence)


__all__ = [
    "ClusteringConflict",
    "ClusteringFailed",
    "ClusteringResult",
    "ClusteringTask",
    "NothingToCluster",
    "PreparedClustering",
    "TaskResult",
    "cluster_in_process",
    "commit_clustering",
    "pending_clusterings",
    "prepare_clustering",
    "run_clustering_task",
]
