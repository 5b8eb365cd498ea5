"""A stall fault on local disk: a store whose writer "pauses" when a chosen request arrives, the way a process
stopped mid-request (a long GC, a frozen VM) or a request held in the network looks to everyone else.

:class:`StallingBackend` is the real local backend; once a write whose key matches ``trigger`` arrives, that
write and every later request of the same backend (writes, reads, deletes: the heartbeat's beats too) wait
until :meth:`StallingBackend.release`, and then go through in order, the held write first, as a proxy
forwarding a held request would. Other :class:`~hoodie.storage.Storage` objects on the same folder (another
executor) are not affected.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import Any

from hoodie.storage import Storage
from hoodie.storage.local import LocalBackend


class PausingStorage(Storage):
    """Local storage whose first PUT of a ``.requested`` file waits while ``meanwhile`` runs: a scheduler
    paused at its PUT, and the lock passed on meanwhile (the plan overlap tests)."""

    meanwhile: Callable[[], None] | None = None

    def create(self, path: str, data: bytes, *, overwrite: bool = False) -> str | None:
        hook = self.meanwhile
        if hook is not None and path.endswith(".requested"):
            self.meanwhile = None
            hook()
        return super().create(path, data, overwrite=overwrite)


class StallingBackend(LocalBackend):
    """Local files; stalls at the first write whose key matches ``trigger`` (a regular expression searched in
    the key) until :meth:`release`."""

    def __init__(self, trigger: str) -> None:
        super().__init__()
        self._trigger = re.compile(trigger)
        self._armed = True
        self._stalled = threading.Event()
        self._released = threading.Event()
        self.held: str | None = None

    def stalled(self, timeout: float) -> bool:
        """Wait until the trigger's write arrived (True) or ``timeout`` passed."""
        return self._stalled.wait(timeout)

    def release(self, *, then_die: bool = False) -> None:
        """Let the held write through; with ``then_die`` every later request fails as a dead process's
        would never be sent (the held request still lands, as one already in the network does)."""
        self._dead = then_die
        self._released.set()

    _dead = False

    def _gate(self, key: str, write: bool) -> None:
        if write and self._armed and self._trigger.search(key):
            self._armed = False
            self.held = key
            self._stalled.set()
            self._released.wait()
            return  # the held request goes through
        if self._stalled.is_set():
            self._released.wait()
            if self._dead:
                raise ConnectionAbortedError(f"the stalled process died before it sent a request for {key}")

    def put(self, key: str, data: bytes, *, create: bool) -> str | None:
        self._gate(key, True)
        return super().put(key, data, create=create)

    def put_if_version(self, key: str, data: bytes, version: str) -> str:
        self._gate(key, True)
        return super().put_if_version(key, data, version)

    def get(self, key: str) -> bytes:
        self._gate(key, False)
        return super().get(key)

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        self._gate(key, False)
        return super().get_versioned(key)

    def delete(self, key: str) -> bool:
        self._gate(key, True)
        return super().delete(key)

    def exists(self, key: str) -> bool:
        self._gate(key, False)
        return super().exists(key)

    def list(self, key: str, recursive: bool) -> Any:
        self._gate(key, False)
        return super().list(key, recursive)

    def head(self, key: str) -> Any:
        self._gate(key, False)
        return super().head(key)

    def open_input_file(self, key: str) -> Any:
        self._gate(key, False)
        return super().open_input_file(key)

    def open_output_stream(self, key: str, *, create: bool) -> Any:
        self._gate(key, True)
        return super().open_output_stream(key, create=create)


def stalling_storage(root: str, trigger: str) -> tuple[Storage, StallingBackend]:
    """A storage of the table at ``root`` (a local path) whose writer stalls at ``trigger``."""
    backend = StallingBackend(trigger)
    return Storage(backend, root, root), backend


__all__ = ["PausingStorage", "StallingBackend", "stalling_storage"]
