"""Restore to a savepoint (hoodie.savepoint.restore): on generated v6/v8/v9 tables, COPY_ON_WRITE and
MERGE_ON_READ, with compactions, clusterings, cleans, pending instants and failed writes after the savepoint,
our snapshot and hudi-rs's after the restore equal hudi-rs's time travel to the savepoint taken before; the
timeline holds what Hudi's would (what was there up to the savepoint, the cleans, the restore; no rollback);
the metadata table is restored (or deleted, by Hudi's rules) and consistent; a restore killed at any step
finishes when run again, and readers agree meanwhile. The plan's order is checked on synthetic timelines.

``HOODIED_RESTORE_KILLS=all`` kills at every failpoint (default: a representative handful)."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.avro.container import read_container
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UPDATES_STRATEGY, UpdateStrategy
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.config import TableConfig
from hoodie.errors import RestoreRefused, TimeTravelRefused
from hoodie.indexing.execute import run_indexing, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.metadata.reader import MetadataTableConfig
from hoodie.savepoint.restore import plan_restore, restore_pending, restore_to_savepoint
from hoodie.savepoint.savepoint import create_savepoint
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import CLEAN, DELTA_COMMIT, RESTORE, ROLLBACK, WRITE_ACTIONS, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    InstantInfo,
    RestoreMetadata,
    RestorePlan,
    RollbackMetadata,
    RollbackPartitionMetadata,
    decode_restore_metadata,
    decode_restore_plan,
    encode_commit_metadata,
    encode_restore_metadata,
    encode_restore_plan,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.heartbeat import Heartbeat
from hoodie.write.service_commit import by_partition
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, Query
from support.metadata_checks import check_metadata_table

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[3]
KEYS = ["_hoodie_record_key", "_hoodie_partition_path"]
CLUSTERING = {
    "hoodie.clustering.plan.strategy.small.file.limit": "10485760",
    "hoodie.clustering.plan.strategy.single.group.clustering.enabled": "true",
    "hoodie.clustering.plan.strategy.sort.columns": "ts",
    # No writer beside the table: every candidate (as with allow-update writers).
    UPDATES_STRATEGY: UpdateStrategy.ALLOW.value,
}
#: ``hoodie.metadata.compact.max.delta.commits`` high enough that the metadata table does not compact after
#: the savepoint (its restore branch), or low enough that it does (Hudi deletes it then).
NO_MDT_COMPACTION = "100"
MDT_COMPACTS = "3"


def _upsert(root: Path, lock: FileSystemLock, seed: int, n: int = 25) -> None:
    live = Table.open(str(root)).read(columns=["uuid", "city"]).slice(0, n)
    rows = TripGenerator(seed, 2).rows(live.column("uuid").to_pylist(), live.column("city").to_pylist())
    TableWriter.open(str(root), lock=lock).upsert(rows)


def build(
    root: Path,
    version: int,
    table_type: str,
    *,
    indexes: tuple[str, ...] = (),
    mdt_max_delta_commits: str | None = None,
) -> str:
    """A table with a savepoint; after it: upserts, a compaction (MERGE_ON_READ; one planned before the
    savepoint completes after it), a clustering, a clean keeping one commit, then a pending clustering and a
    failed write. Returns the savepoint's time."""
    mor = table_type == "MERGE_ON_READ"
    spec = GenerateSpec(
        table_type=table_type,  # type: ignore[arg-type]
        table_version=version,
        rows=80,
        commits=2,
        partitions=2,
        seed=3,
    )
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    if mdt_max_delta_commits is not None:
        config = TableConfig.load(storage)
        config.updated({"hoodie.metadata.compact.max.delta.commits": mdt_max_delta_commits}).store(storage)
    if indexes:
        assert schedule_indexing(storage, lock, list(indexes)).instant is not None
        run_indexing(storage, lock)
    spanning = schedule_compaction(storage, lock).instant if mor else None
    _upsert(root, lock, 11)
    savepoint = Table.open(str(root)).timeline.completed_writes()[-1].time
    create_savepoint(storage, lock, savepoint, user="test", comments="before the rounds")
    if spanning is not None:
        compact_in_process(storage, lock, spanning.time)  # planned before the savepoint: it stays
    _upsert(root, lock, 12)
    if mor and schedule_compaction(storage, lock).instant is not None:
        compact_in_process(storage, lock)
    clustering = ClusteringConfig.from_config(CLUSTERING)
    assert schedule_clustering(storage, lock, config=clustering, respect_trigger=False).instant is not None
    cluster_in_process(storage, lock)
    _upsert(root, lock, 13)
    clean = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=1)
    assert schedule_clean(storage, lock, config=clean).instant is not None
    clean_in_process(storage, lock)
    _upsert(root, lock, 14)
    if mor:
        schedule_clustering(storage, lock, config=clustering, respect_trigger=False)  # left pending
    writer = TimelineWriter(storage, TableConfig.load(storage), lock)
    failed = writer.request(DELTA_COMMIT if mor else "commit", writer.next_instant_time())
    writer.start(failed)  # a write that died before writing anything
    return savepoint


def timeline_names(root: Path) -> set[str]:
    table = Table.open(str(root))
    folder = root / table.config.timeline_path
    return {p.name for p in folder.iterdir() if p.is_file() and Instant.try_parse(p.name)}


def expected_timeline(before: set[str], savepoint: str, rolled_back: set[str]) -> set[str]:
    """What Hudi's timeline holds after the restore, but the restore's own files: every file of an instant
    the restore did not roll back, except rollbacks requested after the savepoint."""
    out = set()
    for name in before:
        instant = Instant.parse(name)
        if instant.time in rolled_back and instant.action != "savepoint":
            continue
        if instant.action == ROLLBACK and instant.time > savepoint:
            continue
        out.add(name)
    return out


def check_restored(
    root: Path, oracle: HudiOracle, savepoint: str, expected: pa.Table, before: set[str], context: str
) -> None:
    """Our snapshot and hudi-rs's equal ``expected``; the timeline holds exactly what Hudi's would; the
    metadata table (if any) is consistent."""
    assert_same_rows(Table.open(str(root)).read(), expected, KEYS, context=f"{context}: ours")
    assert_same_rows(oracle.rows(root, Query.snapshot()), expected, KEYS, context=f"{context}: hudi-rs")
    # The savepoint stays readable after the restore, whatever the clean before it retained (issue 35).
    restored = Table.open(str(root))
    assert_same_rows(restored.read(as_of=savepoint), expected, KEYS, context=f"{context}: ours as of it")
    for older in (w.time for w in restored.timeline.completed_writes() if w.time < savepoint):
        refusal = ""
        try:
            restored.read(as_of=older, columns=["_hoodie_record_key"])
        except TimeTravelRefused as e:
            refusal = str(e)
        named = set(re.findall(r"\b\d{17}\b", refusal)) - {older}  # only instants the table has
        assert named <= {i.time for i in restored.timeline}, f"{context}: {refusal}"
    table = Table.open(str(root))
    restores = [i for i in table.timeline if i.action == RESTORE]
    assert len(restores) == 1, f"{context}: {restores}"
    assert restores[0].is_completed, f"{context}: {restores}"
    restore = restores[0]
    plan = decode_restore_plan((root / table.timeline.file_of(restore.time, State.REQUESTED)).read_bytes())
    metadata = decode_restore_metadata((root / table.timeline.file_of(restore.time)).read_bytes())
    assert plan.savepoint_to_restore_timestamp == savepoint
    planned = [i.commit_time for i in plan.instants_to_rollback]
    assert list(metadata.instants_to_rollback) == planned, context
    assert set(metadata.hoodie_restore_metadata) == set(planned), context
    assert all(len(v) == 1 for v in metadata.hoodie_restore_metadata.values())
    restore_files = {n for n in timeline_names(root) if Instant.parse(n).time == restore.time}
    assert len(restore_files) == 3, restore_files
    wanted = expected_timeline(before, savepoint, set(planned)) | restore_files
    now = timeline_names(root)
    assert now == wanted, f"{context}: extra {sorted(now - wanted)}, missing {sorted(wanted - now)}"

    # Independently of the plan: the completed writes are those up to the savepoint (a compaction planned
    # before it and completed after it included), and after it there is nothing but cleans and the restore.
    def writes(names: set[str]) -> set[tuple[str, str]]:
        parsed = [Instant.parse(n) for n in names]
        return {(i.time, i.action) for i in parsed if i.is_completed and i.action in WRITE_ACTIONS}

    assert writes(now) == {w for w in writes(before) if w[0] <= savepoint}, context
    after = {Instant.parse(n).action for n in now if Instant.parse(n).time > savepoint}
    assert after <= {CLEAN, RESTORE}, f"{context}: {after} after the savepoint"
    assert not restore_pending(table.timeline)
    check_metadata_table(root, context)


CASES = {
    "v6-cow": (6, "COPY_ON_WRITE", (), None),
    "v6-mor-mdt": (6, "MERGE_ON_READ", ("column_stats", "record_index"), NO_MDT_COMPACTION),
    "v8-cow": (8, "COPY_ON_WRITE", (), None),
    "v8-mor-mdt": (8, "MERGE_ON_READ", ("column_stats", "bloom_filters", "record_index"), NO_MDT_COMPACTION),
    "v9-mor-mdt-deleted": (9, "MERGE_ON_READ", ("record_index", "partition_stats"), MDT_COMPACTS),
}


@pytest.fixture(scope="module")
def no_skew_wait() -> Iterator[None]:
    """Instant times wait out the clock skew allowed between writers (200 ms each, TrueTime); these tables
    are written by this one process (the killed restore's child keeps its waits), so the waits only cost
    time: several seconds per table."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(InstantTimeGenerator.__init__, "__defaults__", ("UTC", 0))
        yield


@pytest.fixture(scope="module")
def templates(
    tmp_path_factory: pytest.TempPathFactory, no_skew_wait: None
) -> Callable[[str], tuple[Path, str]]:
    """Each case's table (built once, on first use) and its savepoint; tests work on copies."""
    built: dict[str, tuple[Path, str]] = {}

    def get(case: str) -> tuple[Path, str]:
        if case not in built:
            version, table_type, indexes, mdt_max = CASES[case]
            root = tmp_path_factory.mktemp("restore") / case
            built[case] = (
                root,
                build(root, version, table_type, indexes=indexes, mdt_max_delta_commits=mdt_max),
            )
        return built[case]

    return get


def copy_of(template: Path, root: Path) -> Path:
    shutil.copytree(template, root)  # modification times kept: table version 6 orders by them
    return root


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_restore_reads_as_the_savepoint(
    tmp_path: Path, hudi_oracle: HudiOracle, templates: Callable[[str], tuple[Path, str]], case: str
) -> None:
    _, _, indexes, mdt_max = CASES[case]
    source, savepoint = templates(case)
    expected = hudi_oracle.rows(source, Query.snapshot(as_of=savepoint))
    assert expected.num_rows > 0
    root = copy_of(source, tmp_path / "t")
    before = timeline_names(root)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    result = restore_to_savepoint(storage, lock, savepoint)
    assert result.rolled_back
    assert result.files_deleted > 0
    check_restored(root, hudi_oracle, savepoint, expected, before, case)
    timeline = Table.open(str(root)).timeline
    if CASES[case][1] == "MERGE_ON_READ":  # the compaction planned before the savepoint stayed
        assert timeline.was_compaction(timeline.completed_writes()[-2].time), timeline.completed_writes()
    config = TableConfig.load(storage)
    if not indexes:
        assert result.metadata_table == "none"
        return
    if mdt_max == MDT_COMPACTS:
        # The metadata table compacted after the savepoint: Hudi deletes it; an indexing builds it again.
        assert result.metadata_table.startswith("deleted"), result.metadata_table
        assert not config.metadata_partitions
        assert not (root / ".hoodie" / "metadata").exists()
        assert schedule_indexing(storage, lock, ["column_stats"]).instant is not None
        run_indexing(storage, lock)
        assert set(TableConfig.load(storage).metadata_partitions) == {"files", "column_stats"}
    else:
        assert result.metadata_table.startswith("restored"), result.metadata_table
        assert set(config.metadata_partitions) == {"files", *indexes}
        # hudi-rs read the restored metadata table's listing above; the table goes on with it, compacted.
        config.updated({"hoodie.metadata.compact.max.delta.commits": MDT_COMPACTS}).store(storage)
        for seed in range(20, 24):
            _upsert(root, lock, seed)
        mdt_storage = storage.child(".hoodie/metadata")
        mdt_timeline = Timeline.load(mdt_storage, MetadataTableConfig.load(mdt_storage))
        assert any(i.action == "commit" for i in mdt_timeline.completed()), "no compaction after the restore"
    check_metadata_table(root, f"{case}: after the restore")
    now = copy_of(root, tmp_path / "now")  # a new root: the oracle caches its answers per root
    assert_same_rows(hudi_oracle.rows(now, Query.snapshot()), Table.open(str(now)).read(), KEYS, context=case)


def test_a_v6_log_file_shared_with_the_savepoint_gets_a_rollback_block(
    tmp_path: Path, hudi_oracle: HudiOracle, no_skew_wait: None
) -> None:
    """Hudi 0.x appends a later deltacommit's blocks to the log file an earlier one wrote: the restore keeps
    the file (it holds the savepoint's blocks) and voids the later blocks with a rollback command block."""
    root = tmp_path / "t"
    spec = GenerateSpec(table_version=6, rows=40, commits=2, partitions=1, seed=9)
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    table = Table.open(str(root))
    savepoint = table.timeline.completed_writes()[-1].time
    ours_at_t = {s.file_id: s.path for s in table.commit_metadata(savepoint).write_stats if s.path}
    _upsert(root, lock, 50)
    table = Table.open(str(root))
    later = table.timeline.completed_writes()[-1]
    md = table.commit_metadata(later)
    stats = []
    appended = []
    for stat in md.write_stats:
        target = ours_at_t.get(stat.file_id or "")
        if stat.path and ".log." in stat.path and target and ".log." in target:
            with open(root / target, "ab") as shared:  # as Hudi 0.x appends
                shared.write((root / stat.path).read_bytes())
            (root / stat.path).unlink()
            appended.append(target)
            stat = dataclasses.replace(stat, path=target, file_size_in_bytes=(root / target).stat().st_size)
        stats.append(stat)
    assert appended, "no log file of the savepoint's commit was written to again"
    shared_md = dataclasses.replace(md, partition_to_write_stats=by_partition(stats))
    (root / table.timeline.file_of(later.time)).write_bytes(
        encode_commit_metadata(shared_md, table_version=6, action=DELTA_COMMIT)
    )
    expected = hudi_oracle.rows(root, Query.snapshot(as_of=savepoint))
    create_savepoint(storage, lock, savepoint)
    result = restore_to_savepoint(storage, lock, savepoint)
    assert [i.commit_time for i in result.rolled_back] == [later.time]
    assert all((root / path).exists() for path in appended)
    restore_md = decode_restore_metadata(
        (root / Table.open(str(root)).timeline.file_of(result.instant.time)).read_bytes()
    )
    voided = [
        f
        for r in restore_md.hoodie_restore_metadata[later.time]
        for p in r.partition_metadata.values()
        for f in p.rollback_log_files
    ]
    assert len(voided) == len(appended)
    now = copy_of(root, tmp_path / "now")
    assert_same_rows(Table.open(str(now)).read(), expected, KEYS, context="ours")
    assert_same_rows(hudi_oracle.rows(now, Query.snapshot()), expected, KEYS, context="hudi-rs")


# -- refusals ------------------------------------------------------------------------------------------------


def _small(tmp_path: Path, version: int = 8) -> tuple[Path, Storage, FileSystemLock, list[str]]:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=version, rows=40, commits=3, partitions=1, seed=5))
    storage = Storage.for_uri(str(root))
    writes = [w.time for w in Table.open(str(root)).timeline.completed_writes()]
    return root, storage, FileSystemLock(storage), writes


def test_refusals(tmp_path: Path) -> None:
    root, storage, lock, writes = _small(tmp_path)
    before = timeline_names(root)
    with pytest.raises(RestoreRefused, match="no savepoint at"):
        restore_to_savepoint(storage, lock, writes[1])
    create_savepoint(storage, lock, writes[0], user="t", comments="")
    create_savepoint(storage, lock, writes[1], user="t", comments="")
    with pytest.raises(RestoreRefused, match=f"savepoint\\(s\\) {writes[1]} would be rolled back"):
        restore_to_savepoint(storage, lock, writes[0])
    with pytest.raises(RestoreRefused, match=r"hoodie\.archive\.beyond\.savepoint"):
        restore_to_savepoint(storage, lock, writes[1], settings={"hoodie.archive.beyond.savepoint": "true"})
    # A write whose writer is alive (a fresh heartbeat) is not rolled back under it.
    writer = TimelineWriter(storage, TableConfig.load(storage), lock)
    live = writer.next_instant_time()
    writer.start(writer.request(DELTA_COMMIT, live))
    heartbeat = Heartbeat(storage, live).start()
    try:
        with pytest.raises(RestoreRefused, match=f"write {live} on .* is alive"):
            restore_to_savepoint(storage, lock, writes[1])
    finally:
        heartbeat.stop()
    assert timeline_names(root) - before == {
        n
        for n in timeline_names(root)
        if Instant.parse(n).action == "savepoint" or Instant.parse(n).time == live
    }, "a refused restore wrote something"
    # A restore to another savepoint is pending: finish it first.
    table = Table.open(str(root))
    plan = plan_restore(table.timeline, writes[1], merge_on_read=True)
    writer.request(RESTORE, writer.next_instant_time(), plan)
    assert restore_pending(Table.open(str(root)).timeline)
    with pytest.raises(RestoreRefused, match=f"to savepoint {writes[1]} is pending"):
        restore_to_savepoint(storage, lock, writes[0])
    result = restore_to_savepoint(storage, lock, writes[1])  # the pending one finishes
    assert result.resumed
    assert [i.commit_time for i in result.rolled_back] == [live, writes[2]]


def test_a_rerun_after_a_completed_restore_only_cleans_up(tmp_path: Path) -> None:
    root, storage, lock, writes = _small(tmp_path, 6)
    create_savepoint(storage, lock, writes[1], user="t", comments="")
    first = restore_to_savepoint(storage, lock, writes[1])
    again = restore_to_savepoint(storage, lock, writes[1])
    assert again.instant == first.instant
    assert again.rolled_back == ()
    assert [i.time for i in Table.open(str(root)).timeline if i.action == RESTORE] == [first.instant.time]
    _upsert(root, lock, 40)  # new writes after a restore: a new restore rolls them back
    second = restore_to_savepoint(storage, lock, writes[1])
    assert second.instant != first.instant
    assert len(second.rolled_back) == 1


@pytest.mark.parametrize("version", [6, 8, 9])
def test_restore_plans_and_metadata_read_back(version: int) -> None:
    plan = RestorePlan((InstantInfo(T3, "deltacommit"), InstantInfo(T2, "commit")), T1)
    data = encode_restore_plan(plan, table_version=version)
    assert read_container(data).schema_name == "org.apache.hudi.avro.model.HoodieRestorePlan"
    assert decode_restore_plan(data) == plan
    rollback = RollbackMetadata(
        start_rollback_time=T4,
        time_taken_in_millis=3,
        total_files_deleted=1,
        commits_rollback=(T3,),
        partition_metadata={"p": RollbackPartitionMetadata("p", ("/t/p/a.parquet",), rollback_log_files={})},
        instants_rollback=(InstantInfo(T3, "deltacommit"),),
    )
    md = RestoreMetadata(T5, 7, (T3,), {T3: (rollback,)}, (InstantInfo(T3, "deltacommit"),))
    assert decode_restore_metadata(encode_restore_metadata(md, table_version=version)) == md


# -- the plan's order ----------------------------------------------------------------------------------------


def _timeline(names: list[str], layout: int = 2) -> Timeline:
    return Timeline.from_file_names(names, layout_version=layout, folder="")


def _order(timeline: Timeline, savepoint: str, *, mor: bool, **kw: object) -> list[tuple[str, str]]:
    plan = plan_restore(timeline, savepoint, merge_on_read=mor, **kw)  # type: ignore[arg-type]
    return [(i.commit_time, i.action) for i in plan.instants_to_rollback]


T0, T1, T2, T3, T4, T5, T6 = (f"2025010100000{i}000" for i in range(7))


def _done(t: str, action: str, c: str, requested: str | None = None) -> list[str]:
    req = requested or action
    return [f"{t}.{req}.requested", f"{t}.{req}.inflight", f"{t}_{c}.{action}"]


def test_mor_plan_keeps_a_compaction_planned_before_the_savepoint() -> None:
    names = [
        *_done(T0, "deltacommit", "20250101000000500"),
        *_done(T1, "commit", "20250101000004500", requested="compaction"),  # planned before, done after T2
        *_done(T2, "deltacommit", "20250101000002500"),
        f"{T2}.savepoint.inflight",
        f"{T2}_20250101000002600.savepoint",
        *_done(T3, "deltacommit", "20250101000003500"),
        f"{T4}.clustering.requested",  # pending clustering after the savepoint: rolled back first
        *_done(T5, "deltacommit", "20250101000005500"),
        f"{T6}.deltacommit.requested",
    ]
    order = _order(_timeline(names), T2, mor=True)
    assert order == [(T4, "clustering"), (T6, "deltacommit"), (T5, "deltacommit"), (T3, "deltacommit")]


def test_cow_plan_goes_by_completion_time() -> None:
    names = [
        *_done(T0, "commit", "20250101000000500"),
        *_done(T1, "replacecommit", "20250101000003500", requested="clustering"),  # completed after T2
        *_done(T2, "commit", "20250101000002500"),
        f"{T2}.savepoint.inflight",
        f"{T2}_20250101000002600.savepoint",
        *_done(T3, "commit", "20250101000004500"),
        f"{T4}.commit.requested",
        f"{T4}.inflight",
    ]
    order = _order(_timeline(names), T2, mor=False)
    # Pending first, then newest completion first; the clustering requested before T2 completed after it.
    assert order == [(T4, "commit"), (T3, "commit"), (T1, "replacecommit")]
    # A MERGE_ON_READ table compares only compactions (and commits) by requested time.
    assert _order(_timeline(names), T2, mor=True) == order
    late_commit = [
        n.replace("replacecommit", "commit").replace(".clustering.", ".compaction.") for n in names
    ]
    assert _order(_timeline(late_commit), T2, mor=False) == [(T4, "commit"), (T3, "commit"), (T1, "commit")]
    assert _order(_timeline(late_commit), T2, mor=True) == [(T4, "commit"), (T3, "commit")]


def test_v6_plan_goes_by_requested_time() -> None:
    names = [
        f"{T0}.commit.requested", f"{T0}.inflight", f"{T0}.commit",
        f"{T1}.commit.requested", f"{T1}.inflight",
        f"{T2}.commit.requested", f"{T2}.inflight", f"{T2}.commit",
        f"{T2}.savepoint.inflight", f"{T2}.savepoint",
        f"{T3}.replacecommit.requested",
        f"{T4}.commit.requested", f"{T4}.inflight",
        f"{T5}.replacecommit.requested", f"{T5}.replacecommit.inflight", f"{T5}.replacecommit",
        f"{T6}.commit.requested", f"{T6}.inflight", f"{T6}.commit",
    ]  # fmt: skip
    timeline = _timeline(names, layout=1)
    completed_after = [(T6, "commit"), (T5, "replacecommit")]
    # T3 is a pending clustering (its plan says so): rolled back first; then the pending writes (after every
    # completed instant, T1 too although it was requested before T2), newest first; then the completed ones.
    assert _order(timeline, T2, mor=False, clusterings={T3}) == [
        (T3, "replacecommit"),
        (T4, "commit"),
        (T1, "commit"),
        *completed_after,
    ]
    # Without a clustering plan (an insert overwrite) T3 is one pending write among the others.
    assert _order(timeline, T2, mor=False) == [
        (T4, "commit"),
        (T3, "replacecommit"),
        (T1, "commit"),
        (T6, "commit"),
        (T5, "replacecommit"),
    ]


def test_a_pending_log_compaction_after_the_savepoint_is_refused() -> None:
    names = [
        *_done(T0, "deltacommit", "20250101000000500"),
        f"{T0}.savepoint.inflight",
        f"{T0}_20250101000000600.savepoint",
        f"{T1}.logcompaction.requested",
    ]
    with pytest.raises(RestoreRefused, match=f"log compaction\\(s\\) {T1}"):
        _order(_timeline(names), T0, mor=True)


# -- kills ---------------------------------------------------------------------------------------------------

POINTS = [
    "restore.after_metadata_table_deleted",
    "restore.after_requested",
    "restore.after_inflight",
    "restore.rollback_requested",
    "restore.rollback_reverted",
    "restore.rollback_files_deleted",
    "restore.before_metadata_table",
    "restore.metadata_table_rolled_back",
    "restore.metadata_table_synced",
    "restore.after_metadata_table",
    "restore.after_complete",
]
DEFAULT_POINTS = [
    "restore.after_metadata_table_deleted",
    "restore.after_requested",
    "restore.rollback_reverted",
    "restore.metadata_table_rolled_back",
    "restore.after_metadata_table",
    "restore.after_complete",
]
KILLED = os.environ.get("HOODIED_RESTORE_KILLS", "")
#: The table the kill tests restore: MERGE_ON_READ with a metadata table that is restored.
KILLED_CASE = "v8-mor-mdt"
#: Points only a table whose metadata table the restore deletes reaches.
KILLED_CASES = {"restore.after_metadata_table_deleted": "v9-mor-mdt-deleted"}
SCRIPT = """
import sys
from hoodie.lock import FileSystemLock
from hoodie.metadata.reader import MetadataTableConfig
from hoodie.savepoint.restore import restore_to_savepoint
from hoodie.storage import Storage
storage = Storage.for_uri(sys.argv[1])
# Killed while holding the table lock (the metadata table's steps), it blocks the re-run until it expires.
restore_to_savepoint(storage, FileSystemLock(storage, expire_seconds=5), sys.argv[2])
"""


@pytest.mark.parametrize("point", POINTS if KILLED == "all" else DEFAULT_POINTS)
def test_a_killed_restore_finishes_when_run_again(
    tmp_path: Path, hudi_oracle: HudiOracle, templates: Callable[[str], tuple[Path, str]], point: str
) -> None:
    case = KILLED_CASES.get(point, KILLED_CASE)
    source, savepoint = templates(case)
    expected = hudi_oracle.rows(source, Query.snapshot(as_of=savepoint))
    before = timeline_names(source)
    root = copy_of(source, tmp_path / "t")
    env = {**os.environ, "HOODIE_FAILPOINTS": point, "PYTHONPATH": f"{REPO / 'core'}:{REPO / 'services'}"}
    killed = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), savepoint],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == -9, f"{point}: {killed.returncode} {killed.stderr[-2000:]}"
    # Readers agree on what they see meanwhile (the metadata table is out of use while it is behind).
    ours = Table.open(str(root)).read()
    assert_same_rows(hudi_oracle.rows(root, Query.snapshot()), ours, KEYS, context=f"{point}: readers")
    if point not in ("restore.after_complete", "restore.after_metadata_table_deleted"):
        assert restore_pending(Table.open(str(root)).timeline)
    storage = Storage.for_uri(str(root))
    restore_to_savepoint(storage, FileSystemLock(storage), savepoint)
    again = copy_of(root, tmp_path / "again")  # a new root: the oracle answered for the killed state
    check_restored(again, hudi_oracle, savepoint, expected, before, point)
    _, _, indexes, mdt_max = CASES[case]
    partitions = set(TableConfig.load(Storage.for_uri(str(again))).metadata_partitions)
    assert partitions == (set() if mdt_max == MDT_COMPACTS else {"files", *indexes})
