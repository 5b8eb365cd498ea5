"""A real ZooKeeper server on loopback for tests: Debian's ZooKeeper 3.8, standalone, in a temporary folder.

:class:`ZooKeeperServer` writes a ``zoo.cfg`` (``clientPortAddress`` 127.0.0.1, a free port, the admin server
off, ``tickTime`` 200 ms with session timeouts allowed from 1 s to 60 s), runs
``java -cp <jars> org.apache.zookeeper.server.quorum.QuorumPeerMain <zoo.cfg>`` (what Debian's
``zkServer.sh`` runs), waits until the server answers ``ruok``, and kills the process by its PID on
:meth:`~ZooKeeperServer.stop`.
The server's output goes to ``zookeeper.log`` beside ``zoo.cfg``; a server that does not come up is reported
with the end of that log.

The classpath is ``zookeeper.jar`` and ``zookeeper-jute.jar`` from ``/usr/share/java`` (packages
``zookeeper``/``libzookeeper-java``) with the runtime dependencies their manifests name (slf4j, netty,
commons-cli, ...), plus ``slf4j-simple`` when present so the log says something.

:func:`expire_session` ends a live client's session from the server side: a second client joins the session
with its id and password and closes it, as ZooKeeper's own tests do; the first client then sees its session
expire (kazoo: SUSPENDED, then LOST, then CONNECTED on a new session). :class:`TcpProxy` stands between a
client and the server to cut its connection without ending its session (kazoo: SUSPENDED, then CONNECTED
on the same session).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import zipfile
from pathlib import Path

from kazoo.client import KazooClient

from support.server_process import free_port

JAVA_DIR = Path(os.environ.get("HOODIE_JAVA_DIR", "/usr/share/java"))
SERVER_JARS = ("zookeeper.jar", "zookeeper-jute.jar")
LOG_BINDING_JAR = "slf4j-simple.jar"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"

TICK_MS = 200
MIN_SESSION_TIMEOUT_MS = 1000
MAX_SESSION_TIMEOUT_MS = 60000
START_TIMEOUT_SECONDS = 60.0


def manifest_class_path(jar: Path) -> list[Path]:
    """The ``Class-Path`` entries of a jar's manifest (continuation lines start with one space)."""
    try:
        with zipfile.ZipFile(jar) as zf:
            text = zf.read("META-INF/MANIFEST.MF").decode("utf-8", "replace")
    except (OSError, KeyError, zipfile.BadZipFile):
        return []
    headers: dict[str, str] = {}
    last = ""
    for line in text.replace("\r\n", "\n").split("\n"):
        if line.startswith(" ") and last:
            headers[last] += line[1:]
        elif ":" in line:
            last, _, value = line.partition(":")
            headers[last] = value.strip()
    return [Path(entry) for entry in headers.get("Class-Path", "").split()]


def java_classpath(jars: tuple[str, ...], java_dir: Path = JAVA_DIR) -> list[Path]:
    """``jars`` (in ``java_dir``) followed by the existing jars their manifests name, each once."""
    out: list[Path] = []
    pending = [java_dir / name for name in jars]
    while pending:
        jar = pending.pop(0)
        if jar in out or not jar.exists():
            continue
        out.append(jar)
        pending.extend(manifest_class_path(jar))
    return out


def zookeeper_available(java_dir: Path = JAVA_DIR) -> str | None:
    """Why a ZooKeeper test server cannot run here, or ``None`` when it can."""
    if shutil.which("java") is None:
        return "no java on PATH (.ci/run installs openjdk-17-jdk-headless)"
    missing = [name for name in SERVER_JARS if not (java_dir / name).exists()]
    if missing:
        jars = ", ".join(missing)
        return f"ZooKeeper jars {jars} not found in {java_dir} (.ci/run installs Debian's zookeeper)"
    return None


def four_letter_word(port: int, word: bytes, timeout: float = 1.0) -> str:
    """Send a four-letter command to the server on 127.0.0.1:``port`` and return its answer ("" if none)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(word)
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode("utf-8", "replace")


class ZooKeeperServer:
    """One standalone ZooKeeper server on 127.0.0.1, its data and log in ``folder`` (a new temporary folder
    when not given, removed on :meth:`stop`)."""

    def __init__(self, folder: Path | None = None, port: int | None = None) -> None:
        self._own_folder = folder is None
        self.folder = Path(tempfile.mkdtemp(prefix="zookeeper-")) if folder is None else folder
        self.port = port or free_port()
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.folder / "zoo.cfg"

    @property
    def log_path(self) -> Path:
        return self.folder / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def _write_config(self) -> None:
        data = self.folder / "data"
        data.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(
            "\n".join(
                [
                    f"tickTime={TICK_MS}",
                    f"minSessionTimeout={MIN_SESSION_TIMEOUT_MS}",
                    f"maxSessionTimeout={MAX_SESSION_TIMEOUT_MS}",
                    "initLimit=10",
                    "syncLimit=5",
                    f"dataDir={data}",
                    f"clientPort={self.port}",
                    "clientPortAddress=127.0.0.1",
                    "maxClientCnxns=0",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,srvr",
                    "autopurge.purgeInterval=0",
                    "",
                ]
            ),
            encoding="utf-8",
        )

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> None:
        reason = zookeeper_available()
        if reason:
            raise RuntimeError(reason)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._write_config()
        classpath = java_classpath((*SERVER_JARS, LOG_BINDING_JAR))
        command = [
            "java",
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Dzookeeper.admin.enableServer=false",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-Dorg.slf4j.simpleLogger.showDateTime=true",
            "-cp",
            os.pathsep.join(str(jar) for jar in classpath),
            MAIN_CLASS,
            str(self.config_path),
        ]
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with code {self._process.returncode} at start-up:\n{self.log_tail()}"
                )
            if four_letter_word(self.port, b"ruok") == "imok":
                return
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(
            f"ZooKeeper did not answer on {self.connect} within {timeout:g} s:\n{self.log_tail()}"
        )

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(
                self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
            )
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            os.kill(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def expire_session(self, client_id: tuple[int, bytes]) -> None:
        expire_session(self.connect, client_id)

    def __enter__(self) -> ZooKeeperServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TcpProxy:
    """A TCP relay from 127.0.0.1:``port`` to ``upstream`` ("host:port") whose connections can be cut.

    Cutting drops every connection at once, as a network blip does: a ZooKeeper client behind the proxy
    sees its connection go (SUSPENDED) and reconnects through the proxy to the same session. Blocking is a
    partition: connections are dropped and new ones refused until :meth:`unblock`; held longer than the
    session timeout, the server expires the session (the client sees LOST).
    """

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self.upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._sockets: set[socket.socket] = set()
        self._guard = threading.Lock()
        self._closed = False
        self._blocked = False
        threading.Thread(target=self._accept, name="tcp-proxy", daemon=True).start()

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                downstream, _ = self._listener.accept()
            except OSError:
                if self._closed:
                    return
                continue
            if self._blocked:
                downstream.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                downstream.close()
                continue
            upstream.settimeout(None)
            with self._guard:
                self._sockets.update((downstream, upstream))
            if self._blocked:  # blocked while it connected
                self.cut()
                continue
            for source, target in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Drop every connection through the proxy (new ones are accepted again at once)."""
        with self._guard:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def block(self) -> None:
        """Partition: drop every connection and refuse new ones until :meth:`unblock`."""
        self._blocked = True
        self.cut()

    def unblock(self) -> None:
        self._blocked = False

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        self.cut()


def expire_session(connect: str, client_id: tuple[int, bytes], timeout: float = 10.0) -> None:
    """Expire the live session ``client_id`` (kazoo's ``client_id``: session id and password) on the server.

    Joins the session from a second client and closes it, then checks by joining again: a closed session
    is refused and the client gets a new one. Tries a few times, since the first client may win the session
    back in between (it reconnects at once when the server moves its session away).
    """
    session_id = client_id[0]
    for _ in range(5):
        client = KazooClient(hosts=connect, client_id=client_id, timeout=timeout)
        client.start(timeout=timeout)
        try:
            joined = client.client_id
            if joined is not None and joined[0] != session_id:
                return
        finally:
            client.stop()
            client.close()
    raise RuntimeError(f"could not expire session 0x{session_id:x} on {connect}")


__all__ = ["TcpProxy", "ZooKeeperServer", "expire_session", "java_classpath", "zookeeper_available"]
