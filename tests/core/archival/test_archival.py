"""Archival end to end (``hoodie/archival/execute.py``) on generated MERGE_ON_READ tables of versions 6, 8 and
9 whose timelines hold deltacommits, compactions, a clustering, cleans and rollbacks: after archival the
active timeline is within its bounds, hudi-rs reads the same snapshot, read-optimized view and time travel to
every instant still active, our time travel to archived instants answers as before, the history holds every
archived instant once (with its completion time in v8+), and ``hoodied timeline --archived`` lists them all.
A process killed at each step of archival loses and duplicates nothing, and the re-run finishes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.archival.execute import archive
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import TimeTravelRefused
from hoodie.lock import FileSystemLock
from hoodie.metadata.reader import MetadataTableConfig
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.archived.load import load_archived_timeline
from hoodie.timeline.instant import CLEAN, COMMIT, DELTA_COMMIT, REPLACE_COMMIT, State
from hoodie.timeline.timeline import Timeline
from hoodied.cli import main
from support import key_value_tables as kv
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleRows, Query
from support.metadata_checks import check_metadata_table

pytestmark = pytest.mark.slow

SETTINGS = {
    "hoodie.keep.min.commits": "5",
    "hoodie.keep.max.commits": "8",
    "hoodie.clean.commits.retained": "3",
    "hoodie.compact.inline.max.delta.commits": "3",
}
#: Write rounds per table (each a deltacommit, with the services between); ``HOODIED_ARCHIVAL_ROUNDS=200`` for
#: the long campaign.
ROUNDS = int(os.environ.get("HOODIED_ARCHIVAL_ROUNDS", "22"))


def build(root: Path, version: int) -> None:
    """Deltacommits, a compaction every 4 rounds, a clustering at round 6 and a clean every 5 rounds."""
    spec = GenerateSpec(table_version=version, rows=120, commits=1, partitions=2, seed=3)
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    clean = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=3)
    for i in range(1, ROUNDS):
        live = Table.open(str(root)).read(columns=["uuid", "city"]).slice(0, 30)
        rows = TripGenerator(100 + i, 2).rows(
            live.column("uuid").to_pylist(), live.column("city").to_pylist()
        )
        TableWriter.open(str(root), lock=lock).upsert(rows)
        if i % 4 == 0 and schedule_compaction(storage, lock).instant is not None:
            compact_in_process(storage, lock)
        if i == 6:
            config = ClusteringConfig.from_config(
                {
                    "hoodie.clustering.plan.strategy.small.file.limit": "10485760",
                    "hoodie.clustering.plan.strategy.single.group.clustering.enabled": "true",
                    "hoodie.clustering.plan.strategy.sort.columns": "ts",
                }
            )
            clustering = schedule_clustering(storage, lock, config=config, respect_trigger=False)
            assert clustering.instant is not None, clustering.reason
            cluster_in_process(storage, lock)
        if i % 5 == 0 and schedule_clean(storage, lock, config=clean).instant is not None:
            clean_in_process(storage, lock)


KEYS = ["_hoodie_record_key", "_hoodie_partition_path"]


def same(ours: pa.Table | str, theirs: pa.Table | str, context: str) -> None:
    """The same answer: the same refusal, or the same rows as multisets by key (row order varies)."""
    if isinstance(ours, str) or isinstance(theirs, str):
        assert ours == theirs, context
    else:
        assert_same_rows(ours, theirs, KEYS, context=context)


def ask(oracle: HudiOracle, root: Path, queries: list[Query]) -> list[pa.Table | str]:
    out: list[pa.Table | str] = []
    for answer in oracle.run(root, queries):
        out.append(answer.table if isinstance(answer, OracleRows) else f"refused: {answer}")
    return out


def ours_as_of(root: Path, time: str) -> pa.Table | str:
    try:
        return Table.open(str(root)).read(as_of=time).sort_by("_hoodie_record_key")
    except TimeTravelRefused as e:
        return f"refused: {type(e).__name__}"


def history_times(root: Path) -> list[tuple[str, str, State]]:
    table = Table.open(str(root))
    return [
        (e.time, e.instant.action, e.instant.state)
        for e in load_archived_timeline(table.storage, table.config)
    ]


@pytest.mark.parametrize("version", [6, 8, 9])
def test_archival_keeps_every_answer_and_moves_the_history(
    tmp_path: Path, hudi_oracle: HudiOracle, version: int
) -> None:
    root = tmp_path / "t"
    build(root, version)
    before = Table.open(str(root))
    writes = [w.time for w in before.timeline.completed_writes()]
    assert len(writes) > 8
    actions = {i.action for i in before.timeline}
    assert {DELTA_COMMIT, COMMIT, CLEAN, REPLACE_COMMIT} <= actions
    completion = {
        w.time: before.timeline.completion_time_of(w.time) for w in before.timeline.completed_writes()
    }
    queries = [Query.snapshot(), Query.read_optimized(), *(Query.snapshot(as_of=t) for t in writes)]
    answers = ask(hudi_oracle, root, queries)
    ours = {t: ours_as_of(root, t) for t in writes}

    storage = Storage.for_uri(str(root))
    results = archive(storage, FileSystemLock(storage), {**before.config.props, **SETTINGS})
    data = results[0]
    assert data.archived, data.reason

    after = Table.open(str(root))
    active = [w.time for w in after.timeline.completed_writes()]
    archived = [i.time for i in data.archived if i.action not in (CLEAN, "rollback")]
    assert archived == writes[: len(archived)]
    assert active == writes[len(archived) :]
    assert len(active) >= 5, "never below hoodie.keep.min.commits"
    assert set(i.time for i in data.archived).isdisjoint(i.time for i in after.timeline)

    # hudi-rs: the same latest snapshot and read-optimized view, and time travel to every active instant.
    again = ask(
        hudi_oracle,
        root,
        [Query.snapshot(), Query.read_optimized(), *(Query.snapshot(as_of=t) for t in active)],
    )
    same(again[0], answers[0], "hudi-rs snapshot")
    same(again[1], answers[1], "hudi-rs read-optimized")
    for t, answer in zip(active, again[2:], strict=True):
        same(answer, answers[2 + writes.index(t)], f"hudi-rs time travel to {t}")
    # Ours: every time travel (archived instants included) answers as it did.
    for t in writes:
        now = ours_as_of(root, t)
        same(now, ours[t], f"our time travel to {t}")

    # The history holds each archived instant once; v8+ keeps its completion time.
    history = load_archived_timeline(after.storage, after.config)
    completed = history.completed()
    assert [i.time for i in completed] == sorted(i.time for i in data.archived)
    if version >= 8:
        for i in completed:
            if i.time in completion:
                assert i.completion_time == completion[i.time]
                assert after.timeline.completion_time_of(i.time) == completion[i.time]
    entries = history_times(root)
    assert len(entries) == len(set(entries)), "an archived state twice"

    # A second run has nothing to do; the CLI lists the archived and the active instants.
    assert not archive(storage, FileSystemLock(storage), {**after.config.props, **SETTINGS})[0].archived


@pytest.mark.parametrize("version", [6, 8])
def test_hoodied_timeline_archived_lists_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: int
) -> None:
    root = tmp_path / "t"
    build(root, version)
    conf = [arg for k, v in SETTINGS.items() for arg in ("--conf", f"{k}={v}")]
    assert main(["archive", str(root), *conf]) == 0
    assert "instant(s) archived" in capsys.readouterr().out
    assert main(["timeline", str(root), "--archived"]) == 0
    out = capsys.readouterr().out.splitlines()
    archived_rows = [line for line in out[1:-1] if line.endswith(" archived")]
    active_rows = [line for line in out[1:-1] if line.endswith(" active")]
    table = Table.open(str(root))
    history = load_archived_timeline(table.storage, table.config)
    assert len(archived_rows) == len(history)
    assert len(active_rows) == len(table.timeline)
    assert out[-1] == f"{len(history)} archived, {len(table.timeline)} active"


POINTS = ("archival.after_history", "archival.after_pending_deleted", "archival.after_completed_deleted")


@pytest.mark.parametrize("version", [pytest.param(6, marks=pytest.mark.campaign), 8])
def test_a_kill_at_each_step_loses_and_duplicates_nothing(
    tmp_path: Path, hudi_oracle: HudiOracle, version: int
) -> None:
    template = tmp_path / "template"
    build(template, version)
    expected = ask(hudi_oracle, template, [Query.snapshot()])[0]
    # A killed archiver leaves the file-system lock behind: it expires after 3 s instead of Hudi's default.
    settings = {**SETTINGS, "hoodie.write.lock.filesystem.expire": "0.05"}
    conf = [arg for k, v in settings.items() for arg in ("--conf", f"{k}={v}")]
    for point in POINTS:
        root = tmp_path / point
        subprocess.run(["cp", "-a", str(template), str(root)], check=True)
        env = {**os.environ, "HOODIE_FAILPOINTS": point}
        killed = subprocess.run(
            [sys.executable, "-m", "hoodied.cli", "archive", str(root), *conf],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert killed.returncode == -9, f"{point}: {killed.stdout}{killed.stderr}"
        same(ask(hudi_oracle, root, [Query.snapshot()])[0], expected, f"{point}: hudi-rs after the kill")
        same(Table.open(str(root)).read(), expected, f"{point}: our reader after the kill")
        done = subprocess.run(
            [sys.executable, "-m", "hoodied.cli", "archive", str(root), *conf],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{point}: re-run failed: {done.stderr}"
        table = Table.open(str(root))
        entries = history_times(root)
        assert entries, f"{point}: nothing archived"
        assert len(entries) == len(set(entries)), f"{point}: an archived state twice"
        archived = {t for t, _, _ in entries}
        assert archived.isdisjoint(i.time for i in table.timeline), f"{point}: archived and still active"
        same(ask(hudi_oracle, root, [Query.snapshot()])[0], expected, f"{point}: hudi-rs after the re-run")


HUDI_WRITTEN = (
    "apache-hudi/hudi-v6-table-mor:hudi-v6-table-mor",
    "apache-hudi/hudi-v8-table-mor:hudi-v8-table-maintenance",
    "apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor",
    "apache-hudi/hudi-v8-table-cow:hudi-v8-table-cow",
)


@pytest.mark.fixtures
@pytest.mark.parametrize("table_id", HUDI_WRITTEN)
def test_hudi_written_tables_with_a_history_and_a_metadata_table(
    table_id: str,
    fixture_root: Callable[[str], Path],
    table_copy: Callable[[Path], Path],
    hudi_oracle: HudiOracle,
) -> None:
    """Tables Hudi archived itself (its history and its metadata table's): archiving further appends to the
    same history, the metadata table stays consistent, and hudi-rs reads what it read."""
    root = table_copy(fixture_root(table_id))
    before = Table.open(str(root))
    history_before = load_archived_timeline(before.storage, before.config)
    answers = ask(hudi_oracle, root, [Query.snapshot(), Query.read_optimized()])
    settings = {**before.config.props, "hoodie.keep.min.commits": "2", "hoodie.keep.max.commits": "3"}
    settings["hoodie.clean.commits.retained"] = "1"
    storage = Storage.for_uri(str(root))
    results = archive(storage, FileSystemLock(storage), settings)
    after = Table.open(str(root))
    history = load_archived_timeline(after.storage, after.config)
    moved = {i.time for i in results[0].archived}
    assert moved, results[0].reason
    assert len(results) == 2, "the metadata table's timeline is archived too"
    assert results[1].archived, results[1].reason
    assert {i.time for i in history.completed()} == {i.time for i in history_before.completed()} | {
        t for t in moved if after.timeline.get(t) is None
    }
    assert moved.isdisjoint(i.time for i in after.timeline)
    again = ask(hudi_oracle, root, [Query.snapshot(), Query.read_optimized()])
    same(again[0], answers[0], f"{table_id}: hudi-rs snapshot")
    same(again[1], answers[1], f"{table_id}: hudi-rs read-optimized")
    same(after.read(), before.read(), f"{table_id}: our snapshot")
    check_metadata_table(root, f"{table_id} after archival")
    mdt = results[1]  # its metadata table's timeline, by its own rules
    assert mdt.table.endswith(".hoodie/metadata")
    mdt_storage = storage.child(".hoodie/metadata")
    mdt_timeline = Timeline.load(mdt_storage, MetadataTableConfig.load(mdt_storage))
    assert {i.time for i in mdt.archived}.isdisjoint(i.time for i in mdt_timeline)
    mdt_history = load_archived_timeline(mdt_storage, MetadataTableConfig.load(mdt_storage))
    assert {i.time for i in mdt.archived} <= {i.time for i in mdt_history.completed()} | {
        e.time for e in mdt_history
    }


def test_a_deltacommit_completed_after_its_slices_compaction_was_planned_is_not_archived(
    tmp_path: Path, hudi_oracle: HudiOracle
) -> None:
    """A deltacommit still running when the compaction of its file slice was planned writes its log file into
    the new slice (by its completion time). Once archived, hudi-rs (which slices by the active timeline
    alone) put the log in the slice before and read the records it updated with their old values (found by
    the chaos campaign); archival keeps it until a newer compaction rewrote its file group."""
    root = tmp_path / "t"
    writer = kv.create(root, "MERGE_ON_READ", 8)
    writer.upsert(kv.rows(["a", "b"], 0))
    writer.upsert(kv.rows(["a"], 1))  # a log file for the compaction to compact
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    straddling: list[str] = []

    def plan_compaction(instant_time: str) -> None:  # the update runs while the compaction is planned
        straddling.append(instant_time)
        assert schedule_compaction(storage, lock).instant is not None

    writer.on_requested = plan_compaction
    writer.upsert(kv.rows(["a"], 2))
    writer.on_requested = None
    compact_in_process(storage, lock)
    for n in range(12):  # enough commits to archive, none in the group of "a"
        writer.upsert(kv.rows([f"k{n}"], 2, part="q"))
    archive(storage, lock, SETTINGS)
    table = Table.open(str(root))
    assert table.timeline.get(straddling[0]) is not None, "the straddling deltacommit stays active"
    [theirs] = ask(hudi_oracle, root, [Query.snapshot()])
    assert isinstance(theirs, pa.Table), theirs
    values = dict(zip(theirs.column("key").to_pylist(), theirs.column("value").to_pylist(), strict=True))
    assert values["a"] == 2, "hudi-rs reads the update"
    schedule_compaction(storage, lock)  # the group of "a" compacted again: now it may go
    compact_in_process(storage, lock)
    archive(storage, lock, SETTINGS)
    assert Table.open(str(root)).timeline.get(straddling[0]) is None
