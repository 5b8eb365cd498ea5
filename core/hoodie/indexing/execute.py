"""The indexing service: building metadata-table partitions (indexes) for existing data while writers write,
and dropping them, as Hudi's ``HoodieIndexer`` does.

**Schedule** (:func:`schedule_indexing`, under the table lock): the metadata table is created first when
the table has none (its ``files`` partition from the committed files, :func:`initialize_metadata_table`).
Each new partition gets its file groups (an empty log file each, Hudi's counts), is added to
``hoodie.table.metadata.partitions.inflight`` (from then on every commit writes to it too), and an
``indexing.requested`` holding a ``HoodieIndexPlan`` names it with ``indexUptoInstant``, the latest completed
write.

**Build** (:func:`build_index_records`, no lock; a Spark job spreads it over file groups): the records of the
partition from the table's latest committed state: statistics and bloom filters of every live base file, the
location of every live key.

**Older pending writes first** (:func:`older_pending_writes`): a record index must not be completed while a
commit, deltacommit or clustering older than the indexing instant is pending. Completed after the indexing,
that write would put its metadata-table records under its own (older) instant time, which every reader
(Hudi's, hudi-rs, ours) merges before the indexing's: a clustering's new key locations, or a delete, would lie
hidden behind the index built before them, and the record index would point at replaced file groups or hold
deleted keys. So an indexing that builds ``record_index`` neither builds nor completes while one is pending
(:class:`IndexingDeferred`; it runs once they completed). Hudi's indexer waits for such writers only while
they keep a heartbeat and ignores pending table services (``AbstractIndexingCatchupTask``, left open as
HUDI-8607); hoodied waits for both. The other indexes are keyed by file: an older write completing late only
adds entries of its new files, so they do not wait.

**Complete** (:func:`complete_indexing`, under the lock): ``indexing.inflight``; the built records go to
the metadata table as the deltacommit of the indexing instant (they count once it completes); the commits
that completed while the build ran are caught up in a second deltacommit, written after it; then the
indexing instant completes with ``HoodieIndexCommitMetadata`` and the partition moves from ``...inflight``
to ``hoodie.table.metadata.partitions``. Readers use a partition only once it is listed there. In the daemon
the completion is decided before the metadata table is written (:mod:`hoodie.write.decision`), so a run
paused past its lease cannot complete the instant (or the deltacommit) a second time after a takeover.

**Drop** (:func:`drop_index`, under the lock): the runs of a pending indexing of the partition are voided
first (one that decided already refuses the drop); the partition leaves both properties, then its folder
goes; dropping ``files`` deletes the whole metadata table, as Hudi does.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import fastavro
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT, TableConfig, table_checksum
from hoodie.errors import CommitConflict, Deferred, FileAlreadyExists, HoodieError, LostRace, NothingToDo
from hoodie.failpoints import failpoint
from hoodie.file_group.file_group import FileSlice
from hoodie.lock import LockProvider, held
from hoodie.log.log_file import LogFile
from hoodie.metadata.partition_lists import listed, mark_built, store_partition_lists
from hoodie.metadata.reader import METADATA_TABLE_PATH, MetadataTable, MetadataTableConfig, storage_listing
from hoodie.metadata.records import MetadataPartition, MetadataRecord
from hoodie.metadata.updates import (
    check_one_location_per_key,
    index_records_of_keys,
    update_for_rewrite,
    update_for_write,
)
from hoodie.metadata.writer import (
    WRITE_TOKEN,
    MetadataUpdate,
    MetadataWriter,
    base_hfile,
    default_schema_json,
    delete_block,
    open_metadata_table,
)
from hoodie.metadata_table import delete_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import (
    CLUSTERING,
    COMMIT,
    DELTA_COMMIT,
    INDEXING,
    REPLACE_COMMIT,
    Instant,
    State,
)
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    CommitMetadata,
    IndexCommitMetadata,
    IndexPartitionInfo,
    IndexPlan,
    WriteStat,
    decode_index_plan,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.attempt import AttemptFence
from hoodie.write.decision import Decision, forget_decision, publish, void_attempts
from hoodie.write.heartbeat import read_lease
from hoodie.write.partition_metafile import write_partition_metafile
from hoodie.write.service_commit import decide_completion, held_to_complete

__all__ = [
    "INDEXABLE",
    "IndexShare",
    "IndexingDeferred",
    "IndexingFailed",
    "IndexingResult",
    "KeyLocations",
    "NothingToIndex",
    "ScheduledIndexing",
    "build_index_records",
    "build_index_share",
    "complete_indexing",
    "drop_index",
    "initialize_metadata_table",
    "older_pending_writes",
    "pending_indexing",
    "pending_indexing_plan",
    "refuse_while_older_writes_pend",
    "run_indexing",
    "schedule_indexing",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionLayout:
    """How Hudi lays out one metadata-table partition: its file group prefix and how many file groups."""

    prefix: str
    count_key: str | None
    default_count: int


#: The partitions the indexing service builds, with Hudi's file group prefixes and default counts.
INDEXABLE: dict[str, PartitionLayout] = {
    MetadataPartition.COLUMN_STATS: PartitionLayout(
        "col-stats-", "hoodie.metadata.index.column.stats.file.group.count", 2
    ),
    MetadataPartition.BLOOM_FILTERS: PartitionLayout(
        "bloom-filters-", "hoodie.metadata.index.bloom.filter.file.group.count", 4
    ),
    MetadataPartition.RECORD_INDEX: PartitionLayout(
        "record-index-", "hoodie.metadata.record.index.min.filegroup.count", 10
    ),
    MetadataPartition.PARTITION_STATS: PartitionLayout(
        "partition-stats-", "hoodie.metadata.index.partition.stats.file.group.count", 1
    ),
}
FILES_LAYOUT = PartitionLayout("files-", None, 1)
#: The instant a metadata table's ``files`` partition is initialised at (Hudi: v8+ ``0...0``, v6 ``0...010``).
INIT_INSTANT = {6: "00000000000000010", 8: "00000000000000000", 9: "00000000000000000"}


class IndexingFailed(HoodieError):
    """An index cannot be scheduled, built or completed; the message says why."""


class NothingToIndex(IndexingFailed, NothingToDo):
    """No pending indexing (or not the one asked for)."""


#: Hudi's ``hoodie.metadata.index.check.timeout.seconds``: how long its indexer waits for pending writers.
INDEX_CHECK_TIMEOUT_SECONDS = 900.0


class IndexingDeferred(Deferred):
    """An indexing waits for older pending writes, clusterings or cleans (see the module doc)."""


#: Pending actions whose completion moves or deletes record keys (see the module doc).
_MOVES_KEYS = frozenset({COMMIT, DELTA_COMMIT, REPLACE_COMMIT, CLUSTERING})


def older_pending_writes(table: Table, instant_time: str, partitions: Sequence[str]) -> list[Instant]:
    """The pending writes older than the indexing at ``instant_time`` of ``partitions`` that it must wait for:
    none unless it builds the record index (see the module doc)."""
    if MetadataPartition.RECORD_INDEX not in partitions:
        return []
    return [i for i in table.timeline.pending() if i.time < instant_time and i.action in _MOVES_KEYS]


def refuse_while_older_writes_pend(table: Table, instant_time: str, partitions: Sequence[str]) -> None:
    """Raise :class:`IndexingDeferred` naming the writes the indexing at ``instant_time`` waits for."""
    waiting = older_pending_writes(table, instant_time, partitions)
    if waiting:
        names = ", ".join(f"{i.action} {i.time} ({i.state.name.lower()})" for i in waiting[:5])
        raise IndexingDeferred(
            f"indexing {instant_time} of {table.storage.uri} waits for older writes to complete first: "
            f"{names}"
            + (f" and {len(waiting) - 5} more" if len(waiting) > 5 else "")
            + "; their record-index entries would otherwise be hidden behind the ones built now"
        )


@dataclass(frozen=True)
class ScheduledIndexing:
    instant: Instant | None
    plan: IndexPlan | None
    reason: str


@dataclass(frozen=True)
class IndexingResult:
    instant: Instant
    partitions: tuple[str, ...]
    records: int
    caught_up: tuple[str, ...]


def _file_group_ids(partition: str, config: TableConfig) -> list[str]:
    layout = INDEXABLE.get(partition, FILES_LAYOUT)
    count = layout.default_count
    if layout.count_key is not None:
        count = int(config.props.get(layout.count_key, "") or count)
    return [f"{layout.prefix}{i:04d}-0" for i in range(count)]


def _empty_log(storage: Storage, partition: str, file_id: str, instant: str, table_version: int) -> str:
    """An empty log file (a delete block without records, as Hudi starts every file group with)."""
    log = LogFile(file_id, instant, 1, "0-0-0")
    path = f"{partition}/{log.file_name}"
    storage.create(path, delete_block(instant, partition, [], table_version), overwrite=True)
    return path


# -- creating the metadata table ----------------------------------------------------------------------------


def metadata_table_properties(config: TableConfig) -> dict[str, str]:
    """The ``hoodie.properties`` of a new metadata table of the data table ``config``, as Hudi writes it."""
    version = config.table_version
    props = {
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.name": f"{config.name}_metadata",
        "hoodie.table.version": str(version),
        "hoodie.populate.meta.fields": "false",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.datasource.write.drop.partition.columns": "false",
    }
    if version >= 8:
        props.update(
            {
                "hoodie.table.initial.version": str(version),
                "hoodie.timeline.layout.version": "2",
                "hoodie.timeline.path": "timeline",
                "hoodie.timeline.history.path": "history",
                "hoodie.archivelog.folder": "history",
                "hoodie.record.merge.mode": "CUSTOM",
                "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
                "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
            }
        )
    else:
        props.update(
            {
                "hoodie.timeline.layout.version": "1",
                "hoodie.archivelog.folder": "archived",
                "hoodie.table.keygenerator.class": "org.apache.hudi.metadata.HoodieTableMetadataKeyGenerator",
                "hoodie.compaction.record.merger.strategy": "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
            }
        )
    if config.database_name:
        props["hoodie.database.name"] = config.database_name
    props["hoodie.table.checksum"] = str(table_checksum(config.database_name, props["hoodie.table.name"]))
    return props


def initialize_metadata_table(
    storage: Storage, lock: LockProvider, *, time_generator: InstantTimeGenerator | None = None
) -> MetadataTable:
    """The table's metadata table, created with its ``files`` partition (the committed files now) when it
    has none; under the table lock, so no commit completes meanwhile (later commits list their own files)."""
    with held(lock):
        config = TableConfig.load(storage)
        existing = open_metadata_table(storage, config)
        if existing is not None and MetadataPartition.FILES in config.metadata_partitions:
            return existing
        timeline = Timeline.load(storage, config)
        mdt_storage = storage.child(METADATA_TABLE_PATH)
        storage.delete_dir(METADATA_TABLE_PATH)  # a creation that died half-way: start over
        MetadataTableConfig(metadata_table_properties(config)).create(mdt_storage)
        mdt_config = MetadataTableConfig.load(mdt_storage)
        version = config.table_version
        init = INIT_INSTANT[version]
        update = MetadataUpdate(init, files_added=storage_listing(storage, timeline))
        records = {r["key"]: r for r in update.files_records()}
        schema = default_schema_json(version)
        parsed = fastavro.parse_schema(json.loads(schema))
        (file_id,) = _file_group_ids(MetadataPartition.FILES, config)
        name = f"{file_id}_{WRITE_TOKEN}_{init}.hfile"
        path = f"{MetadataPartition.FILES}/{name}"
        data = base_hfile(records, schema, parsed)
        mdt_writer = TimelineWriter(mdt_storage, mdt_config, lock, time_generator=time_generator)
        requested = mdt_writer.request(DELTA_COMMIT, init)
        inflight = mdt_writer.start(requested)
        write_partition_metafile(mdt_storage, MetadataPartition.FILES, init)
        mdt_storage.create(path, data)
        stat = WriteStat(
            file_id=file_id,
            path=path,
            partition_path=MetadataPartition.FILES,
            prev_commit="null",
            num_writes=len(records),
            num_inserts=len(records),
            num_deletes=0,
            num_update_writes=0,
            total_write_bytes=len(data),
            total_write_errors=0,
            file_size_in_bytes=len(data),
        )
        mdt_writer.complete(
            inflight,
            CommitMetadata(
                partition_to_write_stats={MetadataPartition.FILES: (stat,)},
                extra_metadata={"schema": schema},
                operation_type="BULK_INSERT_PREPPED",
                compacted=False,
            ),
        )
        built = [*listed(config, METADATA_PARTITIONS), MetadataPartition.FILES]
        config = store_partition_lists(storage, built, listed(config, METADATA_PARTITIONS_INFLIGHT))
        logger.info(
            "created the metadata table of %s: %d partition(s), %d file(s) listed",
            storage.uri,
            len(update.files_added),
            sum(len(v) for v in update.files_added.values()),
        )
        return MetadataTable.load(storage, config, Timeline.load(storage, config))


# -- scheduling -------------------------------------------------------------------------------------------


def pending_indexing(table: Table) -> list[Instant]:
    """Indexing instants requested or inflight, oldest first."""
    return [i for i in table.timeline.pending() if i.action == INDEXING]


def schedule_indexing(
    storage: Storage,
    lock: LockProvider,
    index_types: Sequence[str],
    *,
    time_generator: InstantTimeGenerator | None = None,
) -> ScheduledIndexing:
    """Request an indexing instant that builds the metadata-table partitions ``index_types`` (see the
    module doc). Partitions already built or being built are left out; with nothing left, no instant."""
    unknown = [t for t in index_types if t not in INDEXABLE]
    if unknown:
        raise IndexingFailed(
            f"cannot build index(es) {unknown}: hoodied builds {sorted(INDEXABLE)} (files comes with the "
            "metadata table)"
        )
    with held(lock):
        initialize_metadata_table(storage, lock, time_generator=time_generator)
        table = Table.load(storage)
        config = table.config
        built = set(listed(config, METADATA_PARTITIONS))
        inflight = set(listed(config, METADATA_PARTITIONS_INFLIGHT))
        if pending_indexing(table):
            busy = {
                info.metadata_partition_path
                for instant in pending_indexing(table)
                for info in decode_index_plan(
                    storage.read(table.timeline.file_of(instant.time, State.REQUESTED))
                ).index_partition_infos
            }
        else:
            busy = set()
        wanted = [t for t in dict.fromkeys(index_types) if t not in built and t not in busy]
        if MetadataPartition.PARTITION_STATS in wanted and not config.partition_fields:
            raise IndexingFailed(f"{storage.uri} is not partitioned: partition_stats has nothing to hold")
        if not wanted:
            return ScheduledIndexing(None, None, f"{', '.join(index_types)}: already built or being built")
        writer = TimelineWriter(storage, config, lock, time_generator=time_generator)
        time = writer.next_instant_time()
        latest = table.timeline.latest_completed_write()
        upto = latest.time if latest is not None else time
        mdt_storage = storage.child(METADATA_TABLE_PATH)
        for partition in wanted:
            mdt_storage.delete_dir(partition)  # a schedule that died half-way left it
            write_partition_metafile(mdt_storage, partition, time)
            for file_id in _file_group_ids(partition, config):
                _empty_log(mdt_storage, partition, file_id, time, config.table_version)
        store_partition_lists(storage, sorted(built), sorted(inflight | set(wanted)))
        plan = IndexPlan(tuple(IndexPartitionInfo(p, upto, {}, 1) for p in wanted))
        requested = writer.request(INDEXING, time, plan)
    logger.debug("scheduled indexing %s on %s: %s up to %s", time, storage.uri, ", ".join(wanted), upto)
    return ScheduledIndexing(requested, plan, f"builds {', '.join(wanted)}")


# -- building ---------------------------------------------------------------------------------------------


def index_slices(table: Table) -> list[FileSlice]:
    """The slices an index build reads: the latest of every live file group."""
    return table.file_slices()


@dataclass(frozen=True)
class KeyLocations:
    """The live keys of one file slice (first occurrences, in slice order) and where the record index puts
    them: compact (an Arrow array) until the driver makes records of them."""

    partition_path: str
    file_id: str
    instant_time: str
    keys: pa.Array


@dataclass(frozen=True)
class IndexShare:
    """What one task of a build returns: the records of every partition but the record index, and the record
    index's key locations per slice (:meth:`to_update` makes the records, in the driver). A task so holds a
    slice's merge at a time and its keys as Arrow strings, never a Python record per key."""

    update: MetadataUpdate
    locations: tuple[KeyLocations, ...] = ()

    def to_update(self, config: TableConfig) -> MetadataUpdate:
        if not self.locations:
            return self.update
        records = {p: list(r) for p, r in self.update.records.items()}
        index = records.setdefault(MetadataPartition.RECORD_INDEX, [])
        for loc in self.locations:
            keys = [str(k) for k in loc.keys.to_pylist()]
            index.extend(
                index_records_of_keys(config, keys, loc.partition_path, loc.file_id, loc.instant_time)
            )
        return dataclasses.replace(self.update, records=records)


def build_index_share(
    storage: Storage,
    config: TableConfig,
    instant_time: str,
    partitions: Sequence[str],
    slices: Sequence[FileSlice],
) -> IndexShare:
    """One task's share of a build (see :class:`IndexShare`): statistics and bloom filters of each base file;
    each live key's location (read through the slice's merge, one slice at a time)."""
    wanted = set(partitions)
    scoped = config.updated(
        {
            METADATA_PARTITIONS: ",".join(sorted(wanted)),
            METADATA_PARTITIONS_INFLIGHT: "",
        }
    )
    stats = [
        WriteStat(
            file_id=s.file_id,
            path=s.base_file_path,
            partition_path=s.partition_path,
            file_size_in_bytes=s.base_file_size,
        )
        for s in slices
        if s.base_file_path is not None
    ]
    update = update_for_rewrite(storage, scoped, instant_time, stats, record_index=False)
    locations: list[KeyLocations] = []
    if MetadataPartition.RECORD_INDEX in wanted:
        table = Table.load(storage)
        for s in slices:
            merged = table.read_file_slice(s, strict=True)
            if merged is None or not merged.num_rows:
                continue
            # A key the slice repeats has one location (unique keeps first occurrences, in order). Tables
            # without meta fields key by their fields: a _hoodie_record_key column such files carry is null.
            keys = pc.unique(table.record_keys_of(merged).cast(pa.string()))
            del merged
            locations.append(KeyLocations(s.partition_path, s.file_id, instant_of(s), keys))
    return IndexShare(update, tuple(locations))


def build_index_records(
    storage: Storage,
    config: TableConfig,
    instant_time: str,
    partitions: Sequence[str],
    slices: Sequence[FileSlice],
) -> MetadataUpdate:
    """The records of ``partitions`` for the files of ``slices`` (:func:`build_index_share`, its records
    made here)."""
    return build_index_share(storage, config, instant_time, partitions, slices).to_update(config)


def instant_of(file_slice: FileSlice) -> str:
    """The instant a record-index entry records for a slice's keys: the slice's base instant."""
    return file_slice.base_instant


# -- completing -------------------------------------------------------------------------------------------


def complete_indexing(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    built: MetadataUpdate,
    seen: frozenset[str],
    *,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> IndexingResult:
    """Write the built records (``built``, made from the table with the completed writes ``seen``), catch up
    with the writes that completed since, and complete the indexing instant (see the module doc).

    ``fence`` re-checks the caller's claim under the table lock before anything is written. A partition
    dropped while it was built (no longer inflight) is not completed: :class:`IndexingFailed`, nothing
    written.

    Run as an attempt of the instant (``fence`` an :class:`~hoodie.write.attempt.AttemptFence`), the
    completion is decided first (:mod:`hoodie.write.decision`), before the metadata table is written: the
    attempts this run took the instant over from are voided, so none of them completes it after this one.
    One that decided first wins, and this run completes *its* decision with the records it built itself
    (the same index of the same table: only an indexing run can write them), at the deltacommit completion
    time that decision recorded, then raises :class:`LostRace`. A decider that wakes to find its
    deltacommit or its instant completed by such a run leaves them as they are."""
    run = fence if isinstance(fence, AttemptFence) else None
    adopted: Decision | None = None
    caught: list[str] = []
    with held_to_complete(lock) as completion:
        if fence is not None:
            fence()
        table = Table.load(storage)
        current = table.timeline.get(instant.time)
        if current is None or current.state is State.COMPLETED or current.action != INDEXING:
            raise IndexingFailed(f"indexing {instant.time} is no longer pending ({current or 'gone'})")
        plan = decode_index_plan(storage.read(table.timeline.file_of(instant.time, State.REQUESTED)))
        partitions = tuple(i.metadata_partition_path or "" for i in plan.index_partition_infos)
        dropped = [p for p in partitions if p not in listed(table.config, METADATA_PARTITIONS_INFLIGHT)]
        if dropped:
            raise IndexingFailed(
                f"indexing {instant.time} of {storage.uri}: {', '.join(dropped)} is no longer being built "
                "(dropped meanwhile); nothing written"
            )
        refuse_while_older_writes_pend(table, instant.time, partitions)
        writer = TimelineWriter(storage, table.config, lock, time_generator=time_generator)
        inflight = current if current.state is State.INFLIGHT else writer.start(current)
        mdt = open_metadata_table(storage, table.config)
        if mdt is None:
            raise IndexingFailed(f"{storage.uri} has no metadata table any more")
        # A key in two file groups has no one location: refused before anything is written.
        check_one_location_per_key(
            built.records.get(MetadataPartition.RECORD_INDEX, ()), f"indexing {instant.time} of {storage.uri}"
        )
        content = IndexCommitMetadata(plan.index_partition_infos, None, 1)
        if run is None:
            MetadataWriter(mdt, lock, time_generator=time_generator).write_deltacommit(built)
            caught = _catch_up(storage, lock, table, seen, partitions, writer, time_generator)
            completion.done = writer.complete(inflight, content)
        else:
            adopted = void_attempts(storage, instant.time, run.superseded(), run.attempt)
            if adopted is None:
                done, decision = decide_completion(
                    storage, table.config, lock, writer, inflight, content, run, "indexing"
                )
            else:
                decision = adopted
                done = Instant(instant.time, INDEXING, State.COMPLETED)
            failpoint("indexing.decided")
            _write_built(storage, lock, built, decision, time_generator)
            if not Table.load(storage).timeline.is_completed(instant.time):
                caught = _catch_up(storage, lock, table, seen, partitions, writer, time_generator)
            publish(storage, decision)
            completion.done = done
        mark_built(storage, partitions)
    if adopted is not None:
        raise LostRace(
            f"lost the race: {adopted.describe()} before this run could void it; this run completed it with "
            "the records it built"
        )
    if run is not None:
        forget_decision(storage, instant.time, run.attempt)
    count = sum(len(r) for r in built.records.values())
    logger.debug(
        "completed indexing %s on %s: %s, %d record(s), %d write(s) caught up",
        instant.time,
        storage.uri,
        ", ".join(partitions),
        count,
        len(caught),
    )
    return IndexingResult(completion.done, partitions, count, tuple(caught))


def _write_built(
    storage: Storage,
    lock: LockProvider,
    built: MetadataUpdate,
    decision: Decision,
    time_generator: InstantTimeGenerator | None,
) -> None:
    """The metadata table's deltacommit of a decided indexing's built records, completed at the decided
    time, unless another run of the decision completed it already (a completed one is never replaced; a
    stale run's late create of it collides)."""
    T = decision.instant_time
    mdt = open_metadata_table(storage, TableConfig.load(storage))
    if mdt is None:
        raise IndexingFailed(f"{storage.uri} has no metadata table any more")
    try:
        MetadataWriter(mdt, lock, time_generator=time_generator).write_deltacommit(
            built, replace_completed=False, completion_time=decision.metadata_completion or None
        )
    except (CommitConflict, FileAlreadyExists) as e:
        now = open_metadata_table(storage, TableConfig.load(storage))
        if now is None or not now.timeline.is_completed(T):
            raise
        logger.warning("indexing %s: its metadata-table deltacommit was completed by another run (%s)", T, e)


def _catch_up(
    storage: Storage,
    lock: LockProvider,
    table: Table,
    seen: frozenset[str],
    partitions: Sequence[str],
    writer: TimelineWriter,
    time_generator: InstantTimeGenerator | None,
) -> list[str]:
    """Catch the built ``partitions`` up with the writes that completed after the build read the table
    (``seen``: those it read), in a deltacommit of its own; returns their times.

    Writes that completed meanwhile wrote the partitions being built themselves (under their own, later,
    instant times: they count after the built records), unless they wrote no metadata-table deltacommit:
    only those are caught up, as Hudi's AbstractIndexingCatchupTask does. Catching up the others again, at a
    time after all of them, would put an insert back after a later write deleted it (found by the chaos
    campaign: deleted keys left in the record index)."""
    mdt = open_metadata_table(storage, table.config)
    assert mdt is not None
    written = {i.time for i in mdt.timeline.completed()}
    missed = [i for i in table.timeline.completed_writes() if i.time not in seen and i.time not in written]
    caught: list[str] = []
    scoped = table.config.updated(
        {METADATA_PARTITIONS: ",".join(partitions), METADATA_PARTITIONS_INFLIGHT: ""}
    )
    records: dict[str, list[MetadataRecord]] = {}
    deleted: dict[str, list[str]] = {}
    for write in missed:
        md = table.commit_metadata(write)
        live = [s for s in md.write_stats if s.path and storage.exists(s.path)]
        update = update_for_write(storage, scoped, write.time, live)
        for p, r in update.records.items():
            records.setdefault(p, []).extend(r)
        for p, k in update.deleted_keys.items():
            deleted.setdefault(p, []).extend(k)
        caught.append(write.time)
    if caught:
        catch_up_time = writer.next_instant_time()
        mdt = open_metadata_table(storage, table.config)
        assert mdt is not None
        MetadataWriter(mdt, lock, time_generator=time_generator).write_deltacommit(
            MetadataUpdate(catch_up_time, records=records, deleted_keys=deleted)
        )
    return caught


def run_indexing(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    time_generator: InstantTimeGenerator | None = None,
    wait_seconds: float = INDEX_CHECK_TIMEOUT_SECONDS,
) -> IndexingResult:
    """Build and complete a pending indexing instant in this process (the earliest when none is named),
    first waiting up to ``wait_seconds`` for the older pending writes a record index waits for (as Hudi's
    indexer waits: ``hoodie.metadata.index.check.timeout.seconds``), then :class:`IndexingDeferred`."""
    table = Table.load(storage)
    instant, partitions = pending_indexing_plan(table, instant_time)
    deadline = time.monotonic() + wait_seconds
    while older_pending_writes(table, instant.time, partitions) and time.monotonic() < deadline:
        time.sleep(1.0)
        table = Table.load(storage)
    refuse_while_older_writes_pend(table, instant.time, partitions)
    seen = frozenset(i.time for i in table.timeline.completed_writes())
    built = build_index_records(storage, table.config, instant.time, partitions, index_slices(table))
    return complete_indexing(storage, lock, instant, built, seen, time_generator=time_generator)


def pending_indexing_plan(table: Table, instant_time: str | None) -> tuple[Instant, tuple[str, ...]]:
    """The pending indexing at ``instant_time`` (default: the earliest) and the partitions it builds;
    :class:`NothingToIndex` when there is none."""
    chosen = [i for i in pending_indexing(table) if instant_time is None or i.time == instant_time]
    if not chosen:
        raise NothingToIndex(
            f"no pending indexing{' ' + instant_time if instant_time else ''} on {table.storage.uri}"
        )
    instant = chosen[0]
    plan = decode_index_plan(table.storage.read(table.timeline.file_of(instant.time, State.REQUESTED)))
    return instant, tuple(i.metadata_partition_path or "" for i in plan.index_partition_infos)


# -- dropping ---------------------------------------------------------------------------------------------


def drop_index(storage: Storage, lock: LockProvider, index_types: Sequence[str]) -> list[str]:
    """Drop metadata-table partitions; ``files`` drops the whole metadata table. Returns what was dropped.

    A pending indexing that builds one of them may have a run that already passed its checks and is about
    to decide its completion (paused past its lease, say): the drop first voids every attempt of it the
    instant's lease names (:func:`void_attempts`), so none completes after the drop. One that decided first
    will complete: the drop is refused (:class:`IndexingFailed`), nothing changed, and succeeds once that
    indexing completed (before, its held completed file could land after the drop deleted the pending
    instant, leaving a completed ``indexing`` without its requested file)."""
    dropped: list[str] = []
    with held(lock):
        _void_indexing_runs(storage, index_types)
        if MetadataPartition.FILES in index_types:
            if delete_metadata_table(storage, lock):
                dropped.append(MetadataPartition.FILES)
            return dropped
        config = TableConfig.load(storage)
        built = listed(config, METADATA_PARTITIONS)
        inflight = listed(config, METADATA_PARTITIONS_INFLIGHT)
        mdt_storage = storage.child(METADATA_TABLE_PATH)
        for partition in index_types:
            if partition in built or partition in inflight or mdt_storage.exists(partition):
                dropped.append(partition)
        if not dropped:
            return dropped
        store_partition_lists(
            storage, [p for p in built if p not in dropped], [p for p in inflight if p not in dropped]
        )
        # A pending indexing that builds only dropped partitions goes too (Hudi's dropindex does so).
        table = Table.load(storage)
        writer = TimelineWriter(storage, table.config, lock)
        for instant in pending_indexing(table):
            plan = decode_index_plan(storage.read(table.timeline.file_of(instant.time, State.REQUESTED)))
            if all(i.metadata_partition_path in dropped for i in plan.index_partition_infos):
                writer.delete_pending(instant)
        for partition in dropped:
            mdt_storage.delete_dir(partition)
        _drop_index_definitions(storage, config, dropped)
    logger.debug("dropped index(es) %s of %s", ", ".join(dropped), storage.uri)
    return dropped


def _void_indexing_runs(storage: Storage, index_types: Sequence[str]) -> None:
    """Void the attempts of every pending indexing that builds one of ``index_types`` (all of them for
    ``files``), as named by its lease (the holder and the attempts it took over from); under the lock.
    :class:`IndexingFailed` when one of them decided to complete first."""
    table = Table.load(storage)
    for instant in pending_indexing(table):
        plan = decode_index_plan(storage.read(table.timeline.file_of(instant.time, State.REQUESTED)))
        builds = {i.metadata_partition_path or "" for i in plan.index_partition_infos}
        if MetadataPartition.FILES not in index_types and not builds.intersection(index_types):
            continue
        holder = read_lease(storage, instant.time).holder
        attempts = [int(a) for a in holder.chain() if a.isdigit()] if holder is not None else []
        decided = void_attempts(storage, instant.time, attempts, None)
        if decided is not None:
            raise IndexingFailed(
                f"cannot drop {', '.join(index_types)} of {storage.uri}: indexing {instant.time} (building "
                f"{', '.join(sorted(builds))}) decided to complete (attempt {decided.attempt}); drop once it "
                "completed"
            )


def _drop_index_definitions(storage: Storage, config: TableConfig, partitions: Sequence[str]) -> None:
    """Remove ``partitions`` from the table's index definitions file (Hudi's ``index.json``). Under the table
    lock, and still a compare-and-set on the version read where the store has one: a holder paused past its
    lock that wakes after another writer changed the file gets
    :class:`~hoodie.errors.VersionConflict` and changes nothing (not even a definition the other added)."""
    path = config.props.get("hoodie.table.index.defs.path", "").strip()
    if not path:
        return
    try:
        raw, version = storage.read_for_update(path)
    except FileNotFoundError:
        return
    defs = json.loads(raw)
    entries = defs.get("indexDefinitions") or {}
    if not any(p in entries for p in partitions):
        return
    for p in partitions:
        entries.pop(p, None)
    data = json.dumps(defs, indent=2).encode("utf-8")
    if version is None:
        storage.create(path, data, overwrite=True)  # the table lock alone keeps writers apart here
    else:
        storage.replace_if_version(path, data, version)
