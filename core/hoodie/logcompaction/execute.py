"""Log compaction execution: the driver's steps around the tasks, and the task that log-compacts one slice.

1. :func:`prepare_log_compaction` (driver): picks the instant (the earliest pending log compaction by
   default), rolls back an unfinished earlier attempt (the caller holds the instant's claim), moves it to
   inflight and returns one :class:`LogCompactionTask` per plan operation.
2. :func:`run_log_compaction_task` (executor): reads the operation's log files only (never the base file) as
   Hudi's log-compaction scan does, with the reader's rules (:mod:`hoodie.log.reader`: rollbacks, earlier log
   compactions; blocks of instants committed before the plan's) and a rewrite's integrity checks; reduces
   their records (:mod:`hoodie.logcompaction.reduce`), checks that every key the log names is written once,
   and writes the result as a NEW log file of the slice, announced by an APPEND marker first:

   - table versions 8 and 9: ``.<fileId>_<t>.log.1_<token>``, named with the log compaction's instant ``t``
     (as Hudi's append handle names a deltacommit's files);
   - table version 6: Hudi appends to the slice's latest log file (named with the slice's base instant).
     hoodied never appends: it writes the slice's next log version, ``.<fileId>_<base>.log.<n+1>_<token>``.

   Its blocks (deletes that void earlier versions, then the rows, then the winning deletes) carry header
   INSTANT_TIME ``t``, SCHEMA (the table's schema with meta fields) and COMPACTED_BLOCK_TIMES, the instants
   of the valid blocks it replaces, newest first, joined with ``,`` (an earlier log compaction's instant
   stands for the blocks it replaced). Rows keep their meta fields (``_hoodie_file_name`` is the file id, as
   Hudi's append handle writes it); deletes keep their ordering values. Readers put the new blocks where the
   newest block they replace was, and skip the replaced ones.
3. :func:`commit_log_compaction` (driver): checks the results (one per operation; the files hold the intact
   blocks of ``t`` the tasks reported), deletes log files of ``t`` that no result names (failed or duplicate
   task attempts), then completes the instant through the services' commit (:func:`~hoodie.write.
   service_commit.complete_rewrite`: the claim, still inflight, the metadata table's deltacommit listing the
   new log files) as a ``deltacommit`` with ``operationType`` LOG_COMPACT and the writer schema.

Nothing is visible before step 3: readers ignore blocks (v6) and log files (8+) of an instant that did not
complete. A crash leaves the instant inflight; the next attempt rolls it back (deleting the log files that
hold only its blocks, :func:`~hoodie.write.rollback.rollback_unfinished`) and runs it again. Failpoints
``logcompaction.after_inflight``, ``.task_after_write`` and the commit's ``.before_commit``,
``.during_commit``, ``.after_metadata_commit`` and ``.after_commit``.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config import TableConfig
from hoodie.errors import HoodieError, NothingToDo
from hoodie.failpoints import failpoint
from hoodie.file_group.file_group import FileGroupId
from hoodie.lock import LockProvider
from hoodie.log.block import BlockType, HeaderKey, iter_blocks
from hoodie.log.reader import LogScan, scan_log_files
from hoodie.log.writer import (
    encode_avro_data_block,
    encode_delete_block,
    encode_parquet_data_block,
    write_log_file,
)
from hoodie.logcompaction.plan import SERVICE, check_log_compactable, log_files_of
from hoodie.logcompaction.reduce import ReducedLog, reduce_log
from hoodie.logcompaction.trigger import LogCompactionConfig
from hoodie.metadata.updates import update_for_write
from hoodie.read.conform import conform_table
from hoodie.read.merge import Deletes, MergeInput, record_keys
from hoodie.schema import avro_to_arrow_schema
from hoodie.storage import Storage, StorageRef
from hoodie.table import Table
from hoodie.timeline.instant import DELTA_COMMIT, LOG_COMPACTION, Instant, State
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
from hoodie.write.attempt import attempt_of_file
from hoodie.write.base_file import with_meta_fields
from hoodie.write.markers import IOType, Markers, sweep_completed
from hoodie.write.plan_overlap import ensure_alone, start_alone
from hoodie.write.rollback import RollbackResult, files_written_by
from hoodie.write.service_commit import (
    by_partition,
    check_still_inflight,
    complete_rewrite,
    own_attempts,
)
from hoodie.write.service_instant import pending_instant, restart_abandoned, results_by_task, writer_schema

logger = logging.getLogger(__name__)

FILE_NAME = "_hoodie_file_name"
OPERATION_TYPE = "LOG_COMPACT"
"""The commit's ``operationType``: Jackson writes the enum's name (its ``value()`` is ``log_compact``)."""


class NothingToLogCompact(NothingToDo):
    """No pending log compaction (or not the one asked for)."""


class LogCompactionFailed(HoodieError):
    """A log compaction definitely did not commit (its instant stays pending, to be rolled back and run
    again)."""


@dataclass(frozen=True)
class LogCompactionTask:
    """Everything an executor needs to log-compact one operation; small and picklable."""

    storage: StorageRef
    instant_time: str
    index: int
    operation: CompactionOperation
    block_schema: str  # the Avro schema of the new blocks (the table's, with meta fields when populated)
    settings: LogCompactionConfig
    config: TableConfig  # the table's, as the driver read it (a task lists the timeline only)


@dataclass(frozen=True)
class TaskResult:
    """What one task wrote: a stat and the number of blocks per log file (none when the log held nothing
    valid)."""

    index: int
    stats: tuple[WriteStat, ...]
    blocks: tuple[int, ...]
    write_token: str
    records: int = 0  # rows and deleted keys written


@dataclass(frozen=True)
class PreparedLogCompaction:
    """A log compaction moved to inflight, with its plan and tasks."""

    instant: Instant
    plan: CompactionPlan
    tasks: tuple[LogCompactionTask, ...]
    writer_schema: str
    config: TableConfig
    rolled_back: RollbackResult | None = None

    @property
    def groups(self) -> tuple[tuple[str, str | None], ...]:
        """The (partition, file id) of every operation: where the attempt writes."""
        return tuple((op.partition_path, op.file_id) for op in self.plan.operations)


@dataclass(frozen=True)
class LogCompactionResult:
    """A completed log compaction."""

    instant: Instant
    metadata: CommitMetadata
    strays_deleted: tuple[str, ...]
    records_written: int = 0

    @property
    def bytes_written(self) -> int:
        return sum(s.total_write_bytes or 0 for s in self.metadata.write_stats)

    @property
    def blocks_read(self) -> int:
        return sum(s.total_log_blocks or 0 for s in self.metadata.write_stats)


# -- step 1: the driver prepares ---------------------------------------------------------------------------


def pending_log_compactions(table: Table) -> list[Instant]:
    """Pending log compactions, oldest first."""
    return sorted(table.timeline.pending_log_compactions(), key=lambda i: i.time)


def prepare_log_compaction(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    settings: LogCompactionConfig | None = None,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
    fence: Callable[[], None] | None = None,
) -> PreparedLogCompaction:
    """Move the log compaction at ``instant_time`` (default: the earliest pending one) to inflight.

    The caller holds the instant's claim: an inflight instant is an abandoned attempt and is rolled back
    first. Raises :class:`NothingToLogCompact` when there is no such pending log compaction.
    """
    generator = time_generator or InstantTimeGenerator()
    table = view if view is not None else Table.load(storage)
    check_log_compactable(table)
    sweep_completed(storage, table.timeline.is_completed)
    options = settings or LogCompactionConfig.from_config(table.config.props)
    timeline = table.timeline
    instant = pending_instant(
        timeline,
        pending_log_compactions(table),
        instant_time,
        what="log compaction",
        where=storage.uri,
        completed=lambda t: timeline.requested_action(t) == LOG_COMPACTION,
        nothing=NothingToLogCompact,
    )
    plan = decode_compaction_plan(
        storage.read(table.timeline.file_of(instant.time, State.REQUESTED)), base_path=storage.uri
    )
    groups = [(op.partition_path, op.file_id) for op in plan.operations]
    if instant.state is State.INFLIGHT:  # an abandoned attempt that yields is left as it is, not rolled back
        ensure_alone(storage, lock, instant, what="log compaction", config=table.config)
    instant, rolled_back = restart_abandoned(storage, lock, instant, groups, generator, fence=fence)
    if rolled_back is not None:
        table = Table.load(storage)
    schema = writer_schema(table, writes="log blocks", failed=LogCompactionFailed)
    block_schema = with_meta_fields(schema) if table.config.populate_meta_fields else schema
    timeline_writer = TimelineWriter(storage, table.config, lock, time_generator=generator)
    inflight, _ = start_alone(storage, lock, timeline_writer, instant, what="log compaction")
    failpoint(f"{SERVICE}.after_inflight")
    tasks = tuple(
        LogCompactionTask(
            storage=storage.ref(),
            instant_time=instant.time,
            index=i,
            operation=op,
            block_schema=block_schema,
            settings=options,
            config=table.config,
        )
        for i, op in enumerate(plan.operations)
    )
    return PreparedLogCompaction(inflight, plan, tasks, schema, table.config, rolled_back)


# -- step 2: a task log-compacts one slice -----------------------------------------------------------------


def run_log_compaction_task(task: LogCompactionTask, write_token: str) -> TaskResult:
    """Log-compact one file slice into a new log file (see the module doc)."""
    started = time.monotonic()
    storage = task.storage.open()
    table = Table.load(storage, task.config)
    cfg = table.config
    op = task.operation
    T = task.instant_time
    # A task attempt that outlived its job (rolled back meanwhile) must write nothing.
    check_still_inflight(storage, table, SERVICE, T, LOG_COMPACTION, ())
    rel = (lambda n: f"{op.partition_path}/{n}") if op.partition_path else (lambda n: n)
    paths = [rel(lf.file_name) for lf in log_files_of(op)]
    timeline = table.timeline
    scan = scan_log_files(
        storage,
        paths,
        include_instant=lambda t: timeline.is_committed(t, T),
        integrity=table.log_integrity,
    )
    scan_ms = int((time.monotonic() - started) * 1000)
    # The valid block instants, newest first (Hudi's order): those the new blocks replace.
    instants = list(dict.fromkeys(b.instant_time for b in reversed(scan.batches)))
    if not instants:
        logger.info("log compaction %s: no valid block in %s/%s", T, op.partition_path, op.file_id)
        return TaskResult(task.index, (), (), write_token)
    schema = avro_to_arrow_schema(task.block_schema)
    steps, log_keys, log_records = _steps(scan, schema, table)
    rules = table.merge_rules
    ordering_type = (
        schema.field(rules.ordering_field).type
        if rules.ordering_field is not None and rules.ordering_field in schema.names
        else None
    )
    reduced = reduce_log(
        steps,
        mode=rules.mode,
        key_fields=rules.key_fields,
        ordering_field=rules.ordering_field,
        ordering_type=ordering_type,
    )
    _check_conserved(
        reduced, log_keys, rules.key_fields, f"log compaction {T} of {op.partition_path}/{op.file_id}"
    )
    blocks = _blocks(reduced, task, instants, cfg.populate_meta_fields)
    if not blocks:
        return TaskResult(task.index, (), (), write_token)
    markers = Markers(storage, T)
    written = write_log_file(
        storage,
        op.partition_path,
        op.file_id,
        T if cfg.table_version >= 8 else op.base_instant_time,
        blocks,
        table_version=cfg.table_version,
        write_token=write_token,
        max_file_bytes=task.settings.max_log_file_bytes,
        before_create=lambda lf: _mark(markers, op.partition_path, lf.file_name),
    )
    failpoint(f"{SERVICE}.task_after_write")
    rows = reduced.rows.num_rows if reduced.rows is not None else 0
    deletes = len(reduced.voids.keys) + len(reduced.deletes.keys)
    stats = []
    for i, w in enumerate(written):
        first = i == 0
        stats.append(
            WriteStat(
                file_id=op.file_id,
                path=w.path,
                partition_path=op.partition_path,
                prev_commit=op.base_instant_time,
                num_writes=rows if first else 0,
                num_deletes=deletes if first else 0,
                num_update_writes=rows if first else 0,  # Hudi counts every log-compacted record an update
                num_inserts=0,
                total_write_bytes=w.size_bytes,
                total_write_errors=0,
                file_size_in_bytes=w.size_bytes,
                log_version=w.log_file.version,
                log_offset=0,
                base_file=op.data_file_path or "",
                log_files=(w.log_file.file_name,),
                total_log_records=log_records if first else 0,
                total_log_files_compacted=len(op.delta_file_paths) if first else 0,
                total_log_size_compacted=int(op.metrics.get("TOTAL_LOG_FILES_SIZE", 0.0)) if first else 0,
                total_updated_records_compacted=len(log_keys) if first else 0,
                total_log_blocks=scan.blocks_read if first else 0,
                total_corrupt_log_block=len(scan.corrupt_blocks) if first else 0,
                total_rollback_blocks=scan.rollback_blocks if first else 0,
                total_log_read_time_ms=(scan_ms if first else 0) if cfg.table_version >= 8 else None,
                runtime_stats=RuntimeStats(total_scan_time=scan_ms if first else 0),
            )
        )
    if scan.corrupt_blocks:
        logger.warning(
            "log compaction %s: %d torn log block(s) no completed commit wrote skipped in file group %s",
            T,
            len(scan.corrupt_blocks),
            FileGroupId(op.partition_path, op.file_id),
        )
    logger.debug(
        "log compaction %s: %s/%s, %d block(s) of %d instant(s) -> %s (%d row(s), %d delete(s)) in %.2f s",
        T,
        op.partition_path,
        op.file_id,
        scan.blocks_read,
        len(instants),
        ", ".join(w.path for w in written),
        rows,
        deletes,
        time.monotonic() - started,
    )
    return TaskResult(
        task.index, tuple(stats), tuple(w.blocks for w in written), write_token, reduced.record_count
    )


def _mark(markers: Markers, partition: str, name: str) -> None:
    markers.create(partition, name, IOType.APPEND)


def _steps(scan: LogScan, schema: pa.Schema, table: Table) -> tuple[list[MergeInput], pa.Array, int]:
    """The scan's batches as merge steps (rows conformed to the blocks' schema), the distinct keys they
    name, and how many records (rows and deleted keys) they hold."""
    steps: list[MergeInput] = []
    keys: list[pa.Array] = []
    records = 0
    key_fields = table.config.record_key_fields
    for batch in scan.batches:
        t = batch.table
        if batch.kind == "data":
            if not t.num_rows:
                continue
            data = conform_table(t, schema, source=batch.log_file).select(schema.names)
            steps.append(MergeInput(data=data))
            keys.append(record_keys(data, key_fields))
            records += data.num_rows
        else:
            deleted = t.column("_hoodie_record_key").combine_chunks().cast(pa.string())
            steps.append(MergeInput(deletes=Deletes(deleted, t.column("ordering_value").combine_chunks())))
            keys.append(deleted)
            records += len(deleted)
    distinct = pc.unique(pa.chunked_array(keys, pa.string())) if keys else pa.array([], pa.string())
    return steps, distinct, records


def _check_conserved(reduced: ReducedLog, log_keys: pa.Array, key_fields: Sequence[str], what: str) -> None:
    """Every key the log names is written exactly once among the winners (rows and deletes), no other; a void
    only for a key that has a winner after it."""
    parts = [reduced.deletes.keys.cast(pa.string())]
    if reduced.rows is not None and reduced.rows.num_rows:
        parts.append(record_keys(reduced.rows, key_fields))
    won = pa.chunked_array(parts, pa.string()).combine_chunks()
    distinct = pc.count_distinct(won).as_py() or 0
    covered = bool(pc.all(pc.is_in(log_keys, value_set=won)).as_py()) if len(log_keys) else True
    voids_ok = (
        bool(pc.all(pc.is_in(reduced.voids.keys, value_set=won)).as_py()) if len(reduced.voids.keys) else True
    )
    if distinct != len(won) or len(won) != len(log_keys) or not covered or not voids_ok:
        raise LogCompactionFailed(
            f"{what}: the reduced log does not name each of the log's {len(log_keys)} key(s) once "
            f"({len(won)} winner(s), {distinct} distinct); nothing written"
        )


def _blocks(
    reduced: ReducedLog, task: LogCompactionTask, instants: Sequence[str], populate: bool
) -> list[bytes]:
    """The new blocks: the voids, the rows, the winning deletes (module doc)."""
    op = task.operation
    T = task.instant_time
    compacted: dict[int, str] = {HeaderKey.COMPACTED_BLOCK_TIMES: ",".join(instants)}
    version = task.config.table_version

    def delete_block(d: Deletes) -> bytes:
        partitions = pa.array([op.partition_path] * len(d.keys), pa.string())
        ordering = d.ordering_values if not pa.types.is_null(d.ordering_values.type) else None
        return encode_delete_block(
            d.keys,
            partitions,
            ordering,
            instant_time=T,
            table_version=version,
            extra_headers={HeaderKey.SCHEMA: task.block_schema, **compacted},
        )

    blocks = []
    if len(reduced.voids.keys):
        blocks.append(delete_block(reduced.voids))
    rows = reduced.rows
    if rows is not None and rows.num_rows:
        if populate and FILE_NAME in rows.column_names:
            at = rows.column_names.index(FILE_NAME)
            rows = rows.set_column(at, FILE_NAME, pa.array([op.file_id] * rows.num_rows, pa.string()))
        if task.settings.block_format == "parquet":
            blocks.append(
                encode_parquet_data_block(
                    rows,
                    task.block_schema,
                    instant_time=T,
                    compression=task.settings.compression,
                    extra_headers=compacted,
                )
            )
        else:
            blocks.append(
                encode_avro_data_block(rows, task.block_schema, instant_time=T, extra_headers=compacted)
            )
    if len(reduced.deletes.keys):
        blocks.append(delete_block(reduced.deletes))
    return blocks


# -- step 3: the driver commits ----------------------------------------------------------------------------


def commit_log_compaction(
    storage: Storage,
    lock: LockProvider,
    prepared: PreparedLogCompaction,
    results: Sequence[TaskResult],
    *,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> LogCompactionResult:
    """Check the tasks' results and complete the log compaction (see the module doc).

    ``fence`` re-checks the caller's claim on the instant; it runs under the table lock right before the
    completing write and raises when the claim was lost (then nothing is committed).
    """
    instant = prepared.instant
    T = instant.time
    all_stats = [s for r in results for s in r.stats]
    try:
        stats = _check_results(storage, prepared, results)
    except HoodieError:  # a stale attempt (rolled back or completed by another runner) says so instead
        check_still_inflight(storage, Table.load(storage), SERVICE, T, LOG_COMPACTION, all_stats)
        raise
    check_still_inflight(storage, Table.load(storage), SERVICE, T, LOG_COMPACTION, all_stats)
    named = {s.path for s in stats}
    mine = own_attempts(stats)  # another run's files of this instant are never ours to delete
    strays = tuple(
        p
        for p in files_written_by(storage, T, prepared.groups)
        if p not in named and attempt_of_file(posixpath.basename(p)) in mine
    )
    for stray in strays:
        logger.info("log compaction %s: deleting %s, written by a failed or duplicate task attempt", T, stray)
        storage.delete(stray)
    metadata = CommitMetadata(
        partition_to_write_stats=by_partition(stats),
        extra_metadata={"schema": prepared.writer_schema},
        operation_type=OPERATION_TYPE,
        compacted=False,
    )
    version = prepared.config.table_version
    content = encode_commit_metadata(metadata, table_version=version, action=DELTA_COMMIT)
    done, _, more = complete_rewrite(
        storage,
        prepared.config,
        lock,
        instant,
        metadata,
        stats,
        service=SERVICE,
        content=content,
        record_index=False,  # records stay in their file group
        fence=fence,
        time_generator=time_generator,
        metadata_update=lambda cfg: update_for_write(storage, cfg, T, stats, index_log_records=False),
        metadata_step="log_files",  # the same update, rebuilt by a roll forward of the decision
    )
    assert done is not None  # no conflict check: a log compaction conflicts with no write
    result = LogCompactionResult(
        done, metadata, tuple(dict.fromkeys(strays + more)), sum(r.records for r in results)
    )
    logger.debug(
        "completed log compaction %s on %s: %d file slice(s), %d log file(s), %d record(s), %d byte(s)",
        T,
        storage.uri,
        len(prepared.plan.operations),
        len(stats),
        result.records_written,
        result.bytes_written,
    )
    return result


def _check_results(
    storage: Storage, prepared: PreparedLogCompaction, results: Sequence[TaskResult]
) -> list[WriteStat]:
    T = prepared.instant.time
    indexes = [t.index for t in prepared.tasks]
    by_index = results_by_task(
        results, indexes, what=f"log compaction {T}", unit="operation", failed=LogCompactionFailed
    )
    stats = []
    for task in prepared.tasks:
        result = by_index[task.index]
        op = task.operation
        if len(result.blocks) != len(result.stats):
            raise LogCompactionFailed(
                f"log compaction {T}: operation {task.index} reported a malformed result"
            )
        for stat, count in zip(result.stats, result.blocks, strict=True):
            if (
                stat.file_id != op.file_id
                or (stat.partition_path or "") != op.partition_path
                or not stat.path
            ):
                raise LogCompactionFailed(
                    f"log compaction {T}: operation {task.index} reported another file group"
                )
            _check_file(storage, stat, count, T)
            stats.append(stat)
    return stats


def _check_file(storage: Storage, stat: WriteStat, count: int, instant_time: str) -> None:
    """The log file a result names is there, of the size reported, holding ``count`` intact blocks of
    ``instant_time``."""
    assert stat.path is not None
    try:
        data = storage.read(stat.path)
    except FileNotFoundError:
        raise LogCompactionFailed(f"log compaction {instant_time}: {stat.path} is missing") from None
    blocks = list(iter_blocks(data))
    good = [b for b in blocks if b.block_type is not BlockType.CORRUPT and b.instant_time == instant_time]
    if len(data) != stat.file_size_in_bytes or len(good) != len(blocks) or len(blocks) != count:
        raise LogCompactionFailed(
            f"log compaction {instant_time}: {stat.path} holds {len(data)} byte(s) and {len(good)} intact "
            f"block(s) of the instant out of {len(blocks)}; its task reported {stat.file_size_in_bytes} "
            f"byte(s) and {count} block(s)"
        )


def log_compact_in_process(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    settings: LogCompactionConfig | None = None,
    fence: Callable[[], None] | None = None,
) -> LogCompactionResult:
    """Run a pending log compaction with its tasks in this process, one after another (tests and small
    tables; hoodied runs the tasks as a Spark job)."""
    prepared = prepare_log_compaction(storage, lock, instant_time, settings=settings)
    results = [run_log_compaction_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    return commit_log_compaction(storage, lock, prepared, results, fence=fence)


__all__ = [
    "OPERATION_TYPE",
    "LogCompactionFailed",
    "LogCompactionResult",
    "LogCompactionTask",
    "NothingToLogCompact",
    "PreparedLogCompaction",
    "TaskResult",
    "commit_log_compaction",
    "log_compact_in_process",
    "pending_log_compactions",
    "prepare_log_compaction",
    "run_log_compaction_task",
]
