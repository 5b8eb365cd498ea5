"""The indexing service on generated tables of every version: the metadata table is created when missing,
the new indexes cover every record and file (also while a writer commits in another process), hudi-rs
reads through the result, and indexes drop cleanly. Also the metadata table's own compaction."""

from __future__ import annotations

import json
import multiprocessing
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.clean.service import CLEAN as CLEAN_SERVICE
from hoodie.clustering.service import CLUSTERING as CLUSTERING_SERVICE
from hoodie.config import TableConfig
from hoodie.errors import VersionConflict
from hoodie.indexing.execute import (
    IndexingDeferred,
    IndexingFailed,
    _drop_index_definitions,
    build_index_records,
    build_index_share,
    complete_indexing,
    drop_index,
    index_slices,
    pending_indexing,
    run_indexing,
    schedule_indexing,
)
from hoodie.indexing.service import INDEXING as INDEXING_SERVICE
from hoodie.lock import FileSystemLock
from hoodie.metadata import MetadataTable
from hoodie.metadata.writer import MetadataUpdate, compact_if_due, deltacommits_since_compaction
from hoodie.new_table import new_table_properties
from hoodie.storage import Storage
from hoodie.storage.local import LocalBackend
from hoodie.table_service import run_in_process
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import CLEAN, CLUSTERING, COMMIT, INDEXING, State
from hoodie.timeline.metadata import decode_index_commit_metadata, decode_index_plan
from hoodie.timeline.writer import TimelineWriter
from support import key_value_tables as kv
from support.compare import assert_same_rows
from support.daemon_tables import cow_table
from support.hudi_oracle import HudiOracle, OracleRows, Query
from support.metadata_checks import check_metadata_table, generate_small_table

KEYS = ["_hoodie_partition_path", "_hoodie_record_key"]


def _generate(root: Path, version: int, partitions: int = 2) -> None:
    generate_small_table(root, version, partitions)


def _hudi_rs_reads_the_same(root: Path) -> None:
    with tempfile.TemporaryDirectory() as work:
        snapshot = HudiOracle(Path(work)).one(str(root), Query.snapshot())
    assert isinstance(snapshot, OracleRows), snapshot
    assert_same_rows(snapshot.table, Table.open(str(root)).read(), KEYS, context=f"hudi-rs {root}")


@pytest.mark.parametrize(("version", "partitions"), [(6, 2), (8, 0), (9, 2)])
def test_indexes_are_built_on_a_table_without_a_metadata_table(
    tmp_path: Path, version: int, partitions: int
) -> None:
    root = tmp_path / "t"
    _generate(root, version, partitions)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    wanted = ["column_stats", "bloom_filters", "record_index"]
    if version >= 8 and partitions:
        wanted.append("partition_stats")
    latest = Table.open(str(root)).timeline.latest_completed_write()
    assert latest is not None
    scheduled = schedule_indexing(storage, lock, wanted)
    assert scheduled.instant is not None, scheduled.reason
    table = Table.open(str(root))
    # The metadata table exists with its files partition; the new ones are being built.
    assert table.config.metadata_partitions == ("files",)
    inflight = table.config.props["hoodie.table.metadata.partitions.inflight"].split(",")
    assert sorted(inflight) == sorted(wanted)
    plan = decode_index_plan(
        (root / table.timeline.file_of(scheduled.instant.time, State.REQUESTED)).read_bytes()
    )
    assert [i.metadata_partition_path for i in plan.index_partition_infos] == wanted
    assert {i.index_upto_instant for i in plan.index_partition_infos} == {latest.time}
    # Scheduling the same again asks for nothing new.
    assert schedule_indexing(storage, lock, wanted).instant is None

    result = run_indexing(storage, lock)
    assert result.records > 0
    table = Table.open(str(root))
    assert sorted(table.config.metadata_partitions) == sorted(["files", *wanted])
    assert table.config.props["hoodie.table.metadata.partitions.inflight"] == ""
    done = table.timeline.get(scheduled.instant.time)
    assert done is not None
    assert done.state is State.COMPLETED
    assert done.action == INDEXING
    md = decode_index_commit_metadata(
        (root / table.timeline.file_of(done.time, State.COMPLETED)).read_bytes()
    )
    assert md.index_partition_infos == plan.index_partition_infos
    assert not pending_indexing(table)
    check_metadata_table(root, f"v{version} indexed")
    _hudi_rs_reads_the_same(root)


def _write_loop(root: str, commits: int, seed: int) -> None:  # runs in a child process
    import random

    rng = random.Random(seed)
    writer = TableWriter.open(root)
    table = Table.open(root)
    base = table.read()
    data = base.drop([c for c in base.column_names if c.startswith("_hoodie_")])
    for i in range(commits):
        n = data.num_rows
        picks = sorted(rng.sample(range(n), min(5, n)))
        writer.upsert(data.take(pa.array(picks)))
        if i % 3 == 2:
            writer.delete(data.take(pa.array(picks[:1])))


def test_an_index_built_while_a_writer_commits_covers_every_record(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    # The metadata table first, so that the writer's commits all go through it.
    schedule_indexing(storage, lock, ["column_stats"])
    run_indexing(storage, lock)
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_write_loop, args=(str(root), 12, 7))
    child.start()
    try:
        scheduled = schedule_indexing(storage, lock, ["record_index", "bloom_filters"])
        assert scheduled.instant is not None
        run_indexing(storage, lock)
    finally:
        child.join(timeout=300)
    assert child.exitcode == 0
    table = Table.open(str(root))
    assert len(table.timeline.completed_writes()) >= 3 + 12
    assert "record_index" in table.config.metadata_partitions
    check_metadata_table(root, "indexed under a writer")
    _hudi_rs_reads_the_same(root)


def test_drop_an_index_and_the_whole_metadata_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 9)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    schedule_indexing(storage, lock, ["record_index", "column_stats"])
    run_indexing(storage, lock)
    assert drop_index(storage, lock, ["record_index"]) == ["record_index"]
    table = Table.open(str(root))
    assert "record_index" not in table.config.metadata_partitions
    assert not (root / ".hoodie" / "metadata" / "record_index").exists()
    check_metadata_table(root, "record index dropped")
    assert drop_index(storage, lock, ["record_index"]) == []
    assert drop_index(storage, lock, ["files"]) == ["files"]
    assert not (root / ".hoodie" / "metadata").exists()
    assert Table.open(str(root)).config.metadata_partitions == ()
    _hudi_rs_reads_the_same(root)


def test_bad_requests_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8, partitions=0)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    with pytest.raises(IndexingFailed, match="expr_index_x"):
        schedule_indexing(storage, lock, ["expr_index_x"])
    with pytest.raises(IndexingFailed, match="not partitioned"):
        schedule_indexing(storage, lock, ["partition_stats"])
    with pytest.raises(IndexingFailed, match="no pending indexing"):
        run_indexing(storage, lock)


@pytest.mark.parametrize("version", [6, 8])
def test_the_metadata_table_compacts_when_due(tmp_path: Path, version: int) -> None:
    root = tmp_path / "t"
    _generate(root, version)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    schedule_indexing(storage, lock, ["column_stats", "record_index"])
    run_indexing(storage, lock)
    writer = TableWriter.open(str(root))
    rows = Table.open(str(root)).read()
    data = rows.drop([c for c in rows.column_names if c.startswith("_hoodie_")])
    for i in range(3):
        writer.upsert(data.slice(i * 3, 3))  # each commit compacts the metadata table only when due
    table = Table.open(str(root))
    mdt = MetadataTable.load(table.storage, table.config, table.timeline)
    before = {p: mdt.read_partition(p) for p in table.config.metadata_partitions}
    assert deltacommits_since_compaction(mdt.timeline) >= 1
    done = compact_if_due(storage, lock, max_delta_commits=1)
    assert done is not None
    table = Table.open(str(root))
    mdt = MetadataTable.load(table.storage, table.config, table.timeline)
    assert deltacommits_since_compaction(mdt.timeline) == 0
    for partition, records in before.items():
        slices = mdt.file_slices(partition)
        assert all(s.base_instant == done.instant.time and not s.log_files for s in slices), partition
        after = mdt.read_partition(partition)
        assert after.keys() == {k for k, r in records.items()}, partition
    check_metadata_table(root, f"v{version} compacted")
    _hudi_rs_reads_the_same(root)
    # Not due: nothing happens.
    assert compact_if_due(storage, lock, max_delta_commits=10) is None
    # A second compaction: its clean deletes the slices older than the two latest of each file group.
    writer.upsert(data.slice(20, 3))
    files_before = {p.name for p in (root / ".hoodie" / "metadata" / "files").iterdir()}
    second = compact_if_due(storage, lock, max_delta_commits=1)
    assert second is not None
    table = Table.open(str(root))
    mdt = MetadataTable.load(table.storage, table.config, table.timeline)
    cleans = [i for i in mdt.timeline.completed() if i.action == "clean"]
    assert len(cleans) == 1
    files_after = {p.name for p in (root / ".hoodie" / "metadata" / "files").iterdir()}
    gone = files_before - files_after
    assert gone
    assert all(done.instant.time not in name for name in gone)  # the previous slice stays
    check_metadata_table(root, f"v{version} compacted twice and cleaned")
    _hudi_rs_reads_the_same(root)


def test_an_index_dropped_while_it_is_built_is_not_completed(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_indexing(storage, lock, ["record_index"])
    assert scheduled.instant is not None
    table = Table.open(str(root))
    seen = frozenset(i.time for i in table.timeline.completed_writes())
    built = build_index_records(
        storage, table.config, scheduled.instant.time, ["record_index"], index_slices(table)
    )
    assert drop_index(storage, lock, ["record_index"]) == ["record_index"]
    # Its pending indexing went with it; completing the build now writes nothing.
    assert not pending_indexing(Table.open(str(root)))
    with pytest.raises(IndexingFailed, match="no longer pending"):
        complete_indexing(storage, lock, scheduled.instant, built, seen)
    table = Table.open(str(root))
    assert "record_index" not in table.config.metadata_partitions
    assert not (root / ".hoodie" / "metadata" / "record_index").exists()
    check_metadata_table(root, "dropped while built")


def test_one_key_twice_in_an_update_is_merged_not_overwritten(tmp_path: Path) -> None:
    """Two tasks building shares of one partition both give its partition statistics: the ranges unite."""
    root = tmp_path / "t"
    _generate(root, 8)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_indexing(storage, lock, ["column_stats", "partition_stats"])
    assert scheduled.instant is not None
    table = Table.open(str(root))
    seen = frozenset(i.time for i in table.timeline.completed_writes())
    slices = index_slices(table)
    one = [s for s in slices if s.partition_path == slices[0].partition_path]
    assert len(one) >= 2, "the partition needs two file groups to split"
    parts = ["column_stats", "partition_stats"]
    halves = [
        build_index_records(storage, table.config, scheduled.instant.time, parts, one[:1]),
        build_index_records(
            storage, table.config, scheduled.instant.time, parts, [s for s in slices if s is not one[0]]
        ),
    ]
    merged = MetadataUpdate(
        scheduled.instant.time,
        records={p: [r for h in halves for r in h.records.get(p, [])] for p in parts},
    )
    complete_indexing(storage, lock, scheduled.instant, merged, seen)
    check_metadata_table(root, "partition statistics from two shares")


def test_a_task_returns_compact_key_locations_and_the_driver_makes_the_same_records(tmp_path: Path) -> None:
    """A build task holds no Python record per key: its record index is one Arrow array of keys per slice
    (first occurrences, in slice order); the records made of it in the driver are the in-process build's."""
    root = tmp_path / "t"
    _generate(root, 8)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_indexing(storage, lock, ["record_index", "column_stats"])
    assert scheduled.instant is not None
    table = Table.open(str(root))
    T = scheduled.instant.time
    parts = ["record_index", "column_stats"]
    share = build_index_share(storage, table.config, T, parts, index_slices(table))
    assert "record_index" not in share.update.records
    assert share.update.records["column_stats"]
    assert share.locations
    for loc in share.locations:
        assert isinstance(loc.keys, pa.Array)
        assert len(loc.keys) == len(set(loc.keys.to_pylist()))
    whole = build_index_records(storage, table.config, T, parts, index_slices(table))
    assert share.to_update(table.config).records == whole.records
    assert len(whole.records["record_index"]) == sum(len(loc.keys) for loc in share.locations)


def test_an_indexing_waits_for_an_older_pending_clustering(tmp_path: Path) -> None:
    """A clustering planned before an indexing and completed after it would write its new key locations under
    its older instant time, behind the index built before it: the record index would point at the replaced
    file groups (found by the daemon's embedded test). So the indexing is deferred while it is pending, at
    prepare and again at the completion, and runs right once it completed."""
    t = cow_table(tmp_path / "t", 8, seed=7)
    storage = Storage.for_uri(str(t.root))
    lock = FileSystemLock(storage)
    requested = schedule_indexing(storage, lock, ["column_stats", "record_index"]).instant
    assert requested is not None
    clustering = next(i for i in t.pending if i.action == CLUSTERING)
    with pytest.raises(
        IndexingDeferred, match=f"waits for older writes to complete first: .*{clustering.time}"
    ):
        INDEXING_SERVICE.prepare(storage, lock, requested.time, {})
    with pytest.raises(IndexingDeferred):
        run_indexing(storage, lock, wait_seconds=0)
    for instant in t.pending:  # the clean and both clusterings
        service = CLEAN_SERVICE if instant.action == CLEAN else CLUSTERING_SERVICE
        run_in_process(service.prepare(storage, lock, instant.time, {}))
    job = INDEXING_SERVICE.prepare(storage, lock, requested.time, {})
    # A write requested meanwhile at an older time (a writer whose clock lags) defers the completion too.
    timeline_writer = TimelineWriter(storage, Table.open(str(t.root)).config, lock)
    late = timeline_writer.request(COMMIT, str(int(requested.time) - 1))
    with pytest.raises(IndexingDeferred, match=late.time):
        run_in_process(job)
    timeline_writer.delete_pending(late)
    run_in_process(INDEXING_SERVICE.prepare(storage, lock, requested.time, {}))
    check_metadata_table(t.root, "indexed after the clusterings")


def test_a_key_deleted_then_written_again_stays_in_the_record_index(tmp_path: Path) -> None:
    """A MOR delete removes the key from the record index while its base file still holds it; a later upsert
    of the key is tagged to that file group by its base file and goes to a log file. The index must get the
    key back (the chaos campaign found it missing)."""
    root = tmp_path / "t"
    _generate(root, 8)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    schedule_indexing(storage, lock, ["record_index"])
    run_indexing(storage, lock)
    table = Table.open(str(root))
    row = table.read().slice(0, 1)
    data = row.drop([c for c in row.column_names if c.startswith("_hoodie_")])
    writer = TableWriter.open(str(root))
    writer.delete(data.select(["uuid", "city"]))
    check_metadata_table(root, "after the delete")
    writer.upsert(data)
    check_metadata_table(root, "after the key came back")
    assert Table.open(str(root)).read().num_rows == table.read().num_rows


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_writes_while_the_index_is_built_are_not_caught_up_again(tmp_path: Path, table_type: str) -> None:
    """Two writes complete while the record index is built: the first inserts keys, the second deletes some.
    Each wrote the partition being built itself; catching both up again after them put the first one's keys
    back (the chaos campaign found deleted keys in the record index). Only writes that wrote no
    metadata-table deltacommit are caught up."""
    root = tmp_path / "t"
    writer = kv.create(root, table_type, 9)  # type: ignore[arg-type]

    def rows(keys: range, value: int) -> pa.Table:
        return pa.concat_tables(
            kv.rows([f"k{k}" for k in keys if k % 2 == p], value, f"p{p}") for p in (0, 1)
        )

    writer.upsert(rows(range(0, 40), 0))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    schedule_indexing(storage, lock, ["record_index"])
    job = INDEXING_SERVICE.prepare(storage, lock, None, {})
    results = [job.run_task(t, f"{i}-0-{i}") for i, t in enumerate(job.tasks)]
    writer.upsert(rows(range(40, 60), 1))  # new keys, while the index is built ...
    writer.delete(rows(range(45, 55), 0).select(["key", "part"]))  # ... some of them deleted again
    job.commit(results, None)
    check_metadata_table(root, "after the index caught up")
    assert Table.open(str(root)).read().num_rows == 50


def test_the_metadata_table_is_not_compacted_while_an_index_is_built(tmp_path: Path) -> None:
    """The built records arrive later under the indexing's older time; a metadata-table compaction in
    between would apply the newer deletes to a base file the built records then land on top of (the chaos
    campaign found deleted keys in the record index). The compaction waits until the indexing completed."""
    root = tmp_path / "t"
    writer = kv.create(root, "MERGE_ON_READ", 8)
    keys = [f"k{n:03d}" for n in range(30)]
    writer.upsert(kv.rows(keys, 0))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    schedule_indexing(storage, lock, ["record_index"])
    job = INDEXING_SERVICE.prepare(storage, lock, None, {})
    results = [job.run_task(t, f"{i}-0-{i}") for i, t in enumerate(job.tasks)]
    for n in range(3):  # deletes while the index is built ...
        writer.delete(kv.keys([keys[n]]))
    assert compact_if_due(storage, lock, max_delta_commits=1) is None  # ... and no compaction meanwhile
    job.commit(results, None)
    assert compact_if_due(storage, lock, max_delta_commits=1) is not None
    check_metadata_table(root, "after the index and the compaction")


class _RacedDefs(Storage):
    """Local disk where another writer rewrites a file right after this one read it (and its version)."""

    def __init__(self, root: Path, other: bytes) -> None:
        super().__init__(LocalBackend(), str(root), str(root))
        self._other: bytes | None = other

    def read_versioned(self, path: str) -> tuple[bytes, str]:
        found = super().read_versioned(path)
        if self._other is not None:
            other, self._other = self._other, None
            super().create(path, other, overwrite=True)
        return found


def test_a_stale_update_of_the_index_definitions_fails_and_changes_nothing(tmp_path: Path) -> None:
    defs = ".hoodie/.index_defs/index.json"
    config = TableConfig(new_table_properties("t", "MERGE_ON_READ", 8, ["id"], ["p"])).updated(
        {"hoodie.table.index.defs.path": defs}
    )
    ours = {"indexDefinitions": {"expr_index_a": {"indexName": "expr_index_a"}}}
    theirs = {"indexDefinitions": {"expr_index_a": {}, "expr_index_b": {}}}
    Storage.for_uri(str(tmp_path)).create(defs, json.dumps(ours).encode("utf-8"))
    other = json.dumps(theirs).encode("utf-8")
    storage = _RacedDefs(tmp_path, other)
    with pytest.raises(VersionConflict):
        _drop_index_definitions(storage, config, ["expr_index_a"])
    assert storage.read(defs) == other  # the other writer's definitions stand
    _drop_index_definitions(storage, config, ["expr_index_a"])  # read again: applied to theirs
    assert json.loads(storage.read(defs)) == {"indexDefinitions": {"expr_index_b": {}}}
