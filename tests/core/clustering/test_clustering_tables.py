"""Clustering end to end in one process (the same task code the Spark job runs), on copies of fixture tables
with history and on generated tables of every version, COW and MOR, partitioned or not: nothing a reader
sees changes (ours and hudi-rs, full rows), the clustered partitions hold fewer file groups as planned, the
new files are sorted, and the timeline holds a correct replacecommit."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clustering.execute import NothingToCluster, cluster_in_process
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from support.clustering_checks import capture, check_after, live_groups
from support.metadata_checks import check_metadata_table

#: No writer beside these tables: plans take every candidate, as with allow-update writers (the default,
#: reject, leaves out the groups of the last writer commits: every group of a table just written).
ALLOW = UpdateStrategy.ALLOW
NO_WRITERS = ClusteringConfig(update_strategy=ALLOW)

FIXTURES = [
    # (fixture id, sort column)
    ("apache-hudi/hudi-v6-table-mor:hudi-v6-table-mor", "name"),
    ("apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor", "ts"),
    ("hudi-rs/sample_table_cow_v9_txns_simple_nometa:v9_txns_simple_nometa", "amount"),
    ("hudi-rs/sample_table_mor_avro_v9_txns_simple_nometa:v9_txns_simple_nometa", "txn_datetime"),
    ("hudi-rs/sample_table_cow_v9_txns_complex_nometa:v9_txns_complex_nometa", "merchant_name"),
    ("hudi-rs/sample_table_mor_avro_v9_txns_complex_nometa:v9_txns_complex_nometa", "account_id"),
    ("hudi-rs/sample_table_cow_v9_txns_nonpart_nometa:v9_txns_nonpart_nometa", "txn_ts"),
    ("hudi-rs/sample_table_mor_avro_v9_txns_nonpart_nometa:v9_txns_nonpart_nometa", "currency"),
    # Metadata tables with column and partition stats, the record index and secondary indexes.
    ("hudi-rs/sample_table_cow_v9_txns_simple_meta:v9_txns_simple_meta", "amount"),
    ("hudi-rs/sample_table_mor_avro_v9_txns_nonpart_meta:v9_txns_nonpart_meta", "txn_ts"),
    ("apache-hudi/hudi-v9-table:hudi-v9-table", "name"),
    # Without meta fields: written without them, keys from the record key fields.
    (
        "hudi-rs/sample_table_cow_v8_simplekeygen_hivestyle_no_metafields:"
        "v8_simplekeygen_hivestyle_no_metafields",
        "longField",
    ),
]


@pytest.mark.fixtures
@pytest.mark.parametrize(("table_id", "sort_column"), FIXTURES, ids=[f[0].split(":")[0] for f in FIXTURES])
def test_fixture_tables_cluster_without_changing_any_read(
    table_id: str,
    sort_column: str,
    fixture_root: Callable[[str], Path],
    table_copy: Callable[[Path], Path],
) -> None:
    root = table_copy(fixture_root(table_id))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    with_mdt = check_metadata_table(root, f"{table_id} before") is not None
    before = capture(root)
    groups_before = live_groups(Table.open(str(root)))
    # Sorted: every partition is clustered, a single small file too (rewritten sorted).
    config = ClusteringConfig(sort_columns=(sort_column,), update_strategy=ALLOW)
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    assert scheduled.instant is not None, scheduled.reason
    assert scheduled.plan is not None
    assert {s.partition_path for s in scheduled.plan.slices} == set(groups_before)
    result = cluster_in_process(storage, lock)
    md = check_after(
        root, before, scheduled.instant.time, scheduled.plan, table_id, sort_columns=(sort_column,)
    )
    assert result.file_groups_replaced == sum(len(ids) for ids in groups_before.values())
    # Every partition now holds one (small) file group: nothing left to cluster without sorting.
    assert all(len(ids) == 1 for ids in live_groups(Table.open(str(root))).values())
    assert len(md.write_stats) == len(groups_before)
    mdt = check_metadata_table(root, f"{table_id} after")
    if with_mdt:
        assert mdt is not None
        assert mdt.timeline.is_completed(scheduled.instant.time)
    again = schedule_clustering(storage, lock, config=NO_WRITERS, respect_trigger=False)
    assert again.instant is None
    with pytest.raises(NothingToCluster, match="no pending clustering"):
        cluster_in_process(storage, lock)


GENERATED = [
    pytest.param(6, "MERGE_ON_READ", 3, id="v6-mor-partitioned"),
    pytest.param(6, "COPY_ON_WRITE", 0, id="v6-cow-unpartitioned"),
    pytest.param(8, "MERGE_ON_READ", 0, id="v8-mor-unpartitioned"),
    pytest.param(8, "COPY_ON_WRITE", 2, id="v8-cow-partitioned"),
    pytest.param(9, "MERGE_ON_READ", 2, id="v9-mor-partitioned"),
    pytest.param(9, "COPY_ON_WRITE", 0, id="v9-cow-unpartitioned"),
]


@pytest.mark.parametrize(("version", "table_type", "partitions"), GENERATED)
def test_generated_tables_cluster_without_changing_any_read(
    tmp_path: Path, version: int, table_type: str, partitions: int
) -> None:
    root = tmp_path / "t"
    generate_table(
        str(root),
        GenerateSpec(
            table_type=table_type,  # type: ignore[arg-type]
            table_version=version,
            rows=300,
            commits=4,
            update_fraction=0.3,
            delete_fraction=0.1,
            partitions=partitions,
            seed=13,
        ),
    )
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture(root)
    groups_before = live_groups(Table.open(str(root)))
    scheduled = schedule_clustering(storage, lock, config=NO_WRITERS)  # 4 commits: the trigger fires
    assert scheduled.trigger is not None
    assert scheduled.trigger.fire
    assert scheduled.instant is not None, scheduled.reason
    assert scheduled.plan is not None
    cluster_in_process(storage, lock)
    check_after(root, before, scheduled.instant.time, scheduled.plan, f"generated v{version} {table_type}")
    # Partitions of several small slices now hold one file group; a lone slice is not rewritten unsorted.
    after = live_groups(Table.open(str(root)))
    for partition, ids in groups_before.items():
        assert len(after[partition]) == (1 if len(ids) > 1 else len(ids))


def test_a_group_splits_into_its_output_file_groups_sorted_across_them(tmp_path: Path) -> None:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=9, rows=400, commits=3, partitions=0, seed=4))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture(root)
    table = Table.open(str(root))
    total = sum(s.base_file_size for s in table.file_slices())
    # Three output files for the one group of the table.
    config = ClusteringConfig(
        sort_columns=("rider", "ts"), target_file_max_bytes=total // 3 + 1, update_strategy=ALLOW
    )
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    assert scheduled.instant is not None
    assert scheduled.plan is not None
    assert [g.num_output_file_groups for g in scheduled.plan.input_groups] == [3]
    result = cluster_in_process(storage, lock)
    md = check_after(
        root, before, scheduled.instant.time, scheduled.plan, "split", sort_columns=("rider", "ts")
    )
    assert len(md.write_stats) == 3
    counts = [s.num_writes or 0 for s in md.write_stats]
    assert max(counts) - min(counts) <= 1  # about equal row counts
    # The files follow each other in sort order: the table read file by file is sorted as a whole.
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = []
    for stat in md.write_stats:
        assert stat.path is not None
        parts.append(pq.read_table(root / stat.path, columns=["rider", "ts"]))
    whole = pa.concat_tables(parts)
    firsts = sorted(parts, key=lambda t: (t.column("rider")[0].as_py(), t.column("ts")[0].as_py()))
    ordered = pa.concat_tables(firsts)
    assert ordered.sort_by([("rider", "ascending"), ("ts", "ascending")]).equals(ordered)
    assert whole.num_rows == result.records_written
