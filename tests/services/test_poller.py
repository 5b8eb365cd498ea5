"""The poll over many idle tables (``hoodied.poller``, ``hoodied.listing``): one request a table while
nothing changes, on local disk and on S3; what changes (a new instant, an operator's command, a folder
written just now) is seen at the next poll."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import lock_for_table
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodied.config import DaemonConfig
from hoodied.control import Command, FileControlStore, apply_command
from hoodied.coordination import EmbeddedCoordination
from hoodied.ctl import main_ctl
from hoodied.daemon import Daemon
from hoodied.health import Heartbeats
from hoodied.listing import CONFIG_MAX_AGE, QUIET_FOLDER_AGE
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor
from hoodied.work import WatchedTable
from support.s3_server import S3Server

#: Tables of a fleet: enough that a cost per poll would not hide in a cost per table.
FLEET = 24


def _template(root: Path) -> Path:
    template = root / "template"
    spec = GenerateSpec(table_version=8, rows=20, commits=2, partitions=1, seed=5, update_fraction=0.5)
    generate_table(str(template), spec)
    return template


def _age(table: Path, seconds: float = 60.0) -> None:
    """Date the timeline folder's last change ``seconds`` back, as on a table nobody wrote for that long."""
    past = time.time() - seconds
    os.utime(table / ".hoodie" / "timeline", (past, past))


def _local_fleet(root: Path, n: int, *, aged: bool = True) -> list[str]:
    template = _template(root)
    paths = []
    for i in range(n):
        path = root / f"t{i:02d}"
        shutil.copytree(template, path)
        if aged:
            _age(path)
        paths.append(str(path))
    return paths


def _no_spark() -> Any:
    return None


def _supervisor(uris: list[str], state_dir: Path, settings: str = "") -> tuple[Supervisor, FileControlStore]:
    tables = "\n".join(f"  - {u}" for u in uris)
    config = DaemonConfig.parse(
        f"metrics: {{port: null}}\nspark: {{fair_pools: false}}\n{settings}tables:\n{tables}\n"
    )
    metrics = Metrics(replica="test")
    control = FileControlStore(state_dir)
    heartbeats = Heartbeats(started_at=time.time())
    coordination = EmbeddedCoordination(metrics)
    return Supervisor(config, coordination, metrics, heartbeats, _no_spark, control=control), control


def _requests(tables: list[WatchedTable]) -> dict[str, int]:
    total: dict[str, int] = {}
    for table in tables:
        for op, n in table.storage.requests.snapshot().items():
            total[op] = total.get(op, 0) + n
    return total


def _idle_requests(supervisor: Supervisor, polls: int) -> dict[str, int]:
    before = _requests(supervisor.tables())
    for _ in range(polls):
        assert supervisor.poll() == []
    after = _requests(supervisor.tables())
    return {op: n - before.get(op, 0) for op, n in after.items() if n - before.get(op, 0)}


def test_an_idle_poll_costs_a_look_at_each_timeline_folder_on_local_disk(tmp_path: Path) -> None:
    """A local timeline folder unchanged since it was listed is not listed again: its time vouches for the
    listing (one stat a table a poll), and the poll's figures stay what they were."""
    supervisor, _ = _supervisor(_local_fleet(tmp_path, FLEET), tmp_path / "state")
    supervisor.poll()  # cold: configs, listings, backlogs
    exported = supervisor.metrics.exposition()
    assert _idle_requests(supervisor, 3) == {"HEAD": 3 * FLEET}
    assert supervisor.metrics.exposition().count(b"\n") == exported.count(b"\n")
    for table in supervisor.tables():
        assert table.evaluated is not None, f"{table.name} was not quiet"
        assert "nothing pending" in table.next["compaction"]


def test_a_folder_written_just_now_is_listed_at_every_poll(tmp_path: Path) -> None:
    """A folder time younger than QUIET_FOLDER_AGE vouches for nothing (a file added within the same tick of
    the file system's clock would not change it): such a folder is listed at every poll."""
    supervisor, _ = _supervisor(_local_fleet(tmp_path, 3, aged=False), tmp_path / "state")
    supervisor.poll()
    if any(t.listed_folder_time_ns is not None for t in supervisor.tables()):
        pytest.skip(f"building the tables took more than {QUIET_FOLDER_AGE} s")
    assert _idle_requests(supervisor, 2) == {"HEAD": 2 * 3, "LIST": 2 * 3}


def test_a_new_instant_on_a_quiet_table_is_offered_at_the_next_poll(tmp_path: Path) -> None:
    uris = _local_fleet(tmp_path, 3)
    supervisor, _ = _supervisor(uris, tmp_path / "state")
    supervisor.poll()
    supervisor.poll()
    storage = Storage.for_uri(uris[1])
    instant = schedule_compaction(storage, lock_for_table(storage, {})).instant
    assert instant is not None
    (item,) = supervisor.poll()
    assert (item.table.uri, item.service, item.instant) == (uris[1], "compaction", instant)
    assert item.table.evaluated is None  # a table with work pending is evaluated at every poll
    assert item.table.next["compaction"].startswith(f"{instant.time} requested: due")
    _age(Path(uris[1]))
    (again,) = supervisor.poll()
    assert again.instant == instant


def test_an_operators_command_reaches_a_quiet_table(tmp_path: Path) -> None:
    """A pause changes what a quiet table says and exports although its timeline did not change; a resume
    changes it back."""
    supervisor, control = _supervisor(_local_fleet(tmp_path, 2), tmp_path / "state")
    supervisor.poll()
    supervisor.poll()
    table = supervisor.tables()[0]

    def paused() -> float | None:
        return supervisor.metrics.registry.get_sample_value("hoodied_table_paused", {"table": table.name})

    control.update(table.key, lambda c: apply_command(c, Command("pause", by="ops", reason="upgrade")))
    supervisor.poll()
    assert table.blocked["compaction"] == ("paused", "table paused by ops: upgrade")
    assert paused() == 1
    control.update(table.key, lambda c: apply_command(c, Command("resume", by="ops")))
    supervisor.poll()
    assert "compaction" not in table.blocked
    assert paused() == 0


def test_a_quiet_table_says_why_its_scheduling_requests_nothing(tmp_path: Path) -> None:
    """Scheduling evaluated at every poll (reschedule_interval 0s) leaves a table quiet while its reasons
    stay the same, and the table says them."""
    settings = "reschedule_interval: 0s\ndefaults: {schedule: [compaction]}\n"
    supervisor, _ = _supervisor(_local_fleet(tmp_path, 2), tmp_path / "state", settings)
    for _ in range(3):
        assert supervisor.poll() == []
    for table in supervisor.tables():
        assert table.evaluated is not None
        assert table.next["compaction"] == table.schedule_reasons["compaction"]
        assert "does not fire" in table.next["compaction"], table.next


@pytest.mark.s3
def test_an_idle_poll_costs_one_listing_a_table_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    """Object stores have no folder times: an idle table costs its timeline listing, and the listings of a
    poll go out together (LISTING_THREADS at once)."""
    template = _template(tmp_path)
    uris = [s3_server.upload(template, f"s3://lake/fleet-{tmp_path.name}/t{i:02d}") for i in range(FLEET)]
    supervisor, _ = _supervisor(uris, tmp_path / "state")
    supervisor.poll()
    assert _idle_requests(supervisor, 2) == {"LIST": 2 * FLEET}
    assert all(t.evaluated is not None for t in supervisor.tables())


class Clock:
    """The poller's monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _daemon(text: str, state_dir: Path, clock: Clock) -> Daemon:
    """A daemon of ``text`` whose supervisor (not started: the test polls) runs on ``clock``, for its
    ``/status`` document."""
    config = DaemonConfig.parse(f"metrics: {{port: null}}\nspark: {{fair_pools: false}}\n{text}")
    daemon = Daemon(config)
    coordination = EmbeddedCoordination(daemon.metrics)
    daemon.supervisor = Supervisor(
        config,
        coordination,
        daemon.metrics,
        daemon.heartbeats,
        _no_spark,
        control=FileControlStore(state_dir),
        clock=clock,
    )
    return daemon


def test_a_table_whose_properties_vanish_shows_as_failing(tmp_path: Path) -> None:
    """A quiet table's ``hoodie.properties`` is read again CONFIG_MAX_AGE after it was read: once it is gone
    the table's polls fail, ``/status`` says why and ``hoodied_table_poll_failures_total`` counts them,
    although its timeline did not change; the file back, the table polls again."""
    (uri,) = _local_fleet(tmp_path, 1)
    clock = Clock()
    daemon = _daemon(f"tables: ['{uri}']", tmp_path / "state", clock)
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.poll()
    (table,) = supervisor.tables()

    def failures() -> float | None:
        return supervisor.metrics.registry.get_sample_value(
            "hoodied_table_poll_failures_total", {"table": table.name}
        )

    properties = Path(uri) / ".hoodie" / "hoodie.properties"
    kept = properties.read_bytes()
    properties.unlink()
    clock.now += CONFIG_MAX_AGE
    supervisor.poll()
    status = daemon.status()["tables"][table.name]  # type: ignore[index]
    assert "hoodie.properties" in status["last_error"], status["last_error"]
    assert failures() == 1
    assert table.retry_at > clock.now  # backing off, as any table that cannot be polled
    properties.write_bytes(kept)
    clock.now = table.retry_at
    supervisor.poll()
    assert daemon.status()["tables"][table.name]["last_error"] is None  # type: ignore[index]
    assert failures() == 1


def test_a_table_whose_folder_is_deleted_shows_as_failing(tmp_path: Path) -> None:
    (uri,) = _local_fleet(tmp_path, 1)
    clock = Clock()
    daemon = _daemon(f"tables: ['{uri}']", tmp_path / "state", clock)
    assert daemon.supervisor is not None
    daemon.supervisor.poll()
    shutil.rmtree(uri)
    clock.now += 1
    daemon.supervisor.poll()
    (table,) = daemon.supervisor.tables()
    assert daemon.status()["tables"][table.name]["last_error"]  # type: ignore[index]
    assert (
        daemon.metrics.registry.get_sample_value("hoodied_table_poll_failures_total", {"table": table.name})
        == 1
    )


@pytest.mark.parametrize("form", ["//", "/", "file://", "link"])
def test_a_pause_given_under_one_name_holds_the_table_under_another(
    tmp_path: Path, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``hoodied ctl pause a`` (configuration A names the table ``a``) holds it for a daemon whose
    configuration names it ``b`` another way: the control document is the table's, keyed by its identity."""
    (uri,) = _local_fleet(tmp_path, 1)
    (tmp_path / "alias").symlink_to(uri)
    head, tail = uri.rsplit("/", 1)
    other = {"//": f"{head}//{tail}", "/": f"{uri}/", "file://": f"file://{uri}", "link": f"{tmp_path}/alias"}
    state = tmp_path / "state"
    config_a = tmp_path / "a.yaml"
    config_a.write_text(f"admin: {{state_dir: '{state}'}}\ntables: [{{path: '{uri}', name: a}}]\n")
    b = _daemon(f"tables: [{{path: '{other[form]}', name: b}}]", state, Clock())
    assert b.supervisor is not None
    b.supervisor.poll()
    assert main_ctl(str(config_a), "pause", "a", service=None, instant=None, reason="backfill", by="ops") == 0
    b.supervisor.poll()
    (table_b,) = b.supervisor.tables()
    assert table_b.blocked["compaction"] == ("paused", "table paused by ops: backfill")
    assert b.metrics.registry.get_sample_value("hoodied_table_paused", {"table": "b"}) == 1
    assert '"state": "paused"' in capsys.readouterr().out
