"""``hoodied demo``: the daemon keeping a live table in shape, on one machine, in a couple of minutes.

What it does, in order:

1. Creates a MERGE_ON_READ table (table version 8, ``--partitions`` partitions, a few thousand generated taxi
   trips in three commits) with the format library's table writer, in ``--path`` (default
   ``./hoodied-demo``). A folder that is already there is wiped first only when an earlier demo made it (it
   holds ``.hoodie/.aux/hoodied/demo.yaml``); anything else is refused, never deleted.
2. Starts a writer in a child process (``python -m hoodied.demo writer PATH``) that upserts a batch every
   ``--interval`` seconds (updates of existing trips and new ones; no deletes) until it is told to stop. It
   reports each commit as one JSON line on its standard output. It leaves partitions with a pending
   clustering out of its updates, as Hudi's default update strategy rejects such updates; when a write
   still conflicts with a table service it rolls its own write back and goes on with the next batch.
3. Runs the daemon in this process (:class:`~hoodied.daemon.Daemon`, embedded mode: no ZooKeeper, the
   file-system table lock, Spark ``local[2]``) with a configuration built here: poll every 2 s, schedule
   compaction (after 3 delta commits), clustering (after 4 commits) and clean (2 commits retained) on the
   table. Its configuration is also written to ``.hoodie/.aux/hoodied/demo.yaml``, for ``hoodied status``
   and ``hoodied run`` afterwards. Metrics and health are served on 127.0.0.1, ``--port`` (9464; 0 = a free
   one).
4. Prints what happens as it happens, one line each, time since the start first: the writer's commits, and
   each table-service instant the daemon schedules, runs and finishes (watched through the supervisor's
   state: its pending instants, running jobs and last results). The daemon's own log says only warnings.
5. After ``--duration`` seconds (120), or on Ctrl-C (SIGINT) or SIGTERM: stops the writer (its current
   batch commits first), lets the daemon finish the table services still pending (up to ``--drain-timeout``
   seconds; a second Ctrl-C skips this), stops the daemon (running jobs finish), prints ``hoodied status``
   for the table and a summary: commits written, table services completed, and the rows the table holds
   now (read back with :meth:`hoodie.Table.read`) next to the keys the writers wrote. The exit status is 0
   when everything ran and the two counts agree, 1 otherwise; a folder it may not wipe, a port in use or no
   Java stop it before it starts, with a one-line error and status 2.

``make demo`` installs the package (and Java, when missing) and runs it.

Output, for example::

    [00:04] writer: commit 20261123101502120 upserted 300 rows (200 updates, 100 inserts; total 1 commit, ...)
    [00:09] compaction 20261123101507311: scheduled (4 file slices)
    [00:09] compaction 20261123101507311: running
    [00:12] compaction 20261123101507311: done in 3.1 s: 4 base file(s), 2900 record(s)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from hoodie.clean.execute import plan_files
from hoodie.clustering.plan import clustering_plan_of
from hoodie.errors import HoodieError, WriteConflict
from hoodie.lock import FileSystemLock
from hoodie.registry import SCHEDULABLE
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import CLEAN, CLUSTERING, DELTA_COMMIT, ROLLBACK, State
from hoodie.timeline.metadata import decode_cleaner_plan, decode_compaction_plan
from hoodie.write.failed_writes import FAILED_WRITE_ACTIONS, rollback_failed_write
from hoodied.config import DaemonConfig
from hoodied.daemon import Daemon, format_status, status_report
from hoodied.errors import ServiceError
from hoodied.logs import setup_logging
from hoodied.spark import java_available

if TYPE_CHECKING:
    from hoodied.work import JobOutcome

#: Relative to the table's base path: the demo's configuration, whose presence marks a table the demo made.
MARKER = ".hoodie/.aux/hoodied/demo.yaml"
_MARKER_HEAD = "# hoodied demo:"

DEFAULT_PATH = "./hoodied-demo"
DEFAULT_PORT = 9464
TABLE_NAME = "trips"
SERVICES = SCHEDULABLE  # what the demo schedules

#: The table services' settings: small triggers, so that a couple of minutes show each service at work.
HOODIE_SETTINGS = {
    "hoodie.compact.inline.max.delta.commits": "3",
    "hoodie.clustering.async.max.commits": "4",
    "hoodie.clean.commits.retained": "2",
    "hoodie.clean.max.commits": "1",
}


class DemoError(ServiceError):
    """The demo cannot run as asked (a folder it may not wipe, a port in use...)."""


@dataclass(frozen=True)
class DemoOptions:
    path: str = DEFAULT_PATH
    duration: float = 120.0  # seconds, from the start
    port: int = DEFAULT_PORT  # 0: a free port
    interval: float = 2.0  # seconds between the writer's batches
    batch_rows: int = 300  # rows per batch
    update_fraction: float = 2 / 3  # of a batch: updates of existing trips; the rest are new trips
    partitions: int = 4
    initial_rows: int = 1000  # rows of each set-up commit (3 commits)
    drain_timeout: float = 30.0  # seconds to finish pending table services once the writer stopped
    seed: int = 7


# -- the table ---------------------------------------------------------------------------------------------


def check_path(path: Path) -> bool:
    """Whether ``path`` holds an earlier demo's table (to be wiped); False when it is absent or empty.
    Anything else is refused (:class:`DemoError`)."""
    if not path.exists() and not path.is_symlink():
        return False
    if not path.is_dir() or path.is_symlink():
        raise DemoError(f"{path} exists and is not a folder; choose another --path")
    if not any(path.iterdir()):
        return False
    if not is_demo_table(path):
        raise DemoError(
            f"{path} exists and is not a table an earlier hoodied demo made (no {MARKER}); refusing to "
            "delete it: choose another --path"
        )
    return True


def clear_previous(path: Path) -> None:
    """Make ``path`` ready for a new demo table: absent or empty is fine; an earlier demo's table is deleted;
    anything else is refused (:class:`DemoError`) and left alone."""
    if check_path(path):
        shutil.rmtree(path)


def is_demo_table(path: Path) -> bool:
    marker = path / MARKER
    try:
        with marker.open(encoding="utf-8") as f:
            return f.readline().startswith(_MARKER_HEAD)
    except OSError:
        return False


def daemon_config_text(path: Path, port: int) -> str:
    """The daemon's configuration for the demo, as the YAML a ``hoodied run --config`` file would hold."""
    raw: dict[str, Any] = {
        "replica": "demo",
        "poll_interval": "2s",
        "poll_jitter": 0,
        "reschedule_interval": "10s",
        "spark": {
            "master": "local[2]",
            "max_concurrent_jobs": 2,
            "conf": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        },
        "metrics": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "WARNING"},
        "jobs": {
            "max_attempts": 3,
            "backoff": "2s",
            "backoff_max": "10s",
            "takeover_grace": "10s",
            "shutdown_grace": "60s",
            "lock_timeout": "30s",
        },
        "tables": [
            {
                "path": str(path),
                "name": TABLE_NAME,
                "schedule": list(SERVICES),
                "hoodie": dict(HOODIE_SETTINGS),
            }
        ],
    }
    head = (
        f"{_MARKER_HEAD} the configuration the demo ran the daemon with (this file marks the table as the "
        "demo's).\n# Run the same daemon again: hoodied run --config <this file>\n"
    )
    return head + yaml.safe_dump(raw, sort_keys=False)


def daemon_config(path: Path, port: int) -> DaemonConfig:

    return DaemonConfig.parse(daemon_config_text(path, port), source="hoodied demo")


@dataclass(frozen=True)
class Setup:
    commits: int
    keys: int
    partitions: int


def create_table(path: Path, options: DemoOptions) -> Setup:
    """The demo table: MERGE_ON_READ, version 8, three commits of generated trips (inserts, then upserts)."""
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    # The marker goes first: a set-up that dies half-way still leaves a folder the next demo may wipe.
    marker.write_text(daemon_config_text(path, options.port), encoding="utf-8")
    spec = GenerateSpec(
        table_type="MERGE_ON_READ",
        table_version=8,
        rows=options.initial_rows,
        commits=3,
        update_fraction=0.2,
        delete_fraction=0.0,
        partitions=options.partitions,
        seed=options.seed,
        name=TABLE_NAME,
    )
    results = generate_table(str(path), spec)
    inserts = sum(s.num_inserts or 0 for r in results for s in r.metadata.write_stats)
    return Setup(commits=len(results), keys=inserts, partitions=options.partitions)


# -- the writer (a child process) ----------------------------------------------------------------------------


def _emit(event: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(event, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _stop_at_eof(stop: threading.Event) -> None:
    """The parent stops the writer by closing its standard input (or by dying)."""
    with contextlib.suppress(OSError, ValueError):
        while sys.stdin.readline():
            pass
    stop.set()


def _roll_back_own_writes(storage: Storage) -> list[str]:
    """Roll back this writer's unfinished writes (it is the table's only ingestion writer: any pending
    commit or deltacommit is one of its own), as a Hudi writer does with its failed writes."""

    done = []
    lock = FileSystemLock(storage)
    for instant in Table.load(storage).timeline.pending():
        if instant.action in FAILED_WRITE_ACTIONS and rollback_failed_write(storage, lock, instant):
            done.append(instant.time)
    return done


def writer_main(argv: Sequence[str]) -> int:
    """``python -m hoodied.demo writer PATH``: upsert a batch every ``--interval`` seconds until standard
    input closes or SIGTERM; one JSON line per event on standard output."""

    parser = argparse.ArgumentParser(prog="python -m hoodied.demo writer")
    parser.add_argument("path")
    parser.add_argument("--interval", type=float, default=2.0)
    parser.add_argument("--batch-rows", type=int, default=300)
    parser.add_argument("--update-fraction", type=float, default=2 / 3)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--seed", type=int, default=8)
    args = parser.parse_args(argv)

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop (Ctrl-C reaches both)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    threading.Thread(target=_stop_at_eof, args=(stop,), name="stdin", daemon=True).start()

    writer = TableWriter.open(args.path)
    live = Table.open(args.path).read(columns=["uuid", "city", "ts"])
    keys: list[str] = live.column("uuid").to_pylist()
    cities: list[str] = live.column("city").to_pylist()
    last_ts = int(max(live.column("ts").to_pylist(), default=0))
    gen = TripGenerator(args.seed, args.partitions)
    rng = random.Random(args.seed)
    commits = updates_total = inserts_total = conflicts = errors = 0
    _emit({"event": "started", "pid": os.getpid(), "keys": len(keys)})

    def event_times(n: int) -> pa.Array:
        # Event times after every earlier one (the table orders records by ts: an update must be newer).
        nonlocal last_ts
        start = max(last_ts + 1, int(time.time() * 1000))
        last_ts = start + n
        return pa.array(np.arange(start, start + n, dtype=np.int64))

    while not stop.is_set():
        began = time.monotonic()
        table = Table.open(args.path)
        busy = {gid.partition_path for gid in table.pending_clustering_file_groups()}
        candidates = [i for i, c in enumerate(cities) if c not in busy]
        n_updates = min(round(args.batch_rows * args.update_fraction), len(candidates))
        picked = rng.sample(candidates, n_updates)
        updates = gen.rows([keys[i] for i in picked], [cities[i] for i in picked])
        new_keys = gen.keys(args.batch_rows - n_updates)
        inserts = gen.rows(new_keys)
        batch = pa.concat_tables([updates, inserts])
        batch = batch.set_column(batch.schema.get_field_index("ts"), "ts", event_times(batch.num_rows))
        try:
            result = writer.upsert(batch)
        except WriteConflict as e:
            conflicts += 1
            rolled = _roll_back_own_writes(writer.storage)
            _emit({"event": "conflict", "message": str(e), "rolled_back": rolled})
        except (HoodieError, OSError) as e:
            errors += 1
            rolled = _roll_back_own_writes(writer.storage)
            _emit({"event": "error", "message": f"{type(e).__name__}: {e}", "rolled_back": rolled})
        else:
            keys.extend(new_keys)
            cities.extend(inserts.column("city").to_pylist())
            commits += 1
            updates_total += n_updates
            inserts_total += len(new_keys)
            _emit(
                {
                    "event": "commit",
                    "instant": result.instant_time,
                    "rows": batch.num_rows,
                    "updates": n_updates,
                    "inserts": len(new_keys),
                    "skipped_partitions": sorted(busy),
                    "commits": commits,
                    "keys": len(keys),
                    "seconds": round(time.monotonic() - began, 3),
                }
            )
        stop.wait(max(0.0, args.interval - (time.monotonic() - began)))
    _emit(
        {
            "event": "stopped",
            "commits": commits,
            "updates": updates_total,
            "inserts": inserts_total,
            "conflicts": conflicts,
            "errors": errors,
            "keys": len(keys),
        }
    )
    return 0


class WriterProcess:
    """The writer child, its events (parsed JSON lines) in :attr:`events`."""

    def __init__(self, path: Path, options: DemoOptions) -> None:
        command = [
            sys.executable,
            "-m",
            "hoodied.demo",
            "writer",
            str(path),
            "--interval",
            str(options.interval),
            "--batch-rows",
            str(options.batch_rows),
            "--update-fraction",
            str(options.update_fraction),
            "--partitions",
            str(options.partitions),
            "--seed",
            str(options.seed + 1),
        ]
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        # Its own process group: a Ctrl-C in the terminal reaches only us, and we stop it in order.
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, process_group=0
        )
        self._reader = threading.Thread(target=self._read, name="demo-writer-events", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            text = line.strip()
            if not text:
                continue
            try:
                event = json.loads(text)
            except ValueError:
                event = {"event": "output", "message": text}
            self.events.put(event if isinstance(event, dict) else {"event": "output", "message": text})

    def stop(self, timeout: float) -> int | None:
        """Ask the writer to stop (its current batch commits first) and wait; kill it after ``timeout``.
        Returns its exit status (None if it had to be killed)."""
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            code = None
        self._reader.join(5)
        return code

    def drain_events(self) -> Iterator[dict[str, Any]]:
        while True:
            try:
                yield self.events.get_nowait()
            except queue.Empty:
                return


# -- progress ----------------------------------------------------------------------------------------------


class Progress:
    """Lines of ``[mm:ss] subject: message`` on standard output, time counted from the demo's start."""

    def __init__(self, out: IO[str] | None = None, started: float | None = None) -> None:
        self.out = out or sys.stdout
        self.started = time.monotonic() if started is None else started

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def line(self, subject: str, message: str) -> None:
        seconds = int(self.elapsed())
        self.out.write(f"[{seconds // 60:02d}:{seconds % 60:02d}] {subject}: {message}\n")
        self.out.flush()

    def text(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()


def hoodied_command() -> str:
    """How to run ``hoodied`` from a shell: ``hoodied`` when the one on ``PATH`` is this installation's, else
    the path of this installation's script (a venv's ``bin/hoodied``, not on ``PATH`` until activated)."""
    script = Path(sys.executable).parent / "hoodied"
    on_path = shutil.which("hoodied")
    in_venv = sys.prefix != sys.base_prefix
    if on_path is not None and (not in_venv or Path(on_path).parent == script.parent):
        return "hoodied"
    return str(script) if script.exists() else f"{sys.executable} -m hoodied.cli"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def describe_plan(storage: Storage, service: str, instant_time: str) -> str:
    """How big a scheduled instant is: file slices to compact, groups to cluster, files to clean."""
    table = Table.load(storage)
    if service == "compaction":
        data = storage.read(table.timeline.file_of(instant_time, State.REQUESTED))
        plan = decode_compaction_plan(data, base_path=storage.uri)
        return _plural(len(plan.operations), "file slice")
    if service == "clustering":
        clustering = clustering_plan_of(table, instant_time)
        if clustering is None:
            return "no plan"
        slices = sum(len(g.slices) for g in clustering.input_groups)
        return f"{_plural(len(clustering.input_groups), 'group')}, {_plural(slices, 'file slice')}"
    data = storage.read(table.timeline.file_of(instant_time, State.REQUESTED))
    files = sum(len(v) for v in plan_files(decode_cleaner_plan(data)).values())
    return f"{_plural(files, 'file')} to delete"


class ServiceWatch:
    """Prints the table-service instants the daemon schedules, runs and finishes, from the supervisor's
    state (pending instants as of its last poll, running jobs, last results), polled by :meth:`tick`."""

    def __init__(self, progress: Progress, daemon: Daemon, storage: Storage) -> None:
        self.progress = progress
        self.daemon = daemon
        self.storage = storage
        self.not_done: dict[str, int] = {}  # "<service> <kind>" -> jobs that ended so
        self._scheduled: set[tuple[str, str]] = set()
        self._running: set[tuple[str, str]] = set()
        self._finished: set[tuple[str, str]] = set()
        self._last: dict[str, tuple[str, int]] = {}
        self.last_activity = time.monotonic()

    def tick(self) -> None:
        supervisor = self.daemon.supervisor
        if supervisor is None:
            return
        tables = supervisor.tables()
        for table in tables:
            for service, instants in list(table.pending.items()):
                if service in SERVICES:
                    for instant in instants:
                        self._on_scheduled(service, instant.time)
        # Running first, results second: a job records its result before it leaves the running set, so a
        # job seen running and gone next time has its result in place (unless a later one replaced it).
        running = {(item.service, item.instant.time) for item in supervisor.running}
        for key in sorted(running - self._running):
            self._on_scheduled(*key)
            self.progress.line(f"{key[0]} {key[1]}", "running")
            self.last_activity = time.monotonic()
        for table in tables:
            for service, outcome in list(table.last_results.items()):
                mark = (outcome.instant, outcome.finished_at_ms)
                if self._last.get(service) != mark:
                    self._last[service] = mark
                    self._on_outcome(outcome)
        for key in sorted(self._running - running):
            if key not in self._finished:
                self._on_gone(*key)
        self._running = running

    def busy(self) -> bool:
        """Whether, as of the supervisor's last poll, anything is pending or running on the table."""
        supervisor = self.daemon.supervisor
        if supervisor is None:
            return True
        if supervisor.running:
            return True
        return any(
            instants
            for table in supervisor.tables()
            for service, instants in table.pending.items()
            if service in SERVICES
        )

    def _on_scheduled(self, service: str, instant_time: str) -> None:
        key = (service, instant_time)
        if key in self._scheduled:
            return
        self._scheduled.add(key)
        self.last_activity = time.monotonic()
        try:
            size = describe_plan(self.storage, service, instant_time)
        except Exception as e:  # the plan may be gone already (a clustering aborted on a conflict...)
            size = f"plan not readable: {type(e).__name__}"
        self.progress.line(f"{service} {instant_time}", f"scheduled ({size})")

    def _on_outcome(self, outcome: JobOutcome) -> None:
        key = (outcome.service, outcome.instant)
        self._on_scheduled(*key)
        self._finished.add(key)
        self.last_activity = time.monotonic()
        subject = f"{outcome.service} {outcome.instant}"
        if outcome.ok and outcome.kind == "done":
            self.progress.line(subject, f"done in {outcome.seconds:.1f} s: {outcome.message}")
            return
        if outcome.ok:
            self.progress.line(subject, f"needed nothing: {outcome.message}")
            return
        label = f"{outcome.service} {outcome.kind}"
        self.not_done[label] = self.not_done.get(label, 0) + 1
        if outcome.kind == "conflict":
            self.progress.line(
                subject,
                f"aborted after {outcome.seconds:.1f} s: a write touched its file groups since it was "
                "planned (rolled back; the next plan takes the write in)",
            )
        else:
            self.progress.line(subject, f"{outcome.kind} after {outcome.seconds:.1f} s: {outcome.message}")

    def _on_gone(self, service: str, instant_time: str) -> None:
        """A job that ended without a result we saw (another one of its service replaced it meanwhile)."""

        self._finished.add((service, instant_time))
        try:
            completed = Table.load(self.storage).timeline.is_completed(instant_time)
        except Exception:
            completed = False
        self.progress.line(f"{service} {instant_time}", "done" if completed else "ended, not completed")


# -- the demo ----------------------------------------------------------------------------------------------


def _check_port(port: int) -> None:
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError as e:
            raise DemoError(
                f"port {port} on 127.0.0.1 is not free ({e.strerror or e}): pass --port 0 for a free one"
            ) from None


class _Stop:
    """SIGINT/SIGTERM while the demo runs: the first ends the demo in order, the second skips waiting for
    pending table services, the third exits at once."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()
        self.signals = 0
        self.reason = ""
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._handle)

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: object) -> None:
        self.signals += 1
        if self.signals == 1:
            self.reason = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            self.requested.set()
        elif self.signals == 2:
            self.hurry.set()
        else:
            os._exit(130)


def run_demo(options: DemoOptions, out: IO[str] | None = None) -> int:
    """The whole demo (see the module docstring); returns the exit status."""
    if options.duration <= 0 or options.interval <= 0 or options.batch_rows < 1:
        raise ValueError("--duration, --interval and --batch-rows must be positive")
    if not 1 <= options.partitions <= 64:
        raise ValueError("--partitions must be within 1..64")
    path = Path(options.path).expanduser().resolve()
    check_path(path)  # refuse a folder we may not wipe before anything else
    if not java_available():
        raise DemoError("Spark needs a Java runtime (17 or later): install openjdk-17-jre-headless")
    _check_port(options.port)
    clear_previous(path)

    progress = Progress(out)
    setup_logging("WARNING", "text")
    stop = _Stop()
    stop.install()
    try:
        progress.line(
            "demo",
            f"creating a MERGE_ON_READ table (version 8, {options.partitions} partitions) at {path}",
        )
        setup = create_table(path, options)
        progress.line("demo", f"table {TABLE_NAME}: {setup.commits} commits, {setup.keys} rows")
        return _run(path, options, daemon_config(path, options.port), setup, progress, stop)
    finally:
        stop.restore()


def _run(
    path: Path,
    options: DemoOptions,
    config: DaemonConfig,
    setup: Setup,
    progress: Progress,
    stop: _Stop,
) -> int:

    writer = WriterProcess(path, options)
    progress.line(
        "writer",
        f"started (pid {writer.proc.pid}): {options.batch_rows} rows every {options.interval:g} s, "
        f"about {round(options.batch_rows * options.update_fraction)} updates and the rest new trips",
    )
    daemon = Daemon(config)
    failure: list[BaseException] = []

    def run_daemon() -> None:
        try:
            daemon.run(handle_signals=False)
        except BaseException as e:  # reported by the main thread
            failure.append(e)

    progress.line(
        "daemon",
        f"starting: embedded mode, Spark {config.spark.master}, polling every {config.poll_interval:g} s",
    )
    daemon_thread = threading.Thread(target=run_daemon, name="hoodied-demo-daemon", daemon=True)
    daemon_thread.start()
    watch = ServiceWatch(progress, daemon, Storage.for_uri(str(path)))
    writer_state = _WriterState()
    deadline = progress.started + options.duration
    announced = False
    metrics_url = ""

    def pump() -> None:
        nonlocal announced, metrics_url
        for event in writer.drain_events():
            writer_state.on_event(event, progress)
        if not announced and daemon.health is not None and daemon.supervisor is not None:
            announced = True
            metrics_url = f"{daemon.health.url}/metrics"
            progress.line(
                "daemon",
                f"up: watching table {TABLE_NAME}, scheduling {', '.join(SERVICES)} "
                f"({', '.join(f'{k}={v}' for k, v in HOODIE_SETTINGS.items())})",
            )
            progress.line(
                "daemon",
                f"metrics: curl {metrics_url}   (also {daemon.health.url}/status, /healthz, /readyz)",
            )
        watch.tick()

    while not stop.requested.is_set() and time.monotonic() < deadline and not failure:
        pump()
        if writer.proc.poll() is not None:
            pump()
            progress.line("writer", f"exited by itself with status {writer.proc.returncode}")
            break
        stop.requested.wait(0.25)
    if failure:
        progress.line("daemon", f"failed: {type(failure[0]).__name__}: {failure[0]}")
    elif stop.requested.is_set():
        progress.line("demo", f"{stop.reason}: stopping (Ctrl-C again to skip waiting for pending services)")
    elif time.monotonic() >= deadline:
        progress.line("demo", f"{options.duration:g} s are up: stopping")

    progress.line("writer", "stopping (its current batch commits first)")
    code = writer.stop(timeout=120)
    pump()
    if code != 0:
        progress.line("writer", f"ended with status {code}")

    if not failure and daemon_thread.is_alive():
        _finish_pending(progress, watch, daemon, stop, options.drain_timeout, pump, failure)
        progress.line("daemon", "stopping (running jobs finish)")
        daemon.stop()
        while daemon_thread.is_alive():
            daemon_thread.join(0.25)
            watch.tick()
        watch.tick()
        progress.line("daemon", "stopped")
    elif daemon_thread.is_alive():
        daemon.stop()
        daemon_thread.join(config.jobs.shutdown_grace + 60)
    return _report(path, config, progress, setup, writer_state, watch, metrics_url, failure, code)


def _finish_pending(
    progress: Progress,
    watch: ServiceWatch,
    daemon: Daemon,
    stop: _Stop,
    timeout: float,
    pump: Callable[[], None],
    failure: list[BaseException],
) -> None:
    """Let the daemon run what is pending (and what it schedules on the last commits) until a poll that
    started after everything ended finds nothing to do, or ``timeout`` seconds."""
    if timeout <= 0 or stop.hurry.is_set():
        return
    progress.line("daemon", f"finishing the pending table services (up to {timeout:g} s)")
    deadline = time.monotonic() + timeout
    idle_since: float | None = None
    while time.monotonic() < deadline and not stop.hurry.is_set() and not failure:
        pump()
        if watch.busy():
            idle_since = None
        elif idle_since is None:
            idle_since = time.time()
        else:
            beats = daemon.heartbeats
            if (
                beats.last_poll_started is not None
                and beats.last_poll_succeeded is not None
                and beats.last_poll_started > idle_since
                and beats.last_poll_succeeded >= beats.last_poll_started
            ):
                progress.line("daemon", "nothing left to do")
                return
        stop.hurry.wait(0.25)
    if stop.hurry.is_set():
        progress.line("demo", "not waiting for pending table services")
    elif not failure:
        progress.line("daemon", f"still busy after {timeout:g} s; pending instants stay for the next run")


@dataclass
class _WriterState:
    """What the writer reported, from its events."""

    commits: int = 0
    rows: int = 0
    updates: int = 0
    inserts: int = 0
    conflicts: int = 0
    errors: int = 0
    keys: int | None = None
    stopped: bool = False

    def on_event(self, event: dict[str, Any], progress: Progress) -> None:
        kind = event.get("event")
        if kind == "commit":
            self.commits = int(event["commits"])
            self.rows += int(event["rows"])
            self.updates += int(event["updates"])
            self.inserts += int(event["inserts"])
            self.keys = int(event["keys"])
            skipped = event.get("skipped_partitions") or []
            note = f"; no updates in {', '.join(skipped)} (clustering pending)" if skipped else ""
            progress.line(
                "writer",
                f"commit {event['instant']} upserted {event['rows']} rows ({event['updates']} updates, "
                f"{event['inserts']} inserts; total {_plural(self.commits, 'commit')}, {self.keys} keys)"
                f"{note}",
            )
        elif kind == "started":
            self.keys = int(event["keys"])
        elif kind == "conflict":
            self.conflicts += 1
            progress.line(
                "writer",
                f"batch not committed, it conflicted with a table service (rolled back "
                f"{', '.join(event.get('rolled_back') or []) or 'nothing'}); next batch goes on",
            )
        elif kind == "error":
            self.errors += 1
            progress.line("writer", f"batch failed: {event.get('message')}")
        elif kind == "stopped":
            self.stopped = True
            self.keys = int(event["keys"])
            progress.line(
                "writer",
                f"stopped after {_plural(int(event['commits']), 'commit')} ({event['keys']} keys written)",
            )
        else:
            progress.line("writer", str(event.get("message", event)))


def _timeline_counts(storage: Storage) -> dict[str, int]:

    timeline = Table.load(storage).timeline
    counts = dict.fromkeys(("deltacommit", *SERVICES, "rollback"), 0)
    for instant in timeline.completed():
        requested = timeline.requested_action(instant.time)
        if requested == "compaction":
            counts["compaction"] += 1
        elif requested == CLUSTERING:
            counts["clustering"] += 1
        elif instant.action == CLEAN:
            counts["clean"] += 1
        elif instant.action == DELTA_COMMIT:
            counts["deltacommit"] += 1
        elif instant.action == ROLLBACK:
            counts["rollback"] += 1
    return counts


def _report(
    path: Path,
    config: DaemonConfig,
    progress: Progress,
    setup: Setup,
    writer: _WriterState,
    watch: ServiceWatch,
    metrics_url: str,
    failure: list[BaseException],
    writer_code: int | None,
) -> int:

    storage = Storage.for_uri(str(path))
    progress.text()
    progress.text("hoodied status:")
    try:
        for line in format_status(status_report(config)).splitlines():
            progress.text(f"  {line}")
    except Exception as e:
        progress.text(f"  cannot read the status: {type(e).__name__}: {e}")

    table = Table.open(str(path))
    rows = table.read(columns=["uuid"])
    n_rows = rows.num_rows
    distinct = int(pc.count_distinct(rows.column("uuid")).as_py()) if n_rows else 0
    # What was written, as the writers counted it: the set-up's inserts plus the writer's.
    written = setup.keys + writer.inserts
    counts = _timeline_counts(storage)
    agree = n_rows == distinct == written and writer.keys in (None, written)
    not_done = ", ".join(f"{n} {label}" for label, n in sorted(watch.not_done.items()))

    progress.text()
    progress.text("summary:")
    progress.text(
        f"  table:    {path} (MERGE_ON_READ, table version {table.config.table_version}, "
        f"{len(table.file_slices())} file slices now)"
    )
    progress.text(
        f"  writer:   {_plural(writer.commits, 'commit')}, {writer.rows} rows upserted ({writer.updates} "
        f"updates, {writer.inserts} inserts); {_plural(writer.conflicts, 'batch', 'batches')} rolled back "
        f"on a conflict; plus {setup.commits} set-up commits"
    )
    progress.text(
        f"  services: {_plural(counts['compaction'], 'compaction')}, "
        f"{_plural(counts['clustering'], 'clustering')}, {_plural(counts['clean'], 'clean')} completed"
        + (f"; not completed: {not_done}" if not_done else "")
    )
    progress.text(
        f"  rows:     {n_rows} in the table ({distinct} distinct keys); {written} keys written "
        f"({setup.keys} by the set-up, {writer.inserts} by the writer): "
        + ("they agree" if agree else "they DO NOT agree")
    )
    if metrics_url:
        progress.text(f"  metrics:  were served at {metrics_url} while the demo ran")
    command = hoodied_command()
    if command != "hoodied":
        activate = Path(command).parent / "activate"
        hint = f" (or `source {activate}`, then `hoodied`)" if activate.exists() else ""
        progress.text(f"  hoodied:  not on PATH; run it as {command}{hint}")
    progress.text(f"  next:     {command} status --config {path / MARKER}")
    progress.text(f"            {command} timeline {path}")
    progress.text(f"            {command} read {path} --out snapshot.parquet")
    ok = agree and not failure and writer_code == 0 and writer.stopped
    if failure:
        progress.text(f"  failed:   the daemon: {type(failure[0]).__name__}: {failure[0]}")
    if writer_code != 0 or not writer.stopped:
        progress.text(f"  failed:   the writer ended with status {writer_code}")
    return 0 if ok else 1


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m hoodied.demo writer PATH ...`` (the demo's writer child)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "writer":
        print("usage: python -m hoodied.demo writer PATH [options]   (the demo itself: hoodied demo)")
        return 2
    return writer_main(args[1:])


__all__ = [
    "HOODIE_SETTINGS",
    "MARKER",
    "DemoError",
    "DemoOptions",
    "check_path",
    "clear_previous",
    "create_table",
    "daemon_config",
    "describe_plan",
    "is_demo_table",
    "run_demo",
    "writer_main",
]

if __name__ == "__main__":
    sys.exit(main())
