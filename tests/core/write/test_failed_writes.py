"""Failed writes: a write whose heartbeat expired is rolled back (files, markers, timeline files) with a real
rollback instant, and readers see the table as before it; a live write is left alone; a v6 log file that
also holds committed blocks keeps them and gets a rollback command block."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.errors import WriteConflict
from hoodie.lock import FileSystemLock
from hoodie.log.block import BlockType, iter_blocks
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import ROLLBACK, State
from hoodie.timeline.metadata import decode_rollback_metadata, decode_rollback_plan
from hoodie.timeline.writer import TimelineWriter
from hoodie.write import rollback as rollback_module
from hoodie.write.decision import Decision
from hoodie.write.failed_writes import failed_writes, rollback_failed_write, rollback_failed_writes
from hoodie.write.heartbeat import Heartbeat, HeartbeatConfig, heartbeat_path
from support.clean_checks import capture_reads
from support.compaction_checks import key_columns
from support.compare import assert_same_rows


def _table(
    tmp_path: Path, version: int, table_type: str = "MERGE_ON_READ"
) -> tuple[Path, Storage, FileSystemLock]:
    root = tmp_path / "t"
    generate_table(
        str(root),
        GenerateSpec(table_type=table_type, table_version=version, rows=200, commits=2, partitions=2, seed=4),  # type: ignore[arg-type]
    )
    storage = Storage.for_uri(str(root))
    return root, storage, FileSystemLock(storage)


def _fail_a_write(root: Path, monkeypatch: pytest.MonkeyPatch, seed: int = 31) -> str:
    """An upsert (updates and inserts) that dies after writing its files: the instant stays inflight."""

    def die(*_: object) -> None:
        raise WriteConflict("the writer died before completing")

    live = Table.open(str(root)).read(columns=["uuid", "city"]).slice(0, 30)
    gen = TripGenerator(seed, 2)
    rows = pa.concat_tables(
        [gen.rows(live.column("uuid").to_pylist(), live.column("city").to_pylist()), gen.rows(gen.keys(20))]
    )
    with monkeypatch.context() as m:
        m.setattr(TableWriter, "_check_conflicts", die)
        with pytest.raises(WriteConflict):
            TableWriter.open(str(root)).upsert(rows)
    pending = Table.open(str(root)).timeline.pending()
    assert len(pending) == 1
    assert pending[0].state is State.INFLIGHT
    return pending[0].time


def _files_of(root: Path, instant_time: str) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob(f"*{instant_time}*")
        if p.is_file() and ".hoodie" not in p.relative_to(root).parts
    )


@pytest.mark.parametrize(
    ("version", "table_type"), [(6, "MERGE_ON_READ"), (8, "MERGE_ON_READ"), (9, "COPY_ON_WRITE")]
)
def test_an_expired_failed_write_is_rolled_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int, table_type: str
) -> None:
    root, storage, lock = _table(tmp_path, version, table_type)
    before = capture_reads(root)
    W = _fail_a_write(root, monkeypatch)
    written = _files_of(root, W) if version >= 8 or table_type == "COPY_ON_WRITE" else []
    assert (root / ".hoodie" / ".temp" / W).exists(), "the failed write left its markers"
    assert not storage.exists(heartbeat_path(W)), "a writer that gave up stops its heartbeat"
    table = Table.open(str(root))
    assert [i.time for i in failed_writes(table, HeartbeatConfig())] == [W]
    done = rollback_failed_writes(storage, lock)
    assert [d.rolled_back for d in done] == [W]
    table = Table.open(str(root))
    assert table.timeline.get(W) is None, "the failed instant's timeline files are removed"
    assert not (root / ".hoodie" / ".temp" / W).exists()
    for path in written:
        assert not (root / path).exists(), path
    rollbacks = [i for i in table.timeline.completed() if i.action == ROLLBACK]
    assert len(rollbacks) == 1
    plan = decode_rollback_plan(
        (root / table.timeline.file_of(rollbacks[0].time, State.REQUESTED)).read_bytes()
    )
    md = decode_rollback_metadata((root / table.timeline.file_of(rollbacks[0].time)).read_bytes())
    assert plan.instant_to_rollback is not None
    assert plan.instant_to_rollback.commit_time == W
    assert md.commits_rollback == (W,)
    assert md.total_files_deleted == len(done[0].deleted) > 0
    after = capture_reads(root)
    keys = key_columns(table, before.latest)
    assert_same_rows(after.latest, before.latest, keys, context="hudi-rs after the rollback")
    assert_same_rows(table.read(), before.latest, keys, context="ours after the rollback", check_types=False)
    # The table takes writes again, and the next one is not confused by the rollback.
    TableWriter.open(str(root)).upsert(TripGenerator(77, 2).rows(TripGenerator(78, 2).keys(5)))
    assert Table.open(str(root)).read().num_rows == before.latest.num_rows + 5


def test_a_live_write_is_left_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, storage, lock = _table(tmp_path, 8)
    W = _fail_a_write(root, monkeypatch)
    beat = Heartbeat(storage, W, HeartbeatConfig(interval_ms=60_000)).start()
    try:
        assert failed_writes(Table.open(str(root)), HeartbeatConfig()) == []
        assert rollback_failed_writes(storage, lock) == []
        assert Table.open(str(root)).timeline.get(W) is not None
        # Once the beats stop for longer than interval x misses, it has failed.
        later = int(time.time() * 1000) + 3 * 60_000
        assert [i.time for i in failed_writes(Table.open(str(root)), HeartbeatConfig(), later)] == [W]
    finally:
        beat.stop()
    assert not storage.exists(heartbeat_path(W))


def test_a_v6_log_file_with_committed_blocks_gets_a_rollback_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hudi 0.x appends to log files: the failed write's blocks share a file with committed ones."""
    root, storage, lock = _table(tmp_path, 6)
    live = Table.open(str(root)).read(columns=["uuid", "city"]).slice(0, 30)
    rows = TripGenerator(30, 2).rows(live.column("uuid").to_pylist(), live.column("city").to_pylist())
    TableWriter.open(str(root)).upsert(rows)  # committed log files in the groups the failed write updates
    before = capture_reads(root)
    committed_logs = sorted(p for p in root.rglob(".*.log.*") if ".hoodie" not in p.relative_to(root).parts)
    W = _fail_a_write(root, monkeypatch)
    own_logs = [
        p
        for p in root.rglob(".*.log.*")
        if p not in committed_logs and ".hoodie" not in p.relative_to(root).parts
    ]
    assert own_logs
    # Move the failed write's blocks into the end of a committed log file of the same group, as an append.
    target = None
    for own in own_logs:
        file_id = own.name[1:].split("_", 1)[0]
        target = next(
            (c for c in committed_logs if c.name[1:].startswith(file_id) and c.parent == own.parent), None
        )
        if target is not None:
            with target.open("ab") as f:
                f.write(own.read_bytes())
            own.unlink()
            break
    assert target is not None, "a file group with both a committed and a failed log file"
    shutil.rmtree(root / ".hoodie" / ".temp" / W)  # no markers: found by listing
    done = rollback_failed_write(storage, lock, Table.open(str(root)).timeline.get(W))  # type: ignore[arg-type]
    assert done is not None
    assert done.command_blocks, "the shared log file got a rollback command block"
    assert target.exists(), "the shared log file keeps its committed blocks"
    new_file = root / done.command_blocks[0].split(str(root) + "/", 1)[-1]
    blocks = list(iter_blocks(new_file.read_bytes()))
    assert [b.block_type for b in blocks] == [BlockType.COMMAND]
    assert blocks[0].target_instant_time == W
    table = Table.open(str(root))
    after = capture_reads(root)
    keys = key_columns(table, before.latest)
    assert_same_rows(after.latest, before.latest, keys, context="hudi-rs after the v6 rollback")
    assert_same_rows(
        table.read(), before.latest, keys, context="ours after the v6 rollback", check_types=False
    )


def test_a_rollback_that_died_half_way_is_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root, storage, lock = _table(tmp_path, 8)
    W = _fail_a_write(root, monkeypatch)

    def crash(*_: object) -> None:
        raise OSError("power cut")

    with monkeypatch.context() as m:
        m.setattr(TimelineWriter, "delete_pending", crash)
        with pytest.raises(OSError, match="power cut"):
            rollback_failed_writes(storage, lock)
    table = Table.open(str(root))
    assert [i.action for i in table.timeline.pending()] == [table.timeline.get(W).action, ROLLBACK]  # type: ignore[union-attr]
    done = rollback_failed_writes(storage, lock)
    assert [d.rolled_back for d in done] == [W]
    table = Table.open(str(root))
    assert table.timeline.pending() == []
    assert len([i for i in table.timeline.completed() if i.action == ROLLBACK]) == 1


def test_a_rollback_stopped_after_its_write_was_removed_is_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write's instant goes before the rollback completes: a crash (or a full disk) in between leaves a
    pending rollback whose write is gone; the next LAZY pass completes it instead of leaving it for ever."""
    root, storage, lock = _table(tmp_path, 9)
    W = _fail_a_write(root, monkeypatch)

    def full_disk(storage: Storage, decision: Decision) -> bool:
        raise OSError(28, "No space left on device")  # the rollback's completed file, decided

    with monkeypatch.context() as m:
        m.setattr(rollback_module, "publish", full_disk)
        with pytest.raises(OSError, match="No space left"):
            rollback_failed_writes(storage, lock)
    table = Table.open(str(root))
    assert table.timeline.get(W) is None
    assert [i.action for i in table.timeline.pending()] == [ROLLBACK]
    assert rollback_failed_writes(storage, lock) == []  # nothing left to roll back, and the rollback ...
    table = Table.open(str(root))
    assert table.timeline.pending() == []  # ... completed
    [rollback] = [i for i in table.timeline.completed() if i.action == ROLLBACK]
    metadata = decode_rollback_metadata(storage.read(table.timeline.file_of(rollback.time, State.COMPLETED)))
    assert metadata.commits_rollback == (W,)
    assert _files_of(root, W) == []


@pytest.mark.parametrize(("version", "table_type"), [(6, "COPY_ON_WRITE"), (8, "MERGE_ON_READ")])
def test_files_a_rolled_back_writer_wrote_after_its_rollback_are_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: int, table_type: str
) -> None:
    """A writer rolled back while alive (its heartbeat went stale: a full disk, a long pause) goes on writing
    files of its instant. Once archival passes the instant, Hudi's readers would count them as committed, so
    ours leave them out while the rollback is on the timeline, and the next LAZY pass deletes them (the
    chaos campaign found a clustering that had made such records part of the table)."""
    root, storage, lock = _table(tmp_path, version, table_type)
    W = _fail_a_write(root, monkeypatch)
    aside = tmp_path / "zombie"
    written = _files_of(root, W)
    assert written
    for path in written:  # what the writer will write again after its rollback
        (aside / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / path, aside / path)
    assert [d.rolled_back for d in rollback_failed_writes(storage, lock)] == [W]
    TableWriter.open(str(root)).upsert(TripGenerator(77, 2).rows(TripGenerator(78, 2).keys(5)))
    before = capture_reads(root)
    for path in written:  # the writer goes on
        shutil.copy2(aside / path, root / path)
    table = Table.open(str(root))
    # Once the write timeline starts after W (archived writes before it), Hudi's rule counts W's files as
    # committed; the rollback on the timeline says they are not.
    shifted = replace(table.timeline, instants=tuple(i for i in table.timeline.instants if i.time > W))
    assert shifted.is_committed(W) is False
    assert replace(shifted, rolled_back=None).is_committed(W) is True
    assert rollback_failed_writes(storage, lock) == []
    assert _files_of(root, W) == []  # swept
    keys = key_columns(table, before.latest)
    assert_same_rows(capture_reads(root).latest, before.latest, keys, context="hudi-rs after the sweep")


def test_a_file_a_killed_writer_left_unlinked_is_rolled_back_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, storage, lock = _table(tmp_path, 9, "COPY_ON_WRITE")
    W = _fail_a_write(root, monkeypatch)
    [written, *_] = [p for p in _files_of(root, W) if p.endswith(".parquet")]
    partial = root / Path(written).parent / f".{Path(written).name}.4242.{'cd' * 16}.tmp"
    partial.write_bytes(b"PAR1")
    [done] = rollback_failed_writes(storage, lock)
    assert str(partial.relative_to(root)) in done.deleted
    assert not partial.exists()
