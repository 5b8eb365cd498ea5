"""The scheduler's services without instants (``services/hoodied/scheduler.py``), in this process with
embedded coordination and no Spark: archival runs after the other services of every table that lists it (the
default), under the table lock, says what it did in the metrics, and costs an idle table no claim and no
lock; a table whose ``services`` leave it out is never archived. A pending restore holds every service
back."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

from hoodie import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.archived.load import load_archived_timeline
from hoodied.config import DaemonConfig
from hoodied.coordination import EmbeddedCoordination
from hoodied.daemon import status_report
from hoodied.health import Heartbeats
from hoodied.metrics import Metrics
from hoodied.supervisor import Supervisor
from support.daemon_tables import mor_table

HOODIE = {
    "hoodie.keep.min.commits": "4",
    "hoodie.keep.max.commits": "6",
    "hoodie.clean.commits.retained": "3",
}


def _no_spark() -> object:
    raise AssertionError("archival runs no Spark job")


def _daemon(tables: str) -> Supervisor:
    settings = ", ".join(f"{k}: '{v}'" for k, v in HOODIE.items())
    config = DaemonConfig.parse(
        textwrap.dedent(
            f"""
            metrics: {{port: null}}
            reschedule_interval: 0s
            defaults: {{hoodie: {{{settings}}}}}
            tables:
            """
        )
        + tables
    )
    metrics = Metrics(replica="t")
    return Supervisor(
        config,
        EmbeddedCoordination(metrics),
        metrics,
        Heartbeats(started_at=time.time()),
        _no_spark,  # type: ignore[arg-type]
    )


def _value(s: Supervisor, name: str, **labels: str) -> float:
    return s.metrics.registry.get_sample_value(name, labels) or 0.0


def test_archival_runs_after_a_poll_and_an_idle_table_costs_no_lock(tmp_path: Path) -> None:
    spec = GenerateSpec(table_type="COPY_ON_WRITE", table_version=8, rows=50, commits=9, partitions=1)
    archived_root, kept_root = tmp_path / "orders", tmp_path / "users"
    generate_table(str(archived_root), spec)
    generate_table(str(kept_root), spec)
    s = _daemon(
        f"  - {{path: {archived_root}, name: orders}}\n"
        f"  - {{path: {kept_root}, name: users, services: [compaction, clustering, clean, indexing]}}\n"
    )
    s.refresh_tables()
    assert not s.poll()
    orders = Table.open(str(archived_root))
    assert len(orders.timeline.completed_writes()) == 4
    history = load_archived_timeline(orders.storage, orders.config)
    assert len(history.completed()) == 5
    assert _value(s, "hoodied_instants_archived_total", table="orders") == 5
    assert len(Table.open(str(kept_root)).timeline.completed_writes()) == 9, (
        "archival left out: nothing moved"
    )
    assert _value(s, "hoodied_instants_archived_total", table="users") == 0

    def holds() -> dict[str, float]:
        return {t: _value(s, "hoodied_lock_hold_seconds_count", table=t) for t in ("orders", "users")}

    before = holds()
    assert before["orders"] > 0  # archival took its lock
    s.poll()  # orders changed (archival): its new view is within bounds; users is idle
    s.poll()
    assert holds() == before, "no lock for tables within their bounds"
    assert _value(s, "hoodied_active_timeline_instants", table="orders") == 4
    assert _value(s, "hoodied_active_timeline_instants", table="users") == 9


def test_a_pending_restore_holds_every_service_back(tmp_path: Path) -> None:
    """While a restore is pending, the table offers no work and nothing is scheduled or archived; status
    says why. Once it completes, the pending instants are offered again."""
    t = mor_table(tmp_path / "orders", 8, seed=41)
    s = _daemon(f"  - {{path: {t.root}, name: orders, schedule: [compaction, clean]}}\n")
    s.refresh_tables()
    (watched,) = s.tables()
    restore = t.root / ".hoodie" / "timeline" / "20991231000000000.restore.requested"
    restore.write_bytes(b"")
    assert s.poll() == []
    assert watched.held is not None
    assert "restore 20991231000000000 is requested" in watched.held
    assert watched.pending, "pending work stays in view (metrics, status)"
    restore.unlink()
    items = s.poll()
    assert watched.held is None
    assert {i.instant.time for i in items} == {i.time for i in t.pending}


def test_the_cli_status_says_what_the_daemons_scheduling_says(tmp_path: Path) -> None:
    """(issue 35) ``hoodied status`` previews scheduling by the steps a replica's scheduling takes (the
    trigger, then the plan on the view), writing nothing: where the clustering trigger fires but no file
    is small enough to plan, both say why nothing is planned (the CLI said "trigger fires" where the daemon
    said why the plan was empty); where a plan
    can be made, the CLI says it is due and the daemon's poll then schedules it."""
    root = tmp_path / "orders"
    spec = GenerateSpec(table_type="COPY_ON_WRITE", table_version=8, rows=60, commits=5, partitions=1)
    generate_table(str(root), spec)

    def both(small_file_limit: int) -> tuple[str, str]:
        path = tmp_path / f"hoodied-{small_file_limit}.yaml"
        path.write_text(
            textwrap.dedent(
                f"""
                metrics: {{port: null}}
                reschedule_interval: 0s
                admin: {{state_dir: {tmp_path / "state"}}}
                tables:
                  - path: {root}
                    name: orders
                    services: [clustering]
                    schedule: [clustering]
                    hoodie:
                      hoodie.clustering.async.max.commits: 1
                      hoodie.clustering.plan.strategy.small.file.limit: {small_file_limit}
                      hoodie.clustering.hoodied.recent.write.commits: 0
                """
            )
        )
        config = DaemonConfig.load(path)
        (entry,) = status_report(config)
        before = Table.open(str(root)).timeline.pending()
        assert before == [], before  # the status wrote nothing
        metrics = Metrics(replica="t")
        supervisor = Supervisor(
            config,
            EmbeddedCoordination(metrics),
            metrics,
            Heartbeats(time.time()),
            _no_spark,  # type: ignore[arg-type]
        )
        supervisor.refresh_tables()
        supervisor.poll()
        (table,) = supervisor.tables()
        cli = entry["next"]["clustering"]  # type: ignore[index]
        return str(cli), table.schedule_reasons["clustering"]

    cli, daemon = both(small_file_limit=1)
    assert cli == daemon, (cli, daemon)
    assert "fires" not in cli, cli
    assert Table.open(str(root)).timeline.pending() == []
    cli, daemon = both(small_file_limit=300 * 1024 * 1024)
    assert cli.startswith("due: "), cli
    assert cli.removeprefix("due: ") == daemon, (cli, daemon)
    (scheduled,) = Table.open(str(root)).timeline.pending()
    assert scheduled.action == "replacecommit" or scheduled.action == "clustering"
