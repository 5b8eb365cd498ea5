"""The table lock: mutual exclusion across real OS processes, expiry, Hudi's lock files, lost locks."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from multiprocessing.context import ForkServerContext
from pathlib import Path

import pytest

from hoodie.errors import LockError, LockLost, LockTimeout
from hoodie.lock import FileSystemLock, LockProvider
from hoodie.storage import Storage
from hoodie.storage.arrow_fs import ArrowFsBackend


def _ctx() -> ForkServerContext:
    """Worker processes fork from a clean single-threaded server (no threads of ours inherited)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["hoodie.lock", "hoodie.timeline.writer"])
    return ctx


def _increment_under_lock(root: str, rounds: int) -> None:
    """Read-modify-write a counter file under the lock, ``rounds`` times (lost updates if exclusion fails)."""
    storage = Storage.for_uri(root)
    lock = FileSystemLock(storage, expire_seconds=30, poll_seconds=0.002)
    counter = Path(root) / "counter"
    for _ in range(rounds):
        with lock:
            value = int(counter.read_text())
            time.sleep(0.001)
            counter.write_text(str(value + 1))


def _take_and_crash(root: str, expire_seconds: float, ready: multiprocessing.synchronize.Event) -> None:
    lock = FileSystemLock(Storage.for_uri(root), expire_seconds=expire_seconds)
    lock.acquire(1.0)
    ready.set()
    os._exit(0)  # a crash: the lock file stays behind


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage.for_uri(str(tmp_path))


def test_acquire_release_and_context_manager(storage: Storage, tmp_path: Path) -> None:
    lock = FileSystemLock(storage)
    assert isinstance(lock, LockProvider)
    assert not lock.is_held
    lock.acquire(0.0)
    assert lock.is_held
    holder = json.loads((tmp_path / ".hoodie" / "lock").read_text())
    assert holder["owner"].endswith(f":{os.getpid()}")
    assert holder["expires_at_ms"] > holder["acquired_at_ms"]
    with pytest.raises(LockError, match="not re-entrant"):
        lock.acquire(0.0)
    lock.release()
    assert not lock.is_held
    assert not (tmp_path / ".hoodie" / "lock").exists()
    with pytest.raises(LockError, match="not held"):
        lock.release()
    with lock as same:
        assert same is lock
        assert lock.is_held
    assert not lock.is_held
    assert sorted(p.name for p in (tmp_path / ".hoodie").iterdir()) == []  # no guard or temp files left


def test_a_held_lock_times_out_naming_its_holder(storage: Storage) -> None:
    first, second = FileSystemLock(storage), FileSystemLock(storage)
    first.acquire(0.0)
    started = time.monotonic()
    with pytest.raises(LockTimeout, match=rf"within 0.1 s: held by .*:{os.getpid()}"):
        second.acquire(0.1)
    assert time.monotonic() - started >= 0.1
    first.release()
    second.acquire(0.0)
    second.release()


def test_an_expired_lock_is_broken_and_its_holder_learns_it_was_lost(storage: Storage) -> None:
    stale = FileSystemLock(storage, expire_seconds=0.05)
    stale.acquire(0.0)
    time.sleep(0.08)
    assert not stale.is_held  # expired by our own clock
    fresh = FileSystemLock(storage)
    fresh.acquire(1.0)
    with pytest.raises(LockLost):
        stale.release()
    assert fresh.is_held  # the late release did not delete the new holder's file
    fresh.release()


def test_a_stale_takeover_fails_and_changes_nothing(storage: Storage) -> None:
    """Two processes find one expired lock; the one that read it first pauses while the other takes it over.
    Woken, its takeover (a compare-and-set on the version it read) fails and the new holder's file stands.
    Before, a check then a delete let the late breaker delete the new holder's lock."""
    crashed = FileSystemLock(storage, expire_seconds=0.05)
    crashed.acquire(0.0)
    time.sleep(0.08)
    late, winner = FileSystemLock(storage), FileSystemLock(storage)
    found = late._holder_versioned()  # the late breaker reads the stale holder, then pauses
    assert found is not None
    assert found[0].is_stale(time.time())
    winner.acquire(1.0)
    taken = storage.read(winner.path)
    now = time.time()
    assert late._take_over(found[1], "late", now, now + 60) is False
    assert storage.read(winner.path) == taken
    assert winner.is_held
    with pytest.raises(LockTimeout):
        late.acquire(0.05)
    winner.release()


def test_a_late_release_of_an_unbroken_expired_lock_is_fine(storage: Storage) -> None:
    lock = FileSystemLock(storage, expire_seconds=0.01)
    lock.acquire(0.0)
    time.sleep(0.03)
    lock.release()  # nobody took it over: the file is still ours and is deleted
    assert FileSystemLock(storage).holder() is None


def test_no_expiry_means_never_broken(storage: Storage) -> None:
    forever = FileSystemLock(storage, expire_seconds=0)
    forever.acquire(0.0)
    holder = forever.holder()
    assert holder is not None
    assert holder.expires_at is None
    with pytest.raises(LockTimeout):
        FileSystemLock(storage, expire_seconds=0.01).acquire(0.05)
    forever.release()


def test_hudi_lock_file_is_respected_then_expires_by_modification_time(
    storage: Storage, tmp_path: Path
) -> None:
    # What Hudi's FileSystemBasedLockProvider leaves: its LockInfo text, not our JSON.
    lock_file = tmp_path / ".hoodie" / "lock"
    lock_file.parent.mkdir(parents=True)
    lock_file.write_text('{"lockCreateTime":"2025-01-01 00:00:00.000","lockThreadName":"main"}x')
    ours = FileSystemLock(storage, expire_seconds=60)
    with pytest.raises(LockTimeout, match="another program"):
        ours.acquire(0.05)
    old = time.time() - 120
    os.utime(lock_file, (old, old))  # older than expire_seconds: stale, as for Hudi's expire setting
    ours.acquire(0.5)
    assert ours.is_held
    ours.release()


def test_refuses_stores_without_create_if_absent(tmp_path: Path) -> None:
    import pyarrow.fs as pafs

    remote_like = Storage(
        ArrowFsBackend(pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())), "", "sub://t"
    )
    with pytest.raises(LockError, match="atomic create-if-absent"):
        FileSystemLock(remote_like)


def test_processes_exclude_each_other(tmp_path: Path) -> None:
    (tmp_path / "counter").write_text("0")
    ctx = _ctx()
    workers = [ctx.Process(target=_increment_under_lock, args=(str(tmp_path), 15)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    assert (tmp_path / "counter").read_text() == "60"


def test_processes_breaking_one_stale_lock_still_exclude_each_other(tmp_path: Path) -> None:
    # A crashed holder's expired lock: every worker finds it stale at once and races to break it.
    (tmp_path / "counter").write_text("0")
    lock_file = tmp_path / ".hoodie" / "lock"
    lock_file.parent.mkdir(parents=True)
    expired = {"token": "dead", "owner": "crashed:1", "acquired_at_ms": 0, "expires_at_ms": 1}
    lock_file.write_text(json.dumps(expired))
    ctx = _ctx()
    workers = [ctx.Process(target=_increment_under_lock, args=(str(tmp_path), 10)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    assert (tmp_path / "counter").read_text() == "40"
    assert not lock_file.exists()


def test_a_crashed_holders_lock_is_broken_after_expiry(tmp_path: Path) -> None:
    ctx = _ctx()
    ready = ctx.Event()
    crasher = ctx.Process(target=_take_and_crash, args=(str(tmp_path), 0.6, ready))
    crasher.start()
    assert ready.wait(20)
    crasher.join(20)
    taken_at = time.time()
    lock = FileSystemLock(Storage.for_uri(str(tmp_path)))
    holder = lock.holder()
    assert holder is not None
    assert holder.owner.endswith(f":{crasher.pid}")
    with pytest.raises(LockTimeout):
        lock.acquire(0.05)  # not expired yet: the crashed process still holds it
    assert holder.expires_at is not None
    lock.acquire(5.0)
    assert time.time() >= holder.expires_at >= taken_at - 0.6
    lock.release()
