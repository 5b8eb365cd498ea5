"""Any other file system pyarrow offers (HDFS, and pyarrow file systems given by tests): reads, listings and
plain writes. No atomic create-if-absent: timeline files are then written only under the table lock (the
timeline writer checks, then writes)."""

from __future__ import annotations

import contextlib
import posixpath
from collections.abc import Iterator, Sequence

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie.errors import FileAlreadyExists, StorageError
from hoodie.storage.backend import KeyInfo, RequestCounter


class ArrowFsBackend:
    """A pyarrow file system without atomic create-if-absent."""

    conditional_create = False
    versioned = False
    is_local = False
    bulk_delete_size = 1

    def __init__(self, fs: pafs.FileSystem, scheme: str = "") -> None:
        self._fs = fs
        self._scheme = scheme
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
                if self._fs.get_file_info(key).type == pafs.FileType.NotFound:
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
        return bool(self._fs.get_file_info(key).type != pafs.FileType.NotFound)

    def get(self, key: str) -> bytes:
        self.counter.add("GET")
        try:
            with self._fs.open_input_stream(key) as f:
                return bytes(f.read())
        except FileNotFoundError:
            raise
        except (OSError, pa.ArrowException) as e:
            if not self.exists(key):
                raise FileNotFoundError(key) from e
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
        if create:
            raise StorageError(
                f"atomic create-if-absent of {key} is not available on {type(self._fs).__name__}; "
                "take the table lock and overwrite explicitly"
            )
        with self.open_output_stream(key, create=False) as out:
            out.write(data)
        return None

    def put_if_version(self, key: str, data: bytes, version: str) -> str:
        raise StorageError(f"{key}: conditional replaces need an object store")

    @contextlib.contextmanager
    def open_output_stream(self, key: str, *, create: bool) -> Iterator[pa.NativeFile]:
        self.counter.add("PUT")
        try:
            self._fs.create_dir(posixpath.dirname(key), recursive=True)
            with self._fs.open_output_stream(key) as out:
                yield out
        except FileAlreadyExists:
            raise
        except (OSError, pa.ArrowException) as e:
            raise StorageError(f"cannot write {key}: {e}") from e

    def delete(self, key: str) -> bool:
        self.counter.add("DELETE")
        try:
            self._fs.delete_file(key)
            return True
        except FileNotFoundError:
            return False
        except (OSError, pa.ArrowException) as e:
            if not self.exists(key):
                return False
            raise StorageError(f"cannot delete {key}: {e}") from e

    def delete_many(self, keys: Sequence[str]) -> None:
        """One request a key: file systems have no bulk delete."""
        for key in keys:
            self.delete(key)

    def delete_prefix(self, key: str) -> None:
        self.counter.add("DELETE")
        try:
            self._fs.delete_dir(key)
        except FileNotFoundError:
            pass
        except (OSError, pa.ArrowException) as e:
            raise StorageError(f"cannot delete {key}: {e}") from e

    def uri_of(self, key: str) -> str:
        return f"{self._scheme}://{key}" if self._scheme else key


def _key_info(info: pafs.FileInfo) -> KeyInfo:
    is_dir = info.type == pafs.FileType.Directory
    return KeyInfo(info.path, 0 if is_dir else int(info.size or 0), info.mtime_ns, is_dir)


__all__ = ["ArrowFsBackend"]
