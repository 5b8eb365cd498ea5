"""One way to configure a store, everywhere: storage options and the standard environment variables.

Every command, the daemon and the Spark tasks open storage through :func:`backend_for`, so the same things
work in each:

- **Environment variables** of each store, read by the store itself: S3 ``AWS_ENDPOINT_URL``,
  ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` (or
  ``AWS_DEFAULT_REGION``), ``AWS_ALLOW_HTTP``; GCS ``GOOGLE_SERVICE_ACCOUNT`` (a key file's path),
  ``GOOGLE_SERVICE_ACCOUNT_KEY``, ``GOOGLE_APPLICATION_CREDENTIALS``; Azure ``AZURE_STORAGE_ACCOUNT_NAME``,
  ``AZURE_STORAGE_ACCOUNT_KEY``, ``AZURE_STORAGE_SAS_TOKEN``, ``AZURE_STORAGE_USE_EMULATOR`` and
  ``AZURITE_BLOB_STORAGE_URL`` (Azurite).
- **Storage options** (``tables[].storage_options``, ``--storage-option KEY=VALUE``), which win over the
  environment: the store's own keys (``object_store``'s: ``access_key_id``, ``secret_access_key``,
  ``session_token``, ``region``, ``endpoint``, ``allow_http``, ``virtual_hosted_style_request``,
  ``skip_signature``, ``google_service_account``, ``account_name``, ``account_key``, ``use_emulator``...;
  ours, ``azurite_blob_storage_url``), and the keys of pyarrow's ``S3FileSystem`` hoodied took before
  (``access_key``, ``secret_key``, ``session_token``, ``region``, ``endpoint_override`` with ``scheme``,
  ``force_virtual_addressing``, ``anonymous``), translated. ``conditional_put: false`` tells hoodied the
  store ignores conditional writes. ``max_retries``, ``retry_timeout``, ``init_backoff``, ``max_backoff``
  and ``backoff_base`` set how failed requests are retried (:mod:`hoodie.storage.retry`); the client's
  ``timeout`` and ``connect_timeout`` how long one request may take.

Schemes: ``s3``, ``s3a``, ``s3n`` (S3 and S3-compatible stores), ``gs``, ``gcs`` (GCS), ``az``, ``abfs``,
``abfss`` (Azure: ``abfs[s]://container@account.dfs.core.windows.net/path``), a local path or ``file://``, and
``hdfs`` (through pyarrow, without create-if-absent).

Tasks that run on other hosts (Spark executors of a cluster) open the storage from a
:class:`~hoodie.storage.StorageRef`, which carries :func:`portable_options`: the storage options plus the
driver's own credential and endpoint variables (the static ones listed in :data:`ENVIRONMENT_KEYS`) for any
setting the options leave open, so an executor reaches the store exactly as the driver does without
credentials in Spark's configuration. Credentials held in files (``GOOGLE_APPLICATION_CREDENTIALS``, an AWS
web identity token) are not carried: they name paths on the driver's host; executors use their own.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs

from hoodie.errors import StorageError
from hoodie.storage.arrow_fs import ArrowFsBackend
from hoodie.storage.backend import Backend
from hoodie.storage.credentials import RefusingBackend, missing_credentials
from hoodie.storage.identity import STORE_OF_SCHEME
from hoodie.storage.local import LocalBackend
from hoodie.storage.object_store import ObjectStoreBackend, open_store
from hoodie.storage.redact import redact_uri
from hoodie.storage.retry import RETRY_KEYS, RetryPolicy

#: One store per scheme, aliases included (``s3a``, ``s3n``, ``gcs``, ``abfs[s]``): the map a table's identity
#: is named by too (:mod:`hoodie.storage.identity`), so two spellings that open one store have one identity.
_STORE_OF_SCHEME = STORE_OF_SCHEME

#: pyarrow ``S3FileSystem`` keys -> ``object_store`` keys.
_PYARROW_S3 = {
    "access_key": "access_key_id",
    "secret_key": "secret_access_key",
    "session_token": "session_token",
    "region": "region",
    "force_virtual_addressing": "virtual_hosted_style_request",
    "anonymous": "skip_signature",
}
#: Keys that configure the HTTP client rather than the store.
_CLIENT_KEYS = frozenset(
    {"allow_http", "allow_invalid_certificates", "timeout", "connect_timeout", "proxy_url"}
)
CONDITIONAL_PUT = "conditional_put"

#: The environment variables a task carries to other hosts, per store, with the option each stands for.
ENVIRONMENT_KEYS: Mapping[str, Mapping[str, str]] = {
    "s3": {
        "AWS_ACCESS_KEY_ID": "access_key_id",
        "AWS_SECRET_ACCESS_KEY": "secret_access_key",
        "AWS_SESSION_TOKEN": "session_token",
        "AWS_DEFAULT_REGION": "region",
        "AWS_REGION": "region",  # wins over AWS_DEFAULT_REGION, as in the AWS SDKs
        "AWS_ENDPOINT": "endpoint",
        "AWS_ENDPOINT_URL": "endpoint",
        "AWS_ALLOW_HTTP": "allow_http",
    },
    "gs": {"GOOGLE_SERVICE_ACCOUNT_KEY": "service_account_key"},
    "az": {
        "AZURE_STORAGE_ACCOUNT_NAME": "account_name",
        "AZURE_STORAGE_ACCOUNT_KEY": "account_key",
        "AZURE_STORAGE_SAS_TOKEN": "sas_token",
        "AZURE_STORAGE_USE_EMULATOR": "use_emulator",
        "AZURITE_BLOB_STORAGE_URL": "azurite_blob_storage_url",
    },
}
#: Azurite's address. Not an option of the store: ``object_store`` reads it from the environment alone (else
#: ``http://127.0.0.1:10000``), so :func:`backend_for` takes it as an option and sets the variable in the
#: process that opens the store. Without this an executor whose environment lacks it (any other host, or a
#: local Spark started before the variable was set) would look for the emulator at the default address.
AZURITE_URL_OPTION = "azurite_blob_storage_url"
AZURITE_URL_VARIABLE = "AZURITE_BLOB_STORAGE_URL"
_OPTION_PREFIXES = ("aws_", "azure_storage_", "azure_", "google_")


@dataclass(frozen=True)
class Location:
    """Where a table lives: the backend and the key of its base path within it."""

    backend: Backend
    root: str


def backend_for(uri: str, options: Mapping[str, str] | None = None) -> Location:
    """The backend and root key of ``uri`` (see the module doc); :class:`StorageError` for an unknown scheme
    or an option the store refuses."""
    parsed = urlparse(uri)
    scheme = parsed.scheme.lower()
    opts = {str(k): str(v) for k, v in (options or {}).items()}
    if scheme in ("", "file") or len(scheme) == 1:  # a path (or a Windows drive letter)
        local = parsed.path if scheme == "file" else uri
        return Location(LocalBackend(), os.path.abspath(local))
    store_kind = _STORE_OF_SCHEME.get(scheme)
    if store_kind is not None:
        bucket, root = _bucket_and_root(store_kind, parsed)
        conditional = opts.pop(CONDITIONAL_PUT, "true").strip().lower() != "false"
        azurite_url = opts.pop(AZURITE_URL_OPTION, "").strip()
        if azurite_url and store_kind == "az":
            os.environ[AZURITE_URL_VARIABLE] = azurite_url
        retry = RetryPolicy.from_options({k: opts.pop(k) for k in RETRY_KEYS & opts.keys()})
        config, client = _store_config(store_kind, opts, parsed)
        refusal = missing_credentials(store_kind, redact_uri(uri), config)
        if refusal is not None:  # refused at its first request, not here (hoodie.storage.credentials)
            prefix = f"{scheme}://{_bucket_name(store_kind, parsed)}"
            return Location(cast(Backend, RefusingBackend(refusal, prefix)), root)
        backend = ObjectStoreBackend(
            store_kind,
            _bucket_name(store_kind, parsed),
            open_store(store_kind, bucket, config, client, retry),
            conditional_create=conditional,
            uri_scheme=scheme,
            once=open_store(store_kind, bucket, config, client, retry, retrying=False),
            retry=retry,
        )
        return Location(backend, root)
    try:
        if opts:
            if scheme != "hdfs":
                raise StorageError(f"no storage backend with options for scheme {scheme!r}")
            fs: pafs.FileSystem = pafs.HadoopFileSystem(**opts)
            root = (parsed.netloc + parsed.path).rstrip("/")
        else:
            fs, root = pafs.FileSystem.from_uri(uri)
    except StorageError:
        raise
    except (pa.ArrowException, ValueError, TypeError) as e:
        raise StorageError(f"cannot open storage for {uri!r}: {e}") from e
    return Location(ArrowFsBackend(fs, scheme), root.rstrip("/"))


def portable_options(
    uri: str, options: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``options`` plus the driver's environment variables of ``uri``'s store (:data:`ENVIRONMENT_KEYS`)
    for every setting ``options`` leave open: what opens the same store on another host (see the module
    doc). Local paths and other schemes get ``options`` unchanged."""
    out = {str(k): str(v) for k, v in options.items()}
    kind = _STORE_OF_SCHEME.get(urlparse(uri).scheme.lower())
    if kind is None:
        return out
    env = os.environ if environ is None else environ
    configured = {_canonical(kind, k) for k in out}
    if "endpoint_override" in out:
        configured.add("endpoint")
    carried: dict[str, str] = {}
    for variable, option in ENVIRONMENT_KEYS[kind].items():
        value = env.get(variable)
        if value and option not in configured:
            carried[option] = value
    return {**carried, **out}


def _canonical(kind: str, key: str) -> str:
    """The store's own name of an option however it is spelt (``AWS_REGION``, ``aws_region``, ``region``;
    pyarrow's ``access_key``)."""
    k = key.strip().lower()
    for prefix in _OPTION_PREFIXES:
        if k.startswith(prefix):
            k = k[len(prefix) :]
            break
    if kind == "s3":
        k = _PYARROW_S3.get(k, k)
    return {"endpoint_url": "endpoint"}.get(k, k)


def _bucket_and_root(kind: str, parsed: object) -> tuple[str, str]:
    netloc = getattr(parsed, "netloc", "")
    path = getattr(parsed, "path", "")
    if not netloc:
        raise StorageError(f"{kind} URI without a bucket: {getattr(parsed, 'geturl', lambda: '')()!r}")
    return netloc, path.strip("/")


def _bucket_name(kind: str, parsed: object) -> str:
    netloc = str(getattr(parsed, "netloc", ""))
    # abfs[s]://container@account.dfs.core.windows.net: the container is the part before '@'.
    return netloc.split("@", 1)[0] if kind == "az" else netloc


def _store_config(kind: str, opts: dict[str, str], parsed: object) -> tuple[dict[str, str], dict[str, str]]:
    config: dict[str, str] = {}
    client: dict[str, str] = {}
    scheme_opt = opts.pop("scheme", "").strip().lower()
    endpoint = opts.pop("endpoint_override", "").strip()
    if endpoint:
        if "://" not in endpoint:
            endpoint = f"{scheme_opt or 'https'}://{endpoint}"
        config["endpoint"] = endpoint
        if endpoint.startswith("http://"):
            client["allow_http"] = "true"
    elif scheme_opt == "http":
        client["allow_http"] = "true"
    # A client option the environment sets (AWS_ALLOW_HTTP) is carried over: client options given here
    # replace the client's whole set, the environment's included.
    for variable, option in ENVIRONMENT_KEYS.get(kind, {}).items():
        value = os.environ.get(variable, "").strip()
        if option in _CLIENT_KEYS and value and option not in client:
            client[option] = value
    for key, value in opts.items():
        k = key.strip()
        if kind == "s3" and k in _PYARROW_S3:
            config[_PYARROW_S3[k]] = value
        elif k in _CLIENT_KEYS:
            client[k] = value
        else:
            config[k] = value
    netloc = str(getattr(parsed, "netloc", ""))
    if kind == "az" and "@" in netloc and "account_name" not in config:
        config["account_name"] = netloc.split("@", 1)[1].split(".", 1)[0]
    return config, client


__all__ = [
    "AZURITE_URL_OPTION",
    "AZURITE_URL_VARIABLE",
    "CONDITIONAL_PUT",
    "ENVIRONMENT_KEYS",
    "Location",
    "backend_for",
    "portable_options",
]
