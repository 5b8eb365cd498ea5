"""The metadata table through a restore (Hudi's ``BaseHoodieWriteClient.restoreToSavepoint`` and
``HoodieBackedTableMetadataWriter.update(HoodieRestoreMetadata, ...)``).

Before the restore is requested (:func:`metadata_table_decision`), the metadata table is DELETED, and
``hoodie.table.metadata.partitions`` cleared (readers list storage; a Hudi writer with the metadata table
enabled builds it again, hoodied's indexing too), when its files cannot go back to the savepoint:

- the savepoint is at or before the metadata table's oldest completed compaction, or before its timeline
  starts (Hudi's two rules: no base file old enough is left);
- and, where Hudi would fail half-way instead (hoodied deletes): the metadata table has no completed
  deltacommit of the savepointed commit (it was built after it), a data-table index was built or is being
  built after the savepoint, a partition is being built, a partition hoodied cannot maintain is there
  (expression indexes), or its partition folders differ from ``hoodie.table.metadata.partitions``.

Otherwise it is RESTORED to the savepoint when the data table's instants are rolled back
(:func:`restore_metadata_table`, under the table lock): its write instants after the savepoint (compared as
Hudi compares a MERGE_ON_READ table's, :mod:`hoodie.savepoint.ordering`) are rolled back for good (their log
and base files deleted), and so are its rollbacks and restores after the savepoint; a ``restore`` instant
records that on its timeline; then one "sync" deltacommit at a new time (table version 6: that time with the
suffix ``003``) records what differs between its ``files`` partition and the data table's files on storage
(files cleaned after the savepoint go; files it no longer lists come back), with column statistics and bloom
filters of those files. The record index and secondary indexes stay as they were at the savepoint, which is
what the data now holds. A file group of the metadata table left with no slice at or before the savepoint
(cleaned), or a log file shared with other instants (Hudi 0.x appends), cannot go back: the metadata table is
deleted then (Hudi fails and asks the user to delete it).

While the restore runs, the data table's instants are rolled back without touching the metadata table, which
would list their deleted files: hoodied takes the metadata table out of ``hoodie.table.metadata.partitions``
for that time (:func:`hide_metadata_table`; readers list storage, as for a table without one) and puts its
partitions back when it is restored. A restore that dies meanwhile finds it hidden and restores it then.
"""

from __future__ import annotations

import logging
import posixpath
from dataclasses import dataclass
from typing import Literal

from hoodie.config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT, TableConfig
from hoodie.errors import CorruptMetadataTable, CorruptTimelineFile, HoodieError
from hoodie.failpoints import failpoint
from hoodie.file_group.fs_view import classify_listing
from hoodie.lock import LockProvider, held
from hoodie.metadata.reader import METADATA_TABLE_PATH, MetadataTable, storage_listing
from hoodie.metadata.records import MetadataPartition, MetadataRecord
from hoodie.metadata.updates import update_for_clean, update_for_rewrite
from hoodie.metadata.writer import MetadataTableNotSupported, MetadataUpdate, MetadataWriter, check_supported
from hoodie.metadata_table import delete_metadata_table
from hoodie.savepoint.ordering import instants_after
from hoodie.savepoint.rollback import SharedLogFile, files_of_instant
from hoodie.storage import Storage
from hoodie.timeline.instant import COMMIT, DELTA_COMMIT, INDEXING, RESTORE, ROLLBACK, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    InstantInfo,
    RestoreMetadata,
    RestorePlan,
    RollbackMetadata,
    RollbackPartitionMetadata,
    WriteStat,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter

logger = logging.getLogger(__name__)

__all__ = [
    "MetadataTableDecision",
    "delete_for_restore",
    "hide_metadata_table",
    "metadata_table_decision",
    "restore_metadata_table",
]

#: Suffix of the sync deltacommit's time on a table version 6 metadata table (Hudi 0.x's restore timestamp).
V6_RESTORE_SUFFIX = "003"
_PROPERTIES = f"{METADATA_TABLE_PATH}/.hoodie/hoodie.properties"


class CannotRestore(HoodieError):
    """The metadata table cannot be taken back to the savepoint (it is deleted instead)."""


@dataclass(frozen=True)
class MetadataTableDecision:
    """What a restore does with the metadata table, and why."""

    action: Literal["none", "delete", "restore"]
    reason: str


def _exists(storage: Storage) -> bool:
    return storage.exists(_PROPERTIES)


def _folders(mdt: MetadataTable) -> set[str]:
    """The metadata table's partitions on storage (folders holding files)."""
    return {
        info.name
        for info in mdt.storage.list("")
        if info.is_dir and not info.name.startswith(".") and mdt.storage.list(info.name)
    }


def metadata_table_decision(
    storage: Storage, config: TableConfig, data_timeline: Timeline, savepoint_time: str
) -> MetadataTableDecision:
    """Whether a restore to ``savepoint_time`` deletes the metadata table first or restores it (see the
    module doc). Reads the metadata table's timeline and config."""
    if not _exists(storage):
        return MetadataTableDecision("none", "the table has no metadata table")
    try:
        mdt = MetadataTable.load(storage, config, data_timeline)
    except HoodieError as e:
        return MetadataTableDecision("delete", f"its metadata table does not read: {e}")
    timeline = mdt.timeline
    compactions = [i for i in timeline.completed() if i.action == COMMIT]
    if compactions and savepoint_time <= compactions[0].time:
        return MetadataTableDecision(
            "delete",
            f"the savepoint is at or before the metadata table's oldest compaction {compactions[0].time}",
        )
    writes = [i for i in timeline if i.action in (COMMIT, DELTA_COMMIT)]
    if not writes or savepoint_time < writes[0].time:
        start = writes[0].time if writes else "none"
        return MetadataTableDecision(
            "delete", f"the savepoint is before the metadata table's timeline starts ({start})"
        )
    if not timeline.is_committed(savepoint_time):
        return MetadataTableDecision(
            "delete",
            f"the metadata table has no deltacommit of {savepoint_time}: it was built after the savepoint",
        )
    if config.props.get(METADATA_PARTITIONS_INFLIGHT, "").strip():
        return MetadataTableDecision("delete", "a metadata-table partition is being built")
    indexed = [i.time for i in data_timeline if i.action == INDEXING and i.time > savepoint_time]
    if indexed:
        return MetadataTableDecision(
            "delete", f"index(es) were built after the savepoint ({', '.join(indexed)})"
        )
    declared = set(config.metadata_partitions)
    if declared and declared != _folders(mdt):
        return MetadataTableDecision(
            "delete",
            f"its partitions on storage {sorted(_folders(mdt))} are not the declared ones {sorted(declared)}",
        )
    try:
        check_supported(
            storage, config.updated({METADATA_PARTITIONS: ",".join(sorted(_folders(mdt)))}), "restore"
        )
    except MetadataTableNotSupported as e:
        return MetadataTableDecision("delete", str(e))
    return MetadataTableDecision("restore", "its instants after the savepoint can be rolled back")


def delete_for_restore(storage: Storage, lock: LockProvider, reason: str) -> None:
    """Delete the metadata table (and clear the partitions the table config lists) before a restore."""
    delete_metadata_table(storage, lock, reason=f"restore: {reason}")


def hide_metadata_table(storage: Storage, lock: LockProvider) -> None:
    """Take the metadata table out of ``hoodie.table.metadata.partitions`` while the restore rolls back
    (readers list storage meanwhile); its folder stays, and :func:`restore_metadata_table` puts it back."""
    with held(lock):
        config = TableConfig.load(storage)
        if config.metadata_partitions and _exists(storage):
            config.updated({METADATA_PARTITIONS: ""}).store(storage)
            logger.info("restore of %s: the metadata table is out of use until it is restored", storage.uri)


def restore_metadata_table(
    storage: Storage,
    lock: LockProvider,
    savepoint_time: str,
    *,
    time_generator: InstantTimeGenerator,
) -> str:
    """Take the metadata table back to ``savepoint_time`` and sync it with the data table's files (see the
    module doc), or delete it when it cannot go back; returns what was done. Under the table lock."""
    with held(lock):
        if not _exists(storage):
            return "none"
        config = TableConfig.load(storage)
        data_timeline = Timeline.load(storage, config)
        try:
            mdt = MetadataTable.load(storage, config, data_timeline)
            partitions = sorted(config.metadata_partitions or _folders(mdt))
            scoped = config.updated({METADATA_PARTITIONS: ",".join(partitions)})
            mdt = MetadataTable.load(storage, scoped, data_timeline)
            summary = _restore(storage, lock, mdt, savepoint_time, time_generator)
        except (CannotRestore, SharedLogFile, CorruptMetadataTable, CorruptTimelineFile) as e:
            delete_for_restore(storage, lock, f"it cannot be restored to {savepoint_time}: {e}")
            return f"deleted ({e})"
        scoped.store(storage)
    logger.info("restore of %s: metadata table %s", storage.uri, summary)
    return summary


def _restore(
    storage: Storage,
    lock: LockProvider,
    mdt: MetadataTable,
    savepoint_time: str,
    generator: InstantTimeGenerator,
) -> str:
    mstorage = mdt.storage
    mconfig = mdt.config
    timeline = mdt.timeline
    writer = TimelineWriter(mstorage, mconfig, lock, time_generator=generator)
    if not timeline.is_committed(savepoint_time):
        raise CannotRestore(f"it has no completed deltacommit of {savepoint_time}")
    # Anything an earlier attempt of this restore left after the savepoint goes first (its restore and sync).
    for instant in reversed(
        [i for i in timeline if i.action in (ROLLBACK, RESTORE) and i.time > savepoint_time]
    ):
        _remove(writer, instant)
    timeline = Timeline.load(mstorage, mconfig)
    doomed = instants_after(timeline, savepoint_time, merge_on_read=True)
    listing = classify_listing(mstorage.list("", recursive=True), base_extension="hfile")
    # The metadata table's own restore instant, as its write client's restore leaves it (its rollbacks are
    # not kept: the restore deletes them when it completes).
    restore_time = generator.next(storage, mdt.data_config)
    rolled: dict[str, tuple[RollbackMetadata, ...]] = {}
    for instant in doomed:
        current = Timeline.load(mstorage, mconfig)
        files = files_of_instant(
            mstorage, current, instant, table_version=mconfig.table_version, listing=listing, voidable=False
        )
        pending = writer.revert_to_inflight(instant) if instant.state is State.COMPLETED else instant
        deleted: dict[str, list[str]] = {}
        for path in files.delete:
            mstorage.delete(path)
            deleted.setdefault(posixpath.dirname(path), []).append(mstorage.full_path(path))
        if pending is not None:
            writer.delete_pending(pending)
        rolled[instant.time] = (
            RollbackMetadata(
                start_rollback_time=restore_time,
                time_taken_in_millis=0,
                total_files_deleted=len(files.delete),
                commits_rollback=(instant.time,),
                partition_metadata={
                    p: RollbackPartitionMetadata(partition_path=p, success_delete_files=tuple(paths))
                    for p, paths in deleted.items()
                },
                instants_rollback=(InstantInfo(instant.time, instant.action),),
            ),
        )
    _check_slices(mdt, savepoint_time)
    failpoint("restore.metadata_table_rolled_back")
    plan = RestorePlan(
        instants_to_rollback=tuple(InstantInfo(i.time, i.action) for i in doomed),
        savepoint_to_restore_timestamp=savepoint_time,
    )
    restore = writer.start(writer.request(RESTORE, restore_time, plan))
    writer.complete(
        restore,
        RestoreMetadata(
            start_restore_time=restore_time,
            time_taken_in_millis=0,
            instants_to_rollback=tuple(i.time for i in doomed),
            hoodie_restore_metadata=rolled,
            restore_instant_info=tuple(InstantInfo(i.time, i.action) for i in doomed),
        ),
    )
    sync_time = generator.next(storage, mdt.data_config)
    if mconfig.table_version < 8:
        sync_time += V6_RESTORE_SUFFIX
    fresh = MetadataTable.load(storage, mdt.data_config, Timeline.load(storage, mdt.data_config))
    update = _sync_update(storage, fresh, sync_time)
    MetadataWriter(fresh, lock, time_generator=generator).write_deltacommit(update)
    failpoint("restore.metadata_table_synced")
    added = sum(len(v) for v in update.files_added.values())
    removed = sum(len(v) for v in update.files_deleted.values())
    return (
        f"restored to {savepoint_time}: {len(doomed)} instant(s) rolled back, sync deltacommit {sync_time} "
        f"({added} file(s) listed again, {removed} cleaned file(s) unlisted)"
    )


def _remove(writer: TimelineWriter, instant: Instant) -> None:
    """Delete an instant's timeline files (completed first); it wrote no data files."""
    pending: Instant | None = instant
    if instant.state is State.COMPLETED:
        pending = writer.revert_to_inflight(instant)
    if pending is not None:
        writer.delete_pending(pending)


def _check_slices(mdt: MetadataTable, savepoint_time: str) -> None:
    """Every file group of every metadata-table partition keeps a slice at or before the savepoint (Hudi
    checks the ``files`` partition: "no base file in MDT lesser than the commit to restore to")."""
    listing = classify_listing(mdt.storage.list("", recursive=True), base_extension="hfile")
    earliest: dict[tuple[str, str], str] = {}
    for f in listing:
        if f.base is not None:
            key, instant = (f.partition_path, f.base.file_id), f.base.instant_time
        elif f.log is not None:
            key, instant = (f.partition_path, f.log.file_id), f.log.instant
        else:
            continue
        if key not in earliest or instant < earliest[key]:
            earliest[key] = instant
    late = sorted(f"{p}/{fid}" for (p, fid), t in earliest.items() if t > savepoint_time)
    if late:
        raise CannotRestore(f"file group(s) {', '.join(late[:3])} have no slice at or before the savepoint")


def _sync_update(storage: Storage, mdt: MetadataTable, sync_time: str) -> MetadataUpdate:
    """What differs between the ``files`` partition and the data table's committed files on storage, as one
    update: files to list again (with their statistics and bloom filters) and files to unlist."""
    listed = mdt.file_listing()
    present = storage_listing(storage, mdt.data_timeline)
    config = mdt.data_config
    added: dict[str, dict[str, int]] = {}
    deleted: dict[str, list[str]] = {}
    for partition in sorted(set(listed) | set(present)):
        have, want = listed.get(partition, {}), present.get(partition, {})
        gone = sorted(set(have) - set(want))
        if gone:
            deleted[partition] = gone
        fresh = {name: size for name, size in want.items() if have.get(name) != size}
        if fresh:
            added[partition] = fresh
    partitions_gone = [p for p in listed if p not in present and p and not storage.list(p)]
    bases = [
        WriteStat(
            file_id=name.split("_", 1)[0],
            path=f"{partition}/{name}" if partition else name,
            partition_path=partition,
            file_size_in_bytes=size,
        )
        for partition, names in sorted(added.items())
        for name, size in sorted(names.items())
        if not name.startswith(".")
    ]
    records: dict[str, list[MetadataRecord]] = {}
    if deleted:
        for p, rs in update_for_clean(storage, config, sync_time, deleted).records.items():
            records.setdefault(p, []).extend(rs)
    if bases:
        for p, rs in update_for_rewrite(
            storage, config, sync_time, bases, record_index=False
        ).records.items():
            records.setdefault(p, []).extend(rs)
    records.pop(MetadataPartition.RECORD_INDEX, None)
    return MetadataUpdate(
        sync_time,
        files_added=added,
        files_deleted=deleted,
        records=records,
        partitions_deleted=tuple(partitions_gone),
    )
