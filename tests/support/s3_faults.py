"""A fault-injecting reverse proxy in front of the S3 test server: an object store that misbehaves on request.

:class:`FaultProxy` listens on a free port of 127.0.0.1 and forwards every request (method, path, query,
headers, body) to the upstream server and its response back, streamed both ways, until a :class:`Fault` says
otherwise. Clients reach it through :meth:`FaultProxy.environment` (``AWS_ENDPOINT_URL`` pointing at the
proxy), exactly as they reach the server itself.

A fault has a kind, the requests it hits and the moment it strikes:

- ``kind``: ``503`` (S3's ``SlowDown``, the throttling answer), ``500`` (``InternalError``), ``reset`` (the
  connection is reset: an RST, no response) or ``slow`` (the request is held ``delay`` seconds, then served).
- ``at``: ``request`` (before the request reaches the store: nothing happened there), ``response`` (after the
  store applied it: a PUT landed, and its client gets an error, a reset or a late answer instead of the
  store's), ``body`` (``reset`` only: the store's status line, headers and half its body, then a reset).
- ``rate`` (the fraction of matching requests hit), ``methods`` (only these methods; all when empty),
  ``match`` (a regular expression the path and query must contain), ``after`` (the first ``after`` matching
  requests pass; ``after_methods`` and ``after_match`` count other requests instead: a total outage "after N
  PUTs" is ``after=N, after_methods=["PUT"]``, one "after the commit file" ``after=1,
  after_match=r"[.]commit$"``),
  ``limit`` (at most this many injections), ``duration`` (seconds from when it is added; until healed when
  absent).

The test process calls :meth:`FaultProxy.inject`, :meth:`FaultProxy.heal` and :meth:`FaultProxy.counts`
(thread-safe). Another process (a campaign driver, a daemon test) switches the same proxy through its control
endpoint, ``/__faults__`` (no S3 bucket can have that name), with :class:`FaultControl` or plain HTTP::

    POST /__faults__  {"inject": [{"kind": "503", "rate": 0.3, "methods": ["PUT"]}]}  -> the state
    POST /__faults__  {"heal": true}                                                 -> the state
    GET  /__faults__                                                                 -> the state

    state: {"faults": [<each active fault, as given>],
            "injected": {"503": 4, "reset": 1, ...}, "forwarded": {"GET": 120, "PUT": 31, ...}}

``injected`` counts the faults injected by kind (and ``<kind>@<at>``); ``forwarded`` counts the requests that
reached the store, by method. Both grow for the proxy's life (:meth:`FaultProxy.reset_counts` zeroes them).

Run alone (``python tests/support/s3_faults.py --upstream http://127.0.0.1:PORT``) it prints its endpoint and
serves until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import random
import re
import socket
import struct
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import urlsplit

CONTROL_PATH = "/__faults__"
KINDS = ("503", "500", "reset", "slow")
MOMENTS = ("request", "response", "body")

#: Headers that belong to one hop of HTTP, not to the message (RFC 9110 section 7.6.1).
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "expect",  # the proxy has read the whole body before it forwards
    }
)
_COPY_CHUNK = 64 * 1024
_ERRORS = {
    "503": (503, "Service Unavailable", "SlowDown", "Please reduce your request rate."),
    "500": (500, "Internal Server Error", "InternalError", "We encountered an internal error. Try again."),
}

Kind = Literal["503", "500", "reset", "slow"]
Moment = Literal["request", "response", "body"]


@dataclass
class Fault:
    """One rule of misbehaviour (see the module doc for each field)."""

    kind: Kind
    rate: float = 1.0
    at: Moment = "request"
    methods: Sequence[str] = ()
    match: str | None = None
    after: int = 0
    after_methods: Sequence[str] | None = None
    after_match: str | None = None
    limit: int | None = None
    duration: float | None = None
    delay: float = 2.0
    # Bookkeeping, not part of the rule.
    _added: float = field(default=0.0, repr=False)
    _seen: int = field(default=0, repr=False)
    _injected: int = field(default=0, repr=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"fault kind {self.kind!r}: one of {', '.join(KINDS)}")
        if self.at not in MOMENTS:
            raise ValueError(f"fault moment {self.at!r}: one of {', '.join(MOMENTS)}")
        if self.at == "body" and self.kind != "reset":
            raise ValueError("only a reset strikes mid-body (at='body')")
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"fault rate {self.rate}: a fraction between 0 and 1")
        self.methods = tuple(m.upper() for m in self.methods)
        if self.after_methods is not None:
            self.after_methods = tuple(m.upper() for m in self.after_methods)
        for pattern in (self.match, self.after_match):
            if pattern is not None:
                re.compile(pattern)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Fault:
        """A fault from its JSON form (what :meth:`as_json` gives, its ``injected`` count aside)."""
        given = {k: v for k, v in data.items() if not k.startswith("_") and k != "injected"}
        return cls(**{**given, "kind": str(given["kind"])})

    def as_json(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        out["methods"] = list(self.methods)
        out["after_methods"] = None if self.after_methods is None else list(self.after_methods)
        out["injected"] = self._injected
        return out

    def expired(self, now: float) -> bool:
        over_time = self.duration is not None and now - self._added >= self.duration
        return over_time or (self.limit is not None and self._injected >= self.limit)

    def decide(self, method: str, path: str, rng: random.Random) -> bool:
        """Whether this request is hit (counting it toward ``after``); call under the proxy's lock."""
        if self._seen < self.after:
            methods = self.methods if self.after_methods is None else self.after_methods
            pattern = self.match if self.after_match is None else self.after_match
            if _selects(methods, pattern, method, path):
                self._seen += 1
            return False
        if not _selects(self.methods, self.match, method, path):
            return False
        if rng.random() >= self.rate:
            return False
        self._injected += 1
        return True


def _selects(methods: Sequence[str], pattern: str | None, method: str, path: str) -> bool:
    """Whether a request is among ``methods`` (all when empty) and its path and query contain ``pattern``."""
    if methods and method not in methods:
        return False
    return pattern is None or re.search(pattern, path) is not None


class FaultProxy:
    """The proxy (see the module doc): :meth:`start`, then :meth:`stop`; or use it as a context manager."""

    def __init__(self, upstream: str, *, seed: int | None = None) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream {upstream!r}: an http://host:port address")
        self.upstream = upstream
        self._upstream_host = parts.hostname
        self._upstream_port = parts.port
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._injected: Counter[str] = Counter()
        self._forwarded: Counter[str] = Counter()
        self._rng = random.Random(seed)
        self._healed = threading.Event()  # wakes the requests a ``slow`` fault holds
        self._sockets: set[socket.socket] = set()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.endpoint = ""

    # -- life ------------------------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        handler = type("_BoundHandler", (_Handler,), {"proxy": self})
        server = _Server(("127.0.0.1", 0), handler)
        self._server = server
        self.port = int(server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=server.serve_forever, name="s3-faults", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        self._healed.set()
        if server is None:
            return
        server.shutdown()
        server.server_close()
        with self._lock:
            open_sockets = list(self._sockets)
        for sock in open_sockets:  # idle keep-alive connections hold their handler threads
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> FaultProxy:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def environment(self, server_environment: Mapping[str, str]) -> dict[str, str]:
        """The S3 server's variables (``S3Server.environment()``) with the endpoint turned to this proxy."""
        return {**server_environment, "AWS_ENDPOINT_URL": self.endpoint}

    def storage_options(self, **more: str) -> dict[str, str]:
        """Storage options that reach the store through this proxy (credentials stay the environment's)."""
        return {"endpoint": self.endpoint, "allow_http": "true", **more}

    # -- control ---------------------------------------------------------------------------------------

    def inject(self, *faults: Fault | Mapping[str, Any], **one: Any) -> None:
        """Add faults: :class:`Fault` values, their JSON form, or one given by keywords
        (``inject(kind="503", rate=0.3)``)."""
        made = [f if isinstance(f, Fault) else Fault.from_json(f) for f in faults]
        if one:
            made.append(Fault.from_json(one))
        now = time.monotonic()
        with self._lock:
            for fault in made:
                fault._added = now
                self._faults.append(fault)
            self._healed.clear()

    def heal(self) -> None:
        """Remove every fault; requests a ``slow`` fault holds go on at once."""
        with self._lock:
            self._faults.clear()
            self._healed.set()

    @contextlib.contextmanager
    def faults(self, *faults: Fault | Mapping[str, Any], **one: Any) -> Iterator[FaultProxy]:
        """``with proxy.faults(kind="500", rate=0.3): ...``: injected for the block, healed after it."""
        self.inject(*faults, **one)
        try:
            yield self
        finally:
            self.heal()

    def counts(self) -> dict[str, dict[str, int]]:
        """``{"injected": {kind: n, "<kind>@<at>": n}, "forwarded": {method: n}}`` so far."""
        with self._lock:
            return {"injected": dict(self._injected), "forwarded": dict(self._forwarded)}

    def injected(self, kind: str | None = None) -> int:
        """How many faults (of ``kind``) were injected so far."""
        with self._lock:
            return sum(n for k, n in self._injected.items() if "@" not in k and kind in (None, k))

    def reset_counts(self) -> None:
        with self._lock:
            self._injected.clear()
            self._forwarded.clear()

    def state(self) -> dict[str, Any]:
        """What the control endpoint answers: the active faults and the counts."""
        with self._lock:
            self._prune(time.monotonic())
            faults = [f.as_json() for f in self._faults]
            return {"faults": faults, "injected": dict(self._injected), "forwarded": dict(self._forwarded)}

    def _prune(self, now: float) -> None:
        self._faults[:] = [f for f in self._faults if not f.expired(now)]

    def _choose(self, method: str, path: str) -> Fault | None:
        """The fault that hits this request (the first one that decides to), counted; or ``None``."""
        with self._lock:
            self._prune(time.monotonic())
            for fault in self._faults:
                if fault.decide(method, path, self._rng):
                    self._injected[fault.kind] += 1
                    self._injected[f"{fault.kind}@{fault.at}"] += 1
                    return fault
            return None

    def _count_forwarded(self, method: str) -> None:
        with self._lock:
            self._forwarded[method] += 1

    def _track(self, sock: socket.socket, open_: bool) -> None:
        with self._lock:
            if open_:
                self._sockets.add(sock)
            else:
                self._sockets.discard(sock)


class FaultControl:
    """The control endpoint of a proxy, from any process (``FaultControl(endpoint).inject(...)``)."""

    def __init__(self, endpoint: str, timeout: float = 10.0) -> None:
        self.url = endpoint.rstrip("/") + CONTROL_PATH
        self.timeout = timeout

    def inject(self, *faults: Mapping[str, Any], **one: Any) -> dict[str, Any]:
        return self._call({"inject": [*faults, *([one] if one else [])]})

    def heal(self) -> dict[str, Any]:
        return self._call({"heal": True})

    def state(self) -> dict[str, Any]:
        return self._call(None)

    def _call(self, body: Mapping[str, Any] | None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        method = "GET" if data is None else "POST"
        headers = {"Content-Type": "application/json"}
        request = urllib.request.Request(self.url, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            answer: dict[str, Any] = json.loads(response.read())
            return answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (it timed out, or gave up on a body it did not need) is not an error of
        the proxy; anything else is printed as usual."""
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    """One client connection: requests forwarded one by one (HTTP/1.1 keep-alive), faults applied."""

    protocol_version = "HTTP/1.1"
    proxy: FaultProxy  # set on the subclass :meth:`FaultProxy.start` makes

    def setup(self) -> None:
        super().setup()
        # Headers and body leave in separate writes: without this, Nagle's algorithm holds the body for the
        # client's delayed ACK (40 ms a response).
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.proxy._track(self.connection, True)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()
        self.proxy._track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read counts, not logs."""

    def do_GET(self) -> None:
        self._serve()

    do_PUT = do_POST = do_DELETE = do_HEAD = do_GET

    # -- one request -----------------------------------------------------------------------------------

    def _serve(self) -> None:
        if urlsplit(self.path).path == CONTROL_PATH:
            self._control()
            return
        method = self.command
        fault = self.proxy._choose(method, self.path)
        if fault is not None and fault.at == "request":
            if fault.kind == "reset":
                self._reset()
                return
            body = self._read_body()
            if fault.kind == "slow":
                self.proxy._healed.wait(fault.delay)
                self._forward(method, body, None)
            else:
                self._error(fault.kind)
            return
        self._forward(method, self._read_body(), fault)

    def _read_body(self) -> bytes:
        """The request body: by Content-Length, or chunked (decoded)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            parts: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self, method: str, body: bytes, fault: Fault | None) -> None:
        """Send the request to the store; answer with its response, or as ``fault`` (struck at ``response``
        or ``body``) says."""
        proxy = self.proxy
        upstream = http.client.HTTPConnection(proxy._upstream_host, proxy._upstream_port, timeout=120)
        try:
            upstream.connect()
            upstream.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    upstream.putheader(name, value)
            if body or method in ("PUT", "POST"):
                upstream.putheader("Content-Length", str(len(body)))
            upstream.endheaders(body or None)
            response = upstream.getresponse()
            self.proxy._count_forwarded(method)
            if fault is not None and fault.at == "response":
                answer = response.read()  # the store is done with the request
                if fault.kind == "reset":
                    self._reset()
                elif fault.kind == "slow":
                    self.proxy._healed.wait(fault.delay)
                    self._relay(method, response, body=answer)
                else:
                    self._error(fault.kind)
                return
            self._relay(method, response, reset_mid_body=fault is not None and fault.at == "body")
        finally:
            upstream.close()

    def _relay(
        self,
        method: str,
        response: http.client.HTTPResponse,
        *,
        reset_mid_body: bool = False,
        body: bytes | None = None,
    ) -> None:
        """The store's response (its ``body`` when already read), streamed when it has a length (read whole
        otherwise); with ``reset_mid_body`` the connection is reset after half the body."""
        length_header = response.getheader("Content-Length")
        if body is None and (length_header is None or reset_mid_body) and method != "HEAD":
            body = response.read()
        self.send_response_only(response.status, response.reason)
        for name, value in response.getheaders():
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        if method == "HEAD":
            self.send_header("Content-Length", length_header or "0")
            self.end_headers()
            return
        total = len(body) if body is not None else int(length_header or 0)
        self.send_header("Content-Length", str(total))
        self.end_headers()
        if body is not None:
            if reset_mid_body:
                self.wfile.write(body[: len(body) // 2])
                self.wfile.flush()
                self._reset()
                return
            self.wfile.write(body)
            return
        while chunk := response.read(_COPY_CHUNK):
            self.wfile.write(chunk)

    def _error(self, kind: str) -> None:
        status, reason, code, message = _ERRORS[kind]
        request_id = uuid.uuid4().hex[:16].upper()
        xml = (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            f"<Error><Code>{code}</Code><Message>{message}</Message>"
            f"<RequestId>{request_id}</RequestId><HostId>s3-faults</HostId></Error>"
        ).encode()
        self.send_response_only(status, reason)
        self.send_header("Content-Type", "application/xml")
        self.send_header("x-amz-request-id", request_id)
        self.send_header("Content-Length", str(len(xml)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(xml)

    def _reset(self) -> None:
        """Close the connection with an RST (SO_LINGER 0): the client sees "connection reset"."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.wfile.flush()
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()

    def _control(self) -> None:
        try:
            if self.command == "POST":
                request = json.loads(self._read_body() or b"{}")
                if request.get("heal"):
                    self.proxy.heal()
                if request.get("inject"):
                    self.proxy.inject(*request["inject"])
            elif self.command != "GET":
                raise ValueError(f"{self.command} {CONTROL_PATH}: GET or POST")
            status, answer = 200, self.proxy.state()
        except (ValueError, TypeError, KeyError) as e:
            status, answer = 400, {"error": f"{type(e).__name__}: {e}"}
        data = json.dumps(answer).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A fault-injecting proxy in front of an S3 server.")
    parser.add_argument("--upstream", required=True, help="the S3 server, http://127.0.0.1:PORT")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args(argv)
    proxy = FaultProxy(args.upstream, seed=args.seed).start()
    print(proxy.endpoint, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["CONTROL_PATH", "KINDS", "Fault", "FaultControl", "FaultProxy"]
