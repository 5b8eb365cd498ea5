"""Scanning the log files of a file slice: which blocks count, in which order, decoded.

The rules are those of Hudi's log record reader (``BaseHoodieLogRecordReader``), applied in two passes so
that only blocks that survive are ever decoded:

1. Read every block of every log file, in the order given (the caller sorts log files: by version within a
   base instant for table version 6, by completion time for 8+), then within a file in block order:

   - CORRUPT blocks (bad framing, torn writes) are skipped, logged as warnings and listed in
     :attr:`LogScan.corrupt_blocks`.
   - A COMMAND block with COMMAND_BLOCK_TYPE "0" (rollback) voids every block seen so far, in any file, whose
     INSTANT_TIME equals its TARGET_INSTANT_TIME. Command blocks apply whatever their own instant is (the
     rollback instant is not a write, ``include_instant`` has no say over it), as in Hudi.
   - A data or delete block whose INSTANT_TIME ``include_instant`` rejects (not completed, rolled back,
     after the as-of time) is ignored.
   - CDC_DATA blocks are skipped (change capture, not table rows). HFILE_DATA blocks belong to the metadata
     table: they are data blocks when scanning its log files (``metadata_table=True``, decoded by
     :func:`~hoodie.log.block.decode_hfile_block`) and raise :class:`~hoodie.errors.UnsupportedTable` in a
     data table.

2. Log compaction: a surviving block with a COMPACTED_BLOCK_TIMES header replaces the blocks of the instants
   it lists (also those replaced in turn by an earlier compacted block it lists). Its blocks take the
   place of the last block they replace, as Hudi places them, so that blocks written after the compacted
   ones but before the compaction finished still come after them.

Then the surviving blocks are decoded. Every batch keeps its instant, file and block offset; batches come
in scan order (file order, then block order, compacted blocks moved as above). A surviving block whose
content does not decode raises :class:`~hoodie.errors.CorruptLogBlock` naming the file and offset: with good
framing, bad content is real damage, never a torn write, and skipping it would silently lose rows.

A scan that feeds a rewrite passes a :class:`~hoodie.log.integrity.LogIntegrity`: then a CORRUPT block inside
bytes a completed commit wrote, a block whose header contradicts the commit that wrote it, and records whose
meta fields contradict their file raise :class:`~hoodie.errors.CorruptLogBlock` instead of being skipped or
taken (see that module); only a torn tail no completed commit covers is skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

from hoodie.errors import CorruptLogBlock, UnsupportedTable
from hoodie.log.block import (
    ROLLBACK_PREVIOUS_BLOCK,
    BlockType,
    LogBlock,
    decode_data_block,
    decode_delete_block,
    decode_hfile_block,
    iter_blocks,
)
from hoodie.log.integrity import LogIntegrity
from hoodie.storage import Storage

__all__ = ["CorruptBlock", "LogBatch", "LogScan", "scan_log_files"]

logger = logging.getLogger(__name__)

BatchKind = Literal["data", "delete"]


@dataclass(frozen=True, slots=True)
class LogBatch:
    """The rows of one surviving block: data rows, or deleted keys (see :func:`decode_delete_block`)."""

    instant_time: str
    kind: BatchKind
    table: pa.Table
    log_file: str
    block_offset: int


@dataclass(frozen=True, slots=True)
class CorruptBlock:
    """A damaged byte range of a log file that was skipped."""

    log_file: str
    offset: int
    length: int
    reason: str


@dataclass(frozen=True, slots=True)
class LogScan:
    """What a scan of a file slice's log files yields."""

    batches: list[LogBatch]
    corrupt_blocks: list[CorruptBlock]
    blocks_read: int = 0  # every block met, corrupt ones included
    rollback_blocks: int = 0  # command blocks that rolled back an earlier instant's blocks

    @property
    def data_batches(self) -> list[LogBatch]:
        return [b for b in self.batches if b.kind == "data"]

    @property
    def delete_batches(self) -> list[LogBatch]:
        return [b for b in self.batches if b.kind == "delete"]


@dataclass(frozen=True, slots=True)
class _Candidate:
    log_file: str
    block: LogBlock
    instant_time: str
    kind: BatchKind


def scan_log_files(
    storage: Storage,
    paths: Sequence[str],
    *,
    include_instant: Callable[[str], bool],
    metadata_table: bool = False,
    integrity: LogIntegrity | None = None,
) -> LogScan:
    """Scan log files (paths relative to the table's base path, already in log order); see the module doc.

    ``include_instant(t)`` says whether the data and delete blocks written by instant ``t`` count;
    ``metadata_table`` whether the files are the metadata table's (HFile data blocks); ``integrity``, when
    the scan feeds a rewrite, refuses damaged committed data instead of skipping it.
    """
    candidates: list[_Candidate] = []
    corrupt: list[CorruptBlock] = []
    blocks = rollbacks = 0
    for path in paths:
        data = storage.read(path)
        for block in iter_blocks(data):
            blocks += 1
            rollbacks += block.block_type is BlockType.COMMAND
            candidates = _admit(block, path, candidates, corrupt, include_instant, metadata_table, integrity)
    survivors = _apply_log_compaction(candidates)
    batches = [_decode(c, integrity) for c in survivors]
    return LogScan(batches=batches, corrupt_blocks=corrupt, blocks_read=blocks, rollback_blocks=rollbacks)


def _admit(
    block: LogBlock,
    path: str,
    candidates: list[_Candidate],
    corrupt: list[CorruptBlock],
    include_instant: Callable[[str], bool],
    metadata_table: bool = False,
    integrity: LogIntegrity | None = None,
) -> list[_Candidate]:
    """Apply one block to the candidates seen so far; returns the (possibly new) candidate list."""
    if block.block_type is BlockType.CORRUPT:
        reason = block.corrupt_reason or "corrupt block"
        if integrity is not None:
            integrity.check_corrupt(path, block.offset, block.length, reason)
        logger.warning(
            "skipping a corrupt log block in %s at offset %d (%d bytes): %s",
            path,
            block.offset,
            block.length,
            reason,
        )
        corrupt.append(CorruptBlock(path, block.offset, block.length, reason))
        return candidates
    instant = block.instant_time
    if instant is None:
        raise CorruptLogBlock(f"{path}: {block.describe()}: no INSTANT_TIME header")
    if integrity is not None:
        integrity.check_header(path, block)
        integrity.check_schema(path, block)
    if block.block_type is BlockType.COMMAND:
        if block.command_type != ROLLBACK_PREVIOUS_BLOCK:
            raise CorruptLogBlock(
                f"{path}: {block.describe()}: unknown command block type {block.command_type!r}"
            )
        target = block.target_instant_time
        if target is None:
            raise CorruptLogBlock(f"{path}: {block.describe()}: rollback command without TARGET_INSTANT_TIME")
        kept = [c for c in candidates if c.instant_time != target]
        logger.debug(
            "%s: rollback at offset %d (instant %s) voids %d block(s) of instant %s",
            path,
            block.offset,
            instant,
            len(candidates) - len(kept),
            target,
        )
        return kept
    if block.block_type is BlockType.HFILE_DATA and not metadata_table:
        raise UnsupportedTable(
            f"{path}: {block.describe()}: HFile data blocks belong to the metadata table, not to a data table"
        )
    if block.block_type is BlockType.CDC_DATA:
        logger.debug("%s: skipping the CDC block at offset %d", path, block.offset)
        return candidates
    if not include_instant(instant):
        logger.debug("%s: ignoring the %s of instant %s", path, block.describe(), instant)
        return candidates
    kind: BatchKind = "delete" if block.block_type is BlockType.DELETE else "data"
    candidates.append(_Candidate(path, block, instant, kind))
    return candidates


def _apply_log_compaction(candidates: list[_Candidate]) -> list[_Candidate]:
    """Replace the blocks of compacted instants by the compacted blocks, at the place of the last one."""
    compactions: list[tuple[str, frozenset[str]]] = []
    seen: set[str] = set()
    for c in candidates:
        times = c.block.compacted_block_times
        if times and c.instant_time not in seen:
            seen.add(c.instant_time)
            compactions.append((c.instant_time, frozenset(times) - {c.instant_time}))
    order = candidates
    for instant, replaced in compactions:
        own = [c for c in order if c.instant_time == instant]
        last = max((i for i, c in enumerate(order) if c.instant_time in replaced), default=None)
        if not own or last is None:
            continue
        moved: list[_Candidate] = []
        for i, c in enumerate(order):
            if c.instant_time != instant and c.instant_time not in replaced:
                moved.append(c)
            if i == last:
                moved.extend(own)
        logger.debug("log compaction %s replaces the blocks of %s", instant, sorted(replaced))
        order = moved
    return order


def _decode(candidate: _Candidate, integrity: LogIntegrity | None = None) -> LogBatch:
    block = candidate.block
    try:
        if candidate.kind == "delete":
            table = decode_delete_block(block)
        elif block.block_type is BlockType.HFILE_DATA:
            table = decode_hfile_block(block)
        else:
            table = decode_data_block(block)
        if integrity is not None and block.block_type is not BlockType.HFILE_DATA:
            integrity.check_records(candidate.log_file, block, table)
    except CorruptLogBlock as e:
        raise CorruptLogBlock(f"{candidate.log_file} (instant {candidate.instant_time}): {e}") from e
    except UnsupportedTable as e:
        raise UnsupportedTable(f"{candidate.log_file}: {e}") from e
    return LogBatch(candidate.instant_time, candidate.kind, table, candidate.log_file, block.offset)
