"""Which table lock to take: the one the table's writers take.

Hudi writers name their lock provider in ``hoodie.write.lock.provider``; hoodied must exclude them through the
same one, so it reads the same key (from its own settings for the table, which win, and the table's
properties):

- ``...ZookeeperBasedLockProvider``: a Curator lock in ZooKeeper; it needs a ZooKeeper client, which is the
  daemon's (:class:`LockRequired` here, naming what to configure);
- ``...StorageBasedLockProvider``: :class:`~hoodie.lock.StorageLock` (object stores with conditional writes);
- ``...FileSystemBasedLockProvider``: :class:`~hoodie.lock.FileSystemLock` (local tables);
- none: the storage-based lock on an object store with conditional writes, the file-system lock on a local
  table; any other store, or any other provider (DynamoDB, Hive metastore...), is refused clearly.
"""

from __future__ import annotations

from collections.abc import Mapping

from hoodie.errors import InvalidWriteConfig, LockRequired
from hoodie.lock.filesystem import DEFAULT_EXPIRE_SECONDS, FileSystemLock
from hoodie.lock.provider import DEFAULT_ACQUIRE_TIMEOUT_SECONDS, LockProvider
from hoodie.lock.storage_based import StorageLock, StorageLockConfig
from hoodie.storage import Storage

PROVIDER = "hoodie.write.lock.provider"
_PACKAGE = "org.apache.hudi.client.transaction.lock."
ZOOKEEPER_PROVIDER = _PACKAGE + "ZookeeperBasedLockProvider"
STORAGE_PROVIDER = _PACKAGE + "StorageBasedLockProvider"
FILE_SYSTEM_PROVIDER = _PACKAGE + "FileSystemBasedLockProvider"
#: Hudi's file-system lock expiry, in minutes (Hudi's default 0 is never; ours one minute: a killed holder
#: blocks for a minute, not forever).
FILE_SYSTEM_EXPIRE_MINUTES = "hoodie.write.lock.filesystem.expire"


def lock_provider_of(settings: Mapping[str, str]) -> str | None:
    """The lock provider class the settings name (its short name accepted), or ``None``."""
    raw = (settings.get(PROVIDER) or "").strip()
    if not raw:
        return None
    return raw if "." in raw else _PACKAGE + raw


def lock_for_table(
    storage: Storage,
    settings: Mapping[str, str],
    *,
    acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT_SECONDS,
) -> LockProvider:
    """The table lock of the module doc, for the providers that need no lock server."""
    provider = lock_provider_of(settings)
    if provider == ZOOKEEPER_PROVIDER:
        raise LockRequired(
            f"{storage.uri}: its writers lock through ZooKeeper ({PROVIDER}={provider}); hoodied must take "
            "the same lock: give it the ZooKeeper (zookeeper.connect in the daemon's configuration, or "
            "hoodie.write.lock.zookeeper.url and .port for a one-off command)"
        )
    if provider == STORAGE_PROVIDER or (
        provider is None and storage.conditional_create and not storage.is_local
    ):
        return StorageLock(storage, StorageLockConfig.from_config(settings), acquire_timeout=acquire_timeout)
    if provider == FILE_SYSTEM_PROVIDER or (provider is None and storage.is_local):
        return FileSystemLock(
            storage, expire_seconds=_expire_seconds(settings), acquire_timeout=acquire_timeout
        )
    if provider is None:
        raise LockRequired(
            f"{storage.uri}: no table lock is possible here (the store has no conditional writes); configure "
            f"the lock the table's writers use ({PROVIDER}, ZooKeeper for example)"
        )
    raise LockRequired(
        f"{storage.uri}: {PROVIDER}={provider} is a lock hoodied cannot take; use ZooKeeper, the "
        "storage-based or the file-system lock, for the table's writers and hoodied alike"
    )


def _expire_seconds(settings: Mapping[str, str]) -> float:
    raw = (settings.get(FILE_SYSTEM_EXPIRE_MINUTES) or "").strip()
    if not raw:
        return DEFAULT_EXPIRE_SECONDS
    try:
        return float(raw) * 60
    except ValueError:
        raise InvalidWriteConfig(f"{FILE_SYSTEM_EXPIRE_MINUTES}={raw!r}: not a number of minutes") from None


__all__ = [
    "FILE_SYSTEM_EXPIRE_MINUTES",
    "FILE_SYSTEM_PROVIDER",
    "PROVIDER",
    "STORAGE_PROVIDER",
    "ZOOKEEPER_PROVIDER",
    "lock_for_table",
    "lock_provider_of",
]
