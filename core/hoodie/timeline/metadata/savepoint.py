"""The metadata of a completed savepoint (``HoodieSavepointMetadata``): the base files it keeps, partition by
partition.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hoodie.timeline.metadata.fields import freeze, read, write
from hoodie.timeline.metadata.versions import plan_versions

__all__ = [
    "SavepointMetadata",
    "SavepointPartitionMetadata",
    "decode_savepoint_metadata",
    "encode_savepoint_metadata",
]


@dataclass(frozen=True)
class SavepointPartitionMetadata:
    """The base files a savepoint keeps in one partition."""

    partition_path: str
    savepoint_data_file: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        freeze(self, savepoint_data_file=tuple)


@dataclass(frozen=True)
class SavepointMetadata:
    """``HoodieSavepointMetadata``, the content of a completed ``savepoint``."""

    savepointed_by: str
    savepointed_at: int
    comments: str
    partition_metadata: dict[str, SavepointPartitionMetadata] = field(default_factory=dict)
    version: int = 1

    def __post_init__(self) -> None:
        freeze(self, partition_metadata=dict)


def decode_savepoint_metadata(data: bytes) -> SavepointMetadata:
    """Decode a completed ``savepoint`` file."""
    rec = read(data, "HoodieSavepointMetadata", "savepoint metadata")
    return SavepointMetadata(
        savepointed_by=rec.get_str("savepointedBy", ""),
        savepointed_at=rec.get_int("savepointedAt"),
        comments=rec.get_str("comments", ""),
        partition_metadata={
            k: SavepointPartitionMetadata(p.get_str("partitionPath", ""), p.str_list("savepointDataFile"))
            for k, p in rec.record_map("partitionMetadata").items()
        },
        version=rec.get_int("version", 1),
    )


def encode_savepoint_metadata(md: SavepointMetadata, *, table_version: int) -> bytes:
    """Encode savepoint metadata in the version the table's Hudi writes (1)."""
    versions = plan_versions(table_version)
    record = {
        "savepointedBy": md.savepointed_by,
        "savepointedAt": md.savepointed_at,
        "comments": md.comments,
        "partitionMetadata": {
            k: {"partitionPath": p.partition_path, "savepointDataFile": list(p.savepoint_data_file)}
            for k, p in md.partition_metadata.items()
        },
        "version": versions.savepoint_metadata,
    }
    return write(record, "HoodieSavepointMetadata", table_version)
