"""Clean execution: the driver's steps around the deletes, and the task that deletes a batch of files.

1. :func:`prepare_clean` (driver): picks the clean (the earliest pending one by default), checks every file
   of its plan (a data file's name, directly in its partition: a plan naming anything else is refused,
   nothing deleted), moves a requested clean to inflight (the inflight file holds the plan, as Hudi's) and
   returns the deletes in batches. An inflight clean is simply run again: deleting is idempotent.
2. :func:`delete_files` (executor, or the driver): deletes one batch, :data:`DELETE_CONCURRENCY` files at a
   time, and reports each file as deleted, already gone, or failed with the reason (:func:`delete_paths`).
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

A batch's deletes run concurrently, at most ``hoodie.clean.hoodied.delete.concurrency`` (16) at a time: a
delete waits on a round trip to the store far longer than it computes, and one at a time a batch took the sum
of its round trips. On S3 the files found are deleted 1000 to a request (``DeleteObjects``,
:meth:`~hoodie.storage.Storage.delete_many`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar, cast

from hoodie.clean.plan import pending_cleans
from hoodie.config import TableConfig
from hoodie.errors import CommitConflict, CorruptTimelineFile, HoodieError, NothingToDo, PathOutsideTable
from hoodie.failpoints import failpoint
from hoodie.file_group.base_file import BaseFile
from hoodie.lock import LockProvider
from hoodie.log.log_file import LogFile
from hoodie.metadata.updates import update_for_clean_metadata
from hoodie.metadata.writer import MetadataUpdate, maintain_metadata_table, write_metadata_update
from hoodie.metadata_table import refuse_metadata_table
from hoodie.settings import int_setting
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
from hoodie.write.attempt import AttemptFence
from hoodie.write.decision import forget_decision
from hoodie.write.service_commit import complete_decided, held_to_complete, void_superseded

logger = logging.getLogger(__name__)

DELETED = "deleted"
MISSING = "missing"
FAILED = "failed"

#: How many of a batch's files are deleted at a time (hoodied's own key, a table setting). The bound is per
#: batch: one Spark task's, or the driver's one batch of a small plan (a large plan run without Spark has as
#: many batches at once as its runner has threads). 16 overlaps an object store's round trips (one at a
#: time, a batch of 500 files waited out 500 round trips and more) with few threads and connections per
#: task; a store that throttles is retried (:mod:`hoodie.storage.retry`), or given less.
DELETE_CONCURRENCY = "hoodie.clean.hoodied.delete.concurrency"
DELETE_CONCURRENCY_DEFAULT = 16

_T = TypeVar("_T")
_R = TypeVar("_R")


class NothingToClean(NothingToDo):
    """No pending clean (or not the one asked for)."""


@dataclass(frozen=True)
class DeleteResult:
    """What happened to one file: ``deleted``, ``missing`` (already gone) or ``failed`` (with the error)."""

    path: str
    status: str
    size: int = 0
    error: str = ""


def delete_concurrency(settings: Mapping[str, str]) -> int:
    """:data:`DELETE_CONCURRENCY` of a table's settings: a positive integer
    (:class:`~hoodie.errors.InvalidWriteConfig` naming the key and the value otherwise)."""
    return int_setting(settings, DELETE_CONCURRENCY, DELETE_CONCURRENCY_DEFAULT, minimum=1, bits=32)


@dataclass(frozen=True)
class DeleteBatch:
    """A batch of files (relative paths) for one executor, deleted ``concurrency`` at a time; small and
    picklable."""

    storage: StorageRef
    paths: tuple[str, ...]
    concurrency: int = DELETE_CONCURRENCY_DEFAULT


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

    def batches(
        self, storage: Storage, size: int, concurrency: int = DELETE_CONCURRENCY_DEFAULT
    ) -> list[DeleteBatch]:
        paths = self.paths
        ref = storage.ref()
        step = max(1, size)
        return [DeleteBatch(ref, tuple(paths[i : i + step]), concurrency) for i in range(0, len(paths), step)]


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
            raise NothingToClean(f"clean {instant_time} of {storage.uri} {state}", unknown=not done)
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
    """Delete one batch of files (see :func:`delete_paths`); never raises for one file's failure."""
    return delete_paths(batch.storage.open(), batch.paths, batch.concurrency)


def delete_paths(
    storage: Storage, paths: Sequence[str], concurrency: int = DELETE_CONCURRENCY_DEFAULT
) -> list[DeleteResult]:
    """Delete ``paths``, at most ``concurrency`` requests at a time; each file's outcome, in their order.

    Each file is looked at first (its size, or that it is gone: one HEAD on an object store), then deleted.
    Where the store deletes many files a request (:attr:`~hoodie.storage.Storage.bulk_delete_size`: S3), the
    files found go that way, a request a task of the pool; a request that fails is followed by one delete
    per file of it, so that each file gets an outcome of its own (deleting twice is harmless). Never raises
    for one file's failure. The failpoint ``clean.mid_deletes`` is reached as the second file is looked at.
    """
    if concurrency < 1:
        raise ValueError(f"delete concurrency must be at least 1, not {concurrency}")
    workers = min(concurrency, len(paths))
    step = storage.bulk_delete_size
    if step == 1:
        return _bounded(partial(_delete_one, storage), list(enumerate(paths)), workers)
    looked = _bounded(partial(_look, storage), list(enumerate(paths)), workers)
    found = [(p, r) for p, r in zip(paths, looked, strict=True) if isinstance(r, int)]
    chunks = [found[i : i + step] for i in range(0, len(found), step)]
    done: dict[str, DeleteResult] = {}
    singles: list[tuple[str, int]] = []
    for chunk, outcome in zip(
        chunks, _bounded(partial(_delete_chunk, storage), chunks, workers), strict=True
    ):
        if outcome is None:
            singles.extend(chunk)
        else:
            done.update((r.path, r) for r in outcome)
    for r in _bounded(partial(_delete_found, storage), singles, workers):
        done[r.path] = r
    return [r if isinstance(r, DeleteResult) else done[p] for p, r in zip(paths, looked, strict=True)]


def _look(storage: Storage, item: tuple[int, str]) -> DeleteResult | int:
    """The size of a file that is there, or its final outcome: missing, or failed (a folder, an error)."""
    i, path = item
    if i == 1:
        failpoint("clean.mid_deletes")
    try:
        info = storage.info(path)
    except FileNotFoundError:
        return DeleteResult(path, MISSING)
    except (OSError, HoodieError) as e:
        return _failed(path, e)
    if info.is_dir:
        return DeleteResult(path, FAILED, 0, f"{path} is a folder, not a file")
    return info.size


def _delete_one(storage: Storage, item: tuple[int, str]) -> DeleteResult:
    found = _look(storage, item)
    return found if isinstance(found, DeleteResult) else _delete_found(storage, (item[1], found))


def _delete_found(storage: Storage, item: tuple[str, int]) -> DeleteResult:
    """Delete one file found there (``item``: its path and size): deleted, or failed with the error."""
    path, size = item
    try:
        storage.delete_many([path])
    except (OSError, HoodieError) as e:
        return _failed(path, e)
    return DeleteResult(path, DELETED, size)


def _delete_chunk(storage: Storage, chunk: Sequence[tuple[str, int]]) -> list[DeleteResult] | None:
    """Delete files found there in one request: all deleted, or ``None`` when the request failed for more
    than one (which of them are left is not known: they are deleted one by one next)."""
    try:
        storage.delete_many([path for path, _ in chunk])
    except (OSError, HoodieError) as e:
        if len(chunk) == 1:
            return [_failed(chunk[0][0], e)]
        logger.warning(
            "clean: deleting %d file(s) in one request failed (%s); deleting them one by one", len(chunk), e
        )
        return None
    return [DeleteResult(path, DELETED, size) for path, size in chunk]


def _failed(path: str, error: Exception) -> DeleteResult:
    return DeleteResult(path, FAILED, 0, f"{type(error).__name__}: {error}")


def _bounded(fn: Callable[[_T], _R], items: Sequence[_T], workers: int) -> list[_R]:
    """``fn`` of each item, in their order, on at most ``workers`` threads (here, for one).

    Each thread takes the next item as it finishes one: no task object per item, where an executor's
    ``map`` makes a future each (for 100,000 files some 160 MB, and as much time as unlinking them). The
    first exception stops the threads taking more and is raised here.
    """
    if workers <= 1 or len(items) <= 1:
        return [fn(item) for item in items]
    out: list[_R | None] = [None] * len(items)
    order = iter(range(len(items)))
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work() -> None:
        while True:
            with lock:
                i = None if errors else next(order, None)
            if i is None:
                return
            try:
                out[i] = fn(items[i])
            except BaseException as e:
                with lock:
                    errors.append(e)
                return

    threads = [
        threading.Thread(target=work, name=f"clean-delete-{n}") for n in range(min(workers, len(items)))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return cast(list[_R], out)


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
    writer = TimelineWriter(storage, table.config, lock, time_generator=time_generator)
    run = fence if isinstance(fence, AttemptFence) else None
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

        def build(cfg: TableConfig) -> MetadataUpdate:
            # As Hudi's: the metadata table drops a partition only where the clean's metadata says so.
            return update_for_clean_metadata(storage, cfg, instant.time, metadata)

        if run is None:
            write_metadata_update(
                storage, latest.config, lock, build, service="clean", time_generator=time_generator
            )
            failpoint("clean.after_metadata_commit")
            done = completion.done = writer.complete(instant, content)
        else:
            # A clean is run again, not rolled back, when taken over: the attempts it superseded are voided
            # here, before it decides (hoodie.write.decision), so a stale one cannot complete it as well.
            void_superseded(storage, lock, instant.time, run)
            done = completion.done = complete_decided(
                storage, latest.config, lock, writer, instant, content, run, build, "clean", "clean"
            )
    if run is not None:
        forget_decision(storage, instant.time, run.attempt)
    maintain_metadata_table(storage, lock, time_generator=time_generator)
    deleted_bytes = sum(r.size for r in results if r.status == DELETED)
    logger.debug(
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
    concurrency: int = DELETE_CONCURRENCY_DEFAULT,
    fence: Callable[[], None] | None = None,
) -> CleanResult:
    """Run a pending clean in this process, its files one batch deleted ``concurrency`` at a time (hoodied
    runs large plans as Spark tasks, see ``hoodie.clean.service``)."""
    started = time.monotonic()
    prepared = prepare_clean(storage, lock, instant_time)
    results = delete_paths(storage, prepared.paths, concurrency)
    return commit_clean(storage, lock, prepared, results, started=started, fence=fence)


__all__ = [
    "DELETED",
    "DELETE_CONCURRENCY",
    "DELETE_CONCURRENCY_DEFAULT",
    "FAILED",
    "MISSING",
    "CleanResult",
    "DeleteBatch",
    "DeleteResult",
    "NothingToClean",
    "PreparedClean",
    "clean_in_process",
    "commit_clean",
    "delete_concurrency",
    "delete_files",
    "delete_partitions",
    "delete_paths",
    "plan_files",
    "plan_partitions",
    "prepare_clean",
]
