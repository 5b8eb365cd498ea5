"""The local file system: create-if-absent by hard link, streams that appear only when complete.

Keys are absolute paths. A file is written to a temporary name in its folder, synced, then hard-linked into
place (``os.link`` fails when the name is taken: an atomic create-if-absent, so readers never see a partial
file and two writers never both succeed) or renamed over it (overwrite). Listings, look-ups and Parquet reads
are pyarrow's local file system's (:class:`~hoodie.storage.arrow_fs.ArrowFsBackend`).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import re
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie.errors import FileAlreadyExists, StorageError
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

    def put(self, key: str, data: bytes, *, create: bool) -> str | None:
        self.counter.add("PUT")
        with self._stream(key, create=create) as out:
            out.write(data)
        return None

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


__all__ = ["LocalBackend", "partial_write_target"]
