"""The demo: the table, the writer and the embedded daemon together, then the summary."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pyarrow.compute as pc

from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.archived.load import load_archived_timeline
from hoodied.config import DaemonConfig
from hoodied.daemon import Daemon, format_status, status_report
from hoodied.demo.progress import Progress, ServiceWatch, hoodied_command, plural
from hoodied.demo.table import (
    HOODIE_SETTINGS,
    MARKER,
    SERVICES,
    TABLE_NAME,
    DemoError,
    DemoOptions,
    Setup,
    check_path,
    clear_previous,
    create_table,
    daemon_config,
)
from hoodied.demo.writer import WriterProcess
from hoodied.logs import setup_logging
from hoodied.signals import StopSignals
from hoodied.spark import java_available

if TYPE_CHECKING:
    pass

#: Relative to the table's base path: the demo's configuration, whose presence marks a table the demo made.

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
    pending table services, the third exits at once (acted on off the signal handler:
    :mod:`hoodied.signals`)."""

    def __init__(self) -> None:
        self.requested = threading.Event()
        self.hurry = threading.Event()
        self.reason = ""
        self._signals = StopSignals(self._on_signal)

    def install(self) -> None:
        self._signals.install()

    def restore(self) -> None:
        self._signals.restore()

    def _on_signal(self, signum: int, count: int) -> None:
        if count == 1:
            self.reason = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
            self.requested.set()
        elif count == 2:
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
                f"{event['inserts']} inserts; total {plural(self.commits, 'commit')}, {self.keys} keys)"
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
                f"stopped after {plural(int(event['commits']), 'commit')} ({event['keys']} keys written)",
            )
        else:
            progress.line("writer", str(event.get("message", event)))


def _timeline_counts(storage: Storage) -> dict[str, int]:
    """Completed instants by the action they were requested under, on the active timeline and in the history
    (archival moves the oldest out while the demo runs)."""
    table = Table.load(storage)
    timeline = table.timeline
    requested = load_archived_timeline(storage, table.config).requested_actions()
    requested.update({i.time: timeline.requested_action(i.time) or i.action for i in timeline.completed()})
    counts = dict.fromkeys(("deltacommit", *SERVICES, "rollback"), 0)
    for action in requested.values():
        if action in counts:
            counts[action] += 1
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
        f"  writer:   {plural(writer.commits, 'commit')}, {writer.rows} rows upserted ({writer.updates} "
        f"updates, {writer.inserts} inserts); {plural(writer.conflicts, 'batch', 'batches')} rolled back "
        f"on a conflict; plus {setup.commits} set-up commits"
    )
    progress.text(
        f"  services: {plural(counts['compaction'], 'compaction')}, "
        f"{plural(counts['clustering'], 'clustering')}, {plural(counts['clean'], 'clean')} completed"
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
