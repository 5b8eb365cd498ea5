"""Clean execution: the driver's steps around the deletes, and the task that deletes a batch of files.

1. :func:`prepare_clean` (driver): picks the clean (the earliest pending one by default), checks every file
   of its plan (a data file's name, directly in its partition: a plan naming anything else is refused,
   nothing deleted), moves a requested clean to inflight (the inflight file holds the plan, as Hudi's) and
   returns the deletes in batches. An inflight clean is simply run again: deleting is idempotent.
2. :func:`delete_files` (executor, or a thread): deletes one batch and reports each file as deleted,
   already gone, or failed with the reason.
3. :func:`commit_clean` (driver): deletes the folders of the plan's ``partitionsToBeDeleted`` (partitions a
   ``DELETE_PARTITION`` emptied; only on partitioned tables, as Hudi; a folder that still holds a data file is
   kept and logged: a writer put data there since the plan), then under the table lock re-checks the claim
   (``fence``) and that the clean is still pending, and completes it with ``HoodieCleanMetadata`` (per
   partition: the plan's file names, those deleted, those that failed, whether the partition was deleted);
   the metadata table drops the deleted partitions from its partition list.

A plan naming a partition outside the table (``..``, an absolute path, a hidden folder such as ``.hoodie``) is
refused before anything is deleted, as is one naming a file that is not a Hudi data file of its partition.

A file already gone when the clean runs (deleted by an earlier attempt of the same clean) is reported as
deleted: Hudi reports it as failed, which would make a retried clean look broken and, for metadata-table
updates, leave the file listed. A file that exists but cannot be deleted is reported as failed and logged;
the clean still completes (the file is an old version nobody reads; the next clean's plan does not name it
again, as Hudi's does not).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from hoodie.clean.plan import pending_cleans
from hoodie.errors import CommitConflict, CorruptTimelineFile, HoodieError, NothingToDo, PathOutsideTable
from hoodie.failpoints import failpoint
from hoodie.file_group.base_file import BaseFile
from hoodie.lock import LockProvider
from hoodie.log.log_file import LogFile
from hoodie.metadata.updates import update_for_clean
from hoodie.metadata.writer import maintain_metadata_table, write_metadata_update
from hoodie.metadata_table import refuse_metadata_table
from hoodie.storage import Storage, StorageRef, check_relative
from hoodie.table import Table
from hoodie.timeline.instant import CLEAN, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    CleanerPlan,
    CleanMetadata,
    CleanPartitionMetadata,
    decode_cleaner_plan,
    encode_clean_metadata,
    file_name_in_partition,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.service_commit import held_to_complete

logger = logging.getLogger(__name__)

DELETED = "deleted"
MISSING = "missing"
FAILED = "failed"


class NothingToClean(NothingToDo):
    """No pending clean (or not the one asked for)."""


@dataclass(frozen=True)
class DeleteResult:
    """What happened to one file: ``deleted``, ``missing`` (already gone) or ``failed`` (with the error)."""

    path: str
    status: str
    size: int = 0
    error: str = ""


@dataclass(frozen=True)
class DeleteBatch:
    """A batch of files (relative paths) for one executor; small and picklable."""

    storage: StorageRef
    paths: tuple[str, ...]


@dataclass(frozen=True)
class PreparedClean:
    """A clean moved to inflight, with its plan and the files to delete (relative paths, by partition)."""

    instant: Instant
    plan: CleanerPlan
    files: dict[str, tuple[str, ...]]
    partitions: tuple[str, ...] = ()  # partition folders to delete once emptied

    @property
    def paths(self) -> list[str]:
        return [p for paths in self.files.values() for p in paths]

    def batches(self, storage: Storage, size: int) -> list[DeleteBatch]:
        paths = self.paths
        ref = storage.ref()
        return [DeleteBatch(ref, tuple(paths[i : i + size])) for i in range(0, len(paths), max(1, size))]


@dataclass(frozen=True)
class CleanResult:
    """A completed clean."""

    instant: Instant
    metadata: CleanMetadata
    bytes_deleted: int
    failed: tuple[DeleteResult, ...]

    @property
    def files_deleted(self) -> int:
        return self.metadata.total_files_deleted


def plan_files(plan: CleanerPlan) -> dict[str, tuple[str, ...]]:
    """The plan's files as paths relative to the base path, by partition; refuses anything that is not a
    base or log file directly in its partition (:class:`~hoodie.errors.PathOutsideTable`)."""
    out: dict[str, tuple[str, ...]] = {}
    entries: dict[str, list[str]] = {}
    for partition, infos in plan.file_paths_to_be_deleted_per_partition.items():
        entries.setdefault(partition, []).extend(i.file_path or "" for i in infos)
    for partition, names in plan.files_to_be_deleted_per_partition.items():  # plan version 1
        entries.setdefault(partition, []).extend(names)
    for partition, paths in entries.items():
        rel = []
        for path in paths:
            name = file_name_in_partition(path, partition)
            if not _is_data_file(name):
                raise PathOutsideTable(
                    f"clean plan names {path!r} in partition {partition!r}, which is not a Hudi data file; "
                    "refusing to run the plan"
                )
            rel.append(f"{partition}/{name}" if partition else name)
        out[partition] = tuple(dict.fromkeys(rel))
    return out


def plan_partitions(plan: CleanerPlan, partitioned: bool) -> tuple[str, ...]:
    """The partitions the plan deletes (``partitionsToBeDeleted``; none on a non-partitioned table, as Hudi),
    each checked to be a partition folder of the table (:class:`~hoodie.errors.PathOutsideTable` else)."""
    if not partitioned:
        return ()
    out = []
    for partition in plan.partitions_to_be_deleted:
        if not partition:
            continue  # Hudi skips empty entries
        rel = check_relative(partition)
        if not rel or any(part.startswith(".") for part in rel.split("/")):
            raise PathOutsideTable(
                f"clean plan deletes partition {partition!r}, which is not a partition folder of the table; "
                "refusing to run the plan"
            )
        out.append(rel)
    return tuple(dict.fromkeys(out))


def delete_partitions(storage: Storage, partitions: Sequence[str]) -> tuple[str, ...]:
    """Delete the folders of ``partitions`` that hold no Hudi data file any more; returns those deleted (or
    already gone). A folder still holding data (written after the plan) is kept, and logged."""
    deleted = []
    for partition in partitions:
        left = [
            f.path for f in storage.list(partition, recursive=True) if not f.is_dir and _is_data_file(f.name)
        ]
        if left:
            logger.warning(
                "clean: partition %s still holds %d data file(s) (e.g. %s), written after the plan: kept",
                partition,
                len(left),
                left[0],
            )
            continue
        storage.delete_dir(partition)
        deleted.append(partition)
    return tuple(deleted)


def _is_data_file(name: str) -> bool:
    return BaseFile.try_parse(name) is not None or LogFile.try_parse(name) is not None


def prepare_clean(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
) -> PreparedClean:
    """Move the clean at ``instant_time`` (default: the earliest pending) to inflight; return its deletes."""
    table = view if view is not None else Table.load(storage)
    refuse_metadata_table(storage, table.config, "clean")
    pending = pending_cleans(table)
    if instant_time is None:
        if not pending:
            raise NothingToClean(f"{storage.uri} has no pending clean")
        instant = pending[0]
    else:
        found = table.timeline.get(instant_time)
        if found is None or found.action != CLEAN or found.state is State.COMPLETED:
            done = found is not None and found.action == CLEAN
            state = "has already completed" if done else "is not pending"
            raise NothingToClean(f"clean {instant_time} of {storage.uri} {state}")
        instant = found
    path = table.timeline.file_of(instant.time, State.REQUESTED)
    data = storage.read(path)
    try:
        plan = decode_cleaner_plan(data)
    except PathOutsideTable:
        raise
    except HoodieError as e:
        raise CorruptTimelineFile(f"{path}: cannot read the clean plan: {e}") from e
    files = plan_files(plan)
    partitions = plan_partitions(plan, bool(table.config.partition_fields))
    if instant.state is State.REQUESTED:
        writer = TimelineWriter(storage, table.config, lock, time_generator=time_generator)
        instant = writer.start(instant, data)
    failpoint("clean.after_inflight")
    return PreparedClean(instant, plan, files, partitions)


def delete_files(batch: DeleteBatch) -> list[DeleteResult]:
    """Delete one batch of files (see the module doc); never raises for one file's failure."""
    storage = batch.storage.open()
    out = []
    for i, path in enumerate(batch.paths):
        if i == 1:
            failpoint("clean.mid_deletes")
        try:
            size = storage.size(path) if storage.exists(path) else -1
            if size < 0:
                out.append(DeleteResult(path, MISSING))
                continue
            storage.delete(path)
            out.append(DeleteResult(path, DELETED, size))
        except (OSError, HoodieError) as e:
            out.append(DeleteResult(path, FAILED, 0, f"{type(e).__name__}: {e}"))
    return out


def commit_clean(
    storage: Storage,
    lock: LockProvider,
    prepared: PreparedClean,
    results: Sequence[DeleteResult],
    *,
    started: float | None = None,
    fence: Callable[[], None] | None = None,
    time_generator: InstantTimeGenerator | None = None,
) -> CleanResult:
    """Complete the clean with what was deleted (see the module doc)."""
    instant = prepared.instant
    by_path = {r.path: r for r in results}
    missing = [p for p in prepared.paths if p not in by_path]
    if missing:
        raise HoodieError(
            f"clean {instant.time}: no delete result for {len(missing)} file(s), e.g. {missing[0]}"
        )
    dropped = delete_partitions(storage, prepared.partitions)
    policy = prepared.plan.policy
    partitions: dict[str, CleanPartitionMetadata] = {}
    failed: list[DeleteResult] = []
    total = 0
    for partition, paths in sorted(prepared.files.items()):
        names = [p.rsplit("/", 1)[-1] for p in paths]
        ok = [n for p, n in zip(paths, names, strict=True) if by_path[p].status != FAILED]
        bad = [n for p, n in zip(paths, names, strict=True) if by_path[p].status == FAILED]
        failed.extend(by_path[p] for p in paths if by_path[p].status == FAILED)
        total += len(ok)
        partitions[partition] = CleanPartitionMetadata(
            partition_path=partition,
            policy=policy,
            delete_path_patterns=tuple(names),
            success_delete_files=tuple(ok),
            failed_delete_files=tuple(bad),
            is_partition_deleted=partition in dropped,
        )
    for r in failed:
        logger.warning("clean %s of %s: could not delete %s: %s", instant.time, storage.uri, r.path, r.error)
    ectr = prepared.plan.earliest_instant_to_retain
    metadata = CleanMetadata(
        start_clean_time=instant.time,
        time_taken_in_millis=int((time.monotonic() - started) * 1000) if started is not None else 0,
        total_files_deleted=total,
        earliest_commit_to_retain=ectr.timestamp if ectr is not None else "",
        last_completed_commit_timestamp=prepared.plan.last_completed_commit_timestamp,
        partition_metadata=partitions,
    )
    failpoint("clean.before_commit")
    table = Table.load(storage)
    content = encode_clean_metadata(metadata, table_version=table.config.table_version)
    deleted = {p: m.delete_path_patterns for p, m in partitions.items() if m.delete_path_patterns}
    # As Hudi's: the metadata table drops a partition only where the clean's metadata says it was deleted.
    gone = tuple(p for p, m in partitions.items() if m.is_partition_deleted)
    writer = TimelineWriter(storage, table.config, lock, time_generator=time_generator)
    with held_to_complete(lock) as completion:
        if fence is not None:
            fence()
        latest = Table.load(storage)
        current = latest.timeline.get(instant.time)
        if current is None or current.state is not State.INFLIGHT or current.action != CLEAN:
            raise CommitConflict(
                f"clean {instant.time} is no longer inflight ({current or 'gone'}); "
                "another runner completed it"
            )
        write_metadata_update(
            storage,
            latest.config,
            lock,
            lambda cfg: update_for_clean(storage, cfg, instant.time, deleted, partitions_deleted=gone),
            service="clean",
            time_generator=time_generator,
        )
        failpoint("clean.after_metadata_commit")
        done = completion.done = writer.complete(instant, content)
    maintain_metadata_table(storage, lock, time_generator=time_generator)
    deleted_bytes = sum(r.size for r in results if r.status == DELETED)
    logger.info(
        "completed clean %s on %s: %d file(s) gone, %d byte(s) freed now, %d failed",
        instant.time,
        storage.uri,
        total,
        deleted_bytes,
        len(failed),
    )
    return CleanResult(done, metadata, deleted_bytes, tuple(failed))


def clean_in_process(
    storage: Storage,
    lock: LockProvider,
    instant_time: str | None = None,
    *,
    parallelism: int = 8,
    batch_size: int = 64,
    fence: Callable[[], None] | None = None,
) -> CleanResult:
    """Run a pending clean with its deletes on a thread pool in this process (hoodied uses Spark for large
    plans, see ``hoodie.clean.service``)."""
    started = time.monotonic()
    prepared = prepare_clean(storage, lock, instant_time)
    batches = prepared.batches(storage, batch_size)
    results: list[DeleteResult] = []
    if batches:
        with ThreadPoolExecutor(max_workers=max(1, min(parallelism, len(batches)))) as pool:
            for part in pool.map(delete_files, batches):
                results.extend(part)
    return commit_clean(storage, lock, prepared, results, started=started, fence=fence)


__all__ = [
    "DELETED",
    "FAILED",
    "MISSING",
    "CleanResult",
    "DeleteBatch",
    "DeleteResult",
    "NothingToClean",
    "PreparedClean",
    "clean_in_process",
    "commit_clean",
    "delete_files",
    "delete_partitions",
    "plan_files",
    "plan_partitions",
    "prepare_clean",
]
