"""The poll over many idle tables (``hoodied.poller``, ``hoodied.listing``): one request a table while
nothing changes, on local disk and on S3; what changes (a new instant, an operator's command, a folder
written just now) is seen at the next poll of the table. A quiet table is polled less often, up to its
ceiling, and any change brings it back to every poll (``hoodied.poll_interval``)."""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import FileSystemLock, lock_for_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import ROLLBACK, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    InstantInfo,
    RollbackMetadata,
    RollbackPlan,
    RollbackRequest,
    encode_rollback_metadata,
    encode_rollback_plan,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.decision import void_attempts
from hoodie.write.late_files import LateFiles
from hoodied.change_events import Announcement
from hoodied.config import DaemonConfig, TableSettings
from hoodied.control import Command, FileControlStore, apply_command
from hoodied.coordination import EmbeddedCoordination
from hoodied.ctl import main_ctl
from hoodied.daemon import Daemon
from hoodied.health import Heartbeats
from hoodied.listing import CONFIG_MAX_AGE, CONFIG_POLLS, QUIET_FOLDER_AGE, config_max_age
from hoodied.metrics import Metrics
from hoodied.poller import _same_cause, late_sweep_times
from hoodied.status import table_status
from hoodied.supervisor import Supervisor
from hoodied.work import WatchedTable, WorkItem
from support.s3_faults import FaultProxy
from support.s3_server import S3Server

#: Tables of a fleet: enough that a cost per poll would not hide in a cost per table.
FLEET = 24
#: Every table at every poll (a quiet table's interval does not grow: hoodied.poll_interval), for the tests
#: of what one poll of a table costs and sees.
EVERY_POLL = "poll_interval_max: 30s\n"


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
    supervisor, _ = _supervisor(_local_fleet(tmp_path, FLEET), tmp_path / "state", EVERY_POLL)
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
    supervisor, _ = _supervisor(_local_fleet(tmp_path, 3, aged=False), tmp_path / "state", EVERY_POLL)
    supervisor.poll()
    if any(t.listed_folder_time_ns is not None for t in supervisor.tables()):
        pytest.skip(f"building the tables took more than {QUIET_FOLDER_AGE} s")
    assert _idle_requests(supervisor, 2) == {"HEAD": 2 * 3, "LIST": 2 * 3}


def test_a_new_instant_on_a_quiet_table_is_offered_at_the_next_poll(tmp_path: Path) -> None:
    uris = _local_fleet(tmp_path, 3)
    supervisor, _ = _supervisor(uris, tmp_path / "state", EVERY_POLL)
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
    supervisor, _ = _supervisor(uris, tmp_path / "state", EVERY_POLL)
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
        events=daemon.events,
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


def test_a_sweep_of_a_table_with_notifications_does_not_read_its_properties(tmp_path: Path) -> None:
    """With change notifications a sweep of an idle table costs its one look at the timeline, however long
    ago its properties were read: they are read when an event names the table (the bucket's events cover
    ``.hoodie/hoodie.properties``)."""
    (uri,) = _local_fleet(tmp_path, 1)
    clock = Clock()
    daemon = _daemon(
        f"{EVERY_POLL}tables: [{{path: '{uri}', change_notifications: true}}]", tmp_path / "state", clock
    )
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.poll()
    (table,) = supervisor.tables()
    read_at = table.config_read_at
    clock.now += 2 * CONFIG_MAX_AGE
    # The folder's time and (LISTING_MAX_AGE passed) its listing; no properties read.
    assert _idle_requests(supervisor, 1) == {"HEAD": 1, "LIST": 1}
    assert table.config_read_at == read_at
    daemon.events.announce(Announcement(uri, "commit_callback", None, time.time()))
    supervisor.poll()
    assert table.config_read_at == clock.now


def test_a_quiet_table_reads_its_properties_every_ten_polls_at_its_interval(tmp_path: Path) -> None:
    """At the base interval the properties are read every CONFIG_MAX_AGE; a table grown quiet to a 5-minute
    interval reads them every CONFIG_POLLS polls (50 minutes), so an idle poll stays one request; one with
    change notifications reads them when an event names it, never on a sweep."""
    (uri,) = _local_fleet(tmp_path, 1)
    storage = Storage.for_uri(uri)
    table = WatchedTable(uri, "t", TableSettings(), storage)
    assert config_max_age(table, announced=False) == CONFIG_MAX_AGE
    table.poll_interval = 30.0
    assert config_max_age(table, announced=False) == CONFIG_MAX_AGE
    table.poll_interval = 300.0
    assert config_max_age(table, announced=False) == CONFIG_POLLS * 300.0
    announced = WatchedTable(uri, "n", TableSettings(change_notifications=True), storage)
    assert config_max_age(announced, announced=False) == float("inf")
    assert config_max_age(announced, announced=True) == 0.0


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


def test_a_command_from_hoodied_ctl_is_logged_and_counted_once_by_the_polling_replica(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 35: ``hoodied ctl pause`` was neither logged by the daemon nor counted in
    hoodied_control_commands_total (the API's commands were). Now the replica that polls the table reports
    each command it reads in the control document, whoever issued it, once; a command already in the
    document when the replica started is not reported again."""
    (uri,) = _local_fleet(tmp_path, 1)
    state = tmp_path / "state"
    config = tmp_path / "a.yaml"
    config.write_text(f"admin: {{state_dir: '{state}'}}\ntables: [{{path: '{uri}', name: a}}]\n")
    assert main_ctl(str(config), "trigger", "a", service="clean", instant=None, reason="old", by="ops") == 0
    daemon = _daemon(f"admin: {{state_dir: '{state}'}}\ntables: [{{path: '{uri}', name: a}}]", state, Clock())
    supervisor = daemon.supervisor
    assert supervisor is not None
    caplog.set_level(logging.INFO, logger="hoodied.poller")
    supervisor.poll()

    def counted(command: str) -> float:
        value = daemon.metrics.registry.get_sample_value(
            "hoodied_control_commands_total", {"table": "a", "command": command}
        )
        return value or 0.0

    assert counted("trigger") == 0  # there before this replica started
    assert main_ctl(str(config), "pause", "a", service=None, instant=None, reason="backfill", by="ops") == 0
    supervisor.poll()
    supervisor.poll()
    assert counted("pause") == 1
    said = [r.getMessage() for r in caplog.records if "by ops" in r.getMessage()]
    assert said == ["table a: pause by ops: backfill"], said
    assert main_ctl(str(config), "resume", "a", service=None, instant=None, reason="", by="bob") == 0
    supervisor.poll()
    assert counted("resume") == 1
    assert counted("pause") == 1
    capsys.readouterr()


# -- adaptive polling (hoodied.poll_interval) ----------------------------------------------------------------

BASE, CEILING = 10.0, 80.0
PACED = f"poll_interval: {BASE:g}s\npoll_interval_max: {CEILING:g}s\n"


def _paced(tmp_path: Path, n: int = 1) -> tuple[Daemon, Supervisor, Clock, list[WatchedTable]]:
    """A daemon of ``n`` quiet tables polled every BASE seconds of its clock, up to every CEILING."""
    clock = Clock()
    uris = ", ".join(f"'{u}'" for u in _local_fleet(tmp_path, n))
    daemon = _daemon(f"{PACED}tables: [{uris}]", tmp_path / "state", clock)
    assert daemon.supervisor is not None
    daemon.supervisor.refresh_tables()
    return daemon, daemon.supervisor, clock, daemon.supervisor.tables()


def _looked_at(supervisor: Supervisor, clock: Clock) -> set[str]:
    """Poll at ``clock``'s time, then move it on by BASE (the daemon's loop); the tables the poll looked at
    (made a storage request for)."""
    before = {t.name: t.storage.requests.snapshot() for t in supervisor.tables()}
    supervisor.poll()
    clock.now += BASE
    return {t.name for t in supervisor.tables() if t.storage.requests.snapshot() != before[t.name]}


def _until_looked_at(supervisor: Supervisor, clock: Clock, table: WatchedTable) -> float:
    """Poll until a poll looks at ``table`` (at most CEILING later); the clock time of that poll."""
    for _ in range(int(CEILING / BASE) + 1):
        at = clock.now
        if table.name in _looked_at(supervisor, clock):
            return at
    raise AssertionError(f"{table.name} was not polled within {CEILING} s")


def _at_the_ceiling(supervisor: Supervisor, clock: Clock, table: WatchedTable) -> None:
    """Poll until ``table`` is at its ceiling and was polled just now (its next poll is far)."""
    for _ in range(20):
        _until_looked_at(supervisor, clock, table)
        if table.poll_interval == CEILING:
            assert table.name not in _looked_at(supervisor, clock)
            return
    raise AssertionError(f"{table.name} stays at {table.poll_interval} s")


def _interval_shown(daemon: Daemon, table: WatchedTable) -> tuple[object, float | None]:
    """The table's interval in ``/status`` and in its gauge."""
    status = daemon.status()["tables"][table.name]  # type: ignore[index]
    gauge = daemon.metrics.registry.get_sample_value(
        "hoodied_table_poll_interval_seconds", {"table": table.name}
    )
    return status["poll_interval"], gauge


def test_a_quiet_table_is_polled_less_often_up_to_its_ceiling(tmp_path: Path) -> None:
    """Polls every BASE seconds for ten minutes: a quiet table's interval doubles at each of its polls up to
    the ceiling, never beyond, so it is looked at (one request) a few times instead of at every poll; its
    interval shows in ``/status`` and in its gauge."""
    daemon, supervisor, clock, (table,) = _paced(tmp_path)
    assert _interval_shown(daemon, table) == (None, None)  # not polled yet
    polled = [clock.now for _ in range(60) if table.name in _looked_at(supervisor, clock)]
    gaps = [b - a for a, b in itertools.pairwise(polled)]
    assert gaps[:2] == [BASE, 2 * BASE], gaps  # cold at the base, then quiet: doubled
    assert gaps[:4] == sorted(gaps[:4]), gaps
    assert all(gap <= CEILING for gap in gaps), gaps
    assert all(gap >= CEILING - BASE for gap in gaps[3:]), gaps  # at the ceiling (less its jitter)
    assert len(polled) <= 12, f"{len(polled)} polls of 60 looked at a quiet table"
    assert table.poll_interval == CEILING
    assert _interval_shown(daemon, table) == (CEILING, CEILING)


def test_quiet_tables_fall_due_apart(tmp_path: Path) -> None:
    """Tables that fell quiet together do not keep coming due in the same polls: the jitter of each wait
    spreads a fleet's polls out. (A jitter fixed per table leaves most of the fleet in step: a poll of this
    window then looks at more than two thirds of it.)"""
    _, supervisor, clock, tables = _paced(tmp_path, FLEET)
    for _ in range(60):
        _looked_at(supervisor, clock)
    assert all(t.poll_interval == CEILING for t in tables)
    per_poll = [len(_looked_at(supervisor, clock)) for _ in range(60)]
    assert sum(per_poll) >= FLEET * 60 * BASE / CEILING  # each table at least once a ceiling
    assert max(per_poll) <= FLEET * 2 / 3, per_poll


def test_a_new_instant_brings_a_quiet_table_back_to_the_base_at_once(tmp_path: Path) -> None:
    """A commit written on a table at its ceiling is seen at the table's next poll (within the ceiling); that
    poll puts it at the base, so the poll after looks at it again."""
    daemon, supervisor, clock, (table,) = _paced(tmp_path)
    _at_the_ceiling(supervisor, clock, table)
    listing = table.listing
    gen = TripGenerator(seed=9, partitions=1)
    TableWriter.open(table.uri).insert(gen.rows(gen.keys(5)))
    _until_looked_at(supervisor, clock, table)
    assert table.listing != listing
    assert table.poll_interval == BASE
    assert _interval_shown(daemon, table) == (BASE, BASE)
    assert table.name in _looked_at(supervisor, clock)


def test_a_table_with_a_pending_instant_is_polled_at_every_poll(tmp_path: Path) -> None:
    """Claims and takeovers move without the timeline: while an instant is pending on a table, each poll
    looks at it, however long its timeline stays as it is."""
    _, supervisor, clock, (table,) = _paced(tmp_path)
    _at_the_ceiling(supervisor, clock, table)
    instant = schedule_compaction(table.storage, lock_for_table(table.storage, {})).instant
    assert instant is not None
    _until_looked_at(supervisor, clock, table)
    for _ in range(12):
        assert table.name in _looked_at(supervisor, clock)
        assert table.poll_interval == BASE
        assert [item.instant for item in table.items] == [instant]


def test_a_job_of_ours_ending_on_a_table_brings_it_back_to_the_base_at_once(tmp_path: Path) -> None:
    """A run of ours on a table at its ceiling ends (here one that finds its instant gone: the timeline stays
    as it was): the next poll looks at the table, at the base."""
    _, supervisor, clock, (table,) = _paced(tmp_path)
    _at_the_ceiling(supervisor, clock, table)
    gone = Instant("20990101000000000", "compaction", State.REQUESTED)
    assert supervisor.run_item(WorkItem(table, "compaction", gone)) is None
    listing = table.listing
    assert table.name in _looked_at(supervisor, clock)
    assert table.listing == listing
    assert table.poll_interval == BASE


def test_an_operators_command_brings_a_quiet_table_back_to_the_base_at_once(tmp_path: Path) -> None:
    """A pause for a table at its ceiling is read at the start of the next poll, which then polls the table
    (it says it is paused) at the base; the document unchanged, the table grows quiet again."""
    _, supervisor, clock, (table,) = _paced(tmp_path)
    _at_the_ceiling(supervisor, clock, table)
    assert supervisor.control is not None
    supervisor.control.update(table.key, lambda c: apply_command(c, Command("pause", by="ops", reason="fix")))
    assert table.name in _looked_at(supervisor, clock)
    assert table.poll_interval == BASE
    assert table.blocked["compaction"] == ("paused", "table paused by ops: fix")
    assert table.name in _looked_at(supervisor, clock)
    assert table.poll_interval == 2 * BASE


def test_a_quiet_table_is_polled_when_its_scheduling_comes_due(tmp_path: Path) -> None:
    """Time-based triggers move without the timeline: a quiet table whose compaction hoodied schedules is
    polled (and its scheduling evaluated) at least every reschedule_interval, below its ceiling."""
    clock = Clock()
    (uri,) = _local_fleet(tmp_path, 1)
    text = f"{PACED}reschedule_interval: 40s\ntables: [{{path: '{uri}', schedule: [compaction]}}]"
    daemon = _daemon(text, tmp_path / "state", clock)
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.refresh_tables()
    (table,) = supervisor.tables()
    polled = [clock.now for _ in range(60) if table.name in _looked_at(supervisor, clock)]
    gaps = [b - a for a, b in itertools.pairwise(polled)]
    assert all(gap <= 40.0 for gap in gaps), gaps
    assert gaps[-3:] == [40.0] * 3, gaps
    assert "does not fire" in table.schedule_reasons["compaction"]
    assert table.poll_interval == CEILING  # quiet all along: its scheduling requested nothing


def _events_counted(daemon: Daemon, source: str, outcome: str) -> float:
    return (
        daemon.metrics.registry.get_sample_value(
            "hoodied_change_events_total", {"source": source, "outcome": outcome}
        )
        or 0.0
    )


def test_a_table_whose_changes_are_announced_is_polled_on_an_event_and_else_at_its_sweep(
    tmp_path: Path,
) -> None:
    """With change_notifications a quiet table's interval grows up to the sweep interval (not
    poll_interval_max): a commit nobody announced waits for the sweep, and is counted as found by it; an
    event naming the table (its base path, spelled any way) polls it at once, at the base again. An event
    for a path nobody watches is counted as naming no table."""
    clock = Clock()
    (uri,) = _local_fleet(tmp_path, 1)
    sweep = 40 * BASE
    daemon = _daemon(
        f"{PACED}notifications: {{sweep_interval: {sweep:g}s}}\n"
        f"defaults: {{change_notifications: true}}\ntables: ['{uri}']",
        tmp_path / "state",
        clock,
    )
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.refresh_tables()
    (table,) = supervisor.tables()
    for _ in range(200):
        _looked_at(supervisor, clock)
        if table.poll_interval == sweep:
            break
    assert table.poll_interval == sweep  # beyond poll_interval_max (CEILING)
    _until_polled_just_now(supervisor, clock, table, sweep)
    gen = TripGenerator(seed=11, partitions=1)
    TableWriter.open(table.uri).insert(gen.rows(gen.keys(5)))  # a writer whose callback was lost
    unseen = table.listing
    for _ in range(int(CEILING / BASE) + 2):  # longer than poll_interval_max: still not looked at
        assert table.name not in _looked_at(supervisor, clock)
    assert table.listing == unseen
    clock.now += sweep
    assert table.name in _looked_at(supervisor, clock)  # the sweep
    assert table.listing != unseen
    assert (
        daemon.metrics.registry.get_sample_value("hoodied_sweep_found_changes_total", {"table": table.name})
        == 1
    )
    _until_polled_just_now(supervisor, clock, table, sweep)
    TableWriter.open(table.uri).insert(gen.rows(gen.keys(5)))
    announced = table.listing
    daemon.events.announce(Announcement(f"file://{table.uri}/", "commit_callback", None, time.time()))
    daemon.events.announce(Announcement(str(tmp_path / "nobody"), "commit_callback", None, time.time()))
    assert table.name in _looked_at(supervisor, clock)  # at once
    assert table.listing != announced
    assert table.poll_interval == BASE
    assert _events_counted(daemon, "commit_callback", "received") == 2
    assert _events_counted(daemon, "commit_callback", "table") == 1
    assert _events_counted(daemon, "commit_callback", "no_table") == 1
    assert (
        daemon.metrics.registry.get_sample_value("hoodied_sweep_found_changes_total", {"table": table.name})
        == 1
    )  # the announced change is not the sweep's


def _until_polled_just_now(supervisor: Supervisor, clock: Clock, table: WatchedTable, within: float) -> None:
    """Poll until a poll looks at ``table`` (within ``within`` seconds of ``clock``)."""
    for _ in range(int(within / BASE) + 2):
        if table.name in _looked_at(supervisor, clock):
            return
    raise AssertionError(f"{table.name} was not polled within {within} s")


def test_an_event_for_a_new_table_under_a_discovery_root_has_it_watched_at_once(tmp_path: Path) -> None:
    """A discovery root is scanned every ten polls' time; an event naming a table below it that nobody
    watches yet has the root scanned in the poll that takes the event, and the table polled in it."""
    clock = Clock()
    lake = tmp_path / "lake"
    template = _template(tmp_path / "src")
    first = str(lake / "t00")
    shutil.copytree(template, first)
    daemon = _daemon(f"{PACED}discover: [{{root: '{lake}'}}]", tmp_path / "state", clock)
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.refresh_tables()
    _looked_at(supervisor, clock)
    assert [t.uri for t in supervisor.tables()] == [first]
    second = lake / "t_new"
    shutil.copytree(template, second)
    _looked_at(supervisor, clock)
    assert len(supervisor.tables()) == 1  # not rescanned yet
    daemon.events.announce(Announcement(str(second), "commit_callback", None, time.time()))
    supervisor.poll()
    (new,) = [t for t in supervisor.tables() if t.uri == str(second)]
    assert new.listing is not None  # watched, and polled in the same poll
    assert _events_counted(daemon, "commit_callback", "table") == 1


@pytest.mark.s3
def test_a_slow_store_and_a_missing_bucket_hold_up_no_other_table(
    s3_server: S3Server, s3_faults: FaultProxy, tmp_path: Path
) -> None:
    """One table's store answers after 8 s, another's bucket does not exist: every other table is polled at
    every pass, a pass lasts about the deadline (poll_deadline 1 s), the slow table's poll goes on alone and
    counts as an overrun, and the missing bucket fails at once, on one line, without retries."""
    template = _template(tmp_path)
    prefix = f"s3://lake/fleet-{tmp_path.name}"
    quick = [s3_server.upload(template, f"{prefix}/t{i}") for i in range(4)]
    slow = s3_server.upload(template, f"{prefix}/slow")
    options = ", ".join(f"{k}: '{v}'" for k, v in s3_faults.storage_options().items())
    entries = [f"  - {u}" for u in quick] + [
        f"  - {{path: {slow}, storage_options: {{{options}}}}}",
        "  - s3://hoodied-no-such-bucket/gone",
    ]
    config = DaemonConfig.parse(
        f"metrics: {{port: null}}\nspark: {{fair_pools: false}}\n{EVERY_POLL}poll_deadline: 1s\n"
        "tables:\n" + "\n".join(entries) + "\n"
    )
    metrics = Metrics(replica="test")
    supervisor = Supervisor(
        config,
        EmbeddedCoordination(metrics),
        metrics,
        Heartbeats(started_at=time.time()),
        _no_spark,
        control=FileControlStore(tmp_path / "state"),
    )
    began = time.monotonic()
    supervisor.poll()  # cold
    assert time.monotonic() - began < 5.0  # the missing bucket answered at once (no retries)
    by_name = {t.name: t for t in supervisor.tables()}
    gone = by_name["gone"]
    assert gone.last_error is not None
    assert "\n" not in gone.last_error, gone.last_error
    assert "NoSuchBucket" in gone.last_error, gone.last_error
    polls = {name: t.polls for name, t in by_name.items()}

    s3_faults.inject(kind="slow", delay=8.0, match=r"(/|%2F)slow(/|%2F)")  # (a listing's prefix: %2F)
    for _ in range(3):
        began = time.monotonic()
        supervisor.poll()
        assert time.monotonic() - began < 3.0  # the deadline (1 s) and a margin, not the store's 8 s
    for name in ("t0", "t1", "t2", "t3"):
        assert by_name[name].polls == polls[name] + 3, name
    assert by_name["slow"].polls == polls["slow"]  # its one poll still runs
    assert by_name["slow"].overran
    assert table_status(by_name["slow"], {})["poll_overran"] is True
    overruns = supervisor.metrics.exposition().decode()
    assert 'hoodied_table_poll_overruns_total{table="slow"} 1.0' in overruns

    s3_faults.heal()
    assert supervisor.wait_polls(20.0)
    supervisor.poll()
    assert by_name["slow"].polls == polls["slow"] + 2  # the one that overran, then this pass's
    assert not by_name["slow"].overran
    assert by_name["slow"].last_error is None


def test_a_rollback_left_pending_after_its_instant_was_removed_is_finished_after_the_grace(
    tmp_path: Path,
) -> None:
    """A stale holder's rollback plan that landed after its instant was rolled back for good (chaos seed
    603) is finished by the table's poller once seen pending for takeover_grace, under the table lock; the
    file it names goes, and hoodied_orphaned_rollbacks_total counts it."""
    (uri,) = _local_fleet(tmp_path, 1)
    storage = Storage.for_uri(uri)
    config = Table.load(storage).config
    gone = InstantTimeGenerator().next(storage, config)
    (existing, *_) = sorted(p for p in Path(uri).rglob("*.parquet") if ".hoodie" not in p.parts)
    leftover = existing.with_name(f"{existing.name.split('_', 1)[0]}_0-9-0_{gone}.parquet")
    shutil.copy(existing, leftover)
    relative = str(leftover.relative_to(uri))
    plan = RollbackPlan(
        instant_to_rollback=InstantInfo(gone, "replacecommit"),
        rollback_requests=(
            RollbackRequest(
                partition_path=relative.rsplit("/", 1)[0],
                file_id="",
                latest_base_instant="",
                files_to_be_deleted=(storage.full_path(relative),),
            ),
        ),
    )
    writer = TimelineWriter(storage, config, FileSystemLock(storage))
    rollback = InstantTimeGenerator().next(storage, config)
    writer.request(ROLLBACK, rollback, encode_rollback_plan(plan, table_version=config.table_version))
    clock = Clock()
    daemon = _daemon(f"{EVERY_POLL}tables: ['{uri}']", tmp_path / "state", clock)
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.poll()
    assert leftover.exists()  # within the grace: a writer may be finishing it
    clock.now += supervisor.config.jobs.takeover_grace
    supervisor.poll()
    assert not leftover.exists()
    done = Table.load(storage).timeline.get(rollback)
    assert done is not None
    assert done.state is State.COMPLETED
    (table,) = supervisor.tables()
    assert (
        supervisor.metrics.registry.get_sample_value(
            "hoodied_orphaned_rollbacks_total", {"table": table.name}
        )
        == 1.0
    )


def test_files_a_voided_attempt_lands_late_are_swept_after_the_grace_and_at_the_horizon(
    tmp_path: Path,
) -> None:
    """A takeover that completed an instant after voiding an earlier attempt hands the poller where that
    attempt may still land files (hoodie.write.late_files): they are swept once a takeover_grace after the
    poller saw it, and again at the horizon after which no held request lands; only files of the voided
    attempt go, and hoodied_late_files_deleted_total counts them."""
    (uri,) = _local_fleet(tmp_path, 1)
    storage = Storage.for_uri(uri)
    table_view = Table.load(storage)
    T = table_view.timeline.completed_writes()[-1].time
    named = table_view.commit_metadata(T).written_file_paths
    winner = next(p for p in named if p.endswith(".parquet"))
    folder, name = winner.rsplit("/", 1)
    file_id, token, rest = name.split("_", 2)
    voided = 77
    assert void_attempts(storage, T, [voided], by=None) is None
    late_name = f"{folder}/{file_id}_{token.split('-')[0]}-{voided}-0_{rest}"
    not_voided = f"{folder}/{file_id}_{token.split('-')[0]}-78-0_{rest}"  # no void decision: kept
    for path in (late_name, not_voided):
        shutil.copy(Path(uri) / winner, Path(uri) / path)
    clock = Clock()
    daemon = _daemon(f"{EVERY_POLL}tables: ['{uri}']", tmp_path / "state", clock)
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.poll()
    (table,) = supervisor.tables()
    table.late_files.append(LateFiles(T, ((folder, file_id),), frozenset({voided, 78})))
    supervisor.poll()
    assert (Path(uri) / late_name).exists()  # within the grace
    clock.now += supervisor.config.jobs.takeover_grace
    supervisor.poll()
    assert not (Path(uri) / late_name).exists()
    assert (Path(uri) / not_voided).exists()
    assert all((Path(uri) / p).exists() for p in named)
    jobs = supervisor.config.jobs
    times = late_sweep_times(jobs.takeover_grace, jobs.late_request_horizon)
    assert times[0] == jobs.takeover_grace
    assert times[-1] == jobs.late_request_horizon == 900.0
    for before, after in itertools.pairwise(times):
        shutil.copy(Path(uri) / winner, Path(uri) / late_name)  # a request held longer lands
        clock.now += after - before
        supervisor.poll()
        assert not (Path(uri) / late_name).exists()
    assert not table.late_sweeps
    deleted = supervisor.metrics.registry.get_sample_value(
        "hoodied_late_files_deleted_total", {"table": table.name}
    )
    assert deleted == len(times)
    pending = supervisor.metrics.registry.get_sample_value(
        "hoodied_late_sweeps_pending", {"table": table.name}
    )
    assert pending == 0.0


def test_the_poller_of_a_table_sweeps_what_a_takeover_elsewhere_voided(tmp_path: Path) -> None:
    """The replica that voided an attempt may die before its sweeps: the void decision stays on storage, and
    the replica polling the table looks for recent ones when a completed rollback it has not looked after
    shows up on the timeline (every takeover rolls back what it voids), then sweeps them as its own, until
    jobs.late_request_horizon; with no new rollback it does not look again."""
    (uri,) = _local_fleet(tmp_path, 1)
    storage = Storage.for_uri(uri)
    view = Table.load(storage)
    T = view.timeline.completed_writes()[-1].time
    winner = next(p for p in view.commit_metadata(T).written_file_paths if p.endswith(".parquet"))
    folder, name = winner.rsplit("/", 1)
    file_id, token, rest = name.split("_", 2)
    clock = Clock()
    daemon = _daemon(
        f"{EVERY_POLL}jobs: {{late_request_horizon: 2m}}\ntables: ['{uri}']", tmp_path / "state", clock
    )
    supervisor = daemon.supervisor
    assert supervisor is not None
    supervisor.poll()
    (table,) = supervisor.tables()
    assert table.owned
    assert not table.late_sweeps
    # Elsewhere: a takeover voids attempt 5 and rolls it back; the voided attempt's held PUT lands late.
    assert void_attempts(storage, T, [5], by=6) is None
    writer = TimelineWriter(storage, view.config, FileSystemLock(storage))
    rollback = InstantTimeGenerator().next(storage, view.config)
    rolled = writer.start(writer.request(ROLLBACK, rollback, b""))
    metadata = RollbackMetadata(rollback, 1, 0, (T,), {}, (InstantInfo(T, "commit"),))
    writer.complete(rolled, encode_rollback_metadata(metadata, table_version=view.config.table_version))
    late = Path(uri) / folder / f"{file_id}_{token.split('-')[0]}-5-0_{rest}"
    shutil.copy(Path(uri) / winner, late)
    supervisor.poll()  # the poll that loads the rollback; its sweeps are planned at the next
    supervisor.poll()
    assert table.voids_looked_after == rollback
    times = late_sweep_times(supervisor.config.jobs.takeover_grace, 120.0)
    assert times[-1] == 120.0
    assert len(table.late_sweeps) == len(times)
    clock.now += times[0]
    supervisor.poll()
    assert not late.exists()
    assert (Path(uri) / winner).exists()
    clock.now += 121.0
    supervisor.poll()
    assert not table.late_sweeps  # swept to the horizon, and not planned again: no newer rollback
    assert (
        supervisor.metrics.registry.get_sample_value("hoodied_late_sweeps_pending", {"table": table.name})
        == 0.0
    )


def test_a_store_error_told_again_with_another_latency_is_the_same_cause() -> None:
    """A store's error names the request's latency; a table failing again for one cause is logged once."""
    one = "StoreRefused: cannot list s3://b/t/.hoodie: Error performing GET in 419.2ms - 404 NoSuchBucket"
    two = "StoreRefused: cannot list s3://b/t/.hoodie: Error performing GET in 13.817901ms - 404 NoSuchBucket"
    assert _same_cause(one) == _same_cause(two)
    assert _same_cause(one) != _same_cause(one.replace("404 NoSuchBucket", "403 AccessDenied"))


@pytest.mark.parametrize("most", [3, 2])
def test_job_counters_exist_at_zero_only_for_fleets_up_to_a_size(tmp_path: Path, most: int) -> None:
    """Job counters at 0 from a table's first poll cost 35 series a table: a replica watching more tables
    than metrics.zero_series_max_tables leaves them to the table's first job."""
    uris = _local_fleet(tmp_path, 3)
    config = DaemonConfig.parse(
        f"metrics: {{port: null, zero_series_max_tables: {most}}}\nspark: {{fair_pools: false}}\n"
        f"{EVERY_POLL}tables: [{', '.join(repr(u) for u in uris)}]"
    )
    daemon = Daemon(config)
    daemon.supervisor = Supervisor(
        config,
        EmbeddedCoordination(daemon.metrics),
        daemon.metrics,
        daemon.heartbeats,
        _no_spark,
        control=FileControlStore(tmp_path / "state"),
    )
    daemon.supervisor.poll()
    started = daemon.metrics.registry.get_sample_value(
        "hoodied_jobs_started_total", {"table": "t00", "action": "compaction"}
    )
    assert started == (0.0 if most >= 3 else None)
