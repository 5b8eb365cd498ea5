"""The log-only merge of a log compaction: a slice's log steps reduced to as few records as read the same.

The base file is not read (Hudi's log compaction reads log files only), so the result must merge with any base
file exactly as the steps it replaces do under :func:`hoodie.read.merge.merge_records`:

- ``COMMIT_TIME_ORDERING`` (or no ordering field): the latest version of each key wins, so the winner alone
  stands for all of them: a data row (soft-deleted rows stay data rows) or a delete.
- ``EVENT_TIME_ORDERING``: the greatest ordering value wins, ties going to the later version, and a delete
  without an ordering value (null, or Hudi's default 0) voids every version written before it, the base
  file's too. Versions before a key's last such delete are dropped; the winner of the rest stands for them.
  When the rest is not empty, the void itself must stay too (it still voids the base record, which a later
  version with a lower ordering value would not beat): it is kept as a delete *before* the winner.

So the result is three steps, in this order: the voids (deletes), the winning rows, the winning deletes. Each
key appears at most once among the winners; deletes keep their ordering values as read (one common Arrow
type), rows keep every column, meta columns included (Hudi's ``preserveHoodieMetadata``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config import RecordMergeMode
from hoodie.errors import HoodieError
from hoodie.read.merge import Deletes, MergeInput, record_keys


@dataclass(frozen=True)
class ReducedLog:
    """A log reduced (module doc): ``voids`` then ``rows`` then ``deletes``."""

    voids: Deletes
    rows: pa.Table | None
    deletes: Deletes

    @property
    def steps(self) -> list[MergeInput]:
        """The result as merge steps, in order (empty ones left out)."""
        out = []
        if len(self.voids.keys):
            out.append(MergeInput(deletes=self.voids))
        if self.rows is not None and self.rows.num_rows:
            out.append(MergeInput(data=self.rows))
        if len(self.deletes.keys):
            out.append(MergeInput(deletes=self.deletes))
        return out

    @property
    def record_count(self) -> int:
        """Rows and deleted keys written."""
        return (
            len(self.voids.keys)
            + (self.rows.num_rows if self.rows is not None else 0)
            + len(self.deletes.keys)
        )


def reduce_log(
    steps: Sequence[MergeInput],
    *,
    mode: RecordMergeMode,
    key_fields: Sequence[str] = (),
    ordering_field: str | None = None,
    ordering_type: pa.DataType | None = None,
) -> ReducedLog:
    """Reduce log ``steps`` (data and delete batches in log order, data conformed to the table schema) as the
    module doc says. ``ordering_type`` is the ordering field's type in the table schema (``None``: the
    schema has no such field, and versions are ordered by commit time, as the merge then does)."""
    data_parts = [s.data for s in steps if s.data is not None and s.data.num_rows]
    data = pa.concat_tables(data_parts, promote_options="permissive") if data_parts else None
    delete_steps = [s.deletes for s in steps if s.deletes is not None and len(s.deletes.keys)]
    ordering_values = _common(
        [d.ordering_values for d in delete_steps],
    )
    delete_keys = (
        pa.chunked_array([d.keys.cast(pa.string()) for d in delete_steps], pa.string()).combine_chunks()
        if delete_steps
        else pa.array([], pa.string())
    )
    event_time = mode is RecordMergeMode.EVENT_TIME_ORDERING and ordering_field is not None
    ord_type = ordering_type if event_time else None

    # Candidates in log order: pos is the global position; row indexes data rows (-1 for a delete), dele
    # deleted keys (-1 for a row).
    keys: list[pa.Array] = []
    kinds: list[np.ndarray] = []
    index: list[np.ndarray] = []
    ords: list[pa.Array] = []
    defaults: list[np.ndarray] = []
    row = dele = 0
    for s in steps:
        if s.data is not None and s.data.num_rows:
            n = s.data.num_rows
            keys.append(record_keys(s.data, key_fields))
            kinds.append(np.zeros(n, dtype=np.int8))
            index.append(np.arange(row, row + n, dtype=np.int64))
            if ord_type is not None:
                assert ordering_field is not None
                ords.append(_ordering_column(s.data, ordering_field, ord_type))
            defaults.append(np.zeros(n, dtype=np.bool_))
            row += n
        elif s.deletes is not None and len(s.deletes.keys):
            n = len(s.deletes.keys)
            keys.append(s.deletes.keys.cast(pa.string()))
            kinds.append(np.ones(n, dtype=np.int8))
            index.append(np.arange(dele, dele + n, dtype=np.int64))
            if ord_type is not None:
                ords.append(_cast_or_null(s.deletes.ordering_values, ord_type))
                defaults.append(_is_default(s.deletes.ordering_values))
            else:
                defaults.append(np.ones(n, dtype=np.bool_))
            dele += n
    empty = ReducedLog(_no_deletes(ordering_values), None, _no_deletes(ordering_values))
    if not keys:
        return empty
    columns: dict[str, pa.Array] = {
        "key": pa.concat_arrays([k.cast(pa.string()) for k in keys]),
        "pos": pa.array(np.arange(sum(len(k) for k in keys), dtype=np.int64)),
        "kind": pa.array(np.concatenate(kinds)),
        "index": pa.array(np.concatenate(index)),
        "default": pa.array(np.concatenate(defaults)),
    }
    if ord_type is not None:
        columns["ord"] = pa.concat_arrays(ords)
    cand = pa.table(columns)

    voids = np.empty(0, dtype=np.int64)  # delete indexes of voids kept before their key's winner
    if ord_type is None:
        last = cand.group_by("key", use_threads=False).aggregate([("pos", "max")]).column("pos_max")
        win = cand.take(pc.index_in(last, value_set=cand.column("pos")))
    else:
        dd = cand.filter(cand.column("default"))
        if dd.num_rows:
            last_dd = dd.group_by("key", use_threads=False).aggregate([("pos", "max")])
            last_dd = last_dd.rename_columns(["key", "void_at"])
            cand = cand.join(last_dd, keys="key", join_type="left outer")
            void_at = cand.column("void_at")
            after = pc.fill_null(pc.greater(cand.column("pos"), void_at), True)
            voided_keys = pc.unique(cand.filter(pc.and_(after, pc.is_valid(void_at))).column("key"))
            # The void of a key with later versions is kept ahead of them; one without any is its winner.
            at_void = cand.filter(pc.fill_null(pc.equal(cand.column("pos"), void_at), False))
            kept = at_void.filter(pc.is_in(at_void.column("key"), value_set=voided_keys))
            voids = kept.sort_by("pos").column("index").to_numpy()
            alone = at_void.filter(pc.invert(pc.is_in(at_void.column("key"), value_set=voided_keys)))
            cand = pa.concat_tables([cand.filter(after).select(alone.column_names), alone])
        order = pc.sort_indices(
            cand, sort_keys=[("key", "ascending"), ("ord", "ascending", "at_start"), ("pos", "ascending")]
        )
        ranked = cand.take(order)
        k = ranked.column("key").combine_chunks()
        n = len(k)
        if n > 1:  # sorted by key, the last candidate of each key is its winner
            changes = pc.fill_null(pc.not_equal(k.slice(0, n - 1), k.slice(1)), True)
            win = ranked.filter(pa.concat_arrays([changes, pa.array([True])]))
        else:
            win = ranked
    win = win.sort_by("pos")
    kind = win.column("kind").to_numpy()
    idx = win.column("index").to_numpy()
    rows = data.take(pa.array(idx[kind == 0])) if data is not None else None
    return ReducedLog(
        _take(delete_keys, ordering_values, voids),
        rows,
        _take(delete_keys, ordering_values, idx[kind == 1]),
    )


def _ordering_column(t: pa.Table, field: str, ord_type: pa.DataType) -> pa.Array:
    """A data batch's ordering values as the merge compares them (null where the batch lacks the field)."""
    if field not in t.column_names:
        return pa.nulls(t.num_rows, ord_type)
    return t.column(field).combine_chunks().cast(ord_type)


def _take(keys: pa.Array, ordering_values: pa.Array, at: np.ndarray) -> Deletes:
    sel = pa.array(at, pa.int64())
    return Deletes(keys.take(sel), ordering_values.take(sel))


def _no_deletes(ordering_values: pa.Array) -> Deletes:
    return Deletes(pa.array([], pa.string()), ordering_values.slice(0, 0))


def _common(arrays: Sequence[pa.Array]) -> pa.Array:
    """The delete blocks' ordering values as one array: their types unified (a block whose values are all
    null has type null; integers widen), else :class:`HoodieError`."""
    if not arrays:
        return pa.array([], pa.null())
    arrays = [a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays]
    try:
        target = (
            pa.unify_schemas([pa.schema([("v", a.type)]) for a in arrays], promote_options="permissive")
            .field("v")
            .type
        )
        return pa.concat_arrays([a.cast(target) for a in arrays])
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        types = sorted({str(a.type) for a in arrays})
        raise HoodieError(
            f"delete blocks hold ordering values of types {types} with no common type: {e}"
        ) from e


def _cast_or_null(values: pa.Array, target: pa.DataType) -> pa.Array:
    """As the merge compares a delete's ordering value: cast to the ordering field's type, null where not."""
    try:
        return values.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.nulls(len(values), target)


def _is_default(values: pa.Array) -> np.ndarray:
    """Where a delete carries no ordering value: null, or Hudi's default 0 (as the merge tells them)."""
    nulls = pc.is_null(values)
    if pa.types.is_integer(values.type) or pa.types.is_floating(values.type):
        nulls = pc.or_(nulls, pc.fill_null(pc.equal(values, 0), False))
    return np.asarray(nulls.to_numpy(zero_copy_only=False), dtype=np.bool_)


__all__ = ["ReducedLog", "reduce_log"]
