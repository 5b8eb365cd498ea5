"""Table locks: the protocol (:mod:`~hoodie.lock.provider`), the file-system lock of local tables
(:mod:`~hoodie.lock.filesystem`) and the storage-based lock of tables on object stores
(:mod:`~hoodie.lock.storage_based`). A ZooKeeper lock shared with Hudi's writers is the daemon's
(``hoodied.zookeeper``): it needs a ZooKeeper client."""

from __future__ import annotations

from hoodie.lock.filesystem import DEFAULT_EXPIRE_SECONDS, DEFAULT_LOCK_PATH, FileSystemLock, LockHolder
from hoodie.lock.provider import (
    DEFAULT_ACQUIRE_TIMEOUT_SECONDS,
    NO_LOCK,
    AcquireOnEnter,
    LockProvider,
    held,
)
from hoodie.lock.selection import lock_for_table
from hoodie.lock.storage_based import StorageLock, StorageLockConfig

__all__ = [
    "DEFAULT_ACQUIRE_TIMEOUT_SECONDS",
    "DEFAULT_EXPIRE_SECONDS",
    "DEFAULT_LOCK_PATH",
    "NO_LOCK",
    "AcquireOnEnter",
    "FileSystemLock",
    "LockHolder",
    "LockProvider",
    "StorageLock",
    "StorageLockConfig",
    "held",
    "lock_for_table",
]
