"""The index plan (``HoodieIndexPlan``, in ``indexing.requested``) and the metadata of a completed indexing
(``HoodieIndexCommitMetadata``): the metadata-table partitions (indexes) to build.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hoodie.timeline.metadata.fields import Fields, freeze, read, write
from hoodie.timeline.metadata.versions import plan_versions

__all__ = [
    "IndexCommitMetadata",
    "IndexPartitionInfo",
    "IndexPlan",
    "decode_index_commit_metadata",
    "decode_index_plan",
    "encode_index_commit_metadata",
    "encode_index_plan",
]


@dataclass(frozen=True)
class IndexPartitionInfo:
    """One metadata-table partition (index) to build, and the instant its initial build covers."""

    metadata_partition_path: str | None
    index_upto_instant: str | None = None
    extra_metadata: dict[str, str] = field(default_factory=dict)
    version: int | None = 1

    def __post_init__(self) -> None:
        freeze(self, extra_metadata=dict)


@dataclass(frozen=True)
class IndexPlan:
    """``HoodieIndexPlan``, in ``indexing.requested``."""

    index_partition_infos: tuple[IndexPartitionInfo, ...] = ()
    version: int = 1

    def __post_init__(self) -> None:
        freeze(self, index_partition_infos=tuple)


@dataclass(frozen=True)
class IndexCommitMetadata:
    """``HoodieIndexCommitMetadata``, the content of a completed ``indexing``."""

    index_partition_infos: tuple[IndexPartitionInfo, ...] = ()
    operation_type: str | None = None
    version: int = 1

    def __post_init__(self) -> None:
        freeze(self, index_partition_infos=tuple)


def _index_infos(rec: Fields) -> tuple[IndexPartitionInfo, ...]:
    return tuple(
        IndexPartitionInfo(
            metadata_partition_path=i.opt_str("metadataPartitionPath"),
            index_upto_instant=i.opt_str("indexUptoInstant"),
            extra_metadata=i.str_map("extraMetadata"),
            version=i.opt_int("version"),
        )
        for i in rec.record_list("indexPartitionInfos")
    )


def _index_info_records(infos: Sequence[IndexPartitionInfo]) -> list[dict[str, Any]]:
    return [
        {
            "version": i.version,
            "metadataPartitionPath": i.metadata_partition_path,
            "indexUptoInstant": i.index_upto_instant,
            "extraMetadata": dict(i.extra_metadata),
        }
        for i in infos
    ]


def decode_index_plan(data: bytes) -> IndexPlan:
    """Decode an ``indexing.requested`` file."""
    rec = read(data, "HoodieIndexPlan", "index plan")
    return IndexPlan(_index_infos(rec), rec.get_int("version", 1))


def encode_index_plan(plan: IndexPlan, *, table_version: int) -> bytes:
    """Encode an index plan in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "version": versions.index_plan,
        "indexPartitionInfos": _index_info_records(plan.index_partition_infos),
    }
    return write(record, "HoodieIndexPlan", table_version)


def decode_index_commit_metadata(data: bytes) -> IndexCommitMetadata:
    """Decode a completed ``indexing`` file."""
    rec = read(data, "HoodieIndexCommitMetadata", "index commit metadata")
    return IndexCommitMetadata(_index_infos(rec), rec.opt_str("operationType"), rec.get_int("version", 1))


def encode_index_commit_metadata(md: IndexCommitMetadata, *, table_version: int) -> bytes:
    """Encode index commit metadata in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "version": versions.index_commit_metadata,
        "operationType": md.operation_type,
        "indexPartitionInfos": _index_info_records(md.index_partition_infos),
    }
    return write(record, "HoodieIndexCommitMetadata", table_version)
