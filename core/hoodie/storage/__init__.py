"""The narrow storage interface every other module goes through.

A :class:`Storage` is rooted at a table's base path and speaks in paths relative to it ("" is the base path
itself, ``.hoodie/timeline`` a folder below it). Backends are chosen by URI scheme
(:mod:`hoodie.storage.options`): the local file system (:mod:`~hoodie.storage.local`), object stores through
``obstore`` (:mod:`~hoodie.storage.object_store`: S3, GCS, Azure) and other pyarrow file systems
(:mod:`~hoodie.storage.arrow_fs`). No other module of :mod:`hoodie` touches a file system directly.

What a write promises:

- :meth:`Storage.create` without ``overwrite`` is an atomic create-if-absent
  (:class:`~hoodie.errors.FileAlreadyExists` for the loser): a hard link locally, a conditional PUT
  (``If-None-Match: *``) on object stores. :attr:`Storage.conditional_create` says whether the backend has
  one; where it has not (HDFS, a store configured with ``conditional_put=false``) the call raises, and the
  timeline writer writes under the table lock instead.
- :meth:`Storage.create_stream` writes a data file: it appears whole or not at all. Locally it is a
  create-if-absent too; on object stores a plain (multipart) upload: data files are named after their
  writer's token and instant, so no two writers ever share a name (as Hudi writes them).
- :meth:`Storage.replace_if_version` replaces an object only if it is still the version read
  (``If-Match`` on object stores; a compare under an exclusive ``flock`` of the folder on local disk), for
  the storage-based table lock and the leases on instants (:mod:`hoodie.write.heartbeat`).

Relative paths may not climb out of the base path (:func:`check_relative`). Every request is counted by kind
(:attr:`Storage.requests`), per storage and the storages of its folders (:meth:`Storage.child`).
"""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from hoodie.errors import FileAlreadyExists
from hoodie.storage.backend import Backend, FileInfo, KeyInfo, RequestCounter, format_options
from hoodie.storage.options import Location, backend_for, portable_options
from hoodie.storage.paths import check_relative, join


@dataclass(frozen=True)
class StorageRef:
    """What opens a :class:`Storage` again elsewhere (a Spark task): its URI and options. Small and
    picklable; its repr hides secrets, so a task that is printed or logged does not show credentials."""

    uri: str
    options: tuple[tuple[str, str], ...] = ()

    def open(self) -> Storage:
        return Storage.for_uri(self.uri, dict(self.options))

    def __repr__(self) -> str:
        return f"StorageRef({self.uri!r}, {{{format_options(dict(self.options))}}})"


class Storage:
    """Files below one base path, on one backend."""

    def __init__(
        self,
        backend: Backend,
        root: str,
        uri: str,
        options: Mapping[str, str] | None = None,
    ) -> None:
        self._backend = backend
        self._root = root.rstrip("/") if root != "/" else root
        self.uri = uri
        #: To open the same storage elsewhere (Spark executors); never logged (see :meth:`describe_options`).
        self.options: dict[str, str] = dict(options or {})
        self.is_local = backend.is_local
        self.requests: RequestCounter = backend.counter

    @classmethod
    def for_uri(cls, uri: str, options: Mapping[str, str] | None = None) -> Storage:
        """Open the storage for a base path given as a local path or a URI (``s3://bucket/table``), configured
        by ``options`` and the store's environment variables (:mod:`hoodie.storage.options`)."""
        location: Location = backend_for(uri, options)
        return cls(location.backend, location.root, uri, options)

    def ref(self) -> StorageRef:
        """What opens this storage again in another process, on any host: its options, and the store's
        credential variables of this process's environment that they leave open
        (:func:`~hoodie.storage.options.portable_options`)."""
        return StorageRef(self.uri, tuple(sorted(portable_options(self.uri, self.options).items())))

    def child(self, folder: str) -> Storage:
        """The storage rooted at ``folder`` below this one, on the same backend with the same options (the
        metadata table at ``.hoodie/metadata`` is a table of its own); its requests count with this one's."""
        rel = check_relative(folder)
        if not rel:
            return self
        return Storage(
            self._backend,
            self._key(rel),
            f"{self.uri.rstrip('/')}/{rel}",
            self.options,
        )

    # -- paths -------------------------------------------------------------------------------------------

    def _key(self, path: str) -> str:
        return join(self._root, check_relative(path))

    def full_path(self, path: str) -> str:
        """The full path (local) or URI (object stores) of a relative path, for logs and plans."""
        return self._backend.uri_of(self._key(path))

    @property
    def conditional_create(self) -> bool:
        """Whether :meth:`create` is an atomic create-if-absent here."""
        return self._backend.conditional_create

    @property
    def compare_and_set(self) -> bool:
        """Whether :meth:`replace_if_version` and an atomic :meth:`create` are both available here (local
        disk, and object stores whose conditional writes are on)."""
        return self._backend.conditional_create and (self._backend.versioned or self._backend.is_local)

    def describe_options(self) -> str:
        """The storage options for messages, secrets hidden."""
        return format_options(self.options)

    # -- reads -------------------------------------------------------------------------------------------

    def list(self, folder: str = "", recursive: bool = False) -> list[FileInfo]:
        """Entries below ``folder`` (files and folders), sorted by path. A missing folder lists as empty."""
        base = self._key(folder)
        prefix_len = len(self._root.rstrip("/")) + 1 if self._root not in ("", "/") else len(self._root)
        out = []
        for info in self._backend.list(base, recursive):
            rel = info.key[prefix_len:] if self._root not in ("", "/") else info.key.lstrip("/")
            out.append(FileInfo(rel, posixpath.basename(rel), info.size, info.mtime_ns, info.is_dir))
        out.sort(key=lambda f: f.path)
        return out

    def exists(self, path: str) -> bool:
        return self._backend.exists(self._key(path))

    def info(self, path: str) -> FileInfo:
        """Size and kind of one file; raises :class:`FileNotFoundError` when it is absent."""
        rel = check_relative(path)
        found: KeyInfo = self._backend.head(self._key(rel))
        return FileInfo(rel, posixpath.basename(rel), found.size, found.mtime_ns, found.is_dir)

    def size(self, path: str) -> int:
        return self.info(path).size

    def read(self, path: str) -> bytes:
        """The whole content of a file; raises :class:`FileNotFoundError` when it is absent."""
        return self._backend.get(self._key(path))

    def read_for_update(self, path: str) -> tuple[bytes, str | None]:
        """The content of a file about to be replaced, and the version to replace it at
        (:meth:`replace_if_version`); the version is ``None`` where the store has no compare-and-set (the
        caller then writes under the table lock alone). :class:`FileNotFoundError` when it is absent."""
        if self.compare_and_set:
            return self.read_versioned(path)
        return self.read(path), None

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        """The content of an object and its version (an ETag; locally inode, time and size), for
        :meth:`replace_if_version`."""
        return self._backend.get_versioned(self._key(path))

    def open_input_file(self, path: str) -> pa.NativeFile:
        """A random-access file (for Parquet readers)."""
        return self._backend.open_input_file(self._key(path))

    # -- writes ------------------------------------------------------------------------------------------

    def create(self, path: str, data: bytes, *, overwrite: bool = False) -> str | None:
        """Write a whole file: without ``overwrite`` an atomic create-if-absent (see the module doc), raising
        :class:`FileAlreadyExists` when the file is there. Returns the object's version where the store
        gives one."""
        return self._backend.put(self._key(path), data, create=not overwrite)

    def replace_if_version(self, path: str, data: bytes, version: str) -> str:
        """Replace an object only if it is still at ``version`` (:class:`~hoodie.errors.VersionConflict`
        otherwise); returns its new version. Object stores and local disk (not other pyarrow file systems)."""
        return self._backend.put_if_version(self._key(path), data, version)

    @contextlib.contextmanager
    def create_stream(self, path: str, *, overwrite: bool = False) -> Iterator[pa.NativeFile]:
        """Write a data file through a stream without holding it in memory (see the module doc): it appears
        when the block ends, and not at all on an error."""
        with self._backend.open_output_stream(self._key(path), create=not overwrite) as out:
            yield out

    def delete_dir(self, path: str) -> None:
        """Delete a folder with everything below it (nothing when it is absent)."""
        self._backend.delete_prefix(self._key(path))

    def delete(self, path: str, *, missing_ok: bool = True) -> bool:
        """Delete one file. Returns whether it existed."""
        existed = self._backend.delete(self._key(path))
        if not existed and not missing_ok:
            raise FileNotFoundError(self.full_path(path))
        return existed

    @property
    def bulk_delete_size(self) -> int:
        """The most files one request of :meth:`delete_many` deletes: 1000 on S3 (``DeleteObjects``), 1 on
        the other stores."""
        return self._backend.bulk_delete_size

    def delete_many(self, paths: Sequence[str]) -> None:
        """Delete files, :attr:`bulk_delete_size` a request, without looking whether they exist (one already
        gone counts as deleted). Raises :class:`~hoodie.errors.StorageError` when any may be left, without
        saying which: a caller that needs each file's outcome deletes those of a failed call one at a time."""
        self._backend.delete_many([self._key(p) for p in paths])


__all__ = ["FileAlreadyExists", "FileInfo", "Storage", "StorageRef", "check_relative"]
