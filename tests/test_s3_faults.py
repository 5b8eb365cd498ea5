"""The fault-injecting S3 proxy (``support.s3_faults``) itself: it forwards every request faithfully (bodies,
ranges, multipart uploads, errors of the store), injects each kind of fault where and when it is told, counts
them, and is switched from another process through its control endpoint. A boto3 client that never retries
is the client here, so every fault shows."""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import subprocess
import sys
import time
import uuid
from typing import Any

import boto3
import pytest
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError, ResponseStreamingError

from support.s3_faults import CONTROL_PATH, Fault, FaultControl, FaultProxy
from support.s3_server import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from support.shared import REPO_ROOT

pytestmark = pytest.mark.s3


@pytest.fixture
def client(s3_faults: FaultProxy) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=s3_faults.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=5, connect_timeout=5),
    )


def _key() -> str:
    return f"proxy/{uuid.uuid4().hex}"


def test_requests_and_answers_pass_through_unchanged(
    client: Any, s3_faults: FaultProxy, s3_server: S3Server
) -> None:
    key = _key()
    body = bytes(range(256)) * 1000
    client.put_object(Bucket="lake", Key=key, Body=body, Metadata={"who": "me"})
    got = client.get_object(Bucket="lake", Key=key)
    assert got["Body"].read() == body
    assert got["Metadata"] == {"who": "me"}
    assert (
        client.get_object(Bucket="lake", Key=key, Range="bytes=1000-1099")["Body"].read() == body[1000:1100]
    )
    assert client.head_object(Bucket="lake", Key=key)["ContentLength"] == len(body)
    with pytest.raises(ClientError, match="PreconditionFailed"):  # the store's own errors come through
        client.put_object(Bucket="lake", Key=key, Body=b"x", IfNoneMatch="*")
    with pytest.raises(ClientError) as missing:
        client.get_object(Bucket="lake", Key=_key())
    assert missing.value.response["Error"]["Code"] == "NoSuchKey"
    big = bytes(12 * 1024 * 1024)  # two parts of a multipart upload
    client.upload_fileobj(
        io.BytesIO(big), "lake", f"{key}.big", Config=TransferConfig(multipart_threshold=8 << 20)
    )
    assert s3_server.client().get_object(Bucket="lake", Key=f"{key}.big")["Body"].read() == big  # type: ignore[attr-defined]
    client.delete_object(Bucket="lake", Key=key)
    assert s3_faults.counts()["injected"] == {}
    forwarded = s3_faults.counts()["forwarded"]
    assert forwarded["POST"] == 2  # initiate and complete
    assert forwarded["PUT"] == 4  # the object, the refused one, two parts


@pytest.mark.parametrize(("kind", "code"), [("503", "SlowDown"), ("500", "InternalError")])
def test_errors_are_s3s_and_reach_nothing(client: Any, s3_faults: FaultProxy, kind: str, code: str) -> None:
    key = _key()
    with s3_faults.faults(kind=kind, methods=["PUT"]):
        with pytest.raises(ClientError) as failed:
            client.put_object(Bucket="lake", Key=key, Body=b"x")
        assert failed.value.response["Error"]["Code"] == code
        assert failed.value.response["ResponseMetadata"]["HTTPStatusCode"] == int(kind)
        client.list_objects_v2(Bucket="lake", Prefix=key)  # other methods pass
    assert client.list_objects_v2(Bucket="lake", Prefix=key).get("KeyCount") == 0
    assert s3_faults.counts()["injected"] == {kind: 1, f"{kind}@request": 1}


def test_an_error_after_the_store_applied_the_request(client: Any, s3_faults: FaultProxy) -> None:
    key = _key()
    with s3_faults.faults(kind="500", at="response", methods=["PUT"]), pytest.raises(ClientError):
        client.put_object(Bucket="lake", Key=key, Body=b"landed")
    assert client.get_object(Bucket="lake", Key=key)["Body"].read() == b"landed"


def test_resets_before_after_and_mid_body(client: Any, s3_faults: FaultProxy) -> None:
    key = _key()
    with s3_faults.faults(kind="reset", methods=["PUT"]), pytest.raises(ConnectionClosedError):
        client.put_object(Bucket="lake", Key=key, Body=b"x")
    with pytest.raises(ClientError):
        client.head_object(Bucket="lake", Key=key)  # it never reached the store
    with s3_faults.faults(kind="reset", at="response", methods=["PUT"]), pytest.raises(ConnectionClosedError):
        client.put_object(Bucket="lake", Key=key, Body=b"x")
    assert client.head_object(Bucket="lake", Key=key)["ContentLength"] == 1  # it did
    client.put_object(Bucket="lake", Key=key, Body=b"y" * 100_000)
    with s3_faults.faults(kind="reset", at="body", methods=["GET"]):
        body = client.get_object(Bucket="lake", Key=key)["Body"]
        with pytest.raises(ResponseStreamingError, match="reset by peer"):
            body.read()
    assert s3_faults.counts()["injected"] == {
        "reset": 3,
        "reset@request": 1,
        "reset@response": 1,
        "reset@body": 1,
    }


def test_a_raw_reset_closes_without_a_response(s3_faults: FaultProxy) -> None:
    resets = (ConnectionResetError, http.client.RemoteDisconnected)
    with s3_faults.faults(kind="reset"), pytest.raises(resets):
        http_get(s3_faults.port, "/lake?list-type=2&prefix=nothing-here/")


def test_slow_holds_a_request_and_heal_lets_it_go(client: Any, s3_faults: FaultProxy) -> None:
    key = _key()
    s3_faults.inject(kind="slow", delay=1.0, methods=["PUT"], limit=1)
    started = time.monotonic()
    client.put_object(Bucket="lake", Key=key, Body=b"x")
    assert time.monotonic() - started >= 1.0
    s3_faults.inject(kind="slow", delay=0.5, at="response", methods=["GET"], limit=1)
    started = time.monotonic()
    assert client.get_object(Bucket="lake", Key=key)["Body"].read() == b"x"  # late, and whole
    assert time.monotonic() - started >= 0.5
    s3_faults.inject(kind="slow", delay=30.0, methods=["GET"])
    slow = boto3.client(
        "s3",
        endpoint_url=s3_faults.endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=1),
    )
    with pytest.raises(ReadTimeoutError):
        slow.get_object(Bucket="lake", Key=key)
    s3_faults.heal()
    started = time.monotonic()
    assert client.get_object(Bucket="lake", Key=key)["Body"].read() == b"x"
    assert time.monotonic() - started < 5


def test_after_limit_rate_and_duration(client: Any, s3_faults: FaultProxy) -> None:
    prefix = _key()
    # A total outage after three PUTs: the GETs in between do not count toward them.
    s3_faults.inject(kind="503", after=3, after_methods=["PUT"])
    for i in range(3):
        if i:
            client.get_object(Bucket="lake", Key=f"{prefix}/{i - 1}")
        client.put_object(Bucket="lake", Key=f"{prefix}/{i}", Body=b"x")
    with pytest.raises(ClientError, match="SlowDown"):
        client.get_object(Bucket="lake", Key=f"{prefix}/0")
    s3_faults.heal()
    # Everything fails once a PUT of a ".commit" went through.
    s3_faults.inject(kind="500", after=1, after_methods=["PUT"], after_match=r"\.commit$")
    client.put_object(Bucket="lake", Key=f"{prefix}/a.json", Body=b"x")
    client.get_object(Bucket="lake", Key=f"{prefix}/a.json")
    client.put_object(Bucket="lake", Key=f"{prefix}/1.commit", Body=b"x")
    with pytest.raises(ClientError, match="InternalError"):
        client.get_object(Bucket="lake", Key=f"{prefix}/a.json")
    s3_faults.heal()
    s3_faults.reset_counts()
    with s3_faults.faults(kind="500", limit=2):
        outcomes = []
        for _ in range(4):
            try:
                client.head_object(Bucket="lake", Key=f"{prefix}/0")
                outcomes.append("ok")
            except ClientError:
                outcomes.append("500")
        assert outcomes == ["500", "500", "ok", "ok"]
        assert s3_faults.state()["faults"] == []  # spent
    seeded = FaultProxy(s3_faults.upstream, seed=3)
    with seeded, seeded.faults(Fault("503", rate=0.3)):
        for _ in range(100):
            with contextlib.suppress(ConnectionError):
                http_get(seeded.port, "/lake?list-type=2&prefix=nothing-here/")
        assert 15 <= seeded.injected("503") <= 45
        assert seeded.counts()["forwarded"]["GET"] == 100 - seeded.injected("503")
    s3_faults.inject(kind="503", duration=0.5)
    with pytest.raises(ClientError):
        client.head_object(Bucket="lake", Key=f"{prefix}/0")
    time.sleep(0.6)
    client.head_object(Bucket="lake", Key=f"{prefix}/0")


def http_get(port: int, path: str) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_another_process_switches_faults_through_the_control_endpoint(
    client: Any, s3_faults: FaultProxy
) -> None:
    """A driver in another process injects, reads the counts and heals, with plain HTTP and JSON."""
    driver = f"""
import json, sys, urllib.request
sys.path.insert(0, {str(REPO_ROOT / "tests")!r})
from support.s3_faults import FaultControl
control = FaultControl({s3_faults.endpoint!r})
print(json.dumps(control.inject({{"kind": "503", "methods": ["PUT"], "after": 1}})))
"""
    injected = json.loads(
        subprocess.run([sys.executable, "-c", driver], check=True, capture_output=True).stdout
    )
    assert injected["faults"][0]["kind"] == "503"
    assert injected["faults"][0]["after"] == 1
    key = _key()
    client.put_object(Bucket="lake", Key=key, Body=b"x")
    with pytest.raises(ClientError, match="SlowDown"):
        client.put_object(Bucket="lake", Key=key, Body=b"y")
    control = FaultControl(s3_faults.endpoint)
    state = control.state()
    assert state["injected"] == {"503": 1, "503@request": 1}
    assert state["forwarded"]["PUT"] == 1
    assert control.heal()["faults"] == []
    client.put_object(Bucket="lake", Key=key, Body=b"y")
    connection = http.client.HTTPConnection("127.0.0.1", s3_faults.port, timeout=5)
    connection.request("POST", CONTROL_PATH, body=json.dumps({"inject": [{"kind": "teapot"}]}))
    refused = connection.getresponse()
    assert refused.status == 400
    assert "teapot" in json.loads(refused.read())["error"]
    connection.close()


def test_stop_ends_idle_connections(s3_server: S3Server) -> None:
    proxy = FaultProxy(s3_server.endpoint).start()
    with socket.create_connection(("127.0.0.1", proxy.port)) as idle:
        time.sleep(0.2)  # its handler thread waits for a request
        proxy.stop()
        idle.settimeout(5)
        with contextlib.suppress(ConnectionResetError):  # reset by the proxy, or:
            assert idle.recv(1) == b""  # closed by it
