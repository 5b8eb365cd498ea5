"""Writing Hudi's metadata table: one deltacommit per data-table commit, at the same instant time.

A data-table commit that changes files (compaction, clustering, clean) updates the metadata table in the same
critical section, under the table lock, before it completes its own instant (:func:`commit_metadata_update`):

1. A metadata-table instant of the same time left by an earlier attempt (the data commit died after it) is
   removed first, with the log files its commit metadata names (:meth:`MetadataWriter.remove_instant`).
2. ``<t>.deltacommit.requested``, then ``.inflight`` holding the commit metadata with every log file it will
   write, so that a crash leaves a trail to remove.
3. Per metadata-table partition, the records go to their file groups (Hudi's key hash) as one HFile data block
   per file group, in a new log file of the group's latest slice (v6: the slice's base instant, the next log
   version; v8+: the deltacommit's own instant).
4. The deltacommit completes. Readers count its records only once the data instant completes too
   (:meth:`~hoodie.metadata.reader.MetadataTable.valid_instant`).

After the data instant completed, :func:`compact_if_due` compacts the metadata table when Hudi's trigger
says so (``hoodie.metadata.compact.max.delta.commits`` deltacommits since the last compaction).
"""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import fastavro
import pyarrow as pa

from hoodie.avro.encoder import encode_avro_records
from hoodie.bloom import DYNAMIC_V0, new_bloom_filter
from hoodie.config import METADATA_PARTITIONS_INFLIGHT, TableConfig
from hoodie.errors import CommitConflict, CorruptMetadataTable, HoodieError
from hoodie.failpoints import failpoint
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId, FileSlice
from hoodie.file_group.fs_view import build_file_groups, classify_listing
from hoodie.hfile.reader import HFileReader
from hoodie.hfile.trailer import Compression
from hoodie.hfile.writer import HFileWriter
from hoodie.lock import LockProvider, held
from hoodie.log.block import BlockType, HeaderKey
from hoodie.log.log_file import LogFile
from hoodie.log.writer import encode_delete_block, frame_block
from hoodie.metadata.keys import file_group_indexes
from hoodie.metadata.reader import METADATA_TABLE_PATH, MetadataTable
from hoodie.metadata.records import (
    ALL_PARTITIONS_KEY,
    MetadataPartition,
    MetadataRecord,
    RecordType,
    combine,
    is_deleted,
    partition_key,
)
from hoodie.schema import compile_avro_schema
from hoodie.storage import Storage
from hoodie.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    INDEXING,
    REPLACE_COMMIT,
    Instant,
    State,
)
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    CleanerPlan,
    CleanFileInfo,
    CleanMetadata,
    CleanPartitionMetadata,
    CommitMetadata,
    CompactionOperation,
    CompactionPlan,
    WriteStat,
    decode_commit_metadata,
    encode_commit_metadata,
    encode_compaction_plan,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter

__all__ = [
    "UNSUPPORTED_PARTITION_PREFIXES",
    "MetadataTableNotSupported",
    "MetadataUpdate",
    "MetadataWriter",
]

logger = logging.getLogger(__name__)

#: Write token of the metadata table's log files (Hudi's "unknown task" token).
WRITE_TOKEN = "1-0-1"
#: The comparator Hudi names in the metadata table's HFiles.
HUDI_KV_COMPARATOR = "org.apache.hudi.io.storage.HoodieHBaseKVComparator"
#: Metadata-table partitions hoodied cannot keep up to date (expression indexes evaluate user functions).
UNSUPPORTED_PARTITION_PREFIXES = (MetadataPartition.EXPRESSION_INDEX_PREFIX,)
META_FIELDS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
_FILE_GROUP_INDEX = re.compile(r"-(\d{4})-\d+$")


class MetadataTableNotSupported(HoodieError):
    """The table's metadata table has a partition hoodied cannot keep consistent with the commit at hand."""


@dataclass
class MetadataUpdate:
    """What one data-table instant changes in the metadata table.

    ``files_added``: partition path -> {file name: size} of files the instant wrote; ``files_deleted``:
    partition path -> names it deleted (a clean); ``partitions_deleted``: partitions whose folders it deleted
    (a clean after a ``DELETE_PARTITION``); ``records``: records of the other metadata-table partitions
    (column statistics, bloom filters, record index...), by metadata-table partition.
    """

    instant_time: str
    files_added: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    files_deleted: Mapping[str, Sequence[str]] = field(default_factory=dict)
    records: Mapping[str, Sequence[MetadataRecord]] = field(default_factory=dict)
    deleted_keys: Mapping[str, Sequence[str]] = field(default_factory=dict)
    partitions_deleted: Sequence[str] = ()

    def files_records(self) -> list[MetadataRecord]:
        """The ``files`` partition's records: one file list per partition touched, and the partition list
        of the partitions that gained files and of those deleted (tombstones, as Hudi's
        ``createPartitionListRecord(partitions, true)``)."""
        out: list[MetadataRecord] = []
        partitions = sorted(set(self.files_added) | set(self.files_deleted))
        for partition in partitions:
            entries: dict[str, dict[str, Any]] = {}
            for name in self.files_deleted.get(partition, ()):
                entries[name] = {"size": 0, "isDeleted": True}
            for name, size in self.files_added.get(partition, {}).items():
                entries[name] = {"size": int(size), "isDeleted": False}
            out.append(
                metadata_record(partition_key(partition), RecordType.FILE_LIST, filesystemMetadata=entries)
            )
        added = sorted(p for p in self.files_added if self.files_added[p])
        if added:
            listing = {partition_key(p): {"size": 0, "isDeleted": False} for p in added}
            out.append(
                metadata_record(ALL_PARTITIONS_KEY, RecordType.ALL_PARTITIONS, filesystemMetadata=listing)
            )
        if self.partitions_deleted:
            gone = {partition_key(p): {"size": 0, "isDeleted": True} for p in sorted(self.partitions_deleted)}
            out.append(
                metadata_record(ALL_PARTITIONS_KEY, RecordType.ALL_PARTITIONS, filesystemMetadata=gone)
            )
        return out

    def all_records(self) -> dict[str, list[MetadataRecord]]:
        out = {MetadataPartition.FILES: self.files_records()}
        for partition, records in self.records.items():
            if records:
                out.setdefault(partition, []).extend(records)
        return {p: r for p, r in out.items() if r}


def metadata_record(key: str, kind: RecordType, **payload: Any) -> MetadataRecord:
    """A ``HoodieMetadataRecord`` of ``kind`` under ``key``, every payload but the given ones null."""
    record: MetadataRecord = dict.fromkeys(META_FIELDS)
    record.update(
        key=key,
        type=int(kind),
        filesystemMetadata=None,
        BloomFilterMetadata=None,
        ColumnStatsMetadata=None,
        recordIndexMetadata=None,
        SecondaryIndexMetadata=None,
    )
    record.update(payload)
    return record


class MetadataWriter:
    """Writes deltacommits (and compactions) to the metadata table of one data table. The caller holds the
    data table's lock for every method (the metadata table has no lock of its own)."""

    def __init__(
        self,
        mdt: MetadataTable,
        lock: LockProvider,
        *,
        time_generator: InstantTimeGenerator | None = None,
    ) -> None:
        self.mdt = mdt
        self.storage: Storage = mdt.storage
        self.lock = lock
        self.timeline_writer = TimelineWriter(mdt.storage, mdt.config, lock, time_generator=time_generator)
        self.version = mdt.config.table_version

    # -- what the metadata table holds -------------------------------------------------------------------

    @staticmethod
    def partitions_of(config: TableConfig) -> list[str]:
        """The metadata-table partitions a commit must keep up to date: the built and the being-built ones."""
        inflight = config.props.get(METADATA_PARTITIONS_INFLIGHT, "").split(",")
        return sorted({p.strip() for p in [*config.metadata_partitions, *inflight] if p.strip()})

    def partitions_to_update(self) -> list[str]:
        return self.partitions_of(self.mdt.data_config)

    def metadata_partitions(self) -> list[str]:
        """The metadata table's partitions on storage (folders holding files)."""
        return sorted(
            info.name
            for info in self.storage.list("")
            if info.is_dir and not info.name.startswith(".") and self.storage.list(info.name)
        )

    def schema_json(self) -> str:
        """The Avro schema the metadata table's records are written with: the one Hudi wrote in the
        table's own files (with the meta fields), so readers of that Hudi version decode ours alike; for a
        metadata table without a base file yet, the table version's (:func:`default_schema_json`)."""
        files = classify_listing(self.storage.list(MetadataPartition.FILES), base_extension="hfile")
        for f in sorted(files, key=lambda d: d.name, reverse=True):
            if f.base is not None:
                with HFileReader.open(self.storage, f.path) as reader:
                    schema = reader.file_info.get(b"schema")
                if schema:
                    return schema.decode("utf-8")
        return default_schema_json(self.version)

    def file_groups(self, partition: str) -> dict[int, str]:
        """The file group ids of a metadata-table partition by their index (``files-0000-0`` -> 0)."""
        ids: set[str] = set()
        for f in classify_listing(self.storage.list(partition), base_extension="hfile"):
            file_id = f.base.file_id if f.base is not None else f.log.file_id if f.log is not None else None
            if file_id:
                ids.add(file_id)
        out: dict[int, str] = {}
        for file_id in ids:
            match = _FILE_GROUP_INDEX.search(file_id)
            if match is None:
                raise CorruptMetadataTable(
                    f"{self.storage.uri}/{partition}: unexpected file group {file_id!r}"
                )
            out[int(match.group(1))] = file_id
        if not out or sorted(out) != list(range(len(out))):
            raise CorruptMetadataTable(
                f"{self.storage.uri}/{partition}: file groups {sorted(ids)} are not numbered 0..n-1"
            )
        return out

    # -- deltacommits -------------------------------------------------------------------------------------

    def remove_instant(self, time: str) -> bool:
        """Remove what an earlier attempt at ``time`` left on the metadata table (its timeline files and the
        log files its commit metadata names); returns whether there was anything. The data instant is not
        complete (the caller commits it next), so no reader counts these records."""
        timeline = self.mdt.timeline
        instant = timeline.get(time)
        if instant is None:
            return False
        if instant.action != DELTA_COMMIT:
            raise CorruptMetadataTable(
                f"{self.storage.uri}: metadata-table instant {instant} has the time of a data-table commit"
            )
        paths: set[str] = set()
        for state in (State.COMPLETED, State.INFLIGHT):
            try:
                data = self.storage.read(timeline.file_of(time, state))
            except (KeyError, FileNotFoundError):
                continue
            if data:
                md = decode_commit_metadata(data, table_version=self.version, action=DELTA_COMMIT)
                paths.update(md.written_file_paths)
        if instant.state is State.COMPLETED:
            self.storage.delete(timeline.file_of(time, State.COMPLETED))
        for path in sorted(paths):
            self.storage.delete(path)
        self.timeline_writer.delete_pending(Instant(time, DELTA_COMMIT, State.INFLIGHT))
        logger.info(
            "metadata table of %s: removed the earlier attempt at %s", self.mdt.data_storage.uri, time
        )
        return True

    def write_deltacommit(
        self, update: MetadataUpdate, *, replace_completed: bool = True, completion_time: str | None = None
    ) -> Instant:
        """Write ``update`` as the metadata table's deltacommit at its instant time and complete it. What an
        earlier attempt at that time left is removed first; without ``replace_completed``, a *completed*
        deltacommit there is not (:class:`CommitConflict`): a decided completion's roll forward wrote it
        (:mod:`hoodie.write.decision`), and removing it would leave the data instant's records out.
        ``completion_time``: the one a decision recorded (v8+), so every writer of it names the completed
        file alike and only the first create succeeds."""
        time = update.instant_time
        if not replace_completed and self.mdt.timeline.is_completed(time):
            raise CommitConflict(f"the metadata table's deltacommit {time} is completed already")
        by_partition = update.all_records()
        wanted = set(self.partitions_to_update())
        for partition in sorted(by_partition):
            if partition not in wanted:
                del by_partition[partition]  # not built on this table: nothing to keep up to date
        schema_json = self.schema_json()
        parsed = fastavro.parse_schema(json.loads(schema_json))
        deletes = {p: list(keys) for p, keys in update.deleted_keys.items() if keys and p in wanted}
        plan: list[tuple[str, str, bytes, int, int]] = []  # partition, file group, blocks, records, index
        for partition in sorted(set(by_partition) | set(deletes)):
            groups = self.file_groups(partition)
            routed: dict[int, dict[str, MetadataRecord]] = {}
            records = by_partition.get(partition, [])
            indexes = file_group_indexes([r["key"] for r in records], len(groups)).tolist()
            for record, index in zip(records, indexes, strict=True):
                group = routed.setdefault(index, {})
                key = record["key"]
                # One key twice in an update (the shares of a partition built by two tasks): merged as the
                # two versions would be (file lists united, loose statistics widened), not overwritten.
                group[key] = combine(group[key], record) if key in group else record
            gone: dict[int, list[str]] = {}
            keys = deletes.get(partition, [])
            for key, index in zip(keys, file_group_indexes(keys, len(groups)).tolist(), strict=True):
                gone.setdefault(index, []).append(key)
            for index in sorted(set(routed) | set(gone)):
                blocks = b""
                if gone.get(index):
                    blocks += delete_block(time, partition, gone[index], self.version)
                keyed = routed.get(index, {})
                if keyed:
                    blocks += self._hfile_block(time, schema_json, parsed, keyed)
                count = len(keyed) + len(gone.get(index, ()))
                plan.append((partition, groups[index], blocks, count, index))
        slice_of = self._slice_instants({p for p, *_ in plan}) if self.version < 8 else {}
        self.remove_instant(time)
        # Name every log file first: the inflight file lists them all, the trail remove_instant follows.
        files: list[tuple[str, str, bytes, int]] = []  # partition, path, block, records
        stats: list[WriteStat] = []
        for partition, file_id, block, count, _ in plan:
            base_instant = slice_of.get(FileGroupId(partition, file_id), time)
            version = _next_log_version(self.storage, partition, file_id, base_instant)
            log = LogFile(file_id, base_instant, version, WRITE_TOKEN)
            path = f"{partition}/{log.file_name}"
            files.append((partition, path, block, count))
            stats.append(
                WriteStat(
                    file_id=file_id,
                    path=path,
                    partition_path=partition,
                    prev_commit=base_instant,
                    num_writes=count,
                    num_deletes=0,
                    num_update_writes=count,
                    num_inserts=0,
                    total_write_bytes=len(block),
                    total_write_errors=0,
                    file_size_in_bytes=len(block),
                    log_version=version,
                    log_offset=0,
                    base_file="",
                    log_files=(log.file_name,),
                )
            )
        metadata = self._commit_metadata(stats, schema_json)
        requested = self.timeline_writer.request(DELTA_COMMIT, time)
        inflight = self.timeline_writer.start(requested, metadata)
        for _, path, block, _ in files:
            self.storage.create(path, block)
        failpoint("metadata.before_completed_file")
        done = self.timeline_writer.complete(inflight, metadata, completion_time=completion_time)
        logger.info(
            "metadata table of %s: deltacommit %s, %d record(s) in %d log file(s)",
            self.mdt.data_storage.uri,
            time,
            sum(c for *_, c in files),
            len(files),
        )
        return done

    def _commit_metadata(self, stats: Sequence[WriteStat], schema_json: str) -> CommitMetadata:
        by_partition: dict[str, list[WriteStat]] = {}
        for s in stats:
            by_partition.setdefault(s.partition_path or "", []).append(s)
        return CommitMetadata(
            partition_to_write_stats={p: tuple(v) for p, v in by_partition.items()},
            extra_metadata={"schema": _without_meta_fields(schema_json)},
            operation_type="UPSERT_PREPPED",
            compacted=False,
        )

    def _slice_instants(self, partitions: Iterable[str]) -> dict[FileGroupId, str]:
        """v6: the base instant of each file group's latest slice (its log files are named with it)."""
        out: dict[FileGroupId, str] = {}
        for partition in partitions:
            listing = classify_listing(self.storage.list(partition), base_extension="hfile")
            groups = build_file_groups(
                listing, self.mdt.timeline, table_version=self.version, pending_compactions={}
            )
            for gid, group in groups.items():
                ordered = group.ordered()
                if ordered:
                    out[gid] = ordered[-1].base_instant
        return out

    def _hfile_block(
        self, time: str, schema_json: str, parsed: Any, records: Mapping[str, MetadataRecord]
    ) -> bytes:
        writer = HFileWriter(
            compression=Compression.GZ,
            comparator=HUDI_KV_COMPARATOR,
            file_info={b"schema": schema_json.encode("utf-8")},
        )
        values = encode_records(records, schema_json, parsed)
        for key in sorted(records, key=lambda k: k.encode("utf-8")):
            writer.append(key.encode("utf-8"), values[key])
        header = {int(HeaderKey.INSTANT_TIME): time, int(HeaderKey.SCHEMA): schema_json}
        return frame_block(BlockType.HFILE_DATA, header, writer.finish())


def default_schema_json(table_version: int) -> str:
    """The ``HoodieMetadataRecord`` schema Hudi writes for ``table_version`` with the five meta fields first,
    as its metadata writer embeds it (the project's copy in ``hoodie/avro/schemas``)."""
    name = f"HoodieMetadata.{'v6' if table_version == 6 else 'v8' if table_version == 8 else 'v9'}.avsc"
    schema = json.loads(resources.files("hoodie.avro").joinpath("schemas", name).read_text(encoding="utf-8"))
    meta = [{"name": n, "type": ["null", "string"], "doc": "", "default": None} for n in META_FIELDS]
    return json.dumps({**schema, "fields": [*meta, *schema["fields"]]}, separators=(",", ":"))


def delete_block(time: str, partition: str, keys: Sequence[str], table_version: int) -> bytes:
    """A delete block of metadata-table keys as Hudi writes one (partition path: the metadata partition's
    name, ordering value 0)."""
    return encode_delete_block(
        pa.array(keys, pa.string()),
        pa.array([partition] * len(keys), pa.string()),
        pa.array([0] * len(keys), pa.int32()),
        instant_time=time,
        table_version=table_version,
    )


def _next_log_version(storage: Storage, partition: str, file_id: str, instant: str) -> int:
    highest = 0
    for info in storage.list(partition):
        log = LogFile.try_parse(info.name)
        if log is not None and log.file_id == file_id and log.instant == instant:
            highest = max(highest, log.version)
    return highest + 1


#: Record types encoded column-wise (:func:`encode_records`): plain records, many of them (one per data key).
_COLUMNAR = {RecordType.RECORD_INDEX: "recordIndexMetadata"}


def encode_records(records: Mapping[str, MetadataRecord], schema_json: str, parsed: Any) -> dict[str, bytes]:
    """The Avro binary of every record (see :func:`encode_record`), by key. Record-index records, one per
    data record, are encoded column-wise in Arrow: with every other payload null, the schema is cut down to
    the one payload (a null union branch is the byte 0 whatever the union), which gives the same bytes."""
    out: dict[str, bytes] = {}
    columnar: dict[int, list[str]] = {}
    for key, record in records.items():
        kind = record.get("type")
        if kind in _COLUMNAR and all(record.get(f) is None for f in META_FIELDS):
            columnar.setdefault(int(kind), []).append(key)
        else:
            out[key] = encode_record(record, parsed)
    for kind, keys in columnar.items():
        payload = _COLUMNAR[RecordType(kind)]
        reduced = _schema_with_only(schema_json, payload)
        payloads = [records[k][payload] for k in keys]
        struct_type = _payload_arrow_type(schema_json, payload)
        table = pa.table(
            {
                "key": pa.array([""] * len(keys), pa.string()),
                "type": pa.array([kind] * len(keys), pa.int32()),
                payload: pa.array(payloads, struct_type),
            }
        )
        out.update(zip(keys, encode_avro_records(table, reduced), strict=True))
    return out


@lru_cache(maxsize=16)
def _schema_with_only(schema_json: str, payload: str) -> str:
    schema = json.loads(schema_json)
    fields = [
        {**f, "type": ["null"]}
        if f["name"] != payload and isinstance(f["type"], list) and f["type"][:1] == ["null"]
        else f
        for f in schema["fields"]
    ]
    return json.dumps({**schema, "fields": fields}, separators=(",", ":"))


@lru_cache(maxsize=16)
def _payload_arrow_type(schema_json: str, payload: str) -> pa.DataType:
    arrow = compile_avro_schema(_schema_with_only(schema_json, payload)).arrow_schema
    return arrow.field(payload).type


def encode_record(record: MetadataRecord, parsed: Any) -> bytes:
    """The Avro binary of a metadata record as Hudi stores it in an HFile: the key field left empty (the
    HFile key holds it) and the meta fields null."""
    value = dict(record)
    value["key"] = ""
    for name in META_FIELDS:
        value[name] = None
    out = io.BytesIO()
    fastavro.schemaless_writer(out, parsed, value)
    return out.getvalue()


def _without_meta_fields(schema_json: str) -> str:
    schema = json.loads(schema_json)
    fields = [f for f in schema.get("fields", []) if f.get("name") not in META_FIELDS]
    return json.dumps({**schema, "fields": fields}, separators=(",", ":"))


# -- compaction ----------------------------------------------------------------------------------------------

#: ``hoodie.metadata.compact.max.delta.commits``: deltacommits after which the metadata table is compacted.
COMPACT_MAX_DELTA_COMMITS = "hoodie.metadata.compact.max.delta.commits"
COMPACT_MAX_DELTA_COMMITS_DEFAULT = 10
#: The bloom filter in a metadata base HFile: DYNAMIC_V0 sized for 60000 keys at fpp 1e-9, as Hudi's.
BLOOM_ENTRIES = 60_000
BLOOM_FPP = 1e-9
BLOOM_MAX_ENTRIES = 100_000


@dataclass(frozen=True)
class MetadataCompaction:
    """A metadata-table compaction that ran: its instant, and per file group the records in its new base."""

    instant: Instant
    records: Mapping[str, int]


def deltacommits_since_compaction(timeline: Timeline) -> int:
    """Completed deltacommits after the latest completed compaction (a ``commit`` on the metadata table)."""
    count = 0
    for instant in reversed(timeline.completed()):
        if instant.action == COMMIT:
            break
        if instant.action == DELTA_COMMIT:
            count += 1
    return count


#: Pending data-table actions whose metadata records, written late under an older time, a metadata-table
#: compaction in between would let override newer ones (:func:`compaction_blocker`).
_LATE_WRITERS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING})


def compaction_blocker(mdt: MetadataTable) -> str | None:
    """Why the metadata table must not be compacted now, or None.

    - A data-table write still pending whose metadata deltacommit exists would have its records left behind
      in the old slice (they do not count yet), and lost from every reader's view once it completes.
    - A pending indexing, or a pending write (commit, deltacommit, replacecommit, clustering) older than the
      latest metadata deltacommit, will write its deltacommit later under its older time. Readers merge
      records by instant time but slice by completion time: after a compaction that deltacommit lands on
      top of the new base file, whose records already took in the newer deltacommits, and would undo what
      they did (the chaos campaign found a record index holding deleted keys: an indexing's built records
      arrived after a compaction had applied the deletes). Hudi does not compact its metadata table while a
      data-table instant older than its latest deltacommit is pending either."""
    latest = max((i.time for i in mdt.timeline.completed() if i.action == DELTA_COMMIT), default="")
    for instant in mdt.data_timeline.pending():
        if mdt.timeline.get(instant.time) is not None:
            return f"data-table instant {instant} is pending and already wrote to the metadata table"
        if instant.action == INDEXING:
            return f"data-table indexing {instant.time} is pending: its records come later"
        if instant.action in _LATE_WRITERS and instant.time < latest:
            return (
                f"data-table {instant.action} {instant.time} is pending and older than deltacommit {latest}"
            )
    for instant in mdt.timeline.pending():
        return f"metadata-table instant {instant} is pending"
    return None


def compact(writer: MetadataWriter, time: str) -> MetadataCompaction:
    """Compact every file group of the metadata table at instant ``time``: its latest slice's live records
    (merged base and logs, deleted ones dropped) become a new base HFile."""
    mdt = writer.mdt
    storage = writer.storage
    schema_json = writer.schema_json()
    parsed = fastavro.parse_schema(json.loads(schema_json))
    operations: list[CompactionOperation] = []
    outputs: list[tuple[FileSlice, dict[str, MetadataRecord]]] = []
    for partition in writer.metadata_partitions():
        for file_slice in mdt.file_slices(partition):
            records = {k: r for k, r in mdt.read_slice(file_slice).items() if not is_deleted(r)}
            operations.append(
                CompactionOperation(
                    base_instant_time=file_slice.base_instant,
                    file_id=file_slice.file_id,
                    partition_path=partition,
                    data_file_path=file_slice.base_file.file_name if file_slice.base_file else None,
                    delta_file_paths=tuple(lf.file_name for lf in file_slice.log_files),
                    metrics={"TOTAL_LOG_FILES": float(len(file_slice.log_files))},
                )
            )
            outputs.append((file_slice, records))
    plan = CompactionPlan(operations=tuple(operations))
    tw = writer.timeline_writer
    requested = tw.request(COMPACTION, time, encode_compaction_plan(plan, table_version=writer.version))
    inflight = tw.start(requested)
    stats: list[WriteStat] = []
    counts: dict[str, int] = {}
    for file_slice, records in outputs:
        name = BaseFile(file_slice.file_id, WRITE_TOKEN, time, "hfile").file_name
        path = f"{file_slice.partition_path}/{name}"
        data = base_hfile(records, schema_json, parsed)
        storage.create(path, data, overwrite=True)  # an earlier attempt's file of the same name is void
        counts[file_slice.file_id] = len(records)
        stats.append(
            WriteStat(
                file_id=file_slice.file_id,
                path=path,
                partition_path=file_slice.partition_path,
                prev_commit=file_slice.base_instant,
                num_writes=len(records),
                num_deletes=0,
                num_update_writes=0,
                num_inserts=len(records),
                total_write_bytes=len(data),
                total_write_errors=0,
                file_size_in_bytes=len(data),
                total_log_files_compacted=len(file_slice.log_files),
                total_log_size_compacted=sum(file_slice.log_file_sizes),
            )
        )
    by_partition: dict[str, list[WriteStat]] = {}
    for s in stats:
        by_partition.setdefault(s.partition_path or "", []).append(s)
    metadata = CommitMetadata(
        partition_to_write_stats={p: tuple(v) for p, v in by_partition.items()},
        extra_metadata={"schema": _without_meta_fields(schema_json)},
        operation_type="COMPACT",
        compacted=True,
    )
    done = tw.complete(
        inflight, encode_commit_metadata(metadata, table_version=writer.version, action=COMMIT)
    )
    logger.info(
        "metadata table of %s: compaction %s wrote %d base file(s), %d record(s)",
        mdt.data_storage.uri,
        time,
        len(stats),
        sum(counts.values()),
    )
    return MetadataCompaction(done, counts)


def base_hfile(records: Mapping[str, MetadataRecord], schema_json: str, parsed: Any) -> bytes:
    """A metadata base HFile as Hudi writes one: GZ blocks, the records' schema, the min and max key and a
    DYNAMIC_V0 bloom filter of the keys (meta block ``bloomFilter``, Base64 text)."""
    keys = sorted(records, key=lambda k: k.encode("utf-8"))
    bloom = new_bloom_filter(DYNAMIC_V0, BLOOM_ENTRIES, BLOOM_FPP, BLOOM_MAX_ENTRIES)
    bloom.add_keys(keys)
    info = {b"schema": schema_json.encode("utf-8"), b"bloomFilterTypeCode": DYNAMIC_V0.encode("ascii")}
    if keys:
        info[b"minRecordKey"] = keys[0].encode("utf-8")
        info[b"maxRecordKey"] = keys[-1].encode("utf-8")
    writer = HFileWriter(compression=Compression.GZ, comparator=HUDI_KV_COMPARATOR, file_info=info)
    values = encode_records(records, schema_json, parsed)
    for key in keys:
        writer.append(key.encode("utf-8"), values[key])
    writer.add_meta_block(b"bloomFilter", bloom.serialize().encode("ascii"))
    return writer.finish()


# -- entry points for the table services -------------------------------------------------------------------


def open_metadata_table(storage: Storage, config: TableConfig) -> MetadataTable | None:
    """The table's metadata table, or None when it has none (no partition built and no folder)."""
    if not config.metadata_partitions and not storage.exists(
        f"{METADATA_TABLE_PATH}/.hoodie/hoodie.properties"
    ):
        return None
    return MetadataTable.load(storage, config, Timeline.load(storage, config))


def metadata_completion_time(
    storage: Storage,
    config: TableConfig,
    lock: LockProvider,
    time_generator: InstantTimeGenerator | None = None,
) -> str | None:
    """The completion time a metadata-table deltacommit completing now gets (the caller holds the table
    lock), for a decision to record ahead of the write (:mod:`hoodie.write.decision`); None when the table has
    no metadata table or its timeline's file names carry no completion time (v6)."""
    mdt = open_metadata_table(storage, config)
    if mdt is None or mdt.config.table_version < 8:
        return None
    return (time_generator or InstantTimeGenerator()).completion_time(mdt.storage, mdt.config, lock)


def check_supported(storage: Storage, config: TableConfig, service: str, *, writer: bool = False) -> None:
    """Raise :class:`MetadataTableNotSupported` when a partition of the table's metadata table (``config``
    lists them) is one hoodied cannot keep up to date for ``service``: it then refuses the service before
    touching the table. Table services change no record's values; a ``writer`` does, which secondary
    indexes would have to follow."""
    prefixes: tuple[str, ...] = UNSUPPORTED_PARTITION_PREFIXES
    if writer:
        prefixes = (*prefixes, MetadataPartition.SECONDARY_INDEX_PREFIX)
    bad = [p for p in MetadataWriter.partitions_of(config) if p.startswith(prefixes)]
    if bad:
        raise MetadataTableNotSupported(
            f"{storage.uri}: its metadata table has {', '.join(bad)}; hoodied cannot keep "
            f"{'these indexes' if writer else 'expression indexes'} up to date for a {service}, so it "
            "refuses it rather than leave them stale. Use Hudi for this table, or drop those indexes"
        )


def write_metadata_update(
    storage: Storage,
    config: TableConfig,
    lock: LockProvider,
    build: Callable[[TableConfig], MetadataUpdate],
    *,
    service: str,
    time_generator: InstantTimeGenerator | None = None,
    replace_completed: bool = True,
    completion_time: str | None = None,
) -> Instant | None:
    """Write the update ``build`` makes for the table config as it is now (``config``, read under the table
    lock: an index being built since the commit began is in it) to the table's metadata table, as the
    deltacommit of the update's instant. The caller holds the lock and completes the data instant right
    after. Returns None when the table has no metadata table. ``replace_completed`` and
    ``completion_time``: see :meth:`MetadataWriter.write_deltacommit`."""
    check_supported(storage, config, service, writer=service == "write")
    mdt = open_metadata_table(storage, config)
    if mdt is None:
        return None
    writer = MetadataWriter(mdt, lock, time_generator=time_generator)
    return writer.write_deltacommit(
        build(config), replace_completed=replace_completed, completion_time=completion_time
    )


def compact_if_due(
    storage: Storage,
    lock: LockProvider,
    *,
    max_delta_commits: int | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> MetadataCompaction | None:
    """Compact the table's metadata table when ``max_delta_commits`` (default: the table's
    ``hoodie.metadata.compact.max.delta.commits``) deltacommits completed since its last compaction and
    nothing pending stands in the way (:func:`compaction_blocker`); under the table lock."""
    with held(lock):
        config = TableConfig.load(storage)
        mdt = open_metadata_table(storage, config)
        if mdt is None:
            return None
        if max_delta_commits is None:
            raw = config.props.get(COMPACT_MAX_DELTA_COMMITS, "").strip()
            max_delta_commits = int(raw) if raw else COMPACT_MAX_DELTA_COMMITS_DEFAULT
        due = deltacommits_since_compaction(mdt.timeline)
        if due < max_delta_commits:
            return None
        blocker = compaction_blocker(mdt)
        if blocker is not None:
            logger.info("metadata table of %s: compaction due but put off: %s", storage.uri, blocker)
            return None
        writer = MetadataWriter(mdt, lock, time_generator=time_generator)
        data_writer = TimelineWriter(storage, config, lock, time_generator=time_generator)
        if mdt.config.table_version >= 8:
            time = data_writer.next_instant_time()
        else:
            latest = [i for i in mdt.timeline.completed() if i.action == DELTA_COMMIT][-1]
            time = latest.time + "001"  # Hudi 0.x: the latest deltacommit's time with a suffix
        done = compact(writer, time)
        # Then the slices the compaction left behind go (Hudi cleans its metadata table after compacting).
        mdt = MetadataTable.load(storage, config, Timeline.load(storage, config))
        clean_time = data_writer.next_instant_time() if mdt.config.table_version >= 8 else time[:17] + "002"
        clean(MetadataWriter(mdt, lock, time_generator=time_generator), clean_time)
        return done


def maintain_metadata_table(
    storage: Storage, lock: LockProvider, *, time_generator: InstantTimeGenerator | None = None
) -> MetadataCompaction | None:
    """After a data-table commit: compact the metadata table when due (:func:`compact_if_due`, with the
    table's ``hoodie.metadata.compact.max.delta.commits``). The commit already stands, so a failure here is
    logged, not raised: the metadata table stays correct, only uncompacted; the next commit tries again."""
    try:
        return compact_if_due(storage, lock, time_generator=time_generator)
    except (HoodieError, OSError, ValueError) as e:
        logger.error("metadata table of %s: compaction failed, left for the next commit: %s", storage.uri, e)
        return None


# -- clean --------------------------------------------------------------------------------------------------

#: File slices kept per metadata-table file group by its clean (the latest and the one before it, so that a
#: reader that listed the table just before a compaction still finds its files).
CLEAN_SLICES_RETAINED = 2
CLEAN_POLICY = "KEEP_LATEST_FILE_VERSIONS"


def clean(writer: MetadataWriter, time: str, *, slices_retained: int = CLEAN_SLICES_RETAINED) -> int:
    """Delete the files of the metadata table's file slices older than the latest ``slices_retained`` of
    each file group, as a ``clean`` instant of the metadata table at ``time``; returns the files deleted."""
    mdt = writer.mdt
    storage = writer.storage
    doomed: dict[str, list[str]] = {}
    for partition in writer.metadata_partitions():
        listing = classify_listing(storage.list(partition), base_extension="hfile")
        groups = build_file_groups(
            listing, mdt.timeline, table_version=writer.version, pending_compactions={}
        )
        for group in groups.values():
            ordered = group.ordered()
            with_base = [i for i, s in enumerate(ordered) if s.base_file is not None]
            if len(with_base) <= slices_retained:
                continue
            keep_from = with_base[-slices_retained]
            for s in ordered[:keep_from]:
                names = ([s.base_file.file_name] if s.base_file else []) + [
                    lf.file_name for lf in s.log_files
                ]
                doomed.setdefault(partition, []).extend(names)
    if not doomed:
        return 0
    base = storage.uri.rstrip("/")
    plan = CleanerPlan(
        policy=CLEAN_POLICY,
        file_paths_to_be_deleted_per_partition={
            p: tuple(CleanFileInfo(f"{base}/{p}/{n}", False) for n in names) for p, names in doomed.items()
        },
        last_completed_commit_timestamp=(mdt.timeline.completed() or [Instant(time, CLEAN, State.COMPLETED)])[
            -1
        ].time,
    )
    tw = writer.timeline_writer
    requested = tw.request(CLEAN, time, plan)
    inflight = tw.start(requested)
    partitions: dict[str, CleanPartitionMetadata] = {}
    total = 0
    for partition, names in doomed.items():
        for name in names:
            storage.delete(f"{partition}/{name}")
        total += len(names)
        partitions[partition] = CleanPartitionMetadata(
            partition_path=partition,
            policy=CLEAN_POLICY,
            delete_path_patterns=tuple(names),
            success_delete_files=tuple(names),
            failed_delete_files=(),
            is_partition_deleted=False,
        )
    tw.complete(
        inflight,
        CleanMetadata(
            start_clean_time=time,
            time_taken_in_millis=0,
            total_files_deleted=total,
            earliest_commit_to_retain="",
            last_completed_commit_timestamp=plan.last_completed_commit_timestamp,
            partition_metadata=partitions,
        ),
    )
    logger.info("metadata table of %s: clean %s deleted %d old file(s)", mdt.data_storage.uri, time, total)
    return total


def forget_metadata_instant(storage: Storage, lock: LockProvider, time: str) -> bool:
    """Remove what the data-table instant ``time`` wrote to the metadata table (a rollback of the instant
    does this before the instant itself goes: a completed metadata deltacommit whose data instant is gone
    would count again). Returns whether there was anything; a table without a metadata table has nothing."""
    with held(lock):
        mdt = open_metadata_table(storage, TableConfig.load(storage))
        if mdt is None:
            return False
        return MetadataWriter(mdt, lock).remove_instant(time)
