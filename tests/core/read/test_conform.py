from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from hoodie.errors import SchemaMismatch
from hoodie.read.conform import conform_table

MS_UTC = pa.timestamp("ms", tz="UTC")


def test_same_schema_is_returned_as_is() -> None:
    t = pa.table({"a": [1, 2]})
    assert conform_table(t, t.schema) is t


def test_order_missing_and_extra_columns() -> None:
    t = pa.table({"extra": ["x"], "b": [2], "a": [1]})
    target = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("added", pa.string())])
    out = conform_table(t, target)
    assert out.column_names == ["a", "b", "added", "extra"]
    assert out.column("added").to_pylist() == [None]


def test_evolved_types_are_cast() -> None:
    t = pa.table({"p": pa.array([2024, None], pa.int64()), "i": pa.array([1, 2], pa.int32())})
    target = pa.schema([("p", pa.string()), ("i", pa.int64())])
    out = conform_table(t, target)
    assert out.column("p").to_pylist() == ["2024", None]
    assert out.schema.field("i").type == pa.int64()


def test_millis_mislabeled_as_micros_are_reinterpreted() -> None:
    millis = 1577836800001  # 2020-01-01T00:00:00.001Z, stored under a MICROS annotation
    t = pa.table({"ts": pa.array([millis, None], pa.timestamp("us", tz="UTC"))})
    out = conform_table(t, pa.schema([("ts", MS_UTC)]))
    assert out.column("ts").to_pylist()[0] == dt.datetime(2020, 1, 1, 0, 0, 0, 1000, tzinfo=dt.UTC)
    assert out.column("ts").to_pylist()[1] is None


def test_local_timestamps_stored_as_int64_take_the_table_unit() -> None:
    t = pa.table({"ms": pa.array([1432125296001]), "us": pa.array([1499411227000001])})
    target = pa.schema([("ms", pa.timestamp("ms")), ("us", pa.timestamp("us"))])
    out = conform_table(t, target).to_pylist()[0]
    assert out == {
        "ms": dt.datetime(2015, 5, 20, 12, 34, 56, 1000),
        "us": dt.datetime(2017, 7, 7, 7, 7, 7, 1),
    }


def test_nested_struct_list_and_map_are_conformed_field_by_field() -> None:
    struct = pa.array([{"x": 1, "ts": 5}, None], pa.struct([("x", pa.int32()), ("ts", pa.int64())]))
    lists = pa.array([[1, 2], None], pa.list_(pa.int32()))
    maps = pa.array([[("k", 1)], None], pa.map_(pa.string(), pa.int32()))
    t = pa.table({"s": struct, "l": lists, "m": maps})
    target = pa.schema(
        [
            ("s", pa.struct([("x", pa.int64()), ("ts", pa.timestamp("ms")), ("new", pa.string())])),
            ("l", pa.list_(pa.int64())),
            ("m", pa.map_(pa.string(), pa.int64())),
        ]
    )
    out = conform_table(t, target)
    assert out.schema == target
    rows = out.to_pylist()
    assert rows[0]["s"] == {"x": 1, "ts": dt.datetime(1970, 1, 1, 0, 0, 0, 5000), "new": None}
    assert rows[0]["l"] == [1, 2]
    assert rows[0]["m"] == [("k", 1)]
    assert rows[1] == {"s": None, "l": None, "m": None}


def test_impossible_cast_names_column_types_and_source() -> None:
    t = pa.table({"n": ["not a number"]})
    with pytest.raises(SchemaMismatch, match=r"'n' in part/f\.parquet is string.*int64"):
        conform_table(t, pa.schema([("n", pa.int64())]), source="part/f.parquet")
