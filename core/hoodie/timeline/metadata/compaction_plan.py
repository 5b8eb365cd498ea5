"""The compaction plan (``HoodieCompactionPlan``) of ``compaction.requested`` and ``logcompaction.requested``,
always held in version 2 form (file names).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hoodie.errors import CorruptTimelineFile, PathOutsideTable
from hoodie.timeline.metadata.fields import freeze, read, write
from hoodie.timeline.metadata.paths import check_file_group, file_name_in_partition
from hoodie.timeline.metadata.versions import plan_versions

__all__ = [
    "CompactionOperation",
    "CompactionPlan",
    "CompactionStrategy",
    "decode_compaction_plan",
    "encode_compaction_plan",
]


@dataclass(frozen=True)
class CompactionStrategy:
    """``HoodieCompactionStrategy``: the class that executes the plan and its parameters."""

    compactor_class_name: str | None = None
    strategy_params: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        freeze(self, strategy_params=dict)


@dataclass(frozen=True)
class CompactionOperation:
    """One file slice to compact (``HoodieCompactionOperation``).

    ``data_file_path`` is the base file's name (None for a slice of log files only), ``delta_file_paths`` the
    log files' names, both within ``partition_path`` (plans of version 1 stored full paths; decoding keeps
    the names). ``metrics`` are the strategy's numbers (TOTAL_IO_MB, TOTAL_LOG_FILES, ...).
    """

    base_instant_time: str
    file_id: str
    partition_path: str
    data_file_path: str | None = None
    delta_file_paths: tuple[str, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    bootstrap_file_path: str | None = None

    def __post_init__(self) -> None:
        freeze(self, delta_file_paths=tuple, metrics=dict)
        for name in (self.data_file_path, *self.delta_file_paths):
            if name is not None:
                file_name_in_partition(name, self.partition_path, allow_path=False)


@dataclass(frozen=True)
class CompactionPlan:
    """A compaction's requested plan (``HoodieCompactionPlan``), always in version 2 form (file names)."""

    operations: tuple[CompactionOperation, ...] = ()
    extra_metadata: dict[str, str] = field(default_factory=dict)
    strategy: CompactionStrategy | None = None
    preserve_hoodie_metadata: bool | None = False
    missing_schedule_partitions: tuple[str, ...] = ()
    version: int = 2
    #: ``extraMetadata`` was null rather than an empty map (the metadata table's plans): written back so.
    extra_metadata_null: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        freeze(self, operations=tuple, extra_metadata=dict, missing_schedule_partitions=tuple)


def decode_compaction_plan(data: bytes, *, base_path: str | None = None) -> CompactionPlan:
    """Decode a ``compaction.requested`` (or ``logcompaction.requested``) file.

    Version 1 plans (full paths) are converted to version 2 (names), as Hudi's migration does; every entry
    must lie in its operation's partition (and under ``base_path`` when given), else PathOutsideTable.
    """
    rec = read(data, "HoodieCompactionPlan", "compaction plan")
    version = rec.get_int("version", 1)
    if version not in (1, 2):
        raise CorruptTimelineFile(f"compaction plan version {version} is not one Hudi writes (1 or 2)")
    operations = []
    for op in rec.record_list("operations"):
        partition = op.get_str("partitionPath", "")
        data_file = op.opt_str("dataFilePath")
        deltas = op.str_list("deltaFilePaths")
        try:
            if data_file is not None:
                data_file = file_name_in_partition(
                    data_file, partition, base_path=base_path, allow_path=version == 1
                )
            deltas = tuple(
                file_name_in_partition(d, partition, base_path=base_path, allow_path=version == 1)
                for d in deltas
            )
        except PathOutsideTable as e:
            raise PathOutsideTable(f"compaction plan: file group {op.opt_str('fileId')!r}: {e}") from None
        check_file_group(op.get_str("fileId"), partition, (data_file, *deltas), "compaction plan")
        operations.append(
            CompactionOperation(
                base_instant_time=op.get_str("baseInstantTime"),
                file_id=op.get_str("fileId"),
                partition_path=partition,
                data_file_path=data_file,
                delta_file_paths=deltas,
                metrics=op.float_map("metrics"),
                bootstrap_file_path=op.opt_str("bootstrapFilePath"),
            )
        )
    strategy = rec.opt_record("strategy")
    return CompactionPlan(
        operations=tuple(operations),
        extra_metadata=rec.str_map("extraMetadata"),
        strategy=None
        if strategy is None
        else CompactionStrategy(
            strategy.opt_str("compactorClassName"),
            strategy.str_map("strategyParams"),
            strategy.opt_int("version"),
        ),
        preserve_hoodie_metadata=rec.opt_bool("preserveHoodieMetadata"),
        missing_schedule_partitions=rec.str_list("missingSchedulePartitions"),
        version=2,
        extra_metadata_null=rec.data.get("extraMetadata") is None,
    )


def encode_compaction_plan(plan: CompactionPlan, *, table_version: int) -> bytes:
    """Encode a compaction plan in the version the table's Hudi writes (2: file names)."""
    versions = plan_versions(table_version)
    record = {
        "operations": [
            {
                "baseInstantTime": op.base_instant_time,
                "deltaFilePaths": list(op.delta_file_paths),
                "dataFilePath": op.data_file_path,
                "fileId": op.file_id,
                "partitionPath": op.partition_path,
                "metrics": dict(op.metrics),
                "bootstrapFilePath": op.bootstrap_file_path,
            }
            for op in plan.operations
        ],
        "extraMetadata": None
        if plan.extra_metadata_null and not plan.extra_metadata
        else dict(plan.extra_metadata),
        "version": versions.compaction_plan,
        "strategy": None
        if plan.strategy is None
        else {
            "compactorClassName": plan.strategy.compactor_class_name,
            "strategyParams": dict(plan.strategy.strategy_params),
            "version": plan.strategy.version,
        },
        "preserveHoodieMetadata": plan.preserve_hoodie_metadata,
        "missingSchedulePartitions": list(plan.missing_schedule_partitions),
    }
    return write(record, "HoodieCompactionPlan", table_version)
