"""A table writer standing in for Hudi's ingestion writers: create tables, commit upsert, insert,
bulk_insert and delete.

Tests, benchmarks and the demo use it to make realistic tables that any Hudi reader accepts. Each batch is one
atomic commit, following what Hudi's Java client does with the bloom index:

1. Under the table lock a new instant time is taken; ``<t>.<action>.requested`` and ``.inflight`` are
   written (``commit`` on COW tables, ``deltacommit`` on MOR).
2. Rows get their record key and partition path (:mod:`hoodie.keygen`). ``upsert`` and ``delete`` reduce
   duplicates within the batch to one version (the greatest ordering value, ties to the later row; the last
   row without one); ``insert`` and ``bulk_insert`` keep them (Hudi's ``hoodie.combine.before.insert``
   defaults to false).
3. Tagging (``upsert`` and ``delete``): in each partition, the base file of every live file group is a
   candidate for the batch's keys when the key lies in its footer's ``[hoodie_min_record_key,
   hoodie_max_record_key]`` and its bloom filter may contain it; the candidates' record keys are then read to
   confirm; the keys of the group's committed log data blocks count too. Confirmed keys are updates of every
   file group holding them (and, for deletes, the records to delete); the rest are inserts. ``insert`` and
   ``bulk_insert`` look nothing up: every row is new, so a key the table holds already is stored again
   (tables that repeat a key come from these two).
   With the reject update strategy (``WriteConfig.update_strategy``, Hudi's
   ``hoodie.clustering.updates.strategy`` and its default ``SparkRejectUpdateStrategy``), a batch whose
   updates or deletes hit a file group under pending clustering fails here, before anything is written, with
   :class:`~hoodie.errors.ClusteringUpdateRejected` naming the groups and the clustering; its requested
   instant is removed. With the allow strategy (this writer's default) the batch goes on.
4. Updates and deletes: COW rewrites the file group's base file merged with them (new base file, same file
   id); MOR appends them to the file group as a log file (an Avro or Parquet data block, a delete block). A
   merge applies a key's new version to the first row of the key in the file, as Hudi's readers do
   (:mod:`hoodie.read.merge`).
5. Inserts: first into small files (base files under ``small_file_limit`` with no log files, outside any
   pending compaction or clustering, as Hudi's ``UpsertPartitioner`` leaves them out whatever the update
   strategy), rewriting them merged with the new rows (``upsert``) or with the new rows appended unchanged
   (``insert``: Hudi's concatenating handle, ``hoodie.merge.allow.duplicate.on.inserts`` true by default),
   then into new file groups of at most ``max_file_bytes`` worth of rows; ``bulk_insert`` writes new file
   groups only.
6. Every file is announced by a marker before it is written. Under the lock, the commit is checked against
   writes that completed since the batch took its view (optimistic concurrency: touching the same file group
   is a :class:`~hoodie.errors.WriteConflict`, and the instant stays inflight); with the reject strategy, a
   pending clustering whose plan names a group this write wrote is a conflict too, as Hudi 1.x writers count
   pending clusterings (``SimpleConcurrentFileWritesConflictResolutionStrategy``). Then the commit metadata
   (write stats, the writer's Avro schema) completes the instant and the markers are deleted.

A crash before step 6 leaves an inflight instant whose files no reader sees (they belong to no completed
instant): a later rollback removes them. Inserts are never tagged against log files, as with Hudi's bloom
index: our MOR inserts always go to base files.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import random
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.bloom import read_bloom_filter
from hoodie.clustering.update_strategy import UpdateStrategy, check_updates
from hoodie.config import RecordMergeMode, TableConfig
from hoodie.errors import (
    ClusteringUpdateRejected,
    FileAlreadyExists,
    HoodieError,
    SchemaMismatch,
    StorageError,
    WriteConflict,
)
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId, FileSlice
from hoodie.keygen import partition_paths, record_keys
from hoodie.lock import LockProvider, lock_for_table
from hoodie.log.block import BlockType, HeaderKey, decode_data_block, iter_blocks
from hoodie.log.log_file import LogFile
from hoodie.log.writer import (
    encode_avro_data_block,
    encode_delete_block,
    encode_parquet_data_block,
    write_log_file,
)
from hoodie.metadata.updates import update_for_write
from hoodie.metadata.writer import maintain_metadata_table, write_metadata_update
from hoodie.metadata_table import refuse_metadata_table
from hoodie.new_table import create_table_properties, new_table_properties
from hoodie.read.conform import conform_table
from hoodie.read.merge import IS_DELETED, Deletes, MergeInput, merge_records
from hoodie.schema import arrow_to_avro_schema, avro_to_arrow_schema
from hoodie.storage import Storage
from hoodie.table import META_COLUMNS, Table
from hoodie.timeline.instant import COMMIT, DELTA_COMMIT, Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import CommitMetadata, WriteStat, encode_commit_metadata
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.base_file import ParquetOptions, add_meta_columns, write_base_file
from hoodie.write.heartbeat import Heartbeat, HeartbeatConfig
from hoodie.write.markers import Markers
from hoodie.write.partition_metafile import write_partition_metafile
from hoodie.write.service_commit import left_for_later

RECORD_KEY = "_hoodie_record_key"
COMMIT_TIME = "_hoodie_commit_time"
FILE_NAME = "_hoodie_file_name"

#: Hudi's ``WriteOperationType`` names of the operations (recorded as the commit's ``operationType``).
Operation = Literal["INSERT", "BULK_INSERT", "UPSERT", "DELETE"]


@dataclass(frozen=True)
class WriteConfig:
    """How the writer sizes and encodes files (Hudi's keys and defaults in the comments)."""

    parquet: ParquetOptions = field(default_factory=ParquetOptions)
    log_format: Literal["avro", "parquet"] = "avro"  # hoodie.logfile.data.block.format
    small_file_limit: int = 104_857_600  # hoodie.parquet.small.file.limit
    record_size_estimate: int = 1024  # hoodie.copyonwrite.record.size.estimate
    max_log_file_bytes: int = 1_073_741_824  # hoodie.logfile.max.size
    lock_timeout_seconds: float = 60.0
    heartbeat: HeartbeatConfig = field(default_factory=HeartbeatConfig)  # hoodie.client.heartbeat.*
    #: hoodie.clustering.updates.strategy. Hudi's default is REJECT; this writer's is ALLOW, so that tests
    #: which do not care go on writing into groups under clustering (the clustering then aborts).
    update_strategy: UpdateStrategy = UpdateStrategy.ALLOW


@dataclass(frozen=True)
class CommitResult:
    """What one batch committed."""

    instant: Instant
    metadata: CommitMetadata

    @property
    def instant_time(self) -> str:
        return self.instant.time


@dataclass
class _Group:
    """A live file group of a partition as the writer sees it."""

    file_id: str
    latest: FileSlice  # the newest slice
    base: FileSlice | None  # the newest slice with a base file
    has_logs: bool
    log_base_instant: str  # the slice new v6 log files name: the newest one, or a pending compaction's
    busy: bool = False  # in a pending compaction or clustering: no small-file rewrite of its base file
    #: The log files from its newest base file on (their records belong to the group too).
    log_paths: tuple[str, ...] = ()

    @property
    def base_path(self) -> str | None:
        return self.base.base_file_path if self.base else None

    @property
    def base_size(self) -> int:
        return self.base.base_file_size if self.base else 0


@dataclass(frozen=True)
class _Tagged:
    """One partition of a batch with the file groups holding its keys (file id -> row indices)."""

    partition: str
    data: pa.Table
    keys: pa.Array
    delete_keys: pa.Array
    groups: list[_Group]
    hits: dict[str, np.ndarray]
    del_hits: dict[str, np.ndarray]


class TableWriter:
    """Writes batches to one Hudi table (COW or MOR, table version 6, 8 or 9)."""

    def __init__(
        self,
        storage: Storage,
        *,
        lock: LockProvider | None = None,
        config: WriteConfig | None = None,
        rng: random.Random | None = None,
        on_requested: Callable[[str], None] | None = None,
    ) -> None:
        self.storage = storage
        self.lock: LockProvider = lock or lock_for_table(storage, {})
        self.write_config = config or WriteConfig()
        self._rng = rng or random.Random()
        #: Told each commit's instant time once it is requested, before any file is written (a caller's
        #: ledger then knows which instant a batch became, whether or not the commit completes).
        self.on_requested = on_requested

    # -- creating and opening ------------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        uri: str,
        *,
        name: str,
        table_type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"],
        table_version: int,
        schema: pa.Schema,
        record_key_fields: Sequence[str],
        partition_fields: Sequence[str] = (),
        ordering_field: str | None = None,
        hive_style: bool = False,
        database: str = "",
        storage_options: Mapping[str, str] | None = None,
        lock: LockProvider | None = None,
        config: WriteConfig | None = None,
        rng: random.Random | None = None,
    ) -> TableWriter:
        """Create an empty table at ``uri`` (refused when one is there) and return its writer.

        The merge mode is event-time ordering when an ordering field is given, else commit-time ordering.
        """
        storage = Storage.for_uri(uri, storage_options)
        avro = arrow_to_avro_schema(schema, record_name=f"{name}_record", namespace=f"hoodie.{name}")
        missing = [f for f in (*record_key_fields, *partition_fields) if f not in schema.names]
        if ordering_field and ordering_field not in schema.names:
            missing.append(ordering_field)
        if missing:
            raise SchemaMismatch(f"key, partition or ordering field(s) {missing} are not in the schema")
        config_text = create_table_properties(
            new_table_properties(
                name=name,
                table_type=table_type,
                table_version=table_version,
                record_key_fields=tuple(record_key_fields),
                partition_fields=tuple(partition_fields),
                ordering_fields=(ordering_field,) if ordering_field else (),
                hive_style=hive_style,
                database_name=database,
                create_schema=_json(avro),
                merge_mode=(
                    RecordMergeMode.EVENT_TIME_ORDERING
                    if ordering_field
                    else RecordMergeMode.COMMIT_TIME_ORDERING
                ),
            )
        )
        table_config = TableConfig.from_text(config_text)
        if storage.exists(".hoodie/hoodie.properties"):
            raise FileAlreadyExists(f"a Hudi table already exists at {storage.uri}")
        storage.create(".hoodie/hoodie.properties", config_text.encode("utf-8"))
        timeline_folder = table_config.timeline_path
        storage.create(f"{timeline_folder}/.aux/.keep", b"", overwrite=True)
        return cls(storage, lock=lock, config=config, rng=rng)

    @classmethod
    def open(
        cls,
        uri: str,
        *,
        storage_options: Mapping[str, str] | None = None,
        lock: LockProvider | None = None,
        config: WriteConfig | None = None,
        rng: random.Random | None = None,
    ) -> TableWriter:
        storage = Storage.for_uri(uri, storage_options)
        TableConfig.load(storage)  # refuses what we cannot write, before any work
        return cls(storage, lock=lock, config=config, rng=rng)

    # -- the operations -------------------------------------------------------------------------------------

    def insert(self, data: pa.Table) -> CommitResult:
        """Write the rows as new records, as Hudi's ``insert``: no index look-up and no de-duplication, so a
        key the table or the batch holds already is stored once more; small files take rows first."""
        return self._commit("INSERT", data, None)

    def bulk_insert(self, data: pa.Table) -> CommitResult:
        """Write the rows as new records into new file groups only, as Hudi's ``bulk_insert`` (no look-up, no
        de-duplication, no small-file handling, rows in the order given: sort mode NONE)."""
        return self._commit("BULK_INSERT", data, None)

    def upsert(self, data: pa.Table, deletes: pa.Table | None = None) -> CommitResult:
        """Insert new records and update existing ones, and delete the records keyed by ``deletes`` in the
        same commit (what a Hudi upsert does with ``_hoodie_is_deleted`` rows: on MOR, a delete block)."""
        return self._commit("UPSERT", data, deletes)

    def delete(self, keys: pa.Table) -> CommitResult:
        """Delete the records whose key (record key and partition fields, as columns of ``keys``) is given;
        unknown keys are ignored."""
        return self._commit("DELETE", None, keys)

    # -- one commit -----------------------------------------------------------------------------------------

    def _commit(self, operation: Operation, data: pa.Table | None, deletes: pa.Table | None) -> CommitResult:
        table = self._open_table()
        cfg = table.config
        avro_json = table.latest_avro_schema() or cfg.create_schema
        if not avro_json:
            raise HoodieError(
                f"table {self.storage.uri} records no schema; create it with TableWriter.create"
            )
        job = _CommitJob(self, table, operation, avro_json)
        job.prepare(data, deletes)  # a bad batch is refused here, before the timeline is touched
        refuse_metadata_table(self.storage, cfg, "write", writer=True)
        action = DELTA_COMMIT if cfg.is_mor else COMMIT
        version = cfg.table_version
        timeline_writer = TimelineWriter(self.storage, cfg, self.lock)
        with self._locked():
            instant_time = InstantTimeGenerator(cfg.timeline_timezone).next(self.storage, cfg)
            requested = timeline_writer.request(action, instant_time)
        if self.on_requested is not None:
            self.on_requested(instant_time)
        # The view the files are written against is taken once our instant is on the timeline: a compaction
        # scheduled before it is in the view (v6 logs then go to its new slice), and one scheduled after it
        # sees this write pending (and, on v6, waits for it).
        # The heartbeat tells a LAZY clean (hoodied's, or Hudi's) that this write is alive; once it stops,
        # an unfinished instant is a failed write to roll back.
        completed: Instant | None = None
        try:
            with Heartbeat(self.storage, instant_time, self.write_config.heartbeat):
                table = job.table = self._open_table()
                job.tag()
                if self.write_config.update_strategy is UpdateStrategy.REJECT:
                    try:
                        check_updates(
                            instant_time, job.updated_groups(), table.pending_clustering_file_groups()
                        )
                    except ClusteringUpdateRejected:
                        timeline_writer.delete_pending(requested)  # nothing else of it was written
                        raise
                inflight_md = CommitMetadata(operation_type=operation, extra_metadata={"schema": avro_json})
                inflight = timeline_writer.start(
                    requested, encode_commit_metadata(inflight_md, table_version=version, action=action)
                )
                stats = job.write(instant_time)
                metadata = CommitMetadata(
                    partition_to_write_stats=stats,
                    extra_metadata={"schema": avro_json},
                    operation_type=operation,
                    compacted=False,
                )
                content = encode_commit_metadata(metadata, table_version=version, action=action)
                deleted = job.deleted_keys
                with self._locked():
                    self._check_conflicts(table, instant_time, metadata)
                    write_metadata_update(
                        self.storage,
                        TableConfig.load(self.storage),
                        self.lock,
                        lambda cfg: update_for_write(
                            self.storage, cfg, instant_time, metadata.write_stats, deleted_keys=deleted
                        ),
                        service="write",
                    )
                    completed = timeline_writer.complete(inflight, content)
        except StorageError as e:
            if completed is None:
                raise
            left_for_later(completed, "releasing the table lock or stopping the heartbeat", e)
        try:
            job.markers.delete_all()
        except StorageError as e:
            left_for_later(completed, "deleting its markers", e)
        maintain_metadata_table(self.storage, self.lock)
        return CommitResult(completed, metadata)

    def _check_conflicts(self, view: Table, instant_time: str, metadata: CommitMetadata) -> None:
        """Refuse to complete when a write that completed after ``view`` was taken touched one of our file
        groups (its new base file or log would be lost, or ours would hide it). Called under the lock."""
        ours = {(s.partition_path or "", s.file_id) for s in metadata.write_stats if s.file_id}
        # Log files appended to a group do not conflict with a compaction of it: they belong to the slice the
        # compaction starts (v6: named after its instant; v8+: completed after it was requested).
        ours_base = {
            (s.partition_path or "", s.file_id)
            for s in metadata.write_stats
            if s.file_id and s.path and not LogFile.try_parse(posixpath.basename(s.path))
        }
        seen = {i.time for i in view.timeline.completed()}
        fresh = self._open_table()
        for other in fresh.timeline.completed_writes():
            if other.time in seen or other.time == instant_time:
                continue
            md = fresh.commit_metadata(other)
            theirs = {(s.partition_path or "", s.file_id) for s in md.write_stats if s.file_id}
            theirs |= set(md.replaced_file_ids)
            overlap = (ours_base if fresh.timeline.was_compaction(other.time) else ours) & theirs
            if overlap:
                groups = ", ".join(f"{p or '<table>'}/{f}" for p, f in sorted(overlap)[:5])
                raise WriteConflict(
                    f"instant {instant_time} conflicts with {other.action} {other.time}, which completed "
                    f"after this write began and also wrote file group(s) {groups}; {instant_time} stays "
                    "inflight (invisible) and was not committed: retry the batch"
                )
        if self.write_config.update_strategy is UpdateStrategy.REJECT:
            clustered = {
                (g.partition_path, g.file_id): t for g, t in fresh.pending_clustering_file_groups().items()
            }
            held = sorted(ours & clustered.keys())
            if held:
                groups = ", ".join(f"{p or '<table>'}/{f}" for p, f in held[:5])
                raise WriteConflict(
                    f"instant {instant_time} conflicts with clustering {clustered[held[0]]}, pending since "
                    f"after this write took its view, whose plan names file group(s) {groups} this write "
                    f"wrote; {instant_time} stays inflight (invisible) and was not committed: retry the batch"
                )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the table lock for the block (re-entrant: a caller already holding it keeps it)."""
        if self.lock.is_held:
            yield
            return
        with self.lock:
            yield

    def _open_table(self) -> Table:
        config = TableConfig.load(self.storage)
        return Table(self.storage, config, Timeline.load(self.storage, config))

    def new_file_id(self) -> str:
        return f"{uuid.UUID(int=self._rng.getrandbits(128), version=4)}-0"


class _CommitJob:
    """The file work of one commit: tag, then write base files and log files, collecting write stats."""

    def __init__(self, writer: TableWriter, table: Table, operation: Operation, avro_json: str) -> None:
        self.writer = writer
        self.storage = writer.storage
        self.table = table
        self.cfg = table.config
        self.wcfg = writer.write_config
        self.operation = operation
        self.avro_json = avro_json
        self.data_schema = _without_meta(avro_to_arrow_schema(avro_json))
        self.full_schema = table.read_schema() or self.data_schema
        self.rules = table.merge_rules
        self.instant_time = ""
        self.markers = Markers(self.storage, "00000000000000000")
        self.task = 0
        self.stats: dict[str, list[WriteStat]] = {}
        self.deleted_keys: list[str] = []
        self._batches: list[tuple[str, pa.Table, pa.Array, pa.Array]] = []
        self._tagged: list[_Tagged] = []

    # -- entry ---------------------------------------------------------------------------------------------

    def prepare(self, data: pa.Table | None, deletes: pa.Table | None) -> None:
        """Check and key the batch, split by partition; nothing is written."""
        cfg = self.cfg
        empty = pa.array([], pa.string())
        if data is not None and data.num_rows:
            extra = [
                c for c in data.column_names if c not in self.data_schema.names and c not in META_COLUMNS
            ]
            if extra:
                raise SchemaMismatch(
                    f"column(s) {extra} are not in the table schema; this writer does not evolve schemas"
                )
            kept = data.select([c for c in data.column_names if c not in META_COLUMNS])
            data = conform_table(kept, self.data_schema).select(self.data_schema.names)
            keys = record_keys(data, cfg.record_key_fields)
            parts = partition_paths(data, cfg.partition_fields, hive_style=cfg.hive_style_partitioning)
            if self.operation in ("UPSERT", "DELETE"):
                data, keys, parts = self._dedupe(data, keys, parts)
        else:
            data, keys, parts = self.data_schema.empty_table(), empty, empty
        if deletes is not None and deletes.num_rows:
            needed = [*cfg.record_key_fields, *cfg.partition_fields]
            missing = [c for c in needed if c not in deletes.column_names]
            if missing:
                raise SchemaMismatch(f"delete keys need column(s) {missing}")
            del_keys = record_keys(deletes, cfg.record_key_fields)
            del_parts = partition_paths(deletes, cfg.partition_fields, hive_style=cfg.hive_style_partitioning)
        else:
            del_keys, del_parts = empty, empty
        partitions = sorted(set(pc.unique(parts).to_pylist()) | set(pc.unique(del_parts).to_pylist()))
        for partition in partitions:
            mask = pc.equal(parts, partition)
            del_mask = pc.equal(del_parts, partition)
            self._batches.append(
                (partition, data.filter(mask), keys.filter(mask), pc.unique(del_keys.filter(del_mask)))
            )

    def tag(self) -> None:
        """Find the file groups of the current view holding the batch's keys; nothing is written."""
        groups_by_partition = self._live_groups()
        tagging = self.operation in ("UPSERT", "DELETE")
        self._tagged = []
        for partition, data, keys, delete_keys in self._batches:
            groups = groups_by_partition.get(partition, [])
            self._tagged.append(
                _Tagged(
                    partition,
                    data,
                    keys,
                    delete_keys,
                    groups,
                    self._tag(keys, groups) if tagging else {},
                    self._tag(delete_keys, groups) if tagging else {},
                )
            )

    def updated_groups(self) -> set[FileGroupId]:
        """The file groups the tagged batch updates or deletes records of."""
        return {FileGroupId(t.partition, f) for t in self._tagged for f in (*t.hits, *t.del_hits)}

    def write(self, instant_time: str) -> dict[str, tuple[WriteStat, ...]]:
        """Write the tagged batch's files for ``instant_time``; returns the write stats by partition."""
        self.instant_time = instant_time
        self.markers = Markers(self.storage, instant_time)
        for tagged in self._tagged:
            self._write_partition(tagged)
        return {p: tuple(s) for p, s in self.stats.items()}

    def _dedupe(self, data: pa.Table, keys: pa.Array, parts: pa.Array) -> tuple[pa.Table, pa.Array, pa.Array]:
        """One row per (partition, key): the greatest ordering value (ties, no ordering: the later row)."""
        n = data.num_rows
        cols: dict[str, pa.Array] = {"p": parts, "k": keys, "i": pa.array(np.arange(n, dtype=np.int64))}
        sort: list[tuple[str, str]] = [("p", "ascending"), ("k", "ascending")]
        ordering = self.rules.ordering_field
        if (
            self.operation != "DELETE"
            and self.rules.mode is RecordMergeMode.EVENT_TIME_ORDERING
            and ordering
            and ordering in data.column_names
        ):
            cols["o"] = data.column(ordering).combine_chunks()
            sort.append(("o", "descending"))
        sort.append(("i", "descending"))
        order = pa.table(cols).sort_by(sort)
        pk = pc.binary_join_element_wise(order.column("p"), order.column("k"), "\x00").combine_chunks()
        if n <= 1:
            return data, keys, parts
        first = np.ones(n, dtype=bool)
        first[1:] = pc.not_equal(pk.slice(1), pk.slice(0, n - 1)).to_numpy(zero_copy_only=False)
        take = pc.sort_indices(order.column("i").filter(pa.array(first)))
        rows = order.column("i").filter(pa.array(first)).take(take)
        return data.take(rows), keys.take(rows), parts.take(rows)

    # -- the file-system view the commit writes against ----------------------------------------------------

    def _live_groups(self) -> dict[str, list[_Group]]:
        table = self.table
        groups = table.file_groups()
        live = {s.group for s in table.file_slices()}
        pending = table.pending_compaction_file_groups()
        busy = set(pending) | set(table.pending_clustering_file_groups())
        out: dict[str, list[_Group]] = {}
        for gid, group in groups.items():
            if gid not in live:
                continue
            ordered = group.ordered()
            base = next((s for s in reversed(ordered) if s.base_file is not None), None)
            has_logs = any(
                s.log_files for s in ordered if base is None or s.base_instant >= base.base_instant
            )
            log_base = max(ordered[-1].base_instant, pending.get(gid, ""))
            logs = tuple(
                p
                for s in ordered
                if base is None or s.base_instant >= base.base_instant
                for p in s.log_file_paths
            )
            out.setdefault(gid.partition_path, []).append(
                _Group(gid.file_id, ordered[-1], base, has_logs, log_base, gid in busy, logs)
            )
        return out

    # -- tagging -------------------------------------------------------------------------------------------

    def _tag(self, keys: pa.Array, groups: Sequence[_Group]) -> dict[str, np.ndarray]:
        """The rows of ``keys`` each file group holds (file id -> row indices); a key a table repeats across
        file groups is found in each of them."""
        hits: dict[str, np.ndarray] = {}
        if not len(keys):
            return hits
        for g in groups:
            in_logs = self._logged_keys(g)
            if len(in_logs):
                logged = np.flatnonzero(pc.is_in(keys, value_set=in_logs).to_numpy(zero_copy_only=False))
                if len(logged):
                    hits[g.file_id] = logged
            if g.base_path is None:
                continue
            with self.storage.open_input_file(g.base_path) as f:
                footer = pq.read_metadata(f).metadata or {}
            candidate = np.ones(len(keys), dtype=bool)
            lo, hi = footer.get(b"hoodie_min_record_key"), footer.get(b"hoodie_max_record_key")
            if lo is not None and hi is not None:
                in_range = pc.and_(
                    pc.greater_equal(keys, lo.decode("utf-8")), pc.less_equal(keys, hi.decode("utf-8"))
                )
                candidate &= in_range.to_numpy(zero_copy_only=False)
            bloom = read_bloom_filter(footer)
            if bloom is not None and candidate.any():
                idx = np.flatnonzero(candidate)
                maybe = np.asarray(bloom.might_contain_many(keys.take(pa.array(idx))), dtype=bool)
                candidate[:] = False
                candidate[idx[maybe]] = True
            if not candidate.any():
                continue
            file_keys = self._file_keys(g.base_path)
            idx = np.flatnonzero(candidate)
            hit = pc.is_in(keys.take(pa.array(idx)), value_set=file_keys).to_numpy(zero_copy_only=False)
            if hit.any():
                hits[g.file_id] = np.union1d(hits.get(g.file_id, np.array([], dtype=np.int64)), idx[hit])
        return hits

    def _logged_keys(self, g: _Group) -> pa.Array:
        """The keys of the committed data blocks in the group's log files. A record can live in a log file
        alone: an update tagged to a base file that a pending compaction then rewrote without the key (it had
        been deleted there) survives only in the log; tagging by base files alone would take a later delete
        of it for a key the table lacks and drop it (found by the chaos campaign)."""
        keys: list[str] = []
        timeline = self.table.timeline
        for path in g.log_paths:
            for block in iter_blocks(self.storage.read(path)):
                data = block.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA)
                if data and block.instant_time and timeline.is_committed(block.instant_time):
                    rows = decode_data_block(block)
                    if RECORD_KEY in rows.column_names and rows.column(RECORD_KEY).null_count == 0:
                        keys.extend(rows.column(RECORD_KEY).to_pylist())
                    else:
                        keys.extend(record_keys(rows, self.cfg.record_key_fields).to_pylist())
        return pa.array(keys, pa.string())

    def _file_keys(self, path: str) -> pa.Array:
        cfg = self.cfg
        if cfg.populate_meta_fields:
            with self.storage.open_input_file(path) as f:
                return pq.read_table(f, columns=[RECORD_KEY]).column(RECORD_KEY).combine_chunks()
        with self.storage.open_input_file(path) as f:
            t = pq.read_table(f, columns=list(cfg.record_key_fields))
        return record_keys(t, cfg.record_key_fields)

    # -- writing one partition -----------------------------------------------------------------------------

    def _write_partition(self, tagged: _Tagged) -> None:
        partition, data, keys, delete_keys = tagged.partition, tagged.data, tagged.keys, tagged.delete_keys
        groups, hits, del_hits = tagged.groups, tagged.hits, tagged.del_hits
        by_id = {g.file_id: g for g in groups}
        found = np.zeros(len(keys), dtype=bool)
        for rows in hits.values():
            found[rows] = True
        del_found = np.zeros(len(delete_keys), dtype=bool)
        for rows in del_hits.values():
            del_found[rows] = True
        touched = set(hits) | set(del_hits)
        if touched or data.num_rows:
            self._partition_metafile(partition)
        # Keys that leave the table (for the record index): deletes of stored keys, and stored keys
        # upserted with the delete marker.
        self.deleted_keys.extend(delete_keys.filter(pa.array(del_found)).to_pylist())
        if IS_DELETED in data.column_names:
            marked = pc.and_(pa.array(found), pc.fill_null(data.column(IS_DELETED), False))
            self.deleted_keys.extend(keys.filter(marked).to_pylist())
        for file_id in sorted(touched):
            rows = data.take(pa.array(hits.get(file_id, np.empty(0, np.int64))))
            gone = delete_keys.take(pa.array(del_hits.get(file_id, np.empty(0, np.int64))))
            self._update_group(
                partition, by_id[file_id], rows if rows.num_rows else None, gone if len(gone) else None
            )
        new = pa.array(~found)
        inserts, insert_keys = data.filter(new), keys.filter(new)
        if IS_DELETED in inserts.column_names:
            live = pc.invert(pc.fill_null(inserts.column(IS_DELETED), False))
            inserts, insert_keys = inserts.filter(live), insert_keys.filter(live)
        if inserts.num_rows:
            self._insert(partition, inserts, insert_keys, [g for g in groups if g.file_id not in touched])

    def _insert(self, partition: str, rows: pa.Table, keys: pa.Array, groups: list[_Group]) -> None:
        per_record = self._record_size_estimate()
        max_rows = max(1, self.wcfg.parquet.max_file_bytes // per_record)
        start = 0
        n = rows.num_rows
        # Small files first: base files under the limit with no log files after them (not for bulk_insert).
        for g in sorted(groups, key=lambda g: g.base_size) if self.operation != "BULK_INSERT" else ():
            if start >= n:
                break
            if g.base_path is None or g.has_logs or g.busy or g.base_size >= self.wcfg.small_file_limit:
                continue
            room = max(0, (self.wcfg.parquet.max_file_bytes - g.base_size) // per_record)
            if room <= 0:
                continue
            take = min(room, n - start)
            self._rewrite_base(
                partition, g, rows.slice(start, take), None, inserts=take, append=self.operation == "INSERT"
            )
            start += take
        while start < n:
            take = min(max_rows, n - start)
            self._new_base(partition, rows.slice(start, take), keys.slice(start, take))
            start += take

    def _record_size_estimate(self) -> int:
        """Bytes per record from the latest commit that wrote base files, else the configured estimate."""
        for instant in reversed(self.table.timeline.completed_writes()):
            md = self.table.commit_metadata(instant)
            written = sum(s.num_writes or 0 for s in md.write_stats if s.path and s.path.endswith(".parquet"))
            size = sum(
                s.total_write_bytes or 0 for s in md.write_stats if s.path and s.path.endswith(".parquet")
            )
            if written and size:
                return max(1, size // written)
        return self.wcfg.record_size_estimate

    # -- base files ----------------------------------------------------------------------------------------

    def _write_token(self) -> str:
        self.task += 1
        return f"{self.task - 1}-1-{self.task - 1}"

    def _meta(self, rows: pa.Table, keys: pa.Array, partition: str, file_name: str, task: int) -> pa.Table:
        return add_meta_columns(
            rows,
            commit_time=self.instant_time,
            partition_path=partition,
            file_name=file_name,
            record_keys=keys,
            task_partition_id=task,
        )

    def _new_base(self, partition: str, rows: pa.Table, keys: pa.Array) -> None:
        file_id = self.writer.new_file_id()
        token = self._write_token()
        name = BaseFile(file_id, token, self.instant_time, "parquet").file_name
        path = _join(partition, name)
        self.markers.create(partition, name, "CREATE")
        table = (
            self._meta(rows, keys, partition, name, self.task - 1) if self.cfg.populate_meta_fields else rows
        )
        written = self._write_base(path, table)
        self._stat(
            partition,
            WriteStat(
                file_id=file_id,
                path=path,
                partition_path=partition,
                prev_commit="null",
                num_writes=rows.num_rows,
                num_inserts=rows.num_rows,
                num_deletes=0,
                num_update_writes=0,
                total_write_bytes=written,
                total_write_errors=0,
                file_size_in_bytes=written,
            ),
        )

    def _write_base(self, path: str, table: pa.Table) -> int:
        stats = write_base_file(
            self.storage,
            path,
            table,
            avro_schema=self.avro_json,
            options=self.wcfg.parquet,
            populate_meta_fields=self.cfg.populate_meta_fields,
            record_keys=None
            if self.cfg.populate_meta_fields
            else record_keys(table, self.cfg.record_key_fields),
        )
        return int(stats.file_size_bytes)

    def _rewrite_base(
        self,
        partition: str,
        g: _Group,
        new_rows: pa.Table | None,
        delete_keys: pa.Array | None,
        *,
        inserts: int = 0,
        append: bool = False,
    ) -> None:
        """A new base file of the group: its current records merged with ``new_rows`` and ``delete_keys``
        (``append``: the new rows after the current records, unmerged)."""
        assert g.base is not None
        assert g.base_path is not None
        cfg = self.cfg
        token = self._write_token()
        task = self.task - 1
        name = BaseFile(g.file_id, token, self.instant_time, "parquet").file_name
        path = _join(partition, name)
        self.markers.create(partition, name, "MERGE")
        current = (
            self.table.read_file_slice(g.base, strict=True)
            if not g.has_logs
            else self.table.read_file_slice(g.latest, strict=True)
        )
        steps: list[MergeInput] = []
        if new_rows is not None and new_rows.num_rows:
            keys = record_keys(new_rows, cfg.record_key_fields)
            fresh = (
                self._meta(new_rows, keys, partition, name, task) if cfg.populate_meta_fields else new_rows
            )
            steps.append(MergeInput(data=conform_table(fresh, self.full_schema)))
        if delete_keys is not None and len(delete_keys):
            steps.append(MergeInput(deletes=Deletes(delete_keys, pa.nulls(len(delete_keys)))))
        rules = self.rules
        if append:
            kept = [conform_table(current, self.full_schema)] if current is not None else []
            appended = [*kept, *(step.data for step in steps if step.data is not None)]
            merged = pa.concat_tables(
                [t.select(self.full_schema.names) for t in appended], promote_options="permissive"
            )
        else:
            merged = merge_records(
                current,
                steps,
                mode=rules.mode,
                key_fields=rules.key_fields,
                ordering_field=rules.ordering_field,
            )
        merged = conform_table(merged, self.full_schema).select(self.full_schema.names)
        if cfg.populate_meta_fields:
            merged = merged.set_column(
                merged.schema.get_field_index(FILE_NAME),
                FILE_NAME,
                pa.array([name] * merged.num_rows, pa.string()),
            )
        before = current.num_rows if current is not None else 0
        written = self._write_base(path, merged)
        new_count = new_rows.num_rows if new_rows is not None else 0
        deleted = before + inserts - merged.num_rows if delete_keys is not None else 0
        self._stat(
            partition,
            WriteStat(
                file_id=g.file_id,
                path=path,
                partition_path=partition,
                prev_commit=g.base.base_instant,
                num_writes=merged.num_rows,
                num_inserts=inserts,
                num_update_writes=new_count - inserts,
                num_deletes=max(0, deleted),
                total_write_bytes=written,
                total_write_errors=0,
                file_size_in_bytes=written,
                prev_base_file=g.base.base_file.file_name if g.base.base_file else None,
            ),
        )

    # -- updates and deletes of existing file groups -------------------------------------------------------

    def _update_group(
        self, partition: str, g: _Group, rows: pa.Table | None, delete_keys: pa.Array | None
    ) -> None:
        if not self.cfg.is_mor:
            self._rewrite_base(partition, g, rows, delete_keys)
            return
        self._append_logs(partition, g, rows, delete_keys)

    def _append_logs(
        self, partition: str, g: _Group, rows: pa.Table | None, delete_keys: pa.Array | None
    ) -> None:
        cfg = self.cfg
        token = self._write_token()
        task = self.task - 1
        blocks: list[bytes] = []
        n_rows = 0
        if rows is not None and rows.num_rows:
            keys = record_keys(rows, cfg.record_key_fields)
            data = self._meta(rows, keys, partition, g.file_id, task) if cfg.populate_meta_fields else rows
            encode = (
                encode_parquet_data_block if self.wcfg.log_format == "parquet" else encode_avro_data_block
            )
            blocks.append(encode(data, self._writer_schema(), instant_time=self.instant_time))
            n_rows = rows.num_rows
        n_deletes = 0
        if delete_keys is not None and len(delete_keys):
            blocks.append(
                encode_delete_block(
                    delete_keys,
                    pa.array([partition] * len(delete_keys), pa.string()),
                    # Hudi's deletes without an ordering value carry the default 0 (an IntWrapper).
                    pa.array(np.zeros(len(delete_keys), dtype=np.int32)),
                    instant_time=self.instant_time,
                    table_version=cfg.table_version,
                    extra_headers={HeaderKey.SCHEMA: self._writer_schema()},
                )
            )
            n_deletes = len(delete_keys)
        # v6 log files carry their slice's base instant; v8+ the deltacommit's own.
        log_instant = self.instant_time if cfg.table_version >= 8 else g.log_base_instant
        written = write_log_file(
            self.storage,
            partition,
            g.file_id,
            log_instant,
            blocks,
            table_version=cfg.table_version,
            write_token=token,
            max_file_bytes=self.wcfg.max_log_file_bytes,
            before_create=lambda log_file: self._mark(partition, log_file.file_name, "APPEND"),
        )
        for i, w in enumerate(written):
            self._stat(
                partition,
                WriteStat(
                    file_id=g.file_id,
                    path=w.path,
                    partition_path=partition,
                    prev_commit=g.latest.base_instant,
                    num_writes=n_rows if i == 0 else 0,
                    num_update_writes=n_rows if i == 0 else 0,
                    num_inserts=0,
                    num_deletes=n_deletes if i == len(written) - 1 else 0,
                    total_write_bytes=w.size_bytes,
                    total_write_errors=0,
                    file_size_in_bytes=w.size_bytes,
                    log_version=w.log_file.version,
                    log_offset=0,
                    base_file=g.base.base_file.file_name if g.base and g.base.base_file else "",
                    log_files=(w.log_file.file_name,),
                    total_log_blocks=w.blocks,
                ),
            )

    def _writer_schema(self) -> str:
        """The Avro schema of log records: the table schema with the meta fields first."""
        return self.avro_json if not self.cfg.populate_meta_fields else _with_meta_fields(self.avro_json)

    # -- bookkeeping ---------------------------------------------------------------------------------------

    def _mark(self, partition: str, file_name: str, io_type: str) -> None:
        self.markers.create(partition, file_name, io_type)

    def _stat(self, partition: str, stat: WriteStat) -> None:
        self.stats.setdefault(partition, []).append(stat)

    def _partition_metafile(self, partition: str) -> None:
        write_partition_metafile(self.storage, partition, self.instant_time)


def _join(partition: str, name: str) -> str:
    return f"{partition}/{name}" if partition else name


def _json(obj: object) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _without_meta(schema: pa.Schema) -> pa.Schema:
    return pa.schema([f for f in schema if f.name not in META_COLUMNS])


def _with_meta_fields(avro_json: str) -> str:
    import json

    schema = json.loads(avro_json)
    meta = [{"name": c, "type": ["null", "string"], "doc": "", "default": None} for c in META_COLUMNS]
    fields = [f for f in schema["fields"] if f["name"] not in META_COLUMNS]
    return json.dumps({**schema, "fields": meta + fields}, separators=(",", ":"))


__all__ = ["CommitResult", "TableWriter", "WriteConfig"]
