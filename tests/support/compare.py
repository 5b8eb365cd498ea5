"""Compare two query results row by row, on their full content.

:func:`assert_same_rows` is the judge of conformance tests: the same column names, the same logical types and,
keyed by record key, the same rows with every value equal. Before comparing, values are brought to one
representation so that differences in *how* a value is held, which are not differences in the data, do not
count:

- ``string`` / ``large_string`` / ``string_view``, and the binary equivalents (``fixed_size_binary`` too);
- dictionary-encoded columns and their plain value type;
- timestamps of any unit and of any time zone *label* that hold the same instant (``UTC``, ``+00:00``, ...);
  a naive (local) timestamp and a zoned one are still different types;
- ``decimal128`` and ``decimal256`` of the same precision and scale;
- ``list`` / ``large_list`` / ``list_view`` / ``fixed_size_list``;
- the order of a map's entries and of a struct's fields; NaN equals NaN.

Everything else is data: a different value, an extra or missing row or column, a different integer width.
On failure the AssertionError says which keys only one side has and shows the first differing rows column by
column.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.types as pat

#: Rows shown per category in a failure message.
SHOWN = 5

_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}
_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True, order=True)
class Instant:
    """A timestamp value, as nanoseconds since the epoch (UTC for zoned timestamps, wall clock for naive)."""

    ns: int

    @classmethod
    def parse(cls, text: str) -> Instant:
        """From ISO 8601: zoned (``2020-01-01T00:00:00.001Z``: that instant) or naive (wall clock)."""
        when = dt.datetime.fromisoformat(text.strip())
        if when.tzinfo is not None:
            when = when.astimezone(dt.UTC).replace(tzinfo=None)
        return cls((when - _EPOCH) // dt.timedelta(microseconds=1) * 1_000)

    def __repr__(self) -> str:
        seconds, ns = divmod(self.ns, 1_000_000_000)
        when = _EPOCH + dt.timedelta(seconds=seconds)
        return f"{when.isoformat()}.{ns:09d}"


@dataclass(frozen=True)
class TimeOfDay:
    ns: int

    def __repr__(self) -> str:
        return f"time({self.ns} ns)"


@dataclass(frozen=True)
class Duration:
    ns: int


@dataclass(frozen=True)
class MapValue:
    """A map, its entries sorted so that entry order does not matter."""

    entries: tuple[tuple[Any, Any], ...]

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k!r}: {v!r}" for k, v in self.entries) + "}"


@dataclass(frozen=True)
class StructValue:
    """A struct, its fields sorted by name."""

    fields: tuple[tuple[str, Any], ...]

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{k}={v!r}" for k, v in self.fields) + "}"


class _NaN:
    _instance: _NaN | None = None

    def __new__(cls) -> _NaN:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "NaN"


NAN = _NaN()


# -- types -------------------------------------------------------------------------------------------------


def logical_type(t: pa.DataType) -> str:
    """A type's description with representation-only differences removed (see the module docstring)."""
    if isinstance(t, pa.ExtensionType):
        return logical_type(t.storage_type)
    if pat.is_dictionary(t):
        return logical_type(t.value_type)
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        return "string"
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t) or pat.is_fixed_size_binary(t):
        return "binary"
    if pat.is_timestamp(t):
        return "timestamp[zoned]" if t.tz else "timestamp[naive]"
    if pat.is_date(t):
        return "date"
    if pat.is_time(t):
        return "time"
    if pat.is_duration(t):
        return "duration"
    if pat.is_decimal(t):
        return f"decimal({t.precision}, {t.scale})"
    if pat.is_map(t):
        return f"map<{logical_type(t.key_type)}, {logical_type(t.item_type)}>"
    if _is_list_like(t):
        return f"list<{logical_type(t.value_type)}>"
    if pat.is_struct(t):
        fields = sorted((t.field(i).name, logical_type(t.field(i).type)) for i in range(t.num_fields))
        return "struct<" + ", ".join(f"{n}: {ft}" for n, ft in fields) + ">"
    return str(t)


def _is_list_like(t: pa.DataType) -> bool:
    return bool(
        pat.is_list(t)
        or pat.is_large_list(t)
        or pat.is_fixed_size_list(t)
        or pat.is_list_view(t)
        or pat.is_large_list_view(t)
    )


# -- values ------------------------------------------------------------------------------------------------


def normalized_values(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """The column's values as hashable Python values in one representation per logical type."""
    if isinstance(column, pa.ChunkedArray):
        out: list[Any] = []
        for chunk in column.chunks:
            out.extend(_values(chunk))
        return out
    return _values(column)


def _values(arr: pa.Array) -> list[Any]:
    t = arr.type
    if isinstance(arr, pa.ExtensionArray):
        return _values(arr.storage)
    if pat.is_dictionary(t):
        return _values(arr.dictionary_decode())
    if pat.is_null(t):
        return [None] * len(arr)
    if pat.is_timestamp(t) or pat.is_time(t) or pat.is_duration(t):
        wrap = Instant if pat.is_timestamp(t) else TimeOfDay if pat.is_time(t) else Duration
        factor = _UNIT_NS[t.unit]
        ints = arr.cast(pa.int64() if t.bit_width == 64 else pa.int32()).to_pylist()
        return [None if v is None else wrap(v * factor) for v in ints]
    if pat.is_floating(t):
        return [NAN if isinstance(v, float) and math.isnan(v) else v for v in arr.to_pylist()]
    if pat.is_fixed_size_binary(t) or pat.is_binary_view(t) or pat.is_large_binary(t):
        return [None if v is None else bytes(v) for v in arr.to_pylist()]
    if pat.is_map(t):
        keys = _values(arr.keys)
        items = _values(arr.items)
        offsets = arr.offsets.to_pylist()
        valid = arr.is_valid().to_pylist()
        out: list[Any] = []
        for i, ok in enumerate(valid):
            if not ok:
                out.append(None)
                continue
            lo, hi = offsets[i], offsets[i + 1]
            entries = list(zip(keys[lo:hi], items[lo:hi], strict=True))
            out.append(MapValue(tuple(sorted(entries, key=lambda e: repr(e[0])))))
        return out
    if pat.is_list(t) or pat.is_large_list(t):
        values = _values(arr.values)
        offsets = arr.offsets.to_pylist()
        valid = arr.is_valid().to_pylist()
        return [tuple(values[offsets[i] : offsets[i + 1]]) if ok else None for i, ok in enumerate(valid)]
    if pat.is_fixed_size_list(t) or pat.is_list_view(t) or pat.is_large_list_view(t):
        # Rare shapes: go through a plain list of the same values.
        return _values(arr.cast(pa.large_list(t.value_type)))
    if pat.is_struct(t):
        children = arr.flatten()
        names = [t.field(i).name for i in range(t.num_fields)]
        columns = [_values(c) for c in children]
        valid = arr.is_valid().to_pylist()
        order = sorted(range(len(names)), key=lambda i: names[i])
        return [
            StructValue(tuple((names[j], columns[j][i]) for j in order)) if ok else None
            for i, ok in enumerate(valid)
        ]
    return arr.to_pylist()


# -- rows --------------------------------------------------------------------------------------------------


Key = tuple[Hashable, ...]


def rows_by_key(table: pa.Table, key_columns: Sequence[str]) -> dict[Key, list[dict[str, Any]]]:
    """Normalized rows grouped by the values of ``key_columns`` (a list per key: keys need not be unique)."""
    missing = [k for k in key_columns if k not in table.column_names]
    if missing:
        raise AssertionError(f"key column(s) {missing} not in {table.column_names}")
    names = table.column_names
    columns = [normalized_values(table.column(i)) for i in range(table.num_columns)]
    out: dict[Key, list[dict[str, Any]]] = {}
    for i in range(table.num_rows):
        row = {name: columns[j][i] for j, name in enumerate(names)}
        out.setdefault(tuple(row[k] for k in key_columns), []).append(row)
    return out


def _row_tuple(row: Mapping[str, Any], columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple(row[c] for c in columns)


@dataclass
class RowDiff:
    """What differs between two results; empty when they hold the same rows."""

    ours_rows: int
    theirs_rows: int
    missing_columns: list[str]
    extra_columns: list[str]
    type_differences: list[tuple[str, str, str]]
    only_ours: list[Key]
    only_theirs: list[Key]
    differing: list[tuple[Key, list[dict[str, Any]], list[dict[str, Any]]]]
    compared_columns: list[str]

    def __bool__(self) -> bool:
        return bool(
            self.missing_columns
            or self.extra_columns
            or self.type_differences
            or self.only_ours
            or self.only_theirs
            or self.differing
        )

    def report(self, context: str = "") -> str:
        lines = [f"results differ{': ' + context if context else ''}"]
        lines.append(f"  ours: {self.ours_rows} rows, theirs: {self.theirs_rows} rows")
        if self.missing_columns:
            lines.append(f"  columns missing from ours: {self.missing_columns}")
        if self.extra_columns:
            lines.append(f"  extra columns in ours: {self.extra_columns}")
        for name, ours_t, theirs_t in self.type_differences:
            lines.append(f"  column {name!r} type: ours {ours_t}, theirs {theirs_t}")
        for label, keys in (("only in ours", self.only_ours), ("only in theirs", self.only_theirs)):
            if keys:
                shown = ", ".join(_show_key(k) for k in keys[:SHOWN])
                more = f" (and {len(keys) - SHOWN} more)" if len(keys) > SHOWN else ""
                lines.append(f"  {len(keys)} key(s) {label}: {shown}{more}")
        if self.differing:
            lines.append(f"  {len(self.differing)} key(s) with different rows; the first {SHOWN}:")
            for key, ours, theirs in self.differing[:SHOWN]:
                lines.append(f"    key {_show_key(key)}:")
                if len(ours) != 1 or len(theirs) != 1:
                    lines.append(f"      ours has {len(ours)} row(s) for it, theirs {len(theirs)}")
                if ours and theirs:
                    for column in self.compared_columns:
                        a = [r[column] for r in ours]
                        b = [r[column] for r in theirs]
                        if Counter(map(_hashable, a)) != Counter(map(_hashable, b)):
                            shown_a = a[0] if len(a) == 1 else a
                            shown_b = b[0] if len(b) == 1 else b
                            lines.append(f"      {column}: ours={shown_a!r} theirs={shown_b!r}")
        return "\n".join(lines)


def _hashable(v: Any) -> Any:
    return v if isinstance(v, Hashable) else repr(v)


def _show_key(key: Key) -> str:
    return repr(key[0]) if len(key) == 1 else repr(key)


def diff_rows(
    ours: pa.Table,
    theirs: pa.Table,
    key_columns: Sequence[str],
    *,
    ignore_columns: Iterable[str] = (),
    check_types: bool = True,
) -> RowDiff:
    """Everything that differs between ``ours`` and ``theirs`` (see :func:`assert_same_rows`)."""
    ignored = set(ignore_columns)
    for label, table in (("ours", ours), ("theirs", theirs)):
        dupes = [n for n, c in Counter(table.column_names).items() if c > 1]
        if dupes:
            raise AssertionError(f"{label} has duplicate column names {dupes}")
    ours_cols = [c for c in ours.column_names if c not in ignored]
    theirs_cols = [c for c in theirs.column_names if c not in ignored]
    common = [c for c in theirs_cols if c in ours_cols]
    types: list[tuple[str, str, str]] = []
    if check_types:
        for c in common:
            a, b = logical_type(ours.schema.field(c).type), logical_type(theirs.schema.field(c).type)
            if a != b:
                types.append((c, a, b))
    compared = [c for c in common if c not in {t[0] for t in types}]
    keys = list(key_columns)
    ours_rows = rows_by_key(ours.select(list(dict.fromkeys([*keys, *compared]))), keys)
    theirs_rows = rows_by_key(theirs.select(list(dict.fromkeys([*keys, *compared]))), keys)
    only_ours = sorted((k for k in ours_rows if k not in theirs_rows), key=repr)
    only_theirs = sorted((k for k in theirs_rows if k not in ours_rows), key=repr)
    differing = []
    for k in sorted((k for k in ours_rows if k in theirs_rows), key=repr):
        a = Counter(_row_tuple(r, compared) for r in ours_rows[k])
        b = Counter(_row_tuple(r, compared) for r in theirs_rows[k])
        if a != b:
            differing.append((k, ours_rows[k], theirs_rows[k]))
    return RowDiff(
        ours_rows=ours.num_rows,
        theirs_rows=theirs.num_rows,
        missing_columns=[c for c in theirs_cols if c not in ours_cols],
        extra_columns=[c for c in ours_cols if c not in theirs_cols],
        type_differences=types,
        only_ours=only_ours,
        only_theirs=only_theirs,
        differing=differing,
        compared_columns=compared,
    )


def assert_same_rows(
    ours: pa.Table,
    theirs: pa.Table,
    key_columns: Sequence[str],
    *,
    ignore_columns: Iterable[str] = (),
    check_types: bool = True,
    context: str = "",
) -> None:
    """Assert ``ours`` and ``theirs`` hold the same rows, compared on every column.

    Rows are matched on ``key_columns`` (``_hoodie_record_key``, with ``_hoodie_partition_path`` where keys
    are unique per partition only) and compared as multisets per key, so duplicates count.
    ``ignore_columns`` are left out of the comparison on both sides (name them only where a difference is
    expected and explained).
    """
    diff = diff_rows(ours, theirs, key_columns, ignore_columns=ignore_columns, check_types=check_types)
    if diff:
        raise AssertionError(diff.report(context))


__all__ = [
    "NAN",
    "Duration",
    "Instant",
    "MapValue",
    "RowDiff",
    "StructValue",
    "TimeOfDay",
    "assert_same_rows",
    "diff_rows",
    "logical_type",
    "normalized_values",
    "rows_by_key",
]
