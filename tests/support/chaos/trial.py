"""One chaos trial (see :mod:`support.chaos`): its set-up from the seed, the run, the settling and the
verdict."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from hoodie import Table
from hoodie.clean.plan import CleanConfig, CleanPolicy, FailedWritesPolicy, pending_cleans, schedule_clean
from hoodie.clean.service import CLEAN
from hoodie.failpoints import ENV as FAILPOINTS_ENV
from hoodie.indexing.execute import schedule_indexing
from hoodie.storage import Storage
from hoodie.table_service import run_in_process
from hoodie.testing.table_writer import TableWriter
from hoodie.write.failed_writes import rollback_failed_writes
from hoodie.write.heartbeat import HeartbeatConfig
from hoodied.coordination import identity
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig
from support.chaos.actors import ONEOFF_TIMEOUT, ZOOKEEPER_PROVIDER, LockWatch, Operator, outcomes, spellings
from support.chaos.faults import FaultInjector, StoreFaults, Targets, Tmpfs
from support.chaos.judge import (
    TimelineSamples,
    Verdict,
    check_history_complete,
    check_no_orphans,
    check_plans_disjoint,
    check_records,
    check_single_completion,
    check_written_files_exist,
)
from support.chaos.ledger import SCHEMA, Ledger
from support.chaos.stalls import Staller
from support.chaos.writer import HEARTBEAT
from support.metadata_checks import check_metadata_table
from support.s3_faults import FaultProxy
from support.s3_server import S3Server
from support.server_process import free_port
from support.zk_server import TcpProxy, ZooKeeperServer

logger = logging.getLogger(__name__)

CHECKOUT = Path(__file__).resolve().parents[3]
SESSION_TIMEOUT = 6.0
#: The daemons' ``jobs.late_request_horizon``: no request a stall holds lands later than this after the
#: takeover (a stall holds it for the session, the lease's expiry and at most 6 s more), so the trial waits
#: for the sweeps up to it (:meth:`Trial._wait_for_late_sweeps`) instead of a store's 15 minutes.
LATE_REQUEST_HORIZON = 60.0
TABLE_NAME = "chaos"
REPLICAS = ("r1", "r2", "r3")
#: The second executors (:mod:`support.chaos.actors`): ``alias``, a daemon naming the table another way on
#: the replicas' ZooKeeper base path; ``second``, a daemon on a base path of its own; and the fault kinds
#: ``stop_replica`` (SIGSTOP past the session and the heartbeat), ``stall`` (a replica stopped at a chosen
#: request, the request sent late: issue 33), ``oneoff`` and ``cancel`` (an operator).
ACTORS = ("alias", "second", "stop_replica", "stall", "oneoff", "cancel")
#: Seconds between the samples of the timeline a trial takes while it runs (:class:`TimelineSamples`).
SAMPLE_EVERY = 5.0
#: The daemons' replica names.
ALIAS = "a1"
SECOND = "d2"
LOCK_BASE_PATH = "hoodie.write.lock.zookeeper.base_path"
#: One replica commits slowly: it holds the table lock two seconds inside every commit of a rewriting service
#: (and before a clean's), so that kills and ZooKeeper partitions often land in the middle of a commit.
SLOW_COMMITTER = "r1"
#: On S3 a daemon refuses a store request that could outlast its instant lease (``hoodie.lease_margin``:
#: the expiry less one renewal and 1 s of clock skew must exceed the request ``timeout``, with 1 s left to
#: retry), so the daemons there get a 9 s lease (the writer's stays 2 s: a longer lease only makes them
#: wait longer before they roll a writer's failed commit back) and store requests a 5 s timeout.
S3_LEASE = HeartbeatConfig(interval_ms=1000, tolerable_misses=9)
#: ``allow_http`` again: a client option given replaces those the environment set (``AWS_ALLOW_HTTP``).
S3_OPTIONS = {"timeout": "5s", "allow_http": "true"}
SLOW_COMMITS = ",".join(
    [f"{s}.during_commit=sleep:2" for s in ("compaction", "logcompaction", "clustering")]
    + ["clean.before_commit=sleep:1"]
)


@dataclass(frozen=True)
class TrialSpec:
    """Everything a trial varies, derived from its seed (:meth:`of`)."""

    seed: int
    table_version: int
    table_type: str  # MERGE_ON_READ | COPY_ON_WRITE
    store: str  # local | s3
    record_index: bool
    duration: float
    kinds: tuple[str, ...]
    #: Daemons besides the replicas: ``alias`` and/or ``second`` (:data:`ACTORS`).
    daemons: tuple[str, ...] = ()
    #: Which other spelling of the table's path the alias gives (an index, modulo their number).
    alias_spelling: int = 0

    @classmethod
    def of(
        cls,
        seed: int,
        duration: float,
        *,
        versions: tuple[int, ...] = (6, 8, 9),
        stores: tuple[str, ...] = ("local",),
        kinds: tuple[str, ...] = (),
        actors: tuple[str, ...] = ACTORS,
    ) -> TrialSpec:
        """The trial of ``seed``. ``actors``: which of :data:`ACTORS` may appear (the extra daemons are
        drawn among those allowed: one of them or both; the operator's and the stops' kinds join the
        faults drawn, unless ``kinds`` names the kinds)."""
        rng = random.Random(f"spec-{seed}")
        version = versions[seed % len(versions)]
        store = stores[(seed // len(versions)) % len(stores)]
        table_type = "COPY_ON_WRITE" if rng.random() < 0.3 else "MERGE_ON_READ"
        record_index = version >= 8 and rng.random() < 0.5
        default: tuple[str, ...] = ("kill_replica", "kill_writer", "zk_cut", "zk_partition")
        default += ("disk_full",) if store == "local" else ("store_errors",)
        default += tuple(k for k in ("stop_replica", "stall", "oneoff", "cancel") if k in actors)
        allowed = [d for d in ("alias", "second") if d in actors]
        choices = [(d,) for d in allowed] + ([tuple(allowed)] if len(allowed) > 1 else [])
        daemons = rng.choice(choices) if choices else ()
        return cls(
            seed=seed,
            table_version=version,
            table_type=table_type,
            store=store,
            record_index=record_index,
            duration=duration,
            kinds=kinds or default,
            daemons=daemons,
            alias_spelling=rng.randrange(1 << 16),
        )

    def describe(self) -> str:
        kind = "MOR" if self.table_type == "MERGE_ON_READ" else "COW"
        index = " +record_index" if self.record_index else ""
        daemons = "".join(f" +{d}" for d in self.daemons)
        return (
            f"seed {self.seed}: v{self.table_version} {kind}{index}{daemons} on {self.store}, "
            f"{self.duration:.0f} s"
        )


class TableStore(Protocol):
    """Where a trial's table lives."""

    uri: str
    env: dict[str, str]  # for every process touching the table
    storage_options: dict[str, str]
    disk: Tmpfs | None
    faults: StoreFaults | None

    def keep(self, dest: Path) -> None:
        """Copy the table to ``dest`` (a failed trial's evidence)."""

    def close(self) -> None: ...


class LocalStore:
    """The table on a tmpfs of its own (``disk_full`` fills it), or on the trial's folder when no tmpfs can be
    mounted here (then ``disk_full`` is not drawn)."""

    def __init__(self, folder: Path, *, tmpfs: bool, size_mb: int = 384) -> None:
        self.env: dict[str, str] = {}
        self.storage_options: dict[str, str] = {}
        self.faults: StoreFaults | None = None
        self.disk = Tmpfs(folder / "disk", size_mb) if tmpfs else None
        if self.disk is not None:
            self.disk.mount()
            root = self.disk.folder
        else:
            root = folder / "disk"
            root.mkdir(parents=True, exist_ok=True)
        self.uri = str(root / TABLE_NAME)

    def keep(self, dest: Path) -> None:
        shutil.copytree(self.uri, dest, dirs_exist_ok=True)

    def close(self) -> None:
        if self.disk is not None:
            self.disk.free()
            self.disk.unmount()


class ProxyFaults:
    """``store_errors`` through the fault-injecting S3 proxy: each time 503s, 500s or resets (drawn from the
    trial's seed), before the store sees a request or after it applied it (a write landed, answer lost)."""

    def __init__(self, proxy: FaultProxy, rng: random.Random) -> None:
        self.proxy = proxy
        self.rng = rng

    def fail(self, rate: float, seconds: float) -> None:
        kind = self.rng.choice(("503", "500", "reset"))
        at = self.rng.choice(("request", "response"))
        self.proxy.inject(kind=kind, rate=rate, at=at, duration=seconds)

    def heal(self) -> None:
        self.proxy.heal()


class S3Store:
    """The table in a bucket of its own on the S3-compatible server. The replicas and the writer reach it
    through the fault-injecting proxy (``store_errors``); the trial's own reads (the judge, hudi-rs) go to the
    server directly, through the environment the campaign sets."""

    def __init__(self, server: S3Server, proxy: FaultProxy, seed: int) -> None:
        bucket = f"chaos-{seed}-{uuid.uuid4().hex[:8]}"
        self.server = server
        self.uri = f"{server.bucket(bucket)}/{TABLE_NAME}"
        self.env = proxy.environment(server.environment())
        self.storage_options: dict[str, str] = dict(S3_OPTIONS)
        self.disk: Tmpfs | None = None
        self.faults: StoreFaults | None = ProxyFaults(proxy, random.Random(f"store-{seed}"))
        self._proxy = proxy

    def keep(self, dest: Path) -> None:
        self.server.download(self.uri, dest)

    def close(self) -> None:
        self._proxy.heal()


@dataclass
class Process:
    """A daemon of the trial: its process, its log, where its run's lines start in the log, and the port it
    serves on (read from its log once it serves; 0 before)."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    offset: int = 0
    _port: int = 0

    @property
    def port(self) -> int:
        if not self._port:
            try:
                with self.log.open("rb") as f:
                    f.seek(self.offset)
                    text = f.read().decode(errors="replace")
            except OSError:
                return 0
            found = _SERVING.search(text)
            self._port = int(found.group(1)) if found else 0
        return self._port


#: The line a daemon logs once it serves, with the port it bound.
_SERVING = re.compile(r"health server listening on http://127\.0\.0\.1:(\d+)")


@dataclass
class TrialResult:
    spec: TrialSpec
    verdict: Verdict
    faults: Counter[str]
    events: list[str]
    seconds: float
    work: Path
    replica_restarts: int = 0
    problems: list[str] = field(default_factory=list)
    #: What the second executors did (:meth:`Trial.actor_counts`): ``alias_runs``, ``oneoff_runs``,
    #: ``stops``, ``lost_race``...
    actors: Counter[str] = field(default_factory=Counter)
    #: The stalls that struck and what came of them (:meth:`support.chaos.stalls.Staller.counts`).
    stalls: Counter[str] = field(default_factory=Counter)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        v = self.verdict
        done = ", ".join(f"{k} {n}" for k, n in sorted(v.completed.items()) if not k.startswith("timeline:"))
        faults = ", ".join(f"{k} {n}" for k, n in sorted(self.faults.items())) or "none"
        actors = ", ".join(f"{k} {n}" for k, n in sorted(self.actors.items())) or "none"
        stalls = ", ".join(f"{k} {n}" for k, n in sorted(self.stalls.items()))
        head = "ok  " if self.ok else "FAIL"
        return (
            f"{head} {self.spec.describe()} ({self.seconds:.0f} s): faults {faults}; batches acked "
            f"{v.batches_acked}, failed {v.batches_failed}, unacknowledged but committed "
            f"{v.batches_unacked_committed}, not committed {v.batches_unacked_lost}; "
            f"completed {done or 'none'}; records checked {v.records_checked}; actors {actors}"
            + (f"; stalls {stalls}" if stalls else "")
            + ("" if self.ok else "\n      " + "\n      ".join(self.problems))
        )


class Trial:
    """Runs one trial in ``work`` against the ZooKeeper server ``zk`` (shared by a campaign's trials)."""

    def __init__(self, spec: TrialSpec, work: Path, zk: ZooKeeperServer, store: TableStore) -> None:
        self.spec = spec
        self.work = work
        self.zk = zk
        self.store = store
        self.base_path = f"/chaos-{spec.seed}-{os.getpid()}-{int(time.time())}"
        self.lock_path = f"{self.base_path}/locks/{TABLE_NAME}"
        self.proxies = {name: TcpProxy(zk.connect) for name in REPLICAS}
        extra = {"alias": ALIAS, "second": SECOND}
        self.daemons = REPLICAS + tuple(extra[d] for d in spec.daemons)
        link = None
        if store.uri.startswith("/"):  # a symbolic link to the table is one more of its names
            link = work / "table-link"
            with contextlib.suppress(FileExistsError):
                link.symlink_to(store.uri, target_is_directory=True)
        self.spellings = spellings(store.uri, link)
        self.alias_path = self.spellings[1 + spec.alias_spelling % (len(self.spellings) - 1)]
        #: The second daemon's own ZooKeeper base path, and where its lock would be if it followed it.
        self.second_base_path = f"{self.base_path}-second"
        self.second_lock_path = f"{self.second_base_path}/locks/{TABLE_NAME}"
        #: The daemons' instant lease (``hoodie.client.heartbeat.*``): the writer's on local disk; on S3 one
        #: long enough to hold a store request (:data:`S3_LEASE`).
        self.lease = S3_LEASE if spec.store == "s3" else HEARTBEAT
        self.operator: Operator | None = None
        self.staller: Staller | None = None
        self.samples = TimelineSamples()
        self.lock_watch: LockWatch | None = None
        self.replicas: dict[str, Process] = {}
        self.writer: Process | None = None
        self.ledger = Ledger(work / "ledger.jsonl")
        self.stop_file = work / "writer.stop"
        self.problems: list[str] = []
        self.killed: set[str] = set()
        self.restarts = 0
        self._guard = threading.Lock()
        self._done = threading.Event()

    # -- processes ----------------------------------------------------------------------------------------

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HOODIE_FAILPOINT", "PYSPARK"))}
        paths = [str(CHECKOUT / "core"), str(CHECKOUT / "services"), str(CHECKOUT / "tests")]
        env["PYTHONPATH"] = os.pathsep.join([*paths, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        env.update(self.store.env)
        return env

    def _hoodie(self) -> dict[str, str]:
        """The table's ``hoodie:`` settings in every daemon's configuration (and a one-off's ``--conf``)."""
        return {
            "hoodie.compact.inline.max.delta.commits": "3",
            "hoodie.log.compaction.blocks.threshold": "2",
            "hoodie.clustering.async.max.commits": "4",
            "hoodie.clustering.plan.strategy.small.file.limit": "1048576",
            "hoodie.clustering.plan.strategy.target.file.max.bytes": "4194304",
            "hoodie.clustering.plan.strategy.max.num.groups": "4",
            "hoodie.clean.commits.retained": "2",
            "hoodie.clean.failed.writes.policy": "LAZY",
            "hoodie.client.heartbeat.interval_in_ms": str(self.lease.interval_ms),
            "hoodie.client.heartbeat.tolerable.misses": str(self.lease.tolerable_misses),
            "hoodie.keep.min.commits": "5",
            "hoodie.keep.max.commits": "8",
            # The writer updates keys all over the table and does not refuse updates under clustering.
            "hoodie.clustering.updates.strategy": "org.apache.hudi.client.clustering.update.strategy."
            "SparkAllowUpdateStrategy",
        }

    def _config(self, name: str, port: int) -> Path:
        """Daemon ``name``'s configuration: a replica's (through its ZooKeeper proxy); the alias's (the table
        under another spelling and label, the replicas' base path); the second daemon's (a ZooKeeper base path
        and lock base path of its own, the writers' lock named in the table's settings); the operator's
        (for ``hoodied ctl``: the replicas' base path, ZooKeeper directly)."""
        mor = self.spec.table_type == "MERGE_ON_READ"
        schedule = ["compaction", "logcompaction", "clustering", "clean"] if mor else ["clustering", "clean"]
        hoodie = self._hoodie()
        connect = self.proxies[name].connect if name in self.proxies else self.zk.connect
        base_path, lock_base_path = self.base_path, f"{self.base_path}/locks"
        table_path, label = self.store.uri, TABLE_NAME
        if name == ALIAS:
            table_path, label = self.alias_path, f"{TABLE_NAME}-alias"
        elif name == SECOND:
            base_path, lock_base_path = self.second_base_path, f"{self.second_base_path}/locks"
            hoodie[LOCK_BASE_PATH] = f"{self.base_path}/locks"
        table = {
            "path": table_path,
            "name": label,
            "schedule": schedule,
            "hoodie": hoodie,
            "storage_options": self.store.storage_options,
        }
        text = textwrap.dedent(
            f"""\
            replica: {name}
            poll_interval: 1s
            poll_jitter: 0.2
            reschedule_interval: 5s
            zookeeper:
              connect: {connect}
              base_path: {base_path}
              session_timeout: {SESSION_TIMEOUT}s
              lock_base_path: {lock_base_path}
            spark:
              master: local[1]
              max_concurrent_jobs: 2
              conf: {{spark.driver.memory: 512m, spark.ui.enabled: "false"}}
            metrics: {{host: 127.0.0.1, port: {port}}}
            logging: {{format: json}}
            jobs: {{takeover_grace: 2s, shutdown_grace: 20s, backoff: 1s, backoff_max: 5s, max_attempts: 1000,
                    lock_timeout: 20s, late_request_horizon: {LATE_REQUEST_HORIZON:.0f}s}}
            """
        )
        path = self.work / f"{name}.yaml"
        path.write_text(text + "tables:\n  - " + json.dumps(table) + "\n")
        return path

    def start_replica(self, name: str) -> None:
        # Port 0: the daemon binds a free port when it serves (logged). A port drawn here would be free now
        # but could be taken (a JVM's ephemeral port) by the time the daemon binds it, after Spark started.
        config = self._config(name, 0)
        log = self.work / f"{name}.log"
        env = self._env()
        failpoints = [SLOW_COMMITS] if name == SLOW_COMMITTER else []
        if self.staller is not None:
            stall = self.staller.env(name)
            failpoints += [stall.pop(FAILPOINTS_ENV)] if FAILPOINTS_ENV in stall else []
            env.update(stall)
        if failpoints:
            env[FAILPOINTS_ENV] = ",".join(failpoints)
        offset = log.stat().st_size if log.exists() else 0
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hoodied.cli", "run", "--config", str(config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        with self._guard:
            self.replicas[name] = Process(name, proc, log, offset=offset)
            self.killed.discard(name)

    def restart_replica(self, name: str) -> None:
        self.restarts += 1
        self.start_replica(name)

    def kill_replica(self, name: str) -> None:
        with self._guard:
            self.killed.add(name)
            replica = self.replicas[name]
        _kill_group(replica.proc)

    def stop_daemon(self, name: str) -> object:
        """SIGSTOP daemon ``name``'s process group (its JVM and Python workers too); returns the process,
        for :meth:`resume_daemon`."""
        with self._guard:
            proc = self.replicas[name].proc
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGSTOP)
        return proc

    def resume_daemon(self, stopped: object) -> None:
        """SIGCONT the process group :meth:`stop_daemon` stopped (gone already if it was killed meanwhile)."""
        assert isinstance(stopped, subprocess.Popen)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(stopped.pid, signal.SIGCONT)

    def start_writer(self) -> None:
        log = self.work / "writer.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "support.chaos.writer",
                    "--table",
                    self.store.uri,
                    "--ledger",
                    str(self.ledger.path),
                    "--seed",
                    str(self.spec.seed),
                    "--zookeeper",
                    self.zk.connect,
                    "--lock-path",
                    self.lock_path,
                    "--stop-file",
                    str(self.stop_file),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self._env(),
                start_new_session=True,
            )
        with self._guard:
            self.writer = Process("writer", proc, log)
            self.killed.discard("writer")

    def kill_writer(self) -> None:
        with self._guard:
            self.killed.add("writer")
            writer = self.writer
        if writer is not None:
            _kill_group(writer.proc)

    def _watch(self) -> None:
        """A process that exits without the injector killing it is a finding; it is started again."""
        while not self._done.wait(0.5):
            with self._guard:
                gone = [
                    r
                    for r in self.replicas.values()
                    if r.proc.poll() is not None and r.name not in self.killed
                ]
                writer = self.writer
            for r in gone:
                tail = "\n".join(r.log.read_text(errors="replace").splitlines()[-15:])
                self.problems.append(f"replica {r.name} exited by itself with {r.proc.returncode}:\n{tail}")
                self.restart_replica(r.name)
            if (
                writer is not None
                and writer.proc.poll() not in (None, 0)
                and "writer" not in self.killed
                and not self.stop_file.exists()
            ):
                tail = "\n".join(writer.log.read_text(errors="replace").splitlines()[-15:])
                self.problems.append(f"the writer exited by itself with {writer.proc.returncode}:\n{tail}")
                self.start_writer()

    # -- the trial ----------------------------------------------------------------------------------------

    def run(self) -> TrialResult:
        started = time.monotonic()
        verdict = Verdict()
        injector: FaultInjector | None = None
        zookeeper = ZooKeeper(ZooKeeperConfig(connect=self.zk.connect), identity("chaos-driver"))
        zookeeper.start()
        try:
            self._create_table()
            if "stall" in self.spec.kinds:
                # On S3 each daemon's own stalling proxy stands in front of the shared fault proxy. Every
                # daemon of the table can be stalled (the alias and the second daemon schedule and run too).
                upstream = self.store.env.get("AWS_ENDPOINT_URL") if self.spec.store == "s3" else None
                self.staller = Staller(self.work, self.daemons, self._pid_of, self._log_of, upstream)
            self.lock_watch = LockWatch(
                self.zk.connect, self.lock_path, self.second_lock_path if SECOND in self.daemons else None
            )
            self.lock_watch.start()
            for name in self.daemons:
                self.start_replica(name)
            for name in self.daemons:
                self._wait_ready(name, 180.0)
            self.start_writer()
            watcher = threading.Thread(target=self._watch, name="chaos-watch", daemon=True)
            watcher.start()
            sampler = threading.Thread(target=self._sample, name="chaos-samples", daemon=True)
            sampler.start()
            operator = self.operator = self._operator()
            injector = FaultInjector(
                Targets(
                    replicas=REPLICAS,
                    kill_replica=self.kill_replica,
                    restart_replica=self.restart_replica,
                    kill_writer=self.kill_writer,
                    restart_writer=self.start_writer,
                    zk_cut=lambda name: self.proxies[name].cut(),
                    zk_block=lambda name: self.proxies[name].block(),
                    zk_unblock=lambda name: self.proxies[name].unblock(),
                    session_timeout=SESSION_TIMEOUT,
                    disk=self.store.disk,
                    store=self.store.faults,
                    stoppable=self.daemons,
                    stop=self.stop_daemon,
                    resume=self.resume_daemon,
                    stop_floor=SESSION_TIMEOUT + self.lease.expiry_ms / 1000,
                    stall=self.staller.arm if self.staller is not None else None,
                    unstall=self.staller.disarm if self.staller is not None else None,
                    oneoff=operator.launch,
                    cancel=operator.cancel,
                    retry=operator.retry,
                ),
                random.Random(f"faults-{self.spec.seed}"),
                self.spec.kinds,
            )
            stop = threading.Event()
            chaos = threading.Thread(target=injector.run, args=(self.spec.duration, stop), daemon=True)
            chaos.start()
            if self.spec.record_index:
                self._request_record_index(zookeeper)
            chaos.join()
            if injector.error is not None:
                self.problems.append(injector.error)
            self._stop_writer()
            operator.finish(ONEOFF_TIMEOUT)
            self.problems.extend(operator.errors)
            self._settle(180.0)
            self._wait_for_late_sweeps(LATE_REQUEST_HORIZON + 30.0)
            self._done.set()  # from here on, exits are ours
            watcher.join(5)
            sampler.join(30)
            self._stop_replicas()
            with contextlib.suppress(Exception):  # evidence of what the last clean cleaned, if it fails
                self.store.keep(self.work / "before-clean")
            self._final_clean(zookeeper)
            self._judge(verdict)
        except Exception as e:
            logger.exception("chaos trial %s broke", self.spec.describe())
            self.problems.append(f"the trial broke: {type(e).__name__}: {e}")
        finally:
            self._done.set()
            if injector is not None:
                injector.heal()
            if self.operator is not None:
                self.operator.finish(0.0)
            self._close()
            zookeeper.stop()
        events = (
            [f"{e.at:7.1f} s {e.kind} {e.target} {e.detail}" for e in injector.events] if injector else []
        )
        if self.operator is not None:
            events += [f"one-off {o.describe()}" for o in self.operator.oneoffs]
            events += [f"ctl cancel {c.describe()}" for c in self.operator.cancels]
        result = TrialResult(
            self.spec,
            verdict,
            injector.counts if injector is not None else Counter(),
            events,
            time.monotonic() - started,
            self.work,
            self.restarts,
            self.problems + verdict.problems,
            self.actor_counts(injector.counts if injector is not None else Counter()),
            self.staller.counts() if self.staller is not None else Counter(),
        )
        (self.work / "result.txt").write_text(result.summary() + "\n\n" + "\n".join(result.events) + "\n")
        if not result.ok:
            with contextlib.suppress(Exception):
                self.store.keep(self.work / "table")
        return result

    def _create_table(self) -> None:
        TableWriter.create(
            self.store.uri,
            name=TABLE_NAME,
            table_type="MERGE_ON_READ" if self.spec.table_type == "MERGE_ON_READ" else "COPY_ON_WRITE",
            table_version=self.spec.table_version,
            schema=SCHEMA,
            record_key_fields=["key"],
            partition_fields=["part"],
            storage_options=self.store.storage_options,
        )

    def _wait_ready(self, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            replica = self.replicas[name]
            if replica.proc.poll() is not None and name not in self.killed:
                raise AssertionError(f"{name} exited: {_tail(replica.log)}")
            if _get(replica.port, "/readyz") == 200:
                return
            time.sleep(0.5)
        raise AssertionError(f"{name} not ready within {timeout:.0f} s: {_tail(self.replicas[name].log)}")

    def _request_record_index(self, zookeeper: ZooKeeper) -> None:
        """Once the writer committed a few batches, request a record index (the daemon then builds it)."""
        deadline = time.monotonic() + self.spec.duration / 2
        while time.monotonic() < deadline and sum(e.acked for e in self.ledger.entries().values()) < 3:
            time.sleep(0.5)
        storage = Storage.for_uri(self.store.uri, self.store.storage_options)
        lock = zookeeper.table_lock(self.lock_path, acquire_timeout=60.0)
        for attempt in range(5):
            try:
                schedule_indexing(storage, lock, ["record_index"])
                return
            except Exception as e:  # a full disk or a failing store meanwhile: try again
                logger.warning("chaos: requesting the record index failed (attempt %d): %s", attempt + 1, e)
                time.sleep(2.0)
        self.problems.append("could not request the record index in 5 attempts")

    def _stop_writer(self) -> None:
        self.stop_file.touch()
        writer = self.writer
        if writer is None:
            return
        try:
            writer.proc.wait(90)
        except subprocess.TimeoutExpired:
            self.problems.append("the writer did not stop within 90 s of its stop file")
            _kill_group(writer.proc)

    def _settle(self, timeout: float) -> None:
        """Until nothing is pending on the timeline (the replicas finish what the faults interrupted and the
        LAZY clean rolls back the writer's killed commits), or ``timeout``."""
        storage = Storage.for_uri(self.store.uri, self.store.storage_options)
        deadline = time.monotonic() + timeout
        for name in self.daemons:
            self._wait_ready(name, 120.0)
        while time.monotonic() < deadline:
            try:
                pending = Table.load(storage).timeline.pending()
            except Exception as e:
                logger.warning("chaos: cannot read the table while settling: %s", e)
                pending = []
            if not pending:
                return
            time.sleep(1.0)
        names = ", ".join(f"{i.action} {i.time} ({i.state.name.lower()})" for i in pending[:5])
        self.problems.append(f"still pending {timeout:.0f} s after the faults stopped: {names}")

    def _wait_for_late_sweeps(self, timeout: float) -> None:
        """Until no replica has a sweep of late files planned (``hoodied_late_sweeps_pending``; the last is
        at the horizon after the takeover), or ``timeout``: a file a held request lands must be gone by then,
        as it is in production once the store's horizon passed."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = {r.name: _late_sweeps_pending(r.port) for r in self.replicas.values()}
            if not any(pending.values()):
                return
            time.sleep(1.0)
        self.problems.append(
            f"late-file sweeps still planned {timeout:.0f} s after the faults stopped: {pending}"
        )

    def _stop_replicas(self) -> None:
        for replica in self.replicas.values():
            if _get(replica.port, "/healthz") != 200:
                self.problems.append(f"replica {replica.name} is not healthy at the end")
        for replica in self.replicas.values():
            if replica.proc.poll() is None:
                replica.proc.send_signal(signal.SIGTERM)
        for replica in self.replicas.values():
            try:
                code = replica.proc.wait(60)
            except subprocess.TimeoutExpired:
                code = None
            if code != 0:
                self.problems.append(
                    f"replica {replica.name} stopped with {code} on SIGTERM: {_tail(replica.log)}"
                )
            _kill_group(replica.proc)

    def _final_clean(self, zookeeper: ZooKeeper) -> None:
        """Roll back what failed writes are left, then clean down to one version of each file group."""
        storage = Storage.for_uri(self.store.uri, self.store.storage_options)
        lock = zookeeper.table_lock(self.lock_path, acquire_timeout=60.0)
        rollback_failed_writes(storage, lock, HEARTBEAT)
        for pending in pending_cleans(Table.load(storage)):  # scheduled by a replica as it stopped
            run_in_process(CLEAN.prepare(storage, lock, pending.time, {}))
        config = CleanConfig(
            policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS,
            file_versions_retained=1,
            failed_writes=FailedWritesPolicy.LAZY,
        )
        scheduled = schedule_clean(storage, lock, config=config)
        if scheduled.instant is not None:
            run_in_process(CLEAN.prepare(storage, lock, scheduled.instant.time, {}))

    def _judge(self, verdict: Verdict) -> None:
        table = Table.load(Storage.for_uri(self.store.uri, self.store.storage_options))
        entries = self.ledger.entries()
        check_records(table, self.spec.seed, entries, verdict)
        writer_instants = {e.instant for e in entries.values() if e.instant is not None}
        logs = [self.work / f"{name}.log" for name in self.daemons]
        oneoffs = self.operator.completions() if self.operator is not None else Counter()
        check_single_completion(table, logs, writer_instants, verdict, oneoffs)
        check_no_orphans(table, verdict)
        check_written_files_exist(table, verdict)
        check_plans_disjoint(table, verdict)
        verdict.problems.extend(self.samples.problems)
        seen = dict(self.samples.seen)
        for log in logs:
            seen.update({t: service for service, t in outcomes(log).completed})
        seen.update({t: service for service, t in oneoffs})
        check_history_complete(table, seen, verdict)
        if verdict.batches_acked == 0:  # nothing written under the faults: the trial proved nothing
            verdict.problems.append("the writer had no batch acknowledged: the trial proved nothing")
        if table.config.metadata_partitions and self.store.uri.startswith("/"):
            try:
                check_metadata_table(Path(self.store.uri), "after the trial")
            except AssertionError as e:
                verdict.problems.append(f"metadata table: {e}")

    def _sample(self) -> None:
        """Sample the timeline until the daemons stopped (:class:`TimelineSamples`): the instants seen
        completed, and pending plans that share a file group. A sample the faults make fail is skipped."""
        storage = Storage.for_uri(self.store.uri, self.store.storage_options)
        while not self._done.wait(SAMPLE_EVERY):
            try:
                self.samples.sample(Table.load(storage))
            except Exception as e:
                logger.debug("chaos: timeline sample skipped: %s", e)

    def _pid_of(self, name: str) -> int | None:
        """Replica ``name``'s process (and group) id while it runs, else None."""
        with self._guard:
            replica = self.replicas.get(name)
        if replica is None or replica.proc.poll() is not None:
            return None
        return replica.proc.pid

    def _log_of(self, name: str) -> Path:
        return self.work / f"{name}.log"

    def _operator(self) -> Operator:
        """The operator: one-offs with the table's settings, the writers' ZooKeeper lock (Hudi's keys, as
        the README tells operators), the trial's heartbeat and the replicas' storage options (a one-off
        fits its store requests to the lease as the daemon does); ``hoodied ctl`` through a configuration of
        the replicas' own."""
        host, _, port = self.zk.connect.rpartition(":")
        conf = {
            **self._hoodie(),
            "hoodie.write.lock.provider": ZOOKEEPER_PROVIDER,
            "hoodie.write.lock.zookeeper.url": host,
            "hoodie.write.lock.zookeeper.port": port,
            LOCK_BASE_PATH: f"{self.base_path}/locks",
            "hoodie.write.lock.zookeeper.lock_key": TABLE_NAME,
        }
        control = self._config("operator", free_port())
        storage = Storage.for_uri(self.store.uri, self.store.storage_options)
        return Operator(
            self.work,
            storage,
            self.spellings,
            conf,
            self._env(),
            control,
            TABLE_NAME,
            storage_options=self.store.storage_options,
        )

    def actor_counts(self, faults: Counter[str]) -> Counter[str]:
        """What the second executors did: per daemon the instants it completed and its runs that ended
        ``lost the race`` or were left alone (``foreign``: another run held the instant); the one-offs'
        ends; the stops; whose lock contenders showed up where; ``lost_race`` over everyone."""
        out: Counter[str] = Counter()
        prefix = {ALIAS: "alias", SECOND: "second"}
        for name in self.daemons:
            seen = outcomes(self.work / f"{name}.log")
            who = prefix.get(name, "replica")
            out[f"{who}_runs"] += sum(seen.completed.values())
            out[f"{who}_lost_race"] += seen.lost_race
            out[f"{who}_foreign"] += seen.foreign
            out["lost_race"] += seen.lost_race
        for d in self.spec.daemons:
            out[f"{d}_daemons"] += 1
        if self.operator is not None:
            counts = self.operator.counts()
            out.update(counts)
            out["lost_race"] += counts["oneoff_lost_race"]
        out["stops"] += faults["stop_replica"]
        if self.lock_watch is not None:
            shared = self.lock_watch.seen[self.lock_path]
            out["second_locks"] += shared[SECOND]
            out["oneoff_locks"] += shared["hoodied-cli"]
        return +out

    def _close(self) -> None:
        if self.staller is not None:
            self.staller.close()
        for replica in self.replicas.values():
            _kill_group(replica.proc)
        if self.writer is not None:
            _kill_group(self.writer.proc)
        for proxy in self.proxies.values():
            proxy.close()
        if self.lock_watch is not None:
            elsewhere = self.lock_watch.seen.get(self.second_lock_path)
            if elsewhere:
                self.problems.append(
                    f"the second daemon took the table lock at {self.second_lock_path} (its own base path), "
                    f"not at the writers' {self.lock_path}: {dict(elsewhere)}"
                )
            self.lock_watch.stop()


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(30)


def _get(port: int, path: str) -> int | None:
    if not port:
        return None
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except OSError:
        return None


def _late_sweeps_pending(port: int) -> int:
    """The late-file sweeps the daemon serving metrics on ``port`` has planned (0 when it does not answer:
    a dead replica sweeps nothing, and the replica polling the table took its sweeps over)."""
    if not port:
        return 0
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode("utf-8", "replace")
    except OSError:
        return 0
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("hoodied_late_sweeps_pending{")
        )
    )


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_trial(
    spec: TrialSpec,
    work: Path,
    zk: ZooKeeperServer,
    *,
    tmpfs: bool,
    s3: tuple[S3Server, FaultProxy] | None = None,
) -> TrialResult:
    """One trial with its table on local storage (a tmpfs when ``tmpfs``), or on S3 (``s3``: the server and
    the proxy in front of it) when its spec says so."""
    work.mkdir(parents=True, exist_ok=True)
    store: TableStore
    if spec.store == "s3":
        if s3 is None:
            raise ValueError(f"{spec.describe()} needs the S3-compatible server")
        store = S3Store(*s3, spec.seed)
    else:
        store = LocalStore(work, tmpfs=tmpfs)
    try:
        return Trial(spec, work, zk, store).run()
    finally:
        store.close()


__all__ = [
    "ACTORS",
    "REPLICAS",
    "LocalStore",
    "S3Store",
    "TableStore",
    "Trial",
    "TrialResult",
    "TrialSpec",
    "run_trial",
]
