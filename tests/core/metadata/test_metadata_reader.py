"""Reading the metadata table of real Hudi tables (v6, v8, v9): records of every partition, and the file
listing, checked against the storage listing and against hudi-rs, which lists v8+ tables through it."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hoodie.errors import CorruptLogBlock, CorruptMetadataTable, HoodieError, TableNotFound
from hoodie.metadata import MetadataTable, RecordType
from hoodie.metadata.reader import compare_listings, storage_listing
from hoodie.metadata.records import ALL_PARTITIONS_KEY, combine, file_list, is_deleted
from hoodie.table import Table
from hoodie.timeline.instant import State
from support.hudi_oracle import HudiOracle, OracleFileSlices, Query

EXPECTED_TYPE = {
    "files": {RecordType.ALL_PARTITIONS, RecordType.FILE_LIST},
    "column_stats": {RecordType.COLUMN_STATS},
    "partition_stats": {RecordType.PARTITION_STATS},
    "record_index": {RecordType.RECORD_INDEX},
    "bloom_filters": {RecordType.BLOOM_FILTER},
}

if TYPE_CHECKING:  # the root conftest (imported by name, another folder's conftest may shadow it)
    from support.fixture_tables import FixtureCache, FixtureTable


def open_mdt(root: Path) -> tuple[Table, MetadataTable]:
    table = Table.open(str(root))
    return table, MetadataTable.load(table.storage, table.config, table.timeline)


def test_every_partition_reads_and_the_listing_matches_storage(
    metadata_fixture_table: FixtureTable, fixture_cache: FixtureCache
) -> None:
    table, mdt = open_mdt(fixture_cache.root(metadata_fixture_table))
    listing = mdt.file_listing()
    assert listing, "the files partition lists no partition"
    assert compare_listings(listing, storage_listing(table.storage, table.timeline)) == []
    files = {name for names in listing.values() for name in names}
    for partition in table.config.metadata_partitions:
        records = mdt.read_partition(partition)
        kinds = Counter(RecordType(r["type"]) for r in records.values())
        expected = EXPECTED_TYPE.get(partition, {RecordType.SECONDARY_INDEX})
        assert set(kinds) <= expected, (partition, kinds)
        if partition == "files":
            assert kinds[RecordType.ALL_PARTITIONS] == 1
            assert kinds[RecordType.FILE_LIST] == len(listing)
        if partition == "column_stats":
            # every live file's statistics name a file the listing holds
            for record in records.values():
                stats = record["ColumnStatsMetadata"]
                if not is_deleted(record):
                    assert stats["fileName"] in files, stats["fileName"]
        if partition == "record_index":
            ids = {name.split("_")[0] for name in files if not name.startswith(".")} | {
                name[1:].split("_")[0] for name in files if name.startswith(".")
            }
            for key, record in records.items():
                info = record["recordIndexMetadata"]
                if info.get("fileId"):
                    assert info["fileId"] in ids or any(i.startswith(info["fileId"]) for i in ids), key


def test_listing_agrees_with_hudi_rs(
    metadata_fixture_table: FixtureTable, fixture_cache: FixtureCache, hudi_oracle: HudiOracle
) -> None:
    """hudi-rs lists through the metadata table's files partition: every file of its slices is ours."""
    root = fixture_cache.root(metadata_fixture_table)
    _, mdt = open_mdt(root)
    listing = mdt.file_listing()
    answer = hudi_oracle.one(str(root), Query.file_slices())
    if not isinstance(answer, OracleFileSlices):
        pytest.skip(f"hudi-rs cannot list this table: {answer}")
    assert answer.slices
    for partition, _file_id, base, logs in answer.slices:
        names = listing.get(partition)
        assert names is not None, partition
        for name in [base, *logs] if base else list(logs):
            assert name in names, (partition, name)


def test_a_deltacommit_whose_data_write_failed_does_not_count(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    """Hudi completes the metadata deltacommit before the data commit: if the writer dies in between, the
    data instant stays inflight and the files it wrote must not be listed."""
    root = tmp_path / "t"
    shutil.copytree(fixture_root("apache-hudi/hudi-v8-table:hudi-v8-table"), root)
    table, mdt = open_mdt(root)
    before = mdt.file_listing()
    last = table.timeline.completed_writes()[-1]
    (root / ".hoodie" / table.timeline.file_of(last.time, State.COMPLETED).split(".hoodie/", 1)[-1]).unlink()
    table, mdt = open_mdt(root)
    assert not table.timeline.is_completed(last.time)
    after = mdt.file_listing()
    written = {n for names in before.values() for n in names} - {n for names in after.values() for n in names}
    assert written
    assert all(last.time in name for name in written)


def test_damaged_log_block_is_a_clear_error(fixture_root: Callable[[str], Path], tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(fixture_root("apache-hudi/hudi-v8-table:hudi-v8-table"), root)
    logs = sorted((root / ".hoodie/metadata/files").glob(".files-*.log.*"))
    victim = max(logs, key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(64)  # the framing stays, the HFile inside does not
    victim.write_bytes(bytes(data))
    _, mdt = open_mdt(root)
    with pytest.raises((CorruptLogBlock, CorruptMetadataTable)) as info:
        mdt.file_listing()
    assert victim.name in str(info.value)


def test_a_table_without_a_metadata_table(fixture_root: Callable[[str], Path]) -> None:
    table = Table.open(str(fixture_root("hudi-rs/sample_table_cow_v8_nonpartitioned:v8_nonpartitioned")))
    with pytest.raises(TableNotFound):
        MetadataTable.load(table.storage, table.config, table.timeline)


def test_the_metadata_table_cannot_be_opened_as_a_data_table(fixture_root: Callable[[str], Path]) -> None:
    root = fixture_root("apache-hudi/hudi-v8-table:hudi-v8-table")
    with pytest.raises(HoodieError, match="metadata table: open its data table"):
        Table.open(str(root / ".hoodie" / "metadata"))


# -- combining versions of a key --------------------------------------------------------------------------


def files_record(entries: dict[str, tuple[int, bool]]) -> dict:  # type: ignore[type-arg]
    return {
        "key": "p",
        "type": RecordType.FILE_LIST,
        "filesystemMetadata": {n: {"size": s, "isDeleted": d} for n, (s, d) in entries.items()},
    }


def test_file_lists_combine() -> None:
    first = combine(None, files_record({"a": (10, False), "b": (5, False)}))
    second = combine(first, files_record({"a": (7, False), "b": (0, True), "c": (3, False)}))
    assert file_list(second) == {"a": 10, "c": 3}  # larger size kept, deleted file gone
    assert file_list(combine(None, files_record({"x": (1, True)}))) == {}


def stats_record(low: object, high: object, count: int, deleted: bool = False) -> dict:  # type: ignore[type-arg]
    return {
        "key": "k",
        "type": RecordType.COLUMN_STATS,
        "ColumnStatsMetadata": {
            "fileName": "f",
            "columnName": "c",
            "minValue": {"value": low},
            "maxValue": {"value": high},
            "valueCount": count,
            "nullCount": 0,
            "totalSize": 1,
            "totalUncompressedSize": 1,
            "isDeleted": deleted,
        },
    }


def test_statistics_combine() -> None:
    merged = combine(stats_record(3, 9, 2), stats_record(1, 5, 4))
    stats = merged["ColumnStatsMetadata"]
    assert (stats["minValue"]["value"], stats["maxValue"]["value"], stats["valueCount"]) == (1, 9, 6)
    assert is_deleted(combine(stats_record(3, 9, 2), stats_record(None, None, 0, deleted=True)))
    # a column whose type changed: the newer range stands
    changed = combine(stats_record(3, 9, 2), stats_record("a", "z", 1))["ColumnStatsMetadata"]
    assert (changed["minValue"]["value"], changed["maxValue"]["value"]) == ("a", "z")


def test_records_of_another_type_under_one_key_are_refused() -> None:
    with pytest.raises(CorruptMetadataTable):
        combine(files_record({}), stats_record(1, 2, 1))


def test_all_partitions_key_name() -> None:
    assert ALL_PARTITIONS_KEY == "__all_partitions__"


def test_reads_listing_through_the_metadata_table_equal_storage_listing_reads(
    metadata_fixture_table: FixtureTable, fixture_cache: FixtureCache
) -> None:
    root = fixture_cache.root(metadata_fixture_table)
    by_storage = Table.open(str(root))
    by_metadata = Table.open(str(root), metadata_listing=True)
    assert by_metadata.refresh().metadata_listing
    keys = ["_hoodie_partition_path", "_hoodie_record_key"]
    if not by_storage.config.populate_meta_fields:
        pytest.skip("no meta columns to key the rows by")
    a = by_storage.read().sort_by([(k, "ascending") for k in keys])
    b = by_metadata.read().sort_by([(k, "ascending") for k in keys])
    assert a.equals(b)
    assert sorted(s.base_file_path or "" for s in by_storage.file_slices()) == sorted(
        s.base_file_path or "" for s in by_metadata.file_slices()
    )
