"""What one replica costs with a very large fleet of idle tables whose writers announce their commits, and
whether its status still answers: issue 34's "100,000 registered tables on one replica (local disk,
notifications through the commit callback)".

    python benchmarks/bench_fleet_local.py [--tables 100000] [--register tables|discover] [--idle-minutes 3]
                                           [--requests 10] [--request-budget 120] [--trials 3]
                                           [--no-metrics] [--work DIR] [--profile DIR]

The fleet: TABLES copies of ``bench_poll``'s small MOR table (version 8, 15 files on its timeline), built
untimed on local disk as hard links (7 folders and 20 links a table), 1,000 tables a folder
(``<work>/fleet/g000/t000000``); the TRIALS tables a writer commits to are real copies, so that its commits
touch no other table's files. One replica watches them, registered by one ``tables`` entry each (parsed
at start-up in about 1 ms a table; ``--register discover``: one ``discover`` root, whose scan is quadratic in
the tables it finds, see below), every table with ``change_notifications: true`` and
``notifications.commit_callback_key_file`` set: a table is listed when a commit callback names it,
else by the safety sweep (``notifications.sweep_interval``, 10 minutes; a quiet table's interval doubles from
``poll_interval`` up to it, so the sweep is reached about 15 minutes after the start). The replica is
``hoodied run`` in a process of its own (:class:`hoodied.daemon.Daemon`, its signals handled, the health
server on 127.0.0.1 at a free port, the rest of the configuration the defaults), except Spark: no session is
started, as ``bench_poll`` runs it (a job would run on the driver's threads; none is due here).

Measured, from outside the daemon's process:

1. Cold start: from the process's start to ``/readyz`` answering 200 (asked every 0.25 s: the first poll
   over every table succeeded), and when the server began serving (its log line: imports and
   configuration done). The daemon's resident memory then: ``VmRSS`` and ``VmHWM`` (the peak so far) of
   ``/proc/<pid>/status``.
2. Idle: the daemon's CPU time (``utime + stime`` of ``/proc/<pid>/stat``) over IDLE_MINUTES right after the
   cold start, as a share of one core, in all and per 30 s, with nothing written to any table (the polls
   that still come in that window are those of the intervals doubling towards the sweep, and with
   ``--register discover`` the root's re-scan every ``10 x poll_interval``). Its memory again at the end
   of the window.
3. ``GET /status`` and ``GET /`` (the HTML status page), REQUESTS times each, one after another (fewer,
   three at least, once REQUEST_BUDGET seconds went by): the wall time of each from the request sent to
   the whole answer read (median, max, size). TARGET: the slowest answer of each under 1 s.
4. A commit callback: TRIALS times, a writer upserts 5 rows into one of its tables (a deltacommit, untimed),
   then POSTs ``/api/v1/commits`` as Hudi's ``HoodieWriteCommitHttpCallback`` does (one line of JSON,
   ``HoodieWriteCommitCallbackMessage`` with the commit's write stats, header ``HUDI-CALLBACK-KEY``). The
   latency runs from the POST sent to the daemon's next poll of that table, seen as the first open of the
   table's timeline folder (or of a file in it) by any process after the POST: an inotify watch on the
   folder, set after the commit (a poll of a local table whose folder time changed lists the folder; a
   ``stat`` alone opens nothing). The answer's time and status are reported too. The daemon's own
   ``/metrics`` is read once at the end (its time and size reported) to check that the callbacks were
   counted as announcing a watched table (``hoodied_change_events_total``, counted when a poll takes them)
   and whether a poll no event asked for read one of those commits first
   (``hoodied_sweep_found_changes_total``: a scheduled poll under way when the POST came, whose walk
   reached the table before the event's own poll could start; the latency is then that poll's).

``--profile DIR``: after the daemon stopped, the same fleet polled in this process by the same supervisor
and its status built, each timed (wall, CPU a table) and then under cProfile (``DIR/<step>.prof``, top
functions printed): the cold poll (under tracemalloc instead: what it leaves allocated, by line), a sweep
(every table due a sweep interval later: its ``hoodie.properties`` read and its folder listed again), a
walk (a poll with no table due), the discovery root's scan, ``/status`` as the health server serves it and
the page as the API renders it. Idle, the daemon pays about a sweep per sweep interval, a walk per
``poll_interval`` and a scan per ten of them.

Sizes, on two cores shared with other work (November 2026): 2,000 tables take about 2.5 minutes (a build of
3-9 ms a table, a cold poll of 70-140 tables a second); 25,000 tables about 10 minutes (built in 80 s, the
cold start 190 s, 144 tables a second, 1 GiB resident). 100,000 tables were built in 5.6 minutes, but with
a ``discover`` root the daemon's first poll was still in the root's scan after 3 minutes and 100 s of CPU:
``hoodied.discovery._walk`` looks each folder's identity up in a list of the tables found (``identity in
tables``, twice a folder), about 4.5 ms a look-up at 100,000 tables, so about 15 minutes of CPU a scan, and
the poller scans again every ``10 x poll_interval``. The fleet's folders are removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import ctypes
import json
import os
import pstats
import random
import re
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import targets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

#: Tables a folder of the fleet (no folder holds more entries than this).
GROUP = 1000
#: Hard links made to one file at most (ext4 allows 65,000 a file).
LINKS_A_FILE = 50_000
#: Seconds the answer of GET /status and of the page must stay under.
STATUS_LIMIT = 1.0
#: The key the writers' callbacks carry (the content of notifications.commit_callback_key_file).
CALLBACK_KEY = "bench-fleet-callback-key"
#: Seconds between two samples of the daemon's CPU time while idle.
BUCKET_SECONDS = 30.0
#: Rows each trial's commit upserts.
TRIAL_ROWS = 5


# -- the fleet ---------------------------------------------------------------------------------------------


def table_path(fleet: Path, i: int) -> Path:
    return fleet / f"g{i // GROUP:03d}" / f"t{i:06d}"


def build_fleet(fleet: Path, template: Path, n: int, copies: Sequence[int]) -> list[Path]:
    """``n`` copies of ``template`` under ``fleet``, :data:`GROUP` to a folder, their files hard links
    (nothing rewrites a file of a table in place), except the tables ``copies`` names: real copies, which a
    writer may commit to. A file takes at most :data:`LINKS_A_FILE` links (ext4's limit is 65,000), so every
    that many tables link to a copy of the template of their own. The first folder of each is made here
    (each table its folders made and its files linked, the template walked once); every further full folder
    is ``cp -al`` of that first one (the same links, made by cp without a Python call a file), its tables
    then renamed after their number."""
    folders = sorted(
        str(Path(d).relative_to(template)) for d, _, _ in os.walk(template) if Path(d) != template
    )
    files = sorted(str(Path(d, f).relative_to(template)) for d, _, fs in os.walk(template) for f in fs)
    per_source = LINKS_A_FILE // GROUP * GROUP

    def linked(path: Path, source: Path) -> None:
        os.mkdir(path)
        for d in folders:
            os.mkdir(path / d)
        for f in files:
            os.link(source / f, path / f)

    source, first = template, table_path(fleet, 0).parent
    for i in range(n):
        path = table_path(fleet, i)
        block = i - i % per_source  # the first table linking to ``source``
        if i == block and i:  # a fresh copy of the template to link to
            source = template.with_name(f"{template.name}-{i // per_source}")
            shutil.copytree(template, source)
            first = path.parent
        if i - block < GROUP or i >= n - n % GROUP:  # the block's first folder, and a last partial one
            path.parent.mkdir(parents=True, exist_ok=True)
            linked(path, source)
        elif i % GROUP == 0:  # a full folder like the block's first
            if i % (20 * GROUP) == 0:
                print(f"  {i} tables built", flush=True)
            subprocess.run(["cp", "-al", str(first), str(path.parent)], check=True)
            for j in range(GROUP):
                os.rename(path.parent / table_path(fleet, block + j).name, table_path(fleet, i + j))
    for i in copies:
        shutil.rmtree(table_path(fleet, i))
        shutil.copytree(template, table_path(fleet, i))
    return [table_path(fleet, i) for i in range(n)]


def remove(folder: Path) -> None:
    """``rm -rf folder``: a fleet's millions of links go faster than with :func:`shutil.rmtree`."""
    subprocess.run(["rm", "-rf", "--one-file-system", str(folder)], check=False)


# -- the daemon's process -----------------------------------------------------------------------------------


def serve(config_path: str) -> int:
    """The daemon's process (``--serve``): ``hoodied run --config config_path`` without a Spark session."""
    from hoodie.failpoints import arm_for_children
    from hoodied.config import DaemonConfig
    from hoodied.daemon import Daemon
    from hoodied.logs import setup_logging

    class NoSparkDaemon(Daemon):
        """No Spark session: a job's tasks would run on the driver's threads (``bench_poll`` runs the same
        way); the session counts as up, so ``/readyz`` waits for the first poll alone."""

        def spark(self) -> Any:
            self.heartbeats.spark_up = True
            self.metrics.spark_up.set(1)
            return None

    import hoodied

    arm_for_children()
    config = DaemonConfig.load(config_path)
    setup_logging(config.logging.level, config.logging.format)
    print(f"bench: hoodied from {hoodied.__file__} pid {os.getpid()}", file=sys.stderr, flush=True)
    return NoSparkDaemon(config).run()


def child_environment() -> dict[str, str]:
    """This environment with this checkout's packages importable after any ``PYTHONPATH`` given (as
    ``run_all.py`` sets it), so that the daemon runs the code the benchmark measures."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths += [str(ROOT / "core"), str(ROOT / "services"), str(HERE)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONUNBUFFERED"] = "1"
    return env


class DaemonProcess:
    """``serve(config)`` in a process of its own, its log in ``log``; stopped by its PID."""

    def __init__(self, config: Path, log: Path) -> None:
        self.config = config
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        with open(self.log, "wb") as out:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--serve", str(self.config)],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=child_environment(),
                cwd=ROOT,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_match(self, pattern: str) -> re.Match[str] | None:
        with contextlib.suppress(OSError):
            return re.search(pattern, self.log.read_text(errors="replace"))
        return None

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (the daemon drains and exits), SIGKILL after ``timeout`` s; the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


# -- what /proc says of a process --------------------------------------------------------------------------


def status_kib(pid: int, name: str) -> int | None:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmRSS``, ``VmHWM``)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return None


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far (``/proc/<pid>/stat``, its threads included)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state is fields[0]
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def memory(pid: int) -> str:
    rss, hwm = status_kib(pid, "VmRSS"), status_kib(pid, "VmHWM")
    return f"VmRSS {_mib(rss)}, VmHWM {_mib(hwm)}"


def _mib(kib: int | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.0f} MiB"


# -- HTTP ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    seconds: float  # from the request sent to the whole answer read
    status: int
    body: bytes


def request(url: str, data: bytes | None = None, headers: dict[str, str] | None = None) -> Answer:
    req = urllib.request.Request(url, data=data, headers=headers or {}, method="POST" if data else "GET")
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(req, timeout=600) as reply:
            body, status = reply.read(), reply.status
    except urllib.error.HTTPError as e:
        body, status = e.read(), e.code
    return Answer(time.perf_counter() - started, status, body)


def wait_ready(url: str, daemon: DaemonProcess, timeout: float) -> float | None:
    """Seconds from the daemon's start to its ``/readyz`` answering 200; None when it exited or never did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and daemon.alive():
        try:
            with urllib.request.urlopen(f"{url}/readyz", timeout=5) as reply:
                if reply.status == 200:
                    return time.monotonic() - daemon.started
        except (urllib.error.URLError, OSError):
            pass  # 503 until the first poll succeeded (HTTPError is a URLError); a busy server times out
        time.sleep(0.25)
    return None


# -- a commit and its callback -----------------------------------------------------------------------------

_IN_OPEN = 0x20


class FirstOpen:
    """When a process first opens the folder ``path`` (listing it) or a file in it, from now on: an inotify
    watch read by a thread of its own, which notes the time of the first event."""

    def __init__(self, path: Path) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        if self.fd < 0 or libc.inotify_add_watch(self.fd, str(path).encode(), _IN_OPEN) < 0:
            raise OSError(ctypes.get_errno(), f"inotify on {path}")
        self.at: float | None = None
        self._seen = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._seen.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.5)
            if ready:
                with contextlib.suppress(BlockingIOError):
                    if os.read(self.fd, 4096):
                        self.at = time.perf_counter()
                        self._seen.set()

    def wait(self, timeout: float) -> float | None:
        self._seen.wait(timeout)
        return self.at

    def close(self) -> None:
        self._seen.set()
        self._thread.join()
        os.close(self.fd)


def _bean_option(present: bool) -> dict[str, bool]:
    """Hudi's ``Option`` as its callback's Jackson mapper writes it (a bean: ``empty``, ``present``)."""
    return {"empty": not present, "present": present}


def callback_body(path: Path, table_name: str, result: Any) -> bytes:
    """The ``HoodieWriteCommitCallbackMessage`` Hudi's HTTP callback posts after the commit ``result``:
    one line, its write stats under the Java bean's names."""
    stats = [
        {
            "fileId": s.file_id,
            "path": s.path,
            "prevCommit": s.prev_commit or "null",
            "numWrites": s.num_writes or 0,
            "numDeletes": s.num_deletes or 0,
            "numUpdateWrites": s.num_update_writes or 0,
            "numInserts": s.num_inserts or 0,
            "totalWriteBytes": s.total_write_bytes or 0,
            "totalWriteErrors": s.total_write_errors or 0,
            "partitionPath": s.partition_path,
            "fileSizeInBytes": s.file_size_in_bytes or 0,
            "logVersion": s.log_version or 0,
            "logOffset": s.log_offset or 0,
            "baseFile": s.base_file or "",
            "logFiles": list(s.log_files or ()),
        }
        for s in result.metadata.write_stats
    ]
    message = {
        "commitTime": result.instant_time,
        "tableName": table_name,
        "basePath": str(path),
        "hoodieWriteStat": stats,
        "commitActionType": _bean_option(True),
        "extraMetadata": _bean_option(False),
    }
    return json.dumps(message, separators=(",", ":")).encode()


@dataclass
class Trial:
    table: str
    answer: Answer
    latency: float | None  # seconds from the POST sent to the table's next poll


def commit_and_announce(url: str, path: Path, timeout: float) -> Trial:
    """A writer's commit on the table at ``path`` (untimed), then its callback: the time from the POST to the
    daemon's next poll of the table (module docstring, 4)."""
    from hoodie.config import TableConfig
    from hoodie.storage import Storage
    from hoodie.testing.generate import TripGenerator
    from hoodie.testing.table_writer import TableWriter, WriteConfig
    from hoodie.write.base_file import ParquetOptions

    storage = Storage.for_uri(str(path))
    config = TableConfig.load(storage)
    writer = TableWriter.open(str(path), config=WriteConfig(parquet=ParquetOptions(bloom_num_entries=100)))
    gen = TripGenerator(1, 1)  # bench_poll's template: seed 1, one partition, 20 keys
    result = writer.upsert(gen.rows(gen.keys(20)[:TRIAL_ROWS]))
    body = callback_body(path, config.name, result)
    watch = FirstOpen(path / config.timeline_path)
    try:
        sent = time.perf_counter()
        answer = request(
            f"{url}/api/v1/commits",
            body,
            {"Content-Type": "application/json", "HUDI-CALLBACK-KEY": CALLBACK_KEY},
        )
        opened = watch.wait(timeout)
    finally:
        watch.close()
    return Trial(path.name, answer, None if opened is None else opened - sent)


def metric_values(exposition: str, name: str) -> dict[str, float]:
    """The samples of metric ``name`` in a Prometheus text exposition, by their label text."""
    out = {}
    for line in exposition.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, _, value = line[len(name) :].rpartition(" ")
            out[labels] = float(value)
    return out


# -- the run ------------------------------------------------------------------------------------------------


def daemon_config(work: Path, fleet: Path, paths: Sequence[Path], register: str, key_file: Path) -> str:
    head = (
        "replica: bench\n"
        "metrics: {host: 127.0.0.1, port: 0}\n"
        "spark: {fair_pools: false}\n"
        f"admin: {{state_dir: {work / 'state'}}}\n"
        f"notifications: {{commit_callback_key_file: {key_file}}}\n"
    )
    if register == "discover":
        return head + f"discover:\n  - root: {fleet}\n    change_notifications: true\n"
    tables = "".join(f"  - {p}\n" for p in paths)
    return head + f"defaults: {{change_notifications: true}}\ntables:\n{tables}"


@dataclass
class Figures:
    cold_start: float | None = None
    serving: float | None = None
    status: list[Answer] = field(default_factory=list)
    page: list[Answer] = field(default_factory=list)
    trials: list[Trial] = field(default_factory=list)


def asked(url: str, times: int, budget: float) -> list[Answer]:
    """``GET url`` up to ``times`` times, one after another; fewer (three at least) once ``budget`` seconds
    went by: where one answer takes a minute, ten of them say no more than three."""
    answers: list[Answer] = []
    started = time.monotonic()
    while len(answers) < times and (len(answers) < 3 or time.monotonic() - started < budget):
        answers.append(request(url))
    return answers


def _latencies(name: str, answers: Sequence[Answer]) -> None:
    secs = [a.seconds for a in answers]
    bad = [a.status for a in answers if a.status != 200]
    print(
        f"GET {name}: {len(answers)} requests, median {statistics.median(secs):.3f} s, "
        f"max {max(secs):.3f} s, {len(answers[-1].body) / 1e6:.1f} MB"
        + (f"; answers not 200: {bad}" if bad else "")
    )


def measure(daemon: DaemonProcess, n: int, writable: Sequence[Path], args: argparse.Namespace) -> Figures:
    figures = Figures()
    daemon.start()
    url = None
    deadline = time.monotonic() + 600
    while url is None and time.monotonic() < deadline and daemon.alive():
        found = daemon.log_match(r"serving on (http://127\.0\.0\.1:\d+)")
        if found:
            url = found.group(1)
            figures.serving = time.monotonic() - daemon.started
        else:
            time.sleep(0.1)
    where = daemon.log_match(r"bench: hoodied from (\S+)")
    print(f"daemon pid {daemon.pid}, hoodied from {where.group(1) if where else '?'}")
    if url is None:
        raise RuntimeError(f"the daemon did not serve; its log: {daemon.log}")
    figures.cold_start = wait_ready(url, daemon, args.cold_timeout)
    pid = daemon.pid
    if figures.cold_start is None:
        print(
            f"cold start: the first poll did not succeed within {args.cold_timeout:g} s "
            f"({'the daemon exited' if not daemon.alive() else 'still polling'}); memory {memory(pid)}"
        )
        return figures
    assert figures.serving is not None
    after = figures.cold_start - figures.serving
    print(
        f"cold start: {figures.cold_start:.1f} s to the first complete poll (/readyz 200), "
        f"{figures.serving:.1f} s of it before serving (imports, configuration), "
        f"{after:.1f} s from then ({n / after:.0f} tables a second); the daemon's CPU time so far "
        f"{cpu_seconds(pid):.1f} s"
    )
    print(f"memory after the cold start: {memory(pid)}")

    # 2. idle
    window = args.idle_minutes * 60.0
    c0 = cpu_seconds(pid)
    w0 = last = time.monotonic()
    c_last = c0
    shares = []
    while time.monotonic() - w0 < window - 1e-3:
        time.sleep(max(0.0, min(BUCKET_SECONDS, w0 + window - time.monotonic())))
        c, now = cpu_seconds(pid), time.monotonic()
        shares.append((c - c_last) / (now - last) * 100)
        c_last, last = c, now
    idle_share = (c_last - c0) / (last - w0) * 100
    print(
        f"idle: CPU share of one core over {last - w0:.0f} s after the cold start: {idle_share:.2f} % "
        f"({c_last - c0:.1f} s CPU); per {BUCKET_SECONDS:g} s: " + ", ".join(f"{s:.1f}" for s in shares)
    )
    print(f"memory after {last - w0:.0f} s idle: {memory(pid)} ({memory_per_table(pid, n)})")

    # 3. the status
    figures.status = asked(f"{url}/status", args.requests, args.request_budget)
    _latencies("/status", figures.status)
    figures.page = asked(f"{url}/", args.requests, args.request_budget)
    _latencies("/ (the status page)", figures.page)
    check_targets(figures, n)
    print(f"memory after the status requests: {memory(pid)}")

    # 4. commit callbacks
    for path in writable:
        trial = commit_and_announce(url, path, args.trial_timeout)
        figures.trials.append(trial)
        seen = "not polled" if trial.latency is None else f"polled {trial.latency:.2f} s after the POST"
        print(
            f"commit callback on {trial.table}: answered {trial.answer.status} in "
            f"{trial.answer.seconds * 1000:.0f} ms, {seen}"
        )
    if args.metrics:
        scrape = request(f"{url}/metrics")
        text = scrape.body.decode()
        events = metric_values(text, "hoodied_change_events_total")
        sweeps = metric_values(text, "hoodied_sweep_found_changes_total")
        announced = {t.table for t in figures.trials}
        found_by_sweep = {k: v for k, v in sweeps.items() if any(f'"{t}"' in k for t in announced)}
        print(
            f"GET /metrics: {scrape.seconds:.2f} s, {len(scrape.body) / 1e6:.1f} MB, "
            f"{sum(1 for line in text.splitlines() if line and not line.startswith('#'))} samples; "
            f"change events {events}; sweeps that found the trials' commits first: {found_by_sweep or 'none'}"
        )
    print(f"memory at the end: {memory(pid)}")
    return figures


def check_targets(figures: Figures, n: int) -> None:
    """The ``TARGET`` lines (printed as soon as measured: a later step of a long run may not end)."""
    name = f"fleet of {n} tables on local disk, one replica"
    targets.check(
        f"{name}: slowest GET /status of {len(figures.status)}",
        max((a.seconds for a in figures.status), default=None),
        STATUS_LIMIT,
        unit=" s",
        strict=True,
    )
    targets.check(
        f"{name}: slowest GET of the status page of {len(figures.page)}",
        max((a.seconds for a in figures.page), default=None),
        STATUS_LIMIT,
        unit=" s",
        strict=True,
    )


def report(figures: Figures) -> None:
    """The commit callbacks' latency."""
    latencies = [t.latency for t in figures.trials if t.latency is not None]
    if figures.trials:
        print(
            f"commit callback to the table's next poll ({len(figures.trials)} trials, "
            f"{len(latencies)} polled): "
            + (
                f"median {statistics.median(latencies):.2f} s, max {max(latencies):.2f} s"
                if latencies
                else "n/a"
            )
        )


def memory_per_table(pid: int, n: int) -> str:
    rss = status_kib(pid, "VmRSS")
    return "n/a" if rss is None else f"{rss * 1024 / n / 1000:.1f} kB a table"


def profile_in_process(config_text: str, n: int, out: Path) -> None:
    """The fleet polled and its status served in this process, timed (wall and CPU), then under cProfile
    (module docstring). The supervisor's clock is moved as :class:`bench_poll.ShiftedClock` moves it: a
    sweep is a poll a sweep interval after the last (every table due, its ``hoodie.properties`` read again
    and its folder listed again, the discovery root scanned again), a walk one second after (no table
    due: what every poll between sweeps costs)."""
    from bench_poll import ShiftedClock
    from hoodied.api import Api
    from hoodied.config import DaemonConfig
    from hoodied.control import FileControlStore
    from hoodied.coordination import EmbeddedCoordination
    from hoodied.daemon import Daemon
    from hoodied.discovery import discover
    from hoodied.health import HealthServer
    from hoodied.supervisor import Supervisor

    out.mkdir(parents=True, exist_ok=True)
    config = DaemonConfig.parse(config_text.replace("port: 0", "port: null"))
    daemon = Daemon(config)
    store = FileControlStore(out / "state")
    clock = ShiftedClock()
    supervisor = Supervisor(
        config,
        EmbeddedCoordination(daemon.metrics),
        daemon.metrics,
        daemon.heartbeats,
        lambda: None,  # type: ignore[arg-type,return-value]  # no Spark: nothing runs
        control=store,
        clock=clock,
        events=daemon.events,
    )
    daemon.supervisor = supervisor
    api = Api(
        replica=config.replica,
        status=daemon.status,
        tables=supervisor.tables,
        store=store,
        token_file=None,
        metrics=daemon.metrics,
        history_keep=config.admin.history_keep,
    )
    health = HealthServer(daemon.metrics, daemon.heartbeats, config.poll_interval, status_fn=daemon.status)
    sweep = config.notifications.sweep_interval

    def after(seconds: float) -> Callable[[], object]:
        def poll() -> object:
            clock.shift += seconds
            return supervisor.poll()

        return poll

    steps: list[tuple[str, Callable[[], object], bool]] = [  # name, step, timed before profiled
        ("poll-cold", supervisor.poll, False),
        *((f"poll-{i}", after(config.poll_interval), False) for i in (2, 3)),
        ("poll-sweep", after(sweep), True),
        ("poll-walk", after(1.0), True),
        ("discovery-scan", lambda: [discover(root) for root in config.discover], True),
        ("status-json", lambda: health._get("/status", ""), True),
        ("status-page", lambda: api.get("/", ""), True),
    ]
    for name, step, timed in steps:
        if name == "poll-cold":  # where the memory a table holds goes: what the cold poll leaves allocated
            tracemalloc.start()
            step()
            snapshot = tracemalloc.take_snapshot()
            tracemalloc.stop()
            held = snapshot.statistics("lineno")
            total = sum(stat.size for stat in held)
            print(f"the cold poll left {total / n / 1000:.1f} kB a table allocated (tracemalloc); by line:")
            for stat in held[:15]:
                print(f"  {stat.size / n:8.0f} B a table  {stat.traceback[0]}")
            continue
        if timed:
            wall, cpu = time.perf_counter(), time.process_time()
            step()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"{name}: {wall:.2f} s wall, {cpu:.2f} s CPU; {cpu / n * 1e6:.0f} us CPU a table")
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.runcall(step)
        print(f"profile {name}: {time.perf_counter() - started:.2f} s under cProfile ({out / name}.prof)")
        profile.dump_stats(str(out / f"{name}.prof"))
        stats = pstats.Stats(str(out / f"{name}.prof"))
        stats.sort_stats("tottime").print_stats(12)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tables", type=int, default=100_000)
    ap.add_argument("--register", choices=("discover", "tables"), default="tables")
    ap.add_argument("--idle-minutes", type=float, default=3.0, help="idle window after the cold start")
    ap.add_argument("--requests", type=int, default=10, help="GET /status and GET / each this many times")
    ap.add_argument(
        "--request-budget", type=float, default=120.0, help="seconds after which fewer requests are made"
    )
    ap.add_argument("--trials", type=int, default=3, help="commit callbacks timed")
    ap.add_argument("--trial-timeout", type=float, default=300.0)
    ap.add_argument("--cold-timeout", type=float, default=3600.0, help="seconds allowed to the first poll")
    ap.add_argument("--no-metrics", dest="metrics", action="store_false", help="do not read /metrics")
    ap.add_argument("--work", help="folder for the fleet (default: a temporary one; removed at the end)")
    ap.add_argument("--profile", metavar="DIR", help="profile a poll and the status in-process (slow)")
    ap.add_argument("--serve", metavar="CONFIG", help=argparse.SUPPRESS)  # the daemon's own process
    args = ap.parse_args(argv)
    if args.serve:
        return serve(args.serve)
    from bench_poll import build_template  # (not in the daemon's process: it imports what hoodied does not)

    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # a long run shows as it goes
    started = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix="hoodied-bench-fleet-", dir=args.work))
    daemon: DaemonProcess | None = None
    try:
        template = work / "template"
        build_template(template)
        fleet = work / "fleet"
        copies = sorted(random.Random(34).sample(range(args.tables), min(args.trials, args.tables)))
        t0 = time.perf_counter()
        paths = build_fleet(fleet, template, args.tables, copies)
        built = time.perf_counter() - t0
        print(
            f"fleet: {args.tables} tables in {len(list(fleet.iterdir()))} folders under {fleet}, built in "
            f"{built:.1f} s (untimed; {built / args.tables * 1e3:.2f} ms a table)"
        )
        key_file = work / "callback.key"
        key_file.write_text(CALLBACK_KEY + "\n")
        text = daemon_config(work, fleet, paths, args.register, key_file)
        config = work / "hoodied.yaml"
        config.write_text(text)
        time.sleep(5.0)  # the folders' times old enough to vouch for their listings (QUIET_FOLDER_AGE)
        daemon = DaemonProcess(config, work / "hoodied.log")
        try:
            figures = measure(daemon, args.tables, [paths[i] for i in copies], args)
        finally:
            code = daemon.stop()
            daemon = None
            print(f"daemon stopped (exit code {code})")
        report(figures)
        if args.profile:
            profile_in_process(text, args.tables, Path(args.profile))
    finally:
        if daemon is not None:
            daemon.stop()
        print("removing the fleet ...")
        t0 = time.perf_counter()
        remove(work)
        print(f"fleet removed in {time.perf_counter() - t0:.0f} s")
    print(f"benchmark run in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
