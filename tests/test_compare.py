"""The judge of conformance tests: real differences are caught, representation-only ones are not."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pytest

from support.compare import Instant, assert_same_rows, diff_rows, logical_type, normalized_values

KEY = ["_hoodie_record_key"]


def base() -> pa.Table:
    return pa.table(
        {
            "_hoodie_record_key": pa.array(["a", "b", "c"]),
            "name": pa.array(["x", "y", None]),
            "n": pa.array([1, 2, 3], pa.int64()),
            "ts": pa.array([1_577_836_800_001_000, 0, None], pa.timestamp("us", tz="UTC")),
            "price": pa.array([Decimal("1.50"), Decimal("-2.25"), None], pa.decimal128(10, 2)),
            "blob": pa.array([b"\x00\x01", b"", None], pa.binary()),
            "tags": pa.array([[("k1", 1), ("k2", 2)], None, []], pa.map_(pa.string(), pa.int32())),
            "point": pa.array([{"x": 1.0, "y": math.nan}, None, {"x": 3.0, "y": 4.0}]),
            "list": pa.array([[1, 2], [], None], pa.list_(pa.int32())),
        }
    )


def representation_variant() -> pa.Table:
    """``base()`` with every value held differently, and rows and columns in another order."""
    t = base()
    variant = pa.table(
        {
            "list": pa.array([None, [], [1, 2]], pa.large_list(pa.int32())),
            "point": pa.array(
                [{"y": 4.0, "x": 3.0}, None, {"y": math.nan, "x": 1.0}],
                pa.struct([("y", pa.float64()), ("x", pa.float64())]),
            ),
            "tags": pa.array([[], None, [("k2", 2), ("k1", 1)]], pa.map_(pa.large_string(), pa.int32())),
            "blob": pa.array([None, b"", b"\x00\x01"], pa.large_binary()),
            "price": pa.array([None, Decimal("-2.25"), Decimal("1.5")], pa.decimal256(10, 2)),
            "ts": pa.array([None, 0, 1_577_836_800_001_000_000], pa.timestamp("ns", tz="+00:00")),
            "n": pa.array([3, 2, 1], pa.int64()),
            "name": pa.array([None, "y", "x"]).dictionary_encode(),
            "_hoodie_record_key": pa.array(["c", "b", "a"], pa.large_string()),
        }
    )
    assert variant.num_rows == t.num_rows
    return variant


def test_identical_tables_pass() -> None:
    assert_same_rows(base(), base(), KEY)


def test_representation_only_differences_pass() -> None:
    assert_same_rows(representation_variant(), base(), KEY)
    assert_same_rows(base(), representation_variant(), KEY)


def test_chunking_does_not_matter() -> None:
    t = base()
    chunked = pa.concat_tables([t.slice(0, 1), t.slice(1, 2)])
    assert chunked.column(0).num_chunks == 2
    assert_same_rows(chunked, t, KEY)


def test_a_changed_value_is_caught_and_shown() -> None:
    t = base()
    changed = t.set_column(t.column_names.index("n"), "n", pa.array([1, 20, 3], pa.int64()))
    with pytest.raises(AssertionError) as e:
        assert_same_rows(changed, t, KEY, context="snapshot of t")
    message = str(e.value)
    assert "snapshot of t" in message
    assert "key 'b'" in message
    assert "n: ours=20 theirs=2" in message


@pytest.mark.parametrize(
    ("column", "values", "type_"),
    [
        ("ts", [1_577_836_800_001_001, 0, None], pa.timestamp("us", tz="UTC")),  # 1 µs later
        ("price", [Decimal("1.51"), Decimal("-2.25"), None], pa.decimal128(10, 2)),
        ("name", ["x", "Y", None], pa.string()),
        ("name", ["x", "y", ""], pa.string()),  # empty string is not null
        ("blob", [b"\x00\x02", b"", None], pa.binary()),
    ],
)
def test_value_differences_are_caught(column: str, values: list[object], type_: pa.DataType) -> None:
    t = base()
    changed = t.set_column(t.column_names.index(column), column, pa.array(values, type_))
    diff = diff_rows(changed, t, KEY)
    assert diff
    assert len(diff.differing) == 1


def test_nested_value_differences_are_caught() -> None:
    t = base()
    tags = pa.array([[("k1", 1), ("k2", 3)], None, []], pa.map_(pa.string(), pa.int32()))
    assert diff_rows(t.set_column(t.column_names.index("tags"), "tags", tags), t, KEY)
    point = pa.array([{"x": 1.0, "y": 0.0}, None, {"x": 3.0, "y": 4.0}])
    assert diff_rows(t.set_column(t.column_names.index("point"), "point", point), t, KEY)


def test_missing_and_extra_keys_are_listed() -> None:
    t = base()
    fewer = t.slice(0, 2)
    more = pa.concat_tables([t, t.slice(0, 1).set_column(0, "_hoodie_record_key", pa.array(["z"]))])
    with pytest.raises(AssertionError) as e:
        assert_same_rows(fewer, more, KEY)
    message = str(e.value)
    assert "2 key(s) only in theirs: 'c', 'z'" in message


def test_duplicate_rows_count() -> None:
    t = base()
    doubled = pa.concat_tables([t, t.slice(0, 1)])
    with pytest.raises(AssertionError, match="ours has 2 row"):
        assert_same_rows(doubled, t, KEY)


def test_missing_and_extra_columns_are_named() -> None:
    t = base()
    with pytest.raises(AssertionError) as e:
        assert_same_rows(t.drop_columns(["n"]).append_column("extra", pa.array([1, 2, 3])), t, KEY)
    assert "columns missing from ours: ['n']" in str(e.value)
    assert "extra columns in ours: ['extra']" in str(e.value)


@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (pa.int32(), pa.int64()),
        (pa.timestamp("us"), pa.timestamp("us", tz="UTC")),  # a wall-clock time is not an instant
        (pa.float32(), pa.float64()),
        (pa.decimal128(10, 2), pa.decimal128(12, 2)),
        (pa.string(), pa.binary()),
    ],
)
def test_type_differences_are_data(ours: pa.DataType, theirs: pa.DataType) -> None:
    assert logical_type(ours) != logical_type(theirs)
    a = pa.table({"k": ["a"], "v": pa.array([None], ours)})
    b = pa.table({"k": ["a"], "v": pa.array([None], theirs)})
    with pytest.raises(AssertionError, match="column 'v' type"):
        assert_same_rows(a, b, ["k"])


def test_ignored_columns_are_left_out() -> None:
    t = base()
    changed = t.set_column(t.column_names.index("n"), "n", pa.array([9, 9, 9], pa.int64()))
    assert_same_rows(changed, t, KEY, ignore_columns=["n"])


def test_instant_parse_matches_arrow_values() -> None:
    zoned = pa.array([dt.datetime(2020, 1, 1, 0, 0, 0, 1000, tzinfo=dt.UTC)], pa.timestamp("ms", tz="UTC"))
    naive = pa.array([dt.datetime(2017, 7, 7, 7, 7, 7, 1)], pa.timestamp("us"))
    assert normalized_values(zoned) == [Instant.parse("2020-01-01T00:00:00.001Z")]
    assert normalized_values(naive) == [Instant.parse("2017-07-07T07:07:07.000001")]
    assert repr(Instant.parse("2020-01-01T00:00:00.001Z")) == "2020-01-01T00:00:00.001000000"
