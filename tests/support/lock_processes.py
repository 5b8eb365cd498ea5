"""The storage-based lock across processes, on any store (tests/core/lock/test_storage_based.py on S3,
tests/core/storage/test_gcs.py on GCS): processes counting under the lock, and a holder killed while it holds
it. The processes are spawned, so their targets live here, importable by name."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from typing import Any

import pytest

from hoodie.errors import LockTimeout
from hoodie.lock import StorageLock, StorageLockConfig
from hoodie.storage import Storage

#: A lock valid 10 s, renewed every second: a dead holder's lock frees within seconds.
FAST = StorageLockConfig(validity_seconds=10, renew_seconds=1)


def _count(uri: str, rounds: int) -> None:
    storage = Storage.for_uri(uri)
    lock = StorageLock(storage, FAST, acquire_timeout=120)
    for _ in range(rounds):
        with lock:
            n = int(storage.read("counter"))
            time.sleep(0.01)
            storage.create("counter", str(n + 1).encode(), overwrite=True)


def count_in_processes(uri: str, processes: int, rounds: int) -> bytes:
    """``processes`` processes each add 1 to the file ``counter`` under the lock at ``uri``, ``rounds`` times
    (read, then write back); returns the counter at the end (no increment lost: never two holders)."""
    Storage.for_uri(uri).create("counter", b"0")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_count, args=(uri, rounds)) for _ in range(processes)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    return Storage.for_uri(uri).read("counter")


def _hold_forever(uri: str, ready: Any) -> None:
    lock = StorageLock(Storage.for_uri(uri), FAST)
    lock.acquire(10)
    ready.set()
    time.sleep(3600)


def wait_out_a_killed_holder(uri: str) -> float:
    """A process takes the lock at ``uri``, renews it, and is killed holding it; another then cannot take it
    while it is valid, and takes it after. Returns the seconds from the kill to that acquire."""
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    holder = ctx.Process(target=_hold_forever, args=(uri, ready))
    holder.start()
    assert ready.wait(60)
    time.sleep(1.5)  # it renews at least once
    os.kill(holder.pid, signal.SIGKILL)  # type: ignore[arg-type]
    holder.join()
    killed_at = time.monotonic()
    waiting = StorageLock(Storage.for_uri(uri), FAST)
    with pytest.raises(LockTimeout):
        waiting.acquire(5)  # still within its validity
    waiting.acquire(30)
    waited = time.monotonic() - killed_at
    waiting.release()
    return waited


__all__ = ["FAST", "count_in_processes", "wait_out_a_killed_holder"]
