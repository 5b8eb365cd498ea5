"""A table service killed (SIGKILL) around its metadata-table write, on a table whose metadata table has
column statistics and the record index: right after the kill, readers (ours through the metadata table,
hudi-rs) see what they saw before; the next run finishes; the metadata table ends with exactly one
deltacommit for the instant and agrees with storage. A rolled-back write takes its metadata out too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import pending_cleans
from hoodie.clustering.execute import cluster_in_process, pending_clusterings
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.failpoints import ENV as FAILPOINTS
from hoodie.indexing.execute import run_indexing, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.metadata import MetadataTable
from hoodie.metadata_table import MetadataTableNotSupported
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import DELTA_COMMIT, State
from hoodie.timeline.metadata import decode_cleaner_plan
from support.hudi_oracle import HudiOracle, OracleRows, Query
from support.metadata_checks import check_metadata_table

SCRIPT = """
import sys
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, schedule_clean
from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage

storage = Storage.for_uri(sys.argv[1])
lock = FileSystemLock(storage, expire_seconds=2)
service = sys.argv[2]
if service == "compaction":
    schedule_compaction(storage, lock, config=CompactionConfig(strategy=Strategy.UNBOUNDED))
    compact_in_process(storage, lock)
elif service == "clustering":
    config = ClusteringConfig(sort_columns=("rider",), update_strategy=UpdateStrategy.ALLOW)
    schedule_clustering(storage, lock, config=config, respect_trigger=False)
    cluster_in_process(storage, lock)
else:
    schedule_clean(storage, lock, config=CleanConfig(commits_retained=1))
    clean_in_process(storage, lock)
"""

CASES = [
    ("compaction", "compaction.during_commit"),
    ("compaction", "compaction.after_metadata_commit"),
    ("compaction", "compaction.after_commit"),
    ("clustering", "clustering.after_metadata_commit"),
    ("clean", "clean.after_metadata_commit"),
]


def _indexed_table(root: Path) -> Storage:
    generate_table(
        str(root),
        GenerateSpec(table_version=8, rows=300, commits=4, update_fraction=0.4, partitions=2, seed=9),
    )
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    schedule_indexing(storage, lock, ["column_stats", "record_index"])
    run_indexing(storage, lock)
    return storage


def _hudi_rs_keys(root: Path) -> list[str]:
    answer = HudiOracle(root.parent / f"oracle-{len(list(root.parent.iterdir()))}").one(
        str(root), Query.snapshot()
    )
    assert isinstance(answer, OracleRows), answer
    return sorted(answer.table.column("_hoodie_record_key").to_pylist())


@pytest.mark.parametrize(("service", "point"), CASES, ids=[p for _, p in CASES])
def test_a_kill_around_the_metadata_write_leaves_both_tables_consistent(
    tmp_path: Path, service: str, point: str
) -> None:
    root = tmp_path / "t"
    storage = _indexed_table(root)
    if service == "clean":
        # Old slices to clean: compact, then write on.
        lock = FileSystemLock(storage)
        schedule_compaction(storage, lock, config=CompactionConfig(strategy=Strategy.UNBOUNDED))
        compact_in_process(storage, lock)
        rows = Table.open(str(root)).read()
        data = rows.drop([c for c in rows.column_names if c.startswith("_hoodie_")])
        TableWriter.open(str(root)).upsert(data.slice(0, 10))
    before_ours = Table.open(str(root)).read()
    before_theirs = _hudi_rs_keys(root)
    env = {k: v for k, v in os.environ.items() if k != FAILPOINTS}
    env[FAILPOINTS] = point
    killed = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(root), service],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    # Right after the kill: the metadata table lists what storage holds for completed writes, and both
    # readers see the same rows as before.
    table = Table.open(str(root))
    cleaning = frozenset(
        (info.file_path or "").rsplit("/", 1)[-1]
        for instant in pending_cleans(table)
        for infos in decode_cleaner_plan(
            (root / table.timeline.file_of(instant.time, State.REQUESTED)).read_bytes()
        ).file_paths_to_be_deleted_per_partition.values()
        for info in infos
    )
    check_metadata_table(root, f"killed at {point}", being_cleaned=cleaning)
    after = Table.open(str(root)).read()
    assert sorted(after.column("_hoodie_record_key").to_pylist()) == sorted(
        before_ours.column("_hoodie_record_key").to_pylist()
    )
    assert _hudi_rs_keys(root) == before_theirs
    # The next run finishes; the metadata table holds one deltacommit for the instant.
    lock = FileSystemLock(storage, acquire_timeout=30)
    table = Table.open(str(root))
    pending = [
        i
        for i in table.timeline.pending()
        if i.action in ("compaction", "clustering", "replacecommit", "clean")
    ]
    if pending:
        T = pending[0].time
        if service == "compaction":
            compact_in_process(storage, lock)
        elif service == "clustering":
            assert pending_clusterings(table)
            cluster_in_process(storage, lock)
        else:
            clean_in_process(storage, lock)
    else:
        T = table.timeline.completed()[-1].time
    table = Table.open(str(root))
    assert table.timeline.is_completed(T)
    mdt = MetadataTable.load(table.storage, table.config, table.timeline)
    own = [i for i in mdt.timeline if i.time == T]
    assert [(i.action, i.state) for i in own] == [(DELTA_COMMIT, State.COMPLETED)]
    check_metadata_table(root, f"re-run after {point}")
    assert _hudi_rs_keys(root) == before_theirs


def test_a_rolled_back_write_takes_its_metadata_out(tmp_path: Path) -> None:
    """A writer that died after its metadata deltacommit: the rollback of its instant removes that too."""
    from hoodie.write.failed_writes import rollback_failed_writes
    from hoodie.write.heartbeat import HeartbeatConfig

    root = tmp_path / "t"
    storage = _indexed_table(root)
    rows = Table.open(str(root)).read()
    data = rows.drop([c for c in rows.column_names if c.startswith("_hoodie_")])
    TableWriter.open(str(root)).upsert(data.slice(0, 4))
    table = Table.open(str(root))
    last = table.timeline.completed_writes()[-1]
    # Make it a write that died between the two completions: its data instant back to inflight.
    (root / table.timeline.file_of(last.time, State.COMPLETED)).unlink()
    table = Table.open(str(root))
    assert not table.timeline.is_completed(last.time)
    check_metadata_table(root, "dead write")  # its files are not listed while it is pending
    rolled = rollback_failed_writes(storage, FileSystemLock(storage), HeartbeatConfig(1, 1), now_ms=2**62)
    assert [r.rolled_back for r in rolled] == [last.time]
    table = Table.open(str(root))
    assert table.timeline.get(last.time) is None
    mdt = MetadataTable.load(table.storage, table.config, table.timeline)
    assert mdt.timeline.get(last.time) is None
    check_metadata_table(root, "after the rollback")


def test_the_writer_refuses_a_table_with_a_secondary_index_untouched(
    fixture_root: Callable[[str], Path], table_copy: Callable[[Path], Path]
) -> None:
    """A write changes record values, which a secondary index would have to follow: refused up front."""
    root = table_copy(fixture_root("hudi-rs/sample_table_cow_v9_txns_simple_meta:v9_txns_simple_meta"))
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    rows = Table.open(str(root)).read()
    data = rows.drop([c for c in rows.column_names if c.startswith("_hoodie_")])
    with pytest.raises(MetadataTableNotSupported, match="secondary_index_merchant_idx"):
        TableWriter.open(str(root)).upsert(data.slice(0, 2))
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == files
