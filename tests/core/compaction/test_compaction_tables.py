"""Compaction end to end in one process (the same task code the Spark job runs), on copies of every MOR
fixture table and on generated tables of every version: nothing a reader sees changes, hudi-rs agrees, and
the timeline holds a correct compaction commit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.compaction.execute import NothingToCompact, compact_in_process
from hoodie.compaction.plan import blocked_file_groups, schedule_compaction
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.errors import UnsupportedTable
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.metadata import decode_compaction_plan
from support.compaction_checks import capture, check_after
from support.fixture_tables import FixtureTable
from support.metadata_checks import check_metadata_table

UNBOUNDED = CompactionConfig(strategy=Strategy.UNBOUNDED)


def _timeline_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in (root / ".hoodie").rglob("*") if p.is_file())


def _compactable_slices(table: Table) -> int:
    blocked = blocked_file_groups(table)
    replaced = table.replaced_file_groups()
    count = 0
    for gid, group in table.file_groups().items():
        latest = group.latest
        if latest is not None and latest.log_files and gid not in blocked and gid not in replaced:
            count += 1
    return count


@pytest.mark.fixtures
def test_every_mor_fixture_table_compacts(
    supported_mor_table: FixtureTable, table_copy: Callable[[FixtureTable | Path], Path]
) -> None:
    supported_table = supported_mor_table
    root = table_copy(supported_table)
    table = Table.open(str(root))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    files = _timeline_files(root)
    before = capture(root)
    with_mdt = check_metadata_table(root, f"{supported_table.id} before") is not None
    expected_ops = _compactable_slices(table)
    if expected_ops == 0:
        result = schedule_compaction(storage, lock, config=UNBOUNDED)
        assert result.instant is None, f"{supported_table.id}: planned without slices with log files"
        assert "no file slice with log files" in result.reason
        assert _timeline_files(root) == files
        return
    scheduled = schedule_compaction(storage, lock, config=UNBOUNDED)
    assert scheduled.instant is not None, scheduled.reason
    assert scheduled.plan is not None
    assert len(scheduled.plan.operations) == expected_ops
    requested = Table.open(str(root)).timeline.file_of(scheduled.instant.time)
    assert decode_compaction_plan((root / requested).read_bytes()) == scheduled.plan
    result = compact_in_process(storage, lock, scheduled.instant.time)
    md = check_after(root, before, scheduled.instant.time, supported_table.id)
    assert len(md.write_stats) == expected_ops
    assert result.records_written == sum(s.num_writes or 0 for s in md.write_stats)
    mdt = check_metadata_table(root, f"{supported_table.id} after")
    if with_mdt:
        # The metadata table took the compaction as a deltacommit of the same instant.
        assert mdt is not None
        assert mdt.timeline.is_completed(scheduled.instant.time)
    # Compacted: a second plan has nothing left to do.
    assert schedule_compaction(storage, lock, config=UNBOUNDED).instant is None


GENERATED = [
    pytest.param(6, 3, "avro", id="v6-partitioned-avro"),
    pytest.param(6, 0, "parquet", id="v6-unpartitioned-parquet"),
    pytest.param(8, 2, "avro", id="v8-partitioned-avro"),
    pytest.param(8, 0, "parquet", id="v8-unpartitioned-parquet"),
    pytest.param(9, 2, "parquet", id="v9-partitioned-parquet"),
    pytest.param(9, 0, "avro", id="v9-unpartitioned-avro"),
]


@pytest.mark.parametrize(("version", "partitions", "log_format"), GENERATED)
def test_generated_tables_compact_without_changing_any_read(
    tmp_path: Path, version: int, partitions: int, log_format: str
) -> None:
    root = tmp_path / "t"
    spec = GenerateSpec(
        table_version=version,
        rows=400,
        commits=4,
        update_fraction=0.3,
        delete_fraction=0.1,
        partitions=partitions,
        log_format=log_format,  # type: ignore[arg-type]
        seed=11,
    )
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture(root)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None, scheduled.reason
    compact_in_process(storage, lock)
    md = check_after(root, before, scheduled.instant.time, f"generated v{version}")
    # Hudi's numbers: every record written is a base record kept or updated, or a new one.
    for stat in md.write_stats:
        assert stat.num_writes is not None
        assert stat.num_update_writes is not None
        assert stat.total_log_records
        assert stat.total_log_blocks
        assert stat.total_corrupt_log_block == 0
    with pytest.raises(NothingToCompact):
        compact_in_process(storage, lock)


def test_cow_tables_are_refused(tmp_path: Path) -> None:
    root = tmp_path / "cow"
    generate_table(str(root), GenerateSpec(table_type="COPY_ON_WRITE", rows=50, commits=2, partitions=0))
    storage = Storage.for_uri(str(root))
    with pytest.raises(UnsupportedTable, match="COPY_ON_WRITE"):
        schedule_compaction(storage, FileSystemLock(storage))


def test_a_second_plan_leaves_groups_of_a_pending_compaction_alone(tmp_path: Path) -> None:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=300, commits=3, partitions=2, seed=5))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    first = schedule_compaction(storage, lock)
    assert first.plan is not None
    second = schedule_compaction(storage, lock)
    assert second.instant is None
    assert "held by pending compaction" in second.reason
