"""``hoodied ctl`` and ``hoodied history``: the operators' commands and the tables' history from a shell.

``hoodied ctl COMMAND --config FILE TABLE [--service S] [--instant T] --reason WHY`` writes the command
where every replica reads it (ZooKeeper, or the embedded state folder: :mod:`hoodied.control`), as the API
does; it needs what the configuration gives the daemon (ZooKeeper's address and credentials), not the admin
token. ``hoodied history --config FILE [TABLE]`` prints the newest records of each table's history.
"""

from __future__ import annotations

import getpass
import json
import socket
import threading
import time
from collections.abc import Sequence

from hoodied.commands import check_command, issue, pending_times
from hoodied.config import DaemonConfig
from hoodied.control import Command, ControlError
from hoodied.coordination import EmbeddedCoordination
from hoodied.daemon import _no_spark, _zookeeper, control_store
from hoodied.health import Heartbeats
from hoodied.history import HistoryRecord, read_history
from hoodied.metrics import Metrics
from hoodied.poller import Poller
from hoodied.runner import Runner
from hoodied.scheduler import Scheduler
from hoodied.work import WatchedTable
from hoodied.zookeeper import ZooKeeper


def default_operator() -> str:
    """Who gives a command from this shell: ``user@host``."""
    try:
        user = getpass.getuser()
    except Exception:
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def watched_tables(config: DaemonConfig) -> list[WatchedTable]:
    """The tables the configuration names or discovers, labelled as the daemon labels them."""
    metrics = Metrics(replica=config.replica)
    coordination = EmbeddedCoordination(metrics)
    stopping = threading.Event()
    failures: list[str] = []
    scheduler = Scheduler(config, coordination, metrics, stopping)
    runner = Runner(config, coordination, metrics, _no_spark, stopping, failures)
    poller = Poller(
        config, coordination, metrics, Heartbeats(time.time()), scheduler, runner, stopping, failures
    )
    poller.refresh_tables()
    return poller.tables()


def _find(tables: Sequence[WatchedTable], name: str) -> WatchedTable:
    for t in tables:
        if t.name == name:
            return t
    known = ", ".join(sorted(t.name for t in tables)) or "none"
    raise ControlError(f"no table {name!r} in the configuration (tables: {known})")


def main_ctl(
    config_path: str,
    command: str,
    table_name: str,
    *,
    service: str | None,
    instant: str | None,
    reason: str,
    by: str | None,
) -> int:
    """Issue one command; prints the table's control document. Exit 0, or 2 with the reason it was refused."""
    config = DaemonConfig.load(config_path)
    zk: ZooKeeper | None = _zookeeper(config, None, None) if config.zookeeper is not None else None
    try:
        table = _find(watched_tables(config), table_name)
        cmd = Command(command, by or default_operator(), reason, service, instant)
        check_command(table, cmd, pending_times(table) if command == "cancel" else None)
        written = issue(
            control_store(config, zk),
            table,
            cmd,
            replica=f"ctl@{socket.gethostname()}",
            history_keep=config.admin.history_keep,
        )
    except ControlError as e:
        print(f"hoodied ctl: {e}")
        return 2
    finally:
        if zk is not None:
            zk.stop()
    print(json.dumps({"table": table.name, "command": command, "control": written.to_json()}, indent=2))
    return 0


def format_record(r: HistoryRecord) -> str:
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(r.finished_at))
    if r.kind == "control":
        what = " ".join(x for x in (r.service if r.service != "table" else "", r.instant) if x)
        why = f": {r.reason}" if r.reason else ""
        return f"{when}  {r.table}  ctl {r.outcome}{' ' + what if what else ''} by {r.by}{why}"
    tail = f"{r.rows} rows, {r.bytes} bytes, {r.files} files deleted, {r.seconds:.1f} s"
    error = f"  {r.error}" if r.error else ""
    return f"{when}  {r.table}  {r.service} {r.instant} {r.outcome} on {r.replica} ({tail}){error}"


def main_history(config_path: str, table_name: str | None, *, limit: int, as_json: bool) -> int:
    """Print the newest ``limit`` records of each table's history (or of ``table_name``'s), newest first."""
    config = DaemonConfig.load(config_path)
    try:
        tables = watched_tables(config)
        chosen = [_find(tables, table_name)] if table_name else tables
    except ControlError as e:
        print(f"hoodied history: {e}")
        return 2
    records = [r for t in chosen for r in read_history(t.storage, limit=limit)]
    records.sort(key=lambda r: r.finished_at, reverse=True)
    if as_json:
        print(json.dumps([r.to_json() for r in records], indent=2, default=str))
    else:
        for r in records:
            print(format_record(r))
        if not records:
            print("no history yet")
    return 0


__all__ = ["default_operator", "format_record", "main_ctl", "main_history", "watched_tables"]
