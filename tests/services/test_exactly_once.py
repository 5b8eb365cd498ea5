"""Exactly once against any second executor (issue 32): a run that loses never destroys the winner's output.

Each test puts a live run of a compaction (a replica whose claim lives elsewhere,
:mod:`support.instant_runner`, in a process of its own) beside a second executor that cannot see that
claim: the one-off command an operator runs from the README, the same table under another name (``//``, a
trailing ``/``, ``file://``, a symbolic link), a takeover after the first run was stopped (SIGSTOP) past its
heartbeat's expiry. What must hold: the live run's instant is never rolled back under it (its heartbeat is
the lease every executor sees), a paused run that wakes after a takeover commits nothing and deletes nothing
of the new owner's, the instant completes exactly once, and hudi-rs reads the same rows before and after.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.compaction.service import COMPACTION
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.write.heartbeat import read_lease
from hoodied.claims import LocalClaim
from hoodied.cli import main
from hoodied.errors import ForeignInstant
from hoodied.jobs import run_service_job
from support.daemon_tables import PendingTable, mor_table
from support.service_checks import Reads, judge, read_all

TESTS = Path(__file__).resolve().parents[1]
#: A short heartbeat (1 s, expired after 2 s without a beat), for every executor of these tests.
BEAT = ("hoodie.client.heartbeat.interval_in_ms=1000", "hoodie.client.heartbeat.tolerable.misses=2")
SETTINGS = dict(item.split("=", 1) for item in BEAT)
CONF = [arg for kv in BEAT for arg in ("--conf", kv)]


class LiveRun:
    """A compaction run in a process of its own, paused at its commit until :meth:`release`."""

    def __init__(self, root: Path, instant: str, log: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        self._go = log.with_suffix(".go")
        env["HOODIE_FAILPOINTS"] = f"compaction.before_commit=until:{self._go}"
        self.log = log
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "support.instant_runner", str(root), "compaction", instant, "r1", *CONF],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=TESTS,
        )

    def release(self) -> None:
        self._go.touch()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text():
            assert self.proc.poll() is None, f"the live run ended early:\n{self.text()}"
            assert time.monotonic() < deadline, f"no {needle!r} within {timeout} s:\n{self.text()}"
            time.sleep(0.05)

    def finish(self, timeout: float = 120.0) -> tuple[int, str]:
        self.release()
        code = self.proc.wait(timeout)
        self._out.close()
        return code, self.text()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._out.close()


@pytest.fixture
def live_runs() -> Iterator[list[LiveRun]]:
    runs: list[LiveRun] = []
    yield runs
    for run in runs:
        with_cont(run.proc.pid)
        run.kill()


def with_cont(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGCONT)


def paused_at_commit(
    tmp_path: Path, live_runs: list[LiveRun], seed: int
) -> tuple[PendingTable, str, Reads, LiveRun]:
    """A MOR table with a pending compaction T, what hudi-rs reads of it, and a live run of T paused at its
    commit (its tasks done, its lease beating)."""
    t = mor_table(tmp_path / "t", 8, seed=seed)
    T = t.pending[1].time
    before = read_all(t.root, [])
    run = LiveRun(t.root, T, tmp_path / "r1.log")
    live_runs.append(run)
    run.wait_for("failpoint compaction.before_commit")
    return t, T, before, run


def completed_files(root: Path, instant: str) -> list[str]:
    """The completed files of ``instant`` on the timeline (one, for an instant completed once)."""
    timeline = root / ".hoodie" / "timeline"
    folder = timeline if timeline.is_dir() else root / ".hoodie"
    return sorted(
        p.name
        for p in folder.iterdir()
        if p.name.startswith(instant) and p.name.split(".")[-1] in ("commit", "deltacommit")
    )


def assert_written_files_exist(root: Path, instant: str) -> None:
    table = Table.open(str(root))
    paths = table.commit_metadata(instant).written_file_paths
    assert paths
    missing = [p for p in paths if not (root / p).exists()]
    assert not missing, f"the completed {instant} names files that are gone: {missing}"


def alias(root: Path, form: str, tmp_path: Path) -> str:
    """``root`` written another way: the forms of one table that once claimed apart."""
    if form == "double-slash":
        return str(root.parent) + "//" + root.name
    if form == "trailing-slash":
        return f"{root}/"
    if form == "file-uri":
        return f"file://{root}"
    link = tmp_path / "link"
    link.symlink_to(root, target_is_directory=True)
    return str(link)


def test_a_one_off_execute_refuses_a_live_run_and_names_its_owner(
    tmp_path: Path, live_runs: list[LiveRun], capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32, scenario 2: ``hoodied compact PATH --mode execute --instant T`` while a replica runs T once
    rolled the live run back and completed T itself; the replica then deleted the committed files."""
    t, T, before, run = paused_at_commit(tmp_path, live_runs, seed=41)
    command = ["compact", str(t.root), "--mode", "execute", "--instant", T, *CONF]
    assert main(command) == 3
    out = capsys.readouterr().out
    assert "replica r1" in out, out
    assert f"pid {run.proc.pid}" in out, out
    assert "heartbeat is fresh" in out, out
    code, log = run.finish()
    assert code == 0, log
    assert len(completed_files(t.root, T)) == 1
    assert_written_files_exist(t.root, T)
    assert read_lease(Storage.for_uri(str(t.root)), T).version is None  # the run's heartbeat went with it
    judge(t.root, before, "compaction", "a one-off execute beside a live run")


@pytest.mark.parametrize("form", ["double-slash", "trailing-slash", "file-uri", "symlink"])
def test_another_name_of_the_table_never_takes_over_a_live_run(
    tmp_path: Path, live_runs: list[LiveRun], form: str
) -> None:
    """Issue 32, scenario 1: a second name of one table claimed on a key of its own and took the live run's
    instant over once ``takeover_grace`` passed; the heartbeat is seen under every name, and no takeover rule
    (here the most eager: take over foreign instants at once) overrides a fresh one."""
    t, T, before, run = paused_at_commit(tmp_path, live_runs, seed=42)
    other = Storage.for_uri(alias(t.root, form, tmp_path))
    with pytest.raises(ForeignInstant, match="replica r1"):
        run_service_job(
            None,
            COMPACTION,
            other,
            FileSystemLock(other),
            T,
            settings=SETTINGS,
            replica="b",
            foreign_after=0.0,
        )
    code, log = run.finish()
    assert code == 0, log
    assert len(completed_files(t.root, T)) == 1
    assert_written_files_exist(t.root, T)
    judge(t.root, before, "compaction", f"another name ({form}) beside a live run")


def test_a_paused_run_taken_over_wakes_fenced_and_deletes_nothing_of_the_winner(
    tmp_path: Path, live_runs: list[LiveRun], capsys: pytest.CaptureFixture[str]
) -> None:
    """The live run is stopped (SIGSTOP, a long GC pause) past its heartbeat's expiry; ``--take-over`` waits
    for the expiry, rolls the stopped attempt back and completes the instant. The stopped run then wakes: it
    finds its lease lost, commits nothing, deletes only files of its own attempt, and the winner's files and
    metadata-table entries stand."""
    t, T, before, run = paused_at_commit(tmp_path, live_runs, seed=43)
    os.kill(run.proc.pid, signal.SIGSTOP)
    run.release()  # it goes on to its commit as soon as it runs again
    command = ["compact", str(t.root), "--mode", "execute", "--instant", T, *CONF, "--take-over"]
    assert main(command) == 0  # waits for the stopped run's heartbeat to expire, if it has not yet
    out = capsys.readouterr().out
    assert f"completed compaction {T}" in out, out
    assert "rolled back an unfinished attempt" in out, out
    # The voided attempt's held requests may land files after the takeover: swept once by the command.
    assert f"{T}: deleted 0 file(s) that voided attempt(s) landed late" in out, out
    assert_written_files_exist(t.root, T)
    os.kill(run.proc.pid, signal.SIGCONT)
    code, log = run.finish()
    assert code == 3, log
    assert "LOST" in log, log
    assert len(completed_files(t.root, T)) == 1
    assert_written_files_exist(t.root, T)
    judge(t.root, before, "compaction", "a paused run woken after a takeover")


def test_a_one_off_beside_another_one_off_exits_3_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two one-off commands on one machine meet at the local claim: the second exits 3 (as beside a live
    lease), not 2 (an error), and touches nothing."""
    t = mor_table(tmp_path / "t", 8, seed=47)
    T = t.pending[1].time
    storage = Storage.for_uri(str(t.root))
    with LocalClaim(storage, "compaction", T):  # the first command, still running
        command = ["compact", str(t.root), "--mode", "execute", "--instant", T, *CONF]
        assert main(command) == 3
    out = capsys.readouterr().out
    assert f"compaction {T} is being run by another command on this machine" in out, out
    assert f"pid {os.getpid()}" in out or f":{os.getpid()}" in out, out
    assert Table.open(str(t.root)).timeline.get(T).state.name == "REQUESTED"
