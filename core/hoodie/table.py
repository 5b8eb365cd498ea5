"""A Hudi table: its config, timeline and file-system view, and the queries over them.

    from hoodie import Table
    table = Table.open("/data/trips")                # or s3://..., with storage_options
    table.read()                                     # snapshot: latest committed state
    table.read(as_of="20240402123035233")            # time travel
    table.read(read_optimized=True)                  # base files only (MOR)
    table.read_incremental("20240402123035233")      # records changed in (start, end]

Results are ``pyarrow.Table``s with Hudi's meta columns first (when the table populates them).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.config import RecordMergeMode, TableConfig
from hoodie.errors import (
    CorruptBaseFile,
    CorruptTimelineFile,
    HoodieError,
    TimeTravelRefused,
    UnsupportedTable,
)
from hoodie.file_group.file_group import FileGroup, FileGroupId, FileSlice
from hoodie.file_group.fs_view import (
    DataFile,
    build_file_groups,
    classify_listing,
    read_optimized_slices,
    snapshot_slices,
)
from hoodie.log.integrity import LogIntegrity
from hoodie.log.reader import LogScan, scan_log_files
from hoodie.memory import release_freed_heap
from hoodie.metadata.reader import MetadataTable
from hoodie.read.conform import conform_table
from hoodie.read.conservation import KeyLedger, live_rows
from hoodie.read.merge import (
    Deletes,
    MergeInput,
    drop_deleted_rows,
    merge_records,
    record_keys,
)
from hoodie.schema import avro_to_arrow_schema
from hoodie.storage import FileInfo, Storage
from hoodie.timeline.archived.load import load_archived_timeline
from hoodie.timeline.instant import (
    CLEAN,
    COMMIT,
    DELTA_COMMIT,
    REPLACE_COMMIT,
    RESTORE,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    State,
    check_time,
)
from hoodie.timeline.metadata import (
    CommitMetadata,
    decode_clean_metadata,
    decode_commit_metadata,
    decode_compaction_plan,
    decode_requested_replace_metadata,
    decode_restore_metadata,
    decode_rollback_metadata,
    decode_rollback_plan,
)
from hoodie.timeline.timeline import Timeline

log = logging.getLogger(__name__)

META_COLUMNS = (
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
)
COMMIT_TIME_COLUMN = "_hoodie_commit_time"
RECORD_KEY = "_hoodie_record_key"
#: Bytes of base-file rows a streaming merge (:meth:`Table.stream_file_slice`) decodes at a time.
MERGE_BATCH_BYTES: Final = 16 << 20

# Filters as hudi-rs takes them: (column, operator, value-as-text).
Filter = tuple[str, str, Any]

_PAYLOADS_EVENT_TIME = {
    "DefaultHoodieRecordPayload",
    "EventTimeAvroPayload",
    "MySqlDebeziumAvroPayload",
    "PostgresDebeziumAvroPayload",
}
_PAYLOADS_COMMIT_TIME = {"OverwriteWithLatestAvroPayload", "AWSDmsAvroPayload"}


@dataclass(frozen=True)
class MergeRules:
    """How a table's records are reconciled, resolved once from its config."""

    mode: RecordMergeMode
    key_fields: tuple[str, ...]
    ordering_field: str | None


@dataclass(frozen=True)
class SliceMerge:
    """The merged records of a file slice (``None`` when it holds none) and what the merge read."""

    table: pa.Table | None
    base_records: int = 0
    log_records: int = 0  # data rows and deleted keys of the log blocks that count
    log_keys: pa.Array = field(default_factory=lambda: pa.array([], pa.string()))  # distinct keys in the logs
    log_blocks: int = 0
    corrupt_blocks: int = 0
    rollback_blocks: int = 0
    scan_ms: int = 0
    #: The keys read (live base rows, the log's distinct keys), for a rewrite's conservation check
    #: (:mod:`hoodie.read.conservation`; strict reads only).
    ledger: KeyLedger = field(default_factory=lambda: KeyLedger(pa.array([], pa.string())))


class Table:
    """An open Hudi table. Cheap to create; re-open (or :meth:`refresh`) to see new commits."""

    def __init__(
        self, storage: Storage, config: TableConfig, timeline: Timeline, *, metadata_listing: bool = False
    ) -> None:
        self.storage = storage
        self.config = config
        self.timeline = timeline
        #: List the data files through the metadata table's ``files`` partition (when the table has one)
        #: instead of the storage: one read of a few files instead of a listing of every partition.
        self.metadata_listing = metadata_listing
        # A completed instant's file never changes, so this snapshot decodes each at most once: a task reads
        # the latest commit's schema several times, and that commit lists every file it wrote (decoding it
        # once per read made a compaction of N file groups cost N^2).
        self._completed_metadata: dict[str, CommitMetadata] = {}

    @classmethod
    def open(
        cls, uri: str, storage_options: Mapping[str, str] | None = None, *, metadata_listing: bool = False
    ) -> Table:
        """Open the table at ``uri`` (a local path or a URI such as ``s3://bucket/table``); with
        ``metadata_listing``, its files are listed through its metadata table (``hoodie.metadata.enable``).

        Raises :class:`~hoodie.errors.TableNotFound` when there is no table there,
        :class:`~hoodie.errors.UnsupportedTable` for table versions or formats this library refuses, and
        :class:`~hoodie.errors.InvalidTableConfig` for a damaged ``hoodie.properties``.
        """
        storage = Storage.for_uri(uri, storage_options)
        config = TableConfig.load(storage)
        timeline = _with_history(storage, config, Timeline.load(storage, config))
        return cls(storage, config, timeline, metadata_listing=metadata_listing)

    @classmethod
    def load(cls, storage: Storage, config: TableConfig | None = None) -> Table:
        """Open the table on ``storage`` (config and timeline read now). ``config``, when given, is one the
        caller read already (a task carries its driver's): only the timeline is listed."""
        config = config if config is not None else TableConfig.load(storage)
        return cls(storage, config, _with_history(storage, config, Timeline.load(storage, config)))

    def refresh(self) -> Table:
        """A new :class:`Table` over the same storage with the config and timeline read again."""
        config = TableConfig.load(self.storage)
        timeline = _with_history(self.storage, config, Timeline.load(self.storage, config))
        return Table(self.storage, config, timeline, metadata_listing=self.metadata_listing)

    # -- metadata ----------------------------------------------------------------------------------------

    @property
    def base_path(self) -> str:
        return self.storage.uri

    def commit_metadata(self, instant: Instant | str) -> CommitMetadata:
        """The metadata of a completed (or inflight) write instant; a completed one's is decoded once per
        :class:`Table`."""
        time = instant if isinstance(instant, str) else instant.time
        known = self._completed_metadata.get(time)
        if known is not None:
            return known
        current = self.timeline.get(time)
        if current is None:
            raise KeyError(f"no instant {time} on the timeline")
        path = self.timeline.file_of(time)
        data = self.storage.read(path)
        try:
            metadata = decode_commit_metadata(
                data, table_version=self.config.table_version, action=current.action
            )
        except CorruptTimelineFile as e:
            raise CorruptTimelineFile(f"{self.base_path}/{path}: {e}") from e
        if current.state is State.COMPLETED:
            self._completed_metadata[time] = metadata
        return metadata

    def inflight_metadata(self, instant: Instant) -> CommitMetadata | None:
        """What a pending write's inflight file says it has written so far, or None: the instant is only
        requested, its inflight file is empty (Hudi writes it so at first), cannot be decoded, or is gone
        (rolled back meanwhile). The markers of the write name its files whatever this returns."""
        if instant.state is not State.INFLIGHT:
            return None
        try:
            data = self.storage.read(self.timeline.file_of(instant.time, State.INFLIGHT))
            if not data:
                return None
            return decode_commit_metadata(
                data, table_version=self.config.table_version, action=instant.action
            )
        except (KeyError, FileNotFoundError, CorruptTimelineFile):
            return None

    @cached_property
    def merge_rules(self) -> MergeRules:
        cfg = self.config
        ordering = cfg.ordering_fields[0] if cfg.ordering_fields else None
        mode = cfg.record_merge_mode
        if mode is RecordMergeMode.CUSTOM:
            payload = cfg.payload_class.rsplit(".", 1)[-1]
            if payload in _PAYLOADS_EVENT_TIME:
                mode = RecordMergeMode.EVENT_TIME_ORDERING
            elif payload in _PAYLOADS_COMMIT_TIME:
                mode = RecordMergeMode.COMMIT_TIME_ORDERING
            else:
                raise UnsupportedTable(
                    f"record payload {cfg.payload_class} (merge mode CUSTOM) is not supported; "
                    "supported: event-time and commit-time ordering payloads"
                )
        return MergeRules(mode, cfg.record_key_fields, ordering)

    def latest_avro_schema(self, as_of: str | None = None) -> str | None:
        """The writer schema of the latest completed write (at or before ``as_of``) recording one, else the
        table's create schema."""
        for instant in reversed(self.timeline.filter_as_of(as_of).completed_writes()):
            # A commit whose metadata cannot be decoded stops the read (CorruptTimelineFile naming it), as in
            # Hudi: silently taking an older schema could drop or mistype columns.
            schema = self.commit_metadata(instant).extra_metadata.get("schema")
            if schema:
                return schema
        return self.config.create_schema

    def arrow_schema(self, as_of: str | None = None) -> pa.Schema | None:
        """The table's schema as Arrow, meta columns first, or ``None`` when nothing records one."""
        avro = self.latest_avro_schema(as_of)
        if not avro:
            return None
        data = avro_to_arrow_schema(avro)
        fields = [f for f in data if f.name not in META_COLUMNS]
        meta = [pa.field(c, pa.string()) for c in META_COLUMNS] if self.config.populate_meta_fields else []
        return pa.schema(meta + fields)

    def read_schema(self) -> pa.Schema | None:
        """The schema every query reads with: the latest table schema, also for time travel and incremental
        queries (Hudi's default, ``hoodie.datasource.read.schema.use.end.instanttime=false``). Files written
        with older schemas are conformed to it (:mod:`hoodie.read.conform`)."""
        return self.arrow_schema(None)

    # -- file-system view --------------------------------------------------------------------------------

    def data_files(self) -> list[DataFile]:
        """Data files below the base path, committed or not (``.hoodie`` and hidden folders skipped); with
        :attr:`metadata_listing` on a table whose metadata table has its ``files`` partition, the committed
        ones as that partition lists them."""
        if self.metadata_listing and "files" in self.config.metadata_partitions:
            listing = MetadataTable.load(self.storage, self.config, self.timeline).file_listing()
            return classify_listing(
                FileInfo(f"{p}/{name}" if p else name, name, size, None, False)
                for p, names in listing.items()
                for name, size in names.items()
            )
        entries = []
        for top in self.storage.list(""):
            if top.name.startswith("."):
                if not top.is_dir:
                    entries.append(top)
                continue
            entries.append(top)
            if top.is_dir:
                entries.extend(self.storage.list(top.path, recursive=True))
        return classify_listing(entries)

    def _pending_compactions(self, as_of: str | None) -> dict[FileGroupId, str]:
        out: dict[FileGroupId, str] = {}
        for instant in self.timeline.filter_as_of(as_of).pending_compactions():
            data = self._requested_plan(instant.time)
            if data is None:
                continue
            for op in decode_compaction_plan(data).operations:
                out[FileGroupId(op.partition_path, op.file_id)] = instant.time
        return out

    def _requested_plan(self, time: str) -> bytes | None:
        """A pending plan's requested file, or ``None`` when it was removed since the timeline was listed (a
        plan that overlapped an older one withdrawn, :mod:`hoodie.write.plan_overlap`): it holds nothing."""
        try:
            return self.storage.read(self.timeline.file_of(time, State.REQUESTED))
        except FileNotFoundError:
            return None

    def pending_compaction_file_groups(self) -> dict[FileGroupId, str]:
        """File groups in a pending compaction plan, each with the compaction's instant time."""
        return self._pending_compactions(None)

    def pending_log_compaction_file_groups(self) -> dict[FileGroupId, str]:
        """File groups in a pending log compaction plan, each with its instant time."""
        out: dict[FileGroupId, str] = {}
        for instant in self.timeline.pending_log_compactions():
            data = self._requested_plan(instant.time)
            if data is None:
                continue
            for op in decode_compaction_plan(data).operations:
                out[FileGroupId(op.partition_path, op.file_id)] = instant.time
        return out

    def pending_clustering_file_groups(self) -> dict[FileGroupId, str]:
        """File groups a pending clustering rewrites, each with the clustering's instant time (pending v6
        replacecommits without a clustering plan, INSERT OVERWRITEs, hold none)."""
        out: dict[FileGroupId, str] = {}
        for instant in self.timeline.pending_clusterings(table_version=self.config.table_version):
            try:
                data = self.storage.read(self.timeline.file_of(instant.time, State.REQUESTED))
            except KeyError:
                continue  # an inflight without its requested file: nothing planned to protect
            except FileNotFoundError:
                continue  # rolled back for good since the timeline was listed: it holds nothing now
            plan = decode_requested_replace_metadata(data).clustering_plan
            if plan is None:
                continue
            for s in plan.slices:
                out[FileGroupId(s.partition_path, s.file_id)] = instant.time
        return out

    def replaced_file_groups(self, as_of: str | None = None) -> set[FileGroupId]:
        """File groups replaced by completed replacecommits (clustering, insert overwrite) as of ``as_of``."""
        return self._replaced_file_groups(as_of)

    def _replaced_file_groups(self, as_of: str | None) -> set[FileGroupId]:
        return set(self.replace_times(as_of))

    def replace_times(self, as_of: str | None = None) -> dict[FileGroupId, str]:
        """Each file group replaced by a completed replacecommit as of ``as_of``, with the earliest such
        replacecommit's instant time."""
        out: dict[FileGroupId, str] = {}
        for instant in self.timeline.filter_as_of(as_of).completed_writes():
            if instant.action != REPLACE_COMMIT:
                continue
            md = self.commit_metadata(instant)
            for partition, ids in md.partition_to_replace_file_ids.items():
                for fid in ids:
                    out.setdefault(FileGroupId(partition, fid), instant.time)
        return out

    def file_groups(self, as_of: str | None = None) -> dict[FileGroupId, FileGroup]:
        """Every file group with its visible slices as of ``as_of``, replaced groups included."""
        if as_of is not None:
            check_time(as_of)
        return build_file_groups(
            self.data_files(),
            self.timeline,
            table_version=self.config.table_version,
            as_of=as_of,
            pending_compactions=self._pending_compactions(as_of) if self.config.is_mor else None,
        )

    def file_slices(self, as_of: str | None = None, read_optimized: bool = False) -> list[FileSlice]:
        """The slices a snapshot (or read-optimized) query at ``as_of`` reads, one per live file group."""
        groups = self.file_groups(as_of)
        replaced = self._replaced_file_groups(as_of)
        if read_optimized or not self.config.is_mor:
            return read_optimized_slices(groups, replaced)
        return snapshot_slices(groups, replaced)

    # -- reading -----------------------------------------------------------------------------------------

    def _visible_instant(self, as_of: str | None) -> Callable[[str], bool]:
        timeline = self.timeline
        return lambda time: timeline.is_committed(time, as_of)

    def read_file_slice(
        self, file_slice: FileSlice, *, as_of: str | None = None, strict: bool = False
    ) -> pa.Table | None:
        """The merged records of one file slice as of ``as_of``, in the latest table schema (meta columns as
        stored), or ``None`` when the slice holds no record. ``strict``: the read feeds a rewrite, so damaged
        committed log data raises instead of being skipped (:mod:`hoodie.log.integrity`)."""
        return self._merge_slice(
            file_slice, self._visible_instant(as_of), self._rules(), self.read_schema(), strict
        ).table

    @cached_property
    def log_integrity(self) -> LogIntegrity:
        """The checks a rewrite's log scans make (:mod:`hoodie.log.integrity`), over this view."""
        return LogIntegrity(self.config, self.timeline, self.commit_metadata)

    def record_keys_of(self, rows: pa.Table) -> pa.Array:
        """The record key of each of ``rows`` (records of this table): ``_hoodie_record_key`` when the table
        populates meta fields, else built from its record key fields."""
        cfg = self.config
        if cfg.populate_meta_fields and RECORD_KEY in rows.column_names:
            return rows.column(RECORD_KEY).combine_chunks().cast(pa.string())
        return record_keys(
            rows.drop_columns([c for c in (RECORD_KEY,) if c in rows.column_names]), cfg.record_key_fields
        )

    def _rules(self) -> MergeRules:
        if self.config.is_mor:
            return self.merge_rules
        return MergeRules(RecordMergeMode.COMMIT_TIME_ORDERING, (), None)

    def _read_base(self, path: str) -> pa.Table:
        try:
            with self.storage.open_input_file(path) as f:
                return pq.read_table(f, page_checksum_verification=True)
        except (OSError, pa.ArrowException) as e:
            raise CorruptBaseFile(f"cannot read base file {path}: {e}") from e

    def merge_file_slice(
        self, file_slice: FileSlice, *, as_of: str | None = None, strict: bool = False
    ) -> SliceMerge:
        """Merge one file slice as of ``as_of`` (as :meth:`read_file_slice`), with what the merge saw."""
        return self._merge_slice(
            file_slice, self._visible_instant(as_of), self._rules(), self.read_schema(), strict
        )

    def stream_file_slice(
        self, file_slice: FileSlice, *, as_of: str | None = None, strict: bool = False
    ) -> SliceStream:
        """Merge one file slice as of ``as_of`` a base-file row group at a time: each chunk holds the merged
        records of one row group (updated in place, deleted ones gone), the last one the log's new keys.

        The records and their order are those of :meth:`merge_file_slice`: a record's versions all meet in
        the chunk of the row group holding its key's first row, so the log is cut per row group by key (and
        within it per batch of :data:`MERGE_BATCH_BYTES` read). Only the log and one row group's merged
        records are held at a time (a repeated key merges in its first).
        ``strict`` as for :meth:`read_file_slice`."""
        include = self._visible_instant(as_of)
        rules = self._rules()
        schema = self.read_schema()
        started = time.monotonic()
        base = (
            _RowGroups(self.storage, file_slice.base_file_path, schema) if file_slice.base_file_path else None
        )
        try:
            scan = self._scan(file_slice, include, strict)
            steps, log_keys, log_records = _log_steps(scan, schema, rules)
        except BaseException:
            if base is not None:
                base.close()
            raise
        base_records = base.num_rows if base is not None else 0
        stream = SliceStream(
            iter(()),
            base_records,
            log_records,
            log_keys,
            scan.blocks_read,
            len(scan.corrupt_blocks),
            scan.rollback_blocks,
            int((time.monotonic() - started) * 1000),
            ledger=KeyLedger(log_keys),
        )
        # The raw log bytes (and any decoded block that conforming copied) are garbage now: hand their pages
        # back before the row groups are read, rather than carry them through the merge.
        del scan
        release_freed_heap()
        stream.chunks = self._stream_chunks(base, steps, rules, schema, stream, strict)
        return stream

    def _stream_chunks(
        self,
        base: _RowGroups | None,
        steps: list[MergeInput],
        rules: MergeRules,
        schema: pa.Schema | None,
        stream: SliceStream,
        strict: bool,
    ) -> Iterator[pa.Table]:
        step_keys = [
            record_keys(s.data, rules.key_fields) if s.data is not None else s.deletes.keys.cast(pa.string())  # type: ignore[union-attr]
            for s in steps
        ]
        # All the log's keys in one array: each row group is looked up once, not once per log step.
        all_keys = pa.chunked_array(step_keys, pa.string()).combine_chunks() if step_keys else None
        bounds = np.cumsum([0, *(len(k) for k in step_keys)])
        seen = np.zeros(int(bounds[-1]), dtype=np.bool_)

        for group in base.row_groups() if base is not None else ():
            merged: list[pa.Table] = []
            for batch in group:
                keys = record_keys(batch, rules.key_fields)
                if strict:
                    stream.ledger.base(self.record_keys_of(batch), live_rows(batch))
                parts = []
                if all_keys is not None and len(all_keys):
                    # A log version meets the first base row of its key only (a key may repeat in the base
                    # file, across batches and row groups): versions an earlier batch took are not applied
                    # again.
                    hit = pc.is_in(all_keys, value_set=keys).to_numpy(zero_copy_only=False) & ~seen
                    if hit.any():
                        seen |= hit
                        # Base records the log names: the distinct log keys found in this batch.
                        stream.base_updated += int(
                            pc.count_distinct(all_keys.filter(pa.array(hit))).as_py() or 0
                        )
                        for j, step in enumerate(steps):
                            part = hit[bounds[j] : bounds[j + 1]]
                            if part.any():
                                parts.append(_restrict(step, part))
                merged.append(_merge(batch, parts, rules) if parts else drop_deleted_rows(batch))
                del batch, keys, parts  # the next batch is decoded without this one
            if not merged:
                continue
            out = merged[0] if len(merged) == 1 else pa.concat_tables(merged, promote_options="permissive")
            del merged  # not held while the consumer encodes ``out``
            stream.base_kept += out.num_rows
            yield out
        rest = [
            _restrict(step, ~seen[bounds[j] : bounds[j + 1]])
            for j, step in enumerate(steps)
            if not seen[bounds[j] : bounds[j + 1]].all()
        ]
        if any(p.data is not None and p.data.num_rows for p in rest):
            yield _merge(None, rest, rules)

    def _read_slice(
        self,
        file_slice: FileSlice,
        include: Callable[[str], bool],
        rules: MergeRules,
        schema: pa.Schema | None,
    ) -> pa.Table | None:
        return self._merge_slice(file_slice, include, rules, schema).table

    def _scan(self, file_slice: FileSlice, include: Callable[[str], bool], strict: bool) -> LogScan:
        return scan_log_files(
            self.storage,
            file_slice.log_file_paths,
            include_instant=include,
            integrity=self.log_integrity if strict else None,
        )

    def _merge_slice(
        self,
        file_slice: FileSlice,
        include: Callable[[str], bool],
        rules: MergeRules,
        schema: pa.Schema | None,
        strict: bool = False,
    ) -> SliceMerge:
        started = time.monotonic()

        def read_base() -> pa.Table | None:
            if not file_slice.base_file_path:
                return None
            table = self._read_base(file_slice.base_file_path)
            if schema is not None:
                table = conform_table(table, schema, source=file_slice.base_file_path)
            return table

        if not file_slice.log_files:
            base = read_base()
            if base is None:
                return SliceMerge(None)
            ledger = KeyLedger(pa.array([], pa.string()))
            if strict:
                ledger.base(self.record_keys_of(base), live_rows(base))
            return SliceMerge(base, base.num_rows, ledger=ledger)
        # The base file (Parquet decoding) and the log files (Avro decoding) are read at the same time: both
        # spend most of their time outside the GIL.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hoodie-base") as pool:
            pending_base = pool.submit(read_base)
            scan = self._scan(file_slice, include, strict)
            base = pending_base.result()
        scan_ms = int((time.monotonic() - started) * 1000)
        steps, log_keys, log_records = _log_steps(scan, schema, rules)
        merged = None
        if base is not None or any(s.data is not None for s in steps):
            merged = _merge(base, steps, rules)
        ledger = KeyLedger(log_keys)
        if base is not None and strict:
            ledger.base(self.record_keys_of(base), live_rows(base))
        return SliceMerge(
            merged,
            base_records=base.num_rows if base is not None else 0,
            log_records=log_records,
            log_keys=log_keys,
            log_blocks=scan.blocks_read,
            corrupt_blocks=len(scan.corrupt_blocks),
            rollback_blocks=scan.rollback_blocks,
            scan_ms=scan_ms,
            ledger=ledger,
        )

    def _read_slices(
        self, slices: Sequence[FileSlice], as_of: str | None, schema: pa.Schema | None
    ) -> list[pa.Table]:
        include = self._visible_instant(as_of)
        rules = self._rules()
        if len(slices) <= 1:
            parts = [self._read_slice(s, include, rules, schema) for s in slices]
        else:
            with ThreadPoolExecutor(max_workers=min(8, len(slices))) as pool:
                parts = list(pool.map(lambda s: self._read_slice(s, include, rules, schema), slices))
        return [p for p in parts if p is not None]

    def read(
        self,
        as_of: str | None = None,
        read_optimized: bool = False,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
    ) -> pa.Table:
        """Query the table.

        - snapshot (default): every live record in its latest committed version;
        - ``as_of``: the snapshot as of that instant time (time travel);
        - ``read_optimized``: the base files only (for MOR tables, what the last compaction left).

        ``columns`` projects the result; ``filters`` (``(column, op, value)`` with op one of
        ``= != < <= > >= in not in``) keep matching rows, applied after merging so they never change which
        version of a record wins.
        """
        if as_of is not None:
            check_time(as_of)
            self.check_time_travel(as_of)
        slices = self.file_slices(as_of, read_optimized)
        schema = self.read_schema()
        parts = self._read_slices(slices, as_of, schema)
        return self._finish(parts, schema, columns, filters)

    def earliest_time_travel(self) -> str | None:
        """The earliest instant a time travel may ask for, or ``None`` when every one can be read.

        As Hudi's ``TimelineUtils.validateTimestampAsOf``: after a completed clean, the earliest commit it
        retained (``earliestCommitToRetain`` of the latest clean's metadata): older versions of the files may
        be gone; a clean that keeps file versions records none, and then the first completed write still on
        the active timeline (instants before it were archived, and their files may be cleaned)."""
        cleans = [i for i in self.timeline.completed() if i.action == CLEAN]
        if not cleans:
            return None
        path = self.timeline.file_of(cleans[-1].time)
        try:
            retained = decode_clean_metadata(self.storage.read(path)).earliest_commit_to_retain
        except HoodieError as e:
            raise CorruptTimelineFile(f"{self.base_path}/{path}: {e}") from e
        if retained:
            return retained
        first = next(iter(self.timeline.completed_writes()), None)
        return first.time if first is not None else None

    def check_time_travel(self, as_of: str) -> None:
        """Raise :class:`~hoodie.errors.TimeTravelRefused` when ``as_of`` is before
        :meth:`earliest_time_travel`, unless a completed savepoint is at ``as_of``: the cleaner keeps every
        file a savepoint names (the latest slices as of its commit), so a savepoint can always be read, also
        after a restore to it. Hudi's own check refuses those; hudi-rs answers them.

        The refusal names only instants the table has: the earliest commit the cleaner retained may have been
        rolled back since (a restore); the first completed write after it is named instead."""
        earliest = self.earliest_time_travel()
        if earliest is None or as_of >= earliest:
            return
        completed = self.timeline.completed()
        if any(i.action == SAVEPOINT and i.time == as_of for i in completed):
            return
        readable = next((i.time for i in self.timeline.completed_writes() if i.time >= earliest), None)
        answer = (
            f"the earliest instant that can be read is {readable}"
            if readable is not None
            else "only the latest snapshot can be read"
        )
        saved = [i.time for i in completed if i.action == SAVEPOINT and i.time < earliest]
        if saved:
            answer += f", and the savepoint(s) at {', '.join(saved)}"
        raise TimeTravelRefused(
            f"time travel to {as_of} on {self.base_path} is refused: the cleaner removed files of the "
            f"instants before {readable or 'the latest write'}, so the answer would miss rows; {answer} "
            "(keep more commits with hoodie.clean.commits.retained, or savepoint a commit, for older time "
            "travel)"
        )

    def read_incremental(
        self,
        start: str,
        end: str | None = None,
        columns: Sequence[str] | None = None,
        filters: Sequence[Filter] | None = None,
    ) -> pa.Table:
        """Records written by the write instants in ``(start, end]``, in their latest version as of ``end``.

        As in Hudi, the bounds are instant (requested) times on table version 6 and *completion* times on
        8 and 9: a v8+ query returns what was committed in that window of wall-clock time, whatever the
        instants' requested times. The records returned are those whose ``_hoodie_commit_time`` is one of
        the selected instants, read from the file groups those instants wrote.
        """
        check_time(start)
        if end is not None:
            check_time(end)
        if not self.config.populate_meta_fields:
            raise UnsupportedTable(
                "incremental queries need _hoodie_commit_time, but this table does not populate meta fields"
            )
        if self.config.table_version >= 8:
            instants = [
                i
                for i in self.timeline.completed_writes()
                if start < (i.completion_time or i.time)
                and (end is None or (i.completion_time or i.time) <= end)
            ]
        else:
            instants = self.timeline.completed_writes_in_range(start, end)
        if not instants:
            return self._finish([], self.read_schema(), columns, filters)
        end_time = max(i.time for i in instants)
        touched: set[FileGroupId] = set()
        for instant in instants:
            md = self.commit_metadata(instant)
            for partition, stats in md.partition_to_write_stats.items():
                touched.update(FileGroupId(partition or "", s.file_id) for s in stats if s.file_id)
        slices = [s for s in self.file_slices(end_time) if s.group in touched]
        schema = self.read_schema()
        parts = self._read_slices(slices, end_time, schema)
        commit_filter: list[Filter] = [(COMMIT_TIME_COLUMN, "in", [i.time for i in instants])]
        return self._finish(parts, schema, columns, [*commit_filter, *(filters or [])])

    def _finish(
        self,
        parts: list[pa.Table],
        schema: pa.Schema | None,
        columns: Sequence[str] | None,
        filters: Sequence[Filter] | None,
    ) -> pa.Table:
        if parts:
            result = pa.concat_tables(parts, promote_options="permissive") if len(parts) > 1 else parts[0]
            if schema is not None:
                result = _align(result, schema)
        elif schema is not None:
            result = schema.empty_table()
        else:
            # Nothing written and no create schema: no columns are known, and none are invented.
            result = pa.schema([]).empty_table()
        if not self.config.populate_meta_fields:
            # The meta columns of such tables are not maintained (absent or null): not part of the result.
            result = result.drop_columns([c for c in META_COLUMNS if c in result.column_names])
        if filters:
            result = result.filter(_filter_expression(filters, result.schema))
        if columns is not None:
            missing = [c for c in columns if c not in result.column_names]
            if missing:
                raise HoodieError(f"unknown column(s) {missing}; the table has {result.column_names}")
            result = result.select(list(columns))
        return result


def _with_history(storage: Storage, config: TableConfig, timeline: Timeline) -> Timeline:
    """``timeline``, answering completion times of archived v8+ instants from the table's history, and which
    instants its rollbacks rolled back (each read only if a question reaches back that far)."""
    timeline = timeline.with_rolled_back(lambda: rolled_back_times(storage, timeline))
    if config.timeline_layout_version < 2:
        return timeline
    return timeline.with_history(lambda: load_archived_timeline(storage, config).completion_times())


#: The actions of writers' instants, as a rollback names them (a compaction's is ``compaction``).
_WRITES = frozenset({COMMIT, DELTA_COMMIT})


def rolled_back_times(storage: Storage, timeline: Timeline) -> frozenset[str]:
    """The writes (commits and deltacommits) the rollbacks and restores on ``timeline`` rolled back, or are
    rolling back (a pending rollback's plan names its instant): removed for good, never to complete. A
    table service's rollback is left out: its instant goes back to requested and completes later. A
    rollback whose file does not say (an old Hudi's empty plan, no instant actions) counts for nothing, as
    Hudi's readers count it."""
    out: set[str] = set()
    for instant in timeline:
        try:
            if instant.action == ROLLBACK and instant.state is State.COMPLETED:
                done = storage.read(timeline.file_of(instant.time, State.COMPLETED))
                rolled = decode_rollback_metadata(done).instants_rollback
                out.update(i.commit_time for i in rolled if i.action in _WRITES)
            elif instant.action == ROLLBACK:
                plan = decode_rollback_plan(storage.read(timeline.file_of(instant.time, State.REQUESTED)))
                target = plan.instant_to_rollback
                if target is not None and target.action in _WRITES:
                    out.add(target.commit_time)
            elif instant.action == RESTORE and instant.state is State.COMPLETED:
                done = storage.read(timeline.file_of(instant.time, State.COMPLETED))
                out.update(decode_restore_metadata(done).instants_to_rollback)
        except (KeyError, FileNotFoundError, HoodieError) as e:
            log.debug("cannot tell what %s rolled back: %s", instant, e)
    return frozenset(out)


def _merge(base: pa.Table | None, steps: Sequence[MergeInput], rules: MergeRules) -> pa.Table:
    return merge_records(
        base, steps, mode=rules.mode, key_fields=rules.key_fields, ordering_field=rules.ordering_field
    )


def _log_steps(
    scan: LogScan, schema: pa.Schema | None, rules: MergeRules
) -> tuple[list[MergeInput], pa.Array, int]:
    """The scan's batches as merge steps (conformed to ``schema``), the distinct keys they name, and how many
    records (data rows and deleted keys) they hold."""
    steps: list[MergeInput] = []
    log_keys: list[pa.Array] = []
    log_records = 0
    for batch in scan.batches:
        if batch.kind == "data":
            if batch.table.num_rows:
                data = batch.table
                if schema is not None:
                    data = conform_table(data, schema, source=batch.log_file)
                steps.append(MergeInput(data=data))
                log_records += data.num_rows
                log_keys.append(record_keys(data, rules.key_fields))
        else:
            t = batch.table
            keys = t.column("_hoodie_record_key").combine_chunks()
            steps.append(MergeInput(deletes=Deletes(keys, t.column("ordering_value").combine_chunks())))
            log_records += len(keys)
            log_keys.append(keys)
    distinct = pc.unique(pa.chunked_array(log_keys, pa.string())) if log_keys else pa.array([], pa.string())
    return steps, distinct, log_records


@dataclass
class SliceStream:
    """The merged records of a file slice a base-file row group at a time (:meth:`Table.stream_file_slice`),
    with what the merge read. The counts of base rows fill up as ``chunks`` is consumed: ``base_updated``,
    base records whose key the log names (Hudi's ``numUpdateWrites``); ``base_kept``, merged records whose key
    was in the base file."""

    chunks: Iterator[pa.Table]
    base_records: int
    log_records: int
    log_keys: pa.Array
    log_blocks: int
    corrupt_blocks: int
    rollback_blocks: int
    scan_ms: int
    base_updated: int = 0
    base_kept: int = 0
    #: The keys read (live base rows as they stream by, the log's distinct keys), for a rewrite's
    #: conservation check (:mod:`hoodie.read.conservation`; strict streams only).
    ledger: KeyLedger = field(default_factory=lambda: KeyLedger(pa.array([], pa.string())))


class _RowGroups:
    """A base file read a row group at a time, each in batches of about :data:`MERGE_BATCH_BYTES` (conformed
    to ``schema``): decoding a row group whole costs about twice its Arrow size at once (the pages'
    decompressed bytes beside the arrays), a batch a fraction of that."""

    def __init__(self, storage: Storage, path: str, schema: pa.Schema | None) -> None:
        self.path = path
        self.schema = schema
        try:
            self._file = storage.open_input_file(path)
            self._parquet = pq.ParquetFile(self._file, page_checksum_verification=True)
        except (OSError, pa.ArrowException) as e:
            raise CorruptBaseFile(f"cannot read base file {path}: {e}") from e
        self.num_rows = self._parquet.metadata.num_rows
        self._row_bytes: float | None = None  # Arrow bytes a row, from the last batch read

    def _batches(self, i: int) -> Iterator[pa.Table]:
        if self._row_bytes is None:
            # Before any batch is read, the row group's size as stored uncompressed stands in for its Arrow
            # size (close for plain-encoded columns, below it for dictionary-encoded ones).
            meta = self._parquet.metadata.row_group(i)
            rows = int(meta.num_rows * MERGE_BATCH_BYTES / max(1, meta.total_byte_size))
        else:
            rows = int(MERGE_BATCH_BYTES / self._row_bytes)
        batches = self._parquet.iter_batches(batch_size=max(1024, rows), row_groups=[i], use_threads=True)
        while True:
            try:
                batch = next(batches, None)
            except (OSError, pa.ArrowException) as e:
                raise CorruptBaseFile(f"cannot read row group {i} of {self.path}: {e}") from e
            if batch is None:
                return
            if batch.num_rows:
                self._row_bytes = batch.nbytes / batch.num_rows
            table = pa.Table.from_batches([batch])
            yield conform_table(table, self.schema, source=self.path) if self.schema is not None else table

    def row_groups(self) -> Iterator[Iterator[pa.Table]]:
        """Each row group's batches, in order (a row group's batches are read as they are asked for)."""
        try:
            for i in range(self._parquet.num_row_groups):
                yield self._batches(i)
        finally:
            self.close()

    def close(self) -> None:
        self._file.close()


def _restrict(step: MergeInput, mask: np.ndarray) -> MergeInput:
    """The part of a merge step whose rows (data) or keys (deletes) ``mask`` selects."""
    keep = pa.array(mask)
    if step.data is not None:
        return MergeInput(data=step.data.filter(keep))
    assert step.deletes is not None
    return MergeInput(
        deletes=Deletes(step.deletes.keys.filter(keep), step.deletes.ordering_values.filter(keep))
    )


def _align(result: pa.Table, schema: pa.Schema) -> pa.Table:
    """Order the columns as the table schema does (extra columns stay, at the end)."""
    names = [n for n in schema.names if n in result.column_names]
    names += [n for n in result.column_names if n not in names]
    return result.select(names)


_OPS = {
    "=": "equal",
    "==": "equal",
    "!=": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}


def _filter_expression(filters: Iterable[Filter], schema: pa.Schema) -> pc.Expression:
    expr: pc.Expression | None = None
    for column, op, value in filters:
        if column not in schema.names:
            raise HoodieError(f"filter on unknown column {column!r}")
        typ = schema.field(column).type
        field = pc.field(column)
        op_l = op.strip().lower()
        if op_l in ("in", "not in"):
            values = (
                value
                if isinstance(value, list | tuple)
                else json.loads(value)
                if isinstance(value, str) and value.startswith("[")
                else [value]
            )
            cond = field.isin(pa.array(values).cast(typ))
            if op_l == "not in":
                cond = ~cond
        elif op_l in _OPS:
            scalar = pa.scalar(value).cast(typ)
            cond = getattr(pc, _OPS[op_l])(field, scalar)
        else:
            raise HoodieError(f"unknown filter operator {op!r}")
        expr = cond if expr is None else expr & cond
    assert expr is not None
    return expr
