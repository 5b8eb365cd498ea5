"""A clustering group splits into tasks only where no order spans its output files: runs of neighbouring
slices of about equal bytes, every output file dealt to one run, every slice in exactly one run."""

from __future__ import annotations

import pytest

from hoodie.clustering.split import split_group
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
