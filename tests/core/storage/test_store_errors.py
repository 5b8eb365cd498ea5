"""Permanent store errors fail at once, on one line, and a store with no credentials says what it looked for
(issue 34: a table whose bucket did not exist cost 11 attempts at every poll; a command without credentials
asked the instance-metadata endpoint 11 times and named nothing that was missing)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from hoodie.errors import StorageError, StoreRefused
from hoodie.storage import Storage
from hoodie.storage.credentials import METADATA_DISABLED, missing_credentials, s3_has_credentials
from hoodie.storage.store_errors import error_code, http_status, metadata_hint, one_line, permanent
from support.azurite import Azurite
from support.s3_server import S3Server
from support.server_process import free_port

#: What obstore said for a LIST of a bucket that does not exist (moto), as the store sent it.
NO_SUCH_BUCKET = (
    "Generic S3 error: Error performing list request: Error performing GET http://127.0.0.1:24249/nosuchbucket"
    "?delimiter=%2F&list-type=2&prefix=t%2F.hoodie%2F in 14.059824ms - Server returned non-2xx status code: "
    '404 Not Found: <?xml version="1.0" encoding="utf-8"?>\n<Error><Code>NoSuchBucket</Code><Message>The '
    "specified bucket does not exist</Message><BucketName>nosuchbucket</BucketName><RequestId>x4COGsVerFBN"
    "</RequestId><HostId>9Gjjt1m+cjU4OPvX9O9</HostId></Error>"
)
ACCESS_DENIED = (
    "Generic S3 error: Error performing get request t/.hoodie/hoodie.properties: Server returned non-2xx "
    "status code: 403 Forbidden: <Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>"
)
SLOW_DOWN = (
    "Generic S3 error: Error performing put request: Server returned non-2xx status code: 503 Service "
    "Unavailable: <Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>"
)
REQUEST_TIMEOUT = (
    "Generic S3 error: Server returned non-2xx status code: 400 Bad Request: <Error><Code>RequestTimeout"
    "</Code><Message>Your socket connection to the server was not read from or written to within the "
    "timeout period.</Message></Error>"
)
METADATA_DOWN = (
    "Generic S3 error: Error performing PUT http://169.254.169.254/latest/api/token in 1.2ms - HTTP error: "
    "error sending request"
)


@pytest.mark.parametrize(
    ("text", "is_permanent"),
    [
        (NO_SUCH_BUCKET, True),
        (ACCESS_DENIED, True),
        (METADATA_DOWN, True),
        (SLOW_DOWN, False),
        (REQUEST_TIMEOUT, False),  # S3's answer to a slow upload: sending again can succeed
        ("Generic S3 error: error sending request: connection reset by peer", False),
        ("Server returned non-2xx status code: 401 Unauthorized: ", True),
        ("Server returned non-2xx status code: 429 Too Many Requests: ", False),
    ],
)
def test_an_answer_no_retry_changes_is_permanent(text: str, is_permanent: bool) -> None:
    assert permanent(text) is is_permanent


def test_an_error_answer_comes_on_one_line() -> None:
    assert http_status(NO_SUCH_BUCKET) == 404
    assert error_code(NO_SUCH_BUCKET) == "NoSuchBucket"
    line = one_line(NO_SUCH_BUCKET)
    assert "\n" not in line
    assert "<" not in line
    assert "RequestId" not in line
    assert line.endswith("404 Not Found: NoSuchBucket: The specified bucket does not exist")
    assert one_line(SLOW_DOWN).endswith("SlowDown: Please reduce your request rate.")
    assert one_line("Generic S3 error: connection reset\n\nDebug source: Foo { .. }") == (
        "Generic S3 error: connection reset"
    )
    hint = metadata_hint(METADATA_DOWN)
    assert hint is not None
    assert one_line(METADATA_DOWN).endswith(hint)
    assert "AWS_ACCESS_KEY_ID" in hint
    assert METADATA_DISABLED in hint


def test_a_missing_bucket_fails_at_once_on_one_line(s3_server: S3Server) -> None:
    storage = Storage.for_uri(f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/t")
    started = time.monotonic()
    with pytest.raises(StoreRefused) as caught:
        storage.list(".hoodie")
    assert time.monotonic() - started < 1.5  # one request: before, 11 attempts with back-offs
    message = str(caught.value)
    assert "attempts" not in message
    assert "\n" not in message
    assert "<" not in message
    assert message.startswith("cannot list s3://no-such-bucket-")
    assert message.endswith("NoSuchBucket: The specified bucket does not exist")
    # A missing object in a bucket that exists is still a plain not-found, not a refusal.
    with pytest.raises(FileNotFoundError):
        Storage.for_uri(f"{s3_server.bucket('lake')}/t").read(".hoodie/hoodie.properties")


def test_a_missing_container_fails_at_once_on_one_line(azurite: Azurite) -> None:
    storage = Storage.for_uri(f"az://no-such-container-{uuid.uuid4().hex[:8]}/t")
    started = time.monotonic()
    with pytest.raises(StorageError) as caught:
        storage.list(".hoodie")
    assert time.monotonic() - started < 1.5
    message = str(caught.value)
    assert isinstance(caught.value, StoreRefused), message
    assert "\n" not in message
    assert "<" not in message
    assert "ContainerNotFound" in message


def test_no_credentials_with_the_metadata_endpoint_off_fail_before_any_request(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv(METADATA_DISABLED, "true")
    storage = Storage.for_uri("s3://lake/t")  # opening sends nothing: its first request is refused
    with pytest.raises(StoreRefused, match="no credentials for s3://lake/t") as caught:
        storage.list(".hoodie")
    with pytest.raises(StoreRefused):
        storage.create("x", b"")
    assert storage.requests.snapshot() == {}
    for named in ("access_key_id", "AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE", METADATA_DISABLED):
        assert named in str(caught.value)
    # Credentials in the options, or a public bucket, are enough.
    keys = {"access_key_id": "hoodied-test", "secret_access_key": "hoodied-test-secret"}
    assert not Storage.for_uri("s3://lake/t", keys).exists(".hoodie/hoodie.properties")
    assert missing_credentials("s3", "s3://lake/t", {"skip_signature": "true"}) is None
    # With the switch off the store's own chain runs: not refused here.
    assert missing_credentials("s3", "s3://lake/t", {}, {}) is None
    assert not s3_has_credentials({}, {"AWS_ACCESS_KEY_ID": "k"})  # a key id alone is no credential
    assert s3_has_credentials({}, {"AWS_WEB_IDENTITY_TOKEN_FILE": "/t", "AWS_ROLE_ARN": "arn"})


def test_a_metadata_endpoint_that_does_not_answer_fails_at_once_naming_what_was_missing(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The instance-metadata endpoint asked (the chain on) and silent: here a closed port of 127.0.0.1 stands
    in for 169.254.169.254 off EC2."""
    for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.delenv(METADATA_DISABLED, raising=False)
    storage = Storage.for_uri("s3://lake/t", {"metadata_endpoint": f"http://127.0.0.1:{free_port()}"})
    started = time.monotonic()
    with pytest.raises(StoreRefused) as caught:
        storage.list(".hoodie")
    assert time.monotonic() - started < 1.5
    message = str(caught.value)
    assert "attempts" not in message
    assert "AWS_ACCESS_KEY_ID" in message
    assert "instance-metadata endpoint" in message
