"""A fleet of tables on moto's S3 server, built fast and counting what the server receives.

    python benchmarks/fleet_s3.py --port PORT --template DIR --tables N [--per-bucket 100]

The server is moto's (the application ``moto_server`` runs, on 127.0.0.1, in a process of its own); before it
serves, its backend is filled with ``N`` copies of the table in ``DIR`` directly (no HTTP: uploading ten
thousand tables object by object would take longer than the benchmark). Table ``i`` is
``s3://fleet<i // per_bucket>/t<i>``: moto's LIST scans every key of its bucket (S3's does not), so a single
bucket of ten thousand tables would make each listing cost what a fleet of buckets does not.

moto's application is served by a small HTTP/1.1 server that keeps connections open, as S3 does:
werkzeug's development server (``moto_server``) closes every connection, which would bill each request of
the client a TCP connection of its own that S3 does not (``--werkzeug`` serves it that way all the same).

Every request the server receives is counted by kind (LIST, GET, HEAD, PUT, DELETE; SQS and SNS for the
queue services moto serves on the same port) and served as JSON at ``GET /_fleet/requests`` (a path no bucket
can have; not counted). Per table (``bucket/first-folder`` of the key, or of a LIST's ``prefix``) the
server also keeps its count of S3 requests and the times (``time.time()``) of its LISTs, served at
``GET /_fleet/tables`` as ``{table: [requests, [list times...]]}``. :class:`FleetS3` starts and stops it.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote

from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from moto.server import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import run_simple

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.s3_server import REGION, s3_environment
from support.server_process import ServerProcess, free_port

COUNTS_PATH = "/_fleet/requests"
TABLES_PATH = "/_fleet/tables"

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def bucket_of(i: int, per_bucket: int) -> str:
    return f"fleet{i // per_bucket:04d}"


def table_uri(i: int, per_bucket: int) -> str:
    return f"s3://{bucket_of(i, per_bucket)}/t{i:05d}"


def kind_of(method: str, path: str, query: str) -> str:
    """The kind of an S3 request, path-style (``/bucket`` or ``/bucket/key``): a GET of a bucket is a LIST, a
    POST ``?delete`` a (bulk) DELETE, any other POST an upload's part of a PUT."""
    bucket_only = "/" not in path.strip("/")
    if method == "GET":
        return "LIST" if bucket_only else "GET"
    if method == "POST":
        return "DELETE" if "delete" in query.split("&") or query.startswith("delete") else "PUT"
    return method


def service_of(environ: dict[str, Any]) -> str:
    """``SQS`` or ``SNS`` for a request to those services (their SigV4 scope, or the JSON protocol's target
    header), else ``S3``."""
    auth = environ.get("HTTP_AUTHORIZATION", "")
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    for name in ("sqs", "sns"):
        if f"/{name}/aws4_request" in auth or target.lower().startswith(f"amazon{name}"):
            return name.upper()
    return "S3"


def table_of(path: str, query: str) -> str | None:
    """``bucket/first-folder`` of an S3 request (a LIST's ``prefix``), or None (a bucket-level request)."""
    parts = path.strip("/").split("/", 2)
    if len(parts) >= 2 and parts[1]:
        return f"{parts[0]}/{parts[1]}"
    prefix = parse_qs(query).get("prefix", [""])[0].strip("/").split("/", 1)[0]
    return f"{parts[0]}/{prefix}" if parts[0] and prefix else None


def counting(
    app: Wsgi,
    counts: Counter[str],
    lock: threading.Lock,
    tables: dict[str, list[Any]] | None = None,
) -> Wsgi:
    """``app`` counting the requests it serves by kind (and, given ``tables``, per table: see the module
    doc), answering :data:`COUNTS_PATH` and :data:`TABLES_PATH` itself."""

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path in (COUNTS_PATH, TABLES_PATH):
            with lock:
                body = json.dumps(dict(counts) if path == COUNTS_PATH else tables or {}).encode()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        service = service_of(environ)
        query = environ.get("QUERY_STRING", "")
        kind = kind_of(environ["REQUEST_METHOD"], path, query) if service == "S3" else service
        table = table_of(path, query) if service == "S3" and tables is not None else None
        with lock:
            counts[kind] += 1
            if table is not None and tables is not None:
                seen = tables.setdefault(table, [0, []])
                seen[0] += 1
                if kind == "LIST":
                    seen[1].append(round(time.time(), 3))
        return app(environ, start_response)

    return serve


class KeepAliveHandler(BaseHTTPRequestHandler):
    """Serves a WSGI application over HTTP/1.1 with keep-alive: each request's body is read whole (by its
    Content-Length) and each response sent with one, so the connection is ready for the next request."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the headers and the body are two writes: no delayed ACK between them
    app: Wsgi

    def _serve(self) -> None:
        path, _, query = self.path.partition("?")
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        environ: dict[str, Any] = {
            "REQUEST_METHOD": self.command,
            "SCRIPT_NAME": "",
            "PATH_INFO": unquote(path).encode("utf-8").decode("latin-1"),
            "QUERY_STRING": query,
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(length) if length else "",
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": str(self.server.server_address[1]),
            "SERVER_PROTOCOL": self.request_version,
            "REMOTE_ADDR": self.client_address[0],
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for key, value in self.headers.items():
            name = key.upper().replace("-", "_")
            if name not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
                environ[f"HTTP_{name}"] = value
        answer: list[Any] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: object = None) -> Any:
            answer[:] = [status, headers]
            return lambda data: None

        result = self.app(environ, start_response)
        try:
            data = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        status, headers = answer
        code, _, reason = status.partition(" ")
        self.send_response(int(code), reason)
        for key, value in headers:
            if key.lower() not in ("content-length", "connection", "transfer-encoding"):
                self.send_header(key, value)
        declared = next((v for k, v in headers if k.lower() == "content-length"), None)
        no_body = self.command == "HEAD" or int(code) in (204, 304) or 100 <= int(code) < 200
        self.send_header(
            "Content-Length", declared if no_body and declared else str(0 if no_body else len(data))
        )
        self.end_headers()
        if not no_body:
            self.wfile.write(data)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass


def fill(template: Path, tables: int, per_bucket: int) -> None:
    """Put ``tables`` copies of the table in ``template`` into moto's backend (see the module docstring)."""
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    files = [
        (p.relative_to(template).as_posix(), p.read_bytes())
        for p in sorted(template.rglob("*"))
        if p.is_file()
    ]
    for i in range(tables):
        bucket = bucket_of(i, per_bucket)
        if i % per_bucket == 0:
            backend.create_bucket(bucket, REGION)
        for rel, data in files:
            backend.put_object(bucket, f"t{i:05d}/{rel}", data)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--template", type=Path, required=True)
    ap.add_argument("--tables", type=int, required=True)
    ap.add_argument("--per-bucket", type=int, default=100)
    ap.add_argument(
        "--werkzeug", action="store_true", help="serve as moto_server does: a connection a request"
    )
    args = ap.parse_args(argv)
    fill(args.template, args.tables, args.per_bucket)
    counts: Counter[str] = Counter()
    tables: dict[str, list[Any]] = {}
    app = counting(DomainDispatcherApplication(create_backend_app), counts, threading.Lock(), tables)
    if args.werkzeug:
        run_simple("127.0.0.1", args.port, app, threaded=True)
        return 0
    KeepAliveHandler.app = staticmethod(app)  # type: ignore[assignment]
    ThreadingHTTPServer(("127.0.0.1", args.port), KeepAliveHandler).serve_forever()
    return 0


class FleetS3:
    """The server of :func:`main` in a child process: :meth:`start` (returns once it serves), :meth:`stop`."""

    def __init__(
        self, work: Path, template: Path, tables: int, per_bucket: int = 100, *, werkzeug: bool = False
    ) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.uris = [table_uri(i, per_bucket) for i in range(tables)]
        command = [
            sys.executable,
            __file__,
            "--port",
            str(self.port),
            "--template",
            str(template),
            "--tables",
            str(tables),
            "--per-bucket",
            str(per_bucket),
            *(["--werkzeug"] if werkzeug else []),
        ]
        self._process = ServerProcess("fleet S3 server", command, work / "fleet_s3.log", self._answers)

    def environment(self) -> dict[str, str]:
        """What every S3 client of this process reads (hoodie's storage)."""
        return s3_environment(self.endpoint)

    def _answers(self) -> bool:
        try:
            self.requests()
            return True
        except OSError:
            return False

    def requests(self) -> dict[str, int]:
        """The requests the server received so far, by kind."""
        with urllib.request.urlopen(f"{self.endpoint}{COUNTS_PATH}", timeout=10) as reply:
            counts: dict[str, int] = json.loads(reply.read())
        return counts

    def tables(self) -> dict[str, tuple[int, list[float]]]:
        """Per table (``bucket/folder``): the S3 requests the server received for it, and its LISTs' times."""
        with urllib.request.urlopen(f"{self.endpoint}{TABLES_PATH}", timeout=60) as reply:
            raw: dict[str, list[Any]] = json.loads(reply.read())
        return {k: (int(v[0]), [float(t) for t in v[1]]) for k, v in raw.items()}

    def start(self, timeout: float = 600.0) -> None:
        self._process.start(timeout)

    def stop(self) -> None:
        self._process.stop()


__all__ = ["FleetS3", "bucket_of", "kind_of", "table_uri"]

if __name__ == "__main__":
    sys.exit(main())
