"""Conservation: a rewrite of a file slice writes exactly the records a reader of the slice sees.

A compaction or clustering replaces a slice's files with new base files; before it commits, the record keys
it wrote are checked against the keys it read, key by key, counting repeats (a table written with ``insert``
or ``bulk_insert`` may hold a key more than once, even in one base file, and readers return every copy):

- a key the log does not name keeps every base row: as many written rows as live base rows;
- a key the log names and the base holds: the log's version meets the first base row of the key only
  (:mod:`hoodie.read.merge`), so it is rewritten (same count) or deleted (one fewer);
- a key only the log holds: one row, or none when its last version is a delete.

Anything else is a row lost or invented, and the rewrite is refused. The check reads nothing the rewrite did
not read already: the keys of the base rows as they stream by, the log's distinct keys, the written keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.read.merge import IS_DELETED

__all__ = ["KeyLedger", "live_rows"]


def live_rows(table: pa.Table) -> pa.Array | None:
    """A mask of the rows not soft-deleted (``_hoodie_is_deleted``), or ``None`` when all are live."""
    if IS_DELETED not in table.column_names:
        return None
    deleted = pc.fill_null(table.column(IS_DELETED), False).combine_chunks()
    if not pc.any(deleted).as_py():
        return None
    return pc.invert(deleted)


@dataclass
class KeyLedger:
    """The record keys of one slice rewrite: its live base rows, the log's distinct keys, the written rows.

    Feed it as the rewrite goes (:meth:`base`, :meth:`written`), then ask :meth:`problems`."""

    log_keys: pa.Array
    _base: list[pa.Array] = field(default_factory=list)
    _written: list[pa.Array] = field(default_factory=list)

    def base(self, keys: pa.Array, live: pa.Array | None = None) -> None:
        """Keys of base-file rows read; ``live`` masks those a reader returns (soft deletes it does not)."""
        self._base.append(keys if live is None else keys.filter(live))

    def written(self, keys: pa.Array | pa.ChunkedArray) -> None:
        """Keys of rows written."""
        self._written.append(keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys)

    @property
    def base_keys(self) -> pa.ChunkedArray:
        """The keys of the live base rows read, in order."""
        return pa.chunked_array(self._base, pa.string())

    @property
    def base_rows(self) -> int:
        return sum(len(k) for k in self._base)

    @property
    def written_rows(self) -> int:
        return sum(len(k) for k in self._written)

    def problems(self, limit: int = 5) -> list[str]:
        """Up to ``limit`` keys whose written count breaks the rules (see the module doc), each described."""
        base = self.base_keys
        written = pa.chunked_array(self._written, pa.string())
        n_base, n_written = len(base), len(written)
        if n_base + n_written == 0:
            return []
        counts = (
            pa.table(
                {
                    "k": pa.chunked_array([*base.chunks, *written.chunks], pa.string()),
                    "b": pa.array(np.concatenate([np.ones(n_base, np.int64), np.zeros(n_written, np.int64)])),
                    "w": pa.array(np.concatenate([np.zeros(n_base, np.int64), np.ones(n_written, np.int64)])),
                }
            )
            .group_by("k", use_threads=False)
            .aggregate([("b", "sum"), ("w", "sum")])
        )
        b = counts.column("b_sum").to_numpy()
        w = counts.column("w_sum").to_numpy()
        logged = pc.is_in(counts.column("k"), value_set=self.log_keys.cast(pa.string())).to_numpy(
            zero_copy_only=False
        )
        allowed_low = np.where(logged, np.maximum(b - 1, 0), b)
        allowed_high = np.where(logged, np.maximum(b, 1), b)
        bad = np.flatnonzero((w < allowed_low) | (w > allowed_high))
        keys = counts.column("k")
        out = []
        for i in bad[:limit]:
            origin = (
                "the log names it"
                if logged[i] and b[i]
                else "only the log holds it"
                if logged[i]
                else "the log does not name it"
            )
            out.append(f"key {keys[int(i)].as_py()!r}: {b[i]} live base row(s), {w[i]} written ({origin})")
        if len(bad) > limit:
            out.append(f"... and {len(bad) - limit} more key(s)")
        return out
