"""Generated tables with pending table-service instants of every kind hoodied runs, for the daemon tests.

A MOR table gets three pending instants: two compactions (one per partition, through the partition-regex
strategy) and a clean of the slices an earlier compaction superseded. A COW table gets three too: two
clusterings (one per partition) and a clean of older file versions.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from hoodie import Table
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UPDATES_STRATEGY, UpdateStrategy
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.strategy import CompactionConfig
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, TripGenerator, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import Instant
from support.compare import assert_same_rows

IGNORED = ("_hoodie_file_name",)


@dataclass(frozen=True)
class PendingTable:
    root: Path
    kind: str  # MERGE_ON_READ | COPY_ON_WRITE
    pending: tuple[Instant, ...]


def _partitions(root: Path) -> list[str]:
    return sorted({s.partition_path for s in Table.open(str(root)).file_slices()})


def _upsert(root: Path, seed: int, n: int) -> None:
    live = Table.open(str(root)).read(columns=["uuid", "city"])
    live = live.take(list(range(0, live.num_rows, max(1, live.num_rows // n)))[:n])  # every partition
    rows = TripGenerator(seed, 2).rows(live.column("uuid").to_pylist(), live.column("city").to_pylist())
    TableWriter.open(str(root)).upsert(rows)


def mor_table(root: Path, version: int, seed: int) -> PendingTable:
    """Two pending compactions and a pending clean."""
    generate_table(
        str(root),
        GenerateSpec(
            table_version=version, rows=300, commits=2, partitions=2, seed=seed, update_fraction=0.4
        ),
    )
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    assert schedule_compaction(storage, lock).instant is not None
    compact_in_process(storage, lock)
    _upsert(root, seed + 100, 80)
    pending = []
    clean = schedule_clean(
        storage, lock, config=CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=1)
    )
    assert clean.instant is not None, clean.reason
    pending.append(clean.instant)
    for partition in _partitions(root):
        config = CompactionConfig.from_config(
            {
                "hoodie.compaction.strategy": "org.apache.hudi.table.action.compact.strategy."
                "PartitionRegexBasedCompactionStrategy",
                "hoodie.compaction.partition.path.regex": f"^{partition}$",
            }
        )
        result = schedule_compaction(storage, lock, config=config)
        assert result.instant is not None, result.reason
        pending.append(result.instant)
    return PendingTable(root, "MERGE_ON_READ", tuple(pending))


def cow_table(root: Path, version: int, seed: int) -> PendingTable:
    """Two pending clusterings and a pending clean."""
    generate_table(
        str(root),
        GenerateSpec(
            table_type="COPY_ON_WRITE",
            table_version=version,
            rows=300,
            commits=4,
            partitions=2,
            seed=seed,
            update_fraction=0.3,
        ),
    )
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    pending = []
    clean = schedule_clean(
        storage,
        lock,
        config=CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1),
    )
    assert clean.instant is not None, clean.reason
    pending.append(clean.instant)
    _upsert(root, seed + 200, 40)  # files of a new version after the clean's plan
    for partition in _partitions(root):
        config = ClusteringConfig.from_config(
            {
                "hoodie.clustering.plan.strategy.partition.selected": partition,
                "hoodie.clustering.plan.strategy.sort.columns": "fare",
                # No writer beside the table: every candidate (the default, reject, leaves the groups of
                # the last writer commits alone: every group of a table just written).
                UPDATES_STRATEGY: UpdateStrategy.ALLOW.value,
            }
        )
        result = schedule_clustering(storage, lock, config=config, respect_trigger=False)
        assert result.instant is not None, result.reason
        pending.append(result.instant)
    return PendingTable(root, "COPY_ON_WRITE", tuple(pending))


def snapshot(root: Path) -> pa.Table:
    return Table.open(str(root)).read()


def assert_same_snapshot(before: pa.Table, after: pa.Table, context: str) -> None:
    key = ["_hoodie_partition_path", "_hoodie_record_key"]
    assert_same_rows(after, before, key, ignore_columns=IGNORED, context=context)
