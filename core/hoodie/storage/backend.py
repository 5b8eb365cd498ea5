"""What a storage backend offers (one per kind of store), the entries it lists, and the count of the
requests it makes.

Paths given to a backend are *keys*: absolute within the backend (a local path without its leading ``/``
handled by the backend, an object's key within its bucket). :class:`~hoodie.storage.Storage` turns the
paths relative to a table into keys and is the only caller.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

#: The kinds of request counted (``hoodied_storage_requests_total{op}``).
OPS = ("LIST", "GET", "HEAD", "PUT", "DELETE")


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of a listing: its path relative to the base path, its name, size and kind."""

    path: str
    name: str
    size: int
    mtime_ns: int | None
    is_dir: bool


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """An entry as a backend lists it: its key, size, modification time, kind and version (an ETag)."""

    key: str
    size: int
    mtime_ns: int | None
    is_dir: bool
    version: str | None = None


class RequestCounter:
    """Requests a backend made, by kind (thread-safe; one per storage, shared by its children)."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._lock = threading.Lock()

    def add(self, op: str, n: int = 1) -> None:
        with self._lock:
            self._counts[op] += n

    def snapshot(self) -> dict[str, int]:
        """The counts so far, by kind."""
        with self._lock:
            return dict(self._counts)


class Backend(Protocol):
    """The operations of one kind of store. Each raises ``FileNotFoundError`` for a missing object and
    :class:`~hoodie.errors.StorageError` for any other failure."""

    #: Whether :meth:`put` with ``create=True`` is an atomic create-if-absent.
    conditional_create: bool
    #: The requests this backend made (every storage on it shares them).
    counter: RequestCounter
    #: Whether :meth:`put_if_version` and versions in listings are available (object stores).
    versioned: bool
    is_local: bool
    #: The most keys one request of :meth:`delete_many` deletes (S3's ``DeleteObjects``: 1000); 1 where each
    #: key is a request of its own.
    bulk_delete_size: int

    def list(self, key: str, recursive: bool) -> list[KeyInfo]: ...

    def head(self, key: str) -> KeyInfo: ...

    def exists(self, key: str) -> bool: ...

    def get(self, key: str) -> bytes: ...

    def get_versioned(self, key: str) -> tuple[bytes, str]: ...

    def open_input_file(self, key: str) -> pa.NativeFile: ...

    def put(self, key: str, data: bytes, *, create: bool) -> str | None:
        """Write ``data``; with ``create`` fail with :class:`~hoodie.errors.FileAlreadyExists` when the object
        exists (atomically where :attr:`conditional_create`). Returns the new version where known."""
        ...

    def put_if_version(self, key: str, data: bytes, version: str) -> str:
        """Replace the object only if its version is still ``version``; raise
        :class:`~hoodie.errors.VersionConflict` otherwise. Returns the new version."""
        ...

    def open_output_stream(self, key: str, *, create: bool) -> AbstractContextManager[pa.NativeFile]:
        """A stream whose file appears when the block ends; locally with ``create`` a create-if-absent, on
        object stores always a plain upload."""
        ...

    def delete(self, key: str) -> bool: ...

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete ``keys`` (one already gone counts as deleted), :attr:`bulk_delete_size` a request; raise
        :class:`~hoodie.errors.StorageError` when any of them may be left, without saying which."""
        ...

    def delete_prefix(self, key: str) -> None: ...

    def uri_of(self, key: str) -> str: ...


def format_options(options: Mapping[str, str]) -> str:
    """Options for messages and logs: secrets shown as ``***``."""
    return ", ".join(f"{k}={'***' if is_secret(k) else v}" for k, v in sorted(options.items()))


def is_secret(key: str) -> bool:
    k = key.lower()
    return any(word in k for word in ("secret", "token", "password", "credential", "key_id", "access_key"))


__all__ = [
    "OPS",
    "Backend",
    "FileInfo",
    "KeyInfo",
    "RequestCounter",
    "format_options",
    "is_secret",
]
