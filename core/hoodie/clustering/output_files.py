"""How a clustering group's merged rows are cut into its output files.

The group's rows, in the plan's order (:mod:`hoodie.clustering.spill` merges them), go to
``numOutputFileGroups`` files of about equal row counts (at most one per row), with every copy of a repeated
record key in the file of its first copy (:func:`keep_repeats_together` states the rule on rows in memory;
:func:`output_files` applies it to the merged runs, and the tests hold the two to the same files). The task
writes the files one after another from a :class:`MergedCursor` over the merge (:func:`file_rows`), in row
groups of a bounded size (:func:`row_groups`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.clustering.spill import KEY_HASH, ROW, RUN, SortedRuns, internal_columns
from hoodie.keygen import record_keys
from hoodie.table import RECORD_KEY


@dataclass(frozen=True)
class OutputFiles:
    """Where the group's rows go, by their position in the group's order: file ``f`` holds the positions
    ``bounds[f]`` to ``bounds[f + 1]`` but those in ``leaving``, then the rows ``arrivals[f]`` names (run and
    position in the run, in the group's order). The streamed form of :func:`keep_repeats_together`."""

    bounds: np.ndarray
    leaving: np.ndarray  # sorted positions
    arrivals: tuple[tuple[np.ndarray, np.ndarray], ...]  # per file: (runs, rows in run)

    def rows(self, f: int) -> int:
        lo, hi = int(self.bounds[f]), int(self.bounds[f + 1])
        gone = int(np.searchsorted(self.leaving, hi) - np.searchsorted(self.leaving, lo))
        return hi - lo - gone + len(self.arrivals[f][0])


def output_files(
    runs: SortedRuns,
    n_output_files: int,
    budget_rows: int,
    populate_meta_fields: bool,
    key_fields: Sequence[str],
) -> OutputFiles:
    """Cut the group's rows into ``n_output_files`` files of about equal row counts (at most one per row),
    with the copies of a repeated key in the file of its first copy, as :func:`keep_repeats_together` does.

    Only rows whose key hash repeats are looked at (:meth:`SortedRuns.repeated_hashes`): one pass of the
    merge over the keys finds their positions, their keys decide, and a row of a key whose first copy is in an
    earlier file leaves its file for the end of that one."""
    n = runs.rows
    count = min(max(1, n_output_files), n)
    bounds = np.linspace(0, n, count + 1).round().astype(np.int64)
    files = len(bounds) - 1
    nothing = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    none = OutputFiles(bounds, np.zeros(0, np.int64), tuple(nothing for _ in range(max(files, 0))))
    if n < 2 or files < 2:
        return none
    repeated = runs.repeated_hashes()
    if not len(repeated):
        return none
    key_columns = [RECORD_KEY] if populate_meta_fields and RECORD_KEY in runs.columns else runs.columns
    positions: list[np.ndarray] = []
    where_runs: list[np.ndarray] = []
    where_rows: list[np.ndarray] = []
    keys: list[pa.Array] = []
    seen = 0
    for batch in runs.merged(budget_rows, [KEY_HASH, *key_columns]):
        hashes = np.asarray(batch.column(KEY_HASH).to_numpy(), dtype=np.uint64)
        found = np.searchsorted(repeated, hashes)
        hit = np.flatnonzero(repeated[np.minimum(found, len(repeated) - 1)] == hashes)
        if len(hit):
            picked = batch.take(pa.array(hit))
            positions.append(seen + hit)
            where_runs.append(np.asarray(picked.column(RUN).to_numpy(), dtype=np.int64))
            where_rows.append(np.asarray(picked.column(ROW).to_numpy(), dtype=np.int64))
            keys.append(group_keys(picked, populate_meta_fields, key_fields))
        seen += batch.num_rows
    at = np.concatenate(positions)
    encoded = pa.chunked_array(keys, pa.string()).combine_chunks().dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    first = np.full(len(encoded.dictionary), n, dtype=np.int64)
    np.minimum.at(first, codes, at)
    target = (np.searchsorted(bounds, first, side="right") - 1)[codes]
    moved = target != np.searchsorted(bounds, at, side="right") - 1
    run_of, row_of, to = np.concatenate(where_runs)[moved], np.concatenate(where_rows)[moved], target[moved]
    arrivals = tuple((run_of[to == f], row_of[to == f]) for f in range(files))
    return OutputFiles(bounds, at[moved], arrivals)


class MergedCursor:
    """The merged batches read a given number of rows at a time (batches cut where files end)."""

    def __init__(self, batches: Iterator[pa.Table]) -> None:
        self._batches = batches
        self._rest: pa.Table | None = None
        self.position = 0

    def take(self, limit: int) -> pa.Table:
        """The next rows, at most ``limit`` (at least one while rows are left)."""
        while self._rest is None or self._rest.num_rows == 0:
            self._rest = next(self._batches)
        out = self._rest.slice(0, limit)
        self._rest = self._rest.slice(out.num_rows)
        self.position += out.num_rows
        return out

    def skip(self, rows: int) -> None:
        while rows > 0:
            rows -= self.take(rows).num_rows

    def close(self) -> None:
        """Close the merge (its spill files) early."""
        close = getattr(self._batches, "close", None)
        if close is not None:
            close()


def file_rows(
    merged: MergedCursor, runs: SortedRuns, plan: OutputFiles, f: int, budget: int
) -> Iterator[pa.Table]:
    """The rows of file ``f`` of ``plan``: its share of the merged rows, then the rows that join it."""
    left = int(plan.bounds[f + 1] - plan.bounds[f])
    while left > 0:
        start = merged.position
        part = merged.take(left)
        left -= part.num_rows
        lo, hi = np.searchsorted(plan.leaving, [start, start + part.num_rows])
        if hi > lo:
            keep = np.ones(part.num_rows, dtype=bool)
            keep[plan.leaving[lo:hi] - start] = False
            part = part.filter(pa.array(keep))
        yield part
    arriving_runs, arriving_rows = plan.arrivals[f]
    if len(arriving_runs):
        yield from runs.take_rows(arriving_runs, arriving_rows, budget)


def row_groups(parts: Iterator[pa.Table], rows: int) -> Iterator[pa.Table]:
    """``parts`` regrouped into tables of ``rows`` rows (the last one fewer), without the columns the spill
    added."""
    held: list[pa.Table] = []
    count = 0
    for part in parts:
        part = part.drop_columns(internal_columns(part.column_names))
        held.append(part)
        count += part.num_rows
        while count >= rows:
            both = pa.concat_tables(held)
            yield both.slice(0, rows)
            rest = both.slice(rows)
            held, count = [rest], rest.num_rows
    if count:
        yield pa.concat_tables(held)


def keep_repeats_together(
    rows: pa.Table, keys: pa.Array, bounds: np.ndarray
) -> tuple[pa.Table, pa.Array, np.ndarray]:
    """Move every row of a repeated record key into the output file of its first row, so that a key lives in
    one new file group (the record index is global: one location per key, see
    :func:`~hoodie.metadata.updates.check_one_location_per_key`). ``bounds`` cut ``rows`` into files.

    A moved row goes to the end of an earlier file; it came later in the (sorted) order than every row of that
    file, so each file stays sorted. Files left empty are dropped. Nothing moves when no key repeats.

    This is the rule stated on rows in memory; a task applies it to the merged runs (:func:`output_files`),
    and the tests hold the two to the same files."""
    n = rows.num_rows
    if n < 2 or len(bounds) <= 2 or pc.count_distinct(keys).as_py() == n:
        return rows, keys, bounds
    encoded = keys.dictionary_encode()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    first = np.full(len(encoded.dictionary), n, dtype=np.int64)
    np.minimum.at(first, codes, np.arange(n, dtype=np.int64))
    file_of_first = np.searchsorted(bounds, first, side="right") - 1
    file_of_row = file_of_first[codes]
    order = pa.array(np.argsort(file_of_row, kind="stable"))
    sizes = np.bincount(file_of_row, minlength=len(bounds) - 1)
    new_bounds = np.concatenate([[0], np.cumsum(sizes[sizes > 0])]).astype(np.int64)
    return rows.take(order), keys.take(order), new_bounds


def group_keys(t: pa.Table, populate_meta_fields: bool, key_fields: Sequence[str]) -> pa.Array:
    if populate_meta_fields and RECORD_KEY in t.column_names:
        return t.column(RECORD_KEY).combine_chunks()
    return record_keys(t, key_fields)


__all__ = [
    "MergedCursor",
    "OutputFiles",
    "file_rows",
    "group_keys",
    "keep_repeats_together",
    "output_files",
    "row_groups",
]
