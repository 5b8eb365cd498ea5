"""The demo's progress lines: what the writer and each service did, as it happens."""

from __future__ import annotations

import shutil
import sys
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING

from hoodie.clean.execute import plan_files
from hoodie.clustering.plan import clustering_plan_of
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import State
from hoodie.timeline.metadata import decode_cleaner_plan, decode_compaction_plan
from hoodied.daemon import Daemon
from hoodied.demo.table import SERVICES

if TYPE_CHECKING:
    from hoodied.work import JobOutcome

#: Relative to the table's base path: the demo's configuration, whose presence marks a table the demo made.

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


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 commit``, ``2 commits`` (``many`` where the plural is not ``word + s``)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def describe_plan(storage: Storage, service: str, instant_time: str) -> str:
    """How big a scheduled instant is: file slices to compact, groups to cluster, files to clean."""
    table = Table.load(storage)
    if service == "compaction":
        data = storage.read(table.timeline.file_of(instant_time, State.REQUESTED))
        plan = decode_compaction_plan(data, base_path=storage.uri)
        return plural(len(plan.operations), "file slice")
    if service == "clustering":
        clustering = clustering_plan_of(table, instant_time)
        if clustering is None:
            return "no plan"
        slices = sum(len(g.slices) for g in clustering.input_groups)
        return f"{plural(len(clustering.input_groups), 'group')}, {plural(slices, 'file slice')}"
    data = storage.read(table.timeline.file_of(instant_time, State.REQUESTED))
    files = sum(len(v) for v in plan_files(decode_cleaner_plan(data)).values())
    return f"{plural(files, 'file')} to delete"


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
