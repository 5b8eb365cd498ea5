"""Object stores (S3 and S3-compatible stores, GCS, Azure Blob / ADLS) through ``obstore``.

Why ``obstore`` (the Python binding of the Rust ``object_store`` crate, which hudi-rs uses too): timeline
files need an atomic create-if-absent and the storage-based table lock a conditional replace, and pyarrow's
file systems expose neither. ``object_store`` does both on every store that has them (S3 ``If-None-Match: *``
and ``If-Match``, GCS ``ifGenerationMatch``, Azure ``If-None-Match`` / ``If-Match``), reads the standard
environment variables of each store, retries throttled and failed requests with back-off, and has no
dependencies of its own.

Keys are object keys within the bucket (container). Folders do not exist on object stores: a listing shows
the common prefixes of the keys below it as folders, a folder "exists" when some key lies below it, and
deleting one deletes every key below it.

An S3-compatible store that ignores ``If-None-Match`` (some older ones) would make create-if-absent a plain
overwrite: give the storage option ``conditional_put=false`` and hoodied then writes timeline files only under
the table lock, checking first, as for a file system without create-if-absent.

**Faults.** Retries follow one :class:`~hoodie.storage.retry.RetryPolicy`: ``obstore`` applies it to the
requests of streams (ranged reads, multipart uploads), :func:`~hoodie.storage.retry.resend` to every other
request, on a store twin that does not retry by itself (why: :mod:`hoodie.storage.retry`). A conditional write
can land and still look failed: its response is lost, and sent again its condition fails on our own object.
So every conditional write carries a token of its own in the object's user metadata (:data:`WRITE_TOKEN`);
when its condition fails, or it still fails after every retry, the object is read back, and it is our write
when it carries our token. Then the outcome is known in every case but one: the store cannot be read either,
and :class:`~hoodie.errors.WriteOutcomeUnknown` says so.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import obstore
import pyarrow as pa
from obstore.exceptions import AlreadyExistsError, PreconditionError
from obstore.store import AzureStore, GCSStore, S3Store

from hoodie.errors import FileAlreadyExists, StorageError, StoreRefused, VersionConflict, WriteOutcomeUnknown
from hoodie.storage.backend import KeyInfo, RequestCounter, format_options
from hoodie.storage.retry import RetryPolicy, attempts_note, resend
from hoodie.storage.store_errors import one_line, permanent

logger = logging.getLogger(__name__)

#: Parts of a streamed upload (a multipart upload on S3): 16 MiB.
UPLOAD_CHUNK_BYTES = 16 * 1024 * 1024
#: Keys one bulk delete request deletes, by store: S3's ``DeleteObjects`` takes up to 1000 (obstore sends it
#: for a list of keys). Elsewhere one key a request: obstore sends GCS's deletes one by one anyway, and
#: Azure's Blob Batch answers an absent blob with an error, which a re-run clean meets for each key it had
#: deleted.
BULK_DELETE_KEYS = {"s3": 1000}
#: The user metadata key of a conditional write's token (S3 ``x-amz-meta-hoodiewrite``, Azure
#: ``x-ms-meta-hoodiewrite``, GCS ``x-goog-meta-hoodiewrite``): letters only, as every store (and every proxy
#: in front of one) accepts in a header name.
WRITE_TOKEN = "hoodiewrite"

_STORES: dict[tuple[object, ...], Any] = {}
_STORES_LOCK = threading.Lock()


def open_store(
    scheme: str,
    bucket: str,
    config: Mapping[str, str],
    client: Mapping[str, str],
    retry: RetryPolicy | None = None,
    *,
    retrying: bool = True,
) -> Any:
    """The store of one bucket with one configuration, shared by every storage of this process (one
    connection pool per bucket). ``retry`` is its :class:`RetryPolicy`; ``retrying=False`` opens the twin
    that sends each request once (for :func:`~hoodie.storage.retry.resend`). Raises StorageError for an option
    the store does not know."""
    policy = retry or RetryPolicy()
    options = tuple(sorted({**config, **{f"client.{k}": v for k, v in client.items()}}.items()))
    key = (scheme, bucket, options, policy, retrying)  # the policy is frozen, hence a key
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is not None:
            return store
        kind: type[Any] = {"s3": S3Store, "gs": GCSStore, "az": AzureStore}[scheme]
        try:
            store = kind(
                bucket,
                config=dict(config) or None,
                client_options=dict(client) or None,
                retry_config=policy.obstore_config(retrying=retrying),
            )
        except Exception as e:  # obstore raises its own errors for unknown keys and bad values
            shown = format_options({**config, **client})
            raise StorageError(
                f"cannot open the {scheme} store {bucket!r} with options {{{shown}}}: {_reason(e)}"
            ) from e
        _STORES[key] = store
        return store


class ObjectStoreBackend:
    """One bucket (container) of an object store: ``store`` retries by itself (streams), ``once`` (the same
    store sending each request once) is driven by :func:`~hoodie.storage.retry.resend` with ``retry``
    (everything else)."""

    versioned = True
    is_local = False

    def __init__(
        self,
        scheme: str,
        bucket: str,
        store: Any,
        *,
        conditional_create: bool,
        uri_scheme: str,
        once: Any | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self._scheme = scheme
        self._bucket = bucket
        self._store = store
        self._once = once if once is not None else store
        self._retry = retry or RetryPolicy()
        self._uri_scheme = uri_scheme
        self.conditional_create = conditional_create
        self.bulk_delete_size = BULK_DELETE_KEYS.get(scheme, 1)
        self.counter = RequestCounter()

    # -- reads -------------------------------------------------------------------------------------------

    def list(self, key: str, recursive: bool) -> list[KeyInfo]:
        """A listing, sent again whole when a page fails (a response cut mid-body included)."""
        prefix = f"{key}/" if key else None

        def listing() -> list[KeyInfo]:
            if recursive:
                out: list[KeyInfo] = []
                for chunk in obstore.list(self._once, prefix):
                    self.counter.add("LIST")
                    out.extend(_key_info(meta) for meta in chunk)
                return out
            self.counter.add("LIST")
            listed = obstore.list_with_delimiter(self._once, prefix)
            folders = [KeyInfo(p.rstrip("/"), 0, None, True) for p in listed["common_prefixes"]]
            return folders + [_key_info(meta) for meta in listed["objects"]]

        try:
            return resend(self._retry, listing)
        except FileNotFoundError:
            return []
        except Exception as e:
            raise _failed(f"cannot list {self.uri_of(key)}", e) from e

    def head(self, key: str) -> KeyInfo:
        self.counter.add("HEAD")
        try:
            return _key_info(resend(self._retry, lambda: obstore.head(self._once, key)))
        except FileNotFoundError:
            if self._is_folder(key):
                return KeyInfo(key, 0, None, True)
            raise FileNotFoundError(self.uri_of(key)) from None
        except Exception as e:
            raise _failed(f"cannot look at {self.uri_of(key)}", e) from e

    def exists(self, key: str) -> bool:
        try:
            self.head(key)
            return True
        except FileNotFoundError:
            return False

    def _is_folder(self, key: str) -> bool:
        self.counter.add("LIST")
        prefix = f"{key}/" if key else None
        try:
            listed = resend(self._retry, lambda: obstore.list_with_delimiter(self._once, prefix))
        except FileNotFoundError:
            return False
        except Exception as e:
            raise _failed(f"cannot list {self.uri_of(key)}", e) from e
        return bool(listed["objects"] or listed["common_prefixes"])

    def get(self, key: str) -> bytes:
        return self.get_versioned(key)[0]

    def get_versioned(self, key: str) -> tuple[bytes, str]:
        self.counter.add("GET")
        try:
            data, version, _ = resend(self._retry, lambda: self._get_once(key))
        except FileNotFoundError:
            raise FileNotFoundError(self.uri_of(key)) from None
        except Exception as e:
            raise _failed(f"cannot read {self.uri_of(key)}", e) from e
        return data, version

    def _get_once(self, key: str) -> tuple[bytes, str, str | None]:
        """One GET, body included: the object, its version and the token of the conditional write that made
        it (None when another kind of write did)."""
        result = obstore.get(self._once, key)
        data = bytes(result.bytes())
        return data, self._version(result.meta) or "", result.attributes.get(WRITE_TOKEN)

    def _version(self, meta: Mapping[str, Any]) -> str | None:
        """The version a compare-and-set names: the ETag, except on GCS, where ``object_store`` conditions
        a replace on the generation (``x-goog-if-generation-match``) and refuses one given only an ETag."""
        if self._scheme == "gs":
            return str(meta.get("version") or "") or None
        return str(meta.get("e_tag") or meta.get("version") or "") or None

    def open_input_file(self, key: str) -> pa.NativeFile:
        """A random-access file (Parquet reads fetch the ranges they need). A read the store fails raises
        :class:`StorageError` through pyarrow (which raises a file's own exceptions as they are), never an
        ``OSError``: readers take an ``OSError`` for a damaged file."""
        self.counter.add("HEAD")
        try:
            reader = obstore.open_reader(self._store, key)
        except FileNotFoundError:
            raise FileNotFoundError(self.uri_of(key)) from None
        except Exception as e:
            raise _failed(f"cannot open {self.uri_of(key)}", e) from e
        return pa.PythonFile(_CountedReader(reader, self.counter, self.uri_of(key)), mode="r")

    # -- writes ------------------------------------------------------------------------------------------

    def put(self, key: str, data: bytes, *, create: bool) -> str | None:
        if create and not self.conditional_create:
            raise StorageError(
                f"atomic create-if-absent of {self.uri_of(key)} is turned off for this store "
                "(conditional_put=false); take the table lock and overwrite explicitly"
            )
        self.counter.add("PUT")
        if create:
            return self._conditional_put(key, data, None)
        try:
            result = resend(self._retry, lambda: obstore.put(self._once, key, data, use_multipart=False))
        except Exception as e:
            raise _failed(f"cannot write {self.uri_of(key)}", e) from e
        return self._version(result)

    def put_if_version(self, key: str, data: bytes, version: str) -> str:
        self.counter.add("PUT")
        return self._conditional_put(key, data, version) or ""

    def _conditional_put(self, key: str, data: bytes, version: str | None) -> str | None:
        """Create ``key`` (``version`` None) or replace it at ``version``, in one PUT carrying a fresh token
        (see the module doc); returns the new version. :class:`FileAlreadyExists` (create) or
        :class:`VersionConflict` (replace) when another writer's object stands in the way;
        :class:`StorageError` when every attempt failed and the object is as it was (not written);
        :class:`WriteOutcomeUnknown` when that cannot be told."""
        token = uuid.uuid4().hex
        mode: Any = "create" if version is None else {"e_tag": version}
        if version is not None and self._scheme == "gs":
            mode = {"version": version}  # the generation (see _version)

        def attempt() -> str | None:
            try:
                result = obstore.put(
                    self._once, key, data, mode=mode, attributes={WRITE_TOKEN: token}, use_multipart=False
                )
            except (AlreadyExistsError, PreconditionError):
                landed = self._landed(key, token)
                if landed is None:
                    raise
                return landed  # an earlier attempt of ours landed; this one found it there
            return self._version(result)

        try:
            return resend(self._retry, attempt)
        except (AlreadyExistsError, PreconditionError) as e:
            if version is None:
                raise FileAlreadyExists(self.uri_of(key)) from e
            raise VersionConflict(f"{self.uri_of(key)} is not at version {version} any more") from e
        except FileNotFoundError as e:
            if version is None:  # no such bucket
                raise _failed(f"cannot write {self.uri_of(key)}", e) from e
            raise VersionConflict(f"{self.uri_of(key)} is not at version {version} any more") from e
        except Exception as e:
            failure = e
        try:
            found = self._read_back(key)
        except Exception as e:
            raise WriteOutcomeUnknown(
                f"cannot tell whether {self.uri_of(key)} was written: the write failed ({_reason(failure)}) "
                f"and reading it back failed too ({_reason(e)})"
            ) from failure
        if found is not None and found[1] == token:
            return found[0]
        if found is not None and version is None:
            raise FileAlreadyExists(self.uri_of(key)) from failure
        if found is not None and found[0] != version:
            raise VersionConflict(f"{self.uri_of(key)} is not at version {version} any more") from failure
        raise _failed(f"cannot write {self.uri_of(key)} (not written)", failure) from failure

    def _landed(self, key: str, token: str) -> str | None:
        """The version of ``key`` when it is the object of the write that carried ``token``, else None."""
        found = self._read_back(key)
        return found[0] if found is not None and found[1] == token else None

    def _read_back(self, key: str) -> tuple[str, str | None] | None:
        """The version of ``key`` and the token of the conditional write that made it (None when another
        kind of write made it); None when there is no such object."""
        self.counter.add("GET")
        try:
            _, version, token = resend(self._retry, lambda: self._get_once(key))
        except FileNotFoundError:
            return None
        return version, token

    @contextlib.contextmanager
    def open_output_stream(self, key: str, *, create: bool) -> Iterator[pa.NativeFile]:
        """A streamed upload (in parts of :data:`UPLOAD_CHUNK_BYTES`): the object appears when the block ends;
        on an error nothing appears, and the parts sent are aborted (an incomplete multipart upload is
        invisible but billed). A plain upload: callers give the file a name only they use (data files carry
        their writer's token and instant)."""
        self.counter.add("PUT")
        try:
            writer = obstore.open_writer(self._store, key, buffer_size=UPLOAD_CHUNK_BYTES)
        except Exception as e:
            raise _failed(f"cannot write {self.uri_of(key)}", e) from e
        sink = _CountedWriter(writer, self.counter, self.uri_of(key))
        out = pa.PythonFile(sink, mode="w")
        try:
            yield out
        except BaseException as e:
            sink.abandon(e)  # not completed: the upload never becomes an object
            raise
        try:
            writer.close()
        except Exception as e:
            raise _failed(f"cannot write {self.uri_of(key)}", e) from e

    def delete(self, key: str) -> bool:
        try:
            self.head(key)
        except FileNotFoundError:
            return False
        self.counter.add("DELETE")
        try:
            self._delete(key)
        except FileNotFoundError:
            return False
        except Exception as e:
            raise _failed(f"cannot delete {self.uri_of(key)}", e) from e
        return True

    def delete_many(self, keys: Sequence[str]) -> None:
        """Delete ``keys`` in requests of :attr:`bulk_delete_size` keys, without looking first (S3 answers
        an absent key of a ``DeleteObjects`` as deleted; elsewhere a key found absent is simply gone). A
        request that fails for any of its keys (``DeleteObjects`` answers each key on its own; obstore raises
        the first error) raises :class:`StorageError`: which of its keys are left is not known."""
        step = self.bulk_delete_size
        for i in range(0, len(keys), step):
            chunk = list(keys[i : i + step])
            self.counter.add("DELETE")
            try:
                self._delete(chunk if step > 1 else chunk[0])
            except Exception as e:
                if isinstance(e, FileNotFoundError) and step == 1:
                    continue  # already gone
                more = f" and {len(chunk) - 1} more" if len(chunk) > 1 else ""
                raise _failed(f"cannot delete {self.uri_of(chunk[0])}{more}", e) from e

    def delete_prefix(self, key: str) -> None:
        keys = [k.key for k in self.list(key, recursive=True) if not k.is_dir]
        for i in range(0, len(keys), 1000):
            self.counter.add("DELETE")
            try:
                self._delete(keys[i : i + 1000])
            except Exception as e:
                raise _failed(f"cannot delete below {self.uri_of(key)}", e) from e

    def _delete(self, keys: str | Sequence[str]) -> None:
        """Delete, sent again after a failure: deleting is idempotent, and S3 deletes by POST, which obstore
        does not send twice."""
        resend(self._retry, lambda: obstore.delete(self._once, keys))

    def uri_of(self, key: str) -> str:
        return f"{self._uri_scheme}://{self._bucket}/{key}" if key else f"{self._uri_scheme}://{self._bucket}"


class _CountedReader:
    """obstore's reader, counting each read as a GET (a ranged request when its buffer is empty)."""

    def __init__(self, reader: Any, counter: RequestCounter, uri: str) -> None:
        self._reader = reader
        self._counter = counter
        self._uri = uri
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        self._counter.add("GET")
        try:
            return bytes(self._reader.read(size) if size >= 0 else self._reader.read())
        except FileNotFoundError:
            raise
        except OSError as e:  # obstore's reader fails as io does; pyarrow would take it for a bad file
            raise _failed(f"cannot read {self._uri}", e) from e

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._reader.seek(offset, whence))

    def tell(self) -> int:
        return int(self._reader.tell())

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def size(self) -> int:
        return int(self._reader.size)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._reader.close()


class _CountedWriter:
    """obstore's writer as a Python file for pyarrow; each part it sends is a PUT."""

    def __init__(self, writer: Any, counter: RequestCounter, uri: str) -> None:
        self._writer = writer
        self._counter = counter
        self._uri = uri
        self._written = 0
        self.closed = False

    def write(self, data: Any) -> int:
        n = len(memoryview(data))
        before = self._written // UPLOAD_CHUNK_BYTES
        try:
            self._writer.write(bytes(data))
        except OSError as e:
            raise _failed(f"cannot write {self._uri}", e) from e
        self._written += n
        self._counter.add("PUT", self._written // UPLOAD_CHUNK_BYTES - before)
        return n

    def flush(self) -> None:
        """Parts go out as they fill; the rest when the upload completes."""

    def tell(self) -> int:
        return self._written

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        """Closing the Python file does not complete the upload: the stream's owner does."""
        self.closed = True

    def abandon(self, error: BaseException) -> None:
        """Give the upload up: obstore's writer, left with an error, aborts the parts it sent."""
        self.closed = True
        try:
            self._writer.__exit__(type(error), error, error.__traceback__)
        except Exception as e:  # the upload failed already; its abort is housekeeping
            logger.warning("%s: the abandoned upload was not aborted: %s", self._uri, _reason(e))


def _reason(error: BaseException) -> str:
    """An obstore error's message on one line (:func:`~hoodie.storage.store_errors.one_line`: no debug dump,
    no XML body), and the attempts made."""
    reason = one_line(str(error))
    note = attempts_note(error)
    return f"{reason} ({note})" if note else reason


def _failed(what: str, error: BaseException) -> StorageError:
    """The error to raise when ``what`` (``cannot list s3://...``) failed with ``error``: a
    :class:`StoreRefused` when the store's answer is one no retry changes, else a :class:`StorageError`."""
    kind = StoreRefused if permanent(str(error)) else StorageError
    return kind(f"{what}: {_reason(error)}")


def _key_info(meta: Mapping[str, Any]) -> KeyInfo:
    modified = meta.get("last_modified")
    mtime = int(modified.timestamp() * 1_000_000_000) if modified is not None else None
    return KeyInfo(str(meta["path"]), int(meta.get("size") or 0), mtime, False, meta.get("e_tag"))


__all__ = ["UPLOAD_CHUNK_BYTES", "ObjectStoreBackend", "open_store"]
