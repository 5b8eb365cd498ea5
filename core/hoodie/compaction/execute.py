"""Compaction execution: the driver's steps around the tasks, and the task that compacts one file slice.

The three steps, each usable from any engine (hoodied runs the tasks as a Spark job; tests and benchmarks
may run them in-process):

1. :func:`prepare_compaction` (driver): picks the instant (the earliest pending compaction by default),
   rolls back an unfinished earlier attempt (the caller holds the instant's claim, so an inflight instant is
   abandoned), moves it to inflight and returns one :class:`CompactionTask` per plan operation.
2. :func:`run_compaction_task` (executor): merges the slice's base file with its log files as of the
   compaction instant (our vectorised merge), checks the result against the keys it read (every record its
   readers see, no other: :mod:`hoodie.read.conservation`), and writes the new base file
   ``<file id>_<write token>_<compaction instant>.parquet`` (meta columns kept: each record's commit time
   and sequence number stay, ``_hoodie_file_name`` names the new file), announced by a marker first. It
   returns the file's :class:`~hoodie.timeline.metadata.WriteStat` with Hudi's compaction numbers.
3. :func:`commit_compaction` (driver): checks the results (one per operation, the file on storage holding the
   rows the task reported), deletes files that markers announce but no result names (failed or speculative
   task attempts), then under the table lock re-checks the claim (``fence``) and that the instant is still
   inflight, and completes it as a ``commit`` with the commit metadata (``operationType`` COMPACT,
   ``compacted`` true, the writer schema). Markers go last.

Nothing becomes visible before step 3's atomic completion: readers ignore base files of an inflight
instant. A crash anywhere leaves the instant inflight; the next attempt rolls it back and runs it again, and
the completing create-if-absent lets only one attempt commit.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

from hoodie.compaction.plan import check_compactable
from hoodie.config import TableConfig
from hoodie.errors import CorruptBaseFile, HoodieError, NothingToDo
from hoodie.failpoints import failpoint
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId, FileSlice
from hoodie.lock import LockProvider
from hoodie.log.log_file import LogFile
from hoodie.memory import return_freed_arrow_memory
from hoodie.read.conform import conform_table
from hoodie.storage import Storage, StorageRef
from hoodie.table import Table
from hoodie.timeline.instant import COMPACTION, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    CommitMetadata,
    CompactionOperation,
    CompactionPlan,
    RuntimeStats,
    WriteStat,
    decode_compaction_plan,
    encode_commit_metadata,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.base_file import ParquetOptions, write_base_file_chunks
from hoodie.write.markers import Markers, sweep_completed
from hoodie.write.plan_overlap import ensure_alone, start_alone
from hoodie.write.rollback import RollbackResult
from hoodie.write.service_commit import (
    by_partition,
    check_still_inflight,
    complete_rewrite,
    written_rows,
)
from hoodie.write.service_instant import pending_instant, restart_abandoned, results_by_task, writer_schema

logger = logging.getLogger(__name__)

FILE_NAME = "_hoodie_file_name"


class NothingToCompact(NothingToDo):
    """No pending compaction (or not the one asked for)."""


class CompactionFailed(HoodieError):
    """A compaction definitely did not commit (its instant stays pending, to be rolled back and re-run)."""


@dataclass(frozen=True)
class CompactionTask:
    """Everything an executor needs to compact one operation; small and picklable."""

    storage: StorageRef
    instant_time: str
    index: int
    operation: CompactionOperation
    writer_schema: str  # the table's Avro schema (without meta fields), written to the new base file
    parquet: ParquetOptions
    config: TableConfig  # the table's, as the driver read it (a task lists the timeline only)


@dataclass(frozen=True)
class TaskResult:
    """What one task wrote."""

    index: int
    stat: WriteStat
    write_token: str


@dataclass(frozen=True)
class PreparedCompaction:
    """A compaction moved to inflight, with its plan and tasks."""

    instant: Instant
    plan: CompactionPlan
    tasks: tuple[CompactionTask, ...]
    writer_schema: str
    config: TableConfig
    rolled_back: RollbackResult | None = None


@dataclass(frozen=True)
class CompactionResult:
    """A completed compaction."""

    instant: Instant
    metadata: CommitMetadata
    strays_deleted: tuple[str, ...]

    @property
    def records_written(self) -> int:
        return sum(s.num_writes or 0 for s in self.metadata.write_stats)

    @property
    def bytes_written(self) -> int:
        return sum(s.total_write_bytes or 0 for s in self.metadata.write_stats)


# -- step 1: the driver prepares ---------------------------------------------------------------------------


def pending_compactions(table: Table) -> list[Instant]:
    """Pending compactions, oldest first."""
    return sorted(table.timeline.pending_compactions(), key=lambda i: i.time)


def prepare_compaction(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    parquet: ParquetOptions | None = None,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
    fence: Callable[[], None] | None = None,
) -> PreparedCompaction:
    """Move the compaction at ``instant_time`` (default: the earliest pending one) to inflight.

    The caller holds the instant's claim: an inflight instant is an abandoned attempt and is rolled back
    first. Raises :class:`NothingToCompact` when there is no such pending compaction.
    """
    generator = time_generator or InstantTimeGenerator()
    table = view if view is not None else Table.load(storage)
    check_compactable(table)
    sweep_completed(storage, table.timeline.is_completed)
    instant = pending_instant(
        table.timeline,
        pending_compactions(table),
        instant_time,
        what="compaction",
        where=storage.uri,
        completed=table.timeline.was_compaction,
        nothing=NothingToCompact,
    )
    plan = decode_compaction_plan(
        storage.read(table.timeline.file_of(instant.time, State.REQUESTED)), base_path=storage.uri
    )
    groups = [(op.partition_path, op.file_id) for op in plan.operations]
    if instant.state is State.INFLIGHT:  # an abandoned attempt that yields is left as it is, not rolled back
        ensure_alone(storage, lock, instant, what="compaction", config=table.config)
    instant, rolled_back = restart_abandoned(storage, lock, instant, groups, generator, fence=fence)
    if rolled_back is not None:
        table = Table.load(storage)
    schema = writer_schema(table, writes="base files", failed=CompactionFailed)
    timeline_writer = TimelineWriter(storage, table.config, lock, time_generator=generator)
    inflight, _ = start_alone(storage, lock, timeline_writer, instant, what="compaction")  # only config read
    failpoint("compaction.after_inflight")
    options = parquet or ParquetOptions.from_config(table.config.props)
    tasks = tuple(
        CompactionTask(
            storage=storage.ref(),
            instant_time=instant.time,
            index=i,
            operation=op,
            writer_schema=schema,
            parquet=options,
            config=table.config,
        )
        for i, op in enumerate(plan.operations)
    )
    return PreparedCompaction(inflight, plan, tasks, schema, table.config, rolled_back)


# -- step 2: a task compacts one slice ---------------------------------------------------------------------


def run_compaction_task(task: CompactionTask, write_token: str) -> TaskResult:
    """Compact one file slice into a new base file (see the module doc)."""
    started = time.monotonic()
    storage = task.storage.open()
    table = Table.load(storage, task.config)
    cfg = table.config
    op = task.operation
    T = task.instant_time
    # A task attempt that outlived its job (rolled back meanwhile) must write nothing.
    check_still_inflight(storage, table, "compaction", T, COMPACTION, ())
    file_slice = _slice_of(storage, op)
    return_freed_arrow_memory()
    # One base-file row group at a time: the writer merges the next one on a thread while it encodes this one.
    merge = table.stream_file_slice(file_slice, as_of=T, strict=True)
    schema = table.read_schema()

    def chunks() -> Iterator[pa.Table]:
        for chunk in merge.chunks:
            if schema is not None:
                chunk = conform_table(chunk, schema).select(schema.names)
            merge.ledger.written(table.record_keys_of(chunk))
            yield chunk

    name = BaseFile(op.file_id, write_token, T, "parquet").file_name
    path = f"{op.partition_path}/{name}" if op.partition_path else name
    io_type = "MERGE" if op.data_file_path else "CREATE"
    Markers(storage, T).create(op.partition_path, name, io_type)
    merge_started = time.monotonic()
    written, _ = write_base_file_chunks(
        storage,
        path,
        chunks(),
        avro_schema=task.writer_schema,
        options=task.parquet,
        populate_meta_fields=cfg.populate_meta_fields,
        key_fields=cfg.record_key_fields,
        constants={FILE_NAME: name} if cfg.populate_meta_fields else None,
        keep_keys=False,  # the ledger holds the keys written
    )
    rows = written.num_rows
    lost_or_invented = merge.ledger.problems()
    if lost_or_invented or merge.ledger.written_rows != rows:
        storage.delete(path)
        raise CompactionFailed(
            f"compaction {T}: slice {op.partition_path}/{op.file_id} would not write the records its readers "
            f"see ({merge.ledger.base_rows} live base rows, {len(merge.log_keys)} log keys, {rows} written): "
            f"{'; '.join(lost_or_invented) or 'row counts differ'}; file deleted, nothing committed"
        )
    failpoint("compaction.task_after_write")
    write_ms = int((time.monotonic() - merge_started) * 1000)
    updated, from_base = merge.base_updated, merge.base_kept
    new_rows = rows - from_base
    # Hudi 0.x counts records new to the file as inserts; 1.x every written record that was not an update.
    inserts = new_rows if cfg.table_version < 8 else rows - min(updated, from_base)
    deletes = merge.base_records - from_base
    stat = WriteStat(
        file_id=op.file_id,
        path=path,
        partition_path=op.partition_path,
        prev_commit=op.base_instant_time,
        num_writes=rows,
        num_deletes=deletes,
        num_update_writes=updated,
        num_inserts=inserts,
        total_write_bytes=written.file_size_bytes,
        total_write_errors=0,
        file_size_in_bytes=written.file_size_bytes,
        total_log_records=merge.log_records,
        total_log_files_compacted=len(op.delta_file_paths),
        total_log_size_compacted=int(op.metrics.get("TOTAL_LOG_FILES_SIZE", 0.0)),
        total_updated_records_compacted=len(merge.log_keys),
        total_log_blocks=merge.log_blocks,
        total_corrupt_log_block=merge.corrupt_blocks,
        total_rollback_blocks=merge.rollback_blocks,
        total_log_read_time_ms=merge.scan_ms if cfg.table_version >= 8 else None,
        prev_base_file=op.data_file_path if cfg.table_version >= 8 else None,
        runtime_stats=RuntimeStats(
            total_scan_time=merge.scan_ms,
            total_upsert_time=write_ms if op.data_file_path else 0,
            total_create_time=0 if op.data_file_path else write_ms,
        ),
    )
    if merge.corrupt_blocks:
        logger.warning(
            "compaction %s: %d torn log block(s) no completed commit wrote skipped in file group %s",
            T,
            merge.corrupt_blocks,
            FileGroupId(op.partition_path, op.file_id),
        )
    logger.debug(
        "compaction %s: %s/%s -> %s (%d rows) in %.2f s",
        T,
        op.partition_path,
        op.file_id,
        name,
        rows,
        time.monotonic() - started,
    )
    return TaskResult(task.index, stat, write_token)


def _slice_of(storage: Storage, op: CompactionOperation) -> FileSlice:
    """The file slice an operation names, with the sizes storage reports."""
    base = BaseFile.parse(op.data_file_path) if op.data_file_path else None
    rel = (lambda n: f"{op.partition_path}/{n}") if op.partition_path else (lambda n: n)
    logs = tuple(LogFile.parse(n) for n in op.delta_file_paths)
    logs = tuple(sorted(logs, key=lambda lf: lf.sort_key))
    return FileSlice(
        FileGroupId(op.partition_path, op.file_id),
        op.base_instant_time,
        base,
        storage.size(rel(base.file_name)) if base else 0,
        logs,
        tuple(storage.size(rel(lf.file_name)) for lf in logs),
    )


# -- step 3: the driver commits ----------------------------------------------------------------------------


def commit_compaction(
    storage: Storage,
    lock: LockProvider,
    prepared: PreparedCompaction,
    results: Sequence[TaskResult],
    *,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> CompactionResult:
    """Check the tasks' results and complete the compaction (see the module doc).

    ``fence`` re-checks the caller's claim on the instant; it runs under the table lock right before the
    completing write and raises when the claim was lost (then nothing is committed).
    """
    instant = prepared.instant
    T = instant.time
    try:
        stats = _check_results(storage, prepared, results)
    except HoodieError:  # a stale attempt (rolled back or completed by another runner) says so instead
        check_still_inflight(
            storage, Table.load(storage), "compaction", T, COMPACTION, [r.stat for r in results]
        )
        raise
    metadata = CommitMetadata(
        partition_to_write_stats=by_partition(stats),
        extra_metadata={"schema": prepared.writer_schema},
        operation_type="COMPACT",
        compacted=True,
    )
    content = encode_commit_metadata(metadata, table_version=prepared.config.table_version, action="commit")
    done, _, strays = complete_rewrite(
        storage,
        prepared.config,
        lock,
        instant,
        metadata,
        stats,
        service="compaction",
        content=content,
        record_index=False,  # records stay in their file group
        fence=fence,
        time_generator=time_generator,
    )
    assert done is not None  # no conflict check: a compaction conflicts with no write
    result = CompactionResult(done, metadata, strays)
    logger.debug(
        "completed compaction %s on %s: %d file group(s), %d record(s), %d byte(s)",
        T,
        storage.uri,
        len(stats),
        result.records_written,
        result.bytes_written,
    )
    return result


def _check_results(
    storage: Storage, prepared: PreparedCompaction, results: Sequence[TaskResult]
) -> list[WriteStat]:
    T = prepared.instant.time
    indexes = [t.index for t in prepared.tasks]
    by_index = results_by_task(
        results, indexes, what=f"compaction {T}", unit="operation", failed=CompactionFailed
    )
    stats = []
    for task in prepared.tasks:
        stat = by_index[task.index].stat
        op = task.operation
        if stat.file_id != op.file_id or (stat.partition_path or "") != op.partition_path or not stat.path:
            raise CompactionFailed(f"compaction {T}: operation {task.index} reported another file group")
        try:
            rows = written_rows(storage, stat.path)
        except CorruptBaseFile as e:
            raise CompactionFailed(f"compaction {T}: the file of operation {task.index}: {e}") from e
        if rows != stat.num_writes:
            raise CompactionFailed(
                f"compaction {T}: {stat.path} holds {rows} rows, its task reported {stat.num_writes}"
            )
        stats.append(stat)
    return stats


def compact_in_process(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    parquet: ParquetOptions | None = None,
    fence: Callable[[], None] | None = None,
) -> CompactionResult:
    """Run a pending compaction with its tasks in this process, one after another (tests, benchmarks and
    small tables; hoodied runs the tasks as a Spark job)."""
    prepared = prepare_compaction(storage, lock, instant_time, parquet=parquet)
    results = [run_compaction_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    return commit_compaction(storage, lock, prepared, results, fence=fence)


__all__ = [
    "CompactionFailed",
    "CompactionResult",
    "CompactionTask",
    "NothingToCompact",
    "PreparedCompaction",
    "TaskResult",
    "commit_compaction",
    "compact_in_process",
    "pending_compactions",
    "prepare_compaction",
    "run_compaction_task",
]
