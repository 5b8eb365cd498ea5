"""A table's identity: the one canonical name of the place its base path is, however the path is written.

An operator may write one table's base path many ways (``/lake/t``, ``/lake//t``, ``/lake/t/``,
``file:///lake/t``, a symbolic link to it; ``s3://b/t`` and ``s3a://b/t``). Each spelling opens the same
files, so whatever must be unique per table (claims on its instants, its control document, its key in
ZooKeeper) derives from :func:`table_identity`, never from the string as written: two keys for one table would
let two runners claim one instant apart, and the loser would delete the winner's files. Apache Iceberg
compares paths the same way before it deletes (schemes and authorities normalised, ``s3a``/``s3n`` equal to
``s3``).

The rules, each making spellings equal that open the same place:

- **Local paths** (a path, ``file:/p``, ``file:///p``, ``file://host/p``): made absolute, ``.``, ``..``,
  repeated and trailing ``/`` resolved and every symbolic link followed (``os.path.realpath``: the file system
  serves the same files under each). Written as the plain path, ``/lake/t``. A ``file:`` URI's host is
  ignored, as the local backend ignores it.
- **Object stores**: one scheme per store (:data:`STORE_OF_SCHEME`: ``s3``, ``s3a``, ``s3n`` are ``s3``;
  ``gs``, ``gcs`` are ``gs``; ``az``, ``abfs``, ``abfss`` are Azure, written
  ``abfss://container@account.dfs.core.windows.net/prefix``, the account taken from the URI, else the storage
  options, else ``AZURE_STORAGE_ACCOUNT_NAME``: the places the store's client takes it from; ``az://`` kept
  only while no account is known); the bucket (container, account) lower-cased, as the stores name them;
  the key prefix with repeated and trailing ``/`` removed (``.`` and ``..`` stay: in a key they are
  characters, not steps).
- **Other schemes** (``hdfs``): scheme and host lower-cased, the path's repeated and trailing ``/`` removed.

Everywhere, credentials written in the URI (``s3://KEY:SECRET@bucket/t``), a query and a fragment are dropped:
none of them says where the table is, and the identity is shown in logs, metrics and ``/status``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final
from urllib.parse import SplitResult, urlsplit

from hoodie.errors import StorageError
from hoodie.storage.redact import redact_uri

#: The store each object-store scheme names (the backends are chosen by it: :mod:`hoodie.storage.options`).
STORE_OF_SCHEME: Final[Mapping[str, str]] = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "gs": "gs",
    "gcs": "gs",
    "az": "az",
    "abfs": "az",
    "abfss": "az",
}

#: Azure's storage endpoint when a URI does not name one (``az://container/path``).
AZURE_DFS_SUFFIX: Final = "dfs.core.windows.net"
#: The storage option names (any spelling the client accepts) and the variable of an Azure account's name.
_AZURE_ACCOUNT_OPTIONS: Final = ("account_name", "azure_storage_account_name")
_AZURE_ACCOUNT_VARIABLE: Final = "AZURE_STORAGE_ACCOUNT_NAME"


def is_local(uri: str) -> bool:
    """Whether ``uri`` names a local path: no scheme, ``file:``, or a Windows drive letter."""
    scheme = urlsplit(uri).scheme.lower()
    return scheme in ("", "file") or len(scheme) == 1


def table_identity(
    uri: str,
    options: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The canonical identity of the table whose base path is ``uri`` (the rules: the module docstring).
    ``options``: the table's storage options, ``environ``: the environment (default ``os.environ``), read only
    for an Azure account a URI leaves out. A local path is resolved on this machine's file system now
    (symbolic links followed). Raises :class:`~hoodie.errors.StorageError` for a URI with no place in it
    (an empty path, an object-store URI without a bucket)."""
    text = uri.strip()
    if not text:
        raise StorageError("an empty path names no table")
    if is_local(text):
        parsed = urlsplit(text)
        path = parsed.path if parsed.scheme.lower() == "file" else text
        if not path:
            raise StorageError(f"{redact_uri(uri)!r} names no path")
        return os.path.realpath(os.path.abspath(path))
    parsed = urlsplit(text)
    scheme = parsed.scheme.lower()
    store = STORE_OF_SCHEME.get(scheme)
    prefix = _prefix(parsed.path)
    if store == "az":
        return _azure(parsed, prefix, options or {}, os.environ if environ is None else environ)
    host = _host(parsed)
    if store is not None:
        if not host:
            raise StorageError(f"{scheme} URI without a bucket: {redact_uri(uri)!r}")
        return _join(f"{store}://{host.lower()}", prefix)
    return _join(f"{scheme}://{host.lower()}", prefix)


def _host(parsed: SplitResult) -> str:
    """The authority without user information (credentials)."""
    return parsed.netloc.rpartition("@")[2]


def _prefix(path: str) -> str:
    """The key prefix: no repeated, leading or trailing ``/``."""
    return "/".join(part for part in path.split("/") if part)


def _join(root: str, prefix: str) -> str:
    return f"{root}/{prefix}" if prefix else root


def _azure(parsed: SplitResult, prefix: str, options: Mapping[str, str], environ: Mapping[str, str]) -> str:
    """``abfss://container@account.<endpoint>/prefix`` for every Azure form; ``az://container/prefix`` while
    no account is known. In ``abfs[s]://container@account.<endpoint>`` the user part is the container (a
    password after it, never a container's, is dropped); in ``az://container/path`` the host is."""
    userinfo, at, host = parsed.netloc.rpartition("@")
    if parsed.scheme.lower() == "az":
        container, account, suffix = host, "", AZURE_DFS_SUFFIX
    else:
        container = userinfo.split(":", 1)[0] if at else ""
        account, _, suffix = host.partition(".")
        suffix = re.sub(r"^blob\.", "dfs.", suffix.lower()) or AZURE_DFS_SUFFIX
    if not container:
        raise StorageError(f"Azure URI without a container: {redact_uri(parsed.geturl())!r}")
    named = {k.strip().lower(): v.strip() for k, v in options.items()}
    configured = next((named[k] for k in _AZURE_ACCOUNT_OPTIONS if named.get(k)), "")
    # The client takes a configured account over the URI's (hoodie.storage.options), so the identity does too.
    account = configured or account or environ.get(_AZURE_ACCOUNT_VARIABLE, "").strip()
    if not account:
        return _join(f"az://{container.lower()}", prefix)
    return _join(f"abfss://{container.lower()}@{account.lower()}.{suffix}", prefix)


__all__ = ["AZURE_DFS_SUFFIX", "STORE_OF_SCHEME", "is_local", "table_identity"]
