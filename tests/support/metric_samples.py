"""A daemon's metrics with every family given a sample, as a long-running daemon's ``/metrics`` has them: for
the tests that check names and labels against what is exported (metrics, dashboards, alert rules)."""

from __future__ import annotations

import datetime as dt

from hoodie.backlog import Backlog, LastSuccess
from hoodied.metrics import Metrics


def touch_everything(m: Metrics) -> None:
    """Give every metric at least one sample."""
    m.tables.set(2)
    m.set_pending("orders", "compaction", 3, 120.0)
    m.job_started("orders", "compaction")
    m.job_finished("orders", "compaction", 42.0, ok=True, records=10, bytes_written=2048, files_deleted=1)
    m.job_started("orders", "clean")
    m.job_finished("orders", "clean", 1.0, ok=False, kind="claim_lost")
    m.instants_scheduled.labels("orders", "compaction").inc()
    m.instants_given_up.labels("orders", "clustering").inc()
    m.corrupt_data.labels("orders", "compaction").inc()
    m.claims_held.set(1)
    m.observe_lock_wait("orders", 0.02)
    m.observe_lock_hold("orders", 0.01)
    m.set_zookeeper_state("CONNECTED")
    m.spark_up.set(1)
    m.poll_finished(0.5, ok=True, now=1_800_000_000.0)
    m.table_poll_finished("orders", 0.1, ok=False)
    m.table_poll_overruns.labels("orders").inc()
    m.orphaned_rollbacks.labels("orders").inc()
    m.late_files_deleted.labels("orders").inc()
    m.late_sweeps_pending.labels("orders").set(0)
    m.config_reloads.labels("applied").inc()
    m.table_poll_interval_seconds.labels("orders").set(60.0)
    m.count_requests("orders", "poll", {"LIST": 1})
    m.change_events.labels("commit_callback", "queued").inc()
    m.change_event_lag_seconds.labels("s3_sqs").set(0.4)
    m.sweep_found_changes.labels("orders").inc()
    m.tables_owned.set(2)
    m.active_timeline_instants.labels("orders").set(40)
    m.instants_archived.labels("orders").inc(10)
    m.set_backlog(
        "orders",
        Backlog(
            delta_commits_since_compaction=12,
            log_bytes_since_compaction=3 * 1024**3,
            commits_since_clean=30,
            small_files=25,
            metadata_lag_instants=2,
            last_success={"compaction": LastSuccess("20261126100000000", "20261126100001000")},
        ),
        dt.datetime(2026, 11, 26, 11, 0, 1),
    )
    m.set_blocked("orders", {"clustering": "paused"}, paused=True)
    m.set_urgency("orders", {"compaction": 13.0})
    m.control_commands.labels("orders", "pause").inc()
