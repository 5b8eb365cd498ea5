"""The file groups writers are working on, on real tables: those the last writer commits wrote (table
services' commits do not count), and those pending writes are writing (markers, a Hudi writer's inflight
workload profile); a pending clustering is not a write."""

from __future__ import annotations

from pathlib import Path

from hoodie import Table
from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.recent_writes import (
    RECENT_WRITE_COMMITS,
    RECENT_WRITE_COMMITS_DEFAULT,
    pending_write_groups,
    writer_groups,
)
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.timeline.instant import DELTA_COMMIT
from hoodie.timeline.metadata import CommitMetadata, WriteStat, encode_commit_metadata
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.markers import Markers
from support.writer_tables import live_table


def test_the_key_and_its_default() -> None:
    assert RECENT_WRITE_COMMITS == "hoodie.clustering.hoodied.recent.write.commits"
    assert RECENT_WRITE_COMMITS_DEFAULT == 5


def test_the_groups_of_the_last_writer_commits_are_recent(tmp_path: Path) -> None:
    live = live_table(
        tmp_path / "t", table_type="MERGE_ON_READ", version=8, strategy=UpdateStrategy.REJECT, hot_commits=2
    )
    table = Table.open(str(live.root))
    writes = [i.time for i in table.timeline.completed_writes()]
    two = writer_groups(table, 2)
    assert two.commits == (writes[-1], writes[-2])
    assert two.recent == {live.hot: writes[-1]}
    assert not two.pending
    # The hot group's bulk insert is the third latest; the last cold group's the fourth.
    assert writer_groups(table, 3).recent == {live.hot: writes[-1]}
    four = writer_groups(table, 4)
    assert four.recent == {live.hot: writes[-1], live.cold[-1]: writes[-4]}
    assert live.cold[-1] in four
    assert four.get(live.cold[-1]) == writes[-4]
    assert live.cold[0] not in four
    assert set(writer_groups(table, 100).recent) == {*live.cold, live.hot}
    assert writer_groups(table, 0).recent == {}


def test_table_services_commits_are_not_writers(tmp_path: Path) -> None:
    live = live_table(
        tmp_path / "t", table_type="MERGE_ON_READ", version=9, strategy=UpdateStrategy.REJECT, hot_commits=1
    )
    storage = Storage.for_uri(str(live.root))
    lock = FileSystemLock(storage)
    last_write = Table.open(str(live.root)).timeline.completed_writes()[-1].time
    # A compaction of the hot group and a clustering of the cold ones: neither is a writer's commit.
    compaction = schedule_compaction(storage, lock, config=CompactionConfig(strategy=Strategy.UNBOUNDED))
    assert compaction.instant is not None, compaction.reason
    compact_in_process(storage, lock, compaction.instant.time)
    everything = ClusteringConfig(update_strategy=UpdateStrategy.ALLOW)
    clustering = schedule_clustering(storage, lock, config=everything, respect_trigger=False)
    assert clustering.plan is not None, clustering.reason
    cluster_in_process(storage, lock)
    table = Table.open(str(live.root))
    services = [i.time for i in table.timeline.completed_writes() if i.time > last_write]
    assert len(services) == 2
    one = writer_groups(table, 1)
    assert one.commits == (last_write,)
    assert one.recent == {live.hot: last_write}


def test_the_groups_a_pending_write_is_writing(tmp_path: Path) -> None:
    live = live_table(
        tmp_path / "t", table_type="MERGE_ON_READ", version=8, strategy=UpdateStrategy.REJECT, hot_commits=1
    )
    storage = Storage.for_uri(str(live.root))
    lock = FileSystemLock(storage)
    table = Table.load(storage)
    timeline_writer = TimelineWriter(storage, table.config, lock)
    # A write that has begun merging into the first cold group (its marker is there).
    t1 = timeline_writer.next_instant_time()
    timeline_writer.start(timeline_writer.request(DELTA_COMMIT, t1))
    first = live.cold[0]
    Markers(storage, t1).create(first.partition_path, f"{first.file_id}_0-1-0_{t1}.parquet", "MERGE")
    # A Hudi writer that saved its workload profile (update buckets by file id) in its inflight file.
    t2 = timeline_writer.next_instant_time()
    profile = CommitMetadata(
        partition_to_write_stats={"": (WriteStat(file_id=live.cold[1].file_id, prev_commit="x"),)},
        operation_type="UPSERT",
    )
    content = encode_commit_metadata(profile, table_version=8, action=DELTA_COMMIT)
    timeline_writer.start(timeline_writer.request(DELTA_COMMIT, t2), content)
    # A pending clustering of the last cold group is not a write.
    planned = schedule_clustering(
        storage,
        lock,
        config=ClusteringConfig(update_strategy=UpdateStrategy.ALLOW, recent_write_commits=0),
        respect_trigger=False,
    )
    assert planned.plan is not None, planned.reason
    assert {(s.partition_path, s.file_id) for s in planned.plan.slices} >= {
        (live.cold[2].partition_path, live.cold[2].file_id)
    }
    table = Table.load(storage)
    (p1,) = [i for i in table.timeline.pending() if i.time == t1]
    assert pending_write_groups(table, p1) == {first}
    groups = writer_groups(table, 0)
    assert groups.pending == {first: t1, live.cold[1]: t2}
    assert groups.recent == {}
    assert live.cold[2] not in groups
