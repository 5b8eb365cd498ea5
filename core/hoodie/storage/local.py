"""The local file system: create-if-absent by hard link, streams that appear only when complete, and
compare-and-set replaces.

Keys are absolute paths. A file is written to a temporary name in its folder, synced, then hard-linked into
place (``os.link`` fails when the name is taken: an atomic create-if-absent, so readers never see a partial
file and two writers never both succeed) or renamed over it (overwrite). Listings, look-ups and Parquet reads
are pyarrow's local file system's (:class:`~hoodie.storage.arrow_fs.ArrowFsBackend`).

A file's version is ``<inode>:<mtime ns>:<size>``: every write renames a new file into place, so a new
version has a new inode or time. :meth:`LocalBackend.put_if_version` compares and replaces while it holds
an exclusive ``flock`` on the file's folder, the local counterpart of an object store's ``If-Match``: of
two processes (of this host) replacing one version, exactly one wins.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import posixpath
import re
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie.errors import FileAlreadyExists, StorageError, VersionConflict
from hoodie.storage.arrow_fs import ArrowFsBackend

#: The temporary name a file is written under before it is linked into place:
#: ``.<name>.<writer's pid>.<32 hex digits>.tmp`` in the same folder.
_PARTIAL = re.compile(r"^\.(?P<target>.+)\.\d+\.[0-9a-f]{32}\.tmp$")


def partial_write_target(name: str) -> str | None:
    """The name of the file a leftover temporary file was being written as (its writer was killed before
    the file was linked into place), or ``None`` when ``name`` is not one. Readers never see such a file;
    whoever rolls back its writer's instant deletes it with the instant's files."""
    m = _PARTIAL.match(name)
    return m.group("target") if m else None


class LocalBackend(ArrowFsBackend):
    """Files on this machine."""

    conditional_create = True
    is_local = True

    def __init__(self) -> None:
        super().__init__(pafs.LocalFileSystem())

    def exists(self, key: str) -> bool:
        self.counter.add("HEAD")
        return os.path.exists(key)

    def get(self, key: str) -> bytes:
        self.counter.add("GET")
        try:
            with open(key, "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read {key}: {e}") from e

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        self.counter.add("GET")
        try:
            with open(key, "rb") as f:
                return f.read(), _version(os.fstat(f.fileno()))
        except FileNotFoundError:
            raise
        except OSError as e:
            raise StorageError(f"cannot read {key}: {e}") from e

    def put(self, key: str, data: bytes, *, create: bool) -> str | None:
        self.counter.add("PUT")
        with self._stream(key, create=create) as out:
            out.write(data)
        return None

    def put_if_version(self, key: str, data: bytes, version: str) -> str:
        """Replace ``key`` only if it is still at ``version`` (see the module doc)."""
        self.counter.add("PUT")
        with _folder_locked(posixpath.dirname(key)):
            try:
                current = _version(os.stat(key))
            except FileNotFoundError:
                raise VersionConflict(f"{key} is gone (expected version {version})") from None
            if current != version:
                raise VersionConflict(f"{key} is at version {current}, not {version}")
            with self._stream(key, create=False) as out:
                out.write(data)
            return _version(os.stat(key))

    @contextlib.contextmanager
    def open_output_stream(self, key: str, *, create: bool) -> Iterator[pa.NativeFile]:
        self.counter.add("PUT")
        with self._stream(key, create=create) as out:
            yield out

    @contextlib.contextmanager
    def _stream(self, key: str, *, create: bool) -> Iterator[pa.NativeFile]:
        parent = posixpath.dirname(key)
        os.makedirs(parent, exist_ok=True)
        tmp = f"{parent}/.{posixpath.basename(key)}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
        try:
            with pa.OSFile(tmp, "wb") as out:
                yield out
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if not create:
                os.replace(tmp, key)
            else:
                try:
                    os.link(tmp, key)
                except FileExistsError as e:
                    raise FileAlreadyExists(key) from e
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def delete(self, key: str) -> bool:
        self.counter.add("DELETE")
        try:
            os.unlink(key)
            return True
        except FileNotFoundError:
            return False
        except IsADirectoryError as e:
            raise StorageError(f"cannot delete {key}: a folder") from e
        except OSError as e:
            raise StorageError(f"cannot delete {key}: {e}") from e


def _version(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


@contextlib.contextmanager
def _folder_locked(folder: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``folder`` (released when the block ends, or the process dies)."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        raise VersionConflict(f"{folder} is gone") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


__all__ = ["LocalBackend", "partial_write_target"]
