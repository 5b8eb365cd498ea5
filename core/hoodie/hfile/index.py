"""HFile block indexes: which data block may hold a key.

The data index has up to three levels: a root block (``IDXROOT2``, in the load-on-open section), then
intermediate (``IDXINTE2``) and leaf (``IDXLEAF2``) blocks. Root index entries are ``int64 offset, int32
on-disk size, vint key length, key``; non-root index blocks are ``int32 n, int32[n + 1] entry offsets,
entries (int64 offset, int32 size, key)``. The meta index is one root block naming the meta blocks.

Index keys may be shortened "fake" keys that sort between two blocks, or the bare ``int16 length, row``
that Hudi's own writer puts there; only their row is used.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass

from hoodie.errors import CorruptHFile
from hoodie.hfile.block import Block, read_vlong, row_of_key

_INT = struct.Struct(">i")
_ENTRY = struct.Struct(">qi")


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One entry of a block index: the block it points to and the row of its (first or fake) key."""

    offset: int
    size: int
    key: bytes

    @property
    def row(self) -> bytes:
        return row_of_key(self.key)


def parse_root_index(block: Block, count: int) -> list[IndexEntry]:
    """The ``count`` entries of a root index block (``count`` comes from the trailer)."""
    data, pos, entries = block.data, 0, []
    for _ in range(count):
        if pos + 12 > len(data):
            raise CorruptHFile(f"root index block at byte {block.offset} holds fewer than {count} entries")
        offset, size = _ENTRY.unpack_from(data, pos)
        length, pos = read_vlong(data, pos + 12)
        if length < 0 or pos + length > len(data):
            raise CorruptHFile(f"root index key of {length} bytes runs past its block at {block.offset}")
        entries.append(IndexEntry(offset, size, data[pos : pos + length]))
        pos += length
    return entries


def parse_non_root_index(block: Block) -> list[IndexEntry]:
    """The entries of an intermediate or leaf index block."""
    data = block.data
    if len(data) < 4:
        raise CorruptHFile(f"index block at byte {block.offset} is empty")
    (count,) = _INT.unpack_from(data, 0)
    base = 4 + 4 * (count + 1)
    if count < 0 or base > len(data):
        raise CorruptHFile(f"index block at byte {block.offset} claims {count} entries")
    offsets = struct.unpack_from(f">{count + 1}i", data, 4)
    entries = []
    for i in range(count):
        start, end = base + offsets[i], base + offsets[i + 1]
        if not (base <= start and start + 12 <= end <= len(data)):
            raise CorruptHFile(f"index block at byte {block.offset}: entry {i} is out of bounds")
        offset, size = _ENTRY.unpack_from(data, start)
        entries.append(IndexEntry(offset, size, data[start + 12 : end]))
    return entries


def search(rows: list[bytes], key: bytes) -> int:
    """The last entry whose row sorts before ``key``: the block where rows ``>= key`` may begin (an entry's
    row is its block's first row, or a fake key at most that)."""
    return max(0, bisect.bisect_left(rows, key) - 1)
