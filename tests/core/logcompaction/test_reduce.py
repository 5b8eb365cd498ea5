"""The log-only merge: whatever base file a slice has, merging it with the reduced log gives the rows that
merging it with the whole log gives (the reader's merge, :func:`hoodie.read.merge.merge_records`, is the
judge), in both merge modes, with deletes that carry an ordering value, deletes that carry none, soft deletes
and null ordering values."""

from __future__ import annotations

import os
import random
from collections.abc import Sequence

import pyarrow as pa
import pytest

from hoodie.config import RecordMergeMode
from hoodie.logcompaction.reduce import reduce_log
from hoodie.read.merge import Deletes, MergeInput, merge_records

#: Random cases per merge mode (HOODIE_LOGCOMPACTION_CASES for a longer campaign).
CASES = int(os.environ.get("HOODIE_LOGCOMPACTION_CASES", "200"))
KEYS = [f"k{i}" for i in range(6)]
MODES = [RecordMergeMode.EVENT_TIME_ORDERING, RecordMergeMode.COMMIT_TIME_ORDERING]


def _rows(rng: random.Random, n: int) -> pa.Table:
    keys = [rng.choice(KEYS) for _ in range(n)]
    return pa.table(
        {
            "_hoodie_record_key": pa.array(keys),
            "ts": pa.array([rng.choice([None, 0, 1, 2, 3, 5]) for _ in keys], pa.int64()),
            "v": pa.array([rng.random() for _ in keys]),
            "_hoodie_is_deleted": pa.array([rng.random() < 0.1 for _ in keys]),
        }
    )


def _deletes(rng: random.Random, n: int) -> Deletes:
    keys = [rng.choice(KEYS) for _ in range(n)]
    typ = rng.choice([pa.int32(), pa.int64(), pa.null()])
    values = [None if typ == pa.null() else rng.choice([None, 0, 1, 2, 4, 6]) for _ in keys]
    return Deletes(pa.array(keys), pa.array(values, typ))


def _case(rng: random.Random) -> tuple[pa.Table | None, list[MergeInput]]:
    base = _rows(rng, rng.randint(0, 6)) if rng.random() < 0.7 else None
    steps = [
        MergeInput(data=_rows(rng, rng.randint(1, 5)))
        if rng.random() < 0.6
        else MergeInput(deletes=_deletes(rng, rng.randint(1, 4)))
        for _ in range(rng.randint(1, 7))
    ]
    return base, steps


def _log_keys(steps: Sequence[MergeInput]) -> set[str]:
    keys: set[str] = set()
    for s in steps:
        if s.data is not None:
            keys.update(s.data.column("_hoodie_record_key").to_pylist())
        elif s.deletes is not None:
            keys.update(s.deletes.keys.to_pylist())
    return keys


def _records(steps: Sequence[MergeInput]) -> int:
    return sum(
        s.data.num_rows if s.data is not None else len(s.deletes.keys) for s in steps if s.data or s.deletes
    )


def _merged(
    base: pa.Table | None, steps: Sequence[MergeInput], mode: RecordMergeMode
) -> list[tuple[object, ...]]:
    if base is None and not any(s.data is not None for s in steps):
        return []  # nothing but deletes: no record
    t = merge_records(base, steps, mode=mode, ordering_field="ts")
    return sorted(
        zip(*(t.column(c).to_pylist() for c in ("_hoodie_record_key", "ts", "v")), strict=True), key=repr
    )


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.value)
def test_the_reduced_log_merges_with_any_base_as_the_log_does(mode: RecordMergeMode) -> None:
    rng = random.Random(f"reduce-{mode.value}")
    smaller = 0
    for i in range(CASES):
        base, steps = _case(rng)
        reduced = reduce_log(steps, mode=mode, ordering_field="ts", ordering_type=pa.int64())
        assert _merged(base, reduced.steps, mode) == _merged(base, steps, mode), f"case {i}: {base} {steps}"
        # Each key named by the log is written once (plus a void ahead of a later version).
        winners = reduced.deletes.keys.to_pylist() + (
            reduced.rows.column("_hoodie_record_key").to_pylist() if reduced.rows is not None else []
        )
        assert sorted(winners) == sorted(_log_keys(steps)), f"case {i}"
        assert set(reduced.voids.keys.to_pylist()) <= set(winners)
        if mode is RecordMergeMode.COMMIT_TIME_ORDERING:
            assert not len(reduced.voids.keys)
        smaller += reduced.record_count < _records(steps)
    assert smaller > CASES // 2  # the cases do repeat keys: the reduction has work to do


def test_a_delete_without_ordering_value_stays_ahead_of_a_later_lower_version() -> None:
    # Base ts 20; the log deletes the key (default ordering value 0) and re-inserts it with ts 5: the
    # re-insert wins, although the base record's ordering value is greater.
    base = pa.table({"_hoodie_record_key": ["a"], "ts": pa.array([20], pa.int64()), "v": [1.0]})
    steps = [
        MergeInput(
            data=pa.table({"_hoodie_record_key": ["a"], "ts": pa.array([30], pa.int64()), "v": [2.0]})
        ),
        MergeInput(deletes=Deletes(pa.array(["a"]), pa.array([0], pa.int32()))),
        MergeInput(data=pa.table({"_hoodie_record_key": ["a"], "ts": pa.array([5], pa.int64()), "v": [3.0]})),
    ]
    mode = RecordMergeMode.EVENT_TIME_ORDERING
    reduced = reduce_log(steps, mode=mode, ordering_field="ts", ordering_type=pa.int64())
    assert reduced.voids.keys.to_pylist() == ["a"]
    assert reduced.voids.ordering_values.to_pylist() == [0]
    assert reduced.rows is not None
    assert reduced.rows.column("v").to_pylist() == [3.0]
    assert not len(reduced.deletes.keys)
    assert _merged(base, reduced.steps, mode) == [("a", 5, 3.0)] == _merged(base, steps, mode)


def test_deletes_keep_their_ordering_values_in_one_common_type() -> None:
    steps = [
        MergeInput(deletes=Deletes(pa.array(["a", "b"]), pa.array([7, None], pa.int32()))),
        MergeInput(deletes=Deletes(pa.array(["c"]), pa.array([2**40], pa.int64()))),
        MergeInput(deletes=Deletes(pa.array(["d"]), pa.nulls(1))),
    ]
    reduced = reduce_log(steps, mode=RecordMergeMode.COMMIT_TIME_ORDERING)
    assert reduced.rows is None
    assert reduced.deletes.keys.to_pylist() == ["a", "b", "c", "d"]
    assert reduced.deletes.ordering_values.type == pa.int64()
    assert reduced.deletes.ordering_values.to_pylist() == [7, None, 2**40, None]


def test_an_empty_log_reduces_to_nothing() -> None:
    reduced = reduce_log([], mode=RecordMergeMode.EVENT_TIME_ORDERING, ordering_field="ts")
    assert reduced.steps == []
    assert reduced.record_count == 0
