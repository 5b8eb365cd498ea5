"""Completion decisions (issue 33, case 1): a holder paused between its last check and its completing write
wakes fenced. Two executors of one compaction share a table; the first one's store stalls (every request of
its process held, :mod:`support.stall`) at a chosen write, its heartbeat and table lock expire, the second
takes the instant over. Whatever the stalled write, the instant completes once, every file its completion
names exists, and hudi-rs reads the same rows before and after.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie.archival.execute import archival_inputs
from hoodie.clean.service import CLEAN
from hoodie.clustering.plan import clustering_plan_of
from hoodie.clustering.service import CLUSTERING
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.service import COMPACTION
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.errors import CommitConflict, LostRace
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import TableService
from hoodie.testing.generate import TripGenerator
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.metadata import decode_clean_metadata
from hoodie.write.decision import (
    Decision,
    decide_complete,
    decision_path,
    publish,
    read_decision,
    void_attempts,
)
from hoodie.write.late_files import (
    CLOCK_SKEW_SECONDS,
    LATE_REQUEST_HORIZON_SECONDS,
    LateFiles,
    recent_late_files,
    removed_instants_with_late_files,
)
from hoodied.jobs import JobRun
from support.daemon_tables import cow_table, mor_table
from support.hudi_oracle import HudiOracle, Query
from support.metadata_checks import check_metadata_table
from support.service_checks import judge, read_all
from support.stalled_takeover import (
    LOCK_EXPIRY,
    assert_the_right_run_won,
    completed_files,
    stalled_then_taken_over,
    trigger,
)


def _stalled_then_taken_over(root: Path, T: str, stall_at: str, service: TableService = COMPACTION) -> None:
    """The first executor of ``service``'s instant ``T`` stalls at ``stall_at``
    (:data:`support.stalled_takeover.TRIGGERS`); a second takes over; then the first wakes. Judged: one
    completed file of ``T`` (in the metadata table too), every file a compaction's names there, hudi-rs's
    rows unchanged, and who won (see the tests)."""
    before = read_all(root, [])
    completed = "clean" if service is CLEAN else "commit"
    first, second = stalled_then_taken_over(root, T, trigger(stall_at, T, completed), service)
    assert_the_right_run_won(stall_at, first, second)
    assert len(completed_files(root, T, f".{completed}")) == 1, completed_files(root, T, f".{completed}")
    table = Table.open(str(root))
    if service is CLEAN:
        cleaned = decode_clean_metadata(table.storage.read(table.timeline.file_of(T))).partition_metadata
        left = [
            f"{p}/{n}" for p, m in cleaned.items() for n in m.delete_path_patterns if (root / p / n).exists()
        ]
        assert cleaned
        assert not left, f"the completed clean {T} names files that are still there: {left}"
    else:
        named = table.commit_metadata(T).written_file_paths
        missing = [p for p in named if not (root / p).exists()]
        assert named
        assert not missing, f"the completed {T} names files that are gone: {missing}"
    judge(root, before, service.name, f"a takeover of a run stalled at its {stall_at}")
    mdt = root / ".hoodie" / "metadata"
    if (mdt / ".hoodie").is_dir():
        assert len(completed_files(mdt, T, ".deltacommit")) == 1, completed_files(mdt, T, ".deltacommit")
        check_metadata_table(root, f"after a takeover of a run stalled at its {stall_at}")


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("stall_at", ["completed-file", "decision"])
def test_a_stalled_completion_and_a_takeover_complete_the_instant_once(
    tmp_path: Path, version: int, stall_at: str
) -> None:
    """``completed-file``: the first run decided, and its PUT of the completed file is held. The takeover
    voids its attempt, finds the decision, publishes it (rolls forward) and rolls nothing back; the held PUT
    lands on the same file. ``decision``: the first run's PUT of its decision is held. The takeover voids
    the attempt first, rolls it back and completes the instant; the held decision fails, the woken run gives
    up having written no completion. (Before decisions, the first case left two completed files on v8+, the
    older naming base files the takeover had deleted.)"""
    t = mor_table(tmp_path / "t", version, seed=61 + version)
    T = next(i.time for i in t.pending if i.action == "compaction")
    _stalled_then_taken_over(t.root, T, stall_at)


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("stall_at", ["completed-file", "decision"])
def test_a_stalled_clean_and_a_takeover_complete_it_once(tmp_path: Path, version: int, stall_at: str) -> None:
    """A clean is run again, not rolled back, when taken over; the takeover voids the attempt it superseded
    before it decides. ``completed-file``: the first run decided and its completed file is held; the
    takeover's void finds the decision and publishes it (its own deletes were the same plan's). ``decision``:
    the takeover voids the first attempt and completes; the woken run's decision fails. (Before, a v8+
    timeline could hold two completed files of the clean.)"""
    t = mor_table(tmp_path / "t", version, seed=71 + version)
    T = next(i.time for i in t.pending if i.action == "clean")
    _stalled_then_taken_over(t.root, T, stall_at, CLEAN)


@pytest.mark.parametrize("version", [6, 8, 9])
def test_a_write_committed_while_a_decided_clustering_stalled_stays_visible(
    tmp_path: Path, version: int, hudi_oracle: HudiOracle
) -> None:
    """Chaos seed 632. A clustering decided, then stalled before publishing; its table lock expired and a
    writer (updates allowed under clustering) committed into its file groups, seeing it pending; a takeover
    then found the decision. Rolled forward, the clustering would have replaced those groups after the fact,
    hiding the write's records. Now the takeover completes it as a replacecommit replacing nothing, at the
    decided name (the stalled PUT then fails), deletes the attempt's new files and keeps the write."""
    t = cow_table(tmp_path / "t", version, seed=81 + version)
    root = t.root
    storage = Storage.for_uri(str(root))
    T = next(i.time for i in t.pending if i.action != "clean")
    plan = clustering_plan_of(Table.load(storage), T)
    assert plan is not None
    plan_partitions = {s.partition_path for s in plan.slices}
    live = Table.open(str(root)).read(columns=["uuid", "city", "_hoodie_partition_path"])
    keys = [
        (u, c)
        for u, c, p in zip(*(live.column(n).to_pylist() for n in live.column_names), strict=True)
        if p in plan_partitions
    ][:12]
    rows = TripGenerator(991, 2).rows([u for u, _ in keys], [c for _, c in keys])
    later = pa.array([2**62] * rows.num_rows, pa.int64())  # the updates' ordering value wins the merge
    rows = rows.set_column(rows.schema.get_field_index("ts"), "ts", later)
    written: dict[str, str] = {}

    def writer_commits() -> None:
        lock = FileSystemLock(storage, expire_seconds=LOCK_EXPIRY, acquire_timeout=120)
        written["instant"] = TableWriter.open(str(root), lock=lock).upsert(rows).instant.time

    first, second = stalled_then_taken_over(
        root, T, trigger("completed-file", T, "replacecommit"), CLUSTERING, meanwhile=writer_commits
    )
    assert isinstance(second, LostRace), second
    assert not isinstance(first, JobRun), first  # its late completed file found the name taken
    assert len(completed_files(root, T, ".replacecommit")) == 1
    table = Table.open(str(root))
    completed = table.commit_metadata(T)
    assert not completed.partition_to_replace_file_ids
    assert not completed.written_file_paths
    assert not list(root.rglob(f"*_{T}.parquet")), "the attempt's new files stay"
    snapshot = hudi_oracle.rows(root, Query.snapshot())
    by_key = dict(
        zip(
            snapshot.column("uuid").to_pylist(),
            snapshot.column("_hoodie_commit_time").to_pylist(),
            strict=True,
        )
    )
    stale = {u: by_key.get(u) for u, _ in keys if by_key.get(u) != written["instant"]}
    assert not stale, f"the write {written} records are hidden: {stale}"
    if (root / ".hoodie" / "metadata" / ".hoodie").is_dir():
        check_metadata_table(root, "after the empty completion")


@pytest.mark.fixtures
@pytest.mark.parametrize(
    "table_id",
    [
        "apache-hudi/hudi-v6-table-mor:hudi-v6-table-mor",
        "apache-hudi/hudi_multi_pt_v8_mor:hudi_multi_pt_v8_mor",
    ],
)
@pytest.mark.parametrize("stall_at", ["metadata-table", "metadata-completed", "decision"])
def test_a_stalled_completion_keeps_the_metadata_table_whole(
    fixture_root: Callable[[str], Path], table_copy: Callable[[Path], Path], table_id: str, stall_at: str
) -> None:
    """Hudi's tables with a metadata table. ``metadata-table``: the first run decided, and its first write to
    the metadata table is held; the roll forward writes the metadata table's deltacommit (rebuilt from the
    decided write stats) and the completed file; the woken run finds the deltacommit completed, leaves it
    (it never replaces a completed one) and publishes the same completed file. ``metadata-completed``: the
    first run's PUT of the deltacommit's completed file is held; the roll forward completes the deltacommit
    at the completion time the decision recorded, so the held PUT, landing after, collides instead of adding
    a second completed deltacommit (as it did on v8 before decisions recorded that time). ``decision``: the
    takeover rolls the voided attempt back (the metadata table's share included) and completes; the metadata
    table agrees with the files either way."""
    root = table_copy(fixture_root(table_id))
    storage = Storage.for_uri(str(root))
    scheduled = schedule_compaction(
        storage, FileSystemLock(storage), config=CompactionConfig(strategy=Strategy.UNBOUNDED)
    )
    assert scheduled.instant is not None, scheduled.reason
    _stalled_then_taken_over(root, scheduled.instant.time, stall_at)


def test_a_void_and_a_decision_of_one_attempt_exclude_each_other(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    decide_complete(storage, "001", 7, ".hoodie/001.commit", b"{}")
    assert void_attempts(storage, "001", [7], by=8) == read_decision(storage, "001", 7)
    assert publish(storage, Decision("001", 7, "complete", None, ".hoodie/001.commit", b"{}"))
    assert not publish(storage, Decision("001", 7, "complete", None, ".hoodie/001.commit", b"{}"))
    assert void_attempts(storage, "002", [5, 6], by=6) is None  # a run giving up voids itself too
    assert read_decision(storage, "002", 6) == Decision("002", 6, "void", 6)
    with pytest.raises(LostRace, match="voided by attempt 6"):
        decide_complete(storage, "002", 5, ".hoodie/002.commit", b"{}")
    (tmp_path / ".hoodie").mkdir(exist_ok=True)
    (tmp_path / ".hoodie" / "003.commit").write_bytes(b"other")
    with pytest.raises(CommitConflict, match="holds another completion"):
        publish(storage, Decision("003", 1, "complete", None, ".hoodie/003.commit", b"{}"))
    (tmp_path / decision_path("004", 1)).parent.mkdir(parents=True)
    (tmp_path / decision_path("004", 1)).write_bytes(b"not json")
    with pytest.raises(CommitConflict, match="unreadable"):
        void_attempts(storage, "004", [1], by=2)


@pytest.mark.parametrize("version", [6, 8])
def test_a_base_file_landing_after_the_takeover_of_a_dead_run_is_swept(tmp_path: Path, version: int) -> None:
    """The first run stalls at its decision, past its lease; a takeover voids its attempt, rolls back its
    base files and completes; the first run's process then dies (it cleans nothing up). A base-file PUT of
    the first attempt that was held in the network lands after all that (the chaos campaign's seed 766 on
    S3: a file of the completed compaction that no completion names, the replica killed while the PUT was
    held). Here that PUT is made by hand: the winner's file under the voided attempt's write token. The
    takeover's run says where its voided attempts may still land files, and the sweep deletes exactly the
    late file."""
    t = mor_table(tmp_path / "t", version, seed=71 + version)
    T = next(i.time for i in t.pending if i.action == "compaction")
    before = read_all(t.root, [])
    told: list[LateFiles] = []
    first, second = stalled_then_taken_over(
        t.root, T, trigger("decision", T, "commit"), COMPACTION, then_die=True, late_files=told
    )
    assert isinstance(second, JobRun), second
    assert not isinstance(first, JobRun), first
    (late,) = told
    assert late.instant_time == T
    (voided,) = late.attempts
    assert read_decision(Storage.for_uri(str(t.root)), T, voided) is not None
    table = Table.open(str(t.root))
    named = table.commit_metadata(T).written_file_paths
    winner = named[0]
    folder, name = winner.rsplit("/", 1)
    file_id, token, rest = name.split("_", 2)
    task, _, task_attempt = token.split("-")
    held = f"{folder}/{file_id}_{task}-{voided}-{task_attempt}_{rest}"
    (t.root / held).write_bytes((t.root / winner).read_bytes())  # the held PUT lands

    assert late.sweep(table.storage) == [held]
    assert not (t.root / held).exists()
    assert all((t.root / p).exists() for p in named)
    assert late.sweep(table.storage) == []  # a second sweep finds nothing
    assert len(completed_files(t.root, T)) == 1
    judge(t.root, before, "compaction", "a takeover whose voided attempt's base file landed late")


def test_the_late_files_of_a_takeover_that_removed_the_instant_are_swept_too(tmp_path: Path) -> None:
    """Chaos seed 773. A clustering's first run stalls at its decision; a writer commits into its file
    groups meanwhile; the takeover voids the first attempt, rolls it back, finds the conflict and removes
    the clustering. A held base-file PUT of the voided attempt landing after that (made here by hand) names
    an instant that is gone: nothing references it, and the takeover's run said where to sweep it although
    it completed nothing."""
    t = cow_table(tmp_path / "t", 8, seed=89)
    root = t.root
    storage = Storage.for_uri(str(root))
    T = next(i.time for i in t.pending if i.action != "clean")
    plan = clustering_plan_of(Table.load(storage), T)
    assert plan is not None
    partition = plan.slices[0].partition_path
    live = Table.open(str(root)).read(columns=["uuid", "city", "_hoodie_partition_path"])
    keys = [
        (u, c)
        for u, c, p in zip(*(live.column(n).to_pylist() for n in live.column_names), strict=True)
        if p == partition
    ][:5]
    rows = TripGenerator(993, 2).rows([u for u, _ in keys], [c for _, c in keys])

    def writer_commits() -> None:
        lock = FileSystemLock(storage, expire_seconds=LOCK_EXPIRY, acquire_timeout=120)
        TableWriter.open(str(root), lock=lock).upsert(rows)

    told: list[LateFiles] = []
    first, second = stalled_then_taken_over(
        root,
        T,
        trigger("decision", T, "replacecommit"),
        CLUSTERING,
        meanwhile=writer_commits,
        then_die=True,
        late_files=told,
    )
    assert not isinstance(second, JobRun), second  # the conflict removed the clustering
    assert not isinstance(first, JobRun), first
    assert Table.open(str(root)).timeline.get(T) is None
    (late,) = told
    assert late.groups is None  # no job prepared: every partition, looked up when swept
    (voided,) = late.attempts
    existing = next(p for p in (root / partition).glob("*.parquet"))
    held = root / partition / f"{existing.name.split('_', 1)[0]}_0-{voided}-0_{T}.parquet"
    held.write_bytes(existing.read_bytes())  # the held PUT lands
    # Until swept, archival keeps T after the timeline's start: readers take T for a failed write.
    view = Table.load(storage)
    assert removed_instants_with_late_files(storage, view.timeline) == [T]
    assert archival_inputs(view).removed_with_late_files == (T,)
    # The void decision on storage says the same to a replica that never heard of the takeover.
    assert recent_late_files(storage) == [LateFiles(T, None, frozenset({voided}))]
    assert (
        recent_late_files(storage, now=time.time() + LATE_REQUEST_HORIZON_SECONDS + CLOCK_SKEW_SECONDS + 5)
        == []
    )
    assert late.sweep(storage) == [str(held.relative_to(root))]
    assert not held.exists()
