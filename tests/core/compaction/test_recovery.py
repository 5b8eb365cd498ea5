"""Compaction recovery and concurrency in one process, step by step: an attempt that died at any point is
rolled back and re-run with no stray base file; duplicate task attempts, a lost claim and a lost race never
leave two base files for a slice; scheduling follows Hudi's rules for pending writes; writes that land while
a compaction is pending or running stay visible."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.compaction.execute import (
    CompactionFailed,
    commit_compaction,
    compact_in_process,
    prepare_compaction,
    run_compaction_task,
)
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import CommitConflict, HoodieError, LostRace
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import TRIPS_SCHEMA, GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import DELTA_COMMIT, ROLLBACK, State
from hoodie.timeline.metadata import decode_rollback_metadata, decode_rollback_plan
from hoodie.timeline.writer import TimelineWriter
from support.compaction_checks import capture, check_after


def _table(tmp_path: Path, version: int = 8, partitions: int = 2) -> tuple[Path, Storage, FileSystemLock]:
    root = tmp_path / "t"
    generate_table(
        str(root),
        GenerateSpec(table_version=version, rows=300, commits=3, partitions=partitions, seed=3),
    )
    storage = Storage.for_uri(str(root))
    return root, storage, FileSystemLock(storage)


def _base_files_of(root: Path, instant_time: str) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob(f"*_{instant_time}.parquet")
        if ".hoodie" not in p.relative_to(root).parts
    )


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("tasks_done", [0, 1, "all"])
def test_an_abandoned_attempt_is_rolled_back_and_run_again(
    tmp_path: Path, version: int, tasks_done: int | str
) -> None:
    root, storage, lock = _table(tmp_path, version)
    before = capture(root)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    T = scheduled.instant.time
    prepared = prepare_compaction(storage, lock)
    n = len(prepared.tasks) if tasks_done == "all" else int(tasks_done)
    for task in prepared.tasks[:n]:
        run_compaction_task(task, f"{task.index}-1-{task.index}")
    # The attempt dies here: its files exist, the instant is inflight and nobody will commit it.
    assert Table.open(str(root)).timeline.get(T).state is State.INFLIGHT  # type: ignore[union-attr]
    assert len(_base_files_of(root, T)) == n
    assert_same_snapshot = capture(root)
    assert assert_same_snapshot.ours.num_rows == before.ours.num_rows  # inflight files are invisible

    result = compact_in_process(storage, lock, T)
    check_after(root, before, T, f"v{version} after {tasks_done} task(s) died")
    timeline = Table.open(str(root)).timeline
    rollbacks = [i for i in timeline.completed() if i.action == ROLLBACK]
    assert len(rollbacks) == 1
    plan = decode_rollback_plan((root / timeline.file_of(rollbacks[0].time, State.REQUESTED)).read_bytes())
    md = decode_rollback_metadata((root / timeline.file_of(rollbacks[0].time)).read_bytes())
    assert plan.instant_to_rollback is not None
    assert plan.instant_to_rollback.commit_time == T
    assert md.commits_rollback == (T,)
    assert md.total_files_deleted == n
    assert len(result.metadata.write_stats) == len(prepared.tasks)


def test_files_of_duplicate_task_attempts_are_deleted_before_the_commit(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    before = capture(root)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    T = scheduled.instant.time
    prepared = prepare_compaction(storage, lock)
    first = [run_compaction_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    speculative = run_compaction_task(prepared.tasks[0], f"0-1-{100}")  # a second attempt of task 0
    assert len(_base_files_of(root, T)) == len(prepared.tasks) + 1
    result = commit_compaction(storage, lock, prepared, first)
    assert result.strays_deleted == (speculative.stat.path,)
    check_after(root, before, T, "speculative attempt")


def test_results_that_do_not_match_the_plan_are_refused(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    schedule_compaction(storage, lock)
    prepared = prepare_compaction(storage, lock)
    results = [run_compaction_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    with pytest.raises(CompactionFailed, match="no result for operation"):
        commit_compaction(storage, lock, prepared, results[1:])
    with pytest.raises(CompactionFailed, match="reported twice"):
        commit_compaction(storage, lock, prepared, [*results, results[0]])
    assert Table.open(str(root)).timeline.get(prepared.instant.time).state is State.INFLIGHT  # type: ignore[union-attr]


def test_a_lost_claim_never_commits(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    schedule_compaction(storage, lock)
    prepared = prepare_compaction(storage, lock)
    results = [run_compaction_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]

    class Lost(HoodieError):
        pass

    def fence() -> None:
        raise Lost("claim lost")

    with pytest.raises(Lost):
        commit_compaction(storage, lock, prepared, results, fence=fence)
    instant = Table.open(str(root)).timeline.get(prepared.instant.time)
    assert instant is not None
    assert instant.state is State.INFLIGHT


def test_the_loser_of_a_race_to_commit_deletes_its_own_files(tmp_path: Path) -> None:
    root, storage, lock = _table(tmp_path)
    before = capture(root)
    schedule_compaction(storage, lock)
    prepared = prepare_compaction(storage, lock)
    T = prepared.instant.time
    # Two task attempts of one run (attempt number 1 in both tokens: hoodie.write.attempt), ...
    ours = [run_compaction_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks]
    theirs = [run_compaction_task(t, f"{t.index}-1-{t.index + 50}") for t in prepared.tasks]
    # The winner deletes what markers show but its results do not name (the loser's files, here), ...
    commit_compaction(storage, lock, prepared, ours)
    assert all(not (root / r.stat.path).exists() for r in theirs if r.stat.path)
    # ... a task attempt starting after the commit writes nothing, and the loser does not commit.
    with pytest.raises(CommitConflict, match="no longer inflight"):
        run_compaction_task(prepared.tasks[0], "0-3-99")
    assert not list(root.rglob(f"*_0-3-99_{T}.parquet"))
    with pytest.raises(CommitConflict, match="no longer inflight"):
        commit_compaction(storage, lock, prepared, theirs)
    check_after(root, before, T, "race to commit")


def test_a_commit_never_deletes_another_runs_files_and_the_other_run_loses_the_race(tmp_path: Path) -> None:
    """Two runs of one instant (a takeover, a one-off command beside the daemon) differ in their attempt
    numbers: the winner's commit deletes strays of its own run only, and the loser, finding the instant
    completed, deletes its own files and none of the winner's (its commit raises LostRace)."""
    root, storage, lock = _table(tmp_path)
    before = capture(root)
    schedule_compaction(storage, lock)
    prepared = prepare_compaction(storage, lock)
    T = prepared.instant.time
    winner = [run_compaction_task(t, f"{t.index}-11-{t.index}") for t in prepared.tasks]
    loser = [run_compaction_task(t, f"{t.index}-22-{t.index}") for t in prepared.tasks]
    commit_compaction(storage, lock, prepared, winner)
    assert all((root / r.stat.path).exists() for r in loser if r.stat.path), (
        "another run's files are not strays"
    )
    with pytest.raises(LostRace, match="lost the race"):
        commit_compaction(storage, lock, prepared, loser)
    assert all(not (root / r.stat.path).exists() for r in loser if r.stat.path)
    assert all((root / r.stat.path).exists() for r in winner if r.stat.path)
    check_after(root, before, T, "two runs")


def _pending_deltacommit(storage: Storage) -> str:
    table = Table.load(storage)
    writer = TimelineWriter(storage, table.config, FileSystemLock(storage))
    t = writer.next_instant_time()
    writer.start(writer.request(DELTA_COMMIT, t))
    return t


def test_v6_waits_for_earlier_pending_writes_v8_does_not(tmp_path: Path) -> None:
    _, storage6, lock6 = _table(tmp_path / "v6", version=6)
    pending = _pending_deltacommit(storage6)
    result = schedule_compaction(storage6, lock6)
    assert result.instant is None
    assert pending in result.reason
    assert "version 6" in result.reason

    _, storage8, lock8 = _table(tmp_path / "v8", version=8)
    _pending_deltacommit(storage8)
    assert schedule_compaction(storage8, lock8).instant is not None


def _upsert_some(root: Path, seed: int) -> pa.Table:
    """Update 40 live records with new fare values; returns the rows written."""
    live = Table.open(str(root)).read(columns=["uuid", "city", "ts"])
    chosen = live.slice(0, 40)
    gen = TripGenerator(seed, 2)
    rows = gen.rows(chosen.column("uuid").to_pylist(), chosen.column("city").to_pylist())
    rows = rows.set_column(
        rows.schema.get_field_index("fare"), "fare", pa.array([9999.5 + i for i in range(40)])
    )
    rows = rows.set_column(
        rows.schema.get_field_index("ts"),
        "ts",
        pa.array([v + 10_000_000 for v in chosen.column("ts").to_pylist()], TRIPS_SCHEMA.field("ts").type),
    )
    TableWriter.open(str(root)).upsert(rows)
    return rows


@pytest.mark.parametrize("version", [6, 8, 9])
def test_writes_while_a_compaction_is_pending_and_running_stay_visible(tmp_path: Path, version: int) -> None:
    root, storage, lock = _table(tmp_path, version)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    T = scheduled.instant.time
    first = _upsert_some(root, 101)  # after scheduling, before execution
    prepared = prepare_compaction(storage, lock)
    results = [run_compaction_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks[:1]]
    second = _upsert_some(root, 102)  # while the tasks run
    results += [run_compaction_task(t, f"{t.index}-1-{t.index}") for t in prepared.tasks[1:]]
    mid = capture(root, hudi_rs=False)
    commit_compaction(storage, lock, prepared, results)
    check_after(root, mid, T, f"v{version} writes during compaction", writes_after=True)
    after = Table.open(str(root)).read()
    fares = dict(zip(after.column("uuid").to_pylist(), after.column("fare").to_pylist(), strict=True))
    for rows in (first, second):
        for key, fare in zip(rows.column("uuid").to_pylist(), rows.column("fare").to_pylist(), strict=True):
            if key in set(second.column("uuid").to_pylist()) and rows is first:
                continue  # updated again by the second write
            assert fares[key] == fare, f"update of {key} lost"
