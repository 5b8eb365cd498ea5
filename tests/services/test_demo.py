"""``hoodied demo`` as a user runs it: a child process of its own, its output read line by line. It must end
by itself (or on Ctrl-C) with exit status 0, show the writer's commits and the table services the daemon
completed, and leave a table whose rows (read by us and by hudi-rs) are exactly the keys the writer reported.
The set-up's rules (what it may wipe, the daemon's configuration) are checked without Spark."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import pyarrow.compute as pc
import pytest

from hoodie import Table
from hoodie.timeline.archived.load import load_archived_timeline
from hoodied.config import DaemonConfig
from hoodied.demo import (
    HOODIE_SETTINGS,
    MARKER,
    DemoError,
    clear_previous,
    daemon_config,
    daemon_config_text,
    is_demo_table,
)
from hoodied.spark import java_available
from support.hudi_oracle import HudiOracle, OracleRows, Query

T = r"^\[\d\d:\d\d\] "  # the time prefix of a progress line
INSTANT = r"\d{17}"
WRITER_COMMIT = re.compile(
    T + rf"writer: commit {INSTANT} upserted \d+ rows \(\d+ updates, \d+ inserts", re.M
)
WRITER_STOPPED = re.compile(T + r"writer: stopped after (\d+) commits? \((\d+) keys written\)", re.M)
ROWS = re.compile(
    r"^  rows: +(\d+) in the table \((\d+) distinct keys\); (\d+) keys written .*: they agree$", re.M
)
METRICS = re.compile(T + r"daemon: metrics: curl http://127\.0\.0\.1:\d+/metrics", re.M)


def _done(service: str) -> str:
    """A progress line saying a ``service`` instant completed; the instant is the group."""
    return T + rf"{service} ({INSTANT}): done in [\d.]+ s: "


def _command(path: Path, duration: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "hoodied.cli",
        "demo",
        "--path",
        str(path),
        "--duration",
        str(duration),
        "--port",
        "0",
    ]


def _require_java() -> None:
    if not java_available():
        pytest.skip(
            "the demo runs Spark, which needs a Java runtime; .ci/run installs openjdk-17-jre-headless"
        )


def _check_table(path: Path, out: str, oracle: HudiOracle) -> int:
    """The table holds one row per key the writer reported, by our reader and by hudi-rs; returns that."""
    stopped = WRITER_STOPPED.search(out)
    assert stopped, out
    keys = int(stopped.group(2))
    rows = ROWS.search(out)
    assert rows, out
    assert [int(g) for g in rows.groups()] == [keys, keys, keys], rows.group(0)

    ours = Table.open(str(path)).read(columns=["uuid"])
    assert ours.num_rows == keys
    assert pc.count_distinct(ours.column("uuid")).as_py() == keys
    theirs = oracle.one(path, Query.snapshot())
    assert isinstance(theirs, OracleRows), theirs
    assert theirs.table.num_rows == keys
    assert set(theirs.table.column("uuid").to_pylist()) == set(ours.column("uuid").to_pylist())
    return keys


def _completed(path: Path) -> dict[str, int]:
    """Completed instants by requested action, active and archived (the demo's daemon archives)."""
    table = Table.open(str(path))
    timeline = table.timeline
    actions = load_archived_timeline(table.storage, table.config).requested_actions()
    actions.update({i.time: timeline.requested_action(i.time) or i.action for i in timeline.completed()})
    requested = list(actions.values())
    return {
        action: requested.count(action) for action in ("deltacommit", "compaction", "clustering", "clean")
    }


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_runs_its_course_and_the_table_holds_what_the_writer_wrote(
    tmp_path: Path, hudi_oracle: HudiOracle
) -> None:
    _require_java()
    path = tmp_path / "demo"
    started = time.monotonic()
    done = subprocess.run(_command(path, 45), capture_output=True, text=True, timeout=300)
    out = done.stdout
    assert done.returncode == 0, f"{out}\n{done.stderr[-3000:]}"
    assert time.monotonic() - started < 45 + 60 + 30, "the demo overran its duration and drain"

    assert len(WRITER_COMMIT.findall(out)) >= 3, out
    assert re.search(T + r"demo: 45 s are up: stopping$", out, re.M), out
    assert METRICS.search(out), out
    compactions = re.findall(_done("compaction"), out, re.M)
    cleans = re.findall(_done("clean"), out, re.M)
    assert compactions, out
    assert cleans, out
    for instant in compactions:  # each had its scheduled and running lines first
        assert re.search(T + rf"compaction {instant}: scheduled \(\d+ file slices?\)$", out, re.M), out
        assert re.search(T + rf"compaction {instant}: running$", out, re.M), out
    assert "hoodied status:" in out
    assert "summary:" in out

    keys = _check_table(path, out, hudi_oracle)
    assert keys > 2440  # the set-up's keys, and the writer's inserts
    completed = _completed(path)
    assert completed["compaction"] >= len(compactions)
    assert completed["clean"] >= len(cleans)
    stopped = WRITER_STOPPED.search(out)
    assert stopped
    assert completed["deltacommit"] == 3 + int(stopped.group(1))  # the set-up's three and the writer's
    assert is_demo_table(path)
    DaemonConfig.load(path / MARKER)  # `hoodied status --config` / `hoodied run --config` take it as it is


@pytest.mark.spark
@pytest.mark.slow
def test_ctrl_c_mid_way_ends_in_order_with_a_summary(tmp_path: Path, hudi_oracle: HudiOracle) -> None:
    _require_java()
    path = tmp_path / "demo"
    lines: list[str] = []
    running = threading.Event()

    def read(stdout: IO[str]) -> None:
        for line in stdout:
            lines.append(line)
            if re.match(T + rf"(compaction|clean|clustering) {INSTANT}: running$", line):
                running.set()

    with (
        (tmp_path / "stderr.txt").open("w") as stderr,
        subprocess.Popen(_command(path, 600), stdout=subprocess.PIPE, stderr=stderr, text=True) as proc,
    ):
        assert proc.stdout is not None
        reader = threading.Thread(target=read, args=(proc.stdout,), daemon=True)
        reader.start()
        try:
            assert running.wait(180), "no table service started:\n" + "".join(lines)
            proc.send_signal(signal.SIGINT)  # a job runs: it must finish, and the demo end cleanly
            proc.wait(timeout=180)
        finally:
            if proc.poll() is None:
                proc.kill()
            reader.join(30)
    out = "".join(lines)
    err = (tmp_path / "stderr.txt").read_text()
    assert proc.returncode == 0, f"{out}\n{err[-3000:]}"
    assert re.search(T + r"demo: Ctrl-C: stopping", out, re.M), out
    assert WRITER_COMMIT.search(out), out
    assert re.search(T + r"daemon: stopped$", out, re.M), out
    assert "summary:" in out
    _check_table(path, out, hudi_oracle)
    pending = [i for i in Table.open(str(path)).timeline.pending() if i.action in ("deltacommit", "commit")]
    assert not pending, f"the writer left unfinished writes: {pending}"


# -- the set-up, without Spark ------------------------------------------------------------------------------


def test_only_an_earlier_demo_table_is_wiped(tmp_path: Path) -> None:
    clear_previous(tmp_path / "absent")  # nothing there: fine
    empty = tmp_path / "empty"
    empty.mkdir()
    clear_previous(empty)
    assert empty.is_dir()

    precious = tmp_path / "precious"
    (precious / ".hoodie").mkdir(parents=True)
    (precious / ".hoodie" / "hoodie.properties").write_text("hoodie.table.name=orders\n")
    with pytest.raises(DemoError, match="refusing to delete it"):
        clear_previous(precious)
    assert (precious / ".hoodie" / "hoodie.properties").exists()

    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    with pytest.raises(DemoError, match="not a folder"):
        clear_previous(a_file)

    fake_marker = tmp_path / "fake"
    (fake_marker / MARKER).parent.mkdir(parents=True)
    (fake_marker / MARKER).write_text("tables: [/data]\n")  # the file, but not the demo's
    with pytest.raises(DemoError):
        clear_previous(fake_marker)

    earlier = tmp_path / "earlier"
    (earlier / MARKER).parent.mkdir(parents=True)
    (earlier / MARKER).write_text(daemon_config_text(earlier, 0))
    (earlier / "city=x").mkdir()
    assert is_demo_table(earlier)
    clear_previous(earlier)
    assert not earlier.exists()


def test_the_daemon_configuration_is_the_demos(tmp_path: Path) -> None:
    config = daemon_config(tmp_path / "t", 0)
    assert config.poll_interval == 2.0
    assert config.zookeeper is None
    assert config.spark.master == "local[2]"
    assert config.metrics.host == "127.0.0.1"
    assert config.metrics.port == 0
    assert config.logging.level == "WARNING"
    (table,) = config.tables
    assert table.path == str(tmp_path / "t")
    assert table.settings.schedule == ("compaction", "clustering", "clean")
    assert dict(table.settings.hoodie) == HOODIE_SETTINGS
    assert HOODIE_SETTINGS["hoodie.compact.inline.max.delta.commits"] == "3"
    assert HOODIE_SETTINGS["hoodie.clustering.async.max.commits"] == "4"
    assert HOODIE_SETTINGS["hoodie.clean.commits.retained"] == "2"
    assert daemon_config(tmp_path / "t", 9464).metrics.port == 9464


def test_a_folder_that_is_not_a_demo_table_is_refused_by_the_command(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "data.csv").write_text("a,b\n")
    done = subprocess.run(_command(precious, 10), capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "refusing to delete it" in done.stderr
    assert (precious / "data.csv").read_text() == "a,b\n"
