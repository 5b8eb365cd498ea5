"""The daemon's configuration: the examples in config/ load, every default is the documented one, and every
bad key or value is an error that names it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from hoodie.registry import SERVICE_NAMES
from hoodied.config import (
    ConfigError,
    DaemonConfig,
    JobSettings,
    parse_duration,
)
from hoodied.coordination import ZooKeeperCoordination, table_key
from hoodied.metrics import Metrics

CONFIG_DIR = Path(__file__).resolve().parents[2] / "config"


def _parse(text: str) -> DaemonConfig:
    return DaemonConfig.parse(textwrap.dedent(text))


@pytest.mark.parametrize("name", ["embedded.yaml", "replicas.yaml"])
def test_the_example_configurations_load(name: str) -> None:
    config = DaemonConfig.load(CONFIG_DIR / name)
    assert config.tables
    assert config.embedded == (name == "embedded.yaml")


def test_defaults() -> None:
    config = _parse("tables: [/data/t]")
    assert config.embedded
    assert config.poll_interval == 30.0
    assert config.poll_jitter == 0.1
    assert config.spark.master == "local[*]"
    assert config.spark.max_concurrent_jobs == 2
    assert config.metrics.port == 9464
    assert config.jobs == JobSettings()
    (entry,) = config.tables
    assert entry.settings.services == SERVICE_NAMES
    assert entry.settings.schedule == ()


def test_replicas_example_values() -> None:
    config = DaemonConfig.load(CONFIG_DIR / "replicas.yaml")
    assert config.zookeeper is not None
    assert config.zookeeper.session_timeout == 30.0
    orders = config.tables[0]
    assert orders.name == "orders"
    assert orders.settings.schedule == ("compaction", "clustering", "clean")
    # table settings merge over the defaults'
    assert orders.settings.hoodie["hoodie.clean.commits.retained"] == "10"
    assert orders.settings.hoodie["hoodie.clustering.async.max.commits"] == "4"
    assert config.discover[0].exclude[0].search("tmp_x")


@pytest.mark.parametrize(
    ("value", "seconds"),
    [(30, 30.0), (1.5, 1.5), ("500ms", 0.5), ("30s", 30.0), ("5m", 300.0), ("1h", 3600.0), ("2", 2.0)],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value, "x") == seconds


def test_retry_delay_doubles_up_to_the_cap() -> None:
    jobs = JobSettings(backoff=10, backoff_max=60)
    assert [jobs.retry_delay(n) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 60, 60]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("tables: [{path: /x, servces: [clean]}]", "tables[0].servces: unknown key"),
        ("tables: [{path: /x, schedule: [compact]}]", "tables[0].schedule[0]: 'compact' is not one of"),
        (
            "tables: [{path: /x, schedule: [indexing]}]",
            "tables[0].schedule[0]: 'indexing' is not one of compaction, logcompaction, clustering, clean, "
            "ttl: as in Hudi, an index is built on request (hoodied index PATH --mode schedule",
        ),
        (
            "tables: [{path: /x, services: [clean], schedule: [compaction]}]",
            "tables[0].schedule: compaction is scheduled but not among the services run",
        ),
        ("poll_interval: fast\ntables: [/x]", "poll_interval: 'fast' is not a duration"),
        ("poll_interval: 0\ntables: [/x]", "poll_interval: 0.0 s is below 100ms"),
        ("poll_jitter: 2\ntables: [/x]", "poll_jitter: expected a fraction"),
        (
            "tables: [{path: /x, hoodie: {hoodie.clean.policy: NOPE}}]",
            "tables[0].hoodie: hoodie.clean.policy='NOPE'",
        ),
        (
            "defaults: {hoodie: {hoodie.compaction.strategy: Mine}}\ntables: [/x]",
            "defaults.hoodie: hoodie.compaction.strategy='Mine'",
        ),
        (
            "tables: [{path: /x, hoodie: {hoodie.compact.inline.max.delta.commits: -1}}]",
            "hoodie.compact.inline.max.delta.commits",
        ),
        (
            "tables: [{path: /x, hoodie: {hoodie.clustering.updates.strategy: "
            "SparkConsistentBucketDuplicateUpdateStrategy}}]",
            "tables[0].hoodie: hoodie.clustering.updates.strategy="
            "'SparkConsistentBucketDuplicateUpdateStrategy': the consistent-hashing bucket index's strategy",
        ),
        (
            "tables: [{path: /x, hoodie: {hoodie.clustering.hoodied.recent.write.commit: 3}}]",
            "did you mean hoodie.clustering.hoodied.recent.write.commits?",
        ),
        (
            "tables: [{path: /x, hoodie: {hoodie.clustering.plan.partition.filter.mode: LATEST}}]",
            "tables[0].hoodie: hoodie.clustering.plan.partition.filter.mode='LATEST'",
        ),
        ("tables: [{path: /x, hoodie: {spark.x: 1}}]", "tables[0].hoodie.spark.x: only hoodie.* settings"),
        (
            "tables: [{path: /x, hoodie: {hoodie.clean.comits.retained: 30}}]",
            "tables[0].hoodie: hoodie.clean.comits.retained is not a setting hoodied knows; did you mean "
            "hoodie.clean.commits.retained?",
        ),
        ("spark: {conf: {x: 1}}\ntables: [/x]", "spark.conf.x: only spark.* settings belong here"),
        (
            "spark: {max_concurrent_jobs: 0}\ntables: [/x]",
            "spark.max_concurrent_jobs: expected a whole number",
        ),
        ("metrics: {port: 70000}\ntables: [/x]", "metrics.port: expected a port number"),
        ("logging: {format: xml}\ntables: [/x]", "logging.format: 'xml' is not one of text, json"),
        ("zookeeper: {base_path: /h}\ntables: [/x]", "zookeeper.connect: required"),
        ("zookeeper: {connect: 'h:1', acl: creator}\ntables: [/x]", "zookeeper.acl: 'creator' needs auth"),
        ("zookeeper: {connect: 'h:1', base_path: rel}\ntables: [/x]", "zookeeper.base_path: 'rel' is not"),
        ("zookeeper: {connect: 'h:1', session_timeout: 1s}\ntables: [/x]", "zookeeper.session_timeout"),
        (
            "zookeeper: {connect: 'h:1', auth: [{scheme: digest}]}\ntables: [/x]",
            "zookeeper.auth[0]: needs both scheme and credential",
        ),
        ("tables: [/x, /x]", "tables[1].path: /x is listed twice"),
        (
            "tables: [{path: /x, name: a}, {path: /y, name: a}]",
            "the name 'a' is given to more than one table",
        ),
        ("tables: [{path: /x, name: 'a b'}]", "tables[0].name: 'a b' may hold only"),
        ("discover: [{root: /x, max_depth: 0}]", "discover[0].max_depth: expected a whole number >= 1"),
        ("discover: [{root: /x, exclude: ['(']}]", "discover[0].exclude[0]: '(' is not a regular expression"),
        ("bogus: 1\ntables: [/x]", "bogus: unknown key"),
        ("{}", "nothing to maintain"),
        ("tables: [/x]\n  - bad indent", "not valid YAML"),
        ("- just a list", "the file: expected a mapping"),
    ],
)
def test_errors_name_the_key_and_value(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as excinfo:
        DaemonConfig.parse(text, source="hoodied.yaml")
    assert message in str(excinfo.value), str(excinfo.value)
    assert str(excinfo.value).startswith("hoodied.yaml: ")


def test_settings_hoodied_does_not_read_are_warnings() -> None:
    config = DaemonConfig.parse(
        "defaults: {hoodie: {hoodie.datasource.write.operation: upsert}}\n"
        "tables: [{path: /x, hoodie: {hoodie.my.own.key: 1, hoodie.clean.commits.retained: 3}}]"
    )
    assert config.warnings == (
        "defaults.hoodie: hoodie.datasource.write.operation is a Hudi setting hoodied does not read "
        "(it has no effect here)",
        "tables[0].hoodie: hoodie.my.own.key is not a Hudi setting hoodied reads; it has no effect",
    )


def test_a_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cannot read the configuration .*nope\.yaml"):
        DaemonConfig.load(tmp_path / "nope.yaml")


def test_inherited_schedule_keeps_to_the_services_a_table_runs() -> None:
    config = _parse(
        """
        defaults: {schedule: [compaction, clean]}
        tables: [{path: /x, services: [clean]}]
        """
    )
    assert config.tables[0].settings.schedule == ("clean",)


def test_table_keys_and_the_hudi_lock_path() -> None:
    from hoodie.config import TableConfig

    assert table_key("orders", "s3://b/orders/") == table_key("orders", "s3://b/orders")
    assert table_key("orders", "s3://b/orders") != table_key("orders", "s3://c/orders")
    assert "/" not in table_key("a", "/x/y")
    props = {
        "hoodie.table.name": "trips",
        "hoodie.table.version": "6",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.recordkey.fields": "uuid",
    }
    config = TableConfig(props)
    settings = _parse("zookeeper: {connect: 'h:1', lock_base_path: /hudi/locks}\ntables: [/x]").zookeeper
    assert settings is not None
    coordination = ZooKeeperCoordination(None, settings, Metrics())  # type: ignore[arg-type]
    assert coordination.lock_path(config, {}) == "/hudi/locks/trips"
    assert coordination.lock_path(config, {"hoodie.write.lock.zookeeper.lock_key": "k"}) == "/hudi/locks/k"
    assert coordination.lock_path(config, {"hoodie.write.lock.zookeeper.base_path": "/w/"}) == "/w/trips"


def test_the_replica_name_defaults_to_the_environment_then_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.delenv("HOODIED_REPLICA", raising=False)
    assert _parse("tables: [/x]").replica == socket.gethostname()
    monkeypatch.setenv("HOODIED_REPLICA", "hoodied-7f9c-2")
    assert _parse("tables: [/x]").replica == "hoodied-7f9c-2"
    assert _parse("replica: r1\ntables: [/x]").replica == "r1"
