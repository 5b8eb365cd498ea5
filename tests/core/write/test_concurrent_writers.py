"""Concurrent writers on one table: optimistic concurrency keeps every committed record.

Both tests use real writers on a real table: one deterministic interleaving in a single process (a second
writer commits while the first is about to complete), and several OS processes racing for the same file group.
"""

from __future__ import annotations

import multiprocessing
import random
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.errors import WriteConflict
from hoodie.testing.generate import TRIPS_SCHEMA, TripGenerator
from hoodie.testing.table_writer import CommitResult, TableWriter
from hoodie.timeline.instant import State

WORKERS = 3
BATCHES = 4
ROWS = 20


def _create(root: Path, table_type: str = "COPY_ON_WRITE") -> TableWriter:
    return TableWriter.create(
        str(root),
        name="t",
        table_type=table_type,  # type: ignore[arg-type]
        table_version=8,
        schema=TRIPS_SCHEMA,
        record_key_fields=("uuid",),
        ordering_field="ts",
    )


def _batch(prefix: str, gen: TripGenerator, n: int = ROWS) -> pa.Table:
    rows = gen.rows([f"{prefix}-{i:03d}" for i in range(n)])
    return rows.set_column(0, "uuid", pa.array([f"{prefix}-{i:03d}" for i in range(n)], pa.string()))


class _Interleaved(TableWriter):
    """Lets another writer commit just before this one checks for conflicts (under the same lock)."""

    other: TableWriter
    other_batch: pa.Table
    other_result: CommitResult | None = None

    def _check_conflicts(self, view: Table, instant_time: str, metadata: object) -> None:  # type: ignore[override]
        if self.other_result is None:
            self.other_result = self.other.insert(self.other_batch)
        super()._check_conflicts(view, instant_time, metadata)  # type: ignore[arg-type]


@pytest.mark.parametrize("table_type", ["COPY_ON_WRITE", "MERGE_ON_READ"])
def test_a_write_overlapping_a_newer_commit_is_refused_and_loses_nothing(
    tmp_path: Path, table_type: str
) -> None:
    root = tmp_path / "t"
    gen = TripGenerator(11, 1)
    first = _create(root, table_type)
    first.insert(_batch("base", gen))
    writer = _Interleaved(first.storage, lock=first.lock)
    writer.other = TableWriter(first.storage, lock=first.lock)
    writer.other_batch = _batch("other", gen)
    mine = _batch("base", gen, 5)  # updates of the one file group, which the other writer also rewrites
    with pytest.raises(WriteConflict, match="conflicts with"):
        writer.upsert(mine)
    table = Table.open(str(root))
    pending = [i for i in table.timeline if i.state is not State.COMPLETED]
    assert len(pending) == 1, "the refused write stays inflight"
    keys = set(table.read().column("uuid").to_pylist())
    assert keys == {f"base-{i:03d}" for i in range(ROWS)} | {f"other-{i:03d}" for i in range(ROWS)}
    # A retry on a fresh view commits.
    retry = TableWriter(first.storage, lock=first.lock).upsert(mine)
    assert retry.instant.state is State.COMPLETED
    assert Table.open(str(root)).read().num_rows == 2 * ROWS


def _worker(root: str, worker: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    writer = TableWriter.open(root, rng=random.Random(worker))
    gen = TripGenerator(100 + worker, 1)
    committed: list[str] = []
    conflicts = 0
    for b in range(BATCHES):
        batch = _batch(f"w{worker}-b{b}", gen)
        for _ in range(50):
            try:
                committed.append(writer.insert(batch).instant_time)
                break
            except WriteConflict:
                conflicts += 1
        else:
            out.put((worker, committed, conflicts, "gave up"))
            return
    out.put((worker, committed, conflicts, None))


@pytest.mark.slow
def test_processes_racing_on_one_file_group_keep_every_record(tmp_path: Path) -> None:
    root = tmp_path / "t"
    gen = TripGenerator(12, 1)
    _create(root).insert(_batch("seed", gen, 5))  # one small file: every insert rewrites it
    ctx = multiprocessing.get_context("forkserver")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(str(root), w, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    reports = [out.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    assert all(r[3] is None for r in reports), reports
    print("conflicts retried per worker:", [r[2] for r in reports])
    instants = [t for r in reports for t in r[1]]
    assert len(instants) == len(set(instants)) == WORKERS * BATCHES
    table = Table.open(str(root))
    completed = {i.time for i in table.timeline.completed_writes()}
    assert set(instants) <= completed
    keys = table.read().column("uuid").to_pylist()
    expected = {f"seed-{i:03d}" for i in range(5)} | {
        f"w{w}-b{b}-{i:03d}" for w in range(WORKERS) for b in range(BATCHES) for i in range(ROWS)
    }
    assert len(keys) == len(expected)
    assert set(keys) == expected
