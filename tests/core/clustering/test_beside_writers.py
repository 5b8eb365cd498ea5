"""Clustering beside a live writer (README, "Running beside Hudi writers"), through the clustering service as
the daemon drives it (the table's settings, its trigger, prepare, tasks, commit), with our table writer
standing in for a Hudi writer.

With the writers' default update strategy (reject) the writer keeps upserting into its recent file group
while hoodied schedules and runs a clustering: the plan leaves that group out, the writer is never refused
(nor in conflict at its commit), its new records avoid the planned groups, the clustering completes, and our
reader and hudi-rs return exactly what the writer wrote. With the allow strategy the plan takes every group
as before, and a write into one of them aborts the clustering, the write kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clustering.execute import ClusteringConflict
from hoodie.clustering.plan import clustering_plan_of
from hoodie.clustering.recent_writes import RECENT_WRITE_COMMITS
from hoodie.clustering.service import CLUSTERING
from hoodie.clustering.update_strategy import UPDATES_STRATEGY, UpdateStrategy
from hoodie.file_group.file_group import FileGroupId
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table_service import run_in_process
from hoodie.testing.table_writer import CommitResult
from hoodie.timeline.instant import REPLACE_COMMIT, Instant, State
from hoodie.timeline.metadata import ClusteringPlan
from support.writer_tables import LiveTable, live_table

CASES = [
    pytest.param(6, "MERGE_ON_READ", id="v6-mor"),
    pytest.param(8, "COPY_ON_WRITE", id="v8-cow"),
    pytest.param(9, "MERGE_ON_READ", id="v9-mor"),
    pytest.param(6, "COPY_ON_WRITE", id="v6-cow", marks=pytest.mark.campaign),
    pytest.param(8, "MERGE_ON_READ", id="v8-mor", marks=pytest.mark.campaign),
    pytest.param(9, "COPY_ON_WRITE", id="v9-cow", marks=pytest.mark.campaign),
]


def _schedule(live: LiveTable, settings: Mapping[str, str]) -> tuple[Instant, ClusteringPlan]:
    """hoodied's scheduling step for the table (its trigger included), as the daemon runs it."""
    storage = Storage.for_uri(str(live.root))
    scheduled = CLUSTERING.schedule(Table.load(storage), FileSystemLock(storage), settings)
    assert scheduled.instant is not None, scheduled.reason
    plan = clustering_plan_of(Table.load(storage), scheduled.instant.time)
    assert plan is not None
    return scheduled.instant, plan


def _groups(plan: ClusteringPlan) -> set[FileGroupId]:
    return {FileGroupId(s.partition_path, s.file_id) for s in plan.slices}


def _written(result: CommitResult) -> set[FileGroupId]:
    return {FileGroupId(s.partition_path or "", s.file_id) for s in result.metadata.write_stats if s.file_id}


@pytest.mark.parametrize(("version", "table_type"), CASES)
def test_a_reject_update_writer_keeps_writing_while_hoodied_clusters_beside_it(
    tmp_path: Path, version: int, table_type: str
) -> None:
    live = live_table(
        tmp_path / "t",
        table_type=table_type,  # type: ignore[arg-type]
        version=version,
        strategy=UpdateStrategy.REJECT,
        cold_groups=2,
        hot_commits=2,
    )
    assert live.hot is not None
    # The writers' update strategy left at Hudi's default (reject); two commits make a group recent here
    # (five by default: fewer commits keep the test short).
    settings = {RECENT_WRITE_COMMITS: "2"}
    instant, plan = _schedule(live, settings)
    # The cold groups are planned; the writer's group of its last commits is left to it.
    assert _groups(plan) == set(live.cold)
    storage = Storage.for_uri(str(live.root))
    lock = FileSystemLock(storage)
    # The writer goes on: updates of its recent keys, and new records, which avoid the planned small files.
    written = _written(live.upsert_hot(inserts=5))
    assert not written & _groups(plan)
    job = CLUSTERING.prepare(storage, lock, instant.time, settings)
    written |= _written(live.upsert_hot(inserts=5))
    results = [job.run_task(task, f"{i}-0-{i}") for i, task in enumerate(job.tasks)]
    written |= _written(live.upsert_hot())
    assert live.hot in written
    assert not written & _groups(plan)
    done = job.commit(results, None)
    assert done.instant.time == instant.time
    table = Table.open(str(live.root))
    completed = table.timeline.get(instant.time)
    assert completed is not None
    assert (completed.action, completed.state) == (REPLACE_COMMIT, State.COMPLETED)
    assert set(table.replaced_file_groups()) == set(live.cold)
    live.assert_reads(tmp_path / "oracle", f"v{version} {table_type} after clustering beside the writer")


def test_with_allow_update_writers_the_plan_takes_every_group_and_a_write_aborts_it(tmp_path: Path) -> None:
    live = live_table(
        tmp_path / "t",
        table_type="MERGE_ON_READ",
        version=8,
        strategy=UpdateStrategy.ALLOW,
        cold_groups=2,
        hot_commits=1,
    )
    assert live.hot is not None
    settings = {UPDATES_STRATEGY: UpdateStrategy.ALLOW.value}
    instant, plan = _schedule(live, settings)
    assert _groups(plan) == {*live.cold, live.hot}
    storage = Storage.for_uri(str(live.root))
    lock = FileSystemLock(storage)
    job = CLUSTERING.prepare(storage, lock, instant.time, settings)
    assert live.hot in _written(live.upsert_hot())  # not refused: the writer updates a planned group
    with pytest.raises(ClusteringConflict, match=instant.time):
        run_in_process(job)
    assert Table.open(str(live.root)).timeline.get(instant.time) is None  # rolled back for good
    live.assert_reads(tmp_path / "oracle", "after the aborted clustering")
