"""A small table with a writer still at work on it, for the tests of table services beside writers.

One partition (unpartitioned table) of ``cold`` file groups (one ``bulk_insert`` each, never written again)
and one ``hot`` group whose keys the writer keeps updating (:meth:`LiveTable.upsert_hot`); the writer's
expected state (fare by key) is tracked here, apart from any reader, and :meth:`LiveTable.assert_reads` judges
our reader and hudi-rs against it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pyarrow as pa

from hoodie import Table
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.file_group.file_group import FileGroupId
from hoodie.testing.generate import TRIPS_SCHEMA, TripGenerator
from hoodie.testing.table_writer import CommitResult, TableWriter, WriteConfig
from support.hudi_oracle import HudiOracle, OracleRows, Query

TableType = Literal["COPY_ON_WRITE", "MERGE_ON_READ"]


@dataclass
class LiveTable:
    root: Path
    writer: TableWriter
    gen: TripGenerator
    #: The file group of each cold ``bulk_insert``, and the hot group.
    cold: list[FileGroupId] = field(default_factory=list)
    hot: FileGroupId | None = None
    hot_keys: list[str] = field(default_factory=list)
    #: What the writer wrote: the fare of every live key.
    expected: dict[str, float] = field(default_factory=dict)

    def bulk_insert(self, n: int) -> tuple[FileGroupId, list[str]]:
        keys = self.gen.keys(n)
        result = self.writer.bulk_insert(self._record(self.gen.rows(keys)))
        (stat,) = result.metadata.write_stats
        assert stat.file_id is not None
        return FileGroupId(stat.partition_path or "", stat.file_id), keys

    def upsert_hot(self, inserts: int = 0) -> CommitResult:
        """Update every hot key (later event times, new fares), and insert ``inserts`` new keys."""
        batch = self.gen.rows(self.hot_keys)
        if inserts:
            batch = pa.concat_tables([batch, self.gen.rows(self.gen.keys(inserts))])
        return self.writer.upsert(self._record(batch))

    def update(self, keys: list[str]) -> CommitResult:
        return self.writer.upsert(self._record(self.gen.rows(keys)))

    def keys_of(self, group: FileGroupId) -> list[str]:
        table = Table.open(str(self.root))
        (file_slice,) = [s for s in table.file_slices() if s.group == group]
        rows = table.read_file_slice(file_slice)
        assert rows is not None
        return [str(k) for k in rows.column("uuid").to_pylist()]

    def _record(self, batch: pa.Table) -> pa.Table:
        self.expected.update(
            zip(batch.column("uuid").to_pylist(), batch.column("fare").to_pylist(), strict=True)
        )
        return batch

    def assert_reads(self, oracle_dir: Path, context: str) -> None:
        """Our reader and hudi-rs return exactly the writer's records, with its latest fares."""
        ours = Table.open(str(self.root)).read(columns=["uuid", "fare"])
        got = dict(zip(ours.column("uuid").to_pylist(), ours.column("fare").to_pylist(), strict=True))
        assert ours.num_rows == len(self.expected), f"{context}: ours holds {ours.num_rows} rows"
        assert got == self.expected, f"{context}: ours"
        snap = HudiOracle(oracle_dir).run(self.root, [Query.snapshot()])[0]
        assert isinstance(snap, OracleRows), snap
        theirs = dict(
            zip(snap.table.column("uuid").to_pylist(), snap.table.column("fare").to_pylist(), strict=True)
        )
        assert snap.table.num_rows == len(self.expected), f"{context}: hudi-rs holds {snap.table.num_rows}"
        assert theirs == self.expected, f"{context}: hudi-rs"


def live_table(
    root: Path,
    *,
    table_type: TableType,
    version: int,
    strategy: UpdateStrategy,
    cold_groups: int = 3,
    rows: int = 20,
    hot_commits: int = 5,
    seed: int = 5,
) -> LiveTable:
    """``cold_groups`` groups of ``rows`` records, then the hot group, then ``hot_commits`` updates of it by a
    writer with the update ``strategy``."""
    writer = TableWriter.create(
        str(root),
        name="trips",
        table_type=table_type,
        table_version=version,
        schema=TRIPS_SCHEMA,
        record_key_fields=("uuid",),
        ordering_field="ts",
        config=WriteConfig(update_strategy=strategy),
        rng=random.Random(seed),
    )
    live = LiveTable(root, writer, TripGenerator(seed, 1))
    for _ in range(cold_groups):
        live.cold.append(live.bulk_insert(rows)[0])
    live.hot, live.hot_keys = live.bulk_insert(rows)
    for _ in range(hot_commits):
        live.upsert_hot()
    return live


__all__ = ["LiveTable", "live_table"]
