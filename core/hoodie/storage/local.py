"""The local file system: create-if-absent by hard link, streams that appear only when complete.

Keys are absolute paths. A file is written to a temporary name in its folder, synced, then hard-linked into
place (``os.link`` fails when the name is taken: an atomic create-if-absent, so readers never see a partial
file and two writers never both succeed) or renamed over it (overwrite).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie.errors import FileAlreadyExists, StorageError
from hoodie.storage.backend import KeyInfo, RequestCounter


class LocalBackend:
    """Files on this machine."""

    conditional_create = True
    versioned = False
    is_local = True

    def __init__(self) -> None:
        self._fs = pafs.LocalFileSystem()
        self.counter = RequestCounter()

    def list(self, key: str, recursive: bool) -> list[KeyInfo]:
        self.counter.add("LIST")
        selector = pafs.FileSelector(key, allow_not_found=True, recursive=recursive)
        try:
            infos = self._fs.get_file_info(selector)
        except (OSError, pa.ArrowException) as e:
            # A folder another process is creating (or deleting) this moment can fail the listing with
            # "no such file": list once more; still failing where nothing is there, it lists as empty.
            try:
                infos = self._fs.get_file_info(selector)
            except (OSError, pa.ArrowException):
                if not os.path.exists(key):
                    return []
                raise StorageError(f"cannot list {key}: {e}") from e
        return [_key_info(i) for i in infos]

    def head(self, key: str) -> KeyInfo:
        self.counter.add("HEAD")
        info = self._fs.get_file_info(key)
        if info.type == pafs.FileType.NotFound:
            raise FileNotFoundError(key)
        return _key_info(info)

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
        raise StorageError(f"{key}: versioned reads need an object store")

    def open_input_file(self, key: str) -> pa.NativeFile:
        self.counter.add("GET")
        try:
            return self._fs.open_input_file(key)
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as e:
            raise StorageError(f"cannot open {key}: {e}") from e

    def put(self, key: str, data: bytes, *, create: bool) -> str | None:
        self.counter.add("PUT")
        with self._stream(key, create=create) as out:
            out.write(data)
        return None

    def put_if_version(self, key: str, data: bytes, version: str) -> str:
        raise StorageError(f"{key}: conditional replaces need an object store")

    def open_output_stream(
        self, key: str, *, create: bool
    ) -> contextlib.AbstractContextManager[pa.NativeFile]:
        self.counter.add("PUT")
        return self._stream(key, create=create)

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

    def delete_prefix(self, key: str) -> None:
        self.counter.add("DELETE")
        try:
            self._fs.delete_dir(key)
        except FileNotFoundError:
            pass
        except (OSError, pa.ArrowException) as e:
            raise StorageError(f"cannot delete {key}: {e}") from e

    def uri_of(self, key: str) -> str:
        return key


def _key_info(info: pafs.FileInfo) -> KeyInfo:
    is_dir = info.type == pafs.FileType.Directory
    return KeyInfo(info.path, 0 if is_dir else int(info.size or 0), info.mtime_ns, is_dir)


__all__ = ["LocalBackend"]
