"""Sorted runs: a clustering group's rows spilled to local disk one slice at a time and read back in the
group's order in bounded batches, so that a clustering task holds about one slice in memory, not its group.

Holding a group to order it costs several times the group (the merged slices, their concatenation, the sorted
copy). Instead:

1. Each slice, once merged, becomes a *run* (:meth:`SortedRuns.add`): ordered as a group is ordered
   (:func:`~hoodie.clustering.layout.sort_indices`, stable) when there are sort columns, else kept as it is,
   and written to a temporary Arrow IPC file (LZ4-compressed record batches of about ``SPILL_BATCH_BYTES``)
   in a directory of its own that :meth:`SortedRuns.close` removes, whatever happened. Next to the rows a run
   stores what the merge compares, and a 64-bit hash of each row's record key (:func:`key_hashes`). The merge
   compares the sort columns themselves (linear; a curve over one column), or the curve key as uint64 words
   (z-order and Hilbert over two or more columns, :func:`~hoodie.clustering.layout.curve_key_words`). Hudi's
   direct mapping makes a row's curve key a function of that row alone, so the keys of different runs compare
   as they would in one table. The ``sample`` build method, whose ranks depend on the whole group, never
   reaches a task: :mod:`hoodie.clustering.layout` refuses it when the plan is read.
2. :meth:`SortedRuns.merged` reads the rows back in the group's order. Without sort columns it reads run
   after run (the plan's slice order). With sort columns it is a k-way merge in rounds. Each round reads
   spill batches into every run's *head* (rows read, not yet emitted) while it holds fewer than
   ``max(budget_rows // k, one spill batch)`` rows: at most that and one batch. (A head left with a few
   rows must still take a whole batch: else its last row stays low, and each round emits about one batch
   while sorting every head; 50 runs took 250 rounds, sorting 18 times the group's rows.) The least of the
   last head rows of the runs that still have rows on disk, *L*, bounds what is known: no row still on disk
   orders before it. Every head row that orders at or before *L* is emitted, sorted. The run holding *L*
   empties its head, so every round makes progress. Once every run is read to its end, the rest of every
   head is emitted. Only runs whose first head row orders at or before *L* take part in a round's sort, and
   a round with one such run emits a prefix of it without sorting.

Ties: rows whose sort keys are equal are ordered by run (the plan's slice order), then by position in the
run, which the stable per-run sort took from the slice's merged order. That is exactly the order a stable
sort of the concatenated slices gives (``pc.sort_indices`` and ``np.lexsort`` are stable), so the merged
rows are the in-memory order, row for row.

Memory, at most: while adding, the caller's merged slice, the sort's indices (and curve keys), and a
sixteenth of the slice being copied into order; while merging, ``budget_rows`` rows in the heads (at least
one spill batch a run, and one more batch a run at most) and a round's emitted batch of at most as many.
The key hashes add 8 bytes per row of the *group*, and 16 more while :meth:`SortedRuns.repeated_hashes`
sorts them. That part grows with the group, not with the slice: 80 MB for ten million rows.
:meth:`SortedRuns.budget_rows` sets the merge budget to half the largest run's Arrow size, in rows of the
group's average size, and at least :data:`MIN_BUDGET_BYTES` (16 MiB) of them.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.clustering.layout import (
    LayoutStrategy,
    curve_key_words,
    row_positions,
    sort_indices,
    words_order,
)
from hoodie.table import META_COLUMNS

__all__ = [
    "KEY_HASH",
    "MIN_BUDGET_BYTES",
    "MIN_BUDGET_ROWS",
    "ROW",
    "RUN",
    "SPILL_BATCH_BYTES",
    "SortedRuns",
    "SpillSettings",
    "internal_columns",
    "key_hashes",
]

#: The size a run's record batches are written in (the unit a run is read back in).
SPILL_BATCH_BYTES = 1 << 20
#: The least merge budget, in rows, however small the runs.
MIN_BUDGET_ROWS = 4096
#: The least merge budget, in bytes of the group's average row: the output's row groups are capped by the
#: budget, so a group of small slices would be written in row groups of half a small slice (50 slices of
#: 20,000 rows: 100 row groups and a file 17 % larger than one written from memory; with this, 10 and 12 %,
#: and the clustering 7 % faster).
MIN_BUDGET_BYTES = 16 << 20
#: Columns a run stores next to its rows, and the merged batches' run and row number of each row.
KEY_HASH = "__hoodie_spill_key_hash"
RUN = "__hoodie_spill_run"
ROW = "__hoodie_spill_row"
_WORD = "__hoodie_spill_curve_"
# A run is copied into its order a sixteenth at a time: Arrow's take on a chunked table costs about the
# whole table's size per call besides the rows taken, so much smaller pieces would cost much more time.
_TAKE_PIECES = 16
_HASH_CHUNK_BYTES = 1 << 20  # key bytes hashed at once (an index matrix of 8 bytes per key byte)
_P1 = np.uint64(0x9E3779B97F4A7C15)
_P2 = np.uint64(0xBF58476D1CE4E5B9)
_P3 = np.uint64(0x94D049BB133111EB)


def internal_columns(names: Sequence[str]) -> list[str]:
    """Those of ``names`` that a run or a merged batch adds to the rows (to be dropped before writing)."""
    return [n for n in names if n in (KEY_HASH, RUN, ROW) or n.startswith(_WORD)]


def _mix(h: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer, element-wise."""
    h = h ^ (h >> np.uint64(30))
    h = h * _P2
    h = h ^ (h >> np.uint64(27))
    h = h * _P3
    out: np.ndarray = h ^ (h >> np.uint64(31))
    return out


def key_hashes(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each key's UTF-8 bytes (uint64): its length, then its 8-byte little-endian words
    (the last one zero-padded), each mixed in with splitmix64's finalizer. Equal keys hash equal; a shared
    hash only makes two keys candidates."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if not pa.types.is_large_binary(keys.type):
        keys = keys.cast(pa.large_binary())
    n = len(keys)
    out = np.empty(n, dtype=np.uint64)
    if n == 0:
        return out
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int64)[keys.offset : keys.offset + n + 1]
    data_buf = keys.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lengths = np.diff(offsets)
    longest = int(lengths.max())
    width = max(8, -(-longest // 8) * 8)
    step = max(1, _HASH_CHUNK_BYTES // width)
    cols = np.arange(width, dtype=np.int64)
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        starts, lens = offsets[lo:hi], lengths[lo:hi]
        if len(data):
            idx = np.minimum(starts[:, None] + cols[None, :], len(data) - 1)
            mat = np.where(cols[None, :] < lens[:, None], data[idx], np.uint8(0)).astype(np.uint8)
        else:
            mat = np.zeros((hi - lo, width), dtype=np.uint8)
        words = np.ascontiguousarray(mat).view("<u8")
        h = _mix(lens.astype(np.uint64) * _P1)
        for j in range(words.shape[1]):  # only the words a key has: its hash is the same in any batch
            h = np.where(lens > 8 * j, _mix((h ^ words[:, j]) + _P1), h)
        out[lo:hi] = h
    return out


@dataclass(frozen=True)
class _Run:
    """One spilled slice: its file, rows, Arrow size (of the merged slice) and record batch offsets."""

    path: str
    rows: int
    nbytes: int
    schema: pa.Schema
    offsets: np.ndarray  # row offset of each record batch, and the row count last

    @property
    def max_batch_rows(self) -> int:
        return int(np.diff(self.offsets).max()) if len(self.offsets) > 1 else 0


class _RunReader:
    """A run read a record batch at a time (only ``names``, conformed to ``schema``)."""

    def __init__(self, run: _Run, names: Sequence[str], schema: pa.Schema) -> None:
        self.run = run
        self.schema = schema
        fields = [run.schema.get_field_index(n) for n in names]
        self._file = pa.OSFile(run.path, "rb")  # not memory-mapped: pages read stay out of the resident set
        self._reader = pa.ipc.open_file(self._file, options=pa.ipc.IpcReadOptions(included_fields=fields))
        self.next = 0

    @property
    def done(self) -> bool:
        return bool(self.next >= self._reader.num_record_batches)

    @property
    def next_rows(self) -> int:
        return int(self.run.offsets[self.next + 1] - self.run.offsets[self.next])

    def batch(self, i: int) -> pa.Table:
        return _to_schema(pa.Table.from_batches([self._reader.get_batch(i)]), self.schema)

    def read(self) -> pa.Table:
        out = self.batch(self.next)
        self.next += 1
        return out

    def close(self) -> None:
        self._file.close()


def _to_schema(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` as ``schema`` (the runs' unified schema): columns in its order and types, absent ones null."""
    if t.schema.equals(schema):
        return t
    columns = [
        t.column(f.name).cast(f.type) if f.name in t.column_names else pa.nulls(t.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _with_ids(t: pa.Table, run: int, start: int) -> pa.Table:
    n = t.num_rows
    t = t.append_column(RUN, pa.array(np.full(n, run, dtype=np.int32)))
    return t.append_column(ROW, pa.array(np.arange(start, start + n, dtype=np.int64)))


@dataclass(frozen=True)
class SpillSettings:
    """Where runs are spilled and how finely: ``directory`` holds the temporary directory (default: the
    system's), ``batch_rows`` fixes the rows of a spill batch (default: about ``SPILL_BATCH_BYTES`` each),
    ``budget_rows`` the rows the merge may hold (default: :meth:`SortedRuns.budget_rows`). The defaults are
    for production; tests make batches and budget small to exercise many merge rounds."""

    directory: str | None = None
    batch_rows: int | None = None
    budget_rows: int | None = None

    def __post_init__(self) -> None:
        for name in ("batch_rows", "budget_rows"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name}={value!r}: must be positive")


class SortedRuns:
    """A clustering group's merged slices spilled as runs, read back merged (see the module doc). Use as a
    context manager, or :meth:`close` it: the spill files go with it."""

    def __init__(
        self,
        sort_columns: Sequence[str] = (),
        layout: LayoutStrategy = LayoutStrategy.LINEAR,
        settings: SpillSettings | None = None,
    ) -> None:
        self.sort_columns = tuple(sort_columns)
        self.layout = layout
        self.settings = settings or SpillSettings()
        self.directory = tempfile.mkdtemp(prefix="hoodie-cluster-spill-", dir=self.settings.directory)
        self._batch_rows = self.settings.batch_rows
        self.runs: list[_Run] = []
        self._hashes: list[np.ndarray] = []
        self._words = 0  # uint64 words of a curve key (0: the sort columns are compared themselves)
        #: The most rows :meth:`merged` held in its heads at once.
        self.peak_rows = 0

    # -- writing -----------------------------------------------------------------------------------------

    @property
    def _curve(self) -> bool:
        return self.layout.is_curve and len(self.sort_columns) > 1

    def add(self, rows: pa.Table, keys: pa.Array | pa.ChunkedArray) -> None:
        """Spill one merged slice (``keys``: its rows' record keys, in row order) as the next run; a slice
        without rows adds none."""
        n = rows.num_rows
        if len(keys) != n:
            raise ValueError(f"{len(keys)} record keys for {n} rows")
        if n == 0:
            return
        hashes = key_hashes(keys)
        order: np.ndarray | None = None
        words: np.ndarray | None = None
        if self.sort_columns:
            positions = row_positions(rows.column_names, META_COLUMNS)
            if self._curve:
                words = curve_key_words(rows, self.sort_columns, self.layout, positions)
                self._words = words.shape[1]
                order = words_order(words)
                words = words[order]
            else:
                indices = sort_indices(rows, self.sort_columns, self.layout, positions)
                order = np.asarray(indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            hashes = hashes[order]
        self._hashes.append(hashes)
        batch_rows = self._batch_rows or max(1, min(n, SPILL_BATCH_BYTES * n // max(1, int(rows.nbytes))))
        piece = n if order is None else max(batch_rows, -(-n // _TAKE_PIECES))
        path = os.path.join(self.directory, f"run-{len(self.runs):05d}.arrow")
        counts: list[int] = []
        writer: pa.ipc.RecordBatchFileWriter | None = None
        schema: pa.Schema | None = None
        with pa.OSFile(path, "wb") as sink:
            try:
                for lo in range(0, n, piece):
                    part = rows.slice(lo, piece) if order is None else rows.take(order[lo : lo + piece])
                    part = part.append_column(KEY_HASH, pa.array(hashes[lo : lo + piece]))
                    if words is not None:
                        for j in range(words.shape[1]):
                            part = part.append_column(f"{_WORD}{j}", pa.array(words[lo : lo + piece, j]))
                    if writer is None:
                        schema = part.schema
                        options = pa.ipc.IpcWriteOptions(compression="lz4")
                        writer = pa.ipc.new_file(sink, schema, options=options)
                    for batch in part.to_batches(max_chunksize=batch_rows):
                        if batch.num_rows:
                            writer.write_batch(batch)
                            counts.append(batch.num_rows)
                    del part
            finally:
                if writer is not None:
                    writer.close()
        assert schema is not None
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.runs.append(_Run(path, n, int(rows.nbytes), schema, offsets))

    # -- what was added ----------------------------------------------------------------------------------

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.runs)

    @property
    def largest_bytes(self) -> int:
        """The Arrow size of the largest slice added."""
        return max((r.nbytes for r in self.runs), default=0)

    @property
    def total_bytes(self) -> int:
        return sum(r.nbytes for r in self.runs)

    @property
    def columns(self) -> list[str]:
        """The rows' columns (without the ones a run adds)."""
        if not self.runs:
            return []
        names = self.runs[0].schema.names
        return [n for n in names if n not in internal_columns(names)]

    def budget_rows(self) -> int:
        """The merge budget: the settings', else half the largest run's Arrow size in rows of the group's
        average size, at least ``MIN_BUDGET_BYTES`` of such rows and ``MIN_BUDGET_ROWS``."""
        if self.settings.budget_rows is not None:
            return self.settings.budget_rows
        if not self.runs:
            return MIN_BUDGET_ROWS
        per_row = max(1.0, self.total_bytes / self.rows)
        return max(MIN_BUDGET_ROWS, int(max(self.largest_bytes / 2, MIN_BUDGET_BYTES) / per_row))

    def repeated_hashes(self) -> np.ndarray:
        """The key hashes found on more than one row of the group, sorted (each once). Frees the hashes kept
        while adding: call it after the last :meth:`add`."""
        if not self._hashes:
            return np.zeros(0, dtype=np.uint64)
        every = np.concatenate(self._hashes)
        self._hashes = []
        every.sort()
        repeated = every[1:][every[1:] == every[:-1]]
        return np.unique(repeated)

    # -- reading -----------------------------------------------------------------------------------------

    def _schema(self, names: Sequence[str]) -> pa.Schema:
        """The runs' schemas of ``names`` unified (a slice read from base files alone keeps their non-null
        flags, merged ones do not), as ``pa.concat_tables(promote_options="permissive")`` does."""
        schemas = [pa.schema([r.schema.field(n) for n in names if n in r.schema.names]) for r in self.runs]
        unified = pa.unify_schemas(schemas, promote_options="permissive")
        return pa.schema([unified.field(n) for n in names])

    def _sort_keys(self) -> list[tuple[str, str, str]]:
        if self._curve:
            keys = [(f"{_WORD}{j}", "ascending", "at_end") for j in range(self._words)]
        elif self.layout.is_curve:
            keys = [(self.sort_columns[0], "ascending", "at_start")]
        else:
            keys = [(c, "ascending", "at_end") for c in self.sort_columns]
        return [*keys, (RUN, "ascending", "at_end"), (ROW, "ascending", "at_end")]

    def _key_columns(self) -> list[str]:
        return [k for k, _, _ in self._sort_keys()[:-2]]

    def merged(
        self, budget_rows: int | None = None, columns: Sequence[str] | None = None
    ) -> Iterator[pa.Table]:
        """The group's rows in order, in batches: ``columns`` (default: all the rows' columns) and the key
        columns the merge compares, then :data:`RUN` and :data:`ROW` (each row's run and position in it).
        The heads hold at most ``max(budget_rows, one spill batch per run)`` rows and one more spill batch
        per run (default budget: :meth:`budget_rows`); :attr:`peak_rows` records the most they held."""
        if not self.runs:
            return
        budget = budget_rows if budget_rows is not None else self.budget_rows()
        wanted = list(columns) if columns is not None else self.columns
        names = wanted + [c for c in (self._key_columns() if self.sort_columns else []) if c not in wanted]
        schema = self._schema(names)
        readers = [_RunReader(run, names, schema) for run in self.runs]
        try:
            if not self.sort_columns:
                for i, reader in enumerate(readers):
                    while not reader.done:
                        start = int(reader.run.offsets[reader.next])
                        batch = reader.read()
                        self.peak_rows = max(self.peak_rows, batch.num_rows)
                        yield _with_ids(batch, i, start)
                return
            yield from self._merge(readers, budget)
        finally:
            for reader in readers:
                reader.close()

    def _merge(self, readers: list[_RunReader], budget: int) -> Iterator[pa.Table]:
        k = len(readers)
        caps = [max(r.run.max_batch_rows, budget // k) for r in readers]
        sort_keys = self._sort_keys()
        heads = [readers[i].schema.empty_table() for i in range(k)]
        starts = [0] * k
        active = list(range(k))
        while active:
            for i in active:
                reader = readers[i]
                while not reader.done and heads[i].num_rows < caps[i]:
                    heads[i] = pa.concat_tables([heads[i], reader.read()])
            self.peak_rows = max(self.peak_rows, sum(heads[i].num_rows for i in active))
            open_runs = [i for i in active if not readers[i].done]
            bound: int | None = None  # the run whose last head row is L
            if open_runs:
                # The first head row of every run, then the last of every run with rows on disk: stable, so
                # a run's first row comes before its last when they are the same row.
                probe = pa.concat_tables(
                    [_with_ids(heads[i].slice(0, 1), i, starts[i]) for i in active]
                    + [
                        _with_ids(
                            heads[i].slice(heads[i].num_rows - 1, 1), i, starts[i] + heads[i].num_rows - 1
                        )
                        for i in open_runs
                    ]
                )
                ranked = np.asarray(pc.sort_indices(probe, sort_keys=sort_keys).to_numpy(), dtype=np.int64)
                cut = int(np.argmax(ranked >= len(active)))  # the first "last row" in order: L
                bound = open_runs[int(ranked[cut]) - len(active)]
                taking = [active[int(e)] for e in ranked[:cut]]
            else:
                taking = list(active)
            if len(taking) == 1:
                i = taking[0]
                out = _with_ids(heads[i], i, starts[i])
                emitted = {i: heads[i].num_rows}
            else:
                parts = [_with_ids(heads[i], i, starts[i]) for i in taking]
                both = pa.concat_tables(parts)
                order = np.asarray(pc.sort_indices(both, sort_keys=sort_keys).to_numpy(), dtype=np.int64)
                if bound is not None:
                    offset = 0
                    for i, part in zip(taking, parts, strict=True):
                        if i == bound:
                            break
                        offset += part.num_rows
                    last = offset + heads[bound].num_rows - 1
                    order = order[: int(np.flatnonzero(order == last)[0]) + 1]
                out = both.take(order)
                runs = np.asarray(out.column(RUN).to_numpy(), dtype=np.int64)
                counts = np.bincount(runs, minlength=k)
                emitted = {i: int(counts[i]) for i in taking if counts[i]}
                del both, parts
            for i, count in emitted.items():
                heads[i] = heads[i].slice(count)
                starts[i] += count
            active = [i for i in active if heads[i].num_rows or not readers[i].done]
            yield out

    def take_rows(self, runs: np.ndarray, rows: np.ndarray, piece_rows: int) -> Iterator[pa.Table]:
        """The rows at (``runs[j]``, ``rows[j]``) (run, position in it), all columns, in that order, in
        pieces of at most ``piece_rows`` rows; each spill batch is read once per piece it serves."""
        names = self.runs[0].schema.names if self.runs else []
        schema = self._schema(names)
        readers: dict[int, _RunReader] = {}
        try:
            for lo in range(0, len(runs), max(1, piece_rows)):
                want_runs, want_rows = runs[lo : lo + piece_rows], rows[lo : lo + piece_rows]
                parts: list[pa.Table] = []
                places: list[np.ndarray] = []
                for r in np.unique(want_runs):
                    run = int(r)
                    reader = readers.get(run)
                    if reader is None:
                        reader = readers[run] = _RunReader(self.runs[run], names, schema)
                    sel = np.flatnonzero(want_runs == r)
                    offsets = self.runs[run].offsets
                    batch_of = np.searchsorted(offsets, want_rows[sel], side="right") - 1
                    for b in np.unique(batch_of):
                        these = sel[batch_of == b]
                        batch = reader.batch(int(b))
                        parts.append(batch.take(pa.array(want_rows[these] - offsets[int(b)])))
                        places.append(these)
                        del batch
                if parts:
                    both = pa.concat_tables(parts)
                    yield both.take(pa.array(np.argsort(np.concatenate(places), kind="stable")))
        finally:
            for reader in readers.values():
                reader.close()

    # -- cleaning up -------------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove the spill files (idempotent)."""
        self._hashes = []
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> SortedRuns:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
