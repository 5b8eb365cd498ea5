"""Credentials before the first request: a store that has none, and may not ask for them, refuses at once.

An S3 store given no credentials (no keys in its storage options, none of the variables its default chain
reads) asks the EC2 instance-metadata endpoint for them. Off EC2 nobody answers: every request then failed
after its retries, naming the metadata address and not what was missing. The AWS SDKs' switch
``AWS_EC2_METADATA_DISABLED=true`` says the endpoint must not be asked (``object_store`` does not read it), so
with it set and no credentials found, :func:`missing_credentials` says so, and the store opened is a
:class:`RefusingBackend`: every request fails at once, before anything is sent, naming the options and
variables looked for. Opening it does not fail: a daemon opens each table's store when it starts watching
it, and one table without credentials must fail that table's polls, not every table's.

With the switch off the store's default chain runs as it is, and a metadata endpoint that does not answer is
reported as a permanent error with the same list (:func:`hoodie.storage.store_errors.metadata_hint`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from hoodie.errors import StoreRefused
from hoodie.storage.backend import RequestCounter

#: The AWS SDKs' switch that turns the instance-metadata endpoint off.
METADATA_DISABLED = "AWS_EC2_METADATA_DISABLED"

#: Any of these, as a pair where a tuple, is a source of S3 credentials other than the metadata endpoint.
_S3_OPTIONS: tuple[tuple[str, ...], ...] = (
    ("access_key_id", "secret_access_key"),
    ("container_credentials_relative_uri",),
    ("metadata_endpoint",),  # the operator points the chain at an endpoint of their own: it is on
)
_S3_VARIABLES: tuple[tuple[str, ...], ...] = (
    ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"),
    ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",),
    ("AWS_CONTAINER_CREDENTIALS_FULL_URI",),
)


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("true", "1", "yes")


def _option(config: Mapping[str, str], key: str) -> str:
    """An ``object_store`` option, also under its ``aws_`` spelling."""
    return (config.get(key) or config.get(f"aws_{key}") or "").strip()


def s3_has_credentials(config: Mapping[str, str], environ: Mapping[str, str]) -> bool:
    """Whether an S3 store opened with ``config`` finds credentials (or needs none: ``skip_signature``)
    without the instance-metadata endpoint."""
    if _true(_option(config, "skip_signature")):
        return True
    if any(all(_option(config, k) for k in keys) for keys in _S3_OPTIONS):
        return True
    return any(all((environ.get(v) or "").strip() for v in names) for names in _S3_VARIABLES)


def missing_credentials(
    kind: str, uri: str, config: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> StoreRefused | None:
    """The refusal of an S3 store at ``uri`` that has no credentials (:func:`s3_has_credentials`) while the
    metadata endpoint is turned off (:data:`METADATA_DISABLED`), else ``None``; other stores, and S3 with the
    endpoint on, are left to their default chains."""
    env = os.environ if environ is None else environ
    if kind != "s3" or not _true(env.get(METADATA_DISABLED)) or s3_has_credentials(config, env):
        return None
    return StoreRefused(
        f"no credentials for {uri}: none in the storage options (access_key_id with secret_access_key, "
        "session_token; skip_signature=true for a public bucket) or the environment (AWS_ACCESS_KEY_ID with "
        "AWS_SECRET_ACCESS_KEY, AWS_WEB_IDENTITY_TOKEN_FILE with AWS_ROLE_ARN, "
        f"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI), and {METADATA_DISABLED}=true turns the "
        "instance-metadata endpoint off"
    )


class RefusingBackend:
    """The backend of a store that cannot be asked anything (:func:`missing_credentials`): every operation
    raises ``refusal`` at once; nothing is sent, and no request is counted."""

    versioned = True
    is_local = False
    conditional_create = True
    bulk_delete_size = 1

    def __init__(self, refusal: StoreRefused, uri_prefix: str) -> None:
        self.refusal = refusal
        self.counter = RequestCounter()
        self._uri_prefix = uri_prefix

    def _refuse(self, *args: object, **kwargs: object) -> Any:
        raise StoreRefused(str(self.refusal))

    list = head = exists = get = get_versioned = open_input_file = _refuse
    put = put_if_version = open_output_stream = delete = delete_many = delete_prefix = _refuse

    def uri_of(self, key: str) -> str:
        return f"{self._uri_prefix}/{key}" if key else self._uri_prefix


__all__ = ["METADATA_DISABLED", "RefusingBackend", "missing_credentials", "s3_has_credentials"]
