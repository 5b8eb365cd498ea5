"""A Parquet writer that encodes the columns of a row group on several threads at once, and writes the same
bytes as ``pyarrow.parquet.ParquetWriter`` given the same table and options.

Why: pyarrow's writer encodes and compresses one column chunk after another on the calling thread, and with
gzip (Hudi's default codec) that is most of a compaction's time. Column chunks are independent in Parquet:
each is its pages (headers, a CRC each, values), its statistics and dictionary its own, found by the offsets
in the footer. So the columns of a row group are split into parts (whole top-level fields, weighed by what
they cost to encode: :func:`_split`), each part is written as a Parquet file of its own into memory by a pool
of threads (pyarrow releases the GIL while encoding), and the parts' column chunks are copied into the
output in the schema's column order, their footer offsets moved by where they land. The footer is the parts'
footers stitched together under the full schema's (read from an empty file written with the whole schema),
so the output is byte for byte what one writer writes (``tests/core/parquet`` checks it), only sooner.

What it costs: each part's encoded bytes are held until its row group is written (compressed bytes, a
fraction of the rows' Arrow size); one row group is encoded at a time.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import Any, BinaryIO, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.parquet.thrift_compact import (
    BINARY,
    I16,
    I64,
    LIST,
    STRUCT,
    Struct,
    ThriftError,
    ThriftList,
    read_struct,
    write_struct,
)

MAGIC = b"PAR1"

# FileMetaData, RowGroup, ColumnChunk and ColumnMetaData field ids (parquet.thrift).
_FILE_SCHEMA, _FILE_NUM_ROWS, _FILE_ROW_GROUPS, _FILE_KEY_VALUES = 2, 3, 4, 5
_RG_COLUMNS, _RG_TOTAL_BYTES, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_TOTAL_COMPRESSED, _RG_ORDINAL = (
    1,
    2,
    3,
    5,
    6,
    7,
)
_CC_FILE_OFFSET, _CC_META = 2, 3
_CC_OFFSETS = (4, 6)  # offset index, column index: positions in the file, when written
_CM_TOTAL_COMPRESSED, _CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE, _CM_BLOOM = 7, 9, 10, 11, 14
_SE_NUM_CHILDREN = 5

#: Parts a row group's columns are split into, per thread: enough that the threads end close together
#: (one heavy column alone can still hold one thread), few enough that a part's writer overhead is nothing.
PARTS_PER_THREAD = 4
_SAMPLE_ROWS = 2048
_MIN_DISTINCT_SHARE = 0.02


class Sink(Protocol):
    def write(self, data: bytes, /) -> Any: ...


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, which containers narrow), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True)
class _Encoded:
    """One part of a row group as its own Parquet file: the file's bytes and its footer."""

    data: pa.Buffer
    footer: Struct


class ColumnParallelWriter:
    """Write row groups to ``sink`` as ``pq.ParquetWriter(sink, schema, **options)`` would, encoding each row
    group's columns on ``threads`` threads. Use as a context manager; the footer is written on a clean exit
    only (an error leaves the sink without one, and the caller discards it)."""

    def __init__(self, sink: Sink | BinaryIO, schema: pa.Schema, *, threads: int, **options: Any) -> None:
        if threads < 1:
            raise ValueError(f"threads={threads}: must be at least 1")
        self._sink = sink
        self._schema = schema
        self._options = options
        self._threads = threads
        template = _encode(schema.empty_table(), options, row_group_rows=1).footer
        self._template = template
        self._leaves = _leaf_counts(template)
        if len(self._leaves) != len(schema):
            raise ThriftError(
                f"{len(self._leaves)} top-level fields in the Parquet schema, {len(schema)} in Arrow"
            )
        self._first_leaf = [sum(self._leaves[:i]) for i in range(len(self._leaves))]
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="hoodie-encode")
        self._pos = 0
        self._row_groups: list[Struct] = []
        self._num_rows = 0
        self._key_values: dict[str, str] = {}
        self._learned: dict[int, float] = {}  # top-level column -> encoded bytes per row, last row group
        self._write(MAGIC)

    # -- the ParquetWriter interface the base-file writer uses ---------------------------------------------

    def write_table(self, table: pa.Table, row_group_size: int) -> None:
        """Write ``table`` as row groups of ``row_group_size`` rows (the last one shorter), as
        ``ParquetWriter.write_table`` does (an empty table too, as one empty row group). Its columns must be
        the schema's, in order."""
        if not table.schema.equals(self._schema):
            raise ValueError(f"table schema differs from the writer's:\n{table.schema}\n!=\n{self._schema}")
        step = max(1, row_group_size)
        for start in range(0, max(1, table.num_rows), step):  # an empty table is one empty row group
            self._write_row_group(table.slice(start, step))

    def add_key_value_metadata(self, key_values: Mapping[str, str]) -> None:
        self._key_values.update(key_values)

    def close(self) -> None:
        """Write the footer."""
        try:
            footer = self._file_footer()
            self._write(footer)
            self._write(len(footer).to_bytes(4, "little"))
            self._write(MAGIC)
        finally:
            self._pool.shutdown(cancel_futures=True)

    def __enter__(self) -> ColumnParallelWriter:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.close()
        else:
            self._pool.shutdown(wait=True, cancel_futures=True)

    # -- encoding ------------------------------------------------------------------------------------------

    def _write_row_group(self, rows: pa.Table) -> None:
        """Encode one row group's parts on the pool and write it. One row group at a time: a caller that
        overlaps its work with the encoding prepares the next one on a thread of its own (a compaction merges
        it), and a second row group in flight here would hold a third in memory."""
        parts = _split(rows, self._threads, self._learned)
        futures = [
            self._pool.submit(_encode, rows.select(part), self._options, rows.num_rows) for part in parts
        ]
        self._write_row_groups(parts, [f.result() for f in futures])

    def _write_row_groups(self, parts: list[list[int]], encoded: list[_Encoded]) -> None:
        """Copy the parts' column chunks into the file in schema order and record the row groups."""
        groups = [e.footer.structs(_FILE_ROW_GROUPS) for e in encoded]
        if len({len(g) for g in groups}) != 1:
            raise ThriftError(f"the parts of a row group were split differently: {[len(g) for g in groups]}")
        for r in range(len(groups[0])):
            row_groups = [group[r] for group in groups]
            num_rows = row_groups[0].int(_RG_NUM_ROWS)
            if any(rg.int(_RG_NUM_ROWS) != num_rows for rg in row_groups):
                raise ThriftError("the parts of a row group hold different numbers of rows")
            by_leaf: dict[int, tuple[int, Struct]] = {}  # the schema's leaf column -> (part, its chunk)
            for p, (fields, rg) in enumerate(zip(parts, row_groups, strict=True)):
                leaves = [self._first_leaf[f] + i for f in fields for i in range(self._leaves[f])]
                columns = rg.structs(_RG_COLUMNS)
                if len(leaves) != len(columns):
                    raise ThriftError(f"part {p}: {len(columns)} column chunks for {len(leaves)} columns")
                by_leaf.update((leaf, (p, column)) for leaf, column in zip(leaves, columns, strict=True))
            if num_rows:
                self._learn(by_leaf, num_rows)
            columns_out: list[Struct] = []
            compressed = 0
            for leaf in range(len(by_leaf)):
                p, column = by_leaf[leaf]
                meta = column.struct(_CC_META)
                start, length = _chunk_start(meta), meta.int(_CM_TOTAL_COMPRESSED)
                moved = _moved(column, self._pos - start)
                self._write(memoryview(encoded[p].data).cast("B")[start : start + length])
                columns_out.append(moved)
                compressed += length
            row_group = Struct(list(row_groups[0].fields))
            row_group.set(_RG_COLUMNS, LIST, ThriftList(STRUCT, list(columns_out)))
            row_group.set(_RG_TOTAL_BYTES, I64, sum(rg.int(_RG_TOTAL_BYTES) for rg in row_groups))
            if row_group.has(_RG_FILE_OFFSET):
                row_group.set(_RG_FILE_OFFSET, I64, _chunk_start(columns_out[0].struct(_CC_META)))
            if row_group.has(_RG_TOTAL_COMPRESSED):
                row_group.set(_RG_TOTAL_COMPRESSED, I64, compressed)
            if row_group.has(_RG_ORDINAL):
                row_group.set(_RG_ORDINAL, I16, len(self._row_groups))
            self._row_groups.append(row_group)
            self._num_rows += num_rows

    def _learn(self, by_leaf: Mapping[int, tuple[int, Struct]], num_rows: int) -> None:
        """Keep each top-level column's encoded bytes per row, to weigh the next row group's split."""
        for field_index, first in enumerate(self._first_leaf):
            size = sum(
                by_leaf[leaf][1].struct(_CC_META).int(_CM_TOTAL_COMPRESSED)
                for leaf in range(first, first + self._leaves[field_index])
            )
            self._learned[field_index] = size / num_rows

    def _file_footer(self) -> bytes:
        footer = Struct(list(self._template.fields))
        footer.set(_FILE_NUM_ROWS, I64, self._num_rows)
        footer.set(_FILE_ROW_GROUPS, LIST, ThriftList(STRUCT, list(self._row_groups)))
        if self._key_values:
            pairs: list[Any] = [
                Struct([(1, BINARY, k.encode()), (2, BINARY, v.encode())])
                for k, v in self._key_values.items()
            ]
            footer.set(_FILE_KEY_VALUES, LIST, ThriftList(STRUCT, pairs))
        return write_struct(footer)

    def _write(self, data: bytes | memoryview) -> None:
        self._sink.write(data)  # type: ignore[arg-type]
        self._pos += len(data)


def _encode(rows: pa.Table, options: Mapping[str, Any], row_group_rows: int) -> _Encoded:
    """``rows`` as a Parquet file in memory (Arrow's own buffer: no Python, so no GIL, per page written)."""
    buffer = pa.BufferOutputStream()
    pq.write_table(rows, buffer, row_group_size=max(1, row_group_rows), **options)
    data = buffer.getvalue()
    return _Encoded(data, _footer_of(data))


def _footer_of(data: pa.Buffer) -> Struct:
    view = memoryview(data).cast("B")
    if len(view) < 12 or view[:4] != MAGIC or view[-4:] != MAGIC:
        raise ThriftError("not a Parquet file")
    length = int.from_bytes(view[-8:-4], "little")
    return read_struct(view[len(view) - 8 - length : len(view) - 8])


def _leaf_counts(footer: Struct) -> list[int]:
    """The number of leaf columns under each top-level field, from the flattened schema (depth first, each
    group followed by its ``num_children`` children)."""
    elements = footer.structs(_FILE_SCHEMA)
    counts: list[int] = []
    pos = 1

    def leaves() -> int:
        nonlocal pos
        element = elements[pos]
        pos += 1
        children = element.get(_SE_NUM_CHILDREN)
        if not isinstance(children, int) or children <= 0:
            return 1
        return sum(leaves() for _ in range(children))

    for _ in range(elements[0].int(_SE_NUM_CHILDREN)):
        counts.append(leaves())
    return counts


def _split(rows: pa.Table, threads: int, learned: Mapping[int, float]) -> list[list[int]]:
    """Top-level columns in up to ``PARTS_PER_THREAD`` x ``threads`` parts, heaviest part first: the pool
    takes them in that order, so a thread that finishes early takes the next part and the threads end close
    together. A column's weight is its encoded bytes per row in the previous row group (``learned``), else
    :func:`_estimated_weight`; columns are dealt heaviest first to the lightest part. No part is empty."""
    weights = sorted(
        (
            (learned[i] * rows.num_rows if i in learned else _estimated_weight(rows.column(i)), i)
            for i in range(rows.num_columns)
        ),
        reverse=True,
    )
    parts: list[list[int]] = [[] for _ in range(max(1, min(PARTS_PER_THREAD * threads, rows.num_columns)))]
    loads = [0.0] * len(parts)
    for weight, i in weights:
        lightest = loads.index(min(loads))
        parts[lightest].append(i)
        loads[lightest] += weight
    order = sorted(range(len(parts)), key=lambda p: -loads[p])
    return [sorted(parts[p]) for p in order if parts[p]]


def _estimated_weight(column: pa.ChunkedArray) -> float:
    """What encoding a column will cost, before any of it is encoded: its in-memory bytes, times the share
    of distinct values in a sample for strings and binaries, since dictionary encoding makes repeated values
    nearly free (a constant file-name column is large in memory and costs nothing to write)."""
    size = float(column.nbytes)
    if not (
        pa.types.is_string(column.type)
        or pa.types.is_large_string(column.type)
        or pa.types.is_binary(column.type)
        or pa.types.is_large_binary(column.type)
    ):
        return size
    sample = column.slice(0, _SAMPLE_ROWS)
    if len(sample) == 0:
        return size
    distinct = int(pc.count_distinct(sample).as_py())
    return size * max(_MIN_DISTINCT_SHARE, distinct / len(sample))


def _chunk_start(meta: Struct) -> int:
    """Where a column chunk begins: its dictionary page if it has one, else its first data page."""
    dictionary = meta.get(_CM_DICTIONARY_PAGE)
    if isinstance(dictionary, int) and dictionary > 0:
        return dictionary
    return meta.int(_CM_DATA_PAGE)


def _moved(column: Struct, delta: int) -> Struct:
    """A column chunk's footer entry with every position in the file moved by ``delta``."""
    meta = Struct(list(column.struct(_CC_META).fields))
    for field_id in (_CM_DATA_PAGE, _CM_INDEX_PAGE, _CM_DICTIONARY_PAGE, _CM_BLOOM):
        value = meta.get(field_id)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            meta.set(field_id, I64, value + delta)
    out = Struct(list(column.fields))
    out.set(_CC_META, STRUCT, meta)
    for field_id in (_CC_FILE_OFFSET, *_CC_OFFSETS):
        value = out.get(field_id)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            out.set(field_id, I64, value + delta)
    return out


def encode_threads(configured: int | None) -> int:
    """The encoding threads to use: the configured number, else the cores available (at most 4: beyond that
    one row group's columns rarely balance, and a Spark executor runs other tasks beside this one)."""
    return configured if configured else min(4, available_cores())


__all__ = ["ColumnParallelWriter", "available_cores", "encode_threads"]
