"""A clustering group splits into tasks only where no order spans its output files: runs of neighbouring
slices of about equal bytes, every output file dealt to one run, every slice in exactly one run."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.clustering.execute import commit_clustering, prepare_clustering, run_clustering_task
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.split import split_group
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import TRIPS_SCHEMA, TripGenerator
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.metadata import ClusteringGroup, SliceInfo


def _group(sizes: list[int], outputs: int) -> tuple[ClusteringGroup, dict[str, int]]:
    slices = tuple(SliceInfo(file_id=f"f{i}", partition_path="p") for i in range(len(sizes)))
    return ClusteringGroup(slices=slices, num_output_file_groups=outputs), {
        s.file_id: n for s, n in zip(slices, sizes, strict=True)
    }


@pytest.mark.parametrize(
    ("sizes", "outputs", "expected"),
    [
        ([10, 10, 10, 10], 2, [(2, 1), (2, 1)]),
        ([10, 10, 10, 10], 4, [(1, 1)] * 4),
        ([30, 10, 10, 10], 2, [(1, 1), (3, 1)]),
        ([10] * 6, 3, [(2, 1)] * 3),
        ([10, 10], 5, [(1, 3), (1, 2)]),  # more files than slices: one task a slice, the files shared out
        ([5, 50, 5, 5, 5], 3, [(2, 1), (1, 1), (2, 1)]),  # a run closes once past its share
    ],
)
def test_unsorted_groups_split_into_runs_of_neighbours(
    sizes: list[int], outputs: int, expected: list[tuple[int, int]]
) -> None:
    group, size_of = _group(sizes, outputs)
    parts = split_group(group, (), lambda s: size_of[s.file_id])
    assert [(len(p.slices), p.num_output_file_groups) for p in parts] == expected
    assert [s for p in parts for s in p.slices] == list(group.slices)  # every slice once, in plan order
    assert sum(p.num_output_file_groups or 0 for p in parts) == outputs


def test_sorted_or_single_output_groups_stay_whole() -> None:
    group, size_of = _group([10, 10, 10], 3)
    assert split_group(group, ("fare",), lambda s: size_of[s.file_id]) == [group]
    single, size_of = _group([10, 10, 10], 1)
    assert split_group(single, (), lambda s: size_of[s.file_id]) == [single]
    one_slice, size_of = _group([10], 4)
    assert split_group(one_slice, (), lambda s: size_of[s.file_id]) == [one_slice]


def test_a_split_group_runs_as_tasks_that_each_write_their_share(tmp_path: Path) -> None:
    """An unsorted group of many slices with three output files runs as three tasks; the clustering
    replaces every input file group with three new ones, and both readers see the same rows."""
    root = tmp_path / "t"
    writer = TableWriter.create(
        str(root),
        name="split",
        table_type="COPY_ON_WRITE",
        table_version=8,
        schema=TRIPS_SCHEMA,
        record_key_fields=("uuid",),
        partition_fields=(),
        ordering_field="ts",
    )
    gen = TripGenerator(4, 1)
    for _ in range(6):  # a new file group each
        writer.bulk_insert(gen.rows(gen.keys(100)))
    before = Table.open(str(root)).read()
    theirs_before = hudi_rs_rows(root)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    total = sum(s.base_file_size + sum(s.log_file_sizes) for s in Table.open(str(root)).file_slices())
    config = ClusteringConfig(
        target_file_max_bytes=total // 3 + 1,
        max_bytes_per_group=1 << 40,
        small_file_limit=1 << 40,
        update_strategy=UpdateStrategy.ALLOW,  # no writer beside: every candidate
    )
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    assert scheduled.plan is not None, scheduled.reason
    (group,) = scheduled.plan.input_groups
    assert group.num_output_file_groups == 3
    assert len(group.slices) >= 3
    prepared = prepare_clustering(storage, lock)
    assert len(prepared.tasks) == 3
    assert [t.group.num_output_file_groups for t in prepared.tasks] == [1, 1, 1]
    assert sum(prepared.task_bytes) == total
    results = [run_clustering_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    done = commit_clustering(storage, lock, prepared, results)
    assert len(done.metadata.write_stats) == 3
    assert done.file_groups_replaced == len(group.slices)
    after = Table.open(str(root)).read()
    key = "_hoodie_record_key"
    assert after.select([key, "fare"]).sort_by(key) == before.select([key, "fare"]).sort_by(key)
    assert hudi_rs_rows(root) == theirs_before


def hudi_rs_rows(root: Path) -> pa.Table:
    hudi = pytest.importorskip("hudi")
    batches = hudi.HudiTableBuilder.from_base_uri(str(root)).build().read()
    return pa.Table.from_batches(batches).select(["_hoodie_record_key", "fare"]).sort_by("_hoodie_record_key")
