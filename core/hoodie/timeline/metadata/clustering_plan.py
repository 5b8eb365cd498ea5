"""The clustering plan (``HoodieClusteringPlan``) and the requested replace metadata that carries it
(``HoodieRequestedReplaceMetadata``, in ``clustering.requested`` and ``replacecommit.requested``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hoodie.errors import CorruptTimelineFile
from hoodie.timeline.metadata.fields import Fields, freeze, read, write
from hoodie.timeline.metadata.paths import check_file_group, check_in_partition, file_name_in_partition
from hoodie.timeline.metadata.versions import PlanVersions, plan_versions

__all__ = [
    "ClusteringGroup",
    "ClusteringPlan",
    "ClusteringStrategy",
    "RequestedReplaceMetadata",
    "SliceInfo",
    "decode_clustering_plan",
    "decode_requested_replace_metadata",
    "encode_clustering_plan",
    "encode_requested_replace_metadata",
]


@dataclass(frozen=True)
class SliceInfo:
    """One file slice of a clustering group (``HoodieSliceInfo``); paths as the plan stores them (full)."""

    file_id: str
    partition_path: str
    data_file_path: str | None = None
    delta_file_paths: tuple[str, ...] = ()
    bootstrap_file_path: str | None = None
    version: int | None = 1

    def __post_init__(self) -> None:
        freeze(self, delta_file_paths=tuple)

    @property
    def data_file_name(self) -> str | None:
        """The base file's name, checked to lie in the slice's partition."""
        if not self.data_file_path:
            return None
        return file_name_in_partition(self.data_file_path, self.partition_path)

    @property
    def delta_file_names(self) -> tuple[str, ...]:
        """The log files' names, checked to lie in the slice's partition."""
        return tuple(file_name_in_partition(p, self.partition_path) for p in self.delta_file_paths)


@dataclass(frozen=True)
class ClusteringGroup:
    """File slices rewritten together into ``num_output_file_groups`` new file groups."""

    slices: tuple[SliceInfo, ...] = ()
    metrics: dict[str, float] = field(default_factory=dict)
    num_output_file_groups: int | None = 1
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        freeze(self, slices=tuple, metrics=dict, extra_metadata=dict)


@dataclass(frozen=True)
class ClusteringStrategy:
    """The execution strategy class of a clustering plan and its parameters."""

    strategy_class_name: str | None = None
    strategy_params: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        freeze(self, strategy_params=dict)


@dataclass(frozen=True)
class ClusteringPlan:
    """``HoodieClusteringPlan``: the groups to rewrite, how, and whether to keep the meta columns."""

    input_groups: tuple[ClusteringGroup, ...] = ()
    strategy: ClusteringStrategy | None = None
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1
    preserve_hoodie_metadata: bool | None = None
    missing_schedule_partitions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        freeze(self, input_groups=tuple, extra_metadata=dict, missing_schedule_partitions=tuple)

    @property
    def slices(self) -> tuple[SliceInfo, ...]:
        """Every slice of every group."""
        return tuple(s for g in self.input_groups for s in g.slices)


@dataclass(frozen=True)
class RequestedReplaceMetadata:
    """``HoodieRequestedReplaceMetadata``: the content of ``clustering.requested`` (v8+) and of
    ``replacecommit.requested``. Clustering sets ``operation_type`` CLUSTER and a plan; an INSERT OVERWRITE's
    requested file holds no plan and, as Hudi writes it, null in every field (version included)."""

    operation_type: str | None = None
    clustering_plan: ClusteringPlan | None = None
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        freeze(self, extra_metadata=dict)


def _slice_from(rec: Fields) -> SliceInfo:
    info = SliceInfo(
        file_id=rec.get_str("fileId"),
        partition_path=rec.get_str("partitionPath", ""),
        data_file_path=rec.opt_str("dataFilePath"),
        delta_file_paths=rec.str_list("deltaFilePaths"),
        bootstrap_file_path=rec.opt_str("bootstrapFilePath"),
        version=rec.opt_int("version"),
    )
    check_in_partition(
        (info.data_file_path, *info.delta_file_paths),
        info.partition_path,
        f"clustering slice {info.file_id!r}",
    )
    check_file_group(
        info.file_id, info.partition_path, (info.data_file_path, *info.delta_file_paths), "clustering plan"
    )
    return info


def _clustering_plan_from(rec: Fields) -> ClusteringPlan:
    strategy = rec.opt_record("strategy")
    return ClusteringPlan(
        input_groups=tuple(
            ClusteringGroup(
                slices=tuple(_slice_from(s) for s in g.record_list("slices")),
                metrics=g.float_map("metrics"),
                num_output_file_groups=g.opt_int("numOutputFileGroups"),
                extra_metadata=g.str_map("extraMetadata"),
                version=g.opt_int("version"),
            )
            for g in rec.record_list("inputGroups")
        ),
        strategy=None
        if strategy is None
        else ClusteringStrategy(
            strategy.opt_str("strategyClassName"),
            strategy.str_map("strategyParams"),
            strategy.opt_int("version"),
        ),
        extra_metadata=rec.str_map("extraMetadata"),
        version=rec.opt_int("version"),
        preserve_hoodie_metadata=rec.opt_bool("preserveHoodieMetadata"),
        missing_schedule_partitions=rec.str_list("missingSchedulePartitions"),
    )


def decode_requested_replace_metadata(data: bytes) -> RequestedReplaceMetadata:
    """Decode a ``replacecommit.requested`` or ``clustering.requested`` file; empty content (some writers'
    INSERT OVERWRITE) is metadata without a plan."""
    if not data:
        return RequestedReplaceMetadata(version=None)
    rec = read(data, "HoodieRequestedReplaceMetadata", "requested replace metadata")
    plan = rec.opt_record("clusteringPlan")
    return RequestedReplaceMetadata(
        operation_type=rec.opt_str("operationType"),
        clustering_plan=None if plan is None else _clustering_plan_from(plan),
        extra_metadata=rec.str_map("extraMetadata"),
        version=rec.opt_int("version"),
    )


def decode_clustering_plan(data: bytes) -> ClusteringPlan:
    """The clustering plan of a ``clustering.requested`` (or clustering ``replacecommit.requested``) file;
    a requested replace without a plan (INSERT OVERWRITE) raises CorruptTimelineFile."""
    md = decode_requested_replace_metadata(data)
    if md.clustering_plan is None:
        raise CorruptTimelineFile(
            f"requested replace metadata (operation {md.operation_type}) holds no clustering plan"
        )
    return md.clustering_plan


def _clustering_plan_record(plan: ClusteringPlan, versions: PlanVersions) -> dict[str, Any]:
    return {
        "inputGroups": [
            {
                "slices": [
                    {
                        "dataFilePath": s.data_file_path,
                        "deltaFilePaths": list(s.delta_file_paths),
                        "fileId": s.file_id,
                        "partitionPath": s.partition_path,
                        "bootstrapFilePath": s.bootstrap_file_path,
                        "version": s.version,
                    }
                    for s in g.slices
                ],
                "metrics": dict(g.metrics),
                "numOutputFileGroups": g.num_output_file_groups,
                # Hudi never fills a group's extra metadata and writes null; so do we when it is empty.
                "extraMetadata": dict(g.extra_metadata) or None,
                "version": g.version,
            }
            for g in plan.input_groups
        ],
        "strategy": None
        if plan.strategy is None
        else {
            "strategyClassName": plan.strategy.strategy_class_name,
            "strategyParams": dict(plan.strategy.strategy_params),
            "version": plan.strategy.version,
        },
        "extraMetadata": dict(plan.extra_metadata),
        "version": versions.clustering_plan,
        "preserveHoodieMetadata": plan.preserve_hoodie_metadata,
        "missingSchedulePartitions": list(plan.missing_schedule_partitions),
    }


def encode_requested_replace_metadata(md: RequestedReplaceMetadata, *, table_version: int) -> bytes:
    """Encode requested replace metadata; a plan is written in the table's clustering plan version, and the
    wrapper's version as held (1 for clustering, null for Hudi's plan-less INSERT OVERWRITE)."""
    versions = plan_versions(table_version)
    plan_less = md.clustering_plan is None and md.operation_type is None and md.version is None
    record = {
        "operationType": md.operation_type,
        "clusteringPlan": None
        if md.clustering_plan is None
        else _clustering_plan_record(md.clustering_plan, versions),
        "extraMetadata": None if plan_less and not md.extra_metadata else dict(md.extra_metadata),
        "version": md.version,
    }
    return write(record, "HoodieRequestedReplaceMetadata", table_version)


def encode_clustering_plan(
    plan: ClusteringPlan, *, table_version: int, extra_metadata: Mapping[str, str] | None = None
) -> bytes:
    """Encode a ``clustering.requested`` (v6: ``replacecommit.requested``) file: the plan wrapped in requested
    replace metadata with operation type CLUSTER, as Hudi schedules clustering."""
    versions = plan_versions(table_version)
    md = RequestedReplaceMetadata(
        operation_type="CLUSTER",
        clustering_plan=plan,
        extra_metadata=dict(extra_metadata or {}),
        version=versions.requested_replace,
    )
    return encode_requested_replace_metadata(md, table_version=table_version)
