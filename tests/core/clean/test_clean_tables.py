"""Clean on copies of the fixture tables with history (written by Hudi 0.14 to 1.2): hudi-rs reads the latest
snapshot and every retained instant exactly as before, the planned files are gone, storage shrank by what
the plan said; the metadata table (when there is one) lists exactly what is left and drops the statistics
of the deleted files; a metadata table with an index hoodied cannot maintain is refused untouched."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.file_group.file_group import FileGroupId
from hoodie.lock import FileSystemLock
from hoodie.metadata import MetadataTable
from hoodie.metadata.records import is_deleted
from hoodie.metadata_table import MetadataTableNotSupported
from hoodie.storage import Storage
from hoodie.timeline.metadata import CleanerPlan
from support.clean_checks import capture_reads, check_clean, data_bytes
from support.metadata_checks import check_metadata_table

pytestmark = pytest.mark.fixtures

WITH_HISTORY = [
    "apache-hudi/hudi-v6-table-mor:hudi-v6-table-mor",
    "apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor",
    "apache-hudi/hudi-v8-table-mor:hudi-v8-table-maintenance",
    "apache-hudi/hudi-v6-table-payload-default:hudi-v6-table-payload-default",
    "hudi-rs/sample_table_cow_v9_txns_simple_nometa:v9_txns_simple_nometa",
    "hudi-rs/sample_table_cow_v9_txns_complex_nometa:v9_txns_complex_nometa",
    "hudi-rs/sample_table_mor_avro_v9_txns_simple_nometa:v9_txns_simple_nometa",
    "hudi-rs/sample_table_mor_avro_v9_txns_nonpart_nometa:v9_txns_nonpart_nometa",
    "hudi-rs/sample_table_cow_v9_txns_simple_meta:v9_txns_simple_meta",
    "hudi-rs/sample_table_mor_avro_v9_txns_simple_meta:v9_txns_simple_meta",
]


def _check_deleted_files_left_the_index(root: Path, plan: CleanerPlan) -> None:
    """Every file the clean deleted has its column statistics deleted too (tombstones or no entry)."""
    table = Table.open(str(root))
    if "column_stats" not in table.config.metadata_partitions:
        return
    stats = MetadataTable.load(table.storage, table.config, table.timeline).read_partition("column_stats")
    live = {(r["ColumnStatsMetadata"]["fileName"]) for r in stats.values() if not is_deleted(r)}
    for partition, infos in plan.file_paths_to_be_deleted_per_partition.items():
        for info in infos:
            name = (info.file_path or "").rsplit("/", 1)[-1]
            assert name not in live, f"{partition}/{name} was cleaned but keeps live column statistics"


def _replaced(root: Path) -> set[FileGroupId]:
    return Table.open(str(root)).replaced_file_groups()


@pytest.mark.parametrize("table_id", WITH_HISTORY)
@pytest.mark.parametrize(
    "config",
    [
        CleanConfig(commits_retained=2),
        CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1),
    ],
    ids=["commits-2", "versions-1"],
)
def test_clean_keeps_every_retained_read(
    table_id: str,
    config: CleanConfig,
    fixture_root: Callable[[str], Path],
    table_copy: Callable[[Path], Path],
) -> None:
    root = table_copy(fixture_root(table_id))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture_reads(root)
    replaced = _replaced(root)
    scheduled = schedule_clean(storage, lock, config=config)
    if scheduled.instant is None:
        # Only where nothing is older than what the policy retains.
        assert "nothing to clean" in scheduled.reason
        return
    assert scheduled.plan is not None
    result = clean_in_process(storage, lock)
    check_clean(root, before, scheduled.instant.time, scheduled.plan, f"{table_id} {config.policy.value}")
    mdt = check_metadata_table(root, f"{table_id} {config.policy.value}")
    if mdt is not None:
        assert mdt.timeline.is_completed(scheduled.instant.time)
        _check_deleted_files_left_the_index(root, scheduled.plan)
    assert before.data_bytes - data_bytes(root) == scheduled.bytes_to_delete == result.bytes_deleted
    # Replaced file groups older than the earliest retained commit are gone entirely.
    groups = Table.open(str(root)).file_groups()
    ectr = scheduled.plan.earliest_instant_to_retain
    if config.policy is CleanPolicy.KEEP_LATEST_FILE_VERSIONS:
        assert not (replaced & set(groups)), f"{table_id}: replaced file groups left after the clean"
    elif ectr is not None:
        table = Table.open(str(root))
        old = {
            g
            for i in table.timeline.completed_writes()
            if i.action == "replacecommit" and i.time < ectr.timestamp
            for p, ids in table.commit_metadata(i).partition_to_replace_file_ids.items()
            for g in (FileGroupId(p, f) for f in ids)
        }
        assert not (old & set(groups)), f"{table_id}: replaced file groups before {ectr.timestamp} left"


def test_the_v8_maintenance_table_cleans_its_replaced_groups_and_old_slices(
    fixture_root: Callable[[str], Path], table_copy: Callable[[Path], Path]
) -> None:
    """Hudi cleaned this table once with 5 commits retained; retaining 2 cleans what Hudi kept for them."""
    root = table_copy(fixture_root("apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor"))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    replaced = _replaced(root)
    assert replaced, "the fixture has a clustering replacecommit"
    scheduled = schedule_clean(storage, lock, config=CleanConfig(commits_retained=2))
    assert scheduled.plan is not None
    planned = {
        info.file_path.rsplit("/", 1)[-1]
        for infos in scheduled.plan.file_paths_to_be_deleted_per_partition.values()
        for info in infos
        if info.file_path
    }
    for gid in replaced:
        assert any(name.startswith(gid.file_id) or f".{gid.file_id}_" in name for name in planned), gid


def test_a_metadata_table_with_an_expression_index_is_refused_untouched(
    fixture_root: Callable[[str], Path], table_copy: Callable[[Path], Path]
) -> None:
    """hoodied does not maintain expression indexes: a clean would leave them stale, so it is refused."""
    root = table_copy(fixture_root("apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor"))
    props = root / ".hoodie" / "hoodie.properties"
    text = props.read_text()
    props.write_text(
        text.replace(
            "hoodie.table.metadata.partitions=column_stats,files,partition_stats",
            "hoodie.table.metadata.partitions=column_stats,expr_index_upper_name,files,partition_stats",
        )
    )
    storage = Storage.for_uri(str(root))
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*"))
    with pytest.raises(MetadataTableNotSupported, match="expr_index_upper_name"):
        schedule_clean(storage, FileSystemLock(storage), config=CleanConfig(commits_retained=1))
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == files
