"""The narrow storage interface every other module goes through.

A :class:`Storage` is rooted at a table's base path and speaks in paths relative to it ("" is the base path
itself, ``.hoodie/timeline`` a folder below it). Backends are chosen by URI scheme through ``pyarrow.fs``:
a plain path or ``file://`` is the local file system, ``s3://``, ``gs://``, ``abfs://``, ``hdfs://`` whatever
pyarrow offers. No other module of :mod:`hoodie` touches a file system directly.

Relative paths may not climb out of the base path: ``..`` components, absolute paths, empty components raise
:class:`~hoodie.errors.PathOutsideTable`, so a malformed plan cannot make us read or write elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie.errors import FileAlreadyExists, PathOutsideTable, StorageError


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One entry of a listing: its path relative to the base path, its name, size and kind."""

    path: str
    name: str
    size: int
    mtime_ns: int | None
    is_dir: bool


def check_relative(path: str) -> str:
    """Return ``path`` normalised (no leading/trailing slash), or raise if it leaves the base path."""
    if path in ("", "."):
        return ""
    if path.startswith("/") or "\\" in path:
        raise PathOutsideTable(f"path {path!r} is not relative to the table's base path")
    parts = path.strip("/").split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise PathOutsideTable(f"path {path!r} leaves the table's base path or is malformed")
    return "/".join(parts)


class Storage:
    """Files below one base path, on one backend."""

    def __init__(
        self, fs: pafs.FileSystem, root: str, uri: str, options: Mapping[str, str] | None = None
    ) -> None:
        self._fs = fs
        self._root = root.rstrip("/") or "/"
        self.uri = uri
        self.options: dict[str, str] = dict(options or {})  # to open the same storage elsewhere (executors)
        self.is_local = isinstance(fs, pafs.LocalFileSystem)

    @classmethod
    def for_uri(cls, uri: str, options: Mapping[str, str] | None = None) -> Storage:
        """Open the storage for a base path given as a local path or a URI (``s3://bucket/table``).

        ``options`` are passed to the backend (for S3: ``access_key``, ``secret_key``, ``region``,
        ``endpoint_override``, ...); unknown ones raise :class:`StorageError`.
        """
        parsed = urlparse(uri)
        if parsed.scheme in ("", "file") or (len(parsed.scheme) == 1 and os.name == "nt"):
            local = parsed.path if parsed.scheme == "file" else uri
            root = os.path.abspath(local)
            return cls(pafs.LocalFileSystem(), root, uri)
        try:
            if options:
                fs = _backend_with_options(parsed.scheme, dict(options))
                root = (parsed.netloc + parsed.path).rstrip("/")
            else:
                fs, root = pafs.FileSystem.from_uri(uri)
        except (pa.ArrowException, ValueError, TypeError) as e:
            raise StorageError(f"cannot open storage for {uri!r}: {e}") from e
        return cls(fs, root, uri, options)

    def child(self, folder: str) -> Storage:
        """The storage rooted at ``folder`` below this one, on the same backend with the same options (the
        metadata table at ``.hoodie/metadata`` is a table of its own)."""
        rel = check_relative(folder)
        if not rel:
            return self
        return Storage(self._fs, self.full_path(rel), f"{self.uri.rstrip('/')}/{rel}", self.options)

    # -- paths -------------------------------------------------------------------------------------------

    def full_path(self, path: str) -> str:
        """The backend path of a relative path (for logs and for libraries that take a file system)."""
        rel = check_relative(path)
        return f"{self._root}/{rel}" if rel else self._root

    @property
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow file system, for readers (``pyarrow.parquet``) that want one with :meth:`full_path`."""
        return self._fs

    # -- reads -------------------------------------------------------------------------------------------

    def list(self, folder: str = "", recursive: bool = False) -> list[FileInfo]:
        """Entries below ``folder`` (files and folders), sorted by path. A missing folder lists as empty."""
        base = check_relative(folder)
        selector = pafs.FileSelector(self.full_path(base), allow_not_found=True, recursive=recursive)
        try:
            infos = self._fs.get_file_info(selector)
        except (OSError, pa.ArrowException) as e:
            # A folder another process is creating (or deleting) this moment can fail the listing with
            # "no such file": list once more; still failing where nothing is there, it lists as empty.
            try:
                infos = self._fs.get_file_info(selector)
            except (OSError, pa.ArrowException):
                if not self.exists(base):
                    return []
                raise StorageError(f"cannot list {self.full_path(base)}: {e}") from e
        out = []
        prefix_len = len(self._root.rstrip("/")) + 1
        for info in infos:
            rel = info.path[prefix_len:] if self._root != "/" else info.path.lstrip("/")
            is_dir = info.type == pafs.FileType.Directory
            out.append(
                FileInfo(
                    path=rel,
                    name=posixpath.basename(rel),
                    size=0 if is_dir else int(info.size or 0),
                    mtime_ns=info.mtime_ns,
                    is_dir=is_dir,
                )
            )
        out.sort(key=lambda f: f.path)
        return out

    def exists(self, path: str) -> bool:
        info = self._fs.get_file_info(self.full_path(path))
        return bool(info.type != pafs.FileType.NotFound)

    def info(self, path: str) -> FileInfo:
        """Size and kind of one file; raises :class:`FileNotFoundError` when it is absent."""
        full = self.full_path(path)
        info = self._fs.get_file_info(full)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(full)
        rel = check_relative(path)
        is_dir = info.type == pafs.FileType.Directory
        return FileInfo(
            rel, posixpath.basename(rel), 0 if is_dir else int(info.size or 0), info.mtime_ns, is_dir
        )

    def size(self, path: str) -> int:
        return self.info(path).size

    def read(self, path: str) -> bytes:
        """The whole content of a file; raises :class:`FileNotFoundError` when it is absent."""
        full = self.full_path(path)
        try:
            with self._fs.open_input_stream(full) as f:
                return bytes(f.read())
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as e:
            if self._fs.get_file_info(full).type == pafs.FileType.NotFound:
                raise FileNotFoundError(full) from e
            raise StorageError(f"cannot read {full}: {e}") from e

    def open_input_file(self, path: str) -> pa.NativeFile:
        """A random-access file (for Parquet readers)."""
        full = self.full_path(path)
        try:
            return self._fs.open_input_file(full)
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as e:
            raise StorageError(f"cannot open {full}: {e}") from e

    # -- writes ------------------------------------------------------------------------------------------

    def create(self, path: str, data: bytes, *, overwrite: bool = False) -> None:
        """Write a whole file.

        Without ``overwrite`` this is an atomic create-if-absent: on the local file system an exclusive
        create of a temporary name then a hard link (so readers never see a partial file and two writers
        never both succeed); it raises :class:`FileAlreadyExists` when the file is there. Object stores do
        not offer that through pyarrow, so there it raises :class:`StorageError`: callers must hold a lock
        and use ``overwrite=True`` after checking.
        """
        with self.create_stream(path, overwrite=overwrite) as out:
            out.write(data)

    @contextlib.contextmanager
    def create_stream(self, path: str, *, overwrite: bool = False) -> Iterator[pa.NativeFile]:
        """Write a file through a stream, with :meth:`create`'s guarantees, without holding it in memory.

        Local file system: the stream writes a temporary file in the target folder, which is synced and
        hard-linked into place when the block ends (create-if-absent, :class:`FileAlreadyExists` when taken);
        on an error nothing appears at ``path``. Object stores: as :meth:`create`, only with ``overwrite``
        (an object appears when its upload completes).
        """
        full = self.full_path(path)
        parent = posixpath.dirname(full)
        if not self.is_local:
            if not overwrite:
                raise StorageError(
                    f"atomic create-if-absent of {full} is not available on {type(self._fs).__name__}; "
                    "take the table lock and overwrite explicitly"
                )
            try:
                self._fs.create_dir(parent, recursive=True)
                with self._fs.open_output_stream(full) as out:
                    yield out
            except (OSError, pa.ArrowException) as e:
                raise StorageError(f"cannot write {full}: {e}") from e
            return
        os.makedirs(parent, exist_ok=True)
        tmp = f"{parent}/.{posixpath.basename(full)}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            with pa.OSFile(tmp, "wb") as out:
                yield out
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if overwrite:
                os.replace(tmp, full)
            else:
                try:
                    os.link(tmp, full)
                except FileExistsError as e:
                    raise FileAlreadyExists(full) from e
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def delete_dir(self, path: str) -> None:
        """Delete a folder with everything below it (nothing when it is absent)."""
        full = self.full_path(path)
        try:
            self._fs.delete_dir(full)
        except FileNotFoundError:
            pass
        except (OSError, pa.ArrowException) as e:
            raise StorageError(f"cannot delete {full}: {e}") from e

    def delete(self, path: str, *, missing_ok: bool = True) -> bool:
        """Delete one file. Returns whether it existed."""
        full = self.full_path(path)
        try:
            self._fs.delete_file(full)
            return True
        except FileNotFoundError:
            if missing_ok:
                return False
            raise
        except (OSError, pa.ArrowException) as e:
            if self._fs.get_file_info(full).type == pafs.FileType.NotFound:
                if missing_ok:
                    return False
                raise FileNotFoundError(full) from e
            raise StorageError(f"cannot delete {full}: {e}") from e


def _backend_with_options(scheme: str, options: dict[str, str]) -> pafs.FileSystem:
    if scheme in ("s3", "s3a"):
        return pafs.S3FileSystem(**options)
    if scheme in ("gs", "gcs"):
        return pafs.GcsFileSystem(**options)
    if scheme == "hdfs":
        return pafs.HadoopFileSystem(**options)
    raise StorageError(f"no storage backend with options for scheme {scheme!r}")
