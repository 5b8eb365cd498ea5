"""Tables that repeat a record key: every service keeps exactly the rows readers see, judged by hudi-rs.

Hudi's ``insert`` and ``bulk_insert`` look nothing up and de-duplicate nothing, so a table may hold a key
twice in one base file, in two file groups of a partition, and in two partitions. Readers return every copy;
a log update or delete meets the first copy of its key in a base file (Hudi's file-group readers, 0.x and
1.x; hudi-rs does the same). Each table here repeats keys all three ways, has log files (MOR) or merged
rewrites (COW) touching repeated keys, and goes through compaction, clean, clustering (plain, and sorted into
several files) and indexing, judged after each by hudi-rs's snapshot, read-optimized query and time travel
(:func:`service_checks.judge`).

A global record index cannot place a key that lives in two file groups: building one on such a table is
refused (as Hudi's indexer refuses it), nothing is written and the table reads the same. Where the repeats
stay inside one file group, the index is built with one entry per key, and a clustering that splits the
group into several files keeps a key's copies together so that the entry stays true.
"""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie import Table
from hoodie.clustering.plan import ClusteringConfig
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.errors import RecordIndexConflict
from hoodie.indexing.execute import run_indexing, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import TRIPS_SCHEMA, GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter, WriteConfig
from support.metadata_checks import check_metadata_table
from support.service_checks import Reads, judge, read_all, run_service

pytestmark = pytest.mark.slow

TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]
#: Every version, table type and log format once by default; every combination in the campaign.
#: No writer beside these tables: plans take every candidate, as with allow-update writers.
ALLOW = UpdateStrategy.ALLOW
NO_WRITERS = ClusteringConfig(update_strategy=ALLOW)
SHORT = {"v6-mor-avro", "v8-cow", "v9-mor-parquet"}
CASES = [
    pytest.param(
        version,
        table_type,
        log_format,
        id=f"v{version}-{kind}",
        marks=() if f"v{version}-{kind}" in SHORT else (pytest.mark.campaign,),
    )
    for version in (6, 8, 9)
    for table_type, log_format, kind in (
        ("COPY_ON_WRITE", "avro", "cow"),
        ("MERGE_ON_READ", "avro", "mor-avro"),
        ("MERGE_ON_READ", "parquet", "mor-parquet"),
    )
]
CITIES = ["amsterdam", "lagos"]


def _create(
    root: Path, version: int, table_type: TableType, log_format: Literal["avro", "parquet"]
) -> TableWriter:
    return TableWriter.create(
        str(root),
        name="repeats",
        table_type=table_type,
        table_version=version,
        schema=TRIPS_SCHEMA,
        record_key_fields=("uuid",),
        partition_fields=("city",),
        ordering_field="ts",
        config=WriteConfig(log_format=log_format),
    )


def _in(gen: TripGenerator, keys: list[str], cities: list[str]) -> pa.Table:
    return gen.rows(keys, cities)


def write_repeating_table(
    root: Path, version: int, table_type: TableType, log_format: Literal["avro", "parquet"]
) -> None:
    """A table repeating keys inside a base file, across file groups and across partitions, with updates and
    deletes of repeated keys after (log files on MOR)."""
    writer = _create(root, version, table_type, log_format)
    gen = TripGenerator(17, 2)
    keys = gen.keys(40)
    city = [CITIES[i % 2] for i in range(40)]
    # bulk_insert: keys 0-7 twice in the batch (twice in one base file).
    first = pa.concat_tables([_in(gen, keys, city), _in(gen, keys[:8], city[:8])])
    writer.bulk_insert(first)
    # bulk_insert again: keys 4-13 once more, in new file groups of their partitions.
    writer.bulk_insert(_in(gen, keys[4:14], city[4:14]))
    # insert: keys 30-35 in the other partition (a small file takes them, appended).
    writer.insert(_in(gen, keys[30:36], [CITIES[(i + 1) % 2] for i in range(30, 36)]))
    # upserts and deletes of repeated keys: each file group holding a key is updated (on MOR: log files).
    writer.upsert(_in(gen, [keys[i] for i in (0, 5, 9, 31, 20)], [city[i] for i in (0, 5, 9, 31, 20)]))
    gone = [2, 6, 12, 33]
    writer.delete(pa.table({"uuid": [keys[i] for i in gone], "city": [city[i] for i in gone]}))
    writer.upsert(_in(gen, [keys[i] for i in (1, 4)], [city[i] for i in (1, 4)]))


def assert_repeats_every_way(root: Path) -> None:
    """The table holds a key twice in a base file, in two file groups of a partition, in two partitions."""
    table = Table.open(str(root))
    rows = table.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"])
    keys = rows.column("_hoodie_record_key").to_pylist()
    parts = rows.column("_hoodie_partition_path").to_pylist()
    groups = [n.split("_")[0] for n in rows.column("_hoodie_file_name").to_pylist()]
    assert len(keys) > len(set(keys))
    in_file = any(
        n > 1
        for s in table.file_slices(read_optimized=True)
        if s.base_file_path
        for n in Counter(
            pq.read_table(str(root / s.base_file_path), columns=["_hoodie_record_key"]).column(0).to_pylist()
        ).values()
    )
    assert in_file, "no key twice in one base file"
    by_key: dict[str, set[tuple[str, str]]] = {}
    for k, p, g in zip(keys, parts, groups, strict=True):
        by_key.setdefault(k, set()).add((p, g))
    assert any(
        len({g for p, g in where}) > 1 and len({p for p, _ in where}) == 1 for where in by_key.values()
    )
    assert any(len({p for p, _ in where}) > 1 for where in by_key.values()), "no key in two partitions"


def _start(root: Path) -> Reads:
    table = Table.open(str(root))
    return read_all(root, [w.time for w in table.timeline.completed_writes()])


@pytest.mark.parametrize(("version", "table_type", "log_format"), CASES)
def test_every_service_keeps_every_copy(
    tmp_path: Path, version: int, table_type: TableType, log_format: Literal["avro", "parquet"]
) -> None:
    root = tmp_path / "t"
    write_repeating_table(root, version, table_type, log_format)
    assert_repeats_every_way(root)
    sorted_copy = tmp_path / "sorted"
    shutil.copytree(root, sorted_copy)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    reads = _start(root)
    ran = []
    for service in ("compaction", "clean", "clustering"):
        outcome, reason = run_service(
            service, storage, lock, clustering=NO_WRITERS if service == "clustering" else None
        )
        ran.append((service, outcome, reason))
        if outcome == "done":
            reads = judge(root, reads, service, f"v{version} {table_type} {service}")
    done = {s for s, o, _ in ran if o == "done"}
    expected = {"clean", "clustering"} | ({"compaction"} if table_type == "MERGE_ON_READ" else set())
    assert done == expected, ran
    # Indexes: statistics and bloom filters are built; a global record index is refused.
    outcome, reason = run_service("indexing", storage, lock, indexes=["column_stats", "bloom_filters"])
    assert outcome == "done", reason
    reads = judge(root, reads, "indexing", f"v{version} {table_type} indexing")
    check_metadata_table(root, "statistics and bloom filters")
    scheduled = schedule_indexing(storage, lock, ["record_index"])
    assert scheduled.instant is not None, scheduled.reason
    with pytest.raises(RecordIndexConflict, match="would be in file groups") as refused:
        run_indexing(storage, lock, scheduled.instant.time)
    assert "hoodied index --drop record_index" in str(refused.value)
    judge(root, reads, "indexing", f"v{version} {table_type} refused record index")
    check_metadata_table(root, "after the refused record index")

    # Sorted clustering into several files per group, on a copy of the table as written.
    storage = Storage.for_uri(str(sorted_copy))
    reads = _start(sorted_copy)
    config = ClusteringConfig(sort_columns=("ts",), target_file_max_bytes=4096, update_strategy=ALLOW)
    outcome, reason = run_service("clustering", storage, FileSystemLock(storage), clustering=config)
    assert outcome == "done", reason
    judge(sorted_copy, reads, "clustering", f"v{version} {table_type} sorted clustering")
    table = Table.open(str(sorted_copy))
    assert all(not s.log_files for s in table.file_slices())
    rows = table.read(columns=["_hoodie_record_key", "_hoodie_partition_path", "_hoodie_file_name"])
    homes: dict[tuple[str, str], set[str]] = {}
    for k, p, f in zip(*(rows.column(i).to_pylist() for i in range(3)), strict=True):
        homes.setdefault((p, k), set()).add(f)
    assert len({f for fs in homes.values() for f in fs}) > len(CITIES), "clustered into several files"
    assert all(len(fs) == 1 for fs in homes.values()), "a key's copies were split across new file groups"


@pytest.mark.parametrize("version", [6, 8, 9])
def test_a_record_index_holds_one_entry_for_a_key_repeated_in_its_file_group(
    tmp_path: Path, version: int
) -> None:
    root = tmp_path / "t"
    writer = _create(root, version, "MERGE_ON_READ", "avro")
    gen = TripGenerator(23, 2)
    keys = gen.keys(30)
    city = [CITIES[i % 2] for i in range(30)]
    writer.bulk_insert(pa.concat_tables([_in(gen, keys, city), _in(gen, keys[:10], city[:10])]))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    reads = _start(root)
    outcome, reason = run_service("indexing", storage, lock, indexes=["record_index"])
    assert outcome == "done", reason
    mdt = check_metadata_table(root, "record index of a table repeating keys in one file group")
    assert mdt is not None
    assert len(mdt.read_partition("record_index")) == 30
    reads = judge(root, reads, "indexing", "record index")
    # Clustering into several files per partition keeps each key's copies in one: the index stays true.
    config = ClusteringConfig(sort_columns=("fare",), target_file_max_bytes=2048, update_strategy=ALLOW)
    outcome, reason = run_service("clustering", storage, lock, clustering=config)
    assert outcome == "done", reason
    judge(root, reads, "clustering", "clustering with a record index")
    mdt = check_metadata_table(root, "record index after clustering")
    assert mdt is not None
    assert len(mdt.read_partition("record_index")) == 30
    names = {n for n in Table.open(str(root)).read(columns=["_hoodie_file_name"]).column(0).to_pylist()}
    assert len(names) > len(CITIES), "clustered into several files"


def test_the_generator_writes_repeating_tables(tmp_path: Path) -> None:
    for operation in ("insert", "bulk_insert"):
        root = tmp_path / operation
        results = generate_table(
            str(root), GenerateSpec(rows=200, commits=3, partitions=2, operation=operation, seed=3)
        )
        assert {r.metadata.operation_type for r in results} == {operation.upper(), "DELETE"}
        keys = Table.open(str(root)).read(columns=["_hoodie_record_key"]).column(0).to_pylist()
        assert len(keys) > len(set(keys)), f"{operation}: no repeated key"
        with pytest.raises(ValueError, match="operation"):
            GenerateSpec(operation="merge")  # type: ignore[arg-type]
