"""Discovery (``hoodied.discovery`` and the poller's table list): each table once whatever links lead to it,
the merged paths said in the log and ``/status``, explicit entries winning, and a root that does not exist
reported rather than taken for an empty one. Real folders and symbolic links in tmp_path."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie.testing.generate import GenerateSpec, generate_table
from hoodied.config import DaemonConfig
from hoodied.control import FileControlStore
from hoodied.coordination import EmbeddedCoordination
from hoodied.daemon import Daemon
from hoodied.discovery import PROPERTIES, discover
from hoodied.health import Heartbeats
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor


def _table(path: Path) -> Path:
    """A folder discovery takes for a table (it looks for ``.hoodie/hoodie.properties`` only)."""
    (path / PROPERTIES).parent.mkdir(parents=True)
    (path / PROPERTIES).write_text("hoodie.table.name=t\n")
    return path


def _root(root: Path, **settings: Any) -> Any:
    extra = "".join(f", {k}: {v}" for k, v in settings.items())
    return DaemonConfig.parse(f"discover: [{{root: '{root}'{extra}}}]").discover[0]


def _no_spark() -> Any:
    return None


class Clock:
    """The supervisor's monotonic clock, moved by the test (the roots are scanned again every 10 polls'
    time)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _supervisor(text: str, state: Path, clock: Clock | None = None) -> Supervisor:
    config = DaemonConfig.parse(f"metrics: {{port: null}}\n{text}")
    metrics = Metrics(replica="test")
    return Supervisor(
        config,
        EmbeddedCoordination(metrics),
        metrics,
        Heartbeats(started_at=time.time()),
        _no_spark,
        control=FileControlStore(state),
        clock=clock or Clock(),
    )


@pytest.fixture
def looped(tmp_path: Path) -> Path:
    """A root holding one table, ``a/t``, and more ways to it: a link loop ``a/loop -> a``, a link to the
    table ``b -> a/t`` and a link to its folder ``c -> a`` (such a root once made one table 9 tables)."""
    root = Path(os.path.realpath(tmp_path)) / "warehouse"
    _table(root / "a" / "t")
    (root / "a" / "loop").symlink_to(root / "a")
    (root / "b").symlink_to(root / "a" / "t")
    (root / "c").symlink_to(root / "a")
    return root


def test_a_symlink_loop_finds_its_table_once_and_names_the_merged_paths(looped: Path) -> None:
    scan = discover(_root(looped, max_depth=6))
    assert scan.error is None
    assert [(f.path, f.identity) for f in scan.tables] == [(f"{looped}/a/t", f"{looped}/a/t")]
    # Each link is met once and not walked: a/loop and c are a (neither a/loop/t nor a/loop/loop/... is
    # met), b is the table, which is kept as its own path although b was met first (one level up).
    assert {(m.path, m.kept) for m in scan.merged} == {
        (f"{looped}/b", f"{looped}/a/t"),
        (f"{looped}/c", f"{looped}/a"),
        (f"{looped}/a/loop", f"{looped}/a"),
    }


def test_a_folder_a_link_leads_to_deeper_is_walked_from_its_shortest_path(tmp_path: Path) -> None:
    """``a/b/c -> d``, table ``d/e/t`` at depth 3: met first at the bottom of ``a`` (depth 3, no deeper), the
    folder would hide its table from the walk of ``d``; breadth first, ``d`` is met at depth 1."""
    root = Path(os.path.realpath(tmp_path)) / "w"
    _table(root / "d" / "e" / "t")
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "c").symlink_to(root / "d")
    scan = discover(_root(root, max_depth=3))
    assert [f.path for f in scan.tables] == [f"{root}/d/e/t"]


def test_an_excluded_path_does_not_hide_the_table_from_another(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path)) / "w"
    _table(root / "prod" / "t")
    (root / "a_tmp").mkdir()
    (root / "a_tmp" / "t").symlink_to(root / "prod" / "t")
    scan = discover(_root(root, exclude="['^a_tmp']"))
    assert [f.path for f in scan.tables] == [f"{root}/prod/t"]
    assert scan.merged == ()


def test_a_root_that_does_not_exist_is_an_error_not_an_empty_root(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert discover(_root(empty)).error is None
    scan = discover(_root(tmp_path / "nope"))
    assert scan.tables == ()
    assert scan.error == "the discovery root does not exist"


def test_the_poller_watches_a_looped_table_once_and_says_what_it_merged(
    looped: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    supervisor = _supervisor(f"discover: [{{root: '{looped}', max_depth: 6}}]", tmp_path / "state", clock)
    with caplog.at_level(logging.INFO, logger="hoodied.poller"):
        supervisor.refresh_tables()
    (table,) = supervisor.tables()
    assert (table.name, table.uri, table.identity) == ("t", f"{looped}/a/t", f"{looped}/a/t")
    assert supervisor.metrics.registry.get_sample_value("hoodied_tables") == 1
    merges = sorted(r.getMessage() for r in caplog.records if r.getMessage().endswith(": merged"))
    a, t = f"{looped}/a", f"{looped}/a/t"
    assert merges == [
        f"discover[0] ({looped}): {a}/loop is {a} (identity {a}): merged",
        f"discover[0] ({looped}): {looped}/b is {t} (identity {t}): merged",
        f"discover[0] ({looped}): {looped}/c is {a} (identity {a}): merged",
    ]
    (root,) = supervisor.discovery()
    assert root["error"] is None
    assert root["tables"] == 1
    assert {"path": f"{looped}/b", "identity": t, "kept": t} in root["merged"]  # type: ignore[operator]
    clock.now += 3600
    supervisor.refresh_tables()  # the next scan finds the same, and says nothing new
    assert supervisor.discovery() == [root]
    assert len([r for r in caplog.records if r.getMessage().endswith(": merged")]) == 3


def test_a_table_listed_and_discovered_is_served_once_as_listed(tmp_path: Path) -> None:
    """An entry of ``tables`` keeps its name and settings when a root also holds its table, however the root
    reaches it (here through a link)."""
    lake = Path(os.path.realpath(tmp_path)) / "lake"
    table = lake / "orders_v2"
    generate_table(str(table), GenerateSpec(rows=10, commits=1, partitions=1, seed=1))
    (lake / "orders").symlink_to(table)
    supervisor = _supervisor(
        f"tables: [{{path: '{table}', name: orders, priority: 5}}]\ndiscover: ['{lake}']", tmp_path / "state"
    )
    supervisor.refresh_tables()
    (watched,) = supervisor.tables()
    assert (watched.name, watched.uri, watched.settings.priority) == ("orders", str(table), 5.0)
    (root,) = supervisor.discovery()
    assert root["merged"] == [{"path": f"{lake}/orders", "identity": str(table), "kept": str(table)}]
    assert supervisor.poll() == []  # the one table polls


def test_a_missing_root_is_logged_once_and_shown_in_the_status(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    table = tmp_path / "t"
    generate_table(str(table), GenerateSpec(rows=10, commits=1, partitions=1, seed=1))
    text = f"tables: ['{table}']\ndiscover: ['{tmp_path}/nope']"
    daemon = Daemon(DaemonConfig.parse(f"metrics: {{port: null}}\n{text}"))
    clock = Clock()
    daemon.supervisor = _supervisor(text, tmp_path / "state", clock)
    with caplog.at_level(logging.ERROR, logger="hoodied.poller"):
        daemon.supervisor.poll()
        clock.now += 3600  # past 10 polls' time: the roots are scanned again
        daemon.supervisor.poll()
    errors = [r.getMessage() for r in caplog.records if "discover[0]" in r.getMessage()]
    assert errors == [f"discover[0] ({tmp_path}/nope): error: the discovery root does not exist"]
    status = daemon.status()
    assert status["discovery"] == [
        {"root": f"{tmp_path}/nope", "error": "the discovery root does not exist", "tables": 0, "merged": []}
    ]
    assert list(status["tables"]) == ["t"]  # type: ignore[call-overload]
    (tmp_path / "nope").mkdir()
    clock.now += 3600
    with caplog.at_level(logging.INFO, logger="hoodied.poller"):
        daemon.supervisor.poll()
    assert f"discover[0] ({tmp_path}/nope) can be scanned again" in caplog.text
    assert daemon.status()["discovery"] == [
        {"root": f"{tmp_path}/nope", "error": None, "tables": 0, "merged": []}
    ]
