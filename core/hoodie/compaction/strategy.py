"""Compaction plan strategies and their configuration, with Hudi's names, keys and defaults.

A strategy decides which file slices a compaction plan compacts. As in Hudi's ``CompactionStrategy``:

1. :meth:`CompactionConfig.filter_partitions` narrows the table's partitions (``DayBased``: the latest
   ``hoodie.compaction.daybased.target.partitions`` dates; ``PartitionRegexBased`` and any strategy with
   ``hoodie.compaction.partition.path.regex`` set: the partitions the regex finds).
2. Every eligible slice becomes an operation with :func:`capture_metrics` (sizes in whole MB, as Hudi's
   ``FSUtils.getSizeInMB``: bytes // 2**20).
3. :meth:`CompactionConfig.order_and_filter` orders and caps the operations:

   - ``LogFileSizeBased`` (default): slices whose log files total at least
     ``hoodie.compaction.logfile.size.threshold`` bytes, largest first, then BoundedIO's cap;
   - ``LogFileNumBased``: slices with at least ``hoodie.compaction.logfile.num.threshold`` log files, most
     first, then BoundedIO's cap;
   - ``BoundedIO``: in listing order, while the running total of ``TOTAL_IO_MB`` has not used up
     ``hoodie.compaction.target.io`` (the operation that crosses the bound is still taken);
   - ``DayBased``: by partition date, newest first (partitions ``yyyy/MM/dd``, Hive-style names allowed),
     then BoundedIO's cap;
   - ``UnBounded`` and ``PartitionRegexBased``: every operation.

Strategies are named by Hudi's class name (``org.apache.hudi.table.action.compact.strategy.X``), its simple
name ``X`` or the short name without ``CompactionStrategy``; anything else is refused naming the key.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from hoodie.errors import InvalidWriteConfig
from hoodie.file_group.file_group import FileSlice
from hoodie.settings import int_setting
from hoodie.timeline.metadata import CompactionOperation
from hoodie.write.base_file import PARQUET_MAX_FILE_SIZE, PARQUET_MAX_FILE_SIZE_DEFAULT

STRATEGY = "hoodie.compaction.strategy"
TARGET_IO_MB = "hoodie.compaction.target.io"
TARGET_IO_MB_DEFAULT = 500 * 1024
LOG_FILE_SIZE_THRESHOLD = "hoodie.compaction.logfile.size.threshold"
LOG_FILE_SIZE_THRESHOLD_DEFAULT = 0
LOG_FILE_NUM_THRESHOLD = "hoodie.compaction.logfile.num.threshold"
LOG_FILE_NUM_THRESHOLD_DEFAULT = 0
DAY_BASED_TARGET_PARTITIONS = "hoodie.compaction.daybased.target.partitions"
DAY_BASED_TARGET_PARTITIONS_DEFAULT = 10
PARTITION_REGEX = "hoodie.compaction.partition.path.regex"

# Metric names of HoodieCompactionOperation.metrics, as Hudi writes them.
TOTAL_IO_READ_MB = "TOTAL_IO_READ_MB"
TOTAL_IO_WRITE_MB = "TOTAL_IO_WRITE_MB"
TOTAL_IO_MB = "TOTAL_IO_MB"
TOTAL_LOG_FILES_SIZE = "TOTAL_LOG_FILES_SIZE"
TOTAL_LOG_FILES = "TOTAL_LOG_FILES"

_PACKAGE = "org.apache.hudi.table.action.compact.strategy."
# Hudi 0.x/1.x and the pre-0.9 package of the same classes.
_PACKAGES = frozenset({_PACKAGE, "org.apache.hudi.io.compact.strategy."})
_MB = 1024 * 1024


class Strategy(StrEnum):
    """The plan strategies, by Hudi's short name."""

    LOG_FILE_SIZE_BASED = "LogFileSizeBased"
    LOG_FILE_NUM_BASED = "LogFileNumBased"
    BOUNDED_IO = "BoundedIO"
    DAY_BASED = "DayBased"
    UNBOUNDED = "UnBounded"
    PARTITION_REGEX = "PartitionRegexBased"

    @property
    def class_name(self) -> str:
        return f"{_PACKAGE}{self.value}CompactionStrategy"

    @classmethod
    def parse(cls, name: str) -> Strategy:
        """A strategy from its Hudi class name, simple class name or short name (case-insensitive).

        A class outside Hudi's strategy package is somebody's own strategy, which hoodied cannot run: refused.
        """
        text = name.strip()
        package, _, simple = text.rpartition(".")
        if package and f"{package.lower()}." not in _PACKAGES:
            raise InvalidWriteConfig(
                f"{STRATEGY}={name!r}: custom compaction strategy classes cannot run in hoodied; use one of "
                + ", ".join(s.value for s in cls)
            )
        short = simple.lower().removesuffix("compactionstrategy")
        short = _ALIASES.get(short, short)
        for s in cls:
            if s.value.lower() == short:
                return s
        known = ", ".join(s.value for s in cls)
        raise InvalidWriteConfig(f"{STRATEGY}={name!r}: not a compaction strategy hoodied has ({known})")


# Short names hoodied accepted before it spelt them as Hudi's classes do.
_ALIASES = {"partitionregex": "partitionregexbased"}

DEFAULT_STRATEGY = Strategy.LOG_FILE_SIZE_BASED


@dataclass(frozen=True)
class CompactionConfig:
    """How compaction plans are made (Hudi's keys above; defaults as Hudi's)."""

    strategy: Strategy = DEFAULT_STRATEGY
    target_io_mb: int = TARGET_IO_MB_DEFAULT
    log_file_size_threshold: int = LOG_FILE_SIZE_THRESHOLD_DEFAULT
    log_file_num_threshold: int = LOG_FILE_NUM_THRESHOLD_DEFAULT
    day_based_target_partitions: int = DAY_BASED_TARGET_PARTITIONS_DEFAULT
    partition_regex: str | None = None
    max_file_bytes: int = PARQUET_MAX_FILE_SIZE_DEFAULT

    def __post_init__(self) -> None:
        if self.strategy is Strategy.PARTITION_REGEX and not self.partition_regex:
            raise InvalidWriteConfig(f"{STRATEGY}=PartitionRegex needs {PARTITION_REGEX}")
        if self.partition_regex is not None:
            try:
                re.compile(self.partition_regex)
            except re.error as e:
                raise InvalidWriteConfig(f"{PARTITION_REGEX}={self.partition_regex!r}: {e}") from None

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> CompactionConfig:
        """Read the keys above from a configuration (unknown keys are left to their owners)."""
        strategy = config.get(STRATEGY)
        return cls(
            strategy=Strategy.parse(strategy) if strategy else DEFAULT_STRATEGY,
            target_io_mb=int_setting(config, TARGET_IO_MB, TARGET_IO_MB_DEFAULT),
            log_file_size_threshold=int_setting(
                config, LOG_FILE_SIZE_THRESHOLD, LOG_FILE_SIZE_THRESHOLD_DEFAULT
            ),
            log_file_num_threshold=int_setting(
                config, LOG_FILE_NUM_THRESHOLD, LOG_FILE_NUM_THRESHOLD_DEFAULT
            ),
            day_based_target_partitions=int_setting(
                config, DAY_BASED_TARGET_PARTITIONS, DAY_BASED_TARGET_PARTITIONS_DEFAULT, minimum=1
            ),
            partition_regex=config.get(PARTITION_REGEX) or None,
            max_file_bytes=int_setting(
                config, PARQUET_MAX_FILE_SIZE, PARQUET_MAX_FILE_SIZE_DEFAULT, minimum=1
            ),
        )

    # -- the strategy's two steps ------------------------------------------------------------------------

    def filter_partitions(self, partitions: Sequence[str]) -> list[str]:
        """The partitions whose slices may be planned."""
        out = list(partitions)
        if self.partition_regex is not None:
            pattern = re.compile(self.partition_regex)
            out = [p for p in out if pattern.search(p)]
        if self.strategy is Strategy.DAY_BASED:
            out = sorted(out, key=_partition_date, reverse=True)[: self.day_based_target_partitions]
        return out

    def order_and_filter(self, operations: Sequence[CompactionOperation]) -> list[CompactionOperation]:
        """Order the candidate operations and keep those the strategy compacts now."""
        ops = list(operations)
        match self.strategy:
            case Strategy.UNBOUNDED | Strategy.PARTITION_REGEX:
                return ops
            case Strategy.LOG_FILE_SIZE_BASED:
                ops = [
                    o for o in ops if o.metrics.get(TOTAL_LOG_FILES_SIZE, 0.0) >= self.log_file_size_threshold
                ]
                ops.sort(key=lambda o: int(o.metrics.get(TOTAL_LOG_FILES_SIZE, 0.0)), reverse=True)
            case Strategy.LOG_FILE_NUM_BASED:
                ops = [o for o in ops if o.metrics.get(TOTAL_LOG_FILES, 0.0) >= self.log_file_num_threshold]
                ops.sort(key=lambda o: int(o.metrics.get(TOTAL_LOG_FILES, 0.0)), reverse=True)
            case Strategy.DAY_BASED:
                ops.sort(key=lambda o: _partition_date(o.partition_path), reverse=True)
            case Strategy.BOUNDED_IO:
                pass
        return self._bounded_io(ops)

    def _bounded_io(self, operations: list[CompactionOperation]) -> list[CompactionOperation]:
        # As Hudi 1.x's BoundedIOCompactionStrategy: take while IO remains (0.x took the first op even with a
        # target of 0, checking after taking it).
        remaining = self.target_io_mb
        kept = []
        for op in operations:
            if remaining <= 0:
                break
            remaining -= int(op.metrics.get(TOTAL_IO_MB, 0.0))
            kept.append(op)
        return kept

    def capture_metrics(self, file_slice: FileSlice) -> dict[str, float]:
        """Hudi's per-operation metrics of a slice (sizes of log files and base file as listed)."""
        log_bytes = sum(s for s in file_slice.log_file_sizes if s >= 0)
        base_bytes = file_slice.base_file_size if file_slice.base_file is not None else 0
        read_mb = (base_bytes + log_bytes) // _MB
        write_mb = (base_bytes if file_slice.base_file is not None else self.max_file_bytes) // _MB
        # The order Java's HashMap iterates these keys in, which is the order Hudi's plans hold them.
        return {
            TOTAL_LOG_FILES: float(len(file_slice.log_files)),
            TOTAL_IO_MB: float(read_mb + write_mb),
            TOTAL_IO_READ_MB: float(read_mb),
            TOTAL_LOG_FILES_SIZE: float(log_bytes),
            TOTAL_IO_WRITE_MB: float(write_mb),
        }


def _partition_date(partition: str) -> dt.date:
    """The date of a ``yyyy/MM/dd`` partition (Hive-style ``year=2024/month=01/day=02`` too)."""
    plain = re.sub(r"(^|/)[^/=]*=", r"\1", partition) if "=" in partition else partition
    try:
        return dt.datetime.strptime(plain, "%Y/%m/%d").date()
    except ValueError:
        raise InvalidWriteConfig(
            f"{STRATEGY}=DayBased needs yyyy/MM/dd partitions; {partition!r} is not one"
        ) from None


__all__ = [
    "DEFAULT_STRATEGY",
    "STRATEGY",
    "TOTAL_IO_MB",
    "TOTAL_IO_READ_MB",
    "TOTAL_IO_WRITE_MB",
    "TOTAL_LOG_FILES",
    "TOTAL_LOG_FILES_SIZE",
    "CompactionConfig",
    "Strategy",
]
