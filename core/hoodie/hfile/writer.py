"""Writing HFiles (format version 3) for HBase's and Hudi's readers (layout: :mod:`hoodie.hfile.reader`).

Cells are written as Hudi writes its metadata table: the record key is the row, family and qualifier are
empty, the timestamp is ``Long.MAX_VALUE`` (HBase's ``LATEST_TIMESTAMP``), the type is Put, no tags, and a
memstore timestamp of 0 (``KEY_VALUE_VERSION`` 1, ``MAX_MEMSTORE_TS_KEY`` 0), as HBase 2.4 does for Hudi.

The file, from the front: data blocks (a block is closed once its cells reach ``block_size`` bytes, as in
HBase), meta blocks, the non-root levels of the data index (leaf blocks, then intermediate ones), the root
data index (the load-on-open offset), the meta index, the file info (``hfile.LASTKEY``, average key and value
lengths, ``KEY_VALUE_VERSION``, ``MAX_MEMSTORE_TS_KEY``, ``hfile.CREATE_TIME_TS``, and the caller's entries,
such as Hudi's ``minRecordKey``/``maxRecordKey``/``bloomFilterTypeCode``/``schema``) and the 4 KiB trailer.
Index keys are the full KeyValue keys of each block's first cell. The index gets more levels while its root
would exceed ``max_index_size`` bytes (HBase's ``hfile.index.block.max.size``) and hold more than
``min_index_entries`` entries.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hoodie.errors import InvalidWriteConfig
from hoodie.hfile.block import (
    AVG_KEY_LEN,
    AVG_VALUE_LEN,
    DATA_MAGIC,
    FILE_INFO_BLOCK_MAGIC,
    FILE_INFO_MAGIC,
    HEADER_SIZE,
    INTERMEDIATE_INDEX_MAGIC,
    KEY_VALUE_VERSION,
    LAST_KEY,
    LEAF_INDEX_MAGIC,
    MAX_MEMSTORE_TS_KEY,
    MAX_TAGS_LEN,
    META_MAGIC,
    ROOT_INDEX_MAGIC,
    KeyType,
)
from hoodie.hfile.checksum import ChecksumType, block_checksums
from hoodie.hfile.trailer import SUPPORTED_MAJOR_VERSION, TRAILER_MAGIC, TRAILER_SIZE, Compression
from hoodie.varint import varint

CREATE_TIME = b"hfile.CREATE_TIME_TS"
LATEST_TIMESTAMP = (1 << 63) - 1
MINOR_VERSION = 3
KV_COMPARATOR = "org.apache.hadoop.hbase.KeyValue$KVComparator"

DEFAULT_BLOCK_SIZE = 64 * 1024
DEFAULT_BYTES_PER_CHECKSUM = 16 * 1024
DEFAULT_MAX_INDEX_SIZE = 128 * 1024
DEFAULT_MIN_INDEX_ENTRIES = 16

_NO_BLOCK = (1 << 64) - 1  # -1 as an unsigned 64-bit varint: the block offsets of a file without data
_KEY_TAIL = struct.Struct(">BqB")  # family length 0, timestamp, type


def vlong(value: int) -> bytes:
    """A Hadoop ``WritableUtils`` vint/vlong."""
    if -112 <= value <= 127:
        return struct.pack(">b", value)
    prefix = -112
    if value < 0:
        value = ~value
        prefix = -120
    size = (value.bit_length() + 7) // 8
    return struct.pack(">b", prefix - size) + value.to_bytes(size, "big")


def _pb_bytes(number: int, value: bytes) -> bytes:
    return varint(number << 3 | 2) + varint(len(value)) + value


def _pb_int(number: int, value: int) -> bytes:
    return varint(number << 3) + varint(value)


def keyvalue_key(row: bytes) -> bytes:
    """The KeyValue key Hudi writes for a record key: the row, no family or qualifier, latest, Put."""
    if len(row) > 0x7FFF:
        raise InvalidWriteConfig(f"HFile row key of {len(row)} bytes is longer than 32767")
    return struct.pack(">H", len(row)) + row + _KEY_TAIL.pack(0, LATEST_TIMESTAMP, KeyType.PUT)


@dataclass(frozen=True, slots=True)
class _Entry:
    offset: int
    size: int
    key: bytes


class HFileWriter:
    """Builds an HFile v3 in memory: :meth:`append` cells in key order, then :meth:`finish` for the bytes."""

    def __init__(
        self,
        *,
        block_size: int = DEFAULT_BLOCK_SIZE,
        compression: Compression = Compression.GZ,
        checksum: ChecksumType = ChecksumType.CRC32C,
        bytes_per_checksum: int = DEFAULT_BYTES_PER_CHECKSUM,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        min_index_entries: int = DEFAULT_MIN_INDEX_ENTRIES,
        file_info: Mapping[bytes, bytes] | None = None,
        create_time_ms: int = 0,
        comparator: str = KV_COMPARATOR,
        include_tags: bool = False,
        include_mvcc: bool = True,
    ) -> None:
        if compression not in (Compression.GZ, Compression.NONE):
            raise InvalidWriteConfig(f"HFile compression {compression!r}: only GZ and NONE are written")
        if block_size <= 0 or bytes_per_checksum <= 0 or max_index_size <= 0 or min_index_entries < 2:
            raise InvalidWriteConfig(
                f"HFile sizes must be positive (block_size={block_size}, "
                f"bytes_per_checksum={bytes_per_checksum}, max_index_size={max_index_size}), "
                f"and min_index_entries at least 2 ({min_index_entries})"
            )
        self.block_size = block_size
        self.compression = compression
        self.checksum = checksum
        self.bytes_per_checksum = bytes_per_checksum
        self.max_index_size = max_index_size
        self.min_index_entries = min_index_entries
        self.comparator = comparator
        self.include_tags = include_tags  # an empty tags field per cell, ``hfile.MAX_TAGS_LEN`` 0
        self.include_mvcc = include_mvcc  # a memstore timestamp per cell (``KEY_VALUE_VERSION`` 1)
        self._user_info = dict(file_info or {})
        self._create_time = create_time_ms
        self._out = bytearray()
        self._block = bytearray()
        self._block_first_key: bytes | None = None
        self._data_index: list[_Entry] = []
        self._meta: list[tuple[bytes, bytes]] = []
        self._prev_offset: dict[bytes, int] = {}
        self._last_row: bytes | None = None
        self._last_key = b""
        self._entries = 0
        self._key_bytes = 0
        self._value_bytes = 0
        self._uncompressed_total = 0
        self._index_uncompressed = 0
        self._last_data_block = 0
        self._finished = False

    # -- cells -------------------------------------------------------------------------------------------

    def append(self, key: bytes, value: bytes) -> None:
        """Add a cell; keys must come in non-decreasing byte order (equal keys keep their order)."""
        if self._finished:
            raise InvalidWriteConfig("HFile writer already finished")
        if self._last_row is not None and key < self._last_row:
            raise InvalidWriteConfig(f"HFile keys out of order: {key!r} after {self._last_row!r}")
        kv_key = keyvalue_key(key)
        if self._block_first_key is None:
            self._block_first_key = kv_key
        block = self._block
        block += struct.pack(">ii", len(kv_key), len(value))
        block += kv_key
        block += value
        if self.include_tags:
            block += b"\x00\x00"
        if self.include_mvcc:
            block.append(0)  # memstore timestamp 0 as a vlong
        self._last_row, self._last_key = key, kv_key
        self._entries += 1
        self._key_bytes += len(kv_key)
        self._value_bytes += len(value)
        if len(block) >= self.block_size:
            self._flush_data_block()

    def extend(self, cells: Iterable[tuple[bytes, bytes]]) -> None:
        for key, value in cells:
            self.append(key, value)

    def add_meta_block(self, name: bytes, data: bytes) -> None:
        """A named meta block (Hudi's bloom filter goes in ``bloomFilter``); names are kept sorted."""
        self._meta.append((name, data))

    # -- blocks ------------------------------------------------------------------------------------------

    def _write_block(self, magic: bytes, data: bytes) -> _Entry:
        offset = len(self._out)
        if self.compression == Compression.GZ:
            compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip framing, as Hadoop's GzipCodec
            body = bytearray(compressor.compress(data) + compressor.flush())
            body[9] = 0  # the gzip header's OS byte, 0 as Hadoop's GzipCodec writes it
        else:
            body = bytearray(data)
        data_with_header = HEADER_SIZE + len(body)
        chunks = -(-data_with_header // self.bytes_per_checksum)
        checksum_bytes = 4 * chunks
        header = struct.pack(
            ">8siiqBii",
            magic,
            len(body) + checksum_bytes,
            len(data),
            self._prev_offset.get(magic, -1),
            self.checksum,
            self.bytes_per_checksum,
            data_with_header,
        )
        on_disk = header + bytes(body)
        sums = block_checksums(self.checksum, memoryview(on_disk), self.bytes_per_checksum)
        self._out += on_disk
        self._out += struct.pack(f">{chunks}I", *sums)
        self._prev_offset[magic] = offset
        self._uncompressed_total += HEADER_SIZE + len(data)
        return _Entry(offset, len(self._out) - offset, b"")

    def _flush_data_block(self) -> None:
        if not self._block or self._block_first_key is None:
            return
        written = self._write_block(DATA_MAGIC, bytes(self._block))
        self._last_data_block = written.offset
        self._data_index.append(_Entry(written.offset, written.size, self._block_first_key))
        self._block = bytearray()
        self._block_first_key = None

    # -- index -------------------------------------------------------------------------------------------

    @staticmethod
    def _root_index(entries: list[_Entry]) -> bytes:
        return b"".join(struct.pack(">qi", e.offset, e.size) + vlong(len(e.key)) + e.key for e in entries)

    @staticmethod
    def _non_root_index(entries: list[_Entry]) -> bytes:
        offsets, bodies, position = [], [], 0
        for entry in entries:
            offsets.append(position)
            body = struct.pack(">qi", entry.offset, entry.size) + entry.key
            bodies.append(body)
            position += len(body)
        offsets.append(position)
        return struct.pack(f">i{len(offsets)}i", len(entries), *offsets) + b"".join(bodies)

    def _write_index_levels(self) -> tuple[list[_Entry], int]:
        """Write leaf and intermediate index blocks until the root is small enough: ``(root, levels)``."""
        level, levels = self._data_index, 1
        while len(self._root_index(level)) > self.max_index_size and len(level) > self.min_index_entries:
            magic = LEAF_INDEX_MAGIC if levels == 1 else INTERMEDIATE_INDEX_MAGIC
            upper: list[_Entry] = []
            chunk: list[_Entry] = []
            size = 8
            for entry in level:
                chunk.append(entry)
                size += 16 + len(entry.key)
                if size >= self.max_index_size and len(chunk) >= 2:
                    upper.append(self._index_block(magic, chunk))
                    chunk, size = [], 8
            if chunk:
                upper.append(self._index_block(magic, chunk))
            level, levels = upper, levels + 1
        return level, levels

    def _index_block(self, magic: bytes, chunk: list[_Entry]) -> _Entry:
        data = self._non_root_index(chunk)
        self._index_uncompressed += HEADER_SIZE + len(data)
        written = self._write_block(magic, data)
        return _Entry(written.offset, written.size, chunk[0].key)

    # -- the end -----------------------------------------------------------------------------------------

    def _file_info(self) -> bytes:
        entries = self._entries or 1
        info = {
            **self._user_info,
            AVG_KEY_LEN: struct.pack(">i", self._key_bytes // entries if self._entries else 0),
            AVG_VALUE_LEN: struct.pack(">i", self._value_bytes // entries if self._entries else 0),
            KEY_VALUE_VERSION: struct.pack(">i", 1 if self.include_mvcc else 0),
            MAX_MEMSTORE_TS_KEY: struct.pack(">q", 0),
            CREATE_TIME: struct.pack(">q", self._create_time),
        }
        if self.include_tags:
            info[MAX_TAGS_LEN] = struct.pack(">i", 0)
        if self._entries:
            info[LAST_KEY] = self._last_key
        message = b"".join(
            _pb_bytes(1, _pb_bytes(1, key) + _pb_bytes(2, value)) for key, value in sorted(info.items())
        )
        return FILE_INFO_MAGIC + varint(len(message)) + message

    def finish(self) -> bytes:
        """Close the last block, write the index, file info and trailer; return the whole file."""
        if self._finished:
            raise InvalidWriteConfig("HFile writer already finished")
        self._flush_data_block()
        self._finished = True
        meta_entries = []
        for name, data in sorted(self._meta, key=lambda m: m[0]):
            written = self._write_block(META_MAGIC, data)
            meta_entries.append(_Entry(written.offset, written.size, name))
        root, levels = self._write_index_levels()
        load_on_open = len(self._out)
        root_data = self._root_index(root)
        self._index_uncompressed += HEADER_SIZE + len(root_data)
        self._write_block(ROOT_INDEX_MAGIC, root_data)
        self._write_block(ROOT_INDEX_MAGIC, self._root_index(meta_entries))
        file_info_offset = len(self._out)
        self._write_block(FILE_INFO_BLOCK_MAGIC, self._file_info())
        trailer = b"".join(
            [
                _pb_int(1, file_info_offset),
                _pb_int(2, load_on_open),
                _pb_int(3, self._index_uncompressed),
                _pb_int(4, self._uncompressed_total),
                _pb_int(5, len(root)),
                _pb_int(6, len(meta_entries)),
                _pb_int(7, self._entries),
                _pb_int(8, levels),
                _pb_int(9, 0 if self._data_index else _NO_BLOCK),
                _pb_int(10, self._last_data_block if self._data_index else _NO_BLOCK),
                _pb_bytes(11, self.comparator.encode()),
                _pb_int(12, self.compression),
            ]
        )
        head = TRAILER_MAGIC + varint(len(trailer)) + trailer
        version = struct.pack(">i", MINOR_VERSION << 24 | SUPPORTED_MAJOR_VERSION)
        self._out += head + bytes(TRAILER_SIZE - len(head) - 4) + version
        return bytes(self._out)
