"""The writer's batches and its ledger: what the chaos writer tried, which instant each batch became, and
which commits it was told completed.

A batch is a pure function of the trial's seed and its number (:func:`batch`): it upserts ``UPSERTS`` keys
of a fixed key space with values naming the batch, and deletes ``DELETES`` others (a delete of a key the
table lacks changes nothing). So the table's expected content is the fold of the committed batches in commit
order (:func:`expected_rows`), and the ledger only needs batch numbers and instants.

The ledger is a JSON-lines file the writer appends to and fsyncs: ``requested`` (the batch's instant time,
written before any file of it), then ``acked`` (the commit completed) or ``failed``. A batch whose writer was
killed between the two is decided by the timeline: committed exactly when its instant completed.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

#: Record keys ``k00000`` ... in this many; partitions ``p0`` ... ``p3`` by key number.
KEY_SPACE = 2000
PARTITIONS = 4
UPSERTS = 120
DELETES = 15

SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("part", pa.string(), nullable=False),
        pa.field("value", pa.int64(), nullable=False),
        pa.field("batch", pa.int64(), nullable=False),
        pa.field("note", pa.string()),
    ]
)


def key_name(n: int) -> str:
    return f"k{n:05d}"


def part_of(n: int) -> str:
    return f"p{n % PARTITIONS}"


@dataclass(frozen=True)
class Batch:
    number: int
    upserts: tuple[int, ...]  # key numbers
    deletes: tuple[int, ...]

    def value(self, key: int) -> int:
        return self.number * 1_000_000 + key

    def rows(self) -> pa.Table:
        keys = list(self.upserts)
        return pa.table(
            {
                "key": [key_name(k) for k in keys],
                "part": [part_of(k) for k in keys],
                "value": [self.value(k) for k in keys],
                "batch": [self.number] * len(keys),
                "note": [f"batch {self.number} key {k}" for k in keys],
            },
            schema=SCHEMA,
        )

    def delete_keys(self) -> pa.Table:
        keys = list(self.deletes)
        return pa.table(
            {"key": [key_name(k) for k in keys], "part": [part_of(k) for k in keys]},
            schema=pa.schema([SCHEMA.field("key"), SCHEMA.field("part")]),
        )


def batch(seed: int, number: int) -> Batch:
    rng = random.Random(f"chaos-{seed}-{number}")
    chosen = rng.sample(range(KEY_SPACE), UPSERTS + DELETES)
    return Batch(number, tuple(sorted(chosen[:UPSERTS])), tuple(sorted(chosen[UPSERTS:])))


@dataclass
class Entry:
    """What the ledger says of one batch."""

    number: int
    instant: str | None = None
    acked: bool = False
    failed: str | None = None


class Ledger:
    """The writer's ledger file (append-only, fsynced)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, **event: object) -> None:
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(event, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def entries(self) -> dict[int, Entry]:
        out: dict[int, Entry] = {}
        if not self.path.exists():
            return out
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                event = json.loads(line)
            except ValueError:  # a line torn by a kill mid-write: the event never happened
                continue
            entry = out.setdefault(int(event["batch"]), Entry(int(event["batch"])))
            if event["event"] == "requested":
                entry.instant = str(event["instant"])
            elif event["event"] == "acked":
                entry.acked = True
            elif event["event"] == "failed":
                entry.failed = str(event.get("error", ""))
        return out

    def next_batch(self) -> int:
        entries = self.entries()
        return max(entries) + 1 if entries else 0


def expected_rows(seed: int, committed: Iterable[int]) -> dict[str, int]:
    """Key -> value after the committed batches, applied in the order given (their commit order)."""
    state: dict[str, int] = {}
    for number in committed:
        b = batch(seed, number)
        for k in b.upserts:
            state[key_name(k)] = b.value(k)
        for k in b.deletes:
            state.pop(key_name(k), None)
    return state


__all__ = ["KEY_SPACE", "SCHEMA", "Batch", "Entry", "Ledger", "batch", "expected_rows", "key_name"]
