"""Clustering planning: the configuration (Hudi's keys and defaults, bad values named), the size-based
grouping of one partition (pure: slices built directly), and plans of real generated tables (exclusions of
pending compaction / clustering and replaced file groups, partition filters, the group cap, sort column
validation, the trigger, scheduling rules and the requested file as Hudi writes it)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.partition_filter import FilterMode, PartitionFilter
from hoodie.clustering.plan import (
    EXECUTION_STRATEGY_CLASS,
    SORT_COLUMNS,
    ClusteringConfig,
    evaluate_clustering_trigger,
    plan_clustering,
    schedule_clustering,
)
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import InvalidWriteConfig
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId, FileSlice
from hoodie.lock import FileSystemLock
from hoodie.log.log_file import LogFile
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import CLUSTERING, DELTA_COMMIT, REPLACE_COMMIT, State
from hoodie.timeline.metadata import decode_requested_replace_metadata
from hoodie.timeline.writer import TimelineWriter
from support.writer_tables import live_table

MB = 1024 * 1024
#: No writer beside these tables: plans take every candidate, as with allow-update writers (the default,
#: reject, leaves out the groups of the last writer commits: every group of a table just written).
ALLOW = UpdateStrategy.ALLOW
NO_WRITERS = ClusteringConfig(update_strategy=ALLOW)
BASE_INSTANT = "20240101000000000"
P = "2024/01/01"


def make_slice(
    file_id: str, base_bytes: int | None, log_bytes: Sequence[int] = (), partition: str = P
) -> FileSlice:
    base = None if base_bytes is None else BaseFile(file_id, "1-0-1", BASE_INSTANT)
    logs = tuple(
        LogFile.parse(f".{file_id}_{BASE_INSTANT}.log.{n}_0-1-0") for n in range(1, len(log_bytes) + 1)
    )
    return FileSlice(
        FileGroupId(partition, file_id), BASE_INSTANT, base, base_bytes or 0, logs, tuple(log_bytes)
    )


def ids(groups: Sequence[tuple[tuple[FileSlice, ...], int]]) -> list[tuple[list[str], int]]:
    return [([s.file_id for s in slices], n) for slices, n in groups]


# -- configuration -----------------------------------------------------------------------------------------


def test_defaults_are_hudis() -> None:
    c = ClusteringConfig.from_config({})
    assert c == ClusteringConfig()
    assert c.small_file_limit == 314572800
    assert c.max_bytes_per_group == 2147483648
    assert c.max_num_groups == 30
    assert c.target_file_max_bytes == 1073741824
    assert c.sort_columns == ()
    assert c.single_group_clustering_enabled is True
    assert c.partition_regex is None
    assert c.partitions_selected == ()
    assert c.max_commits == 4
    assert c.max_file_bytes == 120 * MB
    assert c.strategy.strategy_class_name == EXECUTION_STRATEGY_CLASS
    assert c.strategy.strategy_params == {}
    assert c.partition_filter == PartitionFilter()
    # Beside writers: Hudi's default update strategy, so the groups of the last 5 writer commits stay out.
    assert c.update_strategy is UpdateStrategy.REJECT
    assert c.recent_write_commits is None
    assert (c.avoids_writers, c.recent_commits) == (True, 5)
    allow = ClusteringConfig(update_strategy=ALLOW)
    assert (allow.avoids_writers, allow.recent_commits) == (False, 0)
    # Set explicitly, the number counts whatever the strategy (allow-update writers of Hudi 1.x fail their
    # commit on a pending clustering of a group they wrote).
    allow_two = ClusteringConfig(update_strategy=ALLOW, recent_write_commits=2)
    assert (allow_two.avoids_writers, allow_two.recent_commits) == (True, 2)
    reject_none = ClusteringConfig(recent_write_commits=0)
    assert (reject_none.avoids_writers, reject_none.recent_commits) == (True, 0)


def test_keys_are_read() -> None:
    c = ClusteringConfig.from_config(
        {
            "hoodie.clustering.plan.strategy.small.file.limit": "100",
            "hoodie.clustering.plan.strategy.max.bytes.per.group": "1000",
            "hoodie.clustering.plan.strategy.max.num.groups": "2",
            "hoodie.clustering.plan.strategy.target.file.max.bytes": "300",
            SORT_COLUMNS: " city , ts ",
            "hoodie.clustering.plan.strategy.single.group.clustering.enabled": "FALSE",
            "hoodie.clustering.plan.strategy.partition.regex.pattern": "a.*",
            "hoodie.clustering.plan.strategy.partition.selected": "a,b",
            "hoodie.clustering.async.max.commits": "0",
            "hoodie.parquet.max.file.size": "500",
            "hoodie.clustering.updates.strategy": "SparkAllowUpdateStrategy",
            "hoodie.clustering.hoodied.recent.write.commits": "7",
            "hoodie.clustering.plan.partition.filter.mode": "RECENT_DAYS",
            "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions": "1",
        }
    )
    assert (c.small_file_limit, c.max_bytes_per_group, c.max_num_groups, c.target_file_max_bytes) == (
        100,
        1000,
        2,
        300,
    )
    assert c.sort_columns == ("city", "ts")
    assert c.strategy.strategy_params == {SORT_COLUMNS: "city,ts"}
    assert c.single_group_clustering_enabled is False
    assert c.partition_regex == "a.*"
    assert c.partitions_selected == ("a", "b")
    assert c.max_commits == 0
    assert c.max_file_bytes == 500
    assert c.update_strategy is UpdateStrategy.ALLOW
    assert c.recent_write_commits == 7
    assert c.partition_filter == PartitionFilter(FilterMode.RECENT_DAYS, skip_from_latest=1)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("hoodie.clustering.plan.strategy.small.file.limit", "lots", "not an integer"),
        ("hoodie.clustering.plan.strategy.max.bytes.per.group", "0", "at least 1"),
        ("hoodie.clustering.plan.strategy.max.num.groups", "-1", "at least 1"),
        ("hoodie.clustering.plan.strategy.target.file.max.bytes", "1.5", "not an integer"),
        ("hoodie.clustering.plan.strategy.single.group.clustering.enabled", "yes", "not true or false"),
        ("hoodie.clustering.plan.strategy.partition.regex.pattern", "(", "missing"),
        ("hoodie.clustering.async.max.commits", "-2", "at least 0"),
        (SORT_COLUMNS, "a,,b", "empty item"),
        (SORT_COLUMNS, "a,a", "repeated"),
        ("hoodie.clustering.updates.strategy", "reject", "not an update strategy"),
        ("hoodie.clustering.hoodied.recent.write.commits", "-1", "at least 0"),
        ("hoodie.clustering.plan.partition.filter.mode", "OLDEST", "not one of"),
    ],
)
def test_bad_values_name_the_key_and_the_value(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidWriteConfig, match=message) as e:
        ClusteringConfig.from_config({key: value})
    assert key in str(e.value)


def test_partition_filters() -> None:
    parts = ["a/1", "a/2", "b/1"]
    t = "20250101120000000"
    assert ClusteringConfig(partition_regex="a/.*").filter_partitions(parts, t) == ["a/1", "a/2"]
    assert ClusteringConfig(partition_regex="a").filter_partitions(parts, t) == []  # a full match, as Java's
    # The selected partitions win over the regex, as in Hudi.
    config = ClusteringConfig(partition_regex="a/.*", partitions_selected=("b/1", "c/9"))
    assert config.filter_partitions(parts, t) == ["b/1"]
    # Then the partition filter mode, on what those left.
    recent = PartitionFilter(FilterMode.RECENT_DAYS, lookback_partitions=1, skip_from_latest=1)
    assert ClusteringConfig(partition_regex="a/.*", partition_filter=recent).filter_partitions(parts, t) == [
        "a/1"
    ]


# -- grouping one partition --------------------------------------------------------------------------------


def test_slices_pack_largest_first_into_groups_bounded_by_bytes() -> None:
    config = ClusteringConfig(max_bytes_per_group=100 * MB, target_file_max_bytes=40 * MB)
    slices = [make_slice("a", 10 * MB), make_slice("b", 60 * MB), make_slice("c", 30 * MB)]
    slices += [make_slice("d", 50 * MB), make_slice("e", 20 * MB)]
    # Sorted: b 60, d 50, c 30, e 20, a 10. b+d > 100 -> [b]; d+c+e = 100 (not over) -> [d, c, e]; a alone
    # at the end is not worth rewriting.
    assert ids(config.group_slices(slices)) == [(["b"], 2), (["d", "c", "e"], 3)]
    slices.append(make_slice("f", 5 * MB))
    assert ids(config.group_slices(slices)) == [(["b"], 2), (["d", "c", "e"], 3), (["a", "f"], 1)]


def test_a_slice_without_base_file_counts_as_the_max_file_size() -> None:
    config = ClusteringConfig(max_bytes_per_group=150 * MB, max_file_bytes=120 * MB)
    slices = [make_slice("a", 10 * MB), make_slice("b", None, [5 * MB]), make_slice("c", 20 * MB)]
    assert config.is_small(slices[1])
    # b (120 MB as far as grouping goes) first, then c fits (140), a does not (150 would be fine: > only).
    assert ids(config.group_slices(slices)) == [(["b", "c", "a"], 1)]
    tight = ClusteringConfig(max_bytes_per_group=149 * MB, max_file_bytes=120 * MB)
    assert ids(tight.group_slices(slices)) == [(["b", "c"], 1)]  # a alone at the end: dropped


def test_the_last_single_slice_group_needs_sort_columns_and_the_single_group_switch() -> None:
    slices = [make_slice("a", 10 * MB)]
    assert ClusteringConfig().group_slices(slices) == []
    assert (
        ClusteringConfig(single_group_clustering_enabled=False, sort_columns=("x",)).group_slices(slices)
        == []
    )
    assert ids(ClusteringConfig(sort_columns=("x",)).group_slices(slices)) == [(["a"], 1)]
    # A full group is kept whatever its size: only the partition's last group is judged.
    config = ClusteringConfig(max_bytes_per_group=15 * MB)
    two = [make_slice("a", 10 * MB), make_slice("b", 12 * MB)]
    assert ids(config.group_slices(two)) == [(["b"], 1)]


def test_groups_per_partition_are_capped_and_output_file_groups_round_up() -> None:
    config = ClusteringConfig(max_bytes_per_group=10 * MB, max_num_groups=2, target_file_max_bytes=3 * MB)
    slices = [make_slice(f"f{i}", 6 * MB) for i in range(6)]
    groups = config.group_slices(slices)
    assert ids(groups) == [(["f0"], 2), (["f1"], 2)]
    assert config.output_file_groups(0) == 1
    assert config.output_file_groups(3 * MB + 1) == 2


def test_ties_keep_file_id_order() -> None:
    config = ClusteringConfig()
    slices = [make_slice(x, MB) for x in ("c", "a", "b")]
    assert ids(config.group_slices(slices)) == [(["a", "b", "c"], 1)]


def test_metrics_as_hudi_computes_them() -> None:
    config = ClusteringConfig(max_file_bytes=120 * MB)
    slices = [make_slice("a", 3 * MB, [MB, MB // 2]), make_slice("b", None, [2 * MB]), make_slice("c", MB)]
    m = config.metrics(slices)
    assert list(m) == [
        "TOTAL_LOG_FILES",
        "TOTAL_IO_MB",
        "TOTAL_IO_READ_MB",
        "TOTAL_LOG_FILES_SIZE",
        "TOTAL_IO_WRITE_MB",
    ]
    assert m["TOTAL_LOG_FILES"] == 3
    assert m["TOTAL_LOG_FILES_SIZE"] == 3.5 * MB
    assert m["TOTAL_IO_READ_MB"] == 7  # 3 + 1 base + 3.5 log, whole MB
    assert m["TOTAL_IO_WRITE_MB"] == 124  # 3 + 120 (no base) + 1
    assert m["TOTAL_IO_MB"] == 131


# -- plans of real tables ----------------------------------------------------------------------------------


def _table(
    tmp_path: Path, version: int = 8, partitions: int = 2, table_type: str = "MERGE_ON_READ"
) -> tuple[Path, Storage, FileSystemLock]:
    root = tmp_path / "t"
    generate_table(
        str(root),
        GenerateSpec(
            table_type=table_type,  # type: ignore[arg-type]
            table_version=version,
            rows=200,
            commits=3,
            partitions=partitions,
            seed=7,
        ),
    )
    storage = Storage.for_uri(str(root))
    return root, storage, FileSystemLock(storage)


def _small_slices(table: Table) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in table.file_slices():
        out[s.partition_path] = out.get(s.partition_path, 0) + 1
    return out


def test_a_plan_takes_every_small_slice_of_every_partition_with_more_than_one(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    table = Table.open(str(root))
    per_partition = _small_slices(table)
    result = schedule_clustering(storage, lock, config=NO_WRITERS, respect_trigger=False)
    assert result.instant is not None, result.reason
    assert result.plan is not None
    assert result.instant.action == CLUSTERING
    plan = result.plan
    assert len(plan.input_groups) == sum(1 for n in per_partition.values() if n > 1)
    assert {s.partition_path: 0 for s in plan.slices}.keys() == {p for p, n in per_partition.items() if n > 1}
    assert len(plan.slices) == sum(n for n in per_partition.values() if n > 1)
    assert plan.preserve_hoodie_metadata is True
    assert plan.version == 1
    assert plan.strategy is not None
    assert plan.strategy.strategy_class_name == EXECUTION_STRATEGY_CLASS
    for group in plan.input_groups:
        assert group.num_output_file_groups == 1
        m = group.metrics
        assert m["TOTAL_IO_MB"] == m["TOTAL_IO_READ_MB"] + m["TOTAL_IO_WRITE_MB"]
        assert m["TOTAL_LOG_FILES"] == sum(len(s.delta_file_paths) for s in group.slices)
    for s in plan.slices:  # full paths, as Hudi writes them; no bootstrap file ("")
        assert s.data_file_path, s
        assert s.data_file_path.startswith(str(root) + "/"), s
        assert s.bootstrap_file_path == ""
        assert all(p.startswith(str(root) + "/") for p in s.delta_file_paths)
    # The requested file decodes to what was planned, wrapped as Hudi wraps it.
    table = Table.open(str(root))
    data = (root / table.timeline.file_of(result.instant.time, State.REQUESTED)).read_bytes()
    md = decode_requested_replace_metadata(data)
    assert md.operation_type == "CLUSTER"
    assert md.version == 1
    assert md.clustering_plan == plan
    # Its file groups are now held: a second plan finds nothing, and compaction leaves them alone too.
    second = schedule_clustering(storage, lock, config=NO_WRITERS, respect_trigger=False)
    assert second.instant is None
    assert "held by pending compaction or clustering" in second.reason
    compaction = schedule_compaction(storage, lock)
    assert compaction.plan is None or not (
        {(o.partition_path, o.file_id) for o in compaction.plan.operations}
        & {(s.partition_path, s.file_id) for s in plan.slices}
    )


def test_v6_requests_a_replacecommit(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path, version=6, partitions=0, table_type="COPY_ON_WRITE")
    result = schedule_clustering(storage, lock, config=NO_WRITERS, respect_trigger=False)
    assert result.instant is not None
    assert result.instant.action == REPLACE_COMMIT
    assert (root / ".hoodie" / f"{result.instant.time}.replacecommit.requested").is_file()


def test_groups_of_a_pending_compaction_and_replaced_groups_are_left_out(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path, partitions=1)
    compaction = schedule_compaction(storage, lock)
    assert compaction.plan is not None
    held = {(o.partition_path, o.file_id) for o in compaction.plan.operations}
    sorted_by_ts = ClusteringConfig(sort_columns=("ts",), update_strategy=ALLOW)
    clustering = schedule_clustering(storage, lock, config=sorted_by_ts, respect_trigger=False)
    assert clustering.plan is not None, clustering.reason
    planned = {(s.partition_path, s.file_id) for s in clustering.plan.slices}
    assert planned
    assert not planned & held
    cluster_in_process(storage, lock)
    # The replaced file groups are never planned again; the new one is (with the groups left) when small.
    table = Table.open(str(root))
    replaced = {(g.partition_path, g.file_id) for g in table.replaced_file_groups()}
    assert planned <= replaced
    again = plan_clustering(table, "29990101000000000", sorted_by_ts)
    assert again.plan is not None
    assert not {(s.partition_path, s.file_id) for s in again.plan.slices} & (replaced | held)


def test_small_file_limit_and_partition_selection(tmp_path: Path) -> None:
    root, _, _ = _table(tmp_path, partitions=3)
    table = Table.open(str(root))
    none = plan_clustering(table, "29990101000000000", ClusteringConfig(small_file_limit=1))
    assert none.plan is None
    assert "no partition has more than one file slice" in none.reason
    partitions = sorted(_small_slices(table))
    only = ClusteringConfig(partitions_selected=(partitions[1],), update_strategy=ALLOW)
    plan = plan_clustering(table, "29990101000000000", only).plan
    assert plan is not None
    assert {s.partition_path for s in plan.slices} == {partitions[1]}
    nothing = plan_clustering(table, "29990101000000000", ClusteringConfig(partition_regex="nope"))
    assert nothing.plan is None
    assert "no partition selected" in nothing.reason


def test_the_plan_holds_at_most_max_num_groups(tmp_path: Path) -> None:
    root, _, _ = _table(tmp_path, partitions=3)
    table = Table.open(str(root))
    config = ClusteringConfig(max_num_groups=2, update_strategy=ALLOW)
    plan = plan_clustering(table, "29990101000000000", config).plan
    assert plan is not None
    assert len(plan.input_groups) == 2
    # Partitions in order: the first two partitions' groups.
    assert [g.slices[0].partition_path for g in plan.input_groups] == sorted(_small_slices(table))[:2]


def test_sort_columns_must_be_table_columns(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    table = Table.open(str(root))
    with pytest.raises(InvalidWriteConfig, match=r"nope.*not \(top-level\) column") as e:
        plan_clustering(table, "29990101000000000", ClusteringConfig(sort_columns=("rider", "nope")))
    assert SORT_COLUMNS in str(e.value)
    with pytest.raises(InvalidWriteConfig, match=r"begin_lat\.x"):
        schedule_clustering(storage, lock, config=ClusteringConfig(sort_columns=("begin_lat.x",)))
    by_rider = ClusteringConfig(sort_columns=("rider", "ts"), update_strategy=ALLOW)
    plan = plan_clustering(table, "29990101000000000", by_rider).plan
    assert plan is not None
    assert plan.strategy is not None
    assert plan.strategy.strategy_params == {SORT_COLUMNS: "rider,ts"}


def test_trigger_counts_completed_writes_since_the_last_clustering(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)  # 3 deltacommits
    config = ClusteringConfig()  # 4 commits
    decision = evaluate_clustering_trigger(Table.open(str(root)), config)
    assert (decision.fire, decision.commits, decision.last_clustering) == (False, 3, None)
    result = schedule_clustering(storage, lock, config=config)
    assert result.instant is None
    assert result.trigger is not None
    assert "does not fire" in result.reason
    assert "hoodie.clustering.async.max.commits" in result.reason
    scheduled = schedule_clustering(
        storage, lock, config=ClusteringConfig(max_commits=3, update_strategy=ALLOW)
    )
    assert scheduled.instant is not None
    assert scheduled.trigger is not None
    assert scheduled.trigger.fire
    # A pending clustering does not reset the count; a completed one does.
    assert evaluate_clustering_trigger(Table.open(str(root)), config).commits == 3
    cluster_in_process(storage, lock)
    decision = evaluate_clustering_trigger(Table.open(str(root)), config)
    assert (decision.commits, decision.last_clustering) == (0, scheduled.instant.time)


def test_v6_waits_for_an_earlier_pending_write(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path, version=6)
    table = Table.load(storage)
    writer = TimelineWriter(storage, table.config, lock)
    t = writer.next_instant_time()
    writer.start(writer.request(DELTA_COMMIT, t))
    result = schedule_clustering(storage, lock, respect_trigger=False)
    assert result.instant is None
    assert t in result.reason
    assert "version 6" in result.reason
    # Planned at an earlier time than a completed write: refused whatever the version.
    later = plan_clustering(Table.open(str(root)), "20000101000000000", ClusteringConfig())
    assert later.plan is None
    assert "at or after the clustering time" in later.reason


# -- beside writers ------------------------------------------------------------------------------------------


def test_plans_leave_the_groups_of_the_last_writer_commits_to_reject_update_writers(tmp_path: Path) -> None:
    # Three cold groups (one bulk insert each), then the hot group and two updates of it: six writer commits.
    live = live_table(tmp_path / "t", table_type="MERGE_ON_READ", version=8, strategy=ALLOW, hot_commits=2)
    table = Table.open(str(live.root))
    t = "29990101000000000"

    def planned(settings: dict[str, str]) -> set[FileGroupId]:
        result = plan_clustering(table, t, ClusteringConfig.from_config(settings))
        return (
            set()
            if result.plan is None
            else {FileGroupId(s.partition_path, s.file_id) for s in result.plan.slices}
        )

    # Hudi's default (reject), 5 commits: the last two cold groups and the hot one stay out; one is left.
    default = plan_clustering(table, t, ClusteringConfig.from_config({}))
    assert default.plan is None
    assert "3 file group(s) left to writers" in default.reason
    assert "hoodie.clustering.hoodied.recent.write.commits=5" in default.reason
    assert planned({"hoodie.clustering.hoodied.recent.write.commits": "2"}) == set(live.cold)
    assert planned({"hoodie.clustering.hoodied.recent.write.commits": "0"}) == {*live.cold, live.hot}
    # Allow-update writers: every candidate, as before; with the key set, its commits count again.
    allow = {"hoodie.clustering.updates.strategy": ALLOW.value}
    assert planned(allow) == {*live.cold, live.hot}
    assert planned({**allow, "hoodie.clustering.hoodied.recent.write.commits": "2"}) == set(live.cold)
    reason = plan_clustering(
        table, t, ClusteringConfig.from_config({"hoodie.clustering.hoodied.recent.write.commits": "2"})
    ).reason
    assert reason.endswith(
        "; 1 file group(s) left to writers (written by the last 2 writer commit(s) or by a pending write; "
        "hoodie.clustering.updates.strategy=SparkRejectUpdateStrategy, "
        "hoodie.clustering.hoodied.recent.write.commits=2)"
    )


def test_the_partition_filter_mode_narrows_and_orders_the_plan(tmp_path: Path) -> None:
    root, _, _ = _table(tmp_path, partitions=3)
    table = Table.open(str(root))
    partitions = sorted(_small_slices(table))
    recent = ClusteringConfig(
        update_strategy=ALLOW, partition_filter=PartitionFilter(FilterMode.RECENT_DAYS, 2, skip_from_latest=1)
    )
    plan = plan_clustering(table, "29990101000000000", recent).plan
    assert plan is not None
    # The latest partition skipped, the next two planned newest first (Hudi's order: it fills the cap).
    assert [g.slices[0].partition_path for g in plan.input_groups] == [partitions[1], partitions[0]]
    nothing = ClusteringConfig(
        update_strategy=ALLOW, partition_filter=PartitionFilter(FilterMode.RECENT_DAYS, 2, 3)
    )
    result = plan_clustering(table, "29990101000000000", nothing)
    assert result.plan is None
    assert (
        "no partition selected for clustering (hoodie.clustering.plan.partition.filter.mode=RECENT_DAYS"
        in (result.reason)
    )
