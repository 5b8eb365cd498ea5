"""The metadata-table update of a delete-partition replacecommit (partition TTL: Hudi's ``DELETE_PARTITION``),
and the record keys it drops from the record index (:func:`replaced_keys`).

Its own module below the services: the TTL commits with it, and a takeover that rolls a decided TTL forward
(:mod:`hoodie.write.decision`) rebuilds the same update from the completed file alone: the partitions are the
commit's ``partitionToReplaceFileIds``, the keys those of the replaced file groups' slices, still on storage
until the replacecommit completes and a clean follows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.config import TableConfig
from hoodie.file_group.file_group import FileSlice
from hoodie.keygen import record_keys
from hoodie.metadata.keys import partition_stats_key
from hoodie.metadata.records import MetadataPartition, MetadataRecord, RecordType
from hoodie.metadata.stats import ColumnStats, column_stats_records
from hoodie.metadata.updates import indexed_columns
from hoodie.metadata.writer import MetadataUpdate, MetadataWriter, metadata_record
from hoodie.storage import Storage
from hoodie.table import RECORD_KEY, Table


def slice_keys(table: Table, file_slice: FileSlice) -> tuple[str, ...]:
    """Every record key of a file slice: all of its base file's (Hudi's record-index delete reads those),
    and those its merged records hold (keys that live in log files only)."""
    keys: dict[str, None] = {}
    path = file_slice.base_file_path
    if path is not None:
        with table.storage.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            cfg = table.config
            if cfg.populate_meta_fields and RECORD_KEY in parquet.schema_arrow.names:
                column = parquet.read(columns=[RECORD_KEY]).column(0)
            else:
                column = pa.chunked_array(
                    [record_keys(parquet.read(columns=list(cfg.record_key_fields)), cfg.record_key_fields)]
                )
        keys.update(dict.fromkeys(str(k) for k in column.to_pylist()))
    if file_slice.log_files:
        merged = table.read_file_slice(file_slice)
        if merged is not None:
            keys.update(dict.fromkeys(str(k) for k in table.record_keys_of(merged).to_pylist()))
    return tuple(keys)


def update_for_partition_delete(
    storage: Storage,
    config: TableConfig,
    table: Table,
    instant_time: str,
    partitions: Sequence[str],
    keys: Sequence[str],
) -> MetadataUpdate:
    """The metadata update of a delete-partition replacecommit that replaced every file group of
    ``partitions`` holding ``keys``: record-index deletes and ``partition_stats`` deleted entries; the file
    listing keeps the files until the clean deletes them (Hudi's ``HoodieBackedTableMetadataWriter`` at a
    ``DELETE_PARTITION``)."""
    wanted = set(MetadataWriter.partitions_of(config))
    deleted: dict[str, list[str]] = {}
    if MetadataPartition.RECORD_INDEX in wanted and keys:
        deleted[MetadataPartition.RECORD_INDEX] = sorted(set(keys))
    records: dict[str, list[MetadataRecord]] = {}
    if MetadataPartition.PARTITION_STATS in wanted and config.table_version >= 8:
        schema = table.arrow_schema()
        columns = indexed_columns(storage, config, schema.names if schema is not None else [])
        for partition in partitions:
            records.setdefault(MetadataPartition.PARTITION_STATS, []).extend(
                partition_stats_tombstones(partition, columns, config.table_version)
            )
    return MetadataUpdate(instant_time, records=records, deleted_keys=deleted)


_STUB = ColumnStats("", pa.null(), None, None, None, -1, -1, -1, -1)


def partition_stats_tombstones(
    partition: str, columns: Sequence[str], table_version: int
) -> list[MetadataRecord]:
    """The deleted ``partition_stats`` entries of one partition, one per column, as Hudi writes them at a
    ``DELETE_PARTITION`` (``createPartitionStatsRecords`` of ``HoodieColumnRangeMetadata.stub``: no file name,
    no bounds, counts -1, deleted, a tight bound)."""
    out = []
    for column in columns:
        (stub,) = column_stats_records(
            partition, "", {column: _STUB}, table_version=table_version, is_deleted=True
        )
        payload = {**stub["ColumnStatsMetadata"], "isTightBound": True}
        out.append(
            metadata_record(
                partition_stats_key(column, partition),
                RecordType.PARTITION_STATS,
                ColumnStatsMetadata=payload,
            )
        )
    return out


def replaced_keys(table: Table, replaced: Mapping[str, Sequence[str]]) -> tuple[str, ...]:
    """The record keys of the live slices of the file groups ``replaced`` names (partition -> file ids),
    when the table has a record index (none otherwise: nothing to delete from it)."""
    if MetadataPartition.RECORD_INDEX not in set(MetadataWriter.partitions_of(table.config)):
        return ()
    wanted = {(p, f) for p, ids in replaced.items() for f in ids}
    keys: dict[str, None] = {}
    for s in table.file_slices():
        if (s.partition_path, s.file_id) in wanted:
            keys.update(dict.fromkeys(slice_keys(table, s)))
    return tuple(keys)


__all__ = ["partition_stats_tombstones", "replaced_keys", "slice_keys", "update_for_partition_delete"]
