"""Splitting a clustering group into tasks that each write their own output files.

A group of the plan names its file slices and ``numOutputFileGroups`` (Hudi's planner: the group's bytes over
``hoodie.clustering.plan.strategy.target.file.max.bytes``). One task per group bounds a job's parallelism by
its group count, and a large group (Hudi's default cap is 2 GB a group) keeps one executor busy while others
idle. When the group's rows need no order across its output files, it splits:

- **Without sort columns** the output order is the plan's slice order, cut into files, and no file's content
  depends on another's. So the slices are dealt, in plan order, into ``k = min(numOutputFileGroups, slices)``
  runs of neighbours of about equal bytes (the plan's ``TOTAL_IO_READ_MB`` per slice is not recorded, so file
  sizes from the table view are used), and the run gets ``numOutputFileGroups`` files in proportion to its
  bytes (at least one). Each run is a group of its own for its task: its rows, its output files. Every record
  stays in the run of its slice; a key repeated within a slice stays in one task, whose rule keeps it in one
  file. A key repeated across two slices was already in two file groups and may stay in two; the caller
  splits only tables without a record index (which allows one location per key, so it must not happen
  there; :func:`~hoodie.clustering.execute.prepare_clustering`).
- **With sort columns** the files together hold one order over the whole group (file ``i``'s rows sort before
  file ``i + 1``'s), which only a task that sees every row can produce: the group stays one task, whose memory
  is bounded by streaming (:mod:`hoodie.clustering.execute`).

The replacecommit is the same either way: the plan's input file groups replaced by every task's new ones.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from hoodie.timeline.metadata import ClusteringGroup, SliceInfo


def split_group(
    group: ClusteringGroup, sort_columns: Sequence[str], slice_bytes: Callable[[SliceInfo], int]
) -> list[ClusteringGroup]:
    """The groups ``group`` runs as (itself alone when it cannot or need not split; see the module doc)."""
    outputs = max(1, group.num_output_file_groups or 1)
    slices = list(group.slices)
    k = min(outputs, len(slices))
    if sort_columns or k < 2:
        return [group]
    sizes = [max(1, slice_bytes(s)) for s in slices]
    runs = _neighbour_runs(sizes, k)
    total = sum(sizes)
    files = _files_per_run([sum(sizes[a:b]) for a, b in runs], outputs, total)
    return [
        replace(group, slices=tuple(slices[a:b]), num_output_file_groups=n)
        for (a, b), n in zip(runs, files, strict=True)
    ]


def _neighbour_runs(sizes: Sequence[int], k: int) -> list[tuple[int, int]]:
    """``k`` non-empty runs of consecutive items whose byte sums are about equal: each run ends where the
    running total passes its share of the whole."""
    total = sum(sizes)
    runs: list[tuple[int, int]] = []
    start, acc = 0, 0
    for i, size in enumerate(sizes):
        acc += size
        left_items = len(sizes) - (i + 1)
        left_runs = k - len(runs) - 1
        if left_runs == 0:
            break
        target = total * (len(runs) + 1) / k
        if (acc >= target and left_items >= left_runs) or left_items == left_runs:
            runs.append((start, i + 1))
            start = i + 1
    runs.append((start, len(sizes)))
    return runs


def _files_per_run(run_bytes: Sequence[int], outputs: int, total: int) -> list[int]:
    """``outputs`` files dealt to the runs in proportion to their bytes, at least one each (largest
    remainders first)."""
    k = len(run_bytes)
    shares = [outputs * b / total for b in run_bytes]
    files = [max(1, int(s)) for s in shares]
    while sum(files) > outputs:  # the floors of one pushed the sum over: take from the largest
        files[max(range(k), key=lambda i: files[i])] -= 1
    order = sorted(range(k), key=lambda i: shares[i] - int(shares[i]), reverse=True)
    i = 0
    while sum(files) < outputs:
        files[order[i % k]] += 1
        i += 1
    return files


__all__ = ["split_group"]
