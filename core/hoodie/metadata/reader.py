"""Reading Hudi's metadata table: merged records of each partition, and the file listing it holds.

The metadata table is a MERGE_ON_READ table at ``.hoodie/metadata`` whose base files are HFiles and whose
log blocks are HFile data blocks. A record written by metadata-table instant ``t`` counts when ``t``
completed on the metadata table's timeline and is valid on the data table's timeline (:meth:`
MetadataTable.valid_instant`): a data-table write that failed after its metadata deltacommit completed
must not show its files.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hoodie.config import TableConfig, is_metadata_table_props
from hoodie.errors import CorruptMetadataTable, HoodieError, TableNotFound
from hoodie.file_group.file_group import FileGroupId, FileSlice
from hoodie.file_group.fs_view import build_file_groups, classify_listing, snapshot_slices
from hoodie.hfile.reader import HFileReader
from hoodie.log.block import AVRO_SCHEMA_METADATA
from hoodie.log.reader import scan_log_files
from hoodie.metadata.records import (
    ALL_PARTITIONS_KEY,
    MetadataPartition,
    MetadataRecord,
    combine,
    decode_records,
    file_list,
    partition_key,
    partition_path_of_key,
)
from hoodie.storage import Storage
from hoodie.timeline.instant import COMPACTION, State
from hoodie.timeline.metadata import decode_compaction_plan
from hoodie.timeline.timeline import Timeline

__all__ = ["METADATA_TABLE_PATH", "MetadataTable", "MetadataTableConfig"]

METADATA_TABLE_PATH = ".hoodie/metadata"

logger = logging.getLogger(__name__)


class MetadataTableConfig(TableConfig):
    """The ``hoodie.properties`` of a metadata table: a MERGE_ON_READ table of HFile base files."""

    base_format_required = "HFILE"

    def _validate(self) -> None:
        super()._validate()
        if not is_metadata_table_props(self.props):
            raise CorruptMetadataTable(
                "the metadata table's hoodie.properties does not name Hudi's metadata key generator"
            )


@dataclass
class MetadataTable:
    """A data table's metadata table as of when it was loaded."""

    data_storage: Storage
    data_config: TableConfig
    data_timeline: Timeline
    storage: Storage
    config: MetadataTableConfig
    timeline: Timeline

    @classmethod
    def load(cls, data_storage: Storage, data_config: TableConfig, data_timeline: Timeline) -> MetadataTable:
        """Open the metadata table of the data table on ``data_storage``; raises :class:`TableNotFound`
        when it has none and :class:`CorruptMetadataTable` when its config does not read."""
        storage = data_storage.child(METADATA_TABLE_PATH)
        try:
            config = MetadataTableConfig.load(storage)
        except TableNotFound:
            raise
        except HoodieError as e:
            raise CorruptMetadataTable(f"{storage.uri}: {e}") from e
        return cls(data_storage, data_config, data_timeline, storage, config, Timeline.load(storage, config))

    # -- which writes count ------------------------------------------------------------------------------

    @property
    def available_partitions(self) -> tuple[str, ...]:
        """The partitions the data table declares built (``hoodie.table.metadata.partitions``)."""
        return self.data_config.metadata_partitions

    def valid_instant(self, time: str) -> bool:
        """Whether records the metadata table wrote at ``time`` count (Hudi's valid instants): the instant
        completed on the metadata table and is not pending on the data table. A data-table write completes
        its metadata deltacommit first: one that died in between leaves the data instant pending, and its
        files must stay invisible. Instants the data table does not have (archived ones, the metadata
        table's compactions and initialisations, indexing builds) count."""
        if not self.timeline.is_committed(time):
            return False
        data = self.data_timeline.get(time)
        return data is None or data.state is State.COMPLETED

    # -- slices and records ------------------------------------------------------------------------------

    def file_slices(self, partition: str) -> list[FileSlice]:
        """The latest slice of each file group of a metadata-table partition (paths relative to the
        metadata table), merging a slice whose compaction is pending into the one before it."""
        listing = classify_listing(
            (f for f in self.storage.list(partition, recursive=True)), base_extension="hfile"
        )
        pending = self._pending_compactions()
        groups = build_file_groups(
            listing,
            self.timeline,
            table_version=self.config.table_version,
            pending_compactions={g: t for g, t in pending.items() if g.partition_path == partition},
        )
        return snapshot_slices(groups, set())

    def _pending_compactions(self) -> dict[FileGroupId, str]:
        out: dict[FileGroupId, str] = {}
        for instant in self.timeline.pending():
            if instant.action != COMPACTION:
                continue
            plan = decode_compaction_plan(
                self.storage.read(self.timeline.file_of(instant.time, State.REQUESTED))
            )
            for op in plan.operations:
                out[FileGroupId(op.partition_path, op.file_id)] = instant.time
        return out

    def read_slice(self, file_slice: FileSlice) -> dict[str, MetadataRecord]:
        """Every live key of one slice, merged base then logs in log order."""
        records: dict[str, MetadataRecord] = {}
        base = file_slice.base_file_path
        if base is not None:
            with HFileReader.open(self.storage, base) as reader:
                schema = reader.file_info.get(b"schema")
                if schema is None:
                    raise CorruptMetadataTable(f"{self.storage.full_path(base)}: no schema in the HFile")
                pairs = [(k.decode("utf-8"), v) for k, v in reader]
            for record in decode_records(schema.decode("utf-8"), pairs, where=self.storage.full_path(base)):
                records[record["key"]] = combine(None, record)
        if file_slice.log_files:
            scan = scan_log_files(
                self.storage,
                file_slice.log_file_paths,
                include_instant=self.valid_instant,
                metadata_table=True,
            )
            for batch in scan.batches:
                where = f"{self.storage.full_path(batch.log_file)} at offset {batch.block_offset}"
                if batch.kind == "delete":
                    for key in batch.table.column("_hoodie_record_key").to_pylist():
                        records.pop(key, None)
                    continue
                metadata = batch.table.schema.metadata or {}
                schema_json = metadata[AVRO_SCHEMA_METADATA].decode("utf-8")
                keys = batch.table.column("key").to_pylist()
                entries = zip(keys, batch.table.column("value").to_pylist(), strict=True)
                for record in decode_records(schema_json, entries, where=where):
                    records[record["key"]] = combine(records.get(record["key"]), record)
        return records

    def read_partition(self, partition: str) -> dict[str, MetadataRecord]:
        """Every live key of a metadata-table partition (``files``, ``column_stats``, ...)."""
        out: dict[str, MetadataRecord] = {}
        for file_slice in self.file_slices(partition):
            for key, record in self.read_slice(file_slice).items():
                if key in out:
                    raise CorruptMetadataTable(
                        f"{self.storage.uri}/{partition}: key {key!r} is in two file groups"
                    )
                out[key] = record
        return out

    # -- the file listing --------------------------------------------------------------------------------

    def file_listing(self) -> dict[str, dict[str, int]]:
        """The data table's files as the ``files`` partition lists them: partition path -> {name: size}.
        Raises :class:`CorruptMetadataTable` when the partition list and the partition records disagree."""
        records = self.read_partition(MetadataPartition.FILES)
        listed = records.get(ALL_PARTITIONS_KEY)
        if listed is None:
            if records:
                raise CorruptMetadataTable(
                    f"{self.storage.uri}: the files partition has no {ALL_PARTITIONS_KEY}"
                )
            return {}
        out: dict[str, dict[str, int]] = {}
        for key in file_list(listed):
            record = records.get(key)
            out[partition_path_of_key(key)] = file_list(record) if record is not None else {}
        return out

    def partition_paths(self) -> list[str]:
        """The data table's partition paths, as the ``files`` partition lists them."""
        return sorted(self.file_listing())


def storage_listing(
    storage: Storage, timeline: Timeline, partitions: Iterable[str] | None = None
) -> dict[str, dict[str, int]]:
    """The data table's committed base and log files on storage, as :meth:`MetadataTable.file_listing`
    gives them: partition path -> {file name: size}. Files of writes that did not complete are left out
    (for v6 log files, which name their slice's base instant rather than their write, files whose base
    instant is not on the timeline at all)."""
    version = TableConfig.load(storage).table_version
    files = classify_listing(storage.list("", recursive=True))
    out: dict[str, dict[str, int]] = {}
    wanted = set(partitions) if partitions is not None else None
    for f in files:
        if wanted is not None and f.partition_path not in wanted:
            continue
        if f.base is not None:
            committed = timeline.is_committed(f.base.instant_time)
        elif f.log is not None:
            instant = f.log.instant
            committed = timeline.is_committed(instant) or (version < 8 and timeline.get(instant) is not None)
        else:
            committed = False
        if committed:
            out.setdefault(f.partition_path, {})[f.name] = f.size
    return out


def compare_listings(
    metadata: Mapping[str, Mapping[str, int]], storage: Mapping[str, Mapping[str, int]]
) -> list[str]:
    """What differs between two file listings (empty when they agree), one message per difference."""
    problems: list[str] = []
    for partition in sorted(set(metadata) | set(storage)):
        a, b = metadata.get(partition, {}), storage.get(partition, {})
        where = partition_key(partition)
        for name in sorted(set(a) - set(b)):
            problems.append(f"{where}/{name}: listed by the metadata table, not on storage")
        for name in sorted(set(b) - set(a)):
            problems.append(f"{where}/{name}: on storage, not listed by the metadata table")
        for name in sorted(set(a) & set(b)):
            if a[name] != b[name]:
                problems.append(f"{where}/{name}: size {a[name]} in the metadata table, {b[name]} on storage")
    return problems
