"""The table lock of a one-off command (``hoodied compact|cluster|clean|index``): the lock the table's
writers take (:mod:`hoodie.lock.selection`), a ZooKeeper one included.

For ZooKeeper the command reads Hudi's writer keys: ``hoodie.write.lock.provider`` naming
``ZookeeperBasedLockProvider`` (or a ZooKeeper URL given), ``hoodie.write.lock.zookeeper.url`` (hosts,
comma-separated) and ``.port``, ``.base_path`` (required, as in Hudi) and ``.lock_key`` (the table's name by
default). The session lives as long as the command (``cleanup`` closes it).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from hoodie.config import TableConfig
from hoodie.lock import LockProvider, lock_for_table
from hoodie.lock.selection import ZOOKEEPER_PROVIDER, lock_provider_of
from hoodie.storage import Storage
from hoodied.coordination import LOCK_BASE_PATH, LOCK_KEY, identity
from hoodied.errors import ServiceError
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig

ZOOKEEPER_URL = "hoodie.write.lock.zookeeper.url"
ZOOKEEPER_PORT = "hoodie.write.lock.zookeeper.port"


def one_off_lock(
    storage: Storage, settings: Mapping[str, str], cleanup: contextlib.ExitStack
) -> LockProvider:
    """The lock the table's writers use, for a command that runs once; a ZooKeeper session is closed by
    ``cleanup``."""
    props = {**TableConfig.load(storage).props, **settings}
    if lock_provider_of(props) == ZOOKEEPER_PROVIDER or props.get(ZOOKEEPER_URL, "").strip():
        return _zookeeper_lock(props, cleanup)
    return lock_for_table(storage, props)


def _zookeeper_lock(props: Mapping[str, str], cleanup: contextlib.ExitStack) -> LockProvider:
    hosts = props.get(ZOOKEEPER_URL, "").strip()
    base = props.get(LOCK_BASE_PATH, "").strip().rstrip("/")
    if not hosts or not base:
        raise ServiceError(
            f"the table's writers lock through ZooKeeper: give {ZOOKEEPER_URL} (and {ZOOKEEPER_PORT}) and "
            f"{LOCK_BASE_PATH}, as the writers have them"
        )
    port = props.get(ZOOKEEPER_PORT, "").strip()
    connect = ",".join(h if ":" in h or not port else f"{h}:{port}" for h in hosts.split(","))
    key = (props.get(LOCK_KEY) or props.get("hoodie.table.name") or "").strip()
    zookeeper = ZooKeeper(ZooKeeperConfig(connect=connect), identity("hoodied-cli"))
    zookeeper.start()
    cleanup.callback(zookeeper.stop)
    return zookeeper.table_lock(f"{base}/{key}")


__all__ = ["ZOOKEEPER_PORT", "ZOOKEEPER_URL", "one_off_lock"]
