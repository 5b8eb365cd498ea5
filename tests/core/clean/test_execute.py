"""Clean execution's deletes: a batch deletes at most ``hoodie.clean.hoodied.delete.concurrency`` files at a
time (watched through a real local storage that counts the requests under way), every file gets its own
outcome with failures mixed in, and on S3 (moto) the files found go 1000 to a ``DeleteObjects`` request,
one request at a time again when a bulk request fails."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hoodie.clean.execute import (
    DELETE_CONCURRENCY,
    DELETE_CONCURRENCY_DEFAULT,
    DELETED,
    FAILED,
    MISSING,
    DeleteBatch,
    clean_in_process,
    delete_concurrency,
    delete_files,
    delete_paths,
    plan_files,
)
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.clean.service import Clean
from hoodie.errors import InvalidWriteConfig
from hoodie.file_group.base_file import BaseFile
from hoodie.lock import FileSystemLock, lock_for_table
from hoodie.storage import FileInfo, Storage
from hoodie.storage.local import LocalBackend
from hoodie.table import Table
from hoodie.table_service import run_in_process
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from support.s3_faults import FaultProxy
from support.s3_server import S3Server

#: Each request the watched storage holds, so that requests a pool runs together overlap for sure.
HOLD = 0.02


class WatchedStorage(Storage):
    """A local storage that holds each look-up and delete a moment and records the most under way at once."""

    def __init__(self, root: Path) -> None:
        super().__init__(LocalBackend(), str(root), str(root))
        self._lock = threading.Lock()
        self._running = 0
        self.most = 0

    @contextlib.contextmanager
    def _request(self) -> Iterator[None]:
        with self._lock:
            self._running += 1
            self.most = max(self.most, self._running)
        try:
            time.sleep(HOLD)
            yield
        finally:
            with self._lock:
                self._running -= 1

    def info(self, path: str) -> FileInfo:
        with self._request():
            return super().info(path)

    def delete_many(self, paths: Sequence[str]) -> None:
        with self._request():
            super().delete_many(paths)


def _data_file_names(n: int, instant: str = "20260101000000000") -> list[str]:
    return [BaseFile(f"{uuid.UUID(int=i)}-0", "1-0-1", instant).file_name for i in range(n)]


def _write(root: Path, paths: Sequence[str], size: int = 3) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(b"x" * size)


@pytest.mark.parametrize("bound", [1, 4])
def test_a_batch_deletes_at_most_its_bound_at_a_time(tmp_path: Path, bound: int) -> None:
    paths = [f"p/{name}" for name in _data_file_names(24)]
    _write(tmp_path, paths)
    storage = WatchedStorage(tmp_path)
    results = delete_paths(storage, paths, bound)
    assert storage.most == bound  # reached (the deletes overlap), never passed
    assert [(r.path, r.status, r.size) for r in results] == [(p, DELETED, 3) for p in paths]
    assert list((tmp_path / "p").iterdir()) == []


def test_outcomes_with_failures_mixed_in_and_a_second_run(tmp_path: Path) -> None:
    """Deleted (with the size it had), missing, failed (a folder where the file should be, a path outside the
    table): each file its own outcome, in the batch's order; run again, what was deleted is missing."""
    names = _data_file_names(12)
    there = [f"p/{n}" for n in names[:8]]
    gone = [f"p/{n}" for n in names[8:10]]
    folder = f"p/{names[10]}"
    outside = f"../{names[11]}"
    table = tmp_path / "t"
    _write(table, there, size=5)
    (table / folder).mkdir()
    (tmp_path / names[11]).write_bytes(b"victim")
    batch = [there[0], gone[0], folder, *there[1:5], outside, gone[1], *there[5:]]
    storage = Storage.for_uri(str(table))

    first = delete_paths(storage, batch, 4)
    expected = {p: (DELETED, 5) for p in there} | {p: (MISSING, 0) for p in gone}
    assert [r.path for r in first] == batch
    for r in first:
        if r.path in (folder, outside):
            assert (r.status, r.size) == (FAILED, 0)
        else:
            assert ((r.status, r.size), r.error) == (expected[r.path], "")
    errors = {r.path: r.error for r in first if r.status == FAILED}
    assert "folder" in errors[folder]
    assert errors[outside].startswith("PathOutsideTable")
    assert (table / folder).is_dir()
    assert (tmp_path / names[11]).read_bytes() == b"victim"
    assert sorted(p.name for p in (table / "p").iterdir()) == [names[10]]

    second = delete_paths(storage, batch, 4)
    assert [r.status for r in second] == [FAILED if p in (folder, outside) else MISSING for p in batch]


class BrokenStorage(Storage):
    """A local storage whose look-up of one file fails as no storage error does (a bug, not a store)."""

    def __init__(self, root: Path, broken: str) -> None:
        super().__init__(LocalBackend(), str(root), str(root))
        self.broken = broken

    def info(self, path: str) -> FileInfo:
        if path == self.broken:
            raise RuntimeError(f"looking at {path} went wrong")
        return super().info(path)


def test_an_error_that_is_no_files_outcome_is_raised(tmp_path: Path) -> None:
    paths = [f"p/{name}" for name in _data_file_names(30)]
    _write(tmp_path, paths)
    with pytest.raises(RuntimeError, match="went wrong"):
        delete_paths(BrokenStorage(tmp_path, paths[7]), paths, 4)


def test_the_bound_must_be_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        delete_paths(Storage.for_uri(str(tmp_path)), ["p/x.parquet"], 0)


def test_the_setting_names_its_key_and_value() -> None:
    assert delete_concurrency({}) == DELETE_CONCURRENCY_DEFAULT == 16
    assert delete_concurrency({DELETE_CONCURRENCY: " 3 "}) == 3
    for bad, why in (("0", "positive"), ("-2", "positive"), ("many", "not an integer"), ("2.5", "integer")):
        with pytest.raises(InvalidWriteConfig, match=rf"{DELETE_CONCURRENCY}='{bad}'.*{why}"):
            delete_concurrency({DELETE_CONCURRENCY: bad})
        with pytest.raises(InvalidWriteConfig, match=DELETE_CONCURRENCY):
            Clean().check_settings({DELETE_CONCURRENCY: bad})


def _cow_with_a_clean(root: Path) -> tuple[Storage, FileSystemLock, str, list[str]]:
    """A COW table with a clean requested (every slice but the latest of each file group); its files."""
    generate_table(
        str(root),
        GenerateSpec(
            table_type="COPY_ON_WRITE", rows=100, commits=4, update_fraction=0.5, partitions=2, seed=7
        ),
    )
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    scheduled = schedule_clean(storage, lock, config=config)
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    return (
        storage,
        lock,
        scheduled.instant.time,
        [p for ps in plan_files(scheduled.plan).values() for p in ps],
    )


def test_the_service_gives_every_batch_the_tables_bound(tmp_path: Path) -> None:
    """A small plan is one batch in the driver (the bound holds for the whole driver), a large one a batch
    per task; each carries the setting. A bad value fails before the clean goes inflight."""
    storage, lock, t, paths = _cow_with_a_clean(tmp_path / "t")
    with pytest.raises(InvalidWriteConfig, match=DELETE_CONCURRENCY):
        Clean().prepare(storage, lock, t, {DELETE_CONCURRENCY: "0"})
    assert Table.load(storage).timeline.get(t).state is State.REQUESTED  # type: ignore[union-attr]

    small = Clean().prepare(storage, lock, t, {DELETE_CONCURRENCY: "3"})
    assert small.in_driver
    assert [(b.paths, b.concurrency) for b in small.tasks] == [(tuple(paths), 3)]
    large = Clean(executor_min_files=1, parallelism=4).prepare(storage, lock, t, {})
    assert not large.in_driver
    assert len(large.tasks) == min(4, len(paths))
    assert [p for b in large.tasks for p in b.paths] == paths
    assert {b.concurrency for b in large.tasks} == {DELETE_CONCURRENCY_DEFAULT}
    done = run_in_process(large, threads=2)
    assert done.files_deleted == len(paths)


def test_a_clean_completes_with_a_file_it_could_not_delete(tmp_path: Path) -> None:
    """A folder stands where one of the plan's files was: that file is reported failed in the clean's
    metadata, every other one deleted."""
    root = tmp_path / "t"
    storage, lock, t, paths = _cow_with_a_clean(root)
    stuck = paths[0]
    (root / stuck).unlink()
    (root / stuck).mkdir()
    result = clean_in_process(storage, lock, t, concurrency=4)
    assert [r.path for r in result.failed] == [stuck]
    partition, name = stuck.rsplit("/", 1)
    metadata = result.metadata.partition_metadata
    assert metadata[partition].failed_delete_files == (name,)
    assert result.files_deleted == len(paths) - 1
    assert [p for p in paths if (root / p).exists()] == [stuck]


# -- S3 (moto) -------------------------------------------------------------------------------------------

QUICK = {"max_retries": "0"}


def _put(storage: Storage, paths: Sequence[str]) -> None:
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda p: storage.create(p, b"abcd"), paths))


@pytest.mark.s3
def test_on_s3_the_files_found_go_in_one_request(s3_server: S3Server) -> None:
    storage = Storage.for_uri(f"{s3_server.bucket('lake')}/c-{uuid.uuid4().hex[:8]}")
    assert storage.bulk_delete_size == 1000
    names = _data_file_names(40)
    there = [f"p/{n}" for n in names[:36]]
    _put(storage, there)
    batch = [*there[:20], *(f"p/{n}" for n in names[36:]), *there[20:]]
    before = storage.requests.snapshot()
    results = delete_paths(storage, batch, 8)
    after = storage.requests.snapshot()
    made = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert made["DELETE"] == 1
    assert made["HEAD"] == len(batch)
    assert [(r.path, r.status, r.size) for r in results] == [
        (p, DELETED, 4) if p in there else (p, MISSING, 0) for p in batch
    ]
    assert storage.list("p") == []
    assert [r.status for r in delete_paths(storage, batch, 8)] == [MISSING] * len(batch)


@pytest.mark.s3
def test_on_s3_a_failed_bulk_request_is_followed_by_one_delete_a_file(s3_faults: FaultProxy) -> None:
    """The bulk request fails, and so does the first of the one-file requests after it: that file is
    reported failed with the store's answer and is still there; every other file is deleted."""
    storage = Storage.for_uri(f"s3://lake/c-{uuid.uuid4().hex[:8]}", s3_faults.storage_options(**QUICK))
    paths = [f"p/{n}" for n in _data_file_names(10)]
    _put(storage, paths)
    with s3_faults.faults(kind="500", methods=["POST"], match=r"\?delete", limit=2):
        results = delete_paths(storage, paths, 4)
    assert s3_faults.injected("500") == 2
    failed = [r for r in results if r.status == FAILED]
    assert len(failed) == 1
    assert "500" in failed[0].error or "Internal" in failed[0].error
    assert [r.size for r in results if r.status == DELETED] == [4] * 9
    assert [f.path for f in storage.list("p")] == [failed[0].path]


@pytest.mark.s3
def test_a_clean_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    """A whole clean of a table in the store, its batches deleted by :func:`delete_files` as on executors."""
    local = tmp_path / "local"
    _cow_with_a_clean(local)
    uri = s3_server.upload(local, f"s3://lake/t-{uuid.uuid4().hex[:8]}")
    storage = Storage.for_uri(uri)
    lock = lock_for_table(storage, {})
    job = Clean(executor_min_files=1, parallelism=2).prepare(storage, lock, None, {DELETE_CONCURRENCY: "4"})
    batches: tuple[DeleteBatch, ...] = job.tasks
    results = [delete_files(b) for b in batches]
    paths = [p for b in batches for p in b.paths]
    assert paths
    assert all(r.status == DELETED for part in results for r in part)
    done = job.commit(results, None)
    assert done.files_deleted == len(paths)
    assert not [p for p in paths if storage.exists(p)]
    assert Table.load(storage).timeline.get(done.instant.time).state is State.COMPLETED  # type: ignore[union-attr]
