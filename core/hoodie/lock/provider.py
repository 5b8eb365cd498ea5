"""The lock protocol: one writer at a time changes what must change atomically across processes.

Instant times are taken under the table lock, and so are completions of v8+ instants (their completion times)
and every timeline transition on stores without an atomic create-if-absent. A :class:`LockProvider` is
deliberately small (acquire with a timeout, release, ``is_held``, ``with``) so that the lock of Hudi's writers
(a ZooKeeper lock, the storage-based lock, the file-system lock) can stand behind the same protocol.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from hoodie.errors import LockLost

logger = logging.getLogger(__name__)

DEFAULT_ACQUIRE_TIMEOUT_SECONDS = 60.0


@runtime_checkable
class LockProvider(Protocol):
    """A mutual-exclusion lock for one table, across processes (and hosts, for lock servers).

    ``acquire`` raises :class:`~hoodie.errors.LockTimeout` when the lock is not free within ``timeout``
    seconds; ``release`` raises :class:`~hoodie.errors.LockLost` when the lock turned out to be taken over.
    ``is_held`` is true between a successful ``acquire`` and ``release`` while the lock is still ours
    (not expired, session not lost); callers that find it true are inside their own critical section.
    ``with lock:`` acquires with the provider's default timeout.
    """

    def acquire(self, timeout: float) -> None: ...

    def release(self) -> None: ...

    @property
    def is_held(self) -> bool: ...

    def __enter__(self) -> Self: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@contextlib.contextmanager
def held(lock: LockProvider) -> Iterator[None]:
    """Hold ``lock`` for the block; a caller that already holds it keeps it (re-entrant use of a lock
    object that is not itself re-entrant)."""
    if lock.is_held:
        yield
        return
    with lock:
        yield


class AcquireOnEnter:
    """``with lock:`` for lock classes: acquire with the object's ``_acquire_timeout``, release on exit."""

    _acquire_timeout: float

    def acquire(self, timeout: float) -> None:
        raise NotImplementedError

    def release(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.acquire(self._acquire_timeout)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Release; when the block already failed, a lock found lost on release is logged and the block's
        own error goes on (it says what went wrong; the loss only that work under the lock may have
        raced, and the block did not finish its work)."""
        if exc is None:
            self.release()
            return
        try:
            self.release()
        except LockLost as lost:
            logger.warning("%s; the block under it had failed already: %s", lost, exc)


class _NoLock(AcquireOnEnter):
    """A lock for code that must never take one (a preview of scheduling writes nothing): taking it is a
    bug, raised at once rather than waited for."""

    _acquire_timeout = 0.0

    def acquire(self, timeout: float) -> None:
        raise RuntimeError("NO_LOCK was asked for: this path must write nothing")

    def release(self) -> None:
        raise RuntimeError("NO_LOCK is never held")

    @property
    def is_held(self) -> bool:
        return False


#: A lock never to be taken (:class:`_NoLock`).
NO_LOCK: LockProvider = _NoLock()


__all__ = ["DEFAULT_ACQUIRE_TIMEOUT_SECONDS", "NO_LOCK", "AcquireOnEnter", "LockProvider", "held"]
