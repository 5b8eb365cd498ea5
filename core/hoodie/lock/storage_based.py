""":class:`StorageLock`: the table lock of Hudi's ``StorageBasedLockProvider`` (Hudi 1.0.2+), for object
stores.

Hudi writers configured with ``hoodie.write.lock.provider=org.apache.hudi.client.transaction.lock.
StorageBasedLockProvider`` and hoodied exclude each other through one object,
``<base path>/.hoodie/.locks/table_lock.json``, holding the JSON ``{"expired":false,"validUntil":<epoch ms>,
"owner":"<uuid>"}`` and only ever written conditionally:

- **Acquire**: read the object (absent: free). It is held while ``expired`` is false and now is at most
  ``validUntil`` + 500 ms (a clock-drift buffer). When free, write ``{false, now + validity, us}``: with
  ``If-None-Match: *`` where it was absent, with ``If-Match: <the version read>`` where it expired or its
  holder died. A failed condition means someone else won: try again every second until the timeout.
- **Renew** every ``hoodie.write.lock.storage.renew.interval.secs`` (a heartbeat thread): the same write with
  ``If-Match`` of our last version. A failed condition means the lock was taken over: it is lost
  (:attr:`StorageLock.is_held` turns false, :meth:`release` raises :class:`~hoodie.errors.LockLost`).
- **Release**: write ``{true, validUntil, us}`` with ``If-Match``. The object is never deleted.

A holder that dies stops renewing; its lock is free ``validity`` seconds (300 by default) after its last
renewal. A holder's own view of its validity (:meth:`StorageLock.remaining_ms`) counts from its clock
*before* the write that set ``validUntil`` was sent, less the clock-skew bound of :mod:`hoodie.lease_margin`;
:meth:`StorageLock.require_margin` refuses a write under the lock that could end after it.

**Store failures.** A lock write whose outcome is unknown (the store failed and could not be read back:
:class:`~hoodie.errors.WriteOutcomeUnknown`) or a release that failed may leave the lock object naming an
owner that no one holds: this process gave it up. Such owners are remembered for the life of the process
(:func:`orphaned_owners`), and a later :meth:`StorageLock.acquire` in this process takes their lock at once,
conditionally, instead of waiting ``validity`` seconds for it; other processes wait for it to expire, as they
wait for a dead holder's. Keys (Hudi's): ``hoodie.write.lock.storage.validity.timeout.secs`` (300),
``hoodie.write.lock.storage.renew.interval.secs`` (30; also
``hoodie.write.lock.storage.heartbeat.poll.secs``); the validity must be at least ten renewals and ten
seconds, a renewal at least a second.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from hoodie.errors import (
    FileAlreadyExists,
    InvalidWriteConfig,
    LockError,
    LockLost,
    LockTimeout,
    StorageError,
    VersionConflict,
    WriteOutcomeUnknown,
)
from hoodie.lease_margin import remaining_ms, require_margin
from hoodie.lock.provider import DEFAULT_ACQUIRE_TIMEOUT_SECONDS, AcquireOnEnter
from hoodie.settings import int_setting
from hoodie.storage import Storage

logger = logging.getLogger(__name__)

LOCK_FILE = ".hoodie/.locks/table_lock.json"
PROVIDER_CLASS = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
VALIDITY_SECONDS = "hoodie.write.lock.storage.validity.timeout.secs"
VALIDITY_SECONDS_DEFAULT = 300
RENEW_SECONDS = "hoodie.write.lock.storage.renew.interval.secs"
RENEW_SECONDS_LEGACY = "hoodie.write.lock.storage.heartbeat.poll.secs"
RENEW_SECONDS_DEFAULT = 30
#: A lock is still held this long after its ``validUntil`` (clocks differ), as Hudi's.
CLOCK_DRIFT_MS = 500
#: How often a blocked acquire looks again (Hudi: every 1000 ms).
RETRY_SECONDS = 1.0

_ORPHANED: set[str] = set()
_ORPHANED_LOCK = threading.Lock()


def orphaned_owners() -> frozenset[str]:
    """The owners (lock objects of this process) that gave their lock up without knowing whether the store
    still names them: a lock naming one of them is held by no one (see the module doc)."""
    with _ORPHANED_LOCK:
        return frozenset(_ORPHANED)


def _orphan(owner: str) -> None:
    with _ORPHANED_LOCK:
        _ORPHANED.add(owner)


@dataclass(frozen=True)
class StorageLockConfig:
    """Validity and renewal of a storage lock (Hudi's keys above)."""

    validity_seconds: int = VALIDITY_SECONDS_DEFAULT
    renew_seconds: int = RENEW_SECONDS_DEFAULT

    def __post_init__(self) -> None:
        if self.renew_seconds < 1:
            raise InvalidWriteConfig(f"{RENEW_SECONDS}={self.renew_seconds}: must be at least 1")
        if self.validity_seconds < max(10, 10 * self.renew_seconds):
            raise InvalidWriteConfig(
                f"{VALIDITY_SECONDS}={self.validity_seconds}: must be at least 10 and at least 10 times "
                f"{RENEW_SECONDS} ({self.renew_seconds})"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> StorageLockConfig:
        return cls(
            validity_seconds=int_setting(config, VALIDITY_SECONDS, VALIDITY_SECONDS_DEFAULT, minimum=1),
            renew_seconds=int_setting(
                config, RENEW_SECONDS, RENEW_SECONDS_DEFAULT, minimum=1, aliases=(RENEW_SECONDS_LEGACY,)
            ),
        )


@dataclass(frozen=True)
class LockState:
    """The lock object's content and version."""

    expired: bool
    valid_until_ms: int
    owner: str
    version: str

    def held_at(self, now_ms: int) -> bool:
        return not self.expired and now_ms <= self.valid_until_ms + CLOCK_DRIFT_MS


def encode_state(expired: bool, valid_until_ms: int, owner: str) -> bytes:
    """The lock object as Hudi's Jackson writes ``StorageLockData``."""
    return json.dumps(
        {"expired": expired, "validUntil": valid_until_ms, "owner": owner}, separators=(",", ":")
    ).encode("utf-8")


class StorageLock(AcquireOnEnter):
    """The storage-based table lock (see the module doc). One object is one holder (owner id); not
    re-entrant. Needs a storage with conditional writes (S3, GCS, Azure)."""

    def __init__(
        self,
        storage: Storage,
        config: StorageLockConfig | None = None,
        *,
        acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT_SECONDS,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        if not storage.conditional_create or storage.is_local:
            raise LockError(
                f"the storage-based lock needs an object store with conditional writes; {storage.uri} "
                "has none"
            )
        self._storage = storage
        self._config = config or StorageLockConfig()
        self._acquire_timeout = acquire_timeout
        self._clock_ms = clock_ms or (lambda: int(time.time() * 1000))
        self.owner = str(uuid.uuid4())
        self._version: str | None = None
        self._valid_until_ms = 0
        self._lost = False
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._state_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"StorageLock({self._storage.full_path(LOCK_FILE)!r}, owner {self.owner})"

    # -- the protocol ------------------------------------------------------------------------------------

    @property
    def is_held(self) -> bool:
        with self._state_lock:
            return self._version is not None and not self._lost and self._clock_ms() < self._valid_until_ms

    def remaining_ms(self) -> int:
        """What is left of this holder's validity by its own clock, less the clock-skew bound
        (:func:`hoodie.lease_margin.remaining_ms`); negative when it is not held or was lost. The validity
        counts from the time read *before* the write that took or renewed the lock was sent."""
        with self._state_lock:
            if self._version is None or self._lost:
                return -1
            valid_until = self._valid_until_ms
        return remaining_ms(valid_until, self._clock_ms())

    def require_margin(self, deadline_ms: int) -> None:
        """Refuse (:class:`~hoodie.lease_margin.LeaseMarginTooShort`, a :class:`~hoodie.errors.LeaseLost`) a
        write under this lock that may take ``deadline_ms`` when the lock's remaining validity is not longer
        (see :mod:`hoodie.lease_margin`): the write would end after another process may take the lock."""
        require_margin(
            self.remaining_ms(), deadline_ms, lease=f"the table lock {self._storage.full_path(LOCK_FILE)}"
        )

    def acquire(self, timeout: float) -> None:
        if self._version is not None:
            if not self.is_held:  # a holder that paused past its expiry: not a re-entrant call
                raise LockLost(
                    f"{self!r} expired (or was lost) while this object held it: work under it may have "
                    "raced, so it is not taken again before the block under it ends"
                )
            raise LockError(f"{self!r} is already held by this object; it is not re-entrant")
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            current = self.state()
            now = self._clock_ms()
            if current is None or not current.held_at(now) or current.owner in orphaned_owners():
                valid_until = now + self._config.validity_seconds * 1000
                data = encode_state(False, valid_until, self.owner)
                try:
                    if current is None:
                        version = self._storage.create(LOCK_FILE, data)
                    else:
                        version = self._storage.replace_if_version(LOCK_FILE, data, current.version)
                except (FileAlreadyExists, VersionConflict):
                    pass  # another process took it first
                except WriteOutcomeUnknown:
                    _orphan(self.owner)  # it may name us now, and no one holds it
                    raise
                else:
                    self._taken(version or "", valid_until)
                    return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                who = f"owner {current.owner}" if current is not None else "another process"
                raise LockTimeout(
                    f"could not take the table lock {self._storage.full_path(LOCK_FILE)} within "
                    f"{timeout:g} s: held by {who}"
                )
            time.sleep(min(remaining, RETRY_SECONDS))

    def release(self) -> None:
        with self._state_lock:
            version, lost = self._version, self._lost
        if version is None:
            raise LockError(f"{self!r} is not held by this object")
        self._stop_renewing()
        with self._state_lock:
            version = self._version
            self._version = None
        if lost or version is None:
            raise LockLost(
                f"the table lock {self._storage.full_path(LOCK_FILE)} was taken over while held: work done "
                "under it may have raced"
            )
        try:
            self._storage.replace_if_version(
                LOCK_FILE, encode_state(True, self._valid_until_ms, self.owner), version
            )
        except VersionConflict:
            raise LockLost(
                f"the table lock {self._storage.full_path(LOCK_FILE)} was taken over before it was released"
            ) from None
        except StorageError:
            _orphan(self.owner)  # still ours in the store, held by no one: free for this process
            raise

    # -- inspection --------------------------------------------------------------------------------------

    def state(self) -> LockState | None:
        """The lock object as stored, or ``None`` when there is none."""
        try:
            data, version = self._storage.read_versioned(LOCK_FILE)
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(data.decode("utf-8"))
            return LockState(bool(doc["expired"]), int(doc["validUntil"]), str(doc["owner"]), version)
        except (UnicodeDecodeError, ValueError, KeyError, TypeError) as e:
            raise LockError(f"{self._storage.full_path(LOCK_FILE)} is not a storage lock: {e}") from e

    # -- renewal -----------------------------------------------------------------------------------------

    def _taken(self, version: str, valid_until_ms: int) -> None:
        with self._state_lock:
            self._version, self._valid_until_ms, self._lost = version, valid_until_ms, False
        self._stop = threading.Event()
        self._renewer = threading.Thread(target=self._renew_loop, name="hoodie-storage-lock", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        while not self._stop.wait(self._config.renew_seconds):
            with self._state_lock:
                version = self._version
            if version is None:
                return
            valid_until = self._clock_ms() + self._config.validity_seconds * 1000
            try:
                new = self._storage.replace_if_version(
                    LOCK_FILE, encode_state(False, valid_until, self.owner), version
                )
            except VersionConflict:
                with self._state_lock:
                    self._lost = True
                logger.error("%r: lost to another owner (its renewal found another version)", self)
                return
            except Exception as e:  # a transient store error: the next tick tries again
                logger.warning("%r: could not renew: %s", self, e)
                continue
            with self._state_lock:
                if self._version == version:
                    self._version, self._valid_until_ms = new, valid_until

    def _stop_renewing(self) -> None:
        self._stop.set()
        if self._renewer is not None and self._renewer is not threading.current_thread():
            self._renewer.join(timeout=60)
        self._renewer = None


__all__ = [
    "LOCK_FILE",
    "PROVIDER_CLASS",
    "RENEW_SECONDS",
    "VALIDITY_SECONDS",
    "LockState",
    "StorageLock",
    "StorageLockConfig",
    "encode_state",
    "orphaned_owners",
]
