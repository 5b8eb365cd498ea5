"""What a table service's commit changes in the metadata table (a :class:`~.writer.MetadataUpdate`).

As Hudi's metadata writer does for the same actions:

==============  ==========================================================================================
partition       what goes in
==============  ==========================================================================================
files           compaction and clustering: the new base files (the files they replace stay listed until a
                clean deletes them); clean: the deleted files, marked deleted
column_stats    statistics of every new base file, for the indexed columns; a clean's deleted files get
                tombstones
partition_stats each partition with new files: their statistics as a loose bound (``isTightBound`` false),
                which widens the partition's range; a clean changes nothing (a loose bound stays true)
bloom_filters   the bloom filter of every new base file (from its footer); tombstones for deleted base files
record_index    clustering: every key of the new files at its new location (compaction keeps file ids and
                clean removes no live record: they change nothing); one entry per key, however often a file
                repeats it; a key in two file groups is refused (:func:`check_one_location_per_key`)
secondary       nothing: these services change no record's values (a secondary-index entry is keyed by
                secondary and record key: repeats of a record key are one entry, wherever they live)
==============  ==========================================================================================
"""

from __future__ import annotations

import datetime as dt
import json
import posixpath
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.bloom import read_bloom_filter
from hoodie.config import TableConfig
from hoodie.errors import HoodieError, RecordIndexConflict
from hoodie.keygen import record_keys
from hoodie.log.block import BlockType, decode_data_block, iter_blocks
from hoodie.metadata.keys import bloom_filter_key
from hoodie.metadata.records import MetadataPartition, MetadataRecord, RecordType
from hoodie.metadata.stats import (
    ColumnStats,
    column_stats_records,
    footer_column_stats,
    partition_stats_records,
)
from hoodie.metadata.writer import MetadataUpdate, MetadataWriter, metadata_record, open_metadata_table
from hoodie.storage import Storage
from hoodie.table import RECORD_KEY
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.metadata import CleanMetadata, WriteStat

__all__ = [
    "check_one_location_per_key",
    "indexed_columns",
    "update_for_clean",
    "update_for_clean_metadata",
    "update_for_rewrite",
    "update_for_write",
]

INDEX_DEFS_PATH = "hoodie.table.index.defs.path"
INDEX_DEFS_DEFAULT = ".hoodie/.index_defs/index.json"
COLUMN_LIST = "hoodie.metadata.index.column.stats.column.list"
MAX_COLUMNS = "hoodie.metadata.index.column.stats.max.columns.to.index"
MAX_COLUMNS_DEFAULT = 32
#: Meta columns column_stats indexes by default (not the sequence number and file name).
INDEXED_META_COLUMNS = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
#: Footers of a rewrite's new base files read at once: on an object store each is a round trip or two.
FOOTER_READS = 16


def indexed_columns(storage: Storage, config: TableConfig, file_columns: Sequence[str]) -> list[str]:
    """The columns ``column_stats`` indexes: the index definition's source fields (v8+), else
    ``hoodie.metadata.index.column.stats.column.list``, else the columns the index already holds (a v6 table
    records no definition, and its writer may have had a column list), else Hudi's default (three meta
    columns and the first ``max.columns.to.index`` data columns of the files)."""
    path = config.props.get(INDEX_DEFS_PATH, INDEX_DEFS_DEFAULT).strip() or INDEX_DEFS_DEFAULT
    try:
        defs = json.loads(storage.read(path))
    except FileNotFoundError:
        defs = None
    except (ValueError, UnicodeDecodeError) as e:
        raise HoodieError(f"{storage.uri}/{path} is not an index definition file: {e}") from e
    if isinstance(defs, dict):
        column_stats = (defs.get("indexDefinitions") or {}).get(MetadataPartition.COLUMN_STATS) or {}
        fields = column_stats.get("sourceFields")
        if isinstance(fields, list) and fields:
            return [str(f) for f in fields]
    listed = [c.strip() for c in config.props.get(COLUMN_LIST, "").split(",") if c.strip()]
    if listed:
        return listed
    seen = _columns_in_index(storage, config)
    if seen:
        return seen
    limit = int(config.props.get(MAX_COLUMNS, MAX_COLUMNS_DEFAULT))
    data = [c for c in file_columns if not c.startswith("_hoodie_")][:limit]
    return [c for c in INDEXED_META_COLUMNS if c in file_columns] + data


def _columns_in_index(storage: Storage, config: TableConfig) -> list[str]:
    mdt = open_metadata_table(storage, config)
    if mdt is None or MetadataPartition.COLUMN_STATS not in config.metadata_partitions:
        return []
    names: dict[str, None] = {}
    for record in mdt.read_partition(MetadataPartition.COLUMN_STATS).values():
        stats = record.get("ColumnStatsMetadata") or {}
        if stats.get("columnName") and not stats.get("isDeleted"):
            names[stats["columnName"]] = None
    return list(names)


def _base_file_name(path: str) -> str:
    return posixpath.basename(path)


def update_for_rewrite(
    storage: Storage,
    config: TableConfig,
    instant_time: str,
    stats: Sequence[WriteStat],
    *,
    record_index: bool,
) -> MetadataUpdate:
    """The metadata update of a compaction (``record_index`` false) or a clustering (true): the new base
    files ``stats`` name, with the statistics, bloom filters and record locations the table indexes."""
    partitions = set(MetadataWriter.partitions_of(config))
    version = config.table_version
    added: dict[str, dict[str, int]] = {}
    records: dict[str, list[MetadataRecord]] = {}
    per_partition_stats: dict[str, list[dict[str, Any]]] = {}
    columns: list[str] | None = None
    written = [(stat, stat.path) for stat in stats if stat.path]
    footers = _read_footers(storage, [path for _, path in written])
    for (stat, path), footer in zip(written, footers, strict=True):
        partition = stat.partition_path or ""
        name = _base_file_name(path)
        size = stat.file_size_in_bytes or stat.total_write_bytes or storage.size(path)
        added.setdefault(partition, {})[name] = int(size)
        if MetadataPartition.COLUMN_STATS in partitions:
            if columns is None:
                columns = indexed_columns(storage, config, footer.schema.names)
            column_stats = footer_column_stats(footer, columns)
            file_records = column_stats_records(partition, name, column_stats, table_version=version)
            records.setdefault(MetadataPartition.COLUMN_STATS, []).extend(file_records)
            per_partition_stats.setdefault(partition, []).extend(
                r["ColumnStatsMetadata"] for r in file_records
            )
        if MetadataPartition.BLOOM_FILTERS in partitions:
            bloom = read_bloom_filter(footer.metadata)
            if bloom is not None:
                records.setdefault(MetadataPartition.BLOOM_FILTERS, []).append(
                    bloom_record(partition, name, instant_time, bloom.type_code, bloom.serialize().encode())
                )
        if record_index and MetadataPartition.RECORD_INDEX in partitions:
            records.setdefault(MetadataPartition.RECORD_INDEX, []).extend(
                record_index_records(storage, config, stat, instant_time)
            )
    check_one_location_per_key(records.get(MetadataPartition.RECORD_INDEX, ()), f"instant {instant_time}")
    if MetadataPartition.PARTITION_STATS in partitions and version >= 8 and config.partition_fields:
        for partition, file_stats in per_partition_stats.items():
            loose = partition_stats_records(partition, file_stats, table_version=version)
            for r in loose:
                r["ColumnStatsMetadata"]["isTightBound"] = False  # widens the partition's range
            records.setdefault(MetadataPartition.PARTITION_STATS, []).extend(loose)
    return MetadataUpdate(instant_time, files_added=added, records=records)


def _read_footers(storage: Storage, paths: Sequence[str]) -> Iterator[pq.FileMetaData]:
    """The Parquet footer of each of ``paths``, in order, :data:`FOOTER_READS` read at once."""

    def footer(path: str) -> pq.FileMetaData:
        with storage.open_input_file(path) as f:
            return pq.read_metadata(f)

    if len(paths) < 2:
        yield from map(footer, paths)
        return
    with ThreadPoolExecutor(min(FOOTER_READS, len(paths)), thread_name_prefix="hoodie-footer") as pool:
        yield from pool.map(footer, paths)


def update_for_write(
    storage: Storage,
    config: TableConfig,
    instant_time: str,
    stats: Sequence[WriteStat],
    *,
    deleted_keys: Sequence[str] = (),
    index_log_records: bool = True,
) -> MetadataUpdate:
    """The metadata update of a write (insert, upsert, delete) that wrote ``stats``: its base files as a
    rewrite's (statistics, bloom filters, every key of each base file in the record index), its log files in
    the file listing (at their size now: a v6 log file grows by appends), and ``deleted_keys`` out of the
    record index. Log files get no column statistics: Hudi's data skipping keeps files the index lacks.

    The keys of the records the write appended to log files go into the record index at their file group
    too. Mostly that restates where they are; but a key a delete block removed (and the index with it) is
    still in its base file, so a writer that tags by base files updates it there: without this entry the
    index would miss a live record (found by the chaos campaign). A log compaction (``index_log_records``
    false) restates records that are already indexed: entries under its later instant time would put back a
    key a write deleted meanwhile (its blocks were planned before the delete)."""
    bases = [s for s in stats if s.path and not _is_log(s.path)]
    update = update_for_rewrite(storage, config, instant_time, bases, record_index=True)
    records = {p: list(r) for p, r in update.records.items()}
    added = {p: dict(files) for p, files in update.files_added.items()}
    indexed = MetadataPartition.RECORD_INDEX in MetadataWriter.partitions_of(config)
    for stat in stats:
        if stat.path and _is_log(stat.path):
            partition = stat.partition_path or ""
            added.setdefault(partition, {})[_base_file_name(stat.path)] = storage.size(stat.path)
            if indexed and index_log_records:
                keys = _logged_keys(storage, config, stat.path, instant_time)
                file_id = stat.file_id or _base_file_name(stat.path).removeprefix(".").split("_")[0]
                records.setdefault(MetadataPartition.RECORD_INDEX, []).extend(
                    index_records_of_keys(config, keys, partition, file_id, instant_time)
                )
    deleted: dict[str, list[str]] = {}
    if indexed and deleted_keys:
        deleted[MetadataPartition.RECORD_INDEX] = sorted(set(deleted_keys))
    return MetadataUpdate(instant_time, files_added=added, records=records, deleted_keys=deleted)


def _logged_keys(storage: Storage, config: TableConfig, path: str, instant_time: str) -> list[str]:
    """The record keys of the data blocks ``instant_time`` wrote into the log file ``path``."""
    keys: list[str] = []
    for block in iter_blocks(storage.read(path)):
        if block.instant_time != instant_time or block.block_type not in _DATA_BLOCKS:
            continue
        rows = decode_data_block(block)
        if RECORD_KEY in rows.column_names and rows.column(RECORD_KEY).null_count == 0:
            keys.extend(str(k) for k in rows.column(RECORD_KEY).to_pylist())
        else:
            keys.extend(str(k) for k in record_keys(rows, config.record_key_fields).to_pylist())
    return list(dict.fromkeys(keys))


_DATA_BLOCKS = frozenset({BlockType.AVRO_DATA, BlockType.PARQUET_DATA})


def _is_log(path: str) -> bool:
    return _base_file_name(path).startswith(".") and ".log." in path


def update_for_clean(
    storage: Storage,
    config: TableConfig,
    instant_time: str,
    deleted: Mapping[str, Sequence[str]],
    indexed: Sequence[str] | None = None,
    *,
    partitions_deleted: Sequence[str] = (),
) -> MetadataUpdate:
    """The metadata update of a clean that deleted ``deleted`` (partition path -> file names) and the folders
    of ``partitions_deleted``."""
    partitions = set(MetadataWriter.partitions_of(config))
    records: dict[str, list[MetadataRecord]] = {}
    if MetadataPartition.COLUMN_STATS in partitions:
        columns = list(indexed) if indexed is not None else indexed_columns(storage, config, [])
        dummies = {c: _NO_STATS for c in columns}
        for partition, names in deleted.items():
            for name in names:
                records.setdefault(MetadataPartition.COLUMN_STATS, []).extend(
                    column_stats_records(
                        partition, name, dummies, table_version=config.table_version, is_deleted=True
                    )
                )
    if MetadataPartition.BLOOM_FILTERS in partitions:
        for partition, names in deleted.items():
            for name in names:
                if not name.startswith("."):  # base files only
                    records.setdefault(MetadataPartition.BLOOM_FILTERS, []).append(
                        bloom_record(partition, name, instant_time, "", b"", is_deleted=True)
                    )
    return MetadataUpdate(
        instant_time, files_deleted=deleted, records=records, partitions_deleted=tuple(partitions_deleted)
    )


def update_for_clean_metadata(
    storage: Storage, config: TableConfig, instant_time: str, metadata: CleanMetadata
) -> MetadataUpdate:
    """:func:`update_for_clean` of a clean whose completed metadata is ``metadata``: the files its partitions
    list to delete, and (as Hudi's) a partition dropped only where the metadata says it was deleted."""
    partitions = metadata.partition_metadata
    deleted = {p: m.delete_path_patterns for p, m in partitions.items() if m.delete_path_patterns}
    gone = tuple(p for p, m in partitions.items() if m.is_partition_deleted)
    return update_for_clean(storage, config, instant_time, deleted, partitions_deleted=gone)


_NO_STATS = ColumnStats("", pa.null(), None, None, None, 0, 0, 0, 0)


def bloom_record(
    partition: str,
    name: str,
    instant_time: str,
    type_code: str,
    serialized: bytes,
    *,
    is_deleted: bool = False,
) -> MetadataRecord:
    """A bloom_filters record (``HoodieMetadataBloomFilter``) of one base file."""
    return metadata_record(
        bloom_filter_key(partition, name),
        RecordType.BLOOM_FILTER,
        BloomFilterMetadata={
            "type": type_code,
            "timestamp": instant_time,
            "bloomFilter": serialized,
            "isDeleted": is_deleted,
        },
    )


def instant_epoch_millis(instant_time: str, config: TableConfig) -> int:
    """An instant time as epoch milliseconds, read in the table's timeline time zone (UTC or local)."""
    moment = parse_instant_time(instant_time[:17])
    if config.timeline_timezone == "UTC":
        return int(moment.replace(tzinfo=dt.UTC).timestamp() * 1000)
    return int(moment.timestamp() * 1000)  # naive: the local time zone, as Hudi's LOCAL


def record_location(file_id: str) -> dict[str, Any]:
    """How the record index stores a file id: a UUID-based ``<uuid>-<n>`` as its two 64-bit halves and the
    index (encoding 0), anything else as the string (encoding 1)."""
    head, _, tail = file_id.rpartition("-")
    parsed: uuid.UUID | None = None
    if tail.isdigit():
        try:
            parsed = uuid.UUID(head)
        except ValueError:
            parsed = None
    if parsed is None or str(parsed) != head.lower():
        return {
            "fileIdHighBits": None,
            "fileIdLowBits": None,
            "fileIndex": None,
            "fileId": file_id,
            "fileIdEncoding": 1,
        }
    index = int(tail)
    value = parsed.int
    high, low = value >> 64, value & ((1 << 64) - 1)
    return {
        "fileIdHighBits": high - (1 << 64) if high >= 1 << 63 else high,
        "fileIdLowBits": low - (1 << 64) if low >= 1 << 63 else low,
        "fileIndex": index,
        "fileId": "",
        "fileIdEncoding": 0,
    }


def record_index_records(
    storage: Storage, config: TableConfig, stat: WriteStat, instant_time: str
) -> list[MetadataRecord]:
    """Record-index records for the keys of the base file ``stat`` names (the clustering moved them): one per
    key, however often the file holds it (Hudi reads a file's keys as a set)."""
    assert stat.path is not None
    keys = list(dict.fromkeys(_file_keys(storage, config, stat.path)))
    file_id = stat.file_id or _base_file_name(stat.path).split("_")[0]
    return index_records_of_keys(config, keys, stat.partition_path or "", file_id, instant_time)


def index_records_of_keys(
    config: TableConfig, keys: Sequence[str], partition: str, file_id: str, instant_time: str
) -> list[MetadataRecord]:
    """Record-index records placing ``keys`` in file group ``file_id`` of ``partition``, written at
    ``instant_time``."""
    location = record_location(file_id)
    millis = instant_epoch_millis(instant_time, config)
    info = {"partitionName": partition, **location, "instantTime": millis, "position": None}
    return [metadata_record(key, RecordType.RECORD_INDEX, recordIndexMetadata=dict(info)) for key in keys]


def check_one_location_per_key(records: Iterable[MetadataRecord], what: str) -> None:
    """Raise :class:`~hoodie.errors.RecordIndexConflict` when ``records`` (record-index records of one update)
    place a key in two file groups: the index is global, one location per key (see the error's doc)."""
    where: dict[str, tuple[str, str]] = {}
    for record in records:
        info = record.get("recordIndexMetadata")
        if info is None:  # a delete
            continue
        location = (info["partitionName"], _file_id_of(info))
        seen = where.setdefault(record["key"], location)
        if seen != location:
            first, second = (f"{p or '<table>'}/{f}" for p, f in sorted((seen, location)))
            raise RecordIndexConflict(
                f"{what}: record key {record['key']!r} would be in file groups {first} and {second}; the "
                "record index holds one location per key (Hudi refuses the same), so nothing is written. "
                "The table repeats this key across file groups (written with insert or bulk_insert): drop "
                "the record index (hoodied index --drop record_index) or remove the repeats"
            )


def _file_id_of(info: Mapping[str, Any]) -> str:
    """The file id a record-index location names (see :func:`record_location`)."""
    if info.get("fileIdEncoding") == 1 or info.get("fileIdHighBits") is None:
        return str(info.get("fileId") or "")
    value = ((info["fileIdHighBits"] & (2**64 - 1)) << 64) | (info["fileIdLowBits"] & (2**64 - 1))
    return f"{uuid.UUID(int=value)}-{info['fileIndex']}"


def _file_keys(storage: Storage, config: TableConfig, path: str) -> list[str]:
    with storage.open_input_file(path) as f:
        parquet = pq.ParquetFile(f)
        # Without meta fields a file may still carry a _hoodie_record_key column, of nulls: key by the fields.
        if config.populate_meta_fields and RECORD_KEY in parquet.schema_arrow.names:
            return [str(k) for k in parquet.read(columns=[RECORD_KEY]).column(0).to_pylist()]
        table = parquet.read(columns=list(config.record_key_fields))
    return [str(k) for k in record_keys(table, config.record_key_fields).to_pylist()]
