"""An S3-compatible server on loopback for tests: moto's server (``moto_server``), a real HTTP server speaking
S3's protocol (conditional writes included), started on a free port and stopped by its PID.

:meth:`S3Server.environment` gives the standard variables every client reads (``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ALLOW_HTTP``): hoodie's storage,
hudi-rs, a subprocess running hoodied. :meth:`S3Server.upload` copies a local table into a bucket.
"""

from __future__ import annotations

import contextlib
import shutil
import urllib.error
import urllib.request
from pathlib import Path

import boto3

from support.server_process import ServerProcess, free_port

ACCESS_KEY = "hoodied-test"
SECRET_KEY = "hoodied-test-secret"
REGION = "us-east-1"


def s3_environment(endpoint: str) -> dict[str, str]:
    """What every S3 client of a process reads (hoodie's storage, boto3) to reach the test server at
    ``endpoint`` over plain HTTP."""
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_REGION": REGION,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ALLOW_HTTP": "true",
    }


def moto_available() -> str | None:
    """Why the server cannot run here, or ``None``."""
    if shutil.which("moto_server") is None:
        return "moto_server is not installed (the test extra installs moto[server])"
    return None


class S3Server:
    """One moto server; :meth:`start`, then :meth:`stop` (kills it by PID)."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        command = ["moto_server", "-H", "127.0.0.1", "-p", str(self.port)]
        self._process = ServerProcess("moto_server", command, work / "moto.log", self._answers)

    def environment(self) -> dict[str, str]:
        return s3_environment(self.endpoint)

    def _answers(self) -> bool:
        try:
            urllib.request.urlopen(f"{self.endpoint}/", timeout=2).close()
            return True
        except (urllib.error.URLError, OSError):
            return False

    def start(self) -> None:
        self._process.start()

    def stop(self) -> None:
        self._process.stop()

    def client(self) -> object:
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=SECRET_KEY,
            region_name=REGION,
        )

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (if absent); returns ``s3://name``."""
        client = self.client()
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):  # type: ignore[attr-defined]
            client.create_bucket(Bucket=name)  # type: ignore[attr-defined]
        return f"s3://{name}"

    def upload(self, folder: Path, uri: str) -> str:
        """Copy every file below ``folder`` to ``uri`` (``s3://bucket/prefix``); returns ``uri``."""
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        self.bucket(bucket)
        client = self.client()
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}".lstrip("/")
                client.upload_file(str(path), bucket, key)  # type: ignore[attr-defined]
        return uri

    def download(self, uri: str, folder: Path) -> Path:
        """Copy every object below ``uri`` into ``folder``; returns ``folder``."""
        bucket, _, prefix = uri.removeprefix("s3://").partition("/")
        client = self.client()
        paginator = client.get_paginator("list_objects_v2")  # type: ignore[attr-defined]
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix.rstrip("/") + "/"):
            for obj in page.get("Contents", []):
                rel = obj["Key"][len(prefix.rstrip("/")) + 1 :]
                target = folder / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(bucket, obj["Key"], str(target))  # type: ignore[attr-defined]
        return folder


__all__ = ["S3Server", "moto_available", "s3_environment"]
