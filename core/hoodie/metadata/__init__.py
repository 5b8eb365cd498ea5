"""Hudi's metadata table (``.hoodie/metadata``): its records (:mod:`~hoodie.metadata.records`) and reading
them (:mod:`~hoodie.metadata.reader`)."""

from __future__ import annotations

from hoodie.metadata.reader import METADATA_TABLE_PATH, MetadataTable, MetadataTableConfig
from hoodie.metadata.records import MetadataPartition, MetadataRecord, RecordType

__all__ = [
    "METADATA_TABLE_PATH",
    "MetadataPartition",
    "MetadataRecord",
    "MetadataTable",
    "MetadataTableConfig",
    "RecordType",
]
