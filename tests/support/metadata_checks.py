"""What a table with a metadata table must satisfy after any commit of ours: its file listing equals the
storage listing, every partition reads, the column statistics cover every live base file, the partition
statistics bound them, and the record index places every key in the file group that holds it."""

from __future__ import annotations

from pathlib import Path

from hoodie import Table
from hoodie.metadata import MetadataTable
from hoodie.metadata.keys import column_stats_key
from hoodie.metadata.reader import compare_listings, storage_listing
from hoodie.metadata.records import is_deleted
from hoodie.metadata.stats import parquet_column_stats
from hoodie.metadata.updates import record_location
from hoodie.testing.generate import GenerateSpec, generate_table


def _value(wrapper: object) -> object:
    if isinstance(wrapper, tuple):
        wrapper = wrapper[1]
    return wrapper.get("value") if isinstance(wrapper, dict) else wrapper


def check_metadata_table(
    root: Path, context: str, *, being_cleaned: frozenset[str] = frozenset()
) -> MetadataTable | None:
    """Check the metadata table of the table at ``root`` (None when it has none); returns it.
    ``being_cleaned``: names of files a pending clean already deleted (listed until it completes)."""
    table = Table.open(str(root))
    if not table.config.metadata_partitions:
        return None
    mdt = MetadataTable.load(table.storage, table.config, table.timeline)
    listing = mdt.file_listing()
    problems = [
        p
        for p in compare_listings(listing, storage_listing(table.storage, table.timeline))
        if not (
            p.endswith("listed by the metadata table, not on storage")
            and p.split("/")[-1].split(":")[0] in being_cleaned
        )
    ]
    assert not problems, f"{context}: metadata listing differs from storage: {problems[:5]}"
    partitions = table.config.metadata_partitions
    records = {p: mdt.read_partition(p) for p in partitions}
    live_bases = [s for s in table.file_slices(read_optimized=True) if s.base_file is not None]
    if "column_stats" in records:
        stats = records["column_stats"]
        columns = {r["ColumnStatsMetadata"]["columnName"] for r in stats.values() if not is_deleted(r)}
        for s in live_bases:
            assert s.base_file is not None
            assert s.base_file_path is not None
            # every indexed top-level column the file has statistics for (Hudi skips nested ones)
            present = parquet_column_stats(table.storage, s.base_file_path, sorted(columns))
            for column in present:
                key = column_stats_key(column, s.partition_path, s.base_file.file_name)
                record = stats.get(key)
                assert record is not None, f"{context}: no column stats of {column} for {s.base_file_path}"
                assert not is_deleted(record), f"{context}: stats of live {s.base_file_path} deleted"
        if "partition_stats" in records:
            bounds = {
                (r["ColumnStatsMetadata"]["fileName"], r["ColumnStatsMetadata"]["columnName"]): r[
                    "ColumnStatsMetadata"
                ]
                for r in records["partition_stats"].values()
            }
            for s in live_bases:
                assert s.base_file is not None
                assert s.base_file_path is not None
                for column in parquet_column_stats(table.storage, s.base_file_path, sorted(columns)):
                    own = stats[column_stats_key(column, s.partition_path, s.base_file.file_name)]
                    low, high = (
                        _value(own["ColumnStatsMetadata"]["minValue"]),
                        _value(own["ColumnStatsMetadata"]["maxValue"]),
                    )
                    bound = bounds.get((s.partition_path or ".", column)) or bounds.get(
                        (s.partition_path, column)
                    )
                    if bound is None or low is None or high is None:
                        continue
                    lo, hi = _value(bound["minValue"]), _value(bound["maxValue"])
                    if isinstance(lo, bytes):
                        continue  # a v9 decimal: unscaled two's complement, not ordered as bytes
                    if type(lo) is type(low) and lo is not None:
                        assert lo <= low, f"{context}: partition min of {column} above a file's ({s})"
                    if type(hi) is type(high) and hi is not None:
                        assert hi >= high, f"{context}: partition max of {column} below a file's ({s})"
    if "record_index" in records:
        index = records["record_index"]
        rows = table.read(columns=["_hoodie_record_key", "_hoodie_file_name"])
        keys = rows.column("_hoodie_record_key").to_pylist()
        stale = set(index) - set(keys)
        assert not stale, (
            f"{context}: the record index holds keys no longer in the table: {sorted(stale)[:5]}"
        )
        for key, file_name in zip(keys, rows.column("_hoodie_file_name").to_pylist(), strict=True):
            record = index.get(key)
            assert record is not None, f"{context}: record index misses {key!r}"
            info = record["recordIndexMetadata"]
            file_id = file_name.removeprefix(".").split("_")[0]
            expected = record_location(file_id)
            got = {k: info.get(k) for k in expected}
            assert got == expected, f"{context}: record index places {key!r} in {got}, it is in {file_id}"
    return mdt


def generate_small_table(root: Path, version: int, partitions: int = 2, *, seed: int = 5) -> None:
    """A small generated MOR table (300 rows, 3 commits with updates and deletes) to index."""
    spec = GenerateSpec(
        table_version=version,
        rows=300,
        commits=3,
        update_fraction=0.3,
        delete_fraction=0.1,
        partitions=partitions,
        seed=seed,
    )
    generate_table(str(root), spec)
