"""Clean planning and execution in one process on generated tables: each policy deletes exactly the slices
Hudi's would, never one a reader, a retained time travel, a pending compaction or clustering or a savepoint
needs; hudi-rs reads every retained instant as before."""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.clean.execute import clean_in_process, plan_files, prepare_clean
from hoodie.clean.plan import (
    CleanConfig,
    CleanPolicy,
    FailedWritesPolicy,
    clean_due,
    earliest_commit_to_retain,
    plan_clean,
    schedule_clean,
)
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import InvalidWriteConfig, PathOutsideTable
from hoodie.file_group.file_group import FileGroupId
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import CLUSTERING, REPLACE_COMMIT, SAVEPOINT
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.metadata import (
    CleanerPlan,
    CleanFileInfo,
    ClusteringGroup,
    ClusteringPlan,
    RequestedReplaceMetadata,
    SavepointMetadata,
    SavepointPartitionMetadata,
    SliceInfo,
    encode_cleaner_plan,
)
from hoodie.timeline.writer import TimelineWriter
from support.clean_checks import capture_reads, check_clean, data_bytes

NOW = dt.datetime(2100, 1, 1)


def _cow(
    tmp_path: Path, version: int, commits: int = 6, partitions: int = 2
) -> tuple[Path, Storage, FileSystemLock]:
    root = tmp_path / "t"
    generate_table(
        str(root),
        GenerateSpec(
            table_type="COPY_ON_WRITE",
            table_version=version,
            rows=200,
            commits=commits,
            update_fraction=0.3,
            delete_fraction=0.05,
            partitions=partitions,
            seed=5,
        ),
    )
    storage = Storage.for_uri(str(root))
    return root, storage, FileSystemLock(storage)


def _mor_with_versions(tmp_path: Path, version: int) -> tuple[Path, Storage, FileSystemLock]:
    """A MOR table whose file groups have three slices (two compactions between writes)."""
    root = tmp_path / "t"
    spec = GenerateSpec(table_version=version, rows=200, commits=2, partitions=2, seed=8, update_fraction=0.4)
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    for seed in (11, 12):
        assert schedule_compaction(storage, lock).instant is not None
        compact_in_process(storage, lock)
        live = Table.open(str(root)).read(columns=["uuid", "city"]).slice(0, 60)
        rows = TripGenerator(seed, 2).rows(live.column("uuid").to_pylist(), live.column("city").to_pylist())
        TableWriter.open(str(root)).upsert(rows)
    return root, storage, lock


def _slices(table: Table) -> dict[FileGroupId, list[str]]:
    return {gid: [s.base_instant for s in g.ordered()] for gid, g in table.file_groups().items()}


@pytest.mark.parametrize("version", [6, 8, 9])
def test_keep_latest_commits_keeps_every_retained_time_travel(tmp_path: Path, version: int) -> None:
    root, storage, lock = _cow(tmp_path, version)
    before = capture_reads(root)
    table = Table.open(str(root))
    config = CleanConfig(commits_retained=2)
    writes = table.timeline.completed_writes()
    ectr = earliest_commit_to_retain(table, config, NOW)
    assert ectr is not None
    assert ectr.time == writes[-2].time
    scheduled = schedule_clean(storage, lock, config=config)
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    planned = plan_files(scheduled.plan)
    assert planned, "six commits with updates leave old versions to clean"
    # Exactly Hudi's rule: per group, slices before the earliest retained commit except the latest of those.
    for gid, bases in _slices(table).items():
        old = [b for b in bases if b < ectr.time]
        doomed = {
            p
            for p in planned.get(gid.partition_path, ())
            if p.rsplit("/", 1)[-1].startswith(f"{gid.file_id}_")
        }
        assert len(doomed) == max(len(old) - 1, 0), (gid, bases, doomed)
    result = clean_in_process(storage, lock)
    check_clean(root, before, scheduled.instant.time, scheduled.plan, f"v{version} KEEP_LATEST_COMMITS")
    assert before.data_bytes - data_bytes(root) == scheduled.bytes_to_delete == result.bytes_deleted
    # Nothing left to clean with the same retention.
    again = schedule_clean(storage, lock, config=config)
    assert again.instant is None
    assert "nothing to clean" in again.reason


@pytest.mark.parametrize("version", [6, 8])
def test_keep_latest_file_versions(tmp_path: Path, version: int) -> None:
    root, storage, lock = _cow(tmp_path, version)
    before = capture_reads(root)
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=2)
    scheduled = schedule_clean(storage, lock, config=config)
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    assert scheduled.plan.earliest_instant_to_retain is None
    counts_before = {gid: len(b) for gid, b in _slices(Table.open(str(root))).items()}
    clean_in_process(storage, lock)
    after = _slices(Table.open(str(root)))
    for gid, n in counts_before.items():
        assert len(after[gid]) == min(n, 2), gid
    check_clean(root, before, scheduled.instant.time, scheduled.plan, f"v{version} FILE_VERSIONS")


def test_keep_latest_by_hours(tmp_path: Path) -> None:
    root, _storage, _lock = _cow(tmp_path, 8)
    table = Table.open(str(root))
    writes = table.timeline.completed_writes()
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_BY_HOURS, hours_retained=1)
    # An hour after the fourth write: the earliest retained commit is the first write at or after that time.
    now = parse_instant_time(writes[3].time) + dt.timedelta(hours=1)
    ectr = earliest_commit_to_retain(table, config, now)
    assert ectr is not None
    assert ectr.time == writes[3].time
    # Writes all younger than the window: nothing is cleaned.
    young = plan_clean(table, config, parse_instant_time(writes[0].time) + dt.timedelta(minutes=1))
    assert young.plan is None
    assert "nothing to clean" in young.reason
    # Within the window of the fourth write: the versions older than it go.
    result = plan_clean(table, config, now)
    assert result.plan is not None
    assert result.plan.earliest_instant_to_retain is not None
    assert result.plan.earliest_instant_to_retain.timestamp == writes[3].time


def test_mor_slices_pending_compaction_and_savepoint_are_kept(tmp_path: Path) -> None:
    root, storage, lock = _mor_with_versions(tmp_path, 8)
    table = Table.open(str(root))
    slices = _slices(table)
    assert any(len(b) >= 3 for b in slices.values())
    # A savepoint holding the oldest slice of one group, and a pending compaction of every group with logs.
    gid, bases = next((g, b) for g, b in sorted(slices.items(), key=lambda kv: kv[0].file_id) if len(b) >= 3)
    oldest = table.file_groups()[gid].ordered()[0]
    assert oldest.base_file is not None
    writer = TimelineWriter(storage, table.config, lock)
    sp_time = writer.next_instant_time()
    sp = writer.create_inflight(SAVEPOINT, sp_time)
    writer.complete(
        sp,
        SavepointMetadata(
            savepointed_by="test",
            savepointed_at=int(time.time()),
            comments="",
            partition_metadata={
                gid.partition_path: SavepointPartitionMetadata(
                    gid.partition_path, (oldest.base_file.file_name,)
                )
            },
        ),
    )
    compaction = schedule_compaction(storage, lock)
    assert compaction.plan is not None
    needed = {(op.partition_path, op.file_id): op.base_instant_time for op in compaction.plan.operations}
    before = capture_reads(root)
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    scheduled = schedule_clean(storage, lock, config=config)
    assert scheduled.plan is not None
    assert scheduled.instant is not None
    clean_in_process(storage, lock)
    after = _slices(Table.open(str(root)))
    assert oldest.base_instant in after[gid], "the savepointed slice was cleaned"
    for (partition, file_id), base_instant in needed.items():
        assert base_instant in after[FileGroupId(partition, file_id)], (
            "a pending compaction's slice was cleaned"
        )
    for g, bases in after.items():
        assert bases[-1] == slices[g][-1], "the latest slice was cleaned"
    check_clean(root, before, scheduled.instant.time, scheduled.plan, "MOR with savepoint and compaction")
    # The pending compaction still runs and changes nothing a reader sees.
    compact_in_process(storage, lock)
    assert Table.open(str(root)).read().num_rows == before.latest.num_rows


@pytest.mark.parametrize("version", [6, 8])
def test_pending_clustering_groups_and_replaced_groups(tmp_path: Path, version: int) -> None:
    root, storage, lock = _cow(tmp_path, version, commits=5, partitions=2)
    table = Table.open(str(root))
    groups = sorted(table.file_groups().items(), key=lambda kv: (kv[0].partition_path, kv[0].file_id))
    held_gid, held = next((g, grp) for g, grp in groups if len(grp.ordered()) >= 2)
    latest = held.ordered()[-1]
    assert latest.base_file is not None
    plan = ClusteringPlan(
        input_groups=(
            ClusteringGroup(
                slices=(
                    SliceInfo(
                        file_id=held_gid.file_id,
                        partition_path=held_gid.partition_path,
                        data_file_path=storage.full_path(latest.base_file_path or ""),
                    ),
                ),
            ),
        ),
        preserve_hoodie_metadata=True,
    )
    writer = TimelineWriter(storage, table.config, lock)
    t = writer.next_instant_time()
    writer.request(
        CLUSTERING if version >= 8 else REPLACE_COMMIT,
        t,
        RequestedReplaceMetadata(operation_type="CLUSTER", clustering_plan=plan),
    )
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    result = plan_clean(Table.open(str(root)), config, NOW)
    assert result.plan is not None
    doomed = {p for paths in plan_files(result.plan).values() for p in paths}
    assert doomed, "other groups still have old versions to clean"
    assert not any(p.rsplit("/", 1)[-1].startswith(f"{held_gid.file_id}_") for p in doomed)


def test_a_reader_snapshot_taken_before_planning_stays_readable(tmp_path: Path) -> None:
    root, storage, lock = _cow(tmp_path, 8)
    reader = Table.open(str(root))
    slices = reader.file_slices()
    expected = reader.read()
    scheduled = schedule_clean(
        storage,
        lock,
        config=CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1),
    )
    assert scheduled.instant is not None
    clean_in_process(storage, lock)
    # The reader goes on with the slices it listed before the clean was planned.
    parts = [reader.read_file_slice(s) for s in slices]
    got = pa.concat_tables([p for p in parts if p is not None])
    assert got.num_rows == expected.num_rows
    assert sorted(got.column("_hoodie_record_key").to_pylist()) == sorted(
        expected.column("_hoodie_record_key").to_pylist()
    )


def test_trigger_counts_commits_since_the_last_clean(tmp_path: Path) -> None:
    root, storage, lock = _cow(tmp_path, 8, commits=4)
    table = Table.open(str(root))
    assert clean_due(table, CleanConfig(max_commits=4))[0]
    assert not clean_due(table, CleanConfig(max_commits=5))[0]
    config = CleanConfig(commits_retained=1, max_commits=2)
    assert schedule_clean(storage, lock, config=config, respect_trigger=True).instant is not None
    clean_in_process(storage, lock)
    due, why = clean_due(Table.open(str(root)), config)
    assert not due
    assert "0 commit(s)" in why
    not_now = schedule_clean(storage, lock, config=config, respect_trigger=True)
    assert not_now.instant is None
    assert "0 commit(s)" in not_now.reason


def test_config_keys_defaults_and_errors() -> None:
    assert CleanConfig.from_config({}) == CleanConfig()
    assert CleanConfig.from_config({"hoodie.cleaner.commits.retained": "4"}).commits_retained == 4
    assert (
        CleanConfig.from_config({"hoodie.clean.hours.retained": "5"}).policy
        is CleanPolicy.KEEP_LATEST_BY_HOURS
    )
    assert (
        CleanConfig.from_config({"hoodie.cleaner.fileversions.retained": "2"}).policy
        is CleanPolicy.KEEP_LATEST_FILE_VERSIONS
    )
    cfg = CleanConfig.from_config(
        {"hoodie.cleaner.policy": "keep_latest_file_versions", "hoodie.cleaner.policy.failed.writes": "LAZY"}
    )
    assert cfg.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS
    assert cfg.failed_writes is FailedWritesPolicy.LAZY
    with pytest.raises(InvalidWriteConfig, match=r"hoodie\.clean\.policy='KEEP_SOME'"):
        CleanConfig.from_config({"hoodie.clean.policy": "KEEP_SOME"})
    with pytest.raises(InvalidWriteConfig, match=r"hoodie\.clean\.commits\.retained"):
        CleanConfig.from_config({"hoodie.clean.commits.retained": "ten"})
    with pytest.raises(InvalidWriteConfig, match="NUM_COMMITS"):
        CleanConfig.from_config({"hoodie.clean.trigger.strategy": "TIME_ELAPSED"})
    with pytest.raises(InvalidWriteConfig, match="at least one version"):
        CleanConfig.from_config({"hoodie.clean.fileversions.retained": "0"})


def test_a_plan_naming_files_outside_the_table_is_refused_and_deletes_nothing(tmp_path: Path) -> None:
    root, storage, lock = _cow(tmp_path, 8, commits=2)
    victim = tmp_path / "victim.parquet"
    victim.write_bytes(b"x")
    table = Table.open(str(root))
    writer = TimelineWriter(storage, table.config, lock)
    partition = next(iter(table.file_groups())).partition_path
    for bad in (str(victim), f"{partition}/../../victim.parquet", f"{partition}/hoodie.properties"):
        t = writer.next_instant_time()
        plan = CleanerPlan(
            policy="KEEP_LATEST_COMMITS",
            file_paths_to_be_deleted_per_partition={partition: (CleanFileInfo(bad, False),)},
        )
        writer.request("clean", t, encode_cleaner_plan(plan, table_version=8))
        with pytest.raises(PathOutsideTable):
            prepare_clean(storage, lock, t)
        writer.delete_pending(Table.open(str(root)).timeline.get(t))  # type: ignore[arg-type]
    assert victim.exists()


def test_partitions_to_be_deleted_outside_the_table_are_refused(tmp_path: Path) -> None:
    root, storage, lock = _cow(tmp_path, 8, commits=2)
    table = Table.open(str(root))
    writer = TimelineWriter(storage, table.config, lock)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    for bad in ("../victim", "/etc", ".hoodie", "a/./b", "city=x/.hoodie"):
        t = writer.next_instant_time()
        plan = CleanerPlan(policy="KEEP_LATEST_COMMITS", partitions_to_be_deleted=(bad,))
        writer.request("clean", t, encode_cleaner_plan(plan, table_version=8))
        with pytest.raises(PathOutsideTable):
            prepare_clean(storage, lock, t)
        writer.delete_pending(Table.open(str(root)).timeline.get(t))  # type: ignore[arg-type]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("version", [6, 8])
def test_a_partition_emptied_by_the_clean_is_deleted_and_one_written_to_since_is_kept(
    tmp_path: Path, version: int
) -> None:
    """``partitionsToBeDeleted`` (what a clean after a DELETE_PARTITION names): the folder goes once the
    plan's files are deleted and ``isPartitionDeleted`` says so; a folder still holding data is kept."""
    root, storage, lock = _cow(tmp_path, version, commits=2)
    table = Table.open(str(root))
    by_partition: dict[str, list[str]] = {}
    for group in table.file_groups().values():
        for s in group.ordered():
            if s.base_file is not None:
                by_partition.setdefault(group.id.partition_path, []).append(s.base_file.file_name)
    emptied, written, *_ = sorted(by_partition)
    writer = TimelineWriter(storage, table.config, lock)
    t = writer.next_instant_time()
    plan = CleanerPlan(
        policy="KEEP_LATEST_COMMITS",
        file_paths_to_be_deleted_per_partition={
            emptied: tuple(CleanFileInfo(f"{emptied}/{n}", False) for n in by_partition[emptied]),
            written: (CleanFileInfo(f"{written}/{by_partition[written][0]}", False),),
        },
        partitions_to_be_deleted=(emptied, written),
    )
    writer.request("clean", t, encode_cleaner_plan(plan, table_version=version))
    result = clean_in_process(storage, lock, t)
    assert not (root / emptied).exists()
    assert (root / written).is_dir()  # its other files are still there
    metadata = result.metadata.partition_metadata
    assert metadata[emptied].is_partition_deleted is True
    assert metadata[written].is_partition_deleted is False
