"""Log compaction planning (a function of a table view) and scheduling (``logcompaction.requested``, under the
table lock).

The plan is the ``HoodieCompactionPlan`` Hudi's ``HoodieLogCompactionPlanGenerator`` writes: version 2, the
strategy ``LogCompactionExecutionHelper`` with no parameters (Hudi keeps the class name for compatibility
between releases), ``preserveHoodieMetadata`` true (the records keep their commit times and sequence numbers),
no missing partitions, empty extra metadata, and one operation per slice as for compaction: the base file's
name (or none) and the names of the slice's log files in log order, with the compaction strategy's metrics.

Rules (Hudi's ``ScheduleCompactionActionExecutor`` and plan generators):

- Only MERGE_ON_READ tables log-compact; a metadata table hoodied cannot keep up to date is refused.
- No completed write, compaction or log compaction may have an instant time at or after the plan's.
- Table version 6: no write may be pending with an earlier instant time (as for compaction). Its blocks may
  already sit in the slice's log files; were it to complete before the plan runs, the blocks it wrote there
  would be merged, and its blocks written later, listed as replaced by the new ones, lost.
- File groups in a pending compaction, log compaction or clustering, and replaced file groups, are left alone.
- The latest slice of each group; on 8 and 9 only log files of writes completed before the plan (the file
  system view holds no other) and, beyond Hudi, only those older than the earliest write still pending: a
  pending write's log file sorts by its instant time, and were it to land between merged files the new
  blocks, which take the place of the newest block they replace, would move ahead of it.
- A slice is eligible when it has at least ``hoodie.log.compaction.blocks.threshold`` (5) log files or valid
  log blocks. Valid blocks follow Hudi's ``HoodieLogBlockMetadataScanner``: data and delete blocks of
  committed instants, less those rolled back, less those replaced by an earlier log compaction (whose own
  blocks count instead); only the block headers are read. Hudi counts every log file of the slice, so a
  slice stays eligible after its log compaction (the replaced files are still there); hoodied counts the
  files that hold a valid block, so that a slice is planned again only when new blocks have come.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from hoodie.compaction.plan import blocked_file_groups
from hoodie.compaction.strategy import CompactionConfig
from hoodie.errors import UnsupportedTable
from hoodie.file_group.file_group import FileSlice
from hoodie.lock import LockProvider
from hoodie.log.block import MAGIC, ROLLBACK_PREVIOUS_BLOCK, BlockType, HeaderKey, LogBlock, iter_blocks
from hoodie.log.log_file import LogFile
from hoodie.logcompaction.trigger import LogCompactionConfig, TriggerDecision, evaluate_trigger
from hoodie.metadata_table import refuse_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import COMPACTION, LOG_COMPACTION, WRITE_ACTIONS, Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    CompactionOperation,
    CompactionPlan,
    CompactionStrategy,
    encode_compaction_plan,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.service_instant import Planned, request_planned

logger = logging.getLogger(__name__)

SERVICE = "logcompaction"
EXECUTION_HELPER = "org.apache.hudi.table.action.compact.LogCompactionExecutionHelper"
"""The ``compactorClassName`` of every log compaction plan (Hudi's, kept for compatibility)."""


#: A plan, or ``None`` with the reason nothing was planned.
PlanResult = Planned[CompactionPlan]


@dataclass(frozen=True)
class ScheduleResult:
    """What :func:`schedule_log_compaction` did: the requested instant (or none) and why."""

    instant: Instant | None
    plan: CompactionPlan | None
    reason: str
    trigger: TriggerDecision | None = None


@dataclass(frozen=True)
class ValidBlocks:
    """What the headers of a slice's log files say: the valid data and delete blocks (see the module doc)
    and how many of the files hold one."""

    blocks: int
    files: int


def check_log_compactable(table: Table) -> None:
    """Refuse tables log compaction must not touch (COW; a metadata table hoodied cannot update)."""
    if not table.config.is_mor:
        raise UnsupportedTable(
            f"{table.base_path} is a COPY_ON_WRITE table: only MERGE_ON_READ tables log-compact"
        )
    refuse_metadata_table(table.storage, table.config, SERVICE)


def scheduling_conflict(table: Table, instant_time: str) -> str | None:
    """Why a log compaction at ``instant_time`` must not be scheduled now, or ``None`` (module doc)."""
    timeline = table.timeline
    later = [
        i
        for i in timeline
        if i.time >= instant_time
        and ((i.is_completed and i.action in WRITE_ACTIONS) or i.action in (COMPACTION, LOG_COMPACTION))
    ]
    if later:
        return (
            f"instant(s) {', '.join(str(i) for i in later[:3])} are at or after the log compaction time "
            f"{instant_time}; log compaction instants must be later than every write"
        )
    if table.config.table_version < 8:
        pending = earliest_pending_write(table, before=instant_time)
        if pending is not None:
            return (
                f"write {pending} is still pending with an earlier instant time than {instant_time}; on a "
                "version 6 table its log blocks may lie in the slices being log-compacted (Hudi: 'Earliest "
                "write inflight instant time must be later than compaction time'); waiting for it to "
                "complete or be rolled back"
            )
    return None


def earliest_pending_write(table: Table, *, before: str | None = None) -> Instant | None:
    """The pending write (commit, deltacommit, replacecommit) with the earliest instant time (before
    ``before`` when given), or ``None``."""
    pending = [
        i
        for i in table.timeline.pending()
        if i.action in WRITE_ACTIONS and (before is None or i.time < before)
    ]
    return min(pending, key=lambda i: i.time) if pending else None


def plan_log_compaction(
    table: Table,
    instant_time: str,
    config: LogCompactionConfig,
    *,
    valid_blocks: Callable[[Table, Sequence[str], str], ValidBlocks] | None = None,
) -> PlanResult:
    """The log compaction plan at ``instant_time`` of the view ``table`` (module doc). ``valid_blocks``
    counts a slice's valid blocks from its log files (default: :func:`count_valid_blocks`, reading
    headers)."""
    check_log_compactable(table)
    conflict = scheduling_conflict(table, instant_time)
    if conflict is not None:
        return PlanResult(None, conflict)
    count = valid_blocks or count_valid_blocks
    threshold = config.blocks_threshold
    newest_allowed = None
    if table.config.table_version >= 8:
        pending = earliest_pending_write(table)
        newest_allowed = pending.time if pending is not None else None
    replaced = table.replaced_file_groups()
    blocked = blocked_file_groups(table)
    strategy = CompactionConfig()  # the compaction strategy whose metrics Hudi records per operation
    operations: list[CompactionOperation] = []
    held_back = too_few = 0
    groups = table.file_groups()
    for gid, group in sorted(groups.items(), key=lambda kv: (kv[0].partition_path, kv[0].file_id)):
        latest = group.latest
        if latest is None or not latest.log_files or gid in replaced:
            continue
        if gid in blocked:
            held_back += 1
            continue
        chosen = _log_files_to_plan(latest, newest_allowed)
        if not chosen.log_files:
            continue
        found = count(table, chosen.log_file_paths, instant_time)
        if found.files < threshold and found.blocks < threshold:
            too_few += 1
            continue
        operations.append(
            CompactionOperation(
                base_instant_time=latest.base_instant,
                file_id=gid.file_id,
                partition_path=gid.partition_path,
                data_file_path=latest.base_file.file_name if latest.base_file else None,
                delta_file_paths=tuple(lf.file_name for lf in chosen.log_files),
                metrics=strategy.capture_metrics(chosen),
            )
        )
    if not operations:
        why = f"no file slice with {threshold} or more log files or valid log blocks"
        notes = []
        if too_few:
            notes.append(f"{too_few} slice(s) with fewer")
        if held_back:
            notes.append(
                f"{held_back} file group(s) held by a pending compaction, log compaction or clustering"
            )
        return PlanResult(None, why + (f" ({'; '.join(notes)})" if notes else ""))
    plan = CompactionPlan(
        operations=tuple(operations),
        strategy=CompactionStrategy(EXECUTION_HELPER, {}),
        preserve_hoodie_metadata=True,
    )
    return PlanResult(plan, f"{len(operations)} file slice(s) with {threshold} or more log files or blocks")


def _log_files_to_plan(latest: FileSlice, newest_allowed: str | None) -> FileSlice:
    """The slice with the log files a plan may list: on 8+ those older than the earliest pending write."""
    if newest_allowed is None:
        return latest
    keep = [i for i, lf in enumerate(latest.log_files) if lf.instant < newest_allowed]
    return FileSlice(
        latest.group,
        latest.base_instant,
        latest.base_file,
        latest.base_file_size,
        tuple(latest.log_files[i] for i in keep),
        tuple(latest.log_file_sizes[i] for i in keep),
    )


def schedule_log_compaction(
    storage: Storage,
    lock: LockProvider,
    *,
    config: LogCompactionConfig | None = None,
    respect_trigger: bool = False,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
    preview: bool = False,
) -> ScheduleResult:
    """Plan and request a log compaction now.

    With ``respect_trigger`` a write must have completed since the latest (log) compaction first (hoodied's
    own scheduling); without, the plan is made whenever a slice is eligible (``hoodied logcompact --mode
    schedule``). As for compaction, the plan is first made on a view read without the lock at a provisional
    time, and only when it is not empty is the lock taken, the instant time generated, the view read again
    and the plan made again and written, all under the lock.

    ``preview``: decide as above on the view and write nothing
    (:func:`~hoodie.write.service_instant.request_planned`).
    """
    config = config or LogCompactionConfig()
    generator = time_generator or InstantTimeGenerator()
    table = view if view is not None else Table.load(storage)
    check_log_compactable(table)
    decision = None
    if respect_trigger:
        decision = evaluate_trigger(table.timeline)
        if not decision.fire:
            return ScheduleResult(None, None, decision.reason, decision)

    def request(view: Table, instant_time: str, plan: CompactionPlan) -> Instant:
        content = encode_compaction_plan(plan, table_version=view.config.table_version)
        return TimelineWriter(storage, view.config, lock).request(LOG_COMPACTION, instant_time, content)

    instant, result = request_planned(
        storage,
        lock,
        table,
        generator,
        what="log compaction",
        plan=lambda view, t: plan_log_compaction(view, t, config),
        request=request,
        preview=preview,
    )
    return ScheduleResult(instant, result.plan, result.reason, decision)


# -- valid blocks ------------------------------------------------------------------------------------------


def count_valid_blocks(table: Table, paths: Sequence[str], instant_time: str) -> ValidBlocks:
    """The valid blocks of the log files ``paths`` (in log order) for a plan at ``instant_time``: those of
    instants committed by then, less rolled-back ones and those replaced by a log compaction (module doc)."""
    timeline = table.timeline
    return valid_blocks_of(
        ((p, block_headers(table.storage, p)) for p in paths),
        lambda t: timeline.is_committed(t, instant_time),
    )


def valid_blocks_of(
    files: Iterable[tuple[str, Sequence[LogBlock]]], include: Callable[[str], bool]
) -> ValidBlocks:
    """Hudi's valid blocks (``HoodieLogBlockMetadataScanner``) of log files given with their blocks in log
    order: data and delete blocks of instants ``include`` takes, less those a later rollback command names,
    less those of instants a present compacted block lists; a compacted block none of whose listed instants
    is present does not count (Hudi's scan never applies it)."""
    seen: list[tuple[int, str, tuple[str, ...]]] = []  # (file index, instant, compacted block times)
    for index, (_path, blocks) in enumerate(files):
        for block in blocks:
            instant = block.instant_time
            if block.block_type is BlockType.CORRUPT or instant is None:
                continue
            if block.block_type is BlockType.COMMAND:
                if block.command_type == ROLLBACK_PREVIOUS_BLOCK and block.target_instant_time:
                    target = block.target_instant_time
                    seen = [s for s in seen if s[1] != target]
                continue
            if block.block_type not in _DATA_TYPES or not include(instant):
                continue
            seen.append((index, instant, block.compacted_block_times))
    present = {s[1] for s in seen}
    replaced: set[str] = set()
    for _index, instant, times in seen:
        replaced.update(t for t in times if t != instant)
    valid = [s for s in seen if s[1] not in replaced and (not s[2] or present.intersection(s[2]))]
    return ValidBlocks(len(valid), len({s[0] for s in valid}))


_DATA_TYPES = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE, BlockType.HFILE_DATA})
_HEAD_WINDOW = 64 * 1024
_PREFIX = len(MAGIC) + 8  # magic + block length


def block_headers(storage: Storage, path: str) -> list[LogBlock]:
    """The blocks of a log file with their headers and without their contents (``content`` empty), reading
    each block's first bytes only. A file whose framing does not check out on the way (a torn tail, damage)
    is read whole and framed by :func:`~hoodie.log.block.iter_blocks`, which marks the damage CORRUPT."""
    out: list[LogBlock] = []
    with storage.open_input_file(path) as f:
        size = f.size()
        pos = 0
        while pos < size:
            f.seek(pos)
            head = f.read(min(_HEAD_WINDOW, size - pos))
            parsed = _head_of(head, pos, size)
            if parsed is None and len(head) == _HEAD_WINDOW and head.startswith(MAGIC):
                length = int.from_bytes(head[6:14], "big", signed=True)
                if 0 < length <= size - pos - _PREFIX:  # a header larger than the window: read the block
                    f.seek(pos)
                    head = f.read(_PREFIX + length)
                    parsed = _head_of(head, pos, size)
            if parsed is None:
                return [_without_content(b) for b in iter_blocks(storage.read(path))]
            out.append(parsed)
            pos = parsed.end
    return out


def _head_of(data: bytes, pos: int, size: int) -> LogBlock | None:
    """The block at ``pos`` from its first bytes ``data``, or ``None`` when they do not frame one."""
    if len(data) < _PREFIX + 12 or not data.startswith(MAGIC):
        return None
    length = int.from_bytes(data[6:14], "big", signed=True)
    end = pos + _PREFIX + length
    if length < 32 or end > size:
        return None
    version = int.from_bytes(data[14:18], "big", signed=True)
    type_id = int.from_bytes(data[18:22], "big", signed=True)
    count = int.from_bytes(data[22:26], "big", signed=True)
    if version != 1 or type_id not in _BLOCK_TYPES or count < 0:
        return None
    header: dict[HeaderKey, str] = {}
    p = 26
    for _ in range(count):
        if p + 8 > len(data):
            return None
        key = int.from_bytes(data[p : p + 4], "big", signed=True)
        n = int.from_bytes(data[p + 4 : p + 8], "big", signed=True)
        if n < 0 or p + 8 + n > len(data):
            return None
        try:
            value = data[p + 8 : p + 8 + n].decode("utf-8")
        except UnicodeDecodeError:
            return None
        if key in _HEADER_KEYS:
            header[HeaderKey(key)] = value
        p += 8 + n
    return LogBlock(BlockType(type_id), header, {}, b"", pos, end - pos)


_BLOCK_TYPES = frozenset(int(t) for t in BlockType)
_HEADER_KEYS = frozenset(int(k) for k in HeaderKey)


def _without_content(block: LogBlock) -> LogBlock:
    return LogBlock(block.block_type, block.header, block.footer, b"", block.offset, block.length)


def log_files_of(operation: CompactionOperation) -> list[LogFile]:
    """An operation's log files, in log order."""
    return sorted((LogFile.parse(n) for n in operation.delta_file_paths), key=lambda lf: lf.sort_key)


__all__ = [
    "EXECUTION_HELPER",
    "SERVICE",
    "PlanResult",
    "ScheduleResult",
    "ValidBlocks",
    "block_headers",
    "check_log_compactable",
    "count_valid_blocks",
    "earliest_pending_write",
    "log_files_of",
    "plan_log_compaction",
    "schedule_log_compaction",
    "scheduling_conflict",
    "valid_blocks_of",
]
