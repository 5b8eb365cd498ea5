"""The daemon's configuration: the examples in config/ load, every default is the documented one, and every
bad key or value is an error that names it."""

from __future__ import annotations

import hashlib
import os
import textwrap
import uuid
from pathlib import Path

import pytest

from hoodie.registry import SERVICE_NAMES
from hoodied.config import (
    ConfigError,
    DaemonConfig,
    JobSettings,
    parse_duration,
)
from hoodied.coordination import ZooKeeperCoordination, claim_name, table_key
from hoodied.ctl import watched_tables
from hoodied.errors import ClaimHeld
from hoodied.metrics import Metrics
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig
from support.zk_server import ZooKeeperServer

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
    assert config.poll_interval_max == 300.0  # 10 x poll_interval
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
            "poll_interval: 1m\npoll_interval_max: 30s\ntables: [/x]",
            "poll_interval_max: '30s' is below poll_interval (60 s)",
        ),
        (
            "poll_interval_max: 29\ntables: [{path: /x, poll_interval_max: 1h}]",
            "poll_interval_max: 29 is below poll_interval (30 s)",
        ),
        (
            "tables: [{path: /x, poll_interval_max: 10s}]",
            "tables[0].poll_interval_max: '10s' is below poll_interval (30 s)",
        ),
        ("defaults: {poll_interval_max: 1}\ntables: [/x]", "defaults.poll_interval_max: 1 is below"),
        ("discover: [{root: /x, poll_interval_max: .inf}]", "discover[0].poll_interval_max: inf is infinite"),
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
        (
            "tables: [/x, /x]",
            "tables[1].path: tables[1] (/x) and tables[0] (/x) are one table, /x: list it once",
        ),
        ("jobs: {backoff: .nan}\ntables: [/x]", "jobs.backoff: nan is not a number"),
        ("jobs: {backoff_max: .inf}\ntables: [/x]", "jobs.backoff_max: inf is infinite"),
        ("poll_interval: -.inf\ntables: [/x]", "poll_interval: -inf is infinite"),
        ("jobs: {takeover_grace: 1.0e+400}\ntables: [/x]", "jobs.takeover_grace: inf is infinite"),
        ("jobs: {shutdown_grace: 1.0e+20}\ntables: [/x]", "jobs.shutdown_grace: 1e+20 is infinite or longer"),
        (f"jobs: {{lock_timeout: {'9' * 400}}}\ntables: [/x]", "jobs.lock_timeout: 99999"),
        (
            f"zookeeper: {{connect: 'h:1', session_timeout: '{'9' * 400}h'}}\ntables: [/x]",
            "longer than the longest",
        ),
        ("metrics: {read_timeout: .nan}\ntables: [/x]", "metrics.read_timeout: nan is not a number"),
        (
            "reschedule_interval: 10000000000\ntables: [/x]",
            "reschedule_interval: 10000000000 is infinite or longer",
        ),
        (
            "defaults: {takeover_foreign_after: .inf}\ntables: [/x]",
            "defaults.takeover_foreign_after: inf is infinite or longer than the longest wait "
            "(9223372036 s): not a duration (forever is written never)",
        ),
        (
            "tables: [{path: /x, takeover_foreign_after: .nan}]",
            "tables[0].takeover_foreign_after: nan is not a",
        ),
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


def test_the_poll_interval_ceiling_defaults_to_ten_intervals_and_a_table_may_set_its_own() -> None:
    config = _parse(
        """
        poll_interval: 1m
        defaults: {poll_interval_max: 20m}
        tables: [/a, {path: /b, poll_interval_max: 1m}]
        discover: [{root: /lake}]
        """
    )
    assert config.poll_interval_max == 600.0
    a, b = config.tables
    assert [config.poll_ceiling(t.settings) for t in (a, b)] == [1200.0, 60.0]
    assert config.poll_ceiling(config.discover[0].settings) == 1200.0
    own = _parse("poll_interval: 1m\npoll_interval_max: 2h\ntables: [/a]")
    assert own.poll_ceiling(own.tables[0].settings) == 7200.0


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

    # A table named after its folder at a canonical path keeps the key it had when keys held the label.
    assert table_key("s3://b/orders") == "orders-" + hashlib.sha1(b"s3://b/orders").hexdigest()[:12]
    assert table_key("s3://b/orders") != table_key("s3://c/orders")
    assert table_key("/x/y") == "y-" + hashlib.sha1(b"/x/y").hexdigest()[:12]
    assert table_key("/").startswith("table-")
    assert table_key("s3://b").startswith("b-")
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


# -- one table, one identity (issue 32) ----------------------------------------------------------------------


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """A table folder ``<tmp>/lake/t`` (by its real path) and a link to it, ``<tmp>/alias``."""
    table = tmp_path / "lake" / "t"
    table.mkdir(parents=True)
    (tmp_path / "alias").symlink_to(table)
    return Path(os.path.realpath(table))


#: The second spellings of one local table that were each claimed apart from the first.
SPELLINGS = (
    "double slash",
    "trailing slash",
    "file URI",
    "file: URI",
    "dot dot",
    "symlink",
    "symlink as a file URI",
)


def _second_spellings(lake: Path) -> dict[str, str]:
    """Each of :data:`SPELLINGS` of ``lake`` (the ``lake`` fixture's link included)."""
    alias = lake.parent.parent / "alias"
    return {
        "double slash": f"{lake.parent}//t",
        "trailing slash": f"{lake}/",
        "file URI": f"file://{lake}",
        "file: URI": f"file:{lake}",
        "dot dot": f"{lake.parent}/../{lake.parent.name}/t",
        "symlink": str(alias),
        "symlink as a file URI": f"file://{alias}/",
    }


@pytest.mark.parametrize("form", SPELLINGS)
def test_one_table_listed_twice_is_refused_naming_both_entries(lake: Path, form: str) -> None:
    """``/lake/t`` as ``a`` and ``/lake//t`` as ``b`` claimed one instant under two keys, and both ran it."""
    other = _second_spellings(lake)[form]
    text = f"tables:\n  - {{path: '{lake}', name: a}}\n  - {{path: '{other}', name: b}}\n"
    with pytest.raises(ConfigError) as excinfo:
        DaemonConfig.parse(text, source="hoodied.yaml")
    message = str(excinfo.value)
    assert message.startswith("hoodied.yaml: tables[1].path: tables[1] (b: "), message
    assert f"and tables[0] (a: {lake}) are one table, {lake}: list it once" in message


def test_one_object_store_table_listed_twice_is_refused_without_showing_credentials() -> None:
    text = "tables: [{path: 's3://lake/t', name: a}, {path: 's3a://KEY:SECRET@LAKE//t/', name: b}]"
    with pytest.raises(ConfigError) as excinfo:
        DaemonConfig.parse(text)
    message = str(excinfo.value)
    both = "tables[1] (b: s3a://***@LAKE//t) and tables[0] (a: s3://lake/t) are one table, s3://lake/t"
    assert both in message
    assert "SECRET" not in message


def test_each_entry_carries_its_tables_identity(lake: Path) -> None:
    config = DaemonConfig.parse(f"tables: ['{lake.parent.parent}/alias/', 's3a://b//t/', '{lake.parent}']")
    assert [t.identity for t in config.tables] == [str(lake), "s3://b/t", str(lake.parent)]
    assert [t.path for t in config.tables] == [f"{lake.parent.parent}/alias", "s3a://b//t", str(lake.parent)]


@pytest.mark.parametrize("form", SPELLINGS)
def test_two_names_of_one_table_share_its_claim_key(lake: Path, form: str) -> None:
    """Two configurations (two daemons, or a configuration and a one-off command's) naming one table apart
    claim its instants under one key: ``<base_path>/claims/<key>/<action>-<instant>`` is one node."""
    (a,) = watched_tables(DaemonConfig.parse(f"tables: [{{path: '{lake}', name: a}}]"))
    (b,) = watched_tables(
        DaemonConfig.parse(f"tables: [{{path: '{_second_spellings(lake)[form]}', name: b}}]")
    )
    assert (a.name, b.name) == ("a", "b")
    assert a.identity == b.identity == str(lake)
    assert a.key == b.key == table_key(str(lake))
    (c,) = watched_tables(DaemonConfig.parse(f"tables: [{{path: '{lake.parent}', name: a}}]"))
    assert c.key != a.key  # another table under the same name


@pytest.mark.zookeeper
def test_a_claim_under_one_name_holds_the_table_under_another(
    zookeeper_server: ZooKeeperServer, lake: Path
) -> None:
    """Replicas whose configurations name one table ``a`` (``/lake/t``) and ``b`` (a link to it) exclude each
    other on its instants."""
    base_path = f"/hoodied-test-{uuid.uuid4().hex[:8]}"
    replicas = []
    try:
        for name in ("ra", "rb"):
            zk = ZooKeeper(
                ZooKeeperConfig(connect=zookeeper_server.connect, base_path=base_path, session_timeout=4.0),
                {"host": "h", "pid": 1, "replica": name},
            )
            zk.start()
            replicas.append(zk)
        settings = _parse(f"zookeeper: {{connect: '{zookeeper_server.connect}'}}\ntables: [/x]").zookeeper
        assert settings is not None
        ra, rb = (ZooKeeperCoordination(zk, settings, Metrics()) for zk in replicas)
        (a,) = watched_tables(DaemonConfig.parse(f"tables: [{{path: '{lake}', name: a}}]"))
        (b,) = watched_tables(
            DaemonConfig.parse(f"tables: [{{path: '{lake.parent.parent}/alias/', name: b}}]")
        )
        name = claim_name("compaction", "20260101000000000")
        claim = ra.claim(a.storage, a.key, name)
        with pytest.raises(ClaimHeld, match="replica ra"):
            rb.claim(b.storage, b.key, name)
        holder = rb.holder(b.storage, b.key, name)
        assert holder is not None
        assert holder["replica"] == "ra"
        claim.release()
        rb.claim(b.storage, b.key, name).release()
    finally:
        for zk in replicas:
            zk.stop()


def test_never_stays_the_one_spelling_of_forever() -> None:
    config = _parse(
        "defaults: {takeover_foreign_after: never}\ntables: [/x, {path: /y, takeover_foreign_after: 1h}]"
    )
    assert [t.settings.takeover_foreign_after for t in config.tables] == [float("inf"), 3600.0]


def test_a_store_request_that_can_outlast_the_instant_lease_is_clamped_or_refused() -> None:
    """hoodie.lease_margin at start-up: an object store's retry budget is lowered into the instant lease
    (with a warning naming the keys); a single attempt no lease can hold is refused."""
    config = DaemonConfig.parse("tables: [{path: 's3://lake/t'}, {path: /local/t}]")
    s3, local = config.tables
    assert s3.settings.storage_options == {"retry_timeout": "29000ms"}
    assert local.settings.storage_options == {}
    assert config.warnings == ()  # the default budget is fitted silently
    mine = DaemonConfig.parse("tables: [{path: 's3://lake/t', storage_options: {retry_timeout: 5m}}]")
    assert mine.tables[0].settings.storage_options == {"retry_timeout": "29000ms"}
    assert any(
        w.startswith("tables[0].storage_options: retry_timeout lowered from 5m to 29000ms")
        for w in mine.warnings
    )
    fits = DaemonConfig.parse("tables: [{path: 's3://lake/t', storage_options: {retry_timeout: 10s}}]")
    assert fits.tables[0].settings.storage_options == {"retry_timeout": "10s"}
    with pytest.raises(
        ConfigError, match=r"tables\[0\]\.storage_options: one store request may take timeout=90"
    ):
        DaemonConfig.parse("tables: [{path: 's3://lake/t', storage_options: {timeout: 90s}}]")
    with pytest.raises(ConfigError, match=r"discover\[0\]\.storage_options: .*timeout=90"):
        DaemonConfig.parse("discover: [{root: 's3://lake', storage_options: {timeout: 90s}}]")
