"""Clustering recovery and concurrency in one process, step by step, and with SIGKILL at every step: an
attempt that died anywhere is rolled back and re-run with no stray file; duplicate task attempts, bad
results and a lost claim never commit anything wrong; a write that touches a clustered file group after the
plan was made aborts the clustering (rolled back for good, plan removed), and its update stays visible to us
and to hudi-rs; a write elsewhere does not."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from hoodie import Table
from hoodie.clustering.conflict import find_conflict
from hoodie.clustering.execute import (
    ClusteringConflict,
    ClusteringFailed,
    NothingToCluster,
    cluster_in_process,
    commit_clustering,
    pending_clusterings,
    prepare_clustering,
    run_clustering_task,
)
from hoodie.clustering.plan import ClusteringConfig, clustering_plan_of, schedule_clustering
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.errors import CommitConflict, HoodieError
from hoodie.failpoints import ENV as FAILPOINTS
from hoodie.file_group.file_group import FileGroupId
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import DELTA_COMMIT, ROLLBACK, State
from hoodie.timeline.metadata import ClusteringPlan, decode_rollback_metadata
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.markers import Markers
from support.clustering_checks import capture, check_after
from support.hudi_oracle import HudiOracle, OracleRows, Query

#: No writer beside the table when it is planned: every candidate (as with allow-update writers).
SORTED = ClusteringConfig(sort_columns=("rider",), update_strategy=UpdateStrategy.ALLOW)


def _table(
    tmp_path: Path, version: int = 8, partitions: int = 2, table_type: str = "MERGE_ON_READ"
) -> tuple[Path, Storage, FileSystemLock]:
    root = tmp_path / "t"
    generate_table(
        str(root),
        GenerateSpec(
            table_type=table_type,  # type: ignore[arg-type]
            table_version=version,
            rows=300,
            commits=3,
            partitions=partitions,
            seed=3,
        ),
    )
    storage = Storage.for_uri(str(root))
    return root, storage, FileSystemLock(storage)


def _schedule(storage: Storage, lock: FileSystemLock, config: ClusteringConfig = SORTED) -> ClusteringPlan:
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    assert scheduled.plan is not None, scheduled.reason
    return scheduled.plan


def _files_of(root: Path, instant_time: str) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob(f"*_{instant_time}.parquet")
        if ".hoodie" not in p.relative_to(root).parts
    )


def _rollbacks(root: Path) -> list[tuple[str, tuple[str, ...], int]]:
    timeline = Table.open(str(root)).timeline
    out = []
    for i in timeline.completed():
        if i.action == ROLLBACK:
            md = decode_rollback_metadata((root / timeline.file_of(i.time)).read_bytes())
            out.append((i.time, md.commits_rollback, md.total_files_deleted))
    return out


# -- an abandoned attempt ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("version", "tasks_done"), [(6, "all"), (8, 1), (9, 0)])
def test_an_abandoned_attempt_is_rolled_back_and_run_again(
    tmp_path: Path, version: int, tasks_done: int | str
) -> None:
    root, storage, lock = _table(tmp_path, version)
    before = capture(root)
    plan = _schedule(storage, lock)
    prepared = prepare_clustering(storage, lock)
    T = prepared.instant.time
    n = len(prepared.tasks) if tasks_done == "all" else int(tasks_done)
    for task in prepared.tasks[:n]:
        run_clustering_task(task, f"{task.index}-1-{task.index}")
    # The attempt dies here: its files exist, the instant is inflight and nobody will commit it.
    assert Table.open(str(root)).timeline.get(T).state is State.INFLIGHT  # type: ignore[union-attr]
    assert len(_files_of(root, T)) == n
    assert capture(root, hudi_rs=False).ours.num_rows == before.ours.num_rows  # inflight files are invisible

    cluster_in_process(storage, lock, T)
    check_after(root, before, T, plan, f"v{version} after {tasks_done} task(s) died", sort_columns=("rider",))
    assert [(c, d) for _, c, d in _rollbacks(root)] == [((T,), n)]


def test_files_of_duplicate_task_attempts_are_deleted_before_the_commit(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    before = capture(root)
    plan = _schedule(storage, lock)
    prepared = prepare_clustering(storage, lock)
    first = [run_clustering_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    speculative = run_clustering_task(prepared.tasks[0], "0-1-100")  # a second attempt of task 0
    assert len(_files_of(root, prepared.instant.time)) == len(prepared.tasks) + 1
    result = commit_clustering(storage, lock, prepared, first)
    assert result.strays_deleted == tuple(s.path for s in speculative.stats)
    check_after(root, before, prepared.instant.time, plan, "speculative attempt", sort_columns=("rider",))


def test_results_that_do_not_match_the_plan_are_refused(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    _schedule(storage, lock)
    prepared = prepare_clustering(storage, lock)
    results = [run_clustering_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    with pytest.raises(ClusteringFailed, match="no result for group"):
        commit_clustering(storage, lock, prepared, results[1:])
    with pytest.raises(ClusteringFailed, match="reported twice"):
        commit_clustering(storage, lock, prepared, [*results, results[0]])
    lost = dataclasses.replace(results[0], input_rows=results[0].input_rows + 1)
    with pytest.raises(ClusteringFailed, match=r"merged .* records but wrote"):
        commit_clustering(storage, lock, prepared, [lost, *results[1:]])
    lying = dataclasses.replace(results[0], stats=(dataclasses.replace(results[0].stats[0], num_writes=1),))
    with pytest.raises(ClusteringFailed, match=r"holds .* rows, its task reported 1"):
        commit_clustering(storage, lock, prepared, [lying, *results[1:]])
    assert Table.open(str(root)).timeline.get(prepared.instant.time).state is State.INFLIGHT  # type: ignore[union-attr]


def test_a_lost_claim_never_commits(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    _schedule(storage, lock)
    prepared = prepare_clustering(storage, lock)
    results = [run_clustering_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]

    class Lost(HoodieError):
        pass

    def fence() -> None:
        raise Lost("claim lost")

    with pytest.raises(Lost):
        commit_clustering(storage, lock, prepared, results, fence=fence)
    assert Table.open(str(root)).timeline.get(prepared.instant.time).state is State.INFLIGHT  # type: ignore[union-attr]
    # The loser of a race to commit (another runner completed it meanwhile) deletes its own files.
    late = [run_clustering_task(t, f"{t.index}-2-{t.index + 50}") for t in prepared.tasks]
    commit_clustering(storage, lock, prepared, results)
    with pytest.raises(CommitConflict, match="no longer inflight"):
        commit_clustering(storage, lock, prepared, late)
    assert all(not (root / s.path).exists() for r in late for s in r.stats if s.path)


def test_nothing_to_cluster_names_why(tmp_path: Path) -> None:
    _, storage, lock = _table(tmp_path, partitions=0)
    with pytest.raises(NothingToCluster, match="no pending clustering"):
        prepare_clustering(storage, lock)
    _schedule(storage, lock)
    result = cluster_in_process(storage, lock)
    with pytest.raises(NothingToCluster, match="has already completed"):
        prepare_clustering(storage, lock, result.instant.time)
    with pytest.raises(NothingToCluster, match="not a pending clustering"):
        prepare_clustering(storage, lock, "20200101000000000")


# -- conflicts with writers --------------------------------------------------------------------------------


def _rows_of_groups(root: Path, groups: set[FileGroupId], n: int) -> pa.Table:
    """``n`` live rows of the given file groups, without meta columns."""
    table = Table.open(str(root))
    parts = [table.read_file_slice(s) for s in table.file_slices() if s.group in groups]
    rows = pa.concat_tables([p for p in parts if p is not None]).slice(0, n)
    return rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie_")])


def _update_fares(root: Path, rows: pa.Table, base: float) -> dict[str, float]:
    fares = pa.array([base + i for i in range(rows.num_rows)])
    rows = rows.set_column(rows.schema.get_field_index("fare"), "fare", fares)
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", pc.add(rows.column("ts"), 10_000_000))
    TableWriter.open(str(root)).upsert(rows)
    return dict(zip(rows.column("uuid").to_pylist(), fares.to_pylist(), strict=True))


def _assert_fares(root: Path, expected: dict[str, float], context: str) -> None:
    ours = Table.open(str(root)).read(columns=["uuid", "fare"])
    got = dict(zip(ours.column("uuid").to_pylist(), ours.column("fare").to_pylist(), strict=True))
    assert {k: got.get(k) for k in expected} == expected, f"{context}: ours"
    snap = HudiOracle(root.parent / "oracle").run(root, [Query.snapshot()])[0]
    assert isinstance(snap, OracleRows), snap
    theirs = dict(
        zip(snap.table.column("uuid").to_pylist(), snap.table.column("fare").to_pylist(), strict=True)
    )
    assert {k: theirs.get(k) for k in expected} == expected, f"{context}: hudi-rs"


def _assert_aborted(root: Path, T: str, conflict: ClusteringConflict, writer_time: str) -> None:
    timeline = Table.open(str(root)).timeline
    assert conflict.conflicting_instant == writer_time
    assert timeline.get(T) is None, "the stale plan must be gone"
    assert conflict.rollback is not None
    assert any(c == (T,) for _, c, _ in _rollbacks(root))
    assert not _files_of(root, T)
    assert not (root / ".hoodie" / ".temp" / T).exists()


@pytest.mark.parametrize(("version", "table_type"), [(6, "MERGE_ON_READ"), (8, "COPY_ON_WRITE")])
def test_a_write_to_a_planned_group_before_execution_aborts_the_clustering(
    tmp_path: Path, version: int, table_type: str
) -> None:
    root, storage, lock = _table(tmp_path, version, table_type=table_type)
    plan = _schedule(storage, lock)
    T = Table.open(str(root)).timeline.pending()[-1].time
    groups = {FileGroupId(s.partition_path, s.file_id) for s in plan.slices}
    written = _update_fares(root, _rows_of_groups(root, groups, 15), 5000.0)
    writer_time = Table.open(str(root)).timeline.completed_writes()[-1].time
    with pytest.raises(ClusteringConflict, match=f"{writer_time}.*completed after") as e:
        cluster_in_process(storage, lock)
    _assert_aborted(root, T, e.value, writer_time)
    _assert_fares(root, written, f"v{version} after the abort")
    # A fresh plan of the current slices clusters them, the update included.
    before = capture(root)
    again = schedule_clustering(storage, lock, config=SORTED, respect_trigger=False)
    assert again.instant is not None
    assert again.plan is not None
    cluster_in_process(storage, lock)
    check_after(root, before, again.instant.time, again.plan, "replanned", sort_columns=("rider",))
    _assert_fares(root, written, f"v{version} after clustering again")


@pytest.mark.parametrize("version", [6, 9])
def test_a_write_to_a_clustered_group_while_tasks_run_aborts_the_commit(tmp_path: Path, version: int) -> None:
    root, storage, lock = _table(tmp_path, version)
    plan = _schedule(storage, lock)
    prepared = prepare_clustering(storage, lock)
    T = prepared.instant.time
    results = [run_clustering_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    groups = {FileGroupId(s.partition_path, s.file_id) for s in plan.slices}
    written = _update_fares(root, _rows_of_groups(root, groups, 20), 7000.0)
    writer_time = Table.open(str(root)).timeline.completed_writes()[-1].time
    with pytest.raises(ClusteringConflict, match=writer_time) as e:
        commit_clustering(storage, lock, prepared, results)
    _assert_aborted(root, T, e.value, writer_time)
    assert e.value.rollback is not None
    assert len(e.value.rollback.deleted) == sum(len(r.stats) for r in results)
    _assert_fares(root, written, f"v{version} after the aborted commit")
    assert not pending_clusterings(Table.open(str(root)))


def test_a_pending_write_to_a_clustered_group_aborts_the_commit(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path, 8)
    plan = _schedule(storage, lock)
    prepared = prepare_clustering(storage, lock)
    results = [run_clustering_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    # A writer has begun appending to a clustered file group (its marker is there) and not yet completed.
    table = Table.load(storage)
    timeline_writer = TimelineWriter(storage, table.config, lock)
    t = timeline_writer.next_instant_time()
    timeline_writer.start(timeline_writer.request(DELTA_COMMIT, t))
    victim = plan.slices[0]
    Markers(storage, t).create(victim.partition_path, f".{victim.file_id}_{t}.log.1_0-1-0", "APPEND")
    conflict = find_conflict(Table.load(storage), prepared.instant.time, plan)
    assert conflict is not None
    assert conflict.pending
    assert conflict.instant.time == t
    with pytest.raises(ClusteringConflict, match=f"{t} is still pending") as e:
        commit_clustering(storage, lock, prepared, results)
    _assert_aborted(root, prepared.instant.time, e.value, t)


def test_writes_to_other_file_groups_do_not_conflict(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path, 9, partitions=2)
    partitions = sorted({s.partition_path for s in Table.open(str(root)).file_slices()})
    plan = _schedule(
        storage,
        lock,
        ClusteringConfig(partitions_selected=(partitions[0],), update_strategy=UpdateStrategy.ALLOW),
    )
    prepared = prepare_clustering(storage, lock)
    other = {s.group for s in Table.open(str(root)).file_slices() if s.partition_path == partitions[1]}
    written = _update_fares(root, _rows_of_groups(root, other, 10), 9000.0)
    before = capture(root)
    results = [run_clustering_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    commit_clustering(storage, lock, prepared, results)
    check_after(root, before, prepared.instant.time, plan, "writes elsewhere")
    _assert_fares(root, written, "after clustering")


# -- SIGKILL at every step -----------------------------------------------------------------------------------

SCRIPT = """
import sys
from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.plan import ClusteringConfig, clustering_plan_of, schedule_clustering
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.failpoints import failpoint
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage

storage = Storage.for_uri(sys.argv[1])
lock = FileSystemLock(storage, expire_seconds=2)
config = ClusteringConfig(sort_columns=("rider",), update_strategy=UpdateStrategy.ALLOW)
scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
failpoint("clustering.after_schedule")
cluster_in_process(storage, lock)
"""

POINTS = [
    "clustering.after_schedule",
    "clustering.after_inflight",
    "clustering.task_after_write",
    "clustering.before_commit",
    "clustering.during_commit",
    "clustering.after_commit",
]


@pytest.mark.parametrize("point", POINTS)
def test_sigkill_at_any_step_leaves_a_correct_table_and_the_next_run_finishes(
    tmp_path: Path, point: str
) -> None:
    root, storage, _lock = _table(tmp_path, 8)
    before = capture(root)
    env = {k: v for k, v in os.environ.items() if k != FAILPOINTS}
    env[FAILPOINTS] = point
    killed = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root)], capture_output=True, text=True, env=env, timeout=120
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    # Right after the kill: readers see exactly what they saw before (no stray file is visible).
    table = Table.open(str(root))
    pending = pending_clusterings(table)
    done = [i for i in table.timeline.completed() if i.action == "replacecommit"]
    assert len(pending) + len(done) == 1, (pending, done)
    T = (pending or done)[0].time
    now = capture(root)
    assert now.ours.num_rows == before.ours.num_rows
    assert now.theirs is not None
    assert before.theirs is not None
    assert sorted(now.theirs.column("_hoodie_record_key").to_pylist()) == sorted(
        before.theirs.column("_hoodie_record_key").to_pylist()
    )
    # The next run finishes (rolling back what the dead one left) and the table is as it must be.
    if pending:
        cluster_in_process(storage, FileSystemLock(storage, acquire_timeout=30))
    else:
        with pytest.raises(NothingToCluster):
            cluster_in_process(storage, FileSystemLock(storage, acquire_timeout=30))
    plan = clustering_plan_of(Table.open(str(root)), T)
    assert plan is not None
    check_after(root, before, T, plan, f"killed at {point}", sort_columns=("rider",))
