"""Rolling back an unfinished table service: a rollback that stopped half-way is finished by the next one,
not duplicated (a second rollback would leave the first pending for ever: found by the chaos campaign)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.compaction.execute import prepare_compaction, run_compaction_task
from hoodie.compaction.service import COMPACTION
from hoodie.errors import LostRace
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import rolled_back_times
from hoodie.table_service import run_in_process
from hoodie.timeline.instant import ROLLBACK, State
from hoodie.timeline.timeline import Timeline
from hoodie.write import rollback as rollback_module
from hoodie.write.decision import Decision
from hoodie.write.rollback import rollback_unfinished
from support.daemon_tables import mor_table
from support.stall import stalling_storage


def test_a_rollback_that_stopped_is_finished_not_duplicated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = mor_table(tmp_path / "t", 8, seed=41)
    storage = Storage.for_uri(str(t.root))
    lock = FileSystemLock(storage)
    prepared = prepare_compaction(storage, lock, t.pending[1].time)
    written = run_compaction_task(prepared.tasks[0], "0-0-0").stat.path
    assert written is not None
    assert (t.root / written).exists()
    groups = [(op.partition_path, op.file_id) for op in prepared.plan.operations]

    def full_disk(storage: Storage, decision: Decision) -> bool:
        raise OSError(28, "No space left on device")  # the rollback's completed file, decided

    with monkeypatch.context() as m:
        m.setattr(rollback_module, "publish", full_disk)
        with pytest.raises(OSError, match="No space left"):
            rollback_unfinished(storage, lock, prepared.instant, groups)
    [stopped] = [i for i in Table.open(str(t.root)).timeline.pending() if i.action == ROLLBACK]
    done = rollback_unfinished(storage, lock, prepared.instant, groups)
    assert done.rollback_instant.time == stopped.time
    timeline = Table.open(str(t.root)).timeline
    assert [i for i in timeline.instants if i.action == ROLLBACK] == [done.rollback_instant]
    now = timeline.get(prepared.instant.time)
    assert now is not None
    assert now.state is State.REQUESTED
    assert not (t.root / written).exists()


def test_a_service_instant_rolled_back_then_completed_stays_committed_once_archived(tmp_path: Path) -> None:
    """A compaction's abandoned attempt is rolled back to requested and the compaction completes later: when
    archival moves the timeline past it, its files are still committed (only a write rolled back for good is
    not: Timeline.is_committed)."""
    t = mor_table(tmp_path / "t", 8, seed=42)
    storage = Storage.for_uri(str(t.root))
    lock = FileSystemLock(storage)
    target = t.pending[1]
    prepared = prepare_compaction(storage, lock, target.time)
    groups = [(op.partition_path, op.file_id) for op in prepared.plan.operations]
    rollback_unfinished(storage, lock, prepared.instant, groups)
    run_in_process(COMPACTION.prepare(storage, lock, target.time, {}))
    table = Table.open(str(t.root))
    assert table.timeline.is_committed(target.time)
    names = [f.name for f in storage.list(table.config.timeline_path) if not f.is_dir]
    later = [n for n in names if n[:17] > target.time]  # as if archival had moved the rest
    archived = Timeline.from_file_names(
        later, layout_version=table.config.timeline_layout_version, folder=table.config.timeline_path
    ).with_rolled_back(lambda: rolled_back_times(storage, table.timeline))
    assert archived.get(target.time) is None
    assert archived.is_committed(target.time)


def test_a_file_a_killed_task_left_unlinked_is_rolled_back_too(tmp_path: Path) -> None:
    """Local files are written under a temporary name and linked into place; a task killed in between leaves
    the temporary file (found by the chaos campaign after a clean). The rollback of its instant deletes it."""
    t = mor_table(tmp_path / "t", 8, seed=43)
    storage = Storage.for_uri(str(t.root))
    lock = FileSystemLock(storage)
    prepared = prepare_compaction(storage, lock, t.pending[1].time)
    written = run_compaction_task(prepared.tasks[0], "0-0-0").stat.path
    assert written is not None
    partial = t.root / Path(written).parent / f".{Path(written).name}.12345.{'ab' * 16}.tmp"
    partial.write_bytes((t.root / written).read_bytes()[:100])
    groups = [(op.partition_path, op.file_id) for op in prepared.plan.operations]
    done = rollback_unfinished(storage, lock, prepared.instant, groups)
    assert str(partial.relative_to(t.root)) in done.deleted
    assert not partial.exists()


@pytest.mark.parametrize("version", [6, 8, 9])
def test_a_rollback_finished_by_two_runs_completes_once(tmp_path: Path, version: int) -> None:
    """Issue 33: the first run of a compaction's rollback stalls at the PUT of the rollback's completed file
    (its store holds every request of its process from there), past its table lock; a second run finds the
    rollback pending and finishes it; then the first wakes and its held PUT goes. One completed file of the
    rollback stands (before the shared decision, v8+ got a second one, the completion time being in the
    name), the first run stops there, and the compaction went back to requested once: the second run, whose
    publish wrote the file, reverted it."""
    t = mor_table(tmp_path / "t", version, seed=43 + version)
    root = str(t.root)
    storage = Storage.for_uri(root)
    prepared = prepare_compaction(storage, FileSystemLock(storage), t.pending[1].time)
    written = run_compaction_task(prepared.tasks[0], "0-0-0").stat.path
    assert written is not None
    groups = [(op.partition_path, op.file_id) for op in prepared.plan.operations]
    stalled, backend = stalling_storage(root, r"/\d{17}(_\d{17})?\.rollback$")
    outcome: dict[str, object] = {}

    def first() -> None:
        lock = FileSystemLock(stalled, expire_seconds=2.0)
        try:
            outcome["first"] = rollback_unfinished(stalled, lock, prepared.instant, groups)
        except BaseException as e:  # judged below
            outcome["first"] = e

    thread = threading.Thread(target=first, daemon=True)
    thread.start()
    assert backend.stalled(60), outcome
    second = rollback_unfinished(
        storage, FileSystemLock(storage, expire_seconds=2.0, acquire_timeout=60), prepared.instant, groups
    )
    backend.release()
    thread.join(60)
    assert not thread.is_alive()

    assert isinstance(outcome["first"], LostRace), outcome["first"]
    folder = t.root / ".hoodie" / ("timeline" if version >= 8 else "")
    rollback = second.rollback_instant.time
    completed = sorted(
        p.name for p in folder.iterdir() if p.name.startswith(rollback) and p.suffix == ".rollback"
    )
    assert len(completed) == 1, completed
    timeline = Table.open(root).timeline
    now = timeline.get(prepared.instant.time)
    assert now is not None
    assert now.state is State.REQUESTED, now
    assert [i.time for i in timeline.instants if i.action == ROLLBACK] == [rollback]
    assert not (t.root / written).exists()
    assert not list((t.root / ".hoodie" / ".aux" / "hoodied" / "decisions").glob(f"{rollback}/*.json"))
