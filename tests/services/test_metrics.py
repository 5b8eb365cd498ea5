"""The daemon's metrics: values after the helpers, forgetting a table, and the names a dashboard may use."""

from __future__ import annotations

import datetime as dt

import pytest
from prometheus_client.parser import text_string_to_metric_families

from hoodie.backlog import Backlog, LastSuccess
from hoodied.metrics import (
    FAILURE_KINDS,
    FAILURES_FROM_ZERO,
    METRIC_NAMES,
    SAMPLE_NAMES,
    ZOOKEEPER_STATES,
    Metrics,
)
from support.metric_samples import touch_everything


def value(m: Metrics, name: str, **labels: str) -> float | None:
    return m.registry.get_sample_value(name, labels)


def test_info_names_version_and_replica() -> None:
    m = Metrics(version="1.2.3", replica="hoodied-0")
    assert value(m, "hoodied_info", version="1.2.3", replica="hoodied-0") == 1.0


def test_version_and_replica_have_defaults() -> None:
    text = Metrics().exposition().decode()
    info = next(f for f in text_string_to_metric_families(text) if f.name == "hoodied_info")
    (sample,) = info.samples
    assert sample.labels["version"]
    assert sample.labels["replica"]


def test_each_daemon_has_its_own_registry() -> None:
    a, b = Metrics(), Metrics()  # the same names twice in one process: no "Duplicated timeseries"
    a.tables.set(5)
    assert value(a, "hoodied_tables") == 5.0
    assert value(b, "hoodied_tables") == 0.0


def test_set_pending() -> None:
    m = Metrics()
    m.set_pending("orders", "compaction", 3, 120.5)
    m.set_pending("orders", "clustering", 0, None)
    assert value(m, "hoodied_pending_instants", table="orders", action="compaction") == 3.0
    assert value(m, "hoodied_oldest_pending_age_seconds", table="orders", action="compaction") == 120.5
    assert value(m, "hoodied_pending_instants", table="orders", action="clustering") == 0.0
    assert value(m, "hoodied_oldest_pending_age_seconds", table="orders", action="clustering") == 0.0
    m.set_pending("orders", "compaction", 1, 3.0)
    assert value(m, "hoodied_pending_instants", table="orders", action="compaction") == 1.0
    assert value(m, "hoodied_oldest_pending_age_seconds", table="orders", action="compaction") == 3.0


def test_a_successful_job() -> None:
    m = Metrics()
    m.job_started("orders", "compaction")
    assert value(m, "hoodied_jobs_started_total", table="orders", action="compaction") == 1.0
    assert value(m, "hoodied_jobs_running", action="compaction") == 1.0
    m.job_finished("orders", "compaction", 90.0, ok=True, records=1000, bytes_written=4096, files_deleted=2)
    assert value(m, "hoodied_jobs_running", action="compaction") == 0.0
    assert value(m, "hoodied_jobs_succeeded_total", table="orders", action="compaction") == 1.0
    assert value(m, "hoodied_jobs_failed_total", table="orders", action="compaction", kind="failed") is None
    assert value(m, "hoodied_records_written_total", table="orders", action="compaction") == 1000.0
    assert value(m, "hoodied_bytes_written_total", table="orders", action="compaction") == 4096.0
    assert value(m, "hoodied_files_deleted_total", table="orders", action="compaction") == 2.0
    assert value(m, "hoodied_job_duration_seconds_count", table="orders", action="compaction") == 1.0
    assert value(m, "hoodied_job_duration_seconds_sum", table="orders", action="compaction") == 90.0
    assert (
        value(m, "hoodied_job_duration_seconds_bucket", table="orders", action="compaction", le="60.0") == 0.0
    )
    assert (
        value(m, "hoodied_job_duration_seconds_bucket", table="orders", action="compaction", le="120.0")
        == 1.0
    )


@pytest.mark.parametrize("kind", sorted(FAILURE_KINDS))
def test_a_failed_job_counts_under_its_kind(kind: str) -> None:
    m = Metrics()
    m.job_started("orders", "clustering")
    m.job_finished("orders", "clustering", 5.0, ok=False, kind=kind)
    assert value(m, "hoodied_jobs_failed_total", table="orders", action="clustering", kind=kind) == 1.0
    assert value(m, "hoodied_jobs_succeeded_total", table="orders", action="clustering") is None
    assert value(m, "hoodied_jobs_running", action="clustering") == 0.0
    assert value(m, "hoodied_job_duration_seconds_count", table="orders", action="clustering") == 1.0


def test_job_finished_refuses_a_bad_kind() -> None:
    m = Metrics()
    with pytest.raises(ValueError, match="'oops'"):
        m.job_finished("orders", "compaction", 1.0, ok=False, kind="oops")
    with pytest.raises(ValueError, match="''"):
        m.job_finished("orders", "compaction", 1.0, ok=False)
    with pytest.raises(ValueError, match="succeeded"):
        m.job_finished("orders", "compaction", 1.0, ok=True, kind="failed")
    assert value(m, "hoodied_job_duration_seconds_count", table="orders", action="compaction") is None


def test_bucket_bounds() -> None:
    m = Metrics()
    m.observe_lock_wait("orders", 0.0005)
    m.observe_lock_wait("orders", 200.0)
    assert value(m, "hoodied_lock_wait_seconds_bucket", table="orders", le="0.001") == 1.0
    assert value(m, "hoodied_lock_wait_seconds_bucket", table="orders", le="120.0") == 1.0
    assert value(m, "hoodied_lock_wait_seconds_bucket", table="orders", le="+Inf") == 2.0
    m.job_started("t", "compaction")
    m.job_finished("t", "compaction", 4 * 3600.0, ok=True)
    assert value(m, "hoodied_job_duration_seconds_bucket", table="t", action="compaction", le="1.0") == 0.0
    assert (
        value(m, "hoodied_job_duration_seconds_bucket", table="t", action="compaction", le="14400.0") == 1.0
    )


@pytest.mark.parametrize("state", ["CONNECTED", "SUSPENDED", "LOST", "CLOSED", "connected", None])
def test_zookeeper_state(state: str | None) -> None:
    m = Metrics()
    m.set_zookeeper_state(state)
    expected = "EMBEDDED" if state is None else state.upper()
    for s in ZOOKEEPER_STATES:
        assert value(m, "hoodied_zookeeper_state", hoodied_zookeeper_state=s) == (
            1.0 if s == expected else 0.0
        )
    assert value(m, "hoodied_zookeeper_connected") == (1.0 if expected == "CONNECTED" else 0.0)


def test_zookeeper_state_starts_closed_and_refuses_unknown_states() -> None:
    m = Metrics()
    assert value(m, "hoodied_zookeeper_state", hoodied_zookeeper_state="CLOSED") == 1.0
    assert value(m, "hoodied_zookeeper_state", hoodied_zookeeper_state="CONNECTED") == 0.0
    for bad in ("CONNECTING", "EMBEDDED"):  # EMBEDDED is said with None
        with pytest.raises(ValueError, match=bad):
            m.set_zookeeper_state(bad)


def test_polls() -> None:
    m = Metrics()
    m.poll_finished(1.5, ok=True, now=1_800_000_000.0)
    m.poll_finished(2.0, ok=False, now=1_800_000_060.0)
    assert value(m, "hoodied_poll_duration_seconds_count") == 2.0
    assert value(m, "hoodied_last_successful_poll_timestamp_seconds") == 1_800_000_000.0
    m.table_poll_finished("orders", 0.2, ok=True)
    m.table_poll_finished("orders", 0.3, ok=False)
    m.table_poll_finished("users", 0.3, ok=False)
    assert value(m, "hoodied_table_poll_seconds_count") == 3.0
    assert value(m, "hoodied_table_poll_failures_total", table="orders") == 1.0
    assert value(m, "hoodied_table_poll_failures_total", table="users") == 1.0


def test_a_table_another_replica_lists_keeps_its_counters_and_drops_its_gauges() -> None:
    """(hoodied.table_split) What this replica did on the table stays counted; what the table is like now is
    the owner's to export."""
    m = Metrics()
    for table in ("orders", "users"):
        touch_everything_of(m, table)
    m.forget_table_state("orders")
    assert value(m, "hoodied_pending_instants", table="orders", action="compaction") is None
    assert value(m, "hoodied_table_poll_interval_seconds", table="orders") is None
    assert value(m, "hoodied_jobs_failed_total", table="orders", action="clean", kind="conflict") == 1.0
    assert value(m, "hoodied_table_poll_failures_total", table="orders") == 1.0
    assert value(m, "hoodied_pending_instants", table="users", action="compaction") == 3.0


def test_forget_table_removes_only_that_tables_series() -> None:
    m = Metrics()
    for table in ("orders", "orders2", "users"):
        touch_everything_of(m, table)
    m.forget_table("orders")
    text = m.exposition().decode()
    tables = {
        s.labels["table"]
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if "table" in s.labels
    }
    assert tables == {"orders2", "users"}
    # The series without a table label stay.
    assert value(m, "hoodied_jobs_running", action="compaction") == 0.0
    assert value(m, "hoodied_job_duration_seconds_count", table="orders2", action="compaction") == 1.0
    assert value(m, "hoodied_job_duration_seconds_count", table="orders", action="compaction") is None
    for table in ("orders2", "users"):
        assert value(m, "hoodied_pending_instants", table=table, action="compaction") == 3.0
        assert value(m, "hoodied_jobs_failed_total", table=table, action="clean", kind="conflict") == 1.0
        assert value(m, "hoodied_table_poll_failures_total", table=table) == 1.0
        assert value(m, "hoodied_table_poll_interval_seconds", table=table) == 60.0
    m.forget_table("no-such-table")  # nothing to remove: no error
    m.set_pending("orders", "compaction", 1, 1.0)  # a table forgotten can come back
    assert value(m, "hoodied_pending_instants", table="orders", action="compaction") == 1.0


def touch_everything_of(m: Metrics, table: str) -> None:
    """Give every metric with a table label a series of ``table``."""
    m.set_pending(table, "compaction", 3, 10.0)
    m.job_started(table, "compaction")
    m.job_finished(table, "compaction", 10.0, ok=True, records=1, bytes_written=1, files_deleted=1)
    m.job_started(table, "clean")
    m.job_finished(table, "clean", 1.0, ok=False, kind="conflict")
    m.instants_scheduled.labels(table, "compaction").inc()
    m.instants_given_up.labels(table, "compaction").inc()
    m.table_poll_finished(table, 0.1, ok=False)
    m.table_poll_overruns.labels(table).inc()
    m.orphaned_rollbacks.labels(table).inc()
    m.late_files_deleted.labels(table).inc()
    m.table_poll_interval_seconds.labels(table).set(60.0)
    m.count_requests(table, "poll", {"LIST": 1})
    m.active_timeline_instants.labels(table).set(12)
    m.instants_archived.labels(table).inc(3)
    m.set_backlog(
        table,
        Backlog(
            delta_commits_since_compaction=4,
            log_bytes_since_compaction=1024,
            commits_since_clean=7,
            small_files=2,
            metadata_lag_instants=1,
            last_success={"compaction": LastSuccess("20261126100000000", "20261126100001000")},
        ),
        dt.datetime(2026, 11, 26, 11, 0, 1),
    )
    m.set_blocked(table, {"clustering": "paused"}, paused=True)
    m.set_urgency(table, {"compaction": 5.0})
    m.control_commands.labels(table, "pause").inc()


def test_metric_names_are_the_families_of_a_real_exposition() -> None:
    m = Metrics()
    touch_everything(m)
    text = m.exposition().decode()
    typed = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    assert typed == METRIC_NAMES  # no <name>_created series (issue 35)
    samples = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert samples == SAMPLE_NAMES
    assert "_created" not in text
    # Every family has a sample, and every metric attribute drops the hoodied_ prefix.
    for name in METRIC_NAMES:
        attribute = name.removeprefix("hoodied_").removesuffix("_total")
        assert hasattr(m, attribute), attribute
        assert any(s == name or s.startswith(name + "_") for s in samples), name


def test_job_counters_exist_at_zero_from_a_tables_first_poll() -> None:
    """Issue 35: ``hoodied_jobs_failed_total`` appeared at the first failure, so ``increase()`` (and the
    alert on it) missed that failure. The counters an alert reads exist at 0 for each action of a table."""
    m = Metrics()
    m.count_from_zero("orders", ["compaction", "clean"])
    m.count_from_zero("orders", ["compaction", "clean"])  # every poll calls it: nothing changes
    sample = m.registry.get_sample_value
    for action in ("compaction", "clean"):
        labels = {"table": "orders", "action": action}
        assert sample("hoodied_jobs_started_total", labels) == 0.0
        assert sample("hoodied_jobs_succeeded_total", labels) == 0.0
        for kind in FAILURES_FROM_ZERO:
            assert sample("hoodied_jobs_failed_total", {**labels, "kind": kind}) == 0.0
    assert (
        sample("hoodied_jobs_failed_total", {"table": "orders", "action": "clean", "kind": "cancelled"})
        is None
    )
    m.job_finished("orders", "clean", 1.0, ok=False, kind="failed")
    assert (
        sample("hoodied_jobs_failed_total", {"table": "orders", "action": "clean", "kind": "failed"}) == 1.0
    )
    m.forget_table("orders")
    assert sample("hoodied_jobs_started_total", {"table": "orders", "action": "clean"}) is None
    m.count_from_zero("orders", ["clean"])  # watched again: from zero again
    assert sample("hoodied_jobs_started_total", {"table": "orders", "action": "clean"}) == 0.0
