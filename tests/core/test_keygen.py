from __future__ import annotations

import pyarrow as pa
import pytest

from hoodie.errors import InvalidRecordKey
from hoodie.keygen import DEFAULT_PARTITION, partition_paths, record_keys


def test_single_field_key_is_the_value_as_text() -> None:
    t = pa.table({"id": pa.array([1, 22], pa.int64())})
    assert record_keys(t, ["id"]).to_pylist() == ["1", "22"]


def test_complex_key_names_fields_and_marks_null_and_empty() -> None:
    t = pa.table({"a": ["x", None, ""], "b": [1, 2, 3]})
    assert record_keys(t, ["a", "b"]).to_pylist() == ["a:x,b:1", "a:__null__,b:2", "a:__empty__,b:3"]


@pytest.mark.parametrize("values", [["ok", None], ["ok", ""]])
def test_null_or_empty_single_key_is_refused_naming_the_row(values: list[str | None]) -> None:
    with pytest.raises(InvalidRecordKey, match="row 1"):
        record_keys(pa.table({"id": values}), ["id"])


def test_complex_key_all_blank_is_refused() -> None:
    with pytest.raises(InvalidRecordKey, match="every record key field"):
        record_keys(pa.table({"a": [None], "b": [""]}), ["a", "b"])


def test_partition_paths_plain_hive_nested_and_default() -> None:
    t = pa.table({"city": ["sf", None, ""], "day": [1, 2, 3]})
    assert partition_paths(t, ["city"]).to_pylist() == ["sf", DEFAULT_PARTITION, DEFAULT_PARTITION]
    assert partition_paths(t, ["city", "day"], hive_style=True).to_pylist() == [
        "city=sf/day=1",
        f"city={DEFAULT_PARTITION}/day=2",
        f"city={DEFAULT_PARTITION}/day=3",
    ]
    assert partition_paths(t, []).to_pylist() == ["", "", ""]
