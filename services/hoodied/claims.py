"""Claims: who runs a table-service instant. At most one runner holds the claim on an instant at a time.

A claim is held for the whole job; the job's completing write is fenced by :meth:`Claim.check` under the
table lock, so a runner that lost its claim never commits. hoodied's replicas claim through ZooKeeper (the
daemon); :class:`LocalClaim` serves runs on one machine without ZooKeeper (``hoodied compact``): a file
``.hoodie/.aux/hoodied/claims/<action>-<instant>.claim`` created with create-if-absent, naming the holder
(host, pid, start time). A claim whose holder process is gone (same host, pid not running or reused by a
process started later) is taken over, by a compare-and-set on the version of the claim file its holder was
read at, so that a run that read a dead holder and paused cannot take the claim from the run that took it
over meanwhile; a live holder or one on another host is respected.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from typing import Protocol, Self

from hoodie.errors import FileAlreadyExists, VersionConflict
from hoodie.storage import Storage
from hoodied.errors import ClaimHeld, ClaimLost

CLAIMS_FOLDER = ".hoodie/.aux/hoodied/claims"

logger = logging.getLogger(__name__)


class Claim(Protocol):
    """A held claim on one instant."""

    def check(self) -> None:
        """Raise :class:`~hoodied.errors.ClaimLost` unless the claim is still ours."""

    def release(self) -> None: ...

    def describe(self) -> str: ...


def _process_start_ticks(pid: int) -> int | None:
    """The start time of a process (clock ticks since boot), or None when no such process runs."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            stat = f.read()
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return 0
        return 0
    return int(stat.rsplit(")", 1)[1].split()[19])


class LocalClaim:
    """A claim held through a file in the table (runs on one machine)."""

    def __init__(self, storage: Storage, action: str, instant_time: str) -> None:
        self._storage = storage
        self._path = f"{CLAIMS_FOLDER}/{action}-{instant_time}.claim"
        self._token = uuid.uuid4().hex
        self._held = False

    @property
    def path(self) -> str:
        return self._path

    def _content(self) -> bytes:
        pid = os.getpid()
        return json.dumps(
            {
                "token": self._token,
                "host": socket.gethostname(),
                "pid": pid,
                "process_start": _process_start_ticks(pid),
                "claimed_at_ms": int(time.time() * 1000),
            }
        ).encode("utf-8")

    def holder(self) -> dict[str, object] | None:
        found = self._holder_versioned()
        return None if found is None else found[0]

    def _holder_versioned(self) -> tuple[dict[str, object], str] | None:
        """The claim file's holder and the version it was read at ("" where the store has no
        compare-and-set), or None when there is none."""
        try:
            data, found = self._storage.read_for_update(self._path)
            version = found or ""
        except Exception:
            return None
        try:
            value = json.loads(data)
        except ValueError:
            return {"unreadable": data[:80].decode("utf-8", "replace")}, version
        return (value if isinstance(value, dict) else {"unreadable": str(value)[:80]}), version

    def is_abandoned(self, holder: dict[str, object]) -> bool:
        if holder.get("host") != socket.gethostname():
            return False
        pid = holder.get("pid")
        if not isinstance(pid, int):
            return False
        started = _process_start_ticks(pid)
        recorded = holder.get("process_start")
        return started is None or (isinstance(recorded, int) and started != recorded)

    def acquire(self) -> Self:
        for _ in range(3):
            try:
                self._storage.create(self._path, self._content())
            except FileAlreadyExists:
                found = self._holder_versioned()
                if found is None:
                    continue
                holder, version = found
                if self.is_abandoned(holder):
                    if not self._take_over(holder, version):
                        continue
                    self._held = True
                    return self
                raise ClaimHeld(
                    f"{self._path} is claimed by {holder.get('host', '?')}:{holder.get('pid', '?')}; another "
                    "runner is working on this instant (several machines need the daemon's ZooKeeper claims)"
                ) from None
            self._held = True
            return self
        raise ClaimHeld(f"could not claim {self._path}: it keeps changing hands")

    def _take_over(self, holder: dict[str, object], version: str) -> bool:
        """Replace the finished holder's claim with ours, conditional on the version its holder was read at
        (:meth:`~hoodie.storage.Storage.replace_if_version`): of two runs taking over one dead holder's claim
        exactly one wins, and a run that read the holder, paused, and woke after someone else took it over
        changes nothing (a delete, then a create, let the late one delete the winner's claim and take it
        too). False when we lost: look again. Where the store has no compare-and-set the claim is deleted and
        created anew, as before: local claims serve runs on one machine, whose stores have it."""
        logger.warning("taking over the claim %s from a finished process: %s", self._path, holder)
        if not self._storage.compare_and_set:
            self._storage.delete(self._path)
            try:
                self._storage.create(self._path, self._content())
            except FileAlreadyExists:
                return False
            return True
        try:
            self._storage.replace_if_version(self._path, self._content(), version)
        except VersionConflict:
            return False
        return True

    def check(self) -> None:
        holder = self.holder()
        if not self._held or holder is None or holder.get("token") != self._token:
            raise ClaimLost(f"the claim {self._path} is no longer ours (holder now: {holder})")

    def release(self) -> None:
        if not self._held:
            return
        self._held = False
        holder = self.holder()
        if holder is not None and holder.get("token") == self._token:
            self._storage.delete(self._path)

    def describe(self) -> str:
        return f"local claim {self._path}"

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["CLAIMS_FOLDER", "Claim", "LocalClaim"]
