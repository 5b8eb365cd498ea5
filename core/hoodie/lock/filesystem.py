""":class:`FileSystemLock`: the lock for tables on a local file system, in the place Hudi's
``FileSystemBasedLockProvider`` uses by default, ``<base path>/.hoodie/lock``:

- Acquiring is an atomic create-if-absent of the lock file. The file holds one JSON object naming the holder
  (``{"token": ..., "owner": "<host>:<pid>", "acquired_at_ms": ..., "expires_at_ms": ...}``); Hudi writes a
  ``LockInfo`` text there instead, which we read as "held by someone else".
- A lock whose holder declared an expiry that has passed may be taken over by anyone: replaced with the
  taker's lock by compare-and-set on the version of the file its stale holder was read at
  (:meth:`~hoodie.storage.Storage.replace_if_version`, a compare under ``flock`` locally), so a taker that
  read a stale holder and paused changes nothing once someone else took the lock; a lock file we do
  not understand (Hudi's) expires ``expire_seconds`` after its modification time, as Hudi's
  ``hoodie.write.lock.filesystem.expire`` does (there in minutes). ``expire_seconds=0`` means never, Hudi's
  default.
- Only the lock file with a given content is ever deleted (by its holder on release), and the
  check-then-delete runs while holding a per-content guard file ``<lock>.<digest>.break`` created with
  create-if-absent. Guard files live for milliseconds; one left by a crashed process is removed after
  :data:`GUARD_STALE_SECONDS`. The release is the one check-then-write left: a holder paused between its
  check and its delete, past its expiry and a takeover, would delete the new holder's file (the store has no
  conditional delete); keep critical sections well below ``expire_seconds``.

Differences from Hudi's provider: Hudi's ``unlock`` deletes the lock file whatever it holds, and expiry is
only by modification time; ours deletes only its own file (reporting :class:`~hoodie.errors.LockLost` when
the file was taken over) and expires by the holder's declared time. Both exclude each other: each treats an
existing file as held until it expires. Holding the lock past its expiry voids the guarantee: keep critical
sections well below ``expire_seconds``.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import time
import uuid
from dataclasses import dataclass

from hoodie.errors import FileAlreadyExists, LockError, LockLost, LockTimeout, VersionConflict
from hoodie.lock.provider import DEFAULT_ACQUIRE_TIMEOUT_SECONDS, AcquireOnEnter
from hoodie.storage import Storage

DEFAULT_LOCK_PATH = ".hoodie/lock"
DEFAULT_EXPIRE_SECONDS = 60.0
GUARD_STALE_SECONDS = 10.0


@dataclass(frozen=True)
class LockHolder:
    """What a lock file says about its holder.

    ``token`` identifies the file's content (ours: the holder's random token; anything else: a digest of the
    bytes); ``expires_at`` is in seconds since the epoch, ``None`` for never.
    """

    token: str
    owner: str
    expires_at: float | None

    def is_stale(self, now: float) -> bool:
        return self.expires_at is not None and now > self.expires_at


class FileSystemLock(AcquireOnEnter):
    """The table lock as a file created with create-if-absent (local file systems only).

    ``path`` is relative to the table's base path; ``expire_seconds`` bounds how long a crashed holder blocks
    others (0: forever, until removed by hand); ``acquire_timeout`` is the wait of ``with lock:``.
    One object is one holder: it is not re-entrant and not meant to be shared between threads.
    """

    def __init__(
        self,
        storage: Storage,
        path: str = DEFAULT_LOCK_PATH,
        expire_seconds: float = DEFAULT_EXPIRE_SECONDS,
        *,
        acquire_timeout: float = DEFAULT_ACQUIRE_TIMEOUT_SECONDS,
        poll_seconds: float = 0.02,
    ) -> None:
        if not storage.is_local:
            raise LockError(
                f"FileSystemLock needs a file system with atomic create-if-absent; {storage.uri} is not "
                "local (use a lock server, such as the daemon's ZooKeeper lock)"
            )
        if expire_seconds < 0:
            raise ValueError(f"expire_seconds={expire_seconds} is negative (0 means never)")
        self._storage = storage
        self._path = path
        self._expire_seconds = float(expire_seconds)
        self._acquire_timeout = float(acquire_timeout)
        self._poll_seconds = float(poll_seconds)
        self._token: str | None = None
        self._expires_at: float | None = None

    def __repr__(self) -> str:
        state = "held" if self._token else "free"
        return f"FileSystemLock({self._storage.full_path(self._path)!r}, {state})"

    @property
    def path(self) -> str:
        return self._path

    # -- the protocol ------------------------------------------------------------------------------------

    @property
    def is_held(self) -> bool:
        if self._token is None:
            return False
        return self._expires_at is None or time.time() < self._expires_at

    def acquire(self, timeout: float) -> None:
        if self._token is not None:
            if not self.is_held:  # a holder that paused past its expiry: not a re-entrant call
                raise LockLost(
                    f"{self!r} expired (or was lost) while this object held it: work under it may have "
                    "raced, so it is not taken again before the block under it ends"
                )
            raise LockError(f"{self!r} is already held by this object; it is not re-entrant")
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            token = uuid.uuid4().hex
            now = time.time()
            expires_at = now + self._expire_seconds if self._expire_seconds > 0 else None
            try:
                self._storage.create(self._path, self._content(token, now, expires_at))
            except FileAlreadyExists:
                pass
            else:
                self._token, self._expires_at = token, expires_at
                return
            found = self._holder_versioned()
            if found is None:
                continue  # released between our create and our look: try again at once
            holder, version = found
            stale = holder.is_stale(time.time())
            if stale and self._take_over(version, token, now, expires_at):
                self._token, self._expires_at = token, expires_at
                return
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                who = holder.owner + (" (expired, being broken by another process)" if stale else "")
                raise LockTimeout(
                    f"could not take the table lock {self._storage.full_path(self._path)} within "
                    f"{timeout:g} s: held by {who}"
                )
            time.sleep(min(remaining, self._poll_seconds * (0.5 + random.random())))

    def release(self) -> None:
        token = self._token
        if token is None:
            raise LockError(f"{self!r} is not held by this object")
        self._token, self._expires_at = None, None
        deleted = self._delete_if_current(token)
        if not deleted:
            raise LockLost(
                f"the table lock {self._storage.full_path(self._path)} was no longer ours when released "
                "(it expired and was broken, or is being broken): work done under it may have raced"
            )

    # -- inspection --------------------------------------------------------------------------------------

    def holder(self) -> LockHolder | None:
        """The current holder as the lock file says, or ``None`` when the lock is free."""
        found = self._holder_versioned()
        return None if found is None else found[0]

    def _holder_versioned(self) -> tuple[LockHolder, str] | None:
        """The holder and the version of the lock file it was read from (for :meth:`_take_over`)."""
        try:
            data, version = self._storage.read_versioned(self._path)
        except FileNotFoundError:
            return None
        # A local version is ``<inode>:<mtime ns>:<size>`` (hoodie.storage.local): the file's time, read with
        # its content (a foreign lock file expires by it).
        try:
            mtime_ns: int | None = int(version.split(":")[1])
        except (IndexError, ValueError):
            mtime_ns = None
        return self._parse(data, mtime_ns), version

    def _take_over(self, version: str, token: str, now: float, expires_at: float | None) -> bool:
        """Replace an expired lock file with ours, conditional on the version its stale holder was read at:
        of several processes breaking one expired lock exactly one takes it, and one that read the stale
        holder, paused, and woke after another took the lock changes nothing (a check, then a delete, let it
        delete the new holder's lock). False when another process got there first."""
        try:
            self._storage.replace_if_version(self._path, self._content(token, now, expires_at), version)
        except VersionConflict:
            return False
        return True

    # -- internals ---------------------------------------------------------------------------------------

    @staticmethod
    def _content(token: str, now: float, expires_at: float | None) -> bytes:
        doc = {
            "token": token,
            "owner": f"{socket.gethostname()}:{os.getpid()}",
            "acquired_at_ms": int(now * 1000),
            "expires_at_ms": None if expires_at is None else int(expires_at * 1000),
        }
        return json.dumps(doc, sort_keys=True).encode("utf-8")

    def _parse(self, data: bytes, mtime_ns: int | None) -> LockHolder:
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            doc = None
        if isinstance(doc, dict) and isinstance(doc.get("token"), str):
            expires_ms = doc.get("expires_at_ms")
            expires_at = float(expires_ms) / 1000 if isinstance(expires_ms, int | float) else None
            return LockHolder(doc["token"], str(doc.get("owner", "?")), expires_at)
        # Someone else's lock file (Hudi's FileSystemBasedLockProvider writes its LockInfo text): it expires
        # by modification time, as in Hudi.
        digest = hashlib.sha256(data).hexdigest()
        expires_at = None
        if self._expire_seconds > 0 and mtime_ns is not None:
            expires_at = mtime_ns / 1e9 + self._expire_seconds
        first_line = data[:80].decode("utf-8", errors="replace").splitlines()[:1]
        owner = f"another program ({first_line[0] if first_line else 'empty lock file'!s})"
        return LockHolder(f"sha256:{digest}", owner, expires_at)

    def _guard_path(self, token: str) -> str:
        return f"{self._path}.{hashlib.sha1(token.encode()).hexdigest()[:16]}.break"

    def _delete_if_current(self, token: str) -> bool:
        """Delete the lock file if it still is the one with ``token`` (a release).

        Runs under the guard file of that token, so two releases of one lock file never both act on it.
        Returns whether this call deleted the file.
        """
        guard = self._guard_path(token)
        try:
            self._storage.create(guard, b"")
        except FileAlreadyExists:
            self._clear_stale_guard(guard)
            return False
        try:
            current = self.holder()
            if current is None or current.token != token:
                return False
            return self._storage.delete(self._path)
        finally:
            self._storage.delete(guard)

    def _clear_stale_guard(self, guard: str) -> None:
        try:
            mtime_ns = self._storage.info(guard).mtime_ns
        except FileNotFoundError:
            return
        if mtime_ns is not None and time.time() - mtime_ns / 1e9 > GUARD_STALE_SECONDS:
            self._storage.delete(guard)


__all__ = [
    "DEFAULT_EXPIRE_SECONDS",
    "DEFAULT_LOCK_PATH",
    "GUARD_STALE_SECONDS",
    "FileSystemLock",
    "LockHolder",
]
