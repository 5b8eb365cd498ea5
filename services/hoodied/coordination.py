"""How replicas share the work: claims on instants and the table lock, through ZooKeeper or embedded.

:class:`ZooKeeperCoordination` (several replicas): one ephemeral claim node per (table, instant) at
``<base_path>/claims/<table key>/<action>-<instant>`` (:func:`table_key`: from the table's identity, never
its label) holding the replica's identity; the ZooKeeper session is the heartbeat, so a dead replica's
claims vanish after the session timeout. Scheduling on a table is
claimed the same way (``schedule``), so two replicas never plan the same table at once. The table lock is a
Curator ``InterProcessMutex``-compatible lock at Hudi's ``hoodie.write.lock.zookeeper.base_path/lock_key``
(the table's own settings, else ``zookeeper.lock_base_path`` and the table name, as Hudi defaults
``lock_key``), so hoodied and Hudi's writers exclude each other.

:class:`EmbeddedCoordination` (one replica, no ZooKeeper): claims are the files of
:class:`~hoodied.claims.LocalClaim` and the table lock is :class:`~hoodie.lock.FileSystemLock`, so a one-off
``hoodied compact`` on the same machine and the daemon still exclude each other.

Every table lock handed out is wrapped to observe how long acquiring it waited and how long it was held
(a table lock held is a writer kept waiting).
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from hoodie.config import TableConfig
from hoodie.lock import AcquireOnEnter, LockProvider, lock_for_table
from hoodie.lock.selection import FILE_SYSTEM_PROVIDER, STORAGE_PROVIDER, lock_provider_of
from hoodie.storage import Storage
from hoodied.claims import CLAIMS_FOLDER, Claim, LocalClaim
from hoodied.config import ZooKeeperSettings
from hoodied.errors import ServiceError

if TYPE_CHECKING:
    from hoodied.zookeeper import ZooKeeper

logger = logging.getLogger(__name__)

LOCK_BASE_PATH = "hoodie.write.lock.zookeeper.base_path"
LOCK_KEY = "hoodie.write.lock.zookeeper.lock_key"
SCHEDULE_CLAIM = "schedule"


def table_key(identity: str) -> str:
    """A table's key (its claims' folder ``<base_path>/claims/<key>``, its control document): the last
    segment of its identity (:func:`hoodie.storage.identity.table_identity`) and a digest of the identity,
    ``orders-<12 hex digits>``. A function of the identity alone, never of the operator's label or of how the
    path was written: two names of one table (two configurations, an alias) then claim its instants under
    one key and never both run one; two tables never share a key (the digest), whatever their folders' names.
    A table named after its folder at a path already canonical keeps the key it had when keys held the label
    and the path as written."""
    tail = identity.rstrip("/").rsplit("/", 1)[-1]
    label = re.sub(r"[^A-Za-z0-9._-]", "_", tail) or "table"
    digest = hashlib.sha1(identity.encode("utf-8")).hexdigest()[:12]
    return f"{label}-{digest}"


def claim_name(action: str, instant_time: str) -> str:
    return f"{action}-{instant_time}"


class LockObserver(Protocol):
    """Who is told how long each table's lock was waited for and held (:class:`~hoodied.metrics.Metrics`)."""

    def observe_lock_wait(self, table: str, seconds: float) -> None: ...

    def observe_lock_hold(self, table: str, seconds: float) -> None: ...


class TimedLock(AcquireOnEnter):
    """A :class:`~hoodie.lock.LockProvider` that reports how long each acquire of ``table``'s lock waited and
    each hold lasted."""

    def __init__(self, inner: LockProvider, observer: LockObserver, timeout: float, table: str) -> None:
        self._inner = inner
        self._observer = observer
        self._table = table
        self._acquire_timeout = timeout
        self._held_since: float | None = None

    def acquire(self, timeout: float) -> None:
        started = time.monotonic()
        try:
            self._inner.acquire(timeout)
            self._held_since = time.monotonic()
        finally:
            self._observer.observe_lock_wait(self._table, time.monotonic() - started)

    def release(self) -> None:
        self._inner.release()
        if self._held_since is not None:
            self._observer.observe_lock_hold(self._table, time.monotonic() - self._held_since)
            self._held_since = None

    @property
    def is_held(self) -> bool:
        return self._inner.is_held

    def __repr__(self) -> str:
        return f"TimedLock({self._inner!r})"


class Coordination(Protocol):
    """What the supervisor needs to share work with other replicas."""

    @property
    def zookeeper_state(self) -> str | None:
        """The ZooKeeper connection state, or ``None`` in embedded mode."""

    def claim(self, storage: Storage, key: str, name: str) -> Claim:
        """Claim ``name`` (``<action>-<instant>`` or ``schedule``) of a table, or raise
        :class:`~hoodied.errors.ClaimHeld`."""

    def holder(self, storage: Storage, key: str, name: str) -> Mapping[str, object] | None:
        """Who holds a claim (``None``: nobody, or a holder known to be dead)."""

    def holders(self, storage: Storage, key: str) -> dict[str, Mapping[str, object]]:
        """Every live claim of a table."""

    def table_lock(
        self, table: str, storage: Storage, config: TableConfig, settings: Mapping[str, str]
    ) -> LockProvider:
        """A new holder of the table's lock (one per job: lock objects are not shared between threads)."""

    def on_lost(self, claim: Claim, callback: Callable[[], None]) -> None:
        """Run ``callback`` when ``claim`` is lost before it is released (a ZooKeeper session lost)."""

    def claim_member(self, replica: str) -> Claim:
        """Join the replicas sharing the tables (:mod:`hoodied.table_split`) as ``replica``, for as long as
        the claim lives; :class:`~hoodied.errors.ClaimHeld` when a live replica has that name."""

    def members(self) -> tuple[str, ...]:
        """The replicas sharing the tables now (this one alone in embedded mode)."""


class EmbeddedCoordination:
    """One replica: claims in files in the table, the file-system table lock."""

    def __init__(self, observer: LockObserver, lock_timeout: float = 60.0) -> None:
        self._observer = observer
        self._lock_timeout = lock_timeout

    @property
    def zookeeper_state(self) -> str | None:
        return None

    def claim(self, storage: Storage, key: str, name: str) -> Claim:
        action, _, instant = name.partition("-")
        return LocalClaim(storage, action, instant or "table").acquire()

    def holder(self, storage: Storage, key: str, name: str) -> Mapping[str, object] | None:
        action, _, instant = name.partition("-")
        local = LocalClaim(storage, action, instant or "table")
        found = local.holder()
        if found is None or local.is_abandoned(found):
            return None
        return found

    def holders(self, storage: Storage, key: str) -> dict[str, Mapping[str, object]]:
        out: dict[str, Mapping[str, object]] = {}
        try:
            files = storage.list(CLAIMS_FOLDER)
        except Exception:
            return out
        for f in files:
            if f.name.endswith(".claim"):
                name = f.name[: -len(".claim")]
                found = self.holder(storage, key, name)
                if found is not None:
                    out[name] = found
        return out

    def table_lock(
        self, table: str, storage: Storage, config: TableConfig, settings: Mapping[str, str]
    ) -> LockProvider:
        """The lock the table's writers use without a lock server: the file-system lock of a local table,
        the storage-based lock on an object store (:func:`hoodie.lock.lock_for_table`)."""
        inner = lock_for_table(storage, {**config.props, **settings}, acquire_timeout=self._lock_timeout)
        return TimedLock(inner, self._observer, self._lock_timeout, table)

    def on_lost(self, claim: Claim, callback: Callable[[], None]) -> None:
        """File claims are not lost behind our back (the commit's fence still re-checks them)."""

    def claim_member(self, replica: str) -> Claim:
        raise ServiceError("an embedded replica shares its tables with nobody")

    def members(self) -> tuple[str, ...]:
        return ()


class ZooKeeperCoordination:
    """Several replicas: claims and the table lock in ZooKeeper."""

    def __init__(
        self,
        zookeeper: ZooKeeper,
        settings: ZooKeeperSettings,
        observer: LockObserver,
        lock_timeout: float = 60.0,
    ) -> None:
        self.zookeeper = zookeeper
        self._settings = settings
        self._observer = observer
        self._lock_timeout = lock_timeout

    @property
    def zookeeper_state(self) -> str | None:
        return self.zookeeper.state

    def claim(self, storage: Storage, key: str, name: str) -> Claim:
        return self.zookeeper.claim(key, name)

    def holder(self, storage: Storage, key: str, name: str) -> Mapping[str, object] | None:
        return self.zookeeper.holder(key, name)

    def holders(self, storage: Storage, key: str) -> dict[str, Mapping[str, object]]:
        return dict(self.zookeeper.claims(key))

    def lock_path(self, config: TableConfig, settings: Mapping[str, str]) -> str:
        """Where Hudi's ZookeeperBasedLockProvider locks this table."""
        props = {**config.props, **settings}
        base = (props.get(LOCK_BASE_PATH) or self._settings.lock_base_path).strip().rstrip("/")
        key = (props.get(LOCK_KEY) or config.name).strip()
        return f"{base}/{key}"

    def table_lock(
        self, table: str, storage: Storage, config: TableConfig, settings: Mapping[str, str]
    ) -> LockProvider:
        """Hudi's ZooKeeper lock, unless the table's writers lock otherwise (``hoodie.write.lock.provider``
        naming the storage-based or the file-system lock): then theirs."""
        props = {**config.props, **settings}
        inner: LockProvider
        if lock_provider_of(props) in (STORAGE_PROVIDER, FILE_SYSTEM_PROVIDER):
            inner = lock_for_table(storage, props, acquire_timeout=self._lock_timeout)
        else:
            inner = self.zookeeper.table_lock(
                self.lock_path(config, settings), acquire_timeout=self._lock_timeout
            )
        return TimedLock(inner, self._observer, self._lock_timeout, table)

    def on_lost(self, claim: Claim, callback: Callable[[], None]) -> None:
        register = getattr(claim, "on_lost", None)
        if register is not None:
            register(callback)

    def claim_member(self, replica: str) -> Claim:
        return self.zookeeper.claim(MEMBERS_SCOPE, replica)

    def members(self) -> tuple[str, ...]:
        return tuple(self.zookeeper.claims(MEMBERS_SCOPE))


#: The claim scope of the replicas' list (:mod:`hoodied.table_split`); no table key is this one (table keys
#: end in a digest).
MEMBERS_SCOPE = "_replicas"


def identity(replica: str) -> dict[str, object]:
    """What a claim says about its holder."""
    return {"replica": replica, "host": socket.gethostname(), "pid": os.getpid()}


__all__ = [
    "MEMBERS_SCOPE",
    "SCHEDULE_CLAIM",
    "Coordination",
    "EmbeddedCoordination",
    "LockObserver",
    "TimedLock",
    "ZooKeeperCoordination",
    "claim_name",
    "identity",
    "table_key",
]
