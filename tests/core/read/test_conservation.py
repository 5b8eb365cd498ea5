"""The conservation rules a rewrite's output is checked against (hoodie.read.conservation), and a compaction
whose merge loses a row is refused with its file deleted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.compaction.execute import CompactionFailed, compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.lock import FileSystemLock
from hoodie.read.conservation import KeyLedger, live_rows
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table


def _ledger(base: list[str], log: list[str], written: list[str], live: list[bool] | None = None) -> list[str]:
    ledger = KeyLedger(pa.array(log, pa.string()))
    ledger.base(pa.array(base, pa.string()), pa.array(live) if live is not None else None)
    ledger.written(pa.array(written, pa.string()))
    return ledger.problems()


@pytest.mark.parametrize(
    ("base", "log", "written"),
    [
        (["a", "a", "b"], [], ["a", "b", "a"]),  # untouched: every copy, any order
        (["a", "a"], ["a"], ["a", "a"]),  # the first copy updated
        (["a", "a"], ["a"], ["a"]),  # the first copy deleted
        ([], ["n"], ["n"]),  # a log insert
        ([], ["n"], []),  # inserted and deleted in the log
        (["a"], ["a"], []),  # deleted
    ],
)
def test_what_readers_see_is_conserved(base: list[str], log: list[str], written: list[str]) -> None:
    assert _ledger(base, log, written) == []


@pytest.mark.parametrize(
    ("base", "log", "written", "named"),
    [
        (["a", "a", "b"], [], ["a", "b"], "'a': 2 live base row(s), 1 written (the log does not name it)"),
        (["a", "a"], ["a"], [], "'a': 2 live base row(s), 0 written (the log names it)"),
        (["a"], ["a"], ["a", "a"], "'a': 1 live base row(s), 2 written"),
        ([], ["n"], ["n", "n"], "'n': 0 live base row(s), 2 written (only the log holds it)"),
        (["a"], [], ["a", "x"], "'x': 0 live base row(s), 1 written (the log does not name it)"),
    ],
)
def test_a_lost_or_invented_row_is_named(
    base: list[str], log: list[str], written: list[str], named: str
) -> None:
    problems = _ledger(base, log, written)
    assert len(problems) == 1
    assert named in problems[0]


def test_soft_deleted_base_rows_do_not_count() -> None:
    t = pa.table({"k": ["a", "b"], "_hoodie_is_deleted": [False, True]})
    live = live_rows(t)
    assert live is not None
    assert _ledger(["a", "b"], [], ["a"], live.to_pylist()) == []
    assert live_rows(t.drop_columns(["_hoodie_is_deleted"])) is None


def test_a_compaction_that_would_lose_a_row_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(rows=100, commits=3, partitions=1, seed=4))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = Table.open(str(root)).read()
    scheduled = schedule_compaction(storage, lock).instant
    assert scheduled is not None
    stream = Table.stream_file_slice

    def losing(self: Table, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        merged = stream(self, *args, **kwargs)  # type: ignore[arg-type]
        chunks = merged.chunks

        def drop_one() -> Iterator[pa.Table]:
            first = True
            for chunk in chunks:
                yield chunk.slice(1) if first and chunk.num_rows else chunk
                first = False

        merged.chunks = drop_one()
        return merged

    monkeypatch.setattr(Table, "stream_file_slice", losing)
    with pytest.raises(CompactionFailed, match="would not write the records its readers see") as refused:
        compact_in_process(storage, lock)
    assert "1 live base row(s), 0 written (the log does not name it)" in str(refused.value)
    monkeypatch.undo()
    # Nothing committed, the file deleted: the table reads as before.
    assert not list(root.rglob(f"*_{scheduled.time}.parquet"))
    after = Table.open(str(root))
    assert not after.timeline.is_completed(scheduled.time)
    assert after.read().num_rows == before.num_rows
