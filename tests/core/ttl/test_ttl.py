"""Partition TTL on generated tables (v6, v8, v9; COW and MOR), judged by hudi-rs.

Each table gets four partitions from the generator, then an insert into two of them: those two hold the
newest base files ("fresh"), the other two ("old") hold nothing newer than the generated commits. TTL runs
with an instant-time clock set to one day after the fresh partitions' newest base file, so with
``days.retain=1`` exactly the old ones have expired. After the TTL both readers (hudi-rs and ours) return
the rows of the fresh partitions and nothing else changed; a clean then deletes the old partitions' files
and folders (planned as Hudi's ``CleanPlanner`` plans them), and the metadata table stays consistent.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodie import Table
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, CleanPolicy, plan_clean, schedule_clean
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import InvalidWriteConfig
from hoodie.failpoints import ENV as FAILPOINTS
from hoodie.indexing.execute import run_indexing, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.metadata.keys import partition_stats_key
from hoodie.metadata.records import is_deleted
from hoodie.metadata.writer import MetadataTableNotSupported
from hoodie.storage import Storage
from hoodie.table_service import run_in_process
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import CLEAN, REPLACE_COMMIT, ROLLBACK, State
from hoodie.timeline.instant_time import InstantTimeGenerator, parse_instant_time
from hoodie.timeline.metadata import (
    RequestedReplaceMetadata,
    decode_clean_metadata,
    decode_commit_metadata,
    decode_requested_replace_metadata,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.ttl.execute import (
    NothingToExpire,
    TTLAborted,
    commit_ttl,
    prepare_ttl,
    read_partition_keys,
    ttl_in_process,
)
from hoodie.ttl.plan import (
    DAYS_RETAIN,
    INLINE,
    MAX_DELETE_PARTITIONS,
    PARTITION_SELECTED,
    STRATEGY_CLASS,
    STRATEGY_TYPE,
    Strategy,
    TTLConfig,
    hudi_ttl_millis,
    instant_time_plus_millis,
    newest_base_instants,
    pending_ttls,
    plan_ttl,
    requested_metadata,
    schedule_ttl,
)
from hoodie.ttl.service import TTL, PartitionTTL
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleRows, Query
from support.metadata_checks import check_metadata_table
from support.stalled_takeover import (
    assert_the_right_run_won,
    completed_files,
    stalled_then_taken_over,
    trigger,
)

KEYS = ["_hoodie_record_key", "_hoodie_partition_path"]
ONE_DAY = TTLConfig(days_retain=1)
SETTINGS = {DAYS_RETAIN: "1"}
TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
COW: TableType = "COPY_ON_WRITE"
MOR: TableType = "MERGE_ON_READ"


@dataclass(frozen=True)
class Aged:
    """A table with two old and two fresh partitions, and the clock at which exactly the old ones expired."""

    root: Path
    old: tuple[str, ...]
    fresh: tuple[str, ...]
    clock: dt.datetime

    @property
    def storage(self) -> Storage:
        return Storage.for_uri(str(self.root))

    def generator(self) -> InstantTimeGenerator:
        return InstantTimeGenerator(clock=lambda: self.clock, max_clock_skew_ms=0)


def _clock_at(instant_time: str, zone: str) -> dt.datetime:
    """The moment an instant time names, read in the table's timeline zone."""
    naive = parse_instant_time(instant_time)
    return naive.replace(tzinfo=dt.UTC) if zone == "UTC" else naive.astimezone()


def _insert(root: Path, partitions: tuple[str, ...], n: int = 6, seed: int = 11) -> None:
    gen = TripGenerator(seed, 4)
    cities = [p for p in partitions for _ in range(n)]
    TableWriter.open(str(root)).insert(gen.rows(gen.keys(len(cities)), cities))


def _aged(root: Path, version: int, table_type: TableType, *, index: tuple[str, ...] = ()) -> Aged:
    generate_table(
        str(root),
        GenerateSpec(
            table_type=table_type,
            table_version=version,
            rows=120,
            commits=2,
            partitions=4,
            seed=version,
        ),
    )
    storage = Storage.for_uri(str(root))
    if index:
        lock = FileSystemLock(storage)
        schedule_indexing(storage, lock, list(index))
        run_indexing(storage, lock)
    table = Table.open(str(root))
    parts = sorted({s.partition_path for s in table.file_slices()})
    fresh, old = tuple(parts[:2]), tuple(parts[2:])
    _insert(root, fresh)
    table = Table.open(str(root))
    refs = newest_base_instants(table, "9" * 17)
    assert min(refs[p] for p in fresh) > max(refs[p] for p in old)
    zone = table.config.timeline_timezone
    clock = _clock_at(instant_time_plus_millis(min(refs[p] for p in fresh), 86_400_000, zone), zone)
    return Aged(root, old, fresh, clock)


def _theirs(root: Path, work: Path) -> pa.Table:
    """hudi-rs's snapshot now (a fresh oracle: answers are cached per table root)."""
    work.mkdir(parents=True, exist_ok=True)
    answer = HudiOracle(Path(os.fspath(work)) / f"o{len(list(work.iterdir()))}").one(
        str(root), Query.snapshot()
    )
    assert isinstance(answer, OracleRows), answer
    return answer.table


def _without(rows: pa.Table, partitions: tuple[str, ...]) -> pa.Table:
    keep = pc.invert(pc.is_in(rows.column("_hoodie_partition_path"), pa.array(list(partitions))))
    return rows.filter(keep)


def _partitions_of(rows: pa.Table) -> set[str]:
    return set(rows.column("_hoodie_partition_path").to_pylist())


def _same(ours: pa.Table, theirs: pa.Table, expected: pa.Table, context: str) -> None:
    assert_same_rows(ours, expected, KEYS, context=f"{context}: ours")
    assert_same_rows(theirs, expected, KEYS, check_types=False, context=f"{context}: hudi-rs")


def _run_ttl_service(aged: Aged, settings: dict[str, str] | None = None) -> str:
    """Schedule and run the TTL as the daemon does (the service object); returns the instant time."""
    storage = aged.storage
    lock = FileSystemLock(storage)
    service = PartitionTTL()
    table = Table.load(storage)
    scheduled = service.schedule(table, lock, settings or SETTINGS, aged.generator())
    assert scheduled.instant is not None, scheduled.reason
    assert [i.time for i in service.pending(Table.load(storage))] == [scheduled.instant.time]
    job = service.prepare(storage, lock, None, settings or SETTINGS)
    done = run_in_process(job)
    assert done.instant.time == scheduled.instant.time
    return done.instant.time


def _check_instant_files(root: Path, T: str, replaced: dict[str, set[str]]) -> None:
    """The TTL's timeline files hold what Hudi's delete-partition writes."""
    table = Table.open(str(root))
    timeline = table.timeline
    version = table.config.table_version
    requested = decode_requested_replace_metadata((root / timeline.file_of(T, State.REQUESTED)).read_bytes())
    assert requested.operation_type == "DELETE_PARTITION"
    assert requested.clustering_plan is None
    assert requested.version == 1
    inflight = decode_commit_metadata(
        (root / timeline.file_of(T, State.INFLIGHT)).read_bytes(),
        table_version=version,
        action=REPLACE_COMMIT,
    )
    assert inflight.operation_type == "DELETE_PARTITION"
    assert inflight.write_stats == ()
    done = table.commit_metadata(T)
    assert done.replace
    assert done.operation_type == "DELETE_PARTITION"
    assert done.write_stats == ()
    assert done.extra_metadata.get("schema")
    assert {p: set(ids) for p, ids in done.partition_to_replace_file_ids.items()} == replaced


def _live_groups(root: Path) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for s in Table.open(str(root)).file_slices():
        out.setdefault(s.partition_path, set()).add(s.file_id)
    return out


def _clean(root: Path, config: CleanConfig) -> tuple[str, ...]:
    """Schedule and run a clean; returns the partitions its plan deletes."""
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_clean(storage, lock, config=config)
    assert scheduled.plan is not None, scheduled.reason
    clean_in_process(storage, lock)
    return scheduled.plan.partitions_to_be_deleted


# -- the matrix ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("table_type", [COW, MOR])
@pytest.mark.parametrize("version", [6, 8, 9])
def test_expired_partitions_go_and_a_clean_reclaims_them(
    tmp_path: Path, version: int, table_type: TableType
) -> None:
    aged = _aged(tmp_path / "t", version, table_type)
    root = aged.root
    before = Table.open(str(root)).read()
    assert_same_rows(_theirs(root, tmp_path / "o"), before, KEYS, check_types=False, context="before")
    groups = _live_groups(root)

    T = _run_ttl_service(aged)

    expected = _without(before, aged.old)
    assert _partitions_of(expected) == set(aged.fresh)
    _same(Table.open(str(root)).read(), _theirs(root, tmp_path / "o"), expected, f"v{version} {table_type}")
    _check_instant_files(root, T, {p: groups[p] for p in aged.old})
    assert set(_live_groups(root)) == set(aged.fresh)
    assert all((root / p).is_dir() for p in aged.old)  # nothing deleted before the clean

    if table_type == COW:
        config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    else:
        # By commits: a clean right after the TTL keeps the replaced files (the TTL is not older than the
        # earliest commit to retain), as Hudi's; one write later they go, and the partitions with them.
        config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=1)
        table = Table.open(str(root))
        early = plan_clean(table, config, dt.datetime.now())
        assert early.plan is None or not early.plan.partitions_to_be_deleted
        if early.plan is not None:
            assert not set(early.plan.file_paths_to_be_deleted_per_partition) & set(aged.old)
        _insert(root, aged.fresh[:1], seed=12)
        expected = Table.open(str(root)).read()
    assert _clean(root, config) == tuple(sorted(aged.old))
    for p in aged.old:
        assert not (root / p).exists(), f"{p} is still on storage"
    table = Table.open(str(root))
    clean = [i for i in table.timeline.completed() if i.action == CLEAN][-1]
    md = decode_clean_metadata((root / table.timeline.file_of(clean.time)).read_bytes())
    assert all(md.partition_metadata[p].is_partition_deleted for p in aged.old)
    _same(table.read(), _theirs(root, tmp_path / "o"), expected, "after the clean")


@pytest.mark.parametrize(("version", "table_type"), [(8, MOR), (9, COW)])
def test_the_metadata_table_stays_consistent(tmp_path: Path, version: int, table_type: TableType) -> None:
    aged = _aged(
        tmp_path / "t", version, table_type, index=("column_stats", "partition_stats", "record_index")
    )
    root = aged.root
    before = Table.open(str(root)).read()
    mdt = check_metadata_table(root, "before")
    assert mdt is not None
    columns = {r["ColumnStatsMetadata"]["columnName"] for r in mdt.read_partition("partition_stats").values()}
    old_stats = {partition_stats_key(c, p) for c in columns for p in aged.old}
    _run_ttl_service(aged)
    mdt = check_metadata_table(root, "after the TTL")
    assert mdt is not None
    index = mdt.read_partition("record_index")
    old_keys = set(
        before.filter(pc.is_in(before.column("_hoodie_partition_path"), pa.array(aged.old)))
        .column("_hoodie_record_key")
        .to_pylist()
    )
    assert old_keys
    assert not old_keys & set(index)
    # Hudi's DELETE_PARTITION marks the partitions' statistics deleted, one entry per indexed column.
    after = mdt.read_partition("partition_stats")
    assert old_stats
    assert all(key in after and is_deleted(after[key]) for key in old_stats)
    assert not any(is_deleted(r) for key, r in after.items() if key not in old_stats)
    expected = _without(before, aged.old)
    _same(Table.open(str(root)).read(), _theirs(root, tmp_path / "o"), expected, "after the TTL")
    _clean(root, CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1))
    check_metadata_table(root, "after the clean")
    listing = Table.open(str(root), metadata_listing=True).data_files()
    assert not {f.partition_path for f in listing} & set(aged.old)
    _same(Table.open(str(root)).read(), _theirs(root, tmp_path / "o"), expected, "after the clean")


# -- what Hudi measures --------------------------------------------------------------------------------------


def test_ttl_arithmetic_is_hudis_with_the_days_as_written() -> None:
    assert instant_time_plus_millis("20240131230000000", 86_400_000, "UTC") == "20240201230000000"
    assert instant_time_plus_millis("20241231235959999", 1, "UTC") == "20250101000000000"
    assert instant_time_plus_millis("20240101000000", 0, "UTC") == "20240101000000999"  # seconds: +999 ms
    assert instant_time_plus_millis("2024010100000000012", 0, "UTC") == "20240101000000000"  # cut to 17
    assert instant_time_plus_millis("00000000000000001", 5, "UTC") == "00000000000000006"  # not a date
    # Hudi's 32-bit overflow (KeepByTimeStrategy): 24 days fit, 25..49 go negative, 365 is about 17 days.
    assert hudi_ttl_millis(24) == 24 * 86_400_000
    assert hudi_ttl_millis(25) < 0
    assert hudi_ttl_millis(49) < 0
    assert hudi_ttl_millis(50) == 25_032_704
    assert 408 * 3_600_000 < hudi_ttl_millis(365) < 410 * 3_600_000
    assert TTLConfig(days_retain=365).ttl_millis == 365 * 86_400_000
    assert TTLConfig(days_retain=24).hudi_difference() is None
    assert "never expires" in (TTLConfig(days_retain=30).hudi_difference() or "")
    assert "408.67 h" in (TTLConfig(days_retain=365).hudi_difference() or "")


def test_the_plan_dates_partitions_by_their_newest_base_file(tmp_path: Path) -> None:
    aged = _aged(tmp_path / "t", 8, COW)
    table = Table.open(str(aged.root))
    zone = table.config.timeline_timezone
    T = _at(aged.clock, zone)
    plan = plan_ttl(table, T, ONE_DAY)
    assert plan.expired == tuple(sorted(aged.old, key=lambda p: (plan.references[p], p)))
    assert not plan.blocked
    assert plan.deletes
    assert plan.next_expiry == T  # the fresh ones expire right after T, not at it (strictly later)
    later = _at(aged.clock + dt.timedelta(milliseconds=1), zone)
    assert set(plan_ttl(table, later, ONE_DAY).expired) == {*aged.old, *aged.fresh}
    assert plan_ttl(table, T, TTLConfig(days_retain=1, max_delete_partitions=1)).expired == plan.expired[:1]
    selected = TTLConfig(days_retain=1, partitions_selected=(aged.old[1], aged.fresh[0], "nowhere"))
    assert plan_ttl(table, T, selected).expired == (aged.old[1],)
    off = plan_ttl(table, T, TTLConfig())
    assert off.expired == ()
    assert DAYS_RETAIN in off.reason
    # KEEP_BY_CREATION_TIME: the partition metafiles' commitTime (all four made by the first commit).
    created = plan_ttl(table, T, TTLConfig(strategy=Strategy.KEEP_BY_CREATION_TIME, days_retain=1))
    assert set(created.expired) == {*aged.old, *aged.fresh}
    first = table.timeline.completed_writes()[0].time
    assert set(created.references.values()) == {first}
    # A table without partition fields has nothing to expire.
    flat = tmp_path / "flat"
    generate_table(str(flat), GenerateSpec(table_type=COW, table_version=8, rows=20, commits=1, partitions=0))
    assert "not partitioned" in plan_ttl(Table.open(str(flat)), T, ONE_DAY).reason
    assert TTL.applies_to(Table.open(str(flat)).config) is not None
    assert TTL.applies_to(table.config) is None


def _at(moment: dt.datetime, zone: str) -> str:
    local = moment.astimezone(dt.UTC) if zone == "UTC" else moment.astimezone()
    return local.strftime("%Y%m%d%H%M%S") + f"{local.microsecond // 1000:03d}"


@pytest.mark.parametrize("version", [6, 8])
def test_log_updates_do_not_renew_a_partition_and_a_pending_compaction_holds_the_ttl(
    tmp_path: Path, version: int
) -> None:
    aged = _aged(tmp_path / "t", version, MOR)
    root, storage = aged.root, aged.storage
    lock = FileSystemLock(storage)
    zone = Table.open(str(root)).config.timeline_timezone
    T = _at(aged.clock, zone)
    # Update every record of one old partition: log files only, no new base file.
    rows = Table.open(str(root)).read()
    target = rows.filter(pc.equal(rows.column("_hoodie_partition_path"), aged.old[0]))
    gen = TripGenerator(21, 4)
    TableWriter.open(str(root)).upsert(
        gen.rows(target.column("uuid").to_pylist(), [aged.old[0]] * target.num_rows)
    )
    table = Table.open(str(root))
    assert aged.old[0] in plan_ttl(table, T, ONE_DAY).expired, "log files renewed the partition"
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    compacted = {op.partition_path for op in scheduled.plan.operations} if scheduled.plan else set()
    assert aged.old[0] in compacted
    table = Table.open(str(root))
    plan = plan_ttl(table, T, ONE_DAY)
    if version >= 8:
        # v8+: the pending compaction's (still empty) slice is the partition's latest, dated at its instant.
        assert aged.old[0] not in plan.expired
    else:
        # v6: an empty pending-compaction slice does not count; the partition expired, and the pending
        # compaction holds the delete back, as Hudi's DeletePartitionUtils does.
        assert aged.old[0] in plan.expired
        assert aged.old[0] in plan.blocked
        result = schedule_ttl(storage, lock, config=ONE_DAY, time_generator=aged.generator())
        assert result.instant is None
        assert "pending table services" in result.reason
        # A TTL requested anyway (as Hudi's TTL job does) is rolled back for good when it runs.
        instant_time = aged.generator().next(storage, table.config, lock)
        TimelineWriter(storage, table.config, lock).request(
            REPLACE_COMMIT, instant_time, requested_metadata(ONE_DAY, version)
        )
        with pytest.raises(TTLAborted, match="pending table services"):
            ttl_in_process(storage, lock, time_generator=aged.generator())
        table = Table.open(str(root))
        assert table.timeline.get(instant_time) is None
        assert [i for i in table.timeline.completed() if i.action == ROLLBACK]
        assert pending_ttls(table) == []


# -- settings ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (DAYS_RETAIN, "ten"),
        (DAYS_RETAIN, "3000000000"),
        (MAX_DELETE_PARTITIONS, "-1"),
        (STRATEGY_TYPE, "KEEP_BY_SIZE"),
        (STRATEGY_CLASS, "com.acme.ttl.MyStrategy"),
        (INLINE, "yes"),
        (PARTITION_SELECTED, "a,,b"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(InvalidWriteConfig, match=key.replace(".", r"\.")):
        TTL.check_settings({DAYS_RETAIN: "1", key: value})


def test_settings_as_hudi_reads_them() -> None:
    assert TTLConfig.from_config({}) == TTLConfig()
    assert not TTLConfig.from_config({}).enabled
    assert (
        TTLConfig.from_config({STRATEGY_TYPE: "keep_by_creation_time"}).strategy
        is Strategy.KEEP_BY_CREATION_TIME
    )
    by_class = {STRATEGY_TYPE: "KEEP_BY_TIME", STRATEGY_CLASS: Strategy.KEEP_BY_CREATION_TIME.class_name}
    assert TTLConfig.from_config(by_class).strategy is Strategy.KEEP_BY_CREATION_TIME  # the class wins
    config = TTLConfig.from_config({DAYS_RETAIN: "3", PARTITION_SELECTED: " a , b/c "})
    assert config.partitions_selected == ("a", "b/c")
    assert config.ttl_millis == 3 * 86_400_000
    assert TTLConfig.from_config(config.recorded()) == config


# -- the service ---------------------------------------------------------------------------------------------


def test_the_service_schedules_only_what_is_due_and_idle_polls_list_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    aged = _aged(tmp_path / "t", 8, COW)
    storage = aged.storage
    lock = FileSystemLock(storage)
    service = PartitionTTL()
    early = Aged(aged.root, aged.old, aged.fresh, aged.clock - dt.timedelta(days=2))
    first = service.schedule(Table.load(storage), lock, SETTINGS, early.generator())
    assert first.instant is None
    assert "no partition expired" in first.reason

    def no_listing(self: Table, as_of: str | None = None) -> None:
        raise AssertionError("an idle poll listed the table")

    with monkeypatch.context() as patch:
        patch.setattr(Table, "file_groups", no_listing)
        again = service.schedule(Table.load(storage), lock, SETTINGS, early.generator())
    assert again.instant is None
    assert "nothing written since" in again.reason
    # The table's writers run TTL inline: hoodied leaves it to them (an operator's run still works).
    inline = service.schedule(Table.load(storage), lock, {**SETTINGS, INLINE: "true"}, aged.generator())
    assert inline.instant is None
    assert INLINE in inline.reason
    # A writer's ALTER TABLE DROP PARTITION (Hudi's requested file, no TTL settings) is not the TTL's.
    config = Table.load(storage).config
    drop_time = InstantTimeGenerator(max_clock_skew_ms=0).next(storage, config, lock)
    TimelineWriter(storage, config, lock).request(
        REPLACE_COMMIT, drop_time, RequestedReplaceMetadata(operation_type="DELETE_PARTITION")
    )
    assert service.pending(Table.load(storage)) == []
    TimelineWriter(storage, config, lock).delete_pending(Table.load(storage).timeline.get(drop_time))  # type: ignore[arg-type]
    # Once due (the timeline changed meanwhile, so the service looks again), it is scheduled.
    due = service.schedule(Table.load(storage), lock, SETTINGS, aged.generator())
    assert due.instant is not None, due.reason
    assert service.schedule(Table.load(storage), lock, SETTINGS, aged.generator()).instant is None  # pending


def test_tables_with_a_secondary_index_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_type=COW, table_version=8, rows=20, commits=1, partitions=2))
    storage = Storage.for_uri(str(root))
    table = Table.load(storage)
    config = table.config.updated({"hoodie.table.metadata.partitions": "files,secondary_index_rider"})
    view = Table(storage, config, table.timeline)
    with pytest.raises(MetadataTableNotSupported, match="secondary_index_rider"):
        schedule_ttl(storage, FileSystemLock(storage), config=ONE_DAY, view=view)


# -- writes during a TTL -------------------------------------------------------------------------------------


@pytest.mark.parametrize("when", ["before_prepare", "before_commit"])
def test_a_partition_written_during_the_ttl_is_left_out(tmp_path: Path, when: str) -> None:
    aged = _aged(tmp_path / "t", 8, MOR)
    root, storage = aged.root, aged.storage
    lock = FileSystemLock(storage)
    scheduled = schedule_ttl(storage, lock, config=ONE_DAY, time_generator=aged.generator())
    assert scheduled.instant is not None
    if when == "before_prepare":
        _insert(root, aged.old[:1], seed=31)
    prepared = prepare_ttl(storage, lock, time_generator=aged.generator())
    results = [read_partition_keys(t, "0-0-0") for t in prepared.tasks]
    if when == "before_commit":
        _insert(root, aged.old[:1], seed=31)
    written = Table.open(str(root)).read()
    result = commit_ttl(storage, lock, prepared, results, time_generator=aged.generator())
    assert result.partitions_deleted == (aged.old[1],)
    assert aged.old[0] in result.left_out
    expected = _without(written, aged.old[1:])
    _same(Table.open(str(root)).read(), _theirs(root, tmp_path / "o"), expected, when)


# -- SIGKILL at every step -----------------------------------------------------------------------------------

SCRIPT = """
import datetime as dt
import sys

from hoodie.failpoints import failpoint
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.ttl.execute import ttl_in_process
from hoodie.ttl.plan import TTLConfig, schedule_ttl

storage = Storage.for_uri(sys.argv[1])
lock = FileSystemLock(storage, expire_seconds=2)
clock = dt.datetime.fromisoformat(sys.argv[2])
generator = InstantTimeGenerator(clock=lambda: clock, max_clock_skew_ms=0)
config = TTLConfig(days_retain=1)
scheduled = schedule_ttl(storage, lock, config=config, respect_trigger=False, time_generator=generator)
assert scheduled.instant is not None, scheduled.reason
failpoint("ttl.after_schedule")
ttl_in_process(storage, lock, time_generator=generator)
"""

POINTS = [
    "ttl.after_schedule",
    "ttl.after_inflight",
    "ttl.task_after_read",
    "ttl.before_commit",
    "ttl.during_commit",
    "ttl.after_metadata_commit",
    "ttl.after_commit",
]
REPO = Path(__file__).resolve().parents[3]


#: The tables the kill tests run on: a v8 MERGE_ON_READ one by default; HOODIED_TTL_KILL_TABLES=all adds v6
#: MERGE_ON_READ and v9 COPY_ON_WRITE (about 25 s more).
KILL_TABLES: list[tuple[int, TableType]] = [(8, MOR)] + (
    [(6, MOR), (9, COW)] if os.environ.get("HOODIED_TTL_KILL_TABLES") == "all" else []
)


@pytest.fixture(scope="module", params=KILL_TABLES, ids=[f"v{v}-{t}" for v, t in KILL_TABLES])
def indexed(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Aged:
    """An aged table with a metadata table holding a record index (copied per test)."""
    version, table_type = request.param
    return _aged(tmp_path_factory.mktemp("ttl") / "t", version, table_type, index=("record_index",))


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_any_step_leaves_a_readable_table_and_the_next_run_finishes(
    tmp_path: Path, indexed: Aged, point: str
) -> None:
    root = tmp_path / "t"
    shutil.copytree(indexed.root, root)
    aged = Aged(root, indexed.old, indexed.fresh, indexed.clock)
    before = Table.open(str(root)).read()
    expected = _without(before, aged.old)
    env = {k: v for k, v in os.environ.items() if k != FAILPOINTS}
    env[FAILPOINTS] = point
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "core"), str(REPO / "services"), env.get("PYTHONPATH", "")]
    )
    killed = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), aged.clock.isoformat()],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    # Right after the kill both readers see the table as before the TTL (or, killed after its commit, after).
    table = Table.open(str(root))
    pending = pending_ttls(table)
    done = [i for i in table.timeline.completed() if i.action == REPLACE_COMMIT]
    assert len(pending) + len(done) == 1, (pending, done)
    now = expected if done else before
    _same(table.read(), _theirs(root, tmp_path / "o"), now, f"killed at {point}")
    check_metadata_table(root, f"killed at {point}")
    # The next run finishes what the dead one left.
    lock = FileSystemLock(aged.storage, acquire_timeout=30)
    if pending:
        result = ttl_in_process(aged.storage, lock, time_generator=aged.generator())
        assert set(result.partitions_deleted) == set(aged.old)
    else:
        with pytest.raises(NothingToExpire):
            ttl_in_process(aged.storage, lock, time_generator=aged.generator())
    _same(Table.open(str(root)).read(), _theirs(root, tmp_path / "o"), expected, f"re-run after {point}")
    check_metadata_table(root, f"re-run after {point}")


# -- a paused holder (issue 33) -----------------------------------------------------------------------------


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("stall_at", ["completed-file", "decision"])
def test_a_stalled_ttl_and_a_takeover_complete_it_once(tmp_path: Path, version: int, stall_at: str) -> None:
    """A TTL is resumed, not rolled back, when taken over, and completes by decision
    (:mod:`hoodie.write.decision`): the takeover voids the attempt it superseded before it decides.
    ``completed-file``: the first run decided and its completed file is held; the takeover's void finds the
    decision and rolls it forward (the metadata table's update rebuilt from the completed file: the replaced
    groups' record keys dropped from the record index). ``decision``: the takeover voids the first attempt and
    completes; the woken run's decision fails. Either way one completed file, the old partitions gone for
    both readers, the metadata table consistent. (Before, a v8+ timeline could hold two completed files.)"""
    aged = _aged(tmp_path / "t", version, MOR, index=("column_stats", "partition_stats", "record_index"))
    root = aged.root
    storage = aged.storage
    before = Table.open(str(root)).read()
    scheduled = PartitionTTL().schedule(
        Table.load(storage), FileSystemLock(storage), SETTINGS, aged.generator()
    )
    assert scheduled.instant is not None, scheduled.reason
    T = scheduled.instant.time
    first, second = stalled_then_taken_over(root, T, trigger(stall_at, T, "replacecommit"), TTL, SETTINGS)
    assert_the_right_run_won(stall_at, first, second)
    assert len(completed_files(root, T, ".replacecommit")) == 1, completed_files(root, T, ".replacecommit")
    mdt = check_metadata_table(root, f"after a takeover of a TTL stalled at its {stall_at}")
    assert mdt is not None
    assert len(completed_files(root / ".hoodie" / "metadata", T, ".deltacommit")) == 1
    old_keys = set(
        before.filter(pc.is_in(before.column("_hoodie_partition_path"), pa.array(aged.old)))
        .column("_hoodie_record_key")
        .to_pylist()
    )
    assert old_keys
    assert not old_keys & set(mdt.read_partition("record_index"))
    expected = _without(before, aged.old)
    _same(Table.open(str(root)).read(), _theirs(root, tmp_path / "o"), expected, f"stalled at {stall_at}")
