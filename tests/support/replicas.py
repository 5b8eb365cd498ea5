"""Replicas of the daemon as separate ``hoodied run`` processes against one real ZooKeeper (and real Spark),
for the tests that share tables between replicas, with what they check: which pending instants completed, and
how often."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from hoodie import Table
from hoodie.timeline.instant import Instant, State
from support.daemon_tables import PendingTable
from support.server_process import free_port
from support.zk_server import ZooKeeperServer

SESSION_TIMEOUT = 6.0
POLL_INTERVAL = 1.0
TAKEOVER_GRACE = 2.0
#: The instants' heartbeat (the lease every run holds, hoodie.write.heartbeat): 1 s, expired after 2 s
#: without a beat, so that a killed or frozen replica's instants are taken over within the tests' bounds.
HEARTBEAT = {
    "hoodie.client.heartbeat.interval_in_ms": "1000",
    "hoodie.client.heartbeat.tolerable.misses": "2",
}
#: On an object store a lease must outlast one store request (hoodie.lease_margin: the daemon refuses a
#: request timeout its lease cannot hold): 4 s beats, expired after 12 s, and 3 s requests (7 s guaranteed,
#: so 4 s of retries).
OBJECT_STORE_HEARTBEAT = {
    "hoodie.client.heartbeat.interval_in_ms": "4000",
    "hoodie.client.heartbeat.tolerable.misses": "3",
}
OBJECT_STORE_OPTIONS = {"timeout": "3s"}


@dataclass
class Replica:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    port: int
    scrapes: list[dict[str, float]] = field(default_factory=list)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str, timeout: float = 2.0) -> tuple[int, str]:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(self.url(path), timeout=timeout) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode()

    def post(
        self, path: str, body: dict[str, object], token: str | None, timeout: float = 10.0
    ) -> tuple[int, str]:
        """POST ``body`` as JSON, with ``Authorization: Bearer token`` when given."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        req = urllib.request.Request(self.url(path), data=json.dumps(body).encode(), method="POST")
        req.add_header("Content-Type", "application/json")
        if token is not None:
            req.add_header("Authorization", f"Bearer {token}")
        try:
            with opener.open(req, timeout=timeout) as r:
                return int(r.status), r.read().decode()
        except urllib.error.HTTPError as e:
            return int(e.code), e.read().decode()

    def scrape(self) -> dict[str, float] | None:
        """Sums of a few metric families over their series."""
        try:
            status, text = self.get("/metrics")
        except OSError:
            return None
        if status != 200:
            return None
        sums: dict[str, float] = Counter()
        for line in text.splitlines():
            if line.startswith("#") or not line.strip():
                continue
            name = line.split("{", 1)[0].split(" ", 1)[0]
            sums[name] += float(line.rsplit(" ", 1)[1])
        out = dict(sums)
        self.scrapes.append(out)
        return out

    def records(self) -> list[dict[str, object]]:
        out = []
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out


def start_daemon(config: Path, log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """``hoodied run --config config`` in a process group of its own (its Spark JVM included), output to
    ``log``."""
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "hoodied.cli", "run", "--config", str(config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


class Cluster:
    """Replicas started as separate processes, each in its own process group (its Spark JVM included)."""

    def __init__(self, tmp: Path, zk: ZooKeeperServer, tables: list[PendingTable] | list[str]) -> None:
        self.tmp = tmp
        self.zk = zk
        #: The tables' base paths or URIs (s3://...).
        self.tables = [t if isinstance(t, str) else str(t.root) for t in tables]
        self.base_path = f"/hoodied-test-{uuid.uuid4().hex[:8]}"
        self.replicas: list[Replica] = []

    def start(
        self, name: str, *, failpoints: str = "", max_jobs: int = 2, cores: int = 1, extra: str = ""
    ) -> Replica:
        """Start replica ``name``; ``extra``: more top-level YAML of its configuration (one line each)."""
        port = free_port()
        config = self.config(name, port, max_jobs=max_jobs, cores=cores, extra=extra)
        log = self.tmp / f"{name}.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("HOODIE_FAILPOINT")}
        if failpoints:
            env["HOODIE_FAILPOINTS"] = failpoints
        proc = start_daemon(config, log, env)
        replica = Replica(name, proc, log, port)
        self.replicas.append(replica)
        return replica

    def config(self, name: str, port: int, *, max_jobs: int = 2, cores: int = 1, extra: str = "") -> Path:
        """Write replica ``name``'s configuration file; returns its path."""
        config = self.tmp / f"{name}.yaml"
        tables = "\n".join(f"  - {t}" for t in self.tables)
        on_store = any("://" in t and not t.startswith("file:") for t in self.tables)
        heartbeat = OBJECT_STORE_HEARTBEAT if on_store else HEARTBEAT
        options = OBJECT_STORE_OPTIONS if on_store else {}
        config.write_text(
            textwrap.dedent(
                f"""\
                replica: {name}
                poll_interval: {POLL_INTERVAL}s
                poll_jitter: 0.2
                zookeeper:
                  connect: {self.zk.connect}
                  base_path: {self.base_path}
                  session_timeout: {SESSION_TIMEOUT}s
                  lock_base_path: {self.base_path}/locks
                spark:
                  master: local[{cores}]
                  max_concurrent_jobs: {max_jobs}
                  conf: {{spark.driver.memory: 768m}}
                metrics: {{host: 127.0.0.1, port: {port}}}
                logging: {{format: json}}
                jobs: {{takeover_grace: {TAKEOVER_GRACE}s, shutdown_grace: 60s, backoff: 1s, max_attempts: 3}}
                defaults:
                  hoodie: {{{", ".join(f'"{k}": "{v}"' for k, v in heartbeat.items())}}}
                  storage_options: {{{", ".join(f'"{k}": "{v}"' for k, v in options.items())}}}
                """
            )
            + (extra.rstrip() + "\n" if extra else "")
            + "tables:\n"
            + tables
            + "\n"
        )
        return config

    def wait_ready(self, replica: Replica, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert replica.proc.poll() is None, f"{replica.name} exited:\n{self.tail(replica)}"
            try:
                if replica.get("/readyz")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise AssertionError(f"{replica.name} not ready in {timeout} s:\n{self.tail(replica)}")

    def tail(self, replica: Replica, lines: int = 40) -> str:
        return "\n".join(replica.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, replica: Replica, timeout: float = 90.0) -> int:
        if replica.proc.poll() is None:
            replica.proc.send_signal(signal.SIGTERM)
        try:
            code = replica.proc.wait(timeout)
        finally:
            self.kill(replica)
        return code

    def kill(self, replica: Replica) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(replica.proc.pid, signal.SIGKILL)
        replica.proc.wait(30)

    def close(self) -> None:
        for r in self.replicas:
            if r.proc.poll() is None or group_alive(r.proc.pid):
                self.kill(r)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def completed(t: PendingTable, uri: str | None = None) -> dict[str, bool]:
    timeline = Table.open(uri or str(t.root)).timeline
    out = {}
    for i in t.pending:
        now = timeline.get(i.time)
        out[i.time] = now is not None and now.state is State.COMPLETED
    return out


def wait_completed(
    tables: list[PendingTable], timeout: float, cluster: Cluster, uris: list[str] | None = None
) -> float:
    """Until every pending instant of ``tables`` completed (at ``uris`` when given: the tables' copies on
    an object store); returns the seconds it took."""
    locations = uris or [str(t.root) for t in tables]
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if all(all(completed(t, u).values()) for t, u in zip(tables, locations, strict=True)):
            return time.monotonic() - started
        for r in cluster.replicas:
            r.scrape()
        time.sleep(1.0)
    missing = [
        (u, k) for t, u in zip(tables, locations, strict=True) for k, v in completed(t, u).items() if not v
    ]
    logs = "\n\n".join(f"== {r.name}\n{cluster.tail(r)}" for r in cluster.replicas)
    raise AssertionError(f"not completed in {timeout} s: {missing}\n{logs}")


def completed_files(root: Path | str, instant: Instant) -> list[str]:
    """Completed-state files of one instant on the timeline (exactly one when it completed once)."""
    table = Table.open(str(root))
    names = [f.name for f in table.storage.list(table.config.timeline_path) if not f.is_dir]
    out = []
    for name in names:
        parsed = Instant.try_parse(name)
        if parsed is not None and parsed.time == instant.time and parsed.state is State.COMPLETED:
            out.append(name)
    return out


__all__ = [
    "POLL_INTERVAL",
    "SESSION_TIMEOUT",
    "TAKEOVER_GRACE",
    "Cluster",
    "Replica",
    "completed",
    "completed_files",
    "group_alive",
    "start_daemon",
    "wait_completed",
]
