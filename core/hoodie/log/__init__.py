"""Hudi log files: names (:mod:`~hoodie.log.log_file`), blocks (:mod:`~hoodie.log.block`) and the scan of a
file slice's logs under Hudi's rules (:mod:`~hoodie.log.reader`)."""

from __future__ import annotations

from hoodie.log.block import (
    BlockType,
    HeaderKey,
    LogBlock,
    decode_data_block,
    decode_delete_block,
    iter_blocks,
)
from hoodie.log.log_file import LogFile
from hoodie.log.reader import CorruptBlock, LogBatch, LogScan, scan_log_files

__all__ = [
    "BlockType",
    "CorruptBlock",
    "HeaderKey",
    "LogBatch",
    "LogBlock",
    "LogFile",
    "LogScan",
    "decode_data_block",
    "decode_delete_block",
    "iter_blocks",
    "scan_log_files",
]
