"""The control plane's parts on their own: commands on a control document, both stores (files, and a real
ZooKeeper), the history, the backlog of real generated tables, the API over HTTP (its authorization, an
unusable token file, fields that would forge log lines, the checks of a cancel, credentials in URIs), and the
order in which work is taken by urgency (20 tables, two workers, real Spark)."""

from __future__ import annotations

import json
import logging
import textwrap
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.backlog import BacklogCache, measure_backlog
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodied.api import Api
from hoodied.config import DaemonConfig
from hoodied.control import (
    ACTIVE,
    DRAINING,
    PAUSED,
    Command,
    ControlError,
    FileControlStore,
    Note,
    TableControl,
    ZooKeeperControlStore,
    apply_command,
    commands_between,
)
from hoodied.coordination import EmbeddedCoordination
from hoodied.ctl import main_ctl
from hoodied.daemon import format_status, status_report
from hoodied.health import HealthServer, Heartbeats
from hoodied.history import PRUNE_SLACK, HistoryRecord, append, read_history
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor
from hoodied.work import WatchedTable
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig
from support.zk_server import ZooKeeperServer


def _cmd(command: str, **kw: str) -> Command:
    return Command(command, by=kw.pop("by", "alice"), reason=kw.pop("reason", "why"), **kw)  # type: ignore[arg-type]


# -- commands ------------------------------------------------------------------------------------------------


def test_commands_change_the_document_as_documented() -> None:
    c = TableControl()
    c = apply_command(c, _cmd("pause", reason="backfill"))
    assert c.state == PAUSED
    assert c.note is not None
    assert (c.note.by, c.note.reason) == ("alice", "backfill")
    assert not c.claims_allowed
    assert apply_command(c, _cmd("drain")).state == PAUSED  # already paused: stays paused
    c = apply_command(c, _cmd("resume"))
    assert c.state == ACTIVE
    assert c.claims_allowed
    c = apply_command(c, _cmd("drain"))
    assert c.state == DRAINING
    assert not c.claims_allowed
    c = apply_command(TableControl(), _cmd("cancel", service="compaction", instant="20261126000000001"))
    assert c.is_cancelled("compaction", "20261126000000001") is not None
    c = apply_command(c, _cmd("retry", service="compaction", instant="20261126000000001", by="bob"))
    assert c.is_cancelled("compaction", "20261126000000001") is None
    note = c.retry_note("compaction", "20261126000000001")
    assert note is not None
    assert note.by == "bob"
    c = apply_command(c, _cmd("trigger", service="clean"))
    assert "clean" in c.triggers
    assert TableControl.decode(c.encode()) == c


def test_the_commands_between_two_documents_are_what_operators_issued() -> None:
    ops = Note("ops", "backfill", 1.0)
    paused = apply_command(TableControl(), Command("pause", "ops", "backfill", at=1.0))
    assert [(c, w) for c, w, _ in commands_between(TableControl(), paused)] == [("pause", "table")]
    assert commands_between(paused, paused) == []
    triggered = apply_command(paused, Command("trigger", "ann", "", "clean", at=2.0))
    assert [(c, w) for c, w, _ in commands_between(paused, triggered)] == [("trigger", "clean")]
    assert commands_between(triggered, paused) == []  # a trigger consumed is no command
    draining = TableControl(state=DRAINING, note=ops)
    drained = TableControl(state=PAUSED, note=Note("ops", "drained: backfill", 3.0))
    assert commands_between(draining, drained) == []  # the daemon's own step
    again = TableControl(state=PAUSED, note=Note("bob", "still", 4.0))
    assert [(c, n.by) for c, _, n in commands_between(drained, again)] == [("pause", "bob")]


def test_bad_commands_are_refused_with_a_reason() -> None:
    with pytest.raises(ControlError, match="unknown command"):
        _cmd("explode")
    with pytest.raises(ControlError, match="needs a service"):
        _cmd("trigger")
    with pytest.raises(ControlError, match="needs an instant"):
        _cmd("cancel", service="compaction")
    with pytest.raises(ControlError, match="who gives it"):
        Command("pause", by=" ")
    # The CLI's commands (hoodied ctl) as the API's: a field cannot start a forged log or history line.
    with pytest.raises(ControlError, match=r"reason must be one line of text: .* U\+000A"):
        Command("pause", by="ops", reason='maintenance\n{"level":"INFO","msg":"resumed by admin"}')
    with pytest.raises(ControlError, match=r"by must be one line of text: .* U\+202E"):
        Command("pause", by="ops\u202e")


def test_stale_one_shot_notes_are_dropped() -> None:
    old = _cmd("retry", service="compaction")
    c = apply_command(TableControl(), Command("retry", "a", "r", "compaction", None, at=time.time() - 7200))
    assert c.retries
    c = apply_command(c, _cmd("pause"))
    assert not c.retries
    assert old.service == "compaction"


def test_a_damaged_document_reads_as_active() -> None:
    assert TableControl.decode(b"{not json") == TableControl()
    assert TableControl.decode(json.dumps({"state": "exploded"}).encode()) == TableControl()


def test_file_store_updates_are_serialised(tmp_path: Path) -> None:
    store = FileControlStore(tmp_path / "state")
    assert store.read_all() == {}

    def add(i: int) -> None:
        store.update("t-1", lambda c: apply_command(c, _cmd("trigger", service=f"s{i}")))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert set(store.read_all()["t-1"].triggers) == {f"s{i}" for i in range(16)}  # no update lost
    with pytest.raises(ControlError):
        store.update("../escape", lambda c: c)


@pytest.mark.zookeeper
def test_zookeeper_store_is_a_compare_and_set(zookeeper_server: ZooKeeperServer) -> None:
    zks = [
        ZooKeeper(
            ZooKeeperConfig(connect=zookeeper_server.connect, base_path="/ctl-test"), {"replica": f"r{i}"}
        )
        for i in range(2)
    ]
    for zk in zks:
        zk.start()
    try:
        stores = [ZooKeeperControlStore(zk) for zk in zks]
        assert stores[0].read_all() == {}

        def add(i: int) -> None:
            stores[i % 2].update("t-1", lambda c: apply_command(c, _cmd("trigger", service=f"s{i}")))

        threads = [threading.Thread(target=add, args=(i,)) for i in range(12)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seen = stores[1].read_all()["t-1"]
        assert set(seen.triggers) == {f"s{i}" for i in range(12)}
        stores[0].update("t-1", lambda c: apply_command(c, _cmd("pause")))
        assert stores[1].read_all()["t-1"].state == PAUSED
    finally:
        for zk in zks:
            zk.stop()


# -- history -------------------------------------------------------------------------------------------------


def _record(i: int, service: str = "compaction") -> HistoryRecord:
    return HistoryRecord(
        table="t",
        service=service,
        instant=f"2026112600000{i:04d}",
        replica="r0",
        started_at=1_800_000_000.0 + i,
        finished_at=1_800_000_001.0 + i,
        outcome="done",
        ok=True,
        rows=i,
    )


def test_history_is_newest_first_bounded_and_filtered(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    keep = 10
    for i in range(keep + PRUNE_SLACK + 1):
        append(storage, _record(i, "compaction" if i % 2 else "clean"), keep=keep)
    files = list((tmp_path / ".hoodie/.aux/hoodied/history").iterdir())
    assert len(files) == keep  # rotated: the oldest went
    newest = read_history(storage, limit=3)
    assert [r.rows for r in newest] == [keep + PRUNE_SLACK, keep + PRUNE_SLACK - 1, keep + PRUNE_SLACK - 2]
    assert all(r.service == "clean" for r in read_history(storage, limit=100, service="clean"))
    (tmp_path / ".hoodie/.aux/hoodied/history/9999999999999-job-x-y-z.json").write_text("{broken")
    assert len(read_history(storage, limit=100)) == keep  # the damaged record is skipped


# -- backlog -------------------------------------------------------------------------------------------------


def test_backlog_of_a_generated_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=80, commits=4, partitions=1, seed=3))
    table = Table.open(str(root))
    cache = BacklogCache()
    b = measure_backlog(table, table.config.props, cache)
    deltas = [i for i in table.timeline.completed() if i.action == "deltacommit"]
    assert b.delta_commits_since_compaction == len(deltas) >= 3
    assert b.log_bytes_since_compaction > 0  # the upserts wrote log files
    assert b.commits_since_clean == len(table.timeline.completed_writes())
    assert b.small_files >= 1  # the first commit's base files are small
    assert b.active_timeline_instants == len(table.timeline)
    assert "compaction" not in b.last_success
    cached = len(cache.writes)
    assert measure_backlog(table, table.config.props, cache) == b
    assert len(cache.writes) == cached
    # After a compaction, its deltacommits no longer count.
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    assert schedule_compaction(storage, lock).instant is not None
    compact_in_process(storage, lock)
    after = measure_backlog(Table.open(str(root)), table.config.props, cache)
    assert after.delta_commits_since_compaction == 0
    assert after.log_bytes_since_compaction == 0
    assert "compaction" in after.last_success


# -- the API -------------------------------------------------------------------------------------------------


def _request(
    url: str, method: str = "GET", body: dict[str, object] | None = None, token: str | None = None
) -> tuple[int, dict[str, object]]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_api_refuses_changes_without_the_token_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "orders"
    generate_table(str(root), GenerateSpec(table_version=8, rows=20, commits=1, partitions=1, seed=1))
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    store = FileControlStore(tmp_path / "state")
    table = WatchedTable(
        str(root),
        "orders",
        DaemonConfig.parse(f"tables: [{root}]").tables[0].settings,
        Storage.for_uri(str(root)),
    )
    metrics = Metrics()
    api = Api(
        replica="r0",
        status=lambda _query: {"replica": "r0", "tables": {"orders": {"uri": str(root)}}},
        tables=lambda: [table],
        store=store,
        token_file=str(token_file),
        metrics=metrics,
        history_keep=10,
    )
    with HealthServer(metrics, Heartbeats(time.time()), 1.0, api=api) as server:
        url = f"{server.url}/api/v1/tables/orders"
        assert _request(f"{url}/pause", "POST", {"reason": "x"})[0] == 401
        assert _request(f"{url}/pause", "POST", {"reason": "x"}, token="wrong")[0] == 401
        assert store.read_all() == {}  # nothing changed
        assert read_history(table.storage) == []
        status, body = _request(f"{url}/pause", "POST", {"reason": "backfill", "by": "alice"}, token="s3cret")
        assert status == 200
        assert body["control"]["state"] == "paused"
        assert store.read_all()[table.key].state == PAUSED
        assert _request(f"{url}/trigger", "POST", {}, token="s3cret")[0] == 400  # needs a service
        assert _request(f"{url}/trigger", "POST", {"service": "nope"}, token="s3cret")[0] == 400
        assert _request(f"{server.url}/api/v1/tables/missing/pause", "POST", {}, token="s3cret")[0] == 404
        status, history = _request(f"{url}/history")
        assert status == 200
        assert isinstance(history, list)
        assert history[0]["outcome"] == "pause"
        assert history[0]["by"] == "alice"
        assert history[0]["reason"] == "backfill"
        with urllib.request.urlopen(server.url + "/", timeout=10) as r:
            assert r.headers["Content-Type"].startswith("text/html")
            assert b"orders" in r.read()
        token_file.unlink()  # no token: changes are refused, reads go on
        assert _request(f"{url}/resume", "POST", {}, token="s3cret")[0] == 403
        assert _request(url)[0] == 200


@contextmanager
def _api_server(
    tmp_path: Path, token: bytes | None = b"s3cret\n", uri: str | None = None, commits: int = 1
) -> Iterator[tuple[str, WatchedTable, FileControlStore]]:
    """A served API over one generated table ``orders``: the tables' URL, the table, the control store.
    ``token``: the token file's bytes (None: a folder where the file should be); ``uri``: the table's URI as
    the status shows it (default its path)."""
    root = tmp_path / "orders"
    generate_table(str(root), GenerateSpec(table_version=8, rows=20, commits=commits, partitions=1, seed=1))
    token_file = tmp_path / "token"
    if token is None:
        token_file.mkdir()
    else:
        token_file.write_bytes(token)
    store = FileControlStore(tmp_path / "state")
    table = WatchedTable(
        str(root),
        "orders",
        DaemonConfig.parse(f"tables: [{root}]").tables[0].settings,
        Storage.for_uri(str(root)),
    )
    metrics = Metrics()
    shown = uri or str(root)
    api = Api(
        replica="r0",
        status=lambda _query: {
            "replica": "r0",
            "tables": {"orders": {"uri": shown, "last_error": f"cannot list {shown!r}: timed out"}},
        },
        tables=lambda: [table],
        store=store,
        token_file=str(token_file),
        metrics=metrics,
        history_keep=10,
    )
    with HealthServer(metrics, Heartbeats(time.time()), 1.0, api=api) as server:
        yield f"{server.url}/api/v1/tables/orders", table, store


@pytest.mark.parametrize(
    "token", [pytest.param(b"\xff\xfe s3cret", id="not-utf8"), pytest.param(None, id="unreadable-a-folder")]
)
def test_an_unusable_token_file_refuses_changes(tmp_path: Path, token: bytes | None) -> None:
    """A token file that is not UTF-8 text, or cannot be read, is a refusal (403), never a 500, whatever
    token the caller sends; nothing changes."""
    with _api_server(tmp_path, token=token) as (url, table, store):
        for given in (None, "s3cret", "\xff\xfe s3cret"):
            status, body = _request(f"{url}/pause", "POST", {"reason": "x"}, token=given)
            assert status == 403, body
            assert "changes are disabled" in str(body["error"])
        assert store.read_all() == {}
        assert read_history(table.storage) == []
        assert _request(url)[0] == 200  # reads go on


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("reason", "done\n2026-11-27T10:00:00.000Z ERROR hoodied.jobs table orders dropped"),
        ("reason", "carriage\rreturn"),
        ("by", "alice\x1b[2K\rroot"),  # an escape sequence that erases the line on a terminal
        ("reason", "line\u2028separator"),
        ("by", "\u202eecilA"),  # a right-to-left override
        ("reason", "nul\x00byte"),
        ("by", ["alice"]),
        ("reason", {"text": "x"}),
        ("instant", 20261126000000001),
    ],
)
def test_command_fields_cannot_forge_log_lines(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, field: str, value: object
) -> None:
    """``by``, ``reason`` (and ``service``, ``instant``) are strings of one line: a control character, a
    line separator or an invisible format character in one is a 400, and nothing reaches the control store,
    the history or the log."""
    caplog.set_level(logging.DEBUG)
    with _api_server(tmp_path) as (url, table, store):
        body = {"service": "compaction", "reason": "ok", "by": "alice", field: value}
        status, answer = _request(f"{url}/trigger", "POST", body, token="s3cret")
        assert status == 400, answer
        assert field in str(answer["error"])
        assert store.read_all() == {}
        assert read_history(table.storage) == []
    for record in caplog.records:
        message = record.getMessage()
        assert not any(c in message for c in "\n\r\x1b\u2028\u202e\x00"), message


def test_command_fields_in_any_script_are_written_as_given(tmp_path: Path) -> None:
    with _api_server(tmp_path) as (url, table, _):
        reason = "backfill: Straße, 東京, émoji ✓ (ticket #42)"
        status, _ = _request(f"{url}/pause", "POST", {"reason": reason, "by": "Zoë"}, token="s3cret")
        assert status == 200
        [record] = read_history(table.storage)
        assert (record.by, record.reason) == ("Zoë", reason)


def test_a_forged_line_in_the_path_is_logged_escaped(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A path (percent-decoded by the server) with a newline in it is logged escaped, on one line."""
    caplog.set_level(logging.DEBUG)
    with _api_server(tmp_path) as (url, _, _):
        forged = url.replace("/orders", "/x%0A2026-11-27T10:00:00.000Z%20ERROR%20forged")
        assert _request(f"{forged}/pause", "POST", {})[0] == 401
    refused = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused POST")]
    assert refused
    assert all("\n" not in m and "\\n" in m for m in refused), refused


def test_cancel_is_400_for_an_unknown_service_and_409_for_an_instant_not_pending(tmp_path: Path) -> None:
    """As documented: a cancel naming a service that does not exist is 400, one naming an instant that is
    not pending 409, before the table's first poll (read from the table) as after it; a pending instant is
    cancelled."""
    with _api_server(tmp_path, commits=2) as (url, table, store):
        storage = table.storage
        scheduled = schedule_compaction(storage, FileSystemLock(storage)).instant
        assert scheduled is not None
        pending = scheduled.time
        cancel = f"{url}/cancel"
        status, body = _request(cancel, "POST", {"service": "explode", "instant": pending}, token="s3cret")
        assert status == 400, body
        assert "'explode' is not a service" in str(body["error"])
        assert _request(cancel, "POST", {"service": "compaction"}, token="s3cret")[0] == 400  # no instant
        assert table.pending == {}  # not polled yet: the pending instants are read from the table
        status, body = _request(
            cancel, "POST", {"service": "compaction", "instant": "20990101000000000"}, token="s3cret"
        )
        assert status == 409, body
        assert "is not pending" in str(body["error"])
        assert store.read_all() == {}
        table.pending = {"compaction": [], "clustering": [], "logcompaction": [], "clean": []}  # as polled
        status, _ = _request(cancel, "POST", {"service": "compaction", "instant": pending}, token="s3cret")
        assert status == 409  # the poll saw nothing pending
        table.pending = {}
        status, body = _request(cancel, "POST", {"service": "compaction", "instant": pending}, token="s3cret")
        assert status == 200, body
        assert store.read_all()[table.key].is_cancelled("compaction", pending) is not None


def test_credentials_in_a_table_uri_are_not_served(tmp_path: Path) -> None:
    """A URI with credentials written in it shows redacted on ``/api/v1/status``, ``/api/v1/tables``,
    ``/api/v1/tables/<table>`` and the status page, in the URI and in the errors that quote it."""
    uri = "s3://AKIAEXAMPLE:wJalrXUtnFEMI/K7MDENG@lake/orders?x-amz-security-token=FQoGZXIvYXdzEXAMPLE"
    with _api_server(tmp_path, uri=uri) as (url, _, _):
        base = url.removesuffix("/api/v1/tables/orders")
        for path in ("/api/v1/status", "/api/v1/tables", "/api/v1/tables/orders", "/"):
            with urllib.request.urlopen(base + path, timeout=10) as r:
                text = r.read().decode()
            for secret in ("AKIAEXAMPLE", "wJalrXUtnFEMI", "K7MDENG", "FQoGZXIvYXdzEXAMPLE"):
                assert secret not in text, (path, secret)
            assert "s3://***@lake/orders?x-amz-security-token=***" in text, path


# -- priorities ----------------------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize(
    "n_tables", [pytest.param(8, id="8-tables"), pytest.param(20, id="20-tables", marks=pytest.mark.campaign)]
)
def test_the_most_urgent_table_starts_first_and_priority_zero_last(
    tmp_path: Path, spark: object, n_tables: int
) -> None:
    """``n_tables`` tables (20 in the campaign) with 2.. deltacommits since their last compaction, one pending
    compaction each, and two workers: the jobs start in the order of urgency; the table with the biggest
    backlog but priority 0 starts last."""
    roots = []
    step = 7 if n_tables == 20 else 3  # coprime with n_tables: every backlog once, not in name order
    for i in range(n_tables):
        root = tmp_path / f"t{i:02d}"
        commits = 2 + (i * step) % n_tables
        generate_table(
            str(root),
            GenerateSpec(
                table_version=8, rows=20, commits=commits, partitions=1, seed=i, update_fraction=0.5
            ),
        )
        storage = Storage.for_uri(str(root))
        assert schedule_compaction(storage, FileSystemLock(storage)).instant is not None
        roots.append((root, commits))
    lazy = max(roots, key=lambda r: r[1])[0]
    tables = "\n".join(
        f"  - {{path: {root}, services: [compaction], priority: {0 if root == lazy else 1}}}"
        for root, _ in roots
    )
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""\
            replica: r0
            spark: {{max_concurrent_jobs: 2}}
            metrics: {{port: null}}
            admin: {{state_dir: {tmp_path / "state"}}}
            tables:
            """
        )
        + tables
    )
    metrics = Metrics()
    supervisor = Supervisor(
        config,
        EmbeddedCoordination(metrics),
        metrics,
        Heartbeats(time.time()),
        lambda: spark,  # type: ignore[arg-type,return-value]
        control=FileControlStore(tmp_path / "state"),
    )
    items = supervisor.poll()
    assert len(items) == n_tables
    assert supervisor.run_pass(timeout=600)
    started = []
    for root, commits in roots:
        [record] = read_history(Storage.for_uri(str(root)), limit=5)
        assert record.outcome == "done", record
        started.append((record.started_at, root, commits))
    started.sort()
    order = [root for _, root, _ in started]
    print("start order (deltacommits since compaction; priority 0 marked):")
    print(", ".join(f"{c}{'(p0)' if root == lazy else ''}" for _, root, c in started))
    assert order[-1] == lazy, "priority 0 runs only when nothing else is due"
    busy = [c for _, root, c in started if root != lazy]
    # Two workers take the queue head in turn: each start is within one place of the urgency order.
    expected = sorted(busy, reverse=True)
    for position, commits in enumerate(busy):
        assert commits in expected[max(0, position - 1) : position + 2], (busy, expected)
    assert busy[0] in expected[:2]


# -- hoodied status explains ------------------------------------------------------------------------------


def test_status_says_why_each_service_is_or_is_not_due(tmp_path: Path) -> None:
    root = tmp_path / "orders"
    generate_table(str(root), GenerateSpec(table_version=8, rows=40, commits=3, partitions=1, seed=9))
    config_file = tmp_path / "hoodied.yaml"
    config_file.write_text(
        textwrap.dedent(
            f"""\
            replica: r0
            metrics: {{port: null}}
            admin: {{state_dir: {tmp_path / "state"}}}
            tables:
              - {{path: {root}, name: orders, schedule: [compaction, clean]}}
            """
        )
    )
    config = DaemonConfig.load(config_file)
    [entry] = status_report(config)
    nxt = entry["next"]
    assert isinstance(nxt, dict)
    assert nxt["compaction"].startswith("trigger NUM_COMMITS does not fire: 3 deltacommit(s) (bound 5)")
    assert nxt["clustering"] == "nothing pending; hoodied does not schedule clustering on this table"
    assert "commit(s) since the last clean" in nxt["clean"]
    backlog = entry["backlog"]
    assert isinstance(backlog, dict)
    assert backlog["delta_commits_since_compaction"] == 3
    # A pause given with hoodied ctl shows, with who and why, for every service.
    assert (
        main_ctl(
            str(config_file), "pause", "orders", service=None, instant=None, reason="backfill", by="alice"
        )
        == 0
    )
    [entry] = status_report(config)
    assert entry["control"]["state"] == "paused"  # type: ignore[index]
    assert entry["next"]["compaction"] == "table paused by alice: backfill"  # type: ignore[index]
    text = format_status([entry])
    assert "paused by alice: backfill" in text
    assert "backlog: 3 delta commit(s)" in text
    # A bad command is refused with the reason, and nothing is written.
    assert (
        main_ctl(str(config_file), "trigger", "orders", service="nope", instant=None, reason="", by="x") == 2
    )
    assert main_ctl(str(config_file), "pause", "missing", service=None, instant=None, reason="", by="x") == 2
    assert (
        main_ctl(
            str(config_file),
            "cancel",
            "orders",
            service="compaction",
            instant="20990101000000000",
            reason="",
            by="x",
        )
        == 2
    )
