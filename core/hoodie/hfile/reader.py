"""Reading HBase HFiles (format version 3), the files of Hudi's metadata table.

An HFile v3 is, from the front:

- the data section: ``DATABLK*`` blocks of KeyValues in key order, with inline blocks (``IDXLEAF2`` leaf
  index blocks of a multi-level index, bloom chunks) between them;
- the meta section: ``METABLKc`` blocks named by the meta index (Hudi keeps its bloom filter there);
- the load-on-open section: the data index root (``IDXROOT2``), intermediate index blocks (``IDXINTE2``)
  before it, the meta index root (``IDXROOT2``), the file info (``FILEINF2``);
- the fixed trailer: the last 4096 bytes, ``TRABLK"$`` then a varint-delimited ``FileTrailerProto``, zero
  padding, and the version as a big-endian int32 (minor version in the top byte, major in the low three).

The parts have their own modules: :mod:`~hoodie.hfile.trailer`, :mod:`~hoodie.hfile.block` (headers,
checksums, compression, file info, KeyValues), :mod:`~hoodie.hfile.index` (the data and meta indexes) and
:mod:`~hoodie.hfile.checksum`. Keys are compared by row (Hudi's record key; family and qualifier are empty
in Hudi's files).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator

import pyarrow as pa

from hoodie.errors import CorruptHFile, UnsupportedHFile
from hoodie.hfile.block import (
    DATA_MAGIC,
    ENCODED_DATA_MAGIC,
    FILE_INFO_BLOCK_MAGIC,
    INTERMEDIATE_INDEX_MAGIC,
    KEY_VALUE_VERSION,
    LAST_KEY,
    LEAF_INDEX_MAGIC,
    MAX_MEMSTORE_TS_KEY,
    MAX_TAGS_LEN,
    META_MAGIC,
    ROOT_INDEX_MAGIC,
    TAGS_COMPRESSED,
    Block,
    BlockFile,
    CellLayout,
    KeyValue,
    Source,
    parse_file_info,
    row_of_key,
)
from hoodie.hfile.index import IndexEntry, parse_non_root_index, parse_root_index, search
from hoodie.hfile.trailer import TRAILER_SIZE, Trailer
from hoodie.storage import Storage

_CACHED_BLOCKS = 4  # decoded data blocks kept for lookups
_INT = struct.Struct(">i")


class HFileReader:
    """An HFile v3, read from bytes or from a :class:`~hoodie.storage.Storage` path.

    Keys are the cells' rows (the record keys of Hudi's metadata table). Iteration yields ``(key, value)`` in
    file order; :meth:`get` and :meth:`seek_prefix` use the block index and read only the blocks they need
    (parsed index blocks and the last few decoded data blocks are kept, so sorted lookups stay cheap).
    Every block's checksums (CRC32C or CRC32) are verified when it is read; anything that does not check out
    raises :class:`~hoodie.errors.CorruptHFile`, and versions or features we do not read raise
    :class:`~hoodie.errors.UnsupportedHFile`.
    """

    _handle: pa.NativeFile | None = None

    def __init__(self, data: bytes | memoryview, *, name: str = "<bytes>") -> None:
        view = memoryview(data)
        self._init(lambda offset, length: view[offset : offset + length], len(view), name)

    @classmethod
    def open(cls, storage: Storage, path: str) -> HFileReader:
        """Open ``path`` for random access: only the trailer, the index and the blocks asked for are read."""
        size = storage.size(path)
        handle = storage.open_input_file(path)

        def read_at(offset: int, length: int) -> bytes:
            length = max(0, min(length, size - offset))
            return bytes(handle.read_at(length, offset)) if length else b""

        reader = cls.__new__(cls)
        reader._handle = handle
        try:
            reader._init(read_at, size, path)
        except BaseException:
            handle.close()
            raise
        return reader

    def close(self) -> None:
        """Close the file opened by :meth:`open` (nothing to do for a reader over bytes)."""
        if self._handle is not None:
            self._handle.close()

    def __enter__(self) -> HFileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _init(self, read: Source, size: int, name: str) -> None:
        self.size = size
        self.name = name
        tail_start = max(0, size - TRAILER_SIZE)
        self.trailer = Trailer.parse(read(tail_start, size - tail_start), size)
        self._blocks = BlockFile(read, size - TRAILER_SIZE, self.trailer.compression, name)
        self._load_on_open()

    # -- the load-on-open section ------------------------------------------------------------------------

    def _load_on_open(self) -> None:
        t = self.trailer
        offset = t.load_on_open_offset
        root = self.read_block(offset, expect=(ROOT_INDEX_MAGIC,))
        self._data_root = parse_root_index(root, t.data_index_count)
        self._root_rows = [entry.row for entry in self._data_root]
        self._index_cache: dict[int, tuple[list[IndexEntry], list[bytes]]] = {}
        self._pair_cache: dict[int, tuple[list[bytes], list[bytes], int]] = {}
        offset += root.on_disk_size
        meta = self.read_block(offset, expect=(ROOT_INDEX_MAGIC,))
        self.meta_index = {e.key: e for e in parse_root_index(meta, t.meta_index_count)}
        info = self.read_block(t.file_info_offset, expect=(FILE_INFO_BLOCK_MAGIC,))
        self.file_info = parse_file_info(info)
        self.includes_tags = MAX_TAGS_LEN in self.file_info
        if self.file_info.get(TAGS_COMPRESSED, b"\x00")[:1] not in (b"", b"\x00"):
            raise UnsupportedHFile("HFile with compressed tags")
        version = self.file_info.get(KEY_VALUE_VERSION)
        if version is None:
            # Hudi's own HFile writer (1.1+) leaves KEY_VALUE_VERSION out but still ends every cell with a
            # memstore timestamp (a zero vlong), as its MAX_MEMSTORE_TS_KEY announces.
            self.includes_mvcc = MAX_MEMSTORE_TS_KEY in self.file_info
        else:
            self.includes_mvcc = len(version) == 4 and _INT.unpack(version)[0] == 1
        self._cells = CellLayout(self.includes_tags, self.includes_mvcc, self.name)
        if t.data_index_count == 0 and t.entry_count:
            raise CorruptHFile(f"trailer counts {t.entry_count} entries but the data index is empty")
        for entry in self._data_root:
            if not 0 <= entry.offset < t.load_on_open_offset:
                raise CorruptHFile(
                    f"data index entry points at byte {entry.offset}, outside the data section"
                )

    # -- blocks ------------------------------------------------------------------------------------------

    def read_block(self, offset: int, *, expect: tuple[bytes, ...] | None = None) -> Block:
        """The block at ``offset``, its checksums verified and its data decompressed."""
        return self._blocks.block(offset, expect=expect)

    def _data_blocks(self, start: int) -> Iterator[Block]:
        """Data blocks from ``start`` to the last one, skipping the inline index and bloom blocks between."""
        offset, last = start, self.trailer.last_data_block_offset
        while offset <= last:
            block = self.read_block(offset)
            if block.magic == ENCODED_DATA_MAGIC:
                raise UnsupportedHFile(f"{self.name}: encoded data block at byte {offset}")
            if block.magic == DATA_MAGIC:
                yield block
            offset += block.on_disk_size

    # -- the API -----------------------------------------------------------------------------------------

    @property
    def num_entries(self) -> int:
        return self.trailer.entry_count

    def __len__(self) -> int:
        return self.trailer.entry_count

    def __iter__(self) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` of every cell, in file order."""
        if not self.trailer.entry_count:
            return
        count = 0
        for block in self._data_blocks(self.trailer.first_data_block_offset):
            for pair in self._cells.pairs(block):
                count += 1
                yield pair
        if count != self.trailer.entry_count:
            raise CorruptHFile(
                f"{self.name}: read {count} cells, the trailer counts {self.trailer.entry_count}"
            )

    def keys(self) -> Iterator[bytes]:
        for key, _ in self:
            yield key

    def cells(self) -> Iterator[KeyValue]:
        """Every cell with all of its key's parts, tags and memstore timestamp, in file order."""
        if not self.trailer.entry_count:
            return
        for block in self._data_blocks(self.trailer.first_data_block_offset):
            for key, value, tags, mvcc in self._cells.cells(block):
                row, family, qualifier, timestamp, kind = KeyValue.parse_key(key)
                yield KeyValue(row, family, qualifier, timestamp, kind, value, tags, mvcc)

    @property
    def first_key(self) -> bytes | None:
        for key, _ in self._from(b""):
            return key
        return None

    @property
    def last_key(self) -> bytes | None:
        last = self.file_info.get(LAST_KEY)
        return row_of_key(last) if last else None

    def get(self, key: bytes) -> bytes | None:
        """The value of the first cell whose row is ``key``, or ``None``."""
        for row, value in self._from(key):
            if row == key:
                return value
            if row > key:
                break
        return None

    def seek_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """``(key, value)`` of every cell whose row starts with ``prefix``, in key order."""
        for row, value in self._from(prefix):
            if row.startswith(prefix):
                yield row, value
            elif row > prefix:
                return

    def _from(self, key: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Cells from the data block that may hold the first row ``>= key`` on (earlier rows included)."""
        if not self.trailer.entry_count:
            return
        entries, rows = self._data_root, self._root_rows
        for _level in range(1, self.trailer.num_data_index_levels):
            entries, rows = self._index_level(entries[search(rows, key)].offset)
        offset, last, first = (
            entries[search(rows, key)].offset,
            self.trailer.last_data_block_offset,
            True,
        )
        while offset <= last:
            block_rows, values, offset = self._block_pairs(offset)
            start = bisect.bisect_left(block_rows, key) if first else 0
            first = False
            for i in range(start, len(block_rows)):
                yield block_rows[i], values[i]

    def _block_pairs(self, offset: int) -> tuple[list[bytes], list[bytes], int]:
        """Rows and values of the first data block at or after ``offset``, and the offset after it; the
        last few are kept, so that lookups of sorted keys decompress and check each block once."""
        cached = self._pair_cache.pop(offset, None)
        if cached is None:
            rows: list[bytes] = []
            values: list[bytes] = []
            next_offset = offset
            for block in self._data_blocks(offset):
                for row, value in self._cells.pairs(block):
                    rows.append(row)
                    values.append(value)
                next_offset = block.offset + block.on_disk_size
                break
            else:
                next_offset = self.trailer.last_data_block_offset + 1
            cached = (rows, values, next_offset)
            while len(self._pair_cache) >= _CACHED_BLOCKS:
                del self._pair_cache[next(iter(self._pair_cache))]
        self._pair_cache[offset] = cached
        return cached

    def _index_level(self, offset: int) -> tuple[list[IndexEntry], list[bytes]]:
        """A non-root index block's entries and their rows, parsed once per reader."""
        cached = self._index_cache.get(offset)
        if cached is None:
            expect = (INTERMEDIATE_INDEX_MAGIC, LEAF_INDEX_MAGIC)
            entries = parse_non_root_index(self.read_block(offset, expect=expect))
            if not entries:
                raise CorruptHFile(f"{self.name}: empty index block at byte {offset}")
            cached = self._index_cache[offset] = (entries, [entry.row for entry in entries])
        return cached

    def meta_block(self, name: bytes) -> bytes | None:
        """The data of the meta block called ``name`` (Hudi's ``bloomFilter``), or ``None``."""
        entry = self.meta_index.get(name)
        if entry is None:
            return None
        return self.read_block(entry.offset, expect=(META_MAGIC,)).data
