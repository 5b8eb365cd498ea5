"""Savepoints (hoodie.savepoint.savepoint): the savepoint of a completed commit names the files of each file
group's latest slice as of that commit (hudi-rs's file slices at that time are the judge of the base files),
its timeline files are Hudi's (``<t>.savepoint.inflight``, then the completed one with the metadata), the
cleaner keeps those files, refusals write nothing, and a deletion removes the completed file, then the
inflight one. A creation killed half-way is finished by the next one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import CommitConflict, SavepointRefused, TimeTravelRefused
from hoodie.lock import FileSystemLock
from hoodie.log.log_file import LogFile
from hoodie.savepoint.savepoint import (
    create_savepoint,
    delete_savepoint,
    last_commit_retained,
    read_savepoint,
    savepoints,
)
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import COMMIT, SAVEPOINT, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.writer import TimelineWriter
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleFileSlices, Query

REPO = Path(__file__).resolve().parents[3]
KEYS = ["_hoodie_record_key", "_hoodie_partition_path"]


@pytest.fixture(autouse=True)
def no_skew_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Instant times wait out the clock skew allowed between writers (200 ms each); these tables are written
    by this one process, so the waits only cost time."""
    monkeypatch.setattr(InstantTimeGenerator.__init__, "__defaults__", ("UTC", 0))


def _table(root: Path, version: int, table_type: str, commits: int = 4) -> tuple[Storage, FileSystemLock]:
    spec = GenerateSpec(
        table_type=table_type,  # type: ignore[arg-type]
        table_version=version,
        rows=60,
        commits=commits,
        partitions=2,
        seed=7,
    )
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    return storage, FileSystemLock(storage)


def _writes(root: Path) -> list[str]:
    return [w.time for w in Table.open(str(root)).timeline.completed_writes()]


def _timeline_names(root: Path) -> set[str]:
    folder = root / Table.open(str(root)).config.timeline_path
    return {p.name for p in folder.iterdir() if p.is_file() and Instant.try_parse(p.name)}


def _upsert(root: Path, lock: FileSystemLock, seed: int) -> None:
    live = Table.open(str(root)).read(columns=["uuid", "city"]).slice(0, 20)
    rows = TripGenerator(seed, 2).rows(live.column("uuid").to_pylist(), live.column("city").to_pylist())
    TableWriter.open(str(root), lock=lock).upsert(rows)


@pytest.mark.parametrize(
    ("version", "table_type"), [(6, "MERGE_ON_READ"), (8, "COPY_ON_WRITE"), (9, "MERGE_ON_READ")]
)
def test_a_savepoint_holds_the_latest_slices_as_of_its_commit(
    tmp_path: Path, hudi_oracle: HudiOracle, version: int, table_type: str
) -> None:
    root = tmp_path / "t"
    storage, lock = _table(root, version, table_type)
    t = _writes(root)[1]
    slices = hudi_oracle.one(root, Query.file_slices(as_of=t))
    assert isinstance(slices, OracleFileSlices), slices
    started = int(time.time() * 1000)
    result = create_savepoint(storage, lock, t, user="alice", comments="before the migration")

    names = sorted(n for n in _timeline_names(root) if Instant.parse(n).action == SAVEPOINT)
    completed = [n for n in names if not n.endswith(".inflight")]
    assert f"{t}.savepoint.inflight" in names
    assert len(names) == 2
    if version == 6:
        assert completed == [f"{t}.savepoint"]
    else:
        assert completed[0].startswith(f"{t}_")
        assert completed[0].endswith(".savepoint")
    folder = root / Table.open(str(root)).config.timeline_path
    assert (folder / f"{t}.savepoint.inflight").read_bytes() == b""

    table = Table.open(str(root))
    md = read_savepoint(table, t)
    assert md == result.metadata
    assert (md.savepointed_by, md.comments, md.version) == ("alice", "before the migration", 1)
    assert started <= md.savepointed_at <= int(time.time() * 1000)
    assert [i.time for i in savepoints(table.timeline)] == [t]
    assert table.timeline.get(t) is not None
    assert table.timeline.get(t).action != SAVEPOINT  # type: ignore[union-attr]

    # The base files are those hudi-rs reads as of t; the logs are at least those, more only from later
    # writes to the same slice (Hudi lists the slice as the table holds it now).
    held = {(p, n) for p, pmd in md.partition_metadata.items() for n in pmd.savepoint_data_file}
    theirs_base = {(p, b) for p, _, b, _ in slices.slices if b}
    assert {(p, n) for p, n in held if not n.startswith(".")} == theirs_base
    theirs_logs = {(p, lf) for p, _, _, logs in slices.slices for lf in logs}
    ours_logs = {(p, n) for p, n in held if n.startswith(".")}
    assert theirs_logs <= ours_logs
    for _, name in ours_logs - theirs_logs:
        log = LogFile.parse(name)
        assert version == 6 or log.instant > t, name
    assert {p for p, _, _, _ in slices.slices} <= set(md.partition_metadata)

    # The cleaner keeps every one of them, and time travel to t still answers as before.
    expected = hudi_oracle.rows(root, Query.snapshot(as_of=t))
    for seed in (30, 31, 32):
        _upsert(root, lock, seed)
    if table_type == "MERGE_ON_READ":  # new base files, so that the slices as of t are old ones to clean
        assert schedule_compaction(storage, lock).instant is not None
        compact_in_process(storage, lock)
        _upsert(root, lock, 33)
    clean = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=1)
    assert schedule_clean(storage, lock, config=clean).instant is not None
    clean_in_process(storage, lock)
    assert all((root / p / n).exists() for p, n in held)
    later = root.parent / "later"
    shutil.copytree(root, later)  # a new root: the oracle caches its answers per root
    assert_same_rows(hudi_oracle.rows(later, Query.snapshot(as_of=t)), expected, KEYS, context="as of t")
    # Ours too: a savepoint is read although the clean retained only later commits (Hudi's check refuses).
    cleaned = Table.open(str(later))
    retained = cleaned.earliest_time_travel()
    assert retained is not None
    assert t < retained
    assert_same_rows(cleaned.read(as_of=t), expected, KEYS, context="ours as of the savepoint")
    before_t = _writes(root)[0]
    with pytest.raises(TimeTravelRefused, match=f"and the savepoint\\(s\\) at {t}"):
        cleaned.read(as_of=before_t)


def test_refusals_write_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    storage, lock = _table(root, 8, "COPY_ON_WRITE", commits=5)
    writes = _writes(root)
    writer = TimelineWriter(storage, Table.open(str(root)).config, lock)
    pending = writer.next_instant_time()
    writer.start(writer.request(COMMIT, pending))
    before = _timeline_names(root)
    for t, match in [
        (pending, "not a completed commit"),
        ("20200101000000000", "not on the active timeline"),
    ]:
        with pytest.raises(SavepointRefused, match=match):
            create_savepoint(storage, lock, t)
    create_savepoint(storage, lock, writes[2], user="u")
    with pytest.raises(SavepointRefused, match="has a savepoint at that time already"):
        create_savepoint(storage, lock, writes[2], user="u")
    # A pending clean's plan bounds what may be savepointed ...
    clean = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=2)
    scheduled = schedule_clean(storage, lock, config=clean)
    assert scheduled.plan is not None
    assert scheduled.plan.earliest_instant_to_retain is not None
    retained = scheduled.plan.earliest_instant_to_retain.timestamp
    assert last_commit_retained(Table.open(str(root))) == retained
    with pytest.raises(SavepointRefused, match=f"beyond the lookup window, older than {retained}"):
        create_savepoint(storage, lock, writes[0])
    # ... and so does the completed clean's metadata.
    clean_in_process(storage, lock)
    assert last_commit_retained(Table.open(str(root))) == retained
    with pytest.raises(SavepointRefused, match="beyond the lookup window"):
        create_savepoint(storage, lock, writes[0])
    new = _timeline_names(root) - before
    assert {Instant.parse(n).action for n in new} == {SAVEPOINT, "clean"}
    assert {Instant.parse(n).time for n in new if Instant.parse(n).action == SAVEPOINT} == {writes[2]}


def test_the_timeline_writer_puts_a_savepoint_only_at_a_completed_commit(tmp_path: Path) -> None:
    root = tmp_path / "t"
    storage, lock = _table(root, 6, "COPY_ON_WRITE", commits=2)
    writer = TimelineWriter(storage, Table.open(str(root)).config, lock)
    t = _writes(root)[0]
    pending = writer.next_instant_time()
    writer.request(COMMIT, pending)
    with pytest.raises(CommitConflict, match="already on the timeline"):
        writer.create_inflight(SAVEPOINT, pending)
    inflight = writer.create_inflight(SAVEPOINT, t)
    with pytest.raises(CommitConflict, match="already on the timeline"):
        writer.create_inflight(SAVEPOINT, t)
    with pytest.raises(CommitConflict, match="already on the timeline"):
        writer.request(COMMIT, t)
    done = writer.complete(inflight, b"")
    assert done == Instant(t, SAVEPOINT, State.COMPLETED)
    timeline = Table.open(str(root)).timeline
    assert timeline.get(t) == Instant(t, COMMIT, State.COMPLETED)
    assert timeline.file_of(t, action=SAVEPOINT).endswith(f"{t}.savepoint")


def test_delete_removes_the_completed_file_then_the_inflight(tmp_path: Path) -> None:
    root = tmp_path / "t"
    storage, lock = _table(root, 9, "COPY_ON_WRITE", commits=2)
    t = _writes(root)[1]
    before = _timeline_names(root)
    create_savepoint(storage, lock, t)
    deleted = delete_savepoint(storage, lock, t)
    assert deleted.action == SAVEPOINT
    assert deleted.state is State.COMPLETED
    assert _timeline_names(root) == before
    with pytest.raises(SavepointRefused, match="no savepoint at"):
        delete_savepoint(storage, lock, t)
    # An inflight left by a creation that died is deleted too.
    writer = TimelineWriter(storage, Table.open(str(root)).config, lock)
    writer.create_inflight(SAVEPOINT, t)
    assert delete_savepoint(storage, lock, t).state is State.INFLIGHT
    assert _timeline_names(root) == before


SCRIPT = """
import sys
from hoodie.lock import FileSystemLock
from hoodie.savepoint.savepoint import create_savepoint
from hoodie.storage import Storage
storage = Storage.for_uri(sys.argv[1])
create_savepoint(storage, FileSystemLock(storage, expire_seconds=2), sys.argv[2], user="killed")
"""


def test_a_creation_killed_half_way_is_finished_by_the_next(tmp_path: Path) -> None:
    root = tmp_path / "t"
    storage, lock = _table(root, 8, "MERGE_ON_READ", commits=2)
    t = _writes(root)[1]
    env = {
        **os.environ,
        "HOODIE_FAILPOINTS": "savepoint.after_inflight",
        "PYTHONPATH": f"{REPO / 'core'}:{REPO / 'services'}",
    }
    killed = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), t], env=env, capture_output=True, text=True, timeout=120
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    table = Table.open(str(root))
    assert table.timeline.savepoint_files[t][-1][0].state is State.INFLIGHT
    assert not savepoints(table.timeline)  # an inflight savepoint keeps nothing from the cleaner
    result = create_savepoint(storage, lock, t, user="again")
    assert result.instant.state is State.COMPLETED
    assert [i.time for i in savepoints(Table.open(str(root)).timeline)] == [t]
