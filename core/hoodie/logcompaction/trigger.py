"""Log compaction's settings and when to look for work.

Hudi's keys (``HoodieCompactionConfig``), with their defaults:

- ``hoodie.log.compaction.enable`` (false): in Hudi it also turns on the metadata table's log compaction,
  which hoodied does not run; hoodied schedules log compaction on a table when the operator lists the service
  for it, whatever this key says (as it compacts whatever ``hoodie.compact.inline`` says). Parsed, so a bad
  value fails at start-up.
- ``hoodie.log.compaction.inline`` (false): a writer's switch (log compaction after each write); parsed,
  not acted on by the daemon.
- ``hoodie.log.compaction.blocks.threshold`` (5): a slice is planned when it has at least this many log files
  or valid log blocks (:mod:`hoodie.logcompaction.plan`).

How the new blocks are written, as Hudi's append handle does: ``hoodie.logfile.data.block.format`` (``avro``,
Hudi's choice for Parquet base files; or ``parquet``), ``hoodie.parquet.compression.codec`` for Parquet blocks
(gzip) and ``hoodie.logfile.max.size`` (1 GiB) for rolling over to a new file.

The trigger: unlike compaction there is no count of commits (Hudi's ``ScheduleCompactionActionExecutor.
needCompact`` asks only for a completed deltacommit since the last compaction). hoodied asks for a write
(a deltacommit that is not itself a log compaction) completed since the latest compaction or log compaction
was requested, so that an idle table, or one whose new blocks were all just log-compacted, costs no look at
its log files. :func:`evaluate_trigger` is a pure function of the timeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from hoodie.errors import InvalidWriteConfig
from hoodie.log.writer import MAX_LOG_FILE_BYTES
from hoodie.settings import bool_setting, int_setting, setting
from hoodie.timeline.instant import COMPACTION, DELTA_COMMIT, LOG_COMPACTION
from hoodie.timeline.timeline import Timeline
from hoodie.write.base_file import ParquetOptions

LOG_COMPACTION_ENABLE = "hoodie.log.compaction.enable"
LOG_COMPACTION_ENABLE_DEFAULT = False
LOG_COMPACTION_INLINE = "hoodie.log.compaction.inline"
LOG_COMPACTION_INLINE_DEFAULT = False
BLOCKS_THRESHOLD = "hoodie.log.compaction.blocks.threshold"
BLOCKS_THRESHOLD_DEFAULT = 5
LOG_BLOCK_FORMAT = "hoodie.logfile.data.block.format"
LOG_BLOCK_FORMAT_DEFAULT: Literal["avro", "parquet"] = "avro"
LOG_FILE_MAX_SIZE = "hoodie.logfile.max.size"
LOG_FILE_MAX_SIZE_DEFAULT = MAX_LOG_FILE_BYTES

BlockFormat = Literal["avro", "parquet"]


@dataclass(frozen=True)
class LogCompactionConfig:
    """Log compaction's settings (see the module doc)."""

    enabled: bool = LOG_COMPACTION_ENABLE_DEFAULT
    inline: bool = LOG_COMPACTION_INLINE_DEFAULT
    blocks_threshold: int = BLOCKS_THRESHOLD_DEFAULT
    block_format: BlockFormat = LOG_BLOCK_FORMAT_DEFAULT
    compression: str = ParquetOptions().compression
    max_log_file_bytes: int = LOG_FILE_MAX_SIZE_DEFAULT

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> LogCompactionConfig:
        """The settings in ``config`` (absent keys default); :class:`InvalidWriteConfig` names a bad one."""
        raw_format = setting(config, LOG_BLOCK_FORMAT)
        block_format: BlockFormat = LOG_BLOCK_FORMAT_DEFAULT
        if raw_format is not None:
            lowered = raw_format.lower()
            if lowered == "avro":
                block_format = "avro"
            elif lowered == "parquet":
                block_format = "parquet"
            else:
                raise InvalidWriteConfig(
                    f"{LOG_BLOCK_FORMAT}={raw_format!r}: log compaction writes avro or parquet data blocks"
                )
        return cls(
            enabled=bool_setting(config, LOG_COMPACTION_ENABLE, LOG_COMPACTION_ENABLE_DEFAULT),
            inline=bool_setting(config, LOG_COMPACTION_INLINE, LOG_COMPACTION_INLINE_DEFAULT),
            blocks_threshold=int_setting(
                config, BLOCKS_THRESHOLD, BLOCKS_THRESHOLD_DEFAULT, minimum=1, bits=32
            ),
            block_format=block_format,
            compression=ParquetOptions.from_config(config).compression,
            max_log_file_bytes=int_setting(config, LOG_FILE_MAX_SIZE, LOG_FILE_MAX_SIZE_DEFAULT, minimum=1),
        )


@dataclass(frozen=True)
class TriggerDecision:
    """Whether to look for slices to log-compact, and why."""

    fire: bool
    writes: int  # writes completed since the latest (log) compaction
    reason: str


def evaluate_trigger(timeline: Timeline) -> TriggerDecision:
    """Fire when a write completed after the latest compaction or log compaction was requested (module doc).

    "After" is by completion time on table versions 8 and 9 (a write pending when the service was planned
    may complete later), by instant time on 6 (which records no completion time)."""
    latest_service = None
    for instant in timeline:
        if timeline.requested_action(instant.time) in (COMPACTION, LOG_COMPACTION):
            latest_service = instant.time
    writes = [
        i
        for i in timeline.completed()
        if i.action == DELTA_COMMIT
        and timeline.requested_action(i.time) == DELTA_COMMIT
        and (latest_service is None or (i.completion_time or i.time) > latest_service)
    ]
    since = f"since (log) compaction {latest_service}" if latest_service else "on the timeline"
    if not writes:
        return TriggerDecision(False, 0, f"no deltacommit completed {since}")
    return TriggerDecision(True, len(writes), f"{len(writes)} deltacommit(s) completed {since}")


__all__ = [
    "BLOCKS_THRESHOLD",
    "BLOCKS_THRESHOLD_DEFAULT",
    "LOG_BLOCK_FORMAT",
    "LOG_BLOCK_FORMAT_DEFAULT",
    "LOG_COMPACTION_ENABLE",
    "LOG_COMPACTION_ENABLE_DEFAULT",
    "LOG_COMPACTION_INLINE",
    "LOG_COMPACTION_INLINE_DEFAULT",
    "LOG_FILE_MAX_SIZE",
    "LOG_FILE_MAX_SIZE_DEFAULT",
    "BlockFormat",
    "LogCompactionConfig",
    "TriggerDecision",
    "evaluate_trigger",
]
