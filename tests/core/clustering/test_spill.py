"""hoodie.clustering.spill and the clustering task on top of it: the merged runs give exactly the order one
stable in-memory sort of the group gives (linear and curves, ties, nulls, empty and single-row runs), the
merge never holds more rows than its budget, the spill files go whatever happens, and a task writes the files
(rows, order, repeated keys, counts) the in-memory rule writes."""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
from itertools import pairwise
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie import Table
from hoodie.clustering.execute import (
    ClusteringTask,
    _slice_of,
    commit_clustering,
    prepare_clustering,
    run_clustering_task,
)
from hoodie.clustering.layout import LayoutConfig, LayoutStrategy, row_positions, sort_indices
from hoodie.clustering.output_files import group_keys, keep_repeats_together
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.spill import (
    KEY_HASH,
    ROW,
    RUN,
    SortedRuns,
    SpillSettings,
    internal_columns,
    key_hashes,
)
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.lock import FileSystemLock
from hoodie.read.conform import conform_table
from hoodie.read.merge import drop_deleted_rows
from hoodie.storage import Storage
from hoodie.table import META_COLUMNS
from hoodie.testing.generate import GenerateSpec, generate_table

LINEAR, ZORDER, HILBERT = LayoutStrategy.LINEAR, LayoutStrategy.ZORDER, LayoutStrategy.HILBERT


def _slices(seed: int, sizes: list[int]) -> list[pa.Table]:
    """Slices with few distinct sort values (many ties), nulls, and keys repeated across slices."""
    rng = random.Random(seed)
    out: list[pa.Table] = []
    for n in sizes:
        out.append(
            pa.table(
                {
                    "_hoodie_record_key": pa.array([f"k{rng.randrange(40)}" for _ in range(n)], pa.string()),
                    "a": pa.array([rng.choice([None, 1, 2, 3, 5]) for _ in range(n)], pa.int64()),
                    "b": pa.array([rng.choice([None, "x", "y", "zz", ""]) for _ in range(n)], pa.string()),
                    "c": pa.array([rng.random() for _ in range(n)], pa.float64()),
                    "seq": pa.array([f"{len(out)}-{i}" for i in range(n)], pa.string()),
                }
            )
        )
    return out


def _reference(parts: list[pa.Table], columns: tuple[str, ...], layout: LayoutStrategy) -> pa.Table:
    whole = pa.concat_tables(parts)
    if not columns:
        return whole
    return whole.take(sort_indices(whole, columns, layout, row_positions(whole.column_names, META_COLUMNS)))


ORDERS = [
    pytest.param((), LINEAR, id="unsorted"),
    pytest.param(("a",), LINEAR, id="linear-1"),
    pytest.param(("a", "b"), LINEAR, id="linear-2"),
    pytest.param(("b",), ZORDER, id="curve-1"),
    pytest.param(("a", "c"), ZORDER, id="zorder"),
    pytest.param(("a", "b", "c"), HILBERT, id="hilbert"),
]


@pytest.mark.parametrize(("columns", "layout"), ORDERS)
@pytest.mark.parametrize(("batch_rows", "budget_rows"), [(3, 10), (7, 1000), (1, 1)])
def test_the_merge_gives_the_order_of_one_stable_sort(
    tmp_path: Path, columns: tuple[str, ...], layout: LayoutStrategy, batch_rows: int, budget_rows: int
) -> None:
    parts = _slices(1, [50, 0, 1, 37, 64, 2])
    settings = SpillSettings(str(tmp_path), batch_rows=batch_rows, budget_rows=budget_rows)
    with SortedRuns(columns, layout, settings) as runs:
        for part in parts:
            runs.add(part, part.column("_hoodie_record_key"))
        assert len(runs.runs) == 5  # the empty slice adds no run
        batches = list(runs.merged())
        merged = pa.concat_tables(batches)
        # Every merged batch is at most what the heads hold, and they hold at most the budget (at least a
        # spill batch a run) and one more spill batch a run.
        k = len(runs.runs)
        assert runs.peak_rows <= max(budget_rows, k * batch_rows) + k * batch_rows
        assert max(b.num_rows for b in batches) <= max(budget_rows, k * batch_rows) + k * batch_rows
    expected = _reference(parts, columns, layout)
    assert merged.drop_columns(internal_columns(merged.column_names)).equals(expected)
    assert sorted(os.listdir(tmp_path)) == []


def test_the_merge_reads_only_the_columns_asked_with_the_run_and_row_of_each(tmp_path: Path) -> None:
    parts = _slices(2, [20, 30])
    with SortedRuns(("a",), LINEAR, SpillSettings(str(tmp_path), batch_rows=4, budget_rows=8)) as runs:
        for part in parts:
            runs.add(part, part.column("_hoodie_record_key"))
        merged = pa.concat_tables(list(runs.merged(columns=[KEY_HASH])))
        assert merged.column_names == [KEY_HASH, "a", RUN, ROW]
        # take_rows finds rows back by (run, row), in the order asked.
        wanted = np.array([40, 3, 17, 0])
        runs_of = merged.column(RUN).to_numpy()[wanted].astype(np.int64)
        rows_of = merged.column(ROW).to_numpy()[wanted].astype(np.int64)
        taken = pa.concat_tables(list(runs.take_rows(runs_of, rows_of, 3)))
        full = pa.concat_tables(list(runs.merged()))
        assert taken.column("seq").to_pylist() == [full.column("seq")[int(i)].as_py() for i in wanted]


def test_spill_files_are_removed_when_adding_fails(tmp_path: Path) -> None:
    parts = _slices(3, [10])

    def spill_then_fail() -> None:
        with SortedRuns((), LINEAR, SpillSettings(str(tmp_path))) as runs:
            runs.add(parts[0], parts[0].column("_hoodie_record_key"))
            assert os.listdir(runs.directory)
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        spill_then_fail()
    assert os.listdir(tmp_path) == []


def test_equal_keys_hash_equal_and_repeats_are_found() -> None:
    keys = pa.array(["", "a", "ab", "abcdefgh", "abcdefghi", "a", "ü" * 20, "abcdefghi"])
    h = key_hashes(keys)
    assert h[1] == h[5]
    assert h[4] == h[7]
    assert len(set(h.tolist())) == 6
    assert np.array_equal(key_hashes(keys.slice(4, 3)), h[4:7])
    with SortedRuns() as runs:
        runs.add(pa.table({"k": keys.slice(0, 4)}), keys.slice(0, 4))
        runs.add(pa.table({"k": keys.slice(4)}), keys.slice(4))
        assert sorted(runs.repeated_hashes().tolist()) == sorted({int(h[1]), int(h[4])})


# -- the task ----------------------------------------------------------------------------------------------


def _expected_files(task: ClusteringTask) -> tuple[list[pa.Table], bool]:
    """The files the in-memory rule writes for ``task`` (rows, order), without ``_hoodie_file_name``, and
    whether a repeated key moved rows to an earlier file."""
    storage = task.storage.open()
    table = Table.load(storage, task.config)
    schema = table.read_schema()
    assert schema is not None
    parts = []
    for info in task.group.slices:
        merged = table.merge_file_slice(_slice_of(storage, info), as_of=task.instant_time, strict=True).table
        if merged is not None:
            parts.append(conform_table(drop_deleted_rows(merged), schema).select(schema.names))
    rows = pa.concat_tables(parts, promote_options="permissive")
    keys = group_keys(rows, True, table.config.record_key_fields)
    if task.sort_columns:
        order = sort_indices(
            rows, task.sort_columns, task.layout, row_positions(rows.column_names, META_COLUMNS)
        )
        rows, keys = rows.take(order), keys.take(order)
    n_files = min(max(1, task.group.num_output_file_groups or 1), rows.num_rows)
    bounds = np.linspace(0, rows.num_rows, n_files + 1).round().astype(np.int64)
    cut = bounds
    rows, keys, bounds = keep_repeats_together(rows, keys, bounds)
    files = [
        rows.slice(int(lo), int(hi - lo)).drop_columns(["_hoodie_file_name"]) for lo, hi in pairwise(bounds)
    ]
    return files, not np.array_equal(cut, bounds)


@pytest.fixture(scope="module")
def repeating_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One partition of a MOR table whose keys repeat across file groups and inside base files, with deletes
    in log files (and so slices that merge to fewer rows)."""
    root = tmp_path_factory.mktemp("spill") / "t"
    spec = GenerateSpec(
        table_version=8,
        rows=300,
        commits=4,
        partitions=0,
        seed=11,
        operation="bulk_insert",
        delete_fraction=0.2,
    )
    generate_table(str(root), spec)
    return root


@pytest.mark.parametrize(
    ("columns", "layout", "files"),
    [
        pytest.param((), LINEAR, 3, id="unsorted-3"),
        pytest.param(("rider", "ts"), LINEAR, 1, id="linear-1"),
        pytest.param(("rider", "ts"), LINEAR, 4, id="linear-4"),
        pytest.param(("driver",), ZORDER, 3, id="curve-one-column-3"),
        pytest.param(("ts", "fare"), ZORDER, 5, id="zorder-5"),
        pytest.param(("ts", "fare", "begin_lat"), HILBERT, 2, id="hilbert-2"),
    ],
)
def test_a_task_writes_the_files_of_the_in_memory_rule(
    repeating_table: Path, tmp_path: Path, columns: tuple[str, ...], layout: LayoutStrategy, files: int
) -> None:
    root = tmp_path / "t"
    shutil.copytree(repeating_table, root)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    total = sum(s.base_file_size + sum(s.log_file_sizes) for s in Table.open(str(root)).file_slices())
    config = ClusteringConfig(
        sort_columns=columns,
        layout=LayoutConfig(layout),
        target_file_max_bytes=total // files + 1,
        max_bytes_per_group=1 << 40,
        small_file_limit=1 << 40,
        update_strategy=UpdateStrategy.ALLOW,  # no writer beside: every candidate
    )
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    assert scheduled.plan is not None, scheduled.reason
    prepared = prepare_clustering(storage, lock)
    # The whole group as one task (unsorted, it would split into runs of slices: hoodie.clustering.split).
    (group,) = scheduled.plan.input_groups
    task = dataclasses.replace(prepared.tasks[0], group=group)
    assert len(task.group.slices) > 2
    expected, moved = _expected_files(task)
    assert moved == (files > 1)  # copies of a key move to an earlier file
    spill = tmp_path / "spill"
    spill.mkdir()
    result = run_clustering_task(task, "0-0-0", spill=SpillSettings(str(spill), batch_rows=5, budget_rows=16))
    assert os.listdir(spill) == []
    written = [pq.read_table(root / (s.path or "")) for s in result.stats]
    assert [t.num_rows for t in written] == [t.num_rows for t in expected]
    assert [s.num_writes for s in result.stats] == [t.num_rows for t in expected]
    assert result.input_rows == sum(t.num_rows for t in expected)
    for got, want, stat in zip(written, expected, result.stats, strict=True):
        assert set(got.column("_hoodie_file_name").to_pylist()) == {(stat.path or "").rpartition("/")[2]}
        assert got.drop_columns(["_hoodie_file_name"]).equals(want.cast(got.schema.remove(4)))
    commit_clustering(storage, lock, dataclasses.replace(prepared, tasks=(task,)), [result])


def test_a_failing_task_leaves_no_spill_file(repeating_table: Path, tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(repeating_table, root)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    config = ClusteringConfig(
        sort_columns=("rider",),
        small_file_limit=1 << 40,
        max_bytes_per_group=1 << 40,
        update_strategy=UpdateStrategy.ALLOW,
    )
    assert schedule_clustering(storage, lock, config=config, respect_trigger=False).plan is not None
    (task,) = prepare_clustering(storage, lock).tasks
    # The writer schema names a column of a type the rows cannot take: writing the first file fails.
    bad = task.writer_schema.replace('"name":"rider","type":["null","string"]', '"name":"rider","type":"int"')
    assert bad != task.writer_schema
    spill = tmp_path / "spill"
    spill.mkdir()
    with pytest.raises(Exception, match="rider"):
        run_clustering_task(
            ClusteringTask(**{**task.__dict__, "writer_schema": bad}),
            "0-0-0",
            spill=SpillSettings(str(spill)),
        )
    assert os.listdir(spill) == []
