"""Bring the columns of one data file (base file or log batch) to the table's schema before merging.

Files of one table need not agree on types: a column's type may have been evolved (``long`` to ``string``,
``int`` to ``long``, ``float`` to ``double``), a column may have been added after a file was written, and
writers before Hudi 1.1 stored some logical types wrongly. Hudi reads every file with the table's (latest)
schema; so do we:

- a column the file lacks is added as nulls; a column the table lacks is kept, after the table's columns;
- a column of another type is cast to the table's type (numeric widening, anything to string, as Hudi's
  schema evolution allows);
- logical-type repair, as Hudi 1.1 does on read: a ``timestamp-millis`` column that a file stores as
  ``TIMESTAMP(MICROS)`` holds milliseconds (writers up to 1.0 mislabeled it), and ``local-timestamp-*``
  columns stored as plain ``int64`` hold epoch values in the table's unit. Both are reinterpreted.

Structs, lists and maps are conformed field by field. A cast that cannot be done raises
:class:`~hoodie.errors.SchemaMismatch` naming the column and both types.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.types as pat

from hoodie.errors import SchemaMismatch


def conform_table(table: pa.Table, target: pa.Schema, *, source: str = "") -> pa.Table:
    """``table`` with every column of ``target`` in ``target``'s type and order, extra columns after."""
    if table.schema.equals(target, check_metadata=False):
        return table
    columns: list[pa.ChunkedArray] = []
    fields: list[pa.Field] = []
    for field in target:
        if field.name in table.column_names:
            col = table.column(field.name)
            try:
                columns.append(_conform_chunked(col, field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
                where = f" in {source}" if source else ""
                raise SchemaMismatch(
                    f"column {field.name!r}{where} is {col.type}, which cannot be read as the table's "
                    f"{field.type}: {e}"
                ) from e
        else:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, field.type)], field.type))
        fields.append(pa.field(field.name, field.type, nullable=True))
    for name in table.column_names:
        if name not in target.names:
            columns.append(table.column(name))
            fields.append(table.schema.field(name))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _conform_chunked(col: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    if col.type == target:
        return col
    chunks = [_conform_array(c, target) for c in col.chunks]
    return pa.chunked_array(chunks, target)


def _conform_array(arr: pa.Array, target: pa.DataType) -> pa.Array:
    src = arr.type
    if src == target:
        return arr
    if pat.is_dictionary(src):
        return _conform_array(arr.dictionary_decode(), target)
    if pat.is_timestamp(target):
        if pat.is_integer(src):
            # local-timestamp-* stored as plain int64: epoch values in the table's unit.
            return arr.cast(pa.int64()).view(target)
        if pat.is_timestamp(src) and src.unit == "us" and target.unit == "ms":
            # timestamp-millis mislabeled as MICROS by writers before Hudi 1.1: the values are milliseconds.
            return arr.view(pa.int64()).view(target)
        if pat.is_timestamp(src) and (src.tz is None) == (target.tz is None):
            return arr.cast(target)
        if pat.is_timestamp(src):
            return arr.view(pa.int64()).view(pa.timestamp(src.unit, target.tz)).cast(target)
    if pat.is_struct(target) and pat.is_struct(src):
        assert isinstance(arr, pa.StructArray)
        names = {src.field(i).name: i for i in range(src.num_fields)}
        children = []
        for i in range(target.num_fields):
            tf = target.field(i)
            if tf.name in names:
                children.append(_conform_array(arr.field(names[tf.name]), tf.type))
            else:
                children.append(pa.nulls(len(arr), tf.type))
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if _is_list(target) and _is_list(src):
        if pat.is_large_list(src) != pat.is_large_list(target):
            kind = pa.large_list if pat.is_large_list(target) else pa.list_
            arr = arr.cast(kind(src.value_type))
        assert isinstance(arr, pa.ListArray | pa.LargeListArray)
        values = _conform_array(arr.values, target.value_type)
        mask = arr.is_null() if arr.null_count else None
        cls = pa.LargeListArray if pat.is_large_list(target) else pa.ListArray
        return cls.from_arrays(arr.offsets, values, type=target, mask=mask)
    if pat.is_map(target) and pat.is_map(src):
        assert isinstance(arr, pa.MapArray)
        keys = _conform_array(arr.keys, target.key_type)
        items = _conform_array(arr.items, target.item_type)
        mask = arr.is_null() if arr.null_count else None
        return pa.MapArray.from_arrays(arr.offsets, keys, items, type=target, mask=mask)
    return arr.cast(target)


def _is_list(t: pa.DataType) -> bool:
    return bool(pat.is_list(t) or pat.is_large_list(t))
