"""Record merging: reconcile the versions of each record in a file slice, vectorised with Arrow.

Inputs are the base file's rows and the log's data and delete batches, in log order. Every row becomes a
*candidate* with a global position (base rows first, then each log batch in scan order); the winner of each
record key is chosen by the merge mode:

- ``COMMIT_TIME_ORDERING``: the latest write wins (greatest position).
- ``EVENT_TIME_ORDERING``: the greatest ordering (precombine) value wins, ties going to the later write. A
  delete carrying an ordering value competes like a record (it wins on greater *or equal* value, being later);
  a delete without one (null, or Hudi's default ``0``) removes every version written before it, and versions
  written after it compete as usual.

A winner that is a delete (a delete block, or a row with ``_hoodie_is_deleted = true``) removes the record.
The merge is a function of the multiset of (position, value) candidates, so it is deterministic; for a fixed
log order it is the same as merging the versions one by one, which is what Hudi's log scanner does.

A base file may hold a record key more than once (``insert`` and ``bulk_insert`` keep duplicates). The log's
versions of such a key meet its *first* row in the base file only: later rows of the key pass through as
they are. That is what Hudi's readers do, in 0.x (``RecordMergingFileIterator`` removes the log record the
first base row of its key takes) and in 1.x (``KeyBasedFileGroupRecordBuffer.hasNextBaseRecord``, likewise);
so a delete removes one copy, and an update rewrites one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config import RecordMergeMode

RECORD_KEY = "_hoodie_record_key"
IS_DELETED = "_hoodie_is_deleted"


@dataclass(frozen=True)
class Deletes:
    """Keys deleted by one delete block, with their ordering values (null when the writer gave none)."""

    keys: pa.Array
    ordering_values: pa.Array


@dataclass(frozen=True)
class MergeInput:
    """One step of the log, in order: a data batch or a delete batch (exactly one is set)."""

    data: pa.Table | None = None
    deletes: Deletes | None = None


def record_keys(table: pa.Table, key_fields: Sequence[str]) -> pa.Array:
    """The record key of every row: ``_hoodie_record_key`` when present, else built from the key fields the
    way Hudi's key generators print them (one field: its value; several: ``f1:v1,f2:v2``)."""
    if RECORD_KEY in table.column_names:
        return table.column(RECORD_KEY).combine_chunks().cast(pa.string())
    if not key_fields:
        raise ValueError("table has no _hoodie_record_key column and no record key fields")
    missing = [f for f in key_fields if f not in table.column_names]
    if missing:
        raise ValueError(f"record key field(s) {missing} not in the data")
    values = [pc.cast(table.column(f), pa.string()) for f in key_fields]
    if len(values) == 1:
        return values[0].combine_chunks()
    parts: list[pa.Array | str] = []
    for i, (name, v) in enumerate(zip(key_fields, values, strict=True)):
        prefix = ("," if i else "") + name + ":"
        parts.append(pc.binary_join_element_wise(prefix, pc.fill_null(v, "null"), ""))
    return pc.binary_join_element_wise(*parts, "").combine_chunks()


def _is_default_ordering(values: pa.Array) -> pa.Array:
    """True where a delete's ordering value is absent (null) or Hudi's default 0."""
    nulls = pc.is_null(values)
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        return pc.or_(nulls, pc.fill_null(pc.equal(values, 0), False))
    return nulls


def merge_records(
    base: pa.Table | None,
    log: Sequence[MergeInput],
    *,
    mode: RecordMergeMode,
    key_fields: Sequence[str] = (),
    ordering_field: str | None = None,
) -> pa.Table:
    """Merge a slice's base rows and log batches into the latest version of each live record.

    Returns rows in the unified schema of the inputs (``pa.concat_tables`` with permissive promotion: columns
    missing from a batch come back null). Rows keep base-file order for keys that were not updated.
    """
    data_parts = ([base] if base is not None else []) + [m.data for m in log if m.data is not None]
    has_deletes = any(m.deletes is not None and len(m.deletes.keys) for m in log)
    if not data_parts:
        raise ValueError("nothing to merge: no base file and no data blocks")
    if len(data_parts) == 1 and not has_deletes and base is not None:
        return drop_deleted_rows(base)

    data = (
        pa.concat_tables(data_parts, promote_options="permissive") if len(data_parts) > 1 else data_parts[0]
    )
    event_time = mode is RecordMergeMode.EVENT_TIME_ORDERING and ordering_field is not None
    if event_time and ordering_field not in data.column_names:
        event_time = False

    # Candidates: one row per data row and per deleted key, with its global position in log order. Base rows
    # whose key no log batch names pass through untouched (they keep their place), so only the base rows the
    # log touches compete: the work follows the size of the log, not of the base file.
    keys: list[pa.Array] = []
    positions: list[pa.Array] = []
    data_index: list[pa.Array] = []
    ords: list[pa.Array] = []
    default_delete: list[pa.Array] = []
    pos = 0
    row = 0
    ord_type = data.schema.field(ordering_field).type if event_time and ordering_field else None
    untouched = np.empty(0, dtype=np.int64)

    def add_data(t: pa.Table, t_keys: pa.Array | None = None, only: np.ndarray | None = None) -> None:
        nonlocal pos, row
        n = t.num_rows
        k = t_keys if t_keys is not None else record_keys(t, key_fields)
        at = np.arange(n, dtype=np.int64) if only is None else only
        sel = None if only is None else pa.array(only)
        keys.append(k if sel is None else k.take(sel))
        positions.append(pa.array(at + pos))
        data_index.append(pa.array(at + row))
        if ord_type is not None and ordering_field is not None:
            col = t.column(ordering_field) if ordering_field in t.column_names else pa.nulls(n, ord_type)
            col = col.combine_chunks().cast(ord_type) if n else pa.array([], ord_type)
            ords.append(col if sel is None else col.take(sel))
        default_delete.append(pa.array(np.zeros(len(at), dtype=np.bool_)))
        pos += n
        row += n

    data_keys = {id(m): record_keys(m.data, key_fields) for m in log if m.data is not None}
    if base is not None:
        base_keys = record_keys(base, key_fields)
        log_key_parts = list(data_keys.values())
        log_key_parts += [m.deletes.keys.cast(pa.string()) for m in log if m.deletes is not None]
        named = pc.unique(pa.chunked_array(log_key_parts, pa.string())) if log_key_parts else None
        touched = (
            pc.is_in(base_keys, value_set=named).to_numpy(zero_copy_only=False)
            if named is not None and len(named)
            else np.zeros(base.num_rows, dtype=bool)
        )
        if touched.any():
            # Only the first row of each key meets the log (see the module doc).
            touched &= first_occurrences(base_keys)
        untouched = np.flatnonzero(~touched)
        add_data(base, base_keys, np.flatnonzero(touched))
    for m in log:
        if m.data is not None:
            add_data(m.data, data_keys[id(m)])
        elif m.deletes is not None and len(m.deletes.keys):
            n = len(m.deletes.keys)
            keys.append(m.deletes.keys.cast(pa.string()))
            positions.append(pa.array(np.arange(pos, pos + n, dtype=np.int64)))
            data_index.append(pa.nulls(n, pa.int64()))
            if ord_type is not None:
                ords.append(_cast_or_null(m.deletes.ordering_values, ord_type))
                default_delete.append(_is_default_ordering(m.deletes.ordering_values))
            else:
                default_delete.append(pa.array(np.ones(n, dtype=np.bool_)))
            pos += n

    cand_cols = {
        "key": pa.concat_arrays(keys),
        "pos": pa.concat_arrays(positions),
        "idx": pa.concat_arrays(data_index),
        "default_delete": pa.concat_arrays(default_delete),
    }
    if ord_type is not None:
        cand_cols["ord"] = pa.concat_arrays(ords)
    cand = pa.table(cand_cols)

    # Where each key was first seen: the merged rows keep that order (base-file order, then new keys).
    first_seen = cand.group_by("key", use_threads=False).aggregate([("pos", "min")])
    if ord_type is None:
        # The winner is the candidate with the greatest position; positions are increasing in ``cand``.
        win_pos = cand.group_by("key", use_threads=False).aggregate([("pos", "max")]).column("pos_max")
        win = cand.take(pc.index_in(win_pos, value_set=cand.column("pos")))
    else:
        # A delete without an ordering value voids every version written before it.
        dd = cand.filter(cand.column("default_delete"))
        if dd.num_rows:
            last_dd = dd.group_by("key").aggregate([("pos", "max")]).rename_columns(["key", "void_before"])
            cand = cand.join(last_dd, keys="key", join_type="left outer")
            void = cand.column("void_before")
            keep = pc.or_(pc.is_null(void), pc.greater_equal(cand.column("pos"), void))
            cand = cand.filter(pc.fill_null(keep, True))
            # Such a delete ranks below any later version whatever its value.
            ord_col = pc.if_else(
                cand.column("default_delete"), pa.nulls(cand.num_rows, ord_type), cand.column("ord")
            )
            cand = cand.set_column(cand.column_names.index("ord"), "ord", ord_col)
        order = pc.sort_indices(
            cand,
            sort_keys=[
                ("key", "ascending", "at_start"),
                ("ord", "ascending", "at_start"),
                ("pos", "ascending"),
            ],
        )
        sorted_c = cand.take(order)
        k = sorted_c.column("key").combine_chunks()
        n = len(k)
        if n <= 1:
            win = sorted_c
        else:
            # Sorted by key, the last candidate of each key is its winner.
            changes = pc.fill_null(pc.not_equal(k.slice(0, n - 1), k.slice(1)), True)
            win = sorted_c.filter(pa.concat_arrays([changes, pa.array([True])]))

    # Winners that are data rows, and the untouched base rows, in first-seen order (base rows are first seen
    # at their own position); winners that are deletes have no data row.
    firsts = first_seen.column("pos_min").take(
        pc.index_in(win.column("key"), value_set=first_seen.column("key"))
    )
    all_firsts = pa.concat_arrays([pa.array(untouched), firsts.combine_chunks().cast(pa.int64())])
    all_rows = pa.concat_arrays([pa.array(untouched), win.column("idx").combine_chunks().cast(pa.int64())])
    rows = pc.drop_null(all_rows.take(pc.sort_indices(all_firsts)))
    return drop_deleted_rows(data.take(rows))


def first_occurrences(keys: pa.Array) -> np.ndarray:
    """A mask of the rows whose key has not occurred in an earlier row."""
    n = len(keys)
    if n <= 1:
        return np.ones(n, dtype=bool)
    index = pa.table({"k": keys, "i": pa.array(np.arange(n, dtype=np.int64))})
    firsts = index.group_by("k", use_threads=False).aggregate([("i", "min")]).column("i_min")
    mask = np.zeros(n, dtype=bool)
    mask[firsts.to_numpy()] = True
    return mask


def drop_deleted_rows(t: pa.Table) -> pa.Table:
    """Rows without ``_hoodie_is_deleted`` set (Hudi's soft deletes)."""
    if IS_DELETED in t.column_names:
        flag = t.column(IS_DELETED)
        if pa.types.is_boolean(flag.type) and pc.any(flag).as_py():
            return t.filter(pc.invert(pc.fill_null(flag, False)))
    return t


def _cast_or_null(values: pa.Array, target: pa.DataType) -> pa.Array:
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(len(values), target)
