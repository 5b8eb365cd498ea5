"""Key generation: the record key and partition path of each row, as Hudi's key generators print them.

- Record key, one field (``SimpleKeyGenerator``, ``NonpartitionedKeyGenerator``): the field's value as text.
  A null or empty key is an error (Hudi's ``HoodieKeyException``).
- Record key, several fields (``ComplexKeyGenerator``): ``f1:v1,f2:v2``; a null value prints ``__null__``, an
  empty one ``__empty__``; a row whose key fields are all null or empty is an error.
- Partition path: each partition field's value as text, ``__HIVE_DEFAULT_PARTITION__`` when null or empty,
  ``field=value`` with hive-style partitioning, fields joined with ``/``; no partition fields: ``""``.

Values print as Java's ``toString`` would for the common types (integers, strings, booleans ``true`` /
``false``); everything is vectorised with Arrow compute.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import HoodieError, InvalidRecordKey

DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
NULL_KEY = "__null__"
EMPTY_KEY = "__empty__"


def _as_text(table: pa.Table, name: str) -> pa.Array:
    if name not in table.column_names:
        raise HoodieError(f"field {name!r} is not in the data; it has {table.column_names}")
    col = table.column(name).combine_chunks()
    if pa.types.is_string(col.type):
        return col
    return pc.cast(col, pa.string())


def _blank(values: pa.Array) -> pa.Array:
    return pc.fill_null(pc.equal(values, ""), True)


def record_keys(table: pa.Table, fields: Sequence[str]) -> pa.Array:
    """The record key of every row (see the module docstring)."""
    if not fields:
        raise HoodieError("no record key fields")
    if len(fields) == 1:
        values = _as_text(table, fields[0])
        bad = _blank(values)
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            raise InvalidRecordKey(f"record key field {fields[0]!r} is null or empty in row {row}")
        return values
    parts: list[pa.Array | str] = []
    all_blank: pa.Array | None = None
    for i, name in enumerate(fields):
        values = _as_text(table, name)
        blank = _blank(values)
        all_blank = blank if all_blank is None else pc.and_(all_blank, blank)
        shown = pc.if_else(pc.is_null(values), NULL_KEY, pc.if_else(blank, EMPTY_KEY, values))
        parts.append(pc.binary_join_element_wise(("," if i else "") + name + ":", shown, ""))
    assert all_blank is not None
    if pc.any(all_blank).as_py():
        row = pc.index(all_blank, True).as_py()
        raise InvalidRecordKey(f"every record key field {list(fields)} is null or empty in row {row}")
    return pc.binary_join_element_wise(*parts, "")


def partition_paths(table: pa.Table, fields: Sequence[str], *, hive_style: bool = False) -> pa.Array:
    """The partition path of every row (see the module docstring)."""
    if not fields:
        return pa.array([""] * table.num_rows, pa.string())
    parts: list[pa.Array] = []
    for name in fields:
        values = _as_text(table, name)
        shown = pc.if_else(_blank(values), DEFAULT_PARTITION, values)
        if hive_style:
            shown = pc.binary_join_element_wise(f"{name}=", shown, "")
        parts.append(shown)
    if len(parts) == 1:
        return parts[0]
    return pc.binary_join_element_wise(*parts, "/")
