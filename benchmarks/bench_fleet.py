"""A fleet of idle tables on S3 served by three replicas: what it costs, how soon work starts, and what a dead
replica, a gone bucket and a slow store do to the others (issue 34's S3 targets).

    python benchmarks/bench_fleet.py [--tables 10000] [--replicas 3] [--speed 1] [--tries 100]
                                     [--shared-tries 6] [--session-timeout 30] [--slow-delay 20]
                                     [--skip-kill] [--skip-faults] [--keep]

The fleet: TABLES copies of a small MOR table (:func:`build_template`, ``bench_poll.py``'s) in moto's S3
server (``fleet_s3.py``: the backend filled directly, 100 tables a bucket, every request counted by kind and
per table, with the time of each table's LISTs), plus two tables in buckets of their own: ``gone`` (its bucket
deleted in step 4) and ``slow`` (reached through the fault proxy, ``tests/support/s3_faults.py``, slowed in
step 4). REPLICAS processes run the daemon (``hoodied.daemon.Daemon``, as ``hoodied run`` does: the
supervisor, the poll loop, the SQS listeners, the health server, ZooKeeper's coordination and table split)
against a real ZooKeeper (``tests/support/zk_server.py``), every table listed in ``tables``. ``hoodied run``
always starts a Spark session and has no setting to run without one, so each replica is a process of this file
(``bench_fleet.py replica``): the daemon with no session, a job running on the driver's threads, as
``bench_poll.py`` runs it. Each replica's own CPU time is read from ``/proc/<pid>/stat`` (utime + stime).

**Time runs SPEED times faster than the defaults.** Every clock of an idle fleet is divided by SPEED:
``poll_interval`` 30 s / SPEED, ``notifications.sweep_interval`` 600 s / SPEED, ``poll_interval_max`` its
default (10 x ``poll_interval``), ``reschedule_interval`` 300 s / SPEED, and the re-read of each table's
``hoodie.properties`` (``hoodied.listing.CONFIG_MAX_AGE``, 300 s, a constant: set in the replica processes to
300 s / SPEED; a poll's deadline, ``poll_deadline``, is ``poll_interval`` and scales with it). So the
fleet's requests in a window of W seconds are those of W x SPEED seconds at the defaults: requests per table
per hour = counted / tables / (W x SPEED) x 3600, and a replica's CPU share at the defaults is about the
share measured / SPEED (its polls and their listings come SPEED times less often; its fixed costs,
ZooKeeper's pings and the queue's long polls, do not shrink, so that is an upper bound). The
ZooKeeper session timeout is not scaled. Why: the defaults need about 15 minutes for a table's interval to
grow from 30 s to the 10 minutes sweep, then a sweep to measure, twice (with and without notifications),
and moto's server answers about a hundred requests a second on two cores: the fleet a run can afford is
about TABLES x SPEED <= 10,000 x 2 at the default intervals. SPEED 1 (the default) is the daemon's own
defaults: about an hour and a half for 10,000 tables; ``make bench`` runs 600 tables at SPEED 10 (about 14
minutes on two cores; ``run_all.py`` says why not more), ``--quick`` 60 at SPEED 40.

Steps (each prints its figures; ``TARGET`` lines via ``targets.py``):

1. **With change notifications**: S3 Event Notifications of every bucket, filtered on each table's
   ``<table>/.hoodie/`` prefix, to an SNS topic that fans out to one SQS queue per replica (raw delivery: the
   message is S3's event), each replica reading its own queue (``notifications.s3_sqs``); every table has
   ``change_notifications: true``. Why not one queue for all: SQS hands a message to one reader, and a replica
   that reads the event of a table another replica polls drops it (the table waits for its sweep): the report
   names the code, and SHARED_TRIES compactions on the last bucket's tables, whose events go to one queue
   every replica reads (as well as its own), show it: each is waited for 10 s only. After the warm-up (every
   table polled until its interval reached the sweep: the server saw that many LISTs of it) a window of one
   sweep: total storage requests per idle table per hour, target <= 7: the S3 requests of a table's poll
   (those of the idle tables in the window over their LISTs) x its polls an hour at the defaults (3600 / (the
   mean gap between two LISTs of a table at its ceiling, since the warm-up, x SPEED)), plus the SQS and SNS
   requests of the window per real hour (the long polls' 20 s are not scaled) shared among 10,000 tables (they
   cost per replica and queue, not per table; each replica here reads two queues, its own and the shared one);
   the count in the window alone is printed too (right after the warm-up the tables' polls are in step, and a
   window of one cycle cuts them unevenly). Each replica's CPU share of one core, at the defaults and scaled
   to 10,000 tables (x 10,000 / TABLES: linear, its fixed costs scaled too, so an upper bound), target < 5 %.
   Then TRIES times a compaction is requested on an idle table (``schedule_compaction``, as ``hoodied compact
   --mode schedule``; the table's S3 event reaches every replica) and its start latency taken: from the
   requested file written (``schedule_compaction`` returned; it releases the lock after, so a start may come a
   few milliseconds before) to the runner's ``running`` log line on whichever replica owns the table; p99
   target <= 2 s.
2. **A replica killed** (SIGKILL, after step 1): the time until every table it owned (rendezvous hashing
   over the replicas' names, ``hoodied.table_split.owner_of``) was listed by another replica, at the
   server; target: within the ZooKeeper session timeout plus one poll interval (the others read the list
   of replicas at their next poll after the session ended).
3. **Without notifications** (the replicas restarted, adaptive polling up to ``poll_interval_max``): after the
   warm-up (every table at its ceiling) a window of two ceilings: requests per idle table per hour (as in step
   1), target <= 15; the delay before new work on a table idle for an hour is picked up, derived from the
   measured spacing of each table's LISTs at its ceiling (a change at a random moment waits for the next poll:
   uniform over the gap it falls in, gaps weighted by their length), p50 and p99, at the defaults (x SPEED);
   reported, no target.
4. **A gone bucket and a slow store** (after step 3's window, the same replicas): ``gone``'s bucket is
   deleted and every request to ``slow`` held SLOW_DELAY seconds (not scaled: at SPEED 5 a 20 s stall is
   more than three poll intervals); a second window as long. Per replica, the median gap between two polls
   of each of its other tables (their LISTs at the server; both polls after the change), with the bad
   tables against the first window, when they were healthy (the run "without them"); the worst replica's
   ratio's target <= 1.1. A table whose next poll had not come by the window's end though the daemon's rule
   allowed no longer (its ceiling plus one and a half poll intervals) counts as an endless gap: the gaps
   alone would miss the polls held up past the window, and a count of polls or a mean time since the last
   one depends on where the window cuts the tables' cycles, which are in step after the warm-up. The p95,
   the late polls and the medians of the tables' ``hoodied_table_poll_interval_seconds`` gauges at the end
   of each window are printed beside it.

Every server listens on 127.0.0.1 (free ports) and is stopped by its PID at the end; every process gets
dummy credentials and ``AWS_EC2_METADATA_DISABLED=true``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import logging
import math
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3

import targets
from fleet_s3 import FleetS3, bucket_of
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import lock_for_table
from hoodie.storage import Storage
from hoodie.storage.identity import table_identity
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter, WriteConfig
from hoodie.write.base_file import ParquetOptions
from hoodied.coordination import table_key
from hoodied.poll_interval import PollIntervals
from hoodied.table_split import owner_of
from support.s3_faults import FaultProxy
from support.s3_server import REGION
from support.server_process import free_port
from support.zk_server import ZooKeeperServer

BASE_POLL = 30.0  # the defaults the run is scaled from (seconds)
BASE_SWEEP = 600.0
BASE_RESCHEDULE = 300.0
BASE_CONFIG_MAX_AGE = 300.0
REQUESTS_WITH_EVENTS_LIMIT = 7.0  # per idle table per hour
REQUESTS_ADAPTIVE_LIMIT = 15.0
CPU_SHARE_LIMIT = 5.0  # % of one core, per replica
START_LIMIT = 2.0  # seconds, p99
SPACING_RATIO_LIMIT = 1.1
SHARED_WAIT = 10.0  # seconds a start is waited for when the event went to the shared queue
PER_BUCKET = 100
TARGET_TABLES = 10_000  # the fleet the targets are set for
EXTRA = ("gone", "slow")  # the tables of step 4, each in a bucket of its own


def build_template(path: Path) -> None:
    """The fleet's table, as ``bench_poll.py`` builds it: a small MOR table (version 8) with two
    deltacommits, a compaction and one more deltacommit (so that a compaction can be requested on it), small
    files (a bloom filter for 100 keys)."""
    config = WriteConfig(parquet=ParquetOptions(bloom_num_entries=100))
    spec = GenerateSpec(table_version=8, rows=20, commits=2, partitions=1, seed=1, update_fraction=0.5)
    generate_table(str(path), spec, config)
    storage = Storage.for_uri(str(path))
    lock = lock_for_table(storage, {})
    schedule_compaction(storage, lock)
    compact_in_process(storage, lock, parquet=config.parquet)
    keys = TripGenerator(spec.seed, spec.partitions)  # the seed's first keys are the table's own
    TableWriter.open(str(path), config=config).upsert(keys.rows(keys.keys(spec.rows)[:5]))


# -- a replica (``bench_fleet.py replica``: run in a process of its own) ------------------------------------


def replica_main(argv: Sequence[str]) -> int:
    """One replica: the daemon as ``hoodied run`` runs it, but with no Spark session (jobs run on the
    driver's threads), the ``hoodie.properties`` re-read scaled, and each job's start appended to a file."""
    ap = argparse.ArgumentParser(prog="bench_fleet.py replica")
    ap.add_argument("--config", required=True)
    ap.add_argument("--starts", required=True, help="file the runner's 'running' lines are appended to")
    ap.add_argument("--config-max-age", type=float, required=True)
    args = ap.parse_args(argv)

    import hoodied.listing
    from hoodied.config import DaemonConfig
    from hoodied.daemon import Daemon
    from hoodied.logs import setup_logging

    if not hasattr(hoodied.listing, "CONFIG_MAX_AGE"):
        raise SystemExit("hoodied.listing.CONFIG_MAX_AGE is gone: the time scale cannot be applied")
    hoodied.listing.CONFIG_MAX_AGE = args.config_max_age  # type: ignore[misc]
    config = DaemonConfig.load(args.config)
    setup_logging(config.logging.level, config.logging.format)
    starts = open(args.starts, "a", encoding="utf-8", buffering=1)  # noqa: SIM115 (open for the process)

    class Starts(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            a = record.args if isinstance(record.args, tuple) else ()
            if isinstance(record.msg, str) and record.msg.startswith("running ") and len(a) >= 3:
                starts.write(
                    json.dumps({"table": str(a[2]), "instant": str(a[1]), "at": record.created}) + "\n"
                )

    logging.getLogger("hoodied.runner").addHandler(Starts(logging.INFO))
    logging.getLogger("bench_fleet").info("hoodied imported from %s", hoodied.listing.__file__)

    class DriverDaemon(Daemon):
        def spark(self) -> Any:
            """No session: the runner runs a job's tasks on the driver's threads."""
            self.heartbeats.spark_up = True
            return None

    return DriverDaemon(config).run()


# -- the processes ------------------------------------------------------------------------------------------


@dataclass
class Replica:
    """One replica's process (``bench_fleet.py replica``, a process group of its own), its port, files."""

    name: str
    port: int
    config: Path
    log: Path
    starts: Path
    proc: subprocess.Popen[bytes] | None = None

    def cpu_seconds(self) -> float:
        """utime + stime of the replica's process (``/proc/<pid>/stat``, fields 14 and 15)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)

    def starts_seen(self) -> dict[tuple[str, str], float]:
        out: dict[tuple[str, str], float] = {}
        with contextlib.suppress(FileNotFoundError):
            for line in self.starts.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError, KeyError):
                    r = json.loads(line)
                    out[(r["table"], r["instant"])] = float(r["at"])
        return out


def stop_all(replicas: Sequence[Replica], grace: float = 10.0) -> None:
    """SIGTERM to every replica (a drain), then SIGKILL to those still running after ``grace`` seconds."""
    for r in replicas:
        r.kill(signal.SIGTERM)
    deadline = time.monotonic() + grace
    for r in replicas:
        if r.proc is None:
            continue
        try:
            r.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            r.kill(signal.SIGKILL)
            r.proc.wait(timeout=30)


@dataclass
class Setup:
    """What every phase shares: the servers, the fleet, the scaled intervals."""

    args: argparse.Namespace
    work: Path
    server: FleetS3
    zk: ZooKeeperServer
    proxy: FaultProxy
    env: dict[str, str]
    uris: list[str]  # the fleet's tables (not the two of step 4)
    extra_uris: dict[str, str]
    queues: list[str] = field(default_factory=list)  # one per replica
    shared_queue: str | None = None  # the last bucket's events, read by every replica
    shared_bucket: str | None = None
    started: list[Replica] = field(default_factory=list)  # every replica started, killed at the end

    @property
    def speed(self) -> float:
        return float(self.args.speed)

    @property
    def poll(self) -> float:
        return BASE_POLL / self.speed

    @property
    def sweep(self) -> float:
        return BASE_SWEEP / self.speed


def server_key(uri: str) -> str:
    """How the fleet's server names a table: ``bucket/folder``."""
    return uri.removeprefix("s3://")


def _s3(setup: Setup, service: str) -> Any:
    return boto3.client(service, endpoint_url=setup.server.endpoint, region_name=REGION)


def add_extra_tables(setup: Setup, template: Path) -> None:
    """The two tables of step 4, each in a bucket of its own (uploaded object by object: 15 files each)."""
    s3 = _s3(setup, "s3")
    for name in EXTRA:
        bucket = f"bench-{name}"
        s3.create_bucket(Bucket=bucket)
        for p in sorted(template.rglob("*")):
            if p.is_file():
                s3.put_object(
                    Bucket=bucket, Key=f"{name}/{p.relative_to(template).as_posix()}", Body=p.read_bytes()
                )
        setup.extra_uris[name] = f"s3://{bucket}/{name}"


def add_notifications(setup: Setup, replicas: int) -> None:
    """Every fleet bucket's events under each table's ``.hoodie/`` to one SNS topic, fanned out to one SQS
    queue per replica with raw delivery (the body is S3's event, as a queue configuration sends it)."""
    sns, sqs, s3 = _s3(setup, "sns"), _s3(setup, "sqs"), _s3(setup, "s3")
    topic = sns.create_topic(Name="fleet-timelines")["TopicArn"]
    for r in range(replicas):
        url = sqs.create_queue(QueueName=f"fleet-r{r}")["QueueUrl"]
        arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=arn, Attributes={"RawMessageDelivery": "true"})
        setup.queues.append(url)
    by_bucket: dict[str, list[str]] = {}
    for uri in setup.uris:
        bucket, folder = server_key(uri).split("/", 1)
        by_bucket.setdefault(bucket, []).append(folder)
    if len(by_bucket) > 1:  # the last bucket's events go to one queue every replica reads
        setup.shared_bucket = list(by_bucket)[-1]
        setup.shared_queue = sqs.create_queue(QueueName="fleet-shared")["QueueUrl"]
        shared_arn = sqs.get_queue_attributes(QueueUrl=setup.shared_queue, AttributeNames=["QueueArn"])
    events = ["s3:ObjectCreated:*", "s3:ObjectRemoved:*"]
    for bucket, folders in by_bucket.items():
        rules = [
            {
                "Id": f"{folder}-timeline",
                "Events": events,
                "Filter": {"Key": {"FilterRules": [{"Name": "prefix", "Value": f"{folder}/.hoodie/"}]}},
            }
            for folder in folders
        ]
        if bucket == setup.shared_bucket:
            arn = shared_arn["Attributes"]["QueueArn"]
            configuration = {"QueueConfigurations": [{**r, "QueueArn": arn} for r in rules]}
        else:
            configuration = {"TopicConfigurations": [{**r, "TopicArn": topic} for r in rules]}
        s3.put_bucket_notification_configuration(Bucket=bucket, NotificationConfiguration=configuration)
    for url in [*setup.queues, *([setup.shared_queue] if setup.shared_queue else [])]:
        sqs.purge_queue(QueueUrl=url)  # the test events of the configurations


def write_config(setup: Setup, replica: Replica, *, notifications: bool) -> None:
    """The replica's configuration file (YAML; JSON is YAML)."""
    s = setup
    tables: list[dict[str, Any]] = [{"path": u} for u in s.uris]
    tables.append({"path": s.extra_uris["gone"], "name": "gone"})
    tables.append(
        {
            "path": s.extra_uris["slow"],
            "name": "slow",
            "storage_options": {"endpoint": s.proxy.endpoint, "allow_http": "true"},
        }
    )
    index = int(replica.name.rsplit("-", 1)[1])
    config: dict[str, Any] = {
        "replica": replica.name,
        "poll_interval": f"{s.poll:g}s",
        "reschedule_interval": f"{BASE_RESCHEDULE / s.speed:g}s",
        "zookeeper": {"connect": s.zk.connect, "session_timeout": f"{s.args.session_timeout:g}s"},
        "spark": {"fair_pools": False, "max_concurrent_jobs": 2},
        "metrics": {"host": "127.0.0.1", "port": replica.port},
        "admin": {"state_dir": str(s.work / "state")},
        "jobs": {"shutdown_grace": "5s"},
        "defaults": {"change_notifications": notifications},
        "tables": tables,
    }
    if notifications:
        config["notifications"] = {
            "sweep_interval": f"{s.sweep:g}s",
            "s3_sqs": [
                {"queue_url": q, "region": REGION, "endpoint": s.server.endpoint}
                for q in [s.queues[index], *([s.shared_queue] if s.shared_queue else [])]
            ],
        }
    replica.config.write_text(json.dumps(config), encoding="utf-8")


def start_replicas(setup: Setup, phase: str, *, notifications: bool) -> list[Replica]:
    replicas = []
    for r in range(setup.args.replicas):
        folder = setup.work / phase
        folder.mkdir(exist_ok=True)
        replica = Replica(
            f"replica-{r}", free_port(), folder / f"r{r}.json", folder / f"r{r}.log", folder / f"r{r}.starts"
        )
        write_config(setup, replica, notifications=notifications)
        command = [
            sys.executable,
            __file__,
            "replica",
            "--config",
            str(replica.config),
            "--starts",
            str(replica.starts),
            "--config-max-age",
            f"{BASE_CONFIG_MAX_AGE / setup.speed:g}",
        ]
        with replica.log.open("wb") as out:
            replica.proc = subprocess.Popen(
                command, stdout=out, stderr=subprocess.STDOUT, env=setup.env, start_new_session=True
            )
        replicas.append(replica)
        setup.started.append(replica)
    return replicas


# -- what the server saw -----------------------------------------------------------------------------------


class Seen:
    """A snapshot of the server's counts: by kind, and per table (requests, LIST times)."""

    def __init__(self, server: FleetS3) -> None:
        self.at = time.time()
        self.kinds = server.requests()
        self.tables = server.tables()

    def requests(self, key: str) -> int:
        return self.tables.get(key, (0, []))[0]

    def lists(self, key: str) -> list[float]:
        return self.tables.get(key, (0, []))[1]


def wait_warm(setup: Setup, keys: Sequence[str], polls: int, since: float, what: str, timeout: float) -> Seen:
    """Wait until the server saw ``polls`` LISTs of every table in ``keys`` since ``since`` (each table's
    interval then reached its ceiling), printing progress; returns the last snapshot."""
    began = time.time()
    while True:
        seen = Seen(setup.server)
        counts = [sum(1 for t in seen.lists(k) if t >= since) for k in keys]
        done = sum(1 for c in counts if c >= polls)
        if done == len(keys):
            print(f"  warm ({what}): every table listed {polls} times, {time.time() - began:.0f} s")
            return seen
        if time.time() - began > timeout:
            raise RuntimeError(
                f"warm-up ({what}) not done after {timeout:.0f} s: {done} of {len(keys)} tables"
            )
        print(
            f"  warming up ({what}): {done} of {len(keys)} tables listed {polls} times, "
            f"fewest {min(counts)}, {time.time() - began:.0f} s",
            flush=True,
        )
        time.sleep(min(30.0, max(5.0, setup.poll)))


def polls_to_ceiling(base: float, ceiling: float) -> int:
    """The polls after which a quiet table's interval is at its ceiling (the first poll sets the base)."""
    intervals, interval = PollIntervals(base, ceiling), None
    n = 0
    while interval is None or interval < ceiling:
        interval = intervals.after(interval, quiet=True)
        n += 1
    return n


@dataclass
class Window:
    """Requests and CPU over one window of the fleet's idle time."""

    seconds: float
    per_table_hour: float  # at the defaults (x speed)
    s3_kinds: dict[str, int]
    queue_requests: int  # SQS and SNS, the whole run
    cpu_shares: list[float]  # % of one core, per replica, as measured
    gaps: list[float]  # seconds between consecutive LISTs of one table (the idle tables), as measured
    idle_tables: int
    lists: dict[str, int]  # per idle table, its LISTs in the window
    by_table: dict[str, list[float]]  # per idle table, its gaps (inf: a poll later than the rule allows)


def gauge(replica: Replica, name: str) -> float:
    """The value of an unlabelled gauge on the replica's ``/metrics`` (NaN when absent)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{replica.port}/metrics", timeout=60) as reply:
        for line in reply.read().decode().splitlines():
            if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
                return float(line.rsplit(" ", 1)[1])
    return float("nan")


def interval_gauges(replicas: Sequence[Replica]) -> dict[str, float]:
    """``hoodied_table_poll_interval_seconds`` per table, from the live replicas' ``/metrics`` (a table's
    owner exports it; the others forget it)."""
    out: dict[str, float] = {}
    prefix = 'hoodied_table_poll_interval_seconds{table="'
    for r in replicas:
        if not r.alive():
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{r.port}/metrics", timeout=60) as reply:
            text = reply.read().decode()
        for line in text.splitlines():
            if line.startswith(prefix):
                out[line[len(prefix) :].split('"', 1)[0]] = float(line.rsplit(" ", 1)[1])
    return out


def table_gaps(
    seen: Seen, keys: Sequence[str], since: float, skip: int, until: float, late_after: float
) -> dict[str, list[float]]:
    """Per table, the seconds between consecutive LISTs in ``[since, until]`` after its first ``skip``
    ones, and ``inf`` for its next poll when none came though ``late_after`` seconds passed since its last
    (or since ``since``) by ``until``: a poll held up counts, though it did not come in the window."""
    out: dict[str, list[float]] = {}
    for k in keys:
        times = [t for t in seen.lists(k) if since <= t <= until][skip:]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        if until - (times[-1] if times else since) > late_after:
            gaps.append(math.inf)
        out[k] = gaps
    return out


def measure_window(
    setup: Setup,
    replicas: Sequence[Replica],
    keys: Sequence[str],
    seconds: float,
    label: str,
    *,
    since: float,
    polls: int,
    late_after: float,
) -> Window:
    """Count the server's requests and the replicas' CPU over ``seconds``; the poll gaps at the ceiling
    are those since ``since`` after each table's first ``polls`` LISTs (:func:`table_gaps`)."""
    cpu0 = [r.cpu_seconds() for r in replicas]
    before = Seen(setup.server)
    time.sleep(seconds)
    after = Seen(setup.server)
    cpu1 = [r.cpu_seconds() for r in replicas]
    wall = after.at - before.at
    s3 = sum(after.requests(k) - before.requests(k) for k in keys)
    kinds = {k: after.kinds.get(k, 0) - before.kinds.get(k, 0) for k in after.kinds}
    queue = kinds.pop("SQS", 0) + kinds.pop("SNS", 0)
    # The queues' long polls wait 20 s of real time (not scaled), and cost per replica, not per table: their
    # share is counted per real hour, divided among the target's 10,000 tables (or more, when larger).
    queue_hour = queue / wall * 3600 / max(TARGET_TABLES, len(keys) + len(EXTRA))
    counted_hour = s3 / len(keys) / (wall * setup.speed) * 3600 + queue_hour
    # A table's gaps at its ceiling: after its first ``polls`` LISTs, the ``polls``-th put its interval at the
    # ceiling, unless the table changed hands while the replicas joined (its new owner polls it at once, at
    # the base interval again: one LIST more), so the gap after that one is skipped too.
    by_table = table_gaps(after, keys, since, polls, after.at, late_after)
    gaps = [g for k in keys for g in by_table[k] if g != math.inf]
    shares = [(c1 - c0) / wall * 100 for c0, c1 in zip(cpu0, cpu1, strict=True)]
    lists = {k: sum(1 for t in after.lists(k) if before.at <= t <= after.at) for k in keys}
    kinds = {k: v for k, v in kinds.items() if v}
    per_poll = s3 / max(1, sum(lists.values()))
    spaced_hour = float("nan")
    if gaps:
        spaced_hour = per_poll * 3600 / (statistics.fmean(gaps) * setup.speed) + queue_hour
    per_hour = spaced_hour if gaps else counted_hour
    w = Window(wall, per_hour, kinds, queue, shares, gaps, len(keys), lists, by_table)
    print(
        f"  window ({label}): {wall:.0f} s = {wall * setup.speed / 60:.1f} min at the defaults; requests of "
        f"the {len(keys)} idle tables {s3} ({_rate(s3, wall)}; {per_poll:.2f} a poll), the whole server by "
        f"kind {w.s3_kinds}, SQS+SNS {queue} ({queue / wall * 3600:.0f} an hour: {queue_hour:.3f} a table an "
        f"hour of {max(TARGET_TABLES, len(keys) + len(EXTRA))} tables)"
    )
    if gaps:
        mean_gap = statistics.fmean(gaps)
        print(
            f"  poll spacing of a table at its ceiling (consecutive LISTs since the warm-up, {len(gaps)} "
            f"gaps): median {statistics.median(gaps):.1f} s, mean {mean_gap:.1f} s (x {setup.speed:g} = "
            f"{mean_gap * setup.speed:.0f} s at the defaults)"
        )
    print(
        f"  requests per idle table per hour at the defaults: {spaced_hour:.2f} from the spacing (= S3 "
        f"requests a poll x 3600 / (mean gap x {setup.speed:g}) + SQS/SNS), {counted_hour:.2f} counted in "
        f"the window (= S3 requests / tables / ({wall:.0f} s x {setup.speed:g}) x 3600 + SQS/SNS: right "
        "after the warm-up the tables' polls are still in step, so a window cuts their cycles unevenly)"
    )
    print(
        "  CPU share of one core per replica (measured): "
        + ", ".join(f"{r.name} {s:.2f} %" for r, s in zip(replicas, shares, strict=True))
        + f"; at the defaults (/ {setup.speed:g}): "
        + ", ".join(f"{s / setup.speed:.2f} %" for s in shares)
    )
    return w


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:.1f}/s" if seconds > 0 else "n/a"


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


# -- step 1: start latency ----------------------------------------------------------------------------------


def start_latencies(
    setup: Setup, replicas: Sequence[Replica], tables: Sequence[str], timeout: float
) -> list[float]:
    """Request a compaction on each of ``tables`` in turn; the seconds from the requested file written to
    its job's start on any replica (NaN: no start within ``timeout``)."""
    out: list[float] = []
    for n, uri in enumerate(tables):
        storage = Storage.for_uri(uri)
        instant = schedule_compaction(storage, lock_for_table(storage, {})).instant
        written = time.time()
        assert instant is not None, "the template has a deltacommit to compact"
        key = (uri.rsplit("/", 1)[1], instant.time)
        started = None
        while time.time() - written < timeout:
            for r in replicas:
                started = r.starts_seen().get(key, started)
            if started is not None:
                break
            time.sleep(0.02)
        out.append(float("nan") if started is None else started - written)
        if started is None:
            print(f"  try {n + 1}: {key[0]} {key[1]} did not start within {timeout:.0f} s")
        if (n + 1) % 10 == 0:
            done = [x for x in out if x == x]
            print(
                f"  {n + 1} tries: median {statistics.median(done) if done else float('nan'):.2f} s",
                flush=True,
            )
        time.sleep(0.5)  # its job runs meanwhile on the driver
    return out


# -- the run -----------------------------------------------------------------------------------------------


def derived_delays(gaps: Sequence[float], speed: float, draws: int = 200_000) -> tuple[float, float]:
    """p50 and p99 of the wait of a change made at a random moment for the next poll, at the defaults: the
    moment falls in a gap with a chance proportional to its length, uniformly within it."""
    if not gaps:
        return float("nan"), float("nan")
    rng = random.Random(34)
    picked = rng.choices(gaps, weights=gaps, k=draws)
    waits = sorted(g * rng.random() * speed for g in picked)
    return percentile(waits, 0.5), percentile(waits, 0.99)


def phase_events(setup: Setup, keys: list[str], verdicts: list[bool]) -> list[Replica]:
    args = setup.args
    print(f"== 1. change notifications (S3 -> SNS -> a queue per replica), {len(keys)} tables")
    t0 = time.time()
    replicas = start_replicas(setup, "events", notifications=True)
    polls = polls_to_ceiling(setup.poll, setup.sweep)
    wait_warm(setup, keys, polls, t0, f"sweep {setup.sweep:g} s after {polls} polls", args.warm_timeout)
    late = setup.sweep + 1.5 * setup.poll
    window = measure_window(
        setup, replicas, keys, setup.sweep, "one sweep", since=t0, polls=polls, late_after=late
    )
    verdicts.append(
        targets.check(
            f"{len(keys)} idle S3 tables, 3 replicas, notifications: requests per table per hour",
            window.per_table_hour,
            REQUESTS_WITH_EVENTS_LIMIT,
            unit="",
        )
    )
    worst = max(window.cpu_shares) / setup.speed
    scaled = worst * TARGET_TABLES / len(keys)
    print(
        f"  the busiest replica: {max(window.cpu_shares):.2f} % measured, {worst:.2f} % at the defaults, "
        f"{scaled:.2f} % scaled to 10,000 tables (linear in the tables: polls and listings are per table)"
    )
    verdicts.append(
        targets.check(
            f"{len(keys)} idle S3 tables, notifications: CPU share per replica at the defaults, scaled to "
            "10,000 tables",
            scaled,
            CPU_SHARE_LIMIT,
            unit="%",
            strict=True,
        )
    )
    own = [u for u in setup.uris if server_key(u).split("/", 1)[0] != setup.shared_bucket]
    shared = [u for u in setup.uris if server_key(u).split("/", 1)[0] == setup.shared_bucket]
    if args.tries:
        chosen = random.Random(7).sample(own, min(args.tries, len(own)))
        print(f"  {len(chosen)} compactions requested one after another on idle tables:")
        lat = start_latencies(setup, replicas, chosen, 2 * setup.sweep + 30)
        done = [x for x in lat if x == x]
        p99 = percentile(lat, 0.99) if len(done) == len(lat) else float("nan")
        if done:
            print(
                f"  start latency: p50 {percentile(done, 0.5):.2f} s, p90 {percentile(done, 0.9):.2f} s, "
                f"p99 {percentile(done, 0.99):.2f} s, max {max(done):.2f} s "
                f"({len(lat) - len(done)} never started)"
            )
        verdicts.append(
            targets.check(
                f"compaction requested on an idle S3 table: p99 start over {len(lat)} tries",
                p99,
                START_LIMIT,
                unit=" s",
            )
        )
    if args.shared_tries and shared:
        chosen = random.Random(8).sample(shared, min(args.shared_tries, len(shared)))
        print(
            f"  {len(chosen)} compactions requested on tables of {setup.shared_bucket}, whose events go to "
            f"one queue all replicas read (each waited for {SHARED_WAIT:g} s):"
        )
        lat = start_latencies(setup, replicas, chosen, SHARED_WAIT)
        done = [x for x in lat if x == x]
        print(
            f"  one shared queue: {len(done)} of {len(lat)} started within {SHARED_WAIT:g} s "
            f"({', '.join(f'{x:.2f} s' for x in done)}); the others wait for their table's sweep: SQS hands "
            "a message to one reader, and a replica that reads the event of a table another replica polls "
            "drops it (services/hoodied/poller.py, _take_events and the 'not table.owned' skip in poll)"
        )
    return replicas


def kill_one(setup: Setup, replicas: list[Replica], verdicts: list[bool]) -> None:
    args = setup.args
    victim = replicas[0]
    members = [r.name for r in replicas]
    uris = [*setup.uris, *setup.extra_uris.values()]
    theirs = [u for u in uris if owner_of(table_key(table_identity(u, {})), members) == victim.name]
    print(f"== 2. {victim.name} killed (SIGKILL); it polled {len(theirs)} of {len(uris)} tables")
    killed = time.time()
    victim.kill()
    assert victim.proc is not None
    victim.proc.wait(timeout=30)
    limit = args.session_timeout + setup.poll
    first: dict[str, float] = {}
    while time.time() - killed < 3 * limit + 120 and len(first) < len(theirs):
        seen = Seen(setup.server)
        for u in theirs:
            later = [t for t in seen.lists(server_key(u)) if t > killed]
            if later and u not in first:
                first[u] = min(later)
        time.sleep(1.0)
    took = sorted(t - killed for t in first.values())
    everything = took[-1] if len(took) == len(theirs) and took else float("nan")
    if took:
        print(
            f"  its tables listed by the others: first after {took[0]:.1f} s, half after "
            f"{percentile(took, 0.5):.1f} s, all {len(took)} of {len(theirs)} after {took[-1]:.1f} s "
            f"(session timeout {args.session_timeout:g} s, poll interval {setup.poll:g} s)"
        )
    owned = [gauge(r, "hoodied_tables_owned") for r in replicas if r.alive()]
    print(f"  hoodied_tables_owned of the others now: {', '.join(f'{v:g}' for v in owned)} ({sum(owned):g})")
    verdicts.append(
        targets.check(
            f"replica killed: all its {len(theirs)} tables polled by the others (limit: session timeout "
            f"{args.session_timeout:g} s + one poll interval {setup.poll:g} s)",
            everything,
            limit,
            unit=" s",
        )
    )


def phase_adaptive(setup: Setup, keys: list[str], verdicts: list[bool]) -> list[Replica]:
    args = setup.args
    ceiling = 10 * setup.poll  # poll_interval_max's default
    print(f"== 3. no notifications: adaptive polling up to {ceiling:g} s, {len(keys)} tables")
    t0 = time.time()
    replicas = start_replicas(setup, "adaptive", notifications=False)
    polls = polls_to_ceiling(setup.poll, ceiling)
    wait_warm(setup, keys, polls, t0, f"ceiling {ceiling:g} s after {polls} polls", args.warm_timeout)
    late = ceiling + 1.5 * setup.poll  # the longest wait at the ceiling, one pass, and half a pass
    window = measure_window(
        setup, replicas, keys, 2 * ceiling, "two ceilings", since=t0, polls=polls, late_after=late
    )
    verdicts.append(
        targets.check(
            f"{len(keys)} idle S3 tables, 3 replicas, adaptive polling: requests per table per hour",
            window.per_table_hour,
            REQUESTS_ADAPTIVE_LIMIT,
            unit="",
        )
    )
    names = {k.rsplit("/", 1)[1] for k in keys}
    healthy_gauges = [v for t, v in interval_gauges(replicas).items() if t in names]
    p50, p99 = derived_delays(window.gaps, setup.speed)
    print(
        f"  delay before new work on a table idle for an hour is picked up, at the defaults (derived from "
        f"{len(window.gaps)} measured poll gaps x {setup.speed:g}; the job's start after the poll not "
        f"included): p50 {p50:.0f} s, p99 {p99:.0f} s"
    )
    if args.skip_faults:
        return replicas
    print(f"== 4. gone's bucket deleted, every request of slow held {args.slow_delay:g} s")
    s3 = _s3(setup, "s3")
    gone_bucket = server_key(setup.extra_uris["gone"]).split("/", 1)[0]
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=gone_bucket):
        for obj in page.get("Contents", []):
            s3.delete_object(Bucket=gone_bucket, Key=obj["Key"])
    s3.delete_bucket(Bucket=gone_bucket)
    setup.proxy.inject(kind="slow", delay=args.slow_delay)
    turned = time.time()  # the gaps of the second window: both of their polls after this
    bad = measure_window(
        setup, replicas, keys, 2 * ceiling, "with the bad tables", since=turned, polls=0, late_after=late
    )
    # Per replica, the gaps between two polls of its other tables, a poll later than the rule allows
    # counted as an endless gap (module doc), with the bad tables against the healthy window.
    members = [r.name for r in replicas]
    owners = {k: owner_of(table_key(table_identity(f"s3://{k}", {})), members) for k in keys}
    holds = {n: owner_of(table_key(table_identity(setup.extra_uris[n], {})), members) for n in EXTRA}
    ratios: list[float] = []
    for r in replicas:
        mine = [k for k in keys if owners[k] == r.name]
        a = [g for k in mine for g in window.by_table[k]]
        b = [g for k in mine for g in bad.by_table[k]]
        if not a or not b:
            continue
        ratios.append(statistics.median(b) / statistics.median(a))
        also = "".join(f", and {n}" for n, o in holds.items() if o == r.name)
        print(
            f"  {r.name} ({len(mine)} tables{also}): gap between two polls of a table, median "
            f"{statistics.median(a):.1f} s healthy, {statistics.median(b):.1f} s with the bad tables (ratio "
            f"{ratios[-1]:.3f}); p95 {percentile(a, 0.95):.1f} s and {percentile(b, 0.95):.1f} s; polls "
            f"later than {late:g} s: {a.count(math.inf)} of {len(a)} and {b.count(math.inf)} of {len(b)}"
        )
    ratio = max(ratios) if ratios and all(x == x for x in ratios) else float("nan")
    if window.gaps and bad.gaps:
        print(
            f"  gaps between two polls of a table, median: {statistics.median(window.gaps):.1f} s healthy, "
            f"{statistics.median(bad.gaps):.1f} s with the bad tables (both polls after the change); p95 "
            f"{percentile(window.gaps, 0.95):.1f} s vs {percentile(bad.gaps, 0.95):.1f} s"
        )
    bad_gauges = [v for t, v in interval_gauges(replicas).items() if t in names]
    if healthy_gauges and bad_gauges:
        print(
            f"  hoodied_table_poll_interval_seconds of the other tables: median "
            f"{statistics.median(healthy_gauges):g} s of {len(healthy_gauges)} healthy, "
            f"{statistics.median(bad_gauges):g} s of {len(bad_gauges)} with the bad tables; at the "
            f"ceiling {sum(1 for v in healthy_gauges if v >= ceiling)} and "
            f"{sum(1 for v in bad_gauges if v >= ceiling)}"
        )
    gone = Seen(setup.server)
    for name in EXTRA:
        key = server_key(setup.extra_uris[name])
        print(f"  {name}: {gone.requests(key)} requests in all, LISTs at {_ago(gone.lists(key))}")
    verdicts.append(
        targets.check(
            "a gone bucket and a slow store: the other tables' poll spacing (median gap), bad / healthy "
            "(worst replica)",
            ratio,
            SPACING_RATIO_LIMIT,
            unit="",
        )
    )
    return replicas


def _ago(times: Sequence[float]) -> str:
    now = time.time()
    return ", ".join(f"-{now - t:.0f} s" for t in times[-6:]) or "none"


def run(args: argparse.Namespace) -> bool:
    verdicts: list[bool] = []
    work = Path(tempfile.mkdtemp(prefix="hoodied-bench-fleet-"))
    server = zk = proxy = None
    setup: Setup | None = None
    try:
        template = work / "template"
        build_template(template)
        t0 = time.perf_counter()
        server = FleetS3(work, template, args.tables, PER_BUCKET)
        server.start()
        env = {
            **os.environ,
            **server.environment(),
            "AWS_EC2_METADATA_DISABLED": "true",
            "PYTHONUNBUFFERED": "1",
        }
        os.environ.update(env)
        zk = ZooKeeperServer(work / "zookeeper")
        zk.start()
        proxy = FaultProxy(server.endpoint).start()
        setup = Setup(args, work, server, zk, proxy, env, list(server.uris), {})
        add_extra_tables(setup, template)
        add_notifications(setup, args.replicas)
        print(
            f"fleet: {args.tables} tables in {len({bucket_of(i, PER_BUCKET) for i in range(args.tables)})} "
            f"buckets (the shared queue's: {setup.shared_bucket}), and {len(EXTRA)} of step 4, built in "
            f"{time.perf_counter() - t0:.0f} s (untimed); "
            f"time x {args.speed:g}: poll_interval {setup.poll:g} s, sweep {setup.sweep:g} s, "
            f"ceiling {10 * setup.poll:g} s"
        )
        keys = [server_key(u) for u in setup.uris]
        replicas = phase_events(setup, keys, verdicts)
        if not args.skip_kill:
            kill_one(setup, replicas, verdicts)
        stop_all(replicas)
        replicas = phase_adaptive(setup, keys, verdicts)
        stop_all(replicas)
    finally:
        for r in setup.started if setup is not None else []:
            r.kill()
        for stop in (proxy.stop if proxy else None, zk.stop if zk else None, server.stop if server else None):
            if stop is not None:
                with contextlib.suppress(Exception):
                    stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return all(verdicts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["replica"]:
        return replica_main(argv[1:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=10_000)
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--speed", type=float, default=1.0, help="the daemon's idle clocks run this much faster")
    ap.add_argument("--tries", type=int, default=100, help="compactions requested (start latency)")
    ap.add_argument(
        "--shared-tries", type=int, default=6, help="compactions requested on the shared queue's bucket"
    )
    ap.add_argument("--session-timeout", type=float, default=30.0, help="ZooKeeper's, seconds (not scaled)")
    ap.add_argument("--slow-delay", type=float, default=20.0, help="seconds each request of 'slow' is held")
    ap.add_argument("--warm-timeout", type=float, default=1800.0)
    ap.add_argument("--skip-kill", action="store_true")
    ap.add_argument("--skip-faults", action="store_true")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, configs)")
    args = ap.parse_args(argv)
    if args.replicas < 2:
        ap.error("--replicas: at least 2")
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    print(f"hoodied from {Path(sys.modules[owner_of.__module__].__file__ or '?').parent}")
    started = time.perf_counter()
    run(args)
    print(f"benchmark run in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
