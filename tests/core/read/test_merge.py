from __future__ import annotations

import pyarrow as pa
import pytest

from hoodie.config import RecordMergeMode
from hoodie.read.merge import Deletes, MergeInput, merge_records, record_keys

EVENT = RecordMergeMode.EVENT_TIME_ORDERING
COMMIT = RecordMergeMode.COMMIT_TIME_ORDERING


def rows(keys: list[str], ts: list[int], vals: list[str]) -> pa.Table:
    return pa.table({"_hoodie_record_key": keys, "ts": pa.array(ts, pa.int64()), "v": vals})


def as_dict(t: pa.Table) -> dict[str, tuple[int, str]]:
    d = t.to_pydict()
    return {k: (ts, v) for k, ts, v in zip(d["_hoodie_record_key"], d["ts"], d["v"], strict=True)}


def deletes(keys: list[str], ords: list[int | None]) -> MergeInput:
    return MergeInput(deletes=Deletes(pa.array(keys), pa.array(ords, pa.int64())))


BASE = rows(["a", "b", "c"], [10, 10, 10], ["a0", "b0", "c0"])


def test_commit_time_latest_write_wins_whatever_the_ordering_value() -> None:
    log = [
        MergeInput(data=rows(["a", "b"], [5, 20], ["a1", "b1"])),
        MergeInput(data=rows(["a"], [1], ["a2"])),
    ]
    out = merge_records(BASE, log, mode=COMMIT)
    assert as_dict(out) == {"a": (1, "a2"), "b": (20, "b1"), "c": (10, "c0")}


def test_event_time_greatest_ordering_value_wins_ties_to_later() -> None:
    log = [MergeInput(data=rows(["a", "b", "c"], [5, 20, 10], ["a1", "b1", "c1"]))]
    out = merge_records(BASE, log, mode=EVENT, ordering_field="ts")
    assert as_dict(out) == {"a": (10, "a0"), "b": (20, "b1"), "c": (10, "c1")}


def test_duplicates_within_one_block() -> None:
    log = [MergeInput(data=rows(["a", "a", "a"], [30, 50, 40], ["x", "y", "z"]))]
    assert as_dict(merge_records(BASE, log, mode=EVENT, ordering_field="ts"))["a"] == (50, "y")
    assert as_dict(merge_records(BASE, log, mode=COMMIT))["a"] == (40, "z")


def test_deletes_commit_time() -> None:
    log = [MergeInput(data=rows(["d"], [1], ["d1"])), deletes(["a", "d", "zz"], [None, None, None])]
    out = merge_records(BASE, log, mode=COMMIT)
    assert as_dict(out) == {"b": (10, "b0"), "c": (10, "c0")}


def test_event_time_delete_with_ordering_value_competes() -> None:
    # a: delete at 5 loses to the stored 10; b: delete at 10 wins the tie (later); c: default delete wins.
    out = merge_records(BASE, [deletes(["a", "b", "c"], [5, 10, 0])], mode=EVENT, ordering_field="ts")
    assert as_dict(out) == {"a": (10, "a0")}


def test_default_delete_voids_earlier_versions_but_not_later_ones() -> None:
    log = [deletes(["a", "b"], [None, None]), MergeInput(data=rows(["a"], [1], ["a-reinserted"]))]
    out = merge_records(BASE, log, mode=EVENT, ordering_field="ts")
    assert as_dict(out) == {"a": (1, "a-reinserted"), "c": (10, "c0")}


def test_is_deleted_column() -> None:
    log = [
        MergeInput(
            data=pa.table(
                {
                    "_hoodie_record_key": ["b"],
                    "ts": pa.array([11], pa.int64()),
                    "v": ["x"],
                    "_hoodie_is_deleted": [True],
                }
            )
        )
    ]
    out = merge_records(BASE, log, mode=EVENT, ordering_field="ts")
    assert sorted(out.column("_hoodie_record_key").to_pylist()) == ["a", "c"]


def test_schema_evolution_adds_null_column_and_keeps_base_order() -> None:
    newer = pa.table(
        {"_hoodie_record_key": ["b"], "ts": pa.array([11], pa.int64()), "v": ["b1"], "extra": [1]}
    )
    out = merge_records(BASE, [MergeInput(data=newer)], mode=COMMIT)
    assert out.column_names == ["_hoodie_record_key", "ts", "v", "extra"]
    assert out.column("_hoodie_record_key").to_pylist() == ["a", "b", "c"]
    assert out.column("extra").to_pylist() == [None, 1, None]


def test_log_only_slice() -> None:
    out = merge_records(
        None, [MergeInput(data=rows(["x", "x"], [1, 2], ["x1", "x2"]))], mode=EVENT, ordering_field="ts"
    )
    assert as_dict(out) == {"x": (2, "x2")}


@pytest.mark.parametrize("mode", [COMMIT, EVENT])
def test_merge_is_idempotent(mode: RecordMergeMode) -> None:
    log = [MergeInput(data=rows(["a", "b"], [11, 9], ["a1", "b1"]))]
    once = merge_records(BASE, log, mode=mode, ordering_field="ts")
    twice = merge_records(once, log, mode=mode, ordering_field="ts")
    assert as_dict(once) == as_dict(twice)


def test_record_keys_from_fields() -> None:
    t = pa.table({"id": [1, 2], "region": ["eu", "us"]})
    assert record_keys(t, ["id"]).to_pylist() == ["1", "2"]
    assert record_keys(t, ["id", "region"]).to_pylist() == ["id:1,region:eu", "id:2,region:us"]
