"""HFile blocks: the header every block starts with, the block types (magics), reading a block (checksums
verified, data decompressed), and decoding the data of file info and data blocks (KeyValues).

Every block has a 33-byte header: magic (8), on-disk size without header (int32), uncompressed size without
header (int32), previous block offset (int64), checksum type (byte: 0 none, 1 CRC32, 2 CRC32C), bytes per
checksum (int32), on-disk data size with header (int32). The (compressed) data follows, then one 4-byte
checksum per ``bytes per checksum`` chunk of header plus data. Every block is compressed with the file's
codec (trailer field 12: 1 GZ, 2 NONE).

A KeyValue is ``int32 key length, int32 value length, key, value`` then, where the file info holds
``hfile.MAX_TAGS_LEN``, an int16 tags length and the tags, then, where ``KEY_VALUE_VERSION`` is 1, the
memstore timestamp as a Hadoop vlong. The key is ``int16 row length, row, int8 family length, family,
qualifier, int64 timestamp, int8 type``.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Protocol

from hoodie.errors import CorruptHFile, UnsupportedHFile
from hoodie.hfile.checksum import ChecksumType, block_checksums
from hoodie.hfile.protobuf import parse_protobuf, read_varint
from hoodie.hfile.trailer import Compression

HEADER_SIZE = 33
FILE_INFO_MAGIC = b"PBUF"

DATA_MAGIC = b"DATABLK*"
ENCODED_DATA_MAGIC = b"DATABLKE"
ROOT_INDEX_MAGIC = b"IDXROOT2"
INTERMEDIATE_INDEX_MAGIC = b"IDXINTE2"
LEAF_INDEX_MAGIC = b"IDXLEAF2"
FILE_INFO_BLOCK_MAGIC = b"FILEINF2"
META_MAGIC = b"METABLKc"

# File info keys (HBase ``HFileInfo`` / ``HFile.Writer``).
LAST_KEY = b"hfile.LASTKEY"
AVG_KEY_LEN = b"hfile.AVG_KEY_LEN"
AVG_VALUE_LEN = b"hfile.AVG_VALUE_LEN"
MAX_TAGS_LEN = b"hfile.MAX_TAGS_LEN"
TAGS_COMPRESSED = b"hfile.TAGS_COMPRESSED"
KEY_VALUE_VERSION = b"KEY_VALUE_VERSION"
MAX_MEMSTORE_TS_KEY = b"MAX_MEMSTORE_TS_KEY"

_HEADER = struct.Struct(">8siiqBii")
_SHORT = struct.Struct(">H")
_KV_LENS = struct.Struct(">ii")


class KeyType(IntEnum):
    """``KeyValue.Type`` codes."""

    MINIMUM = 0
    PUT = 4
    DELETE = 8
    DELETE_FAMILY_VERSION = 10
    DELETE_COLUMN = 12
    DELETE_FAMILY = 14
    MAXIMUM = 255


@dataclass(frozen=True, slots=True)
class Block:
    """One block, checked and decompressed: its magic, where it sits and its uncompressed data."""

    magic: bytes
    offset: int
    on_disk_size: int  # with header and checksums
    data: bytes


class Source(Protocol):
    """Reads ``length`` bytes at ``offset`` of the file (fewer only past its end)."""

    def __call__(self, offset: int, length: int) -> bytes | memoryview: ...


# -- reading a block ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BlockFile:
    """Where a file's blocks are read from: its bytes, the end of its body (the trailer's start), the codec
    every block is compressed with and a name for errors."""

    read: Source
    body_end: int
    compression: Compression
    name: str

    def block(self, offset: int, *, expect: tuple[bytes, ...] | None = None) -> Block:
        """The block at ``offset``, its checksums verified and its data decompressed; ``expect``: the
        magics allowed there (anything else is corruption: an index pointing at the wrong place)."""
        name = self.name
        if not 0 <= offset <= self.body_end - HEADER_SIZE:
            raise CorruptHFile(f"{name}: block offset {offset} is outside the file's body")
        header = self.read(offset, HEADER_SIZE)
        magic, on_disk, uncompressed, _prev, checksum_type, per_checksum, data_with_header = (
            _HEADER.unpack_from(header, 0)
        )
        if expect is not None and magic not in expect:
            raise CorruptHFile(f"{name}: expected a {expect[0]!r} block at byte {offset}, found {magic!r}")
        total = HEADER_SIZE + on_disk
        if (
            on_disk < 0
            or uncompressed < 0
            or offset + total > self.body_end
            or not HEADER_SIZE <= data_with_header <= total
        ):
            raise CorruptHFile(f"{name}: block {magic!r} at byte {offset} has impossible sizes")
        raw = memoryview(self.read(offset, total))
        if checksum_type in (ChecksumType.CRC32, ChecksumType.CRC32C):
            if per_checksum <= 0:
                raise CorruptHFile(f"{name}: block at byte {offset} has {per_checksum} bytes per checksum")
            chunks = -(-data_with_header // per_checksum)
            stored = raw[data_with_header:]
            if len(stored) != 4 * chunks:
                raise CorruptHFile(f"{name}: block at byte {offset} has {len(stored)} checksum bytes")
            expected = struct.unpack(f">{chunks}I", stored)
            actual = block_checksums(checksum_type, raw[:data_with_header], per_checksum)
            if list(expected) != actual:
                raise CorruptHFile(f"{name}: checksum mismatch in block {magic!r} at byte {offset}")
        elif checksum_type != ChecksumType.NULL:
            raise CorruptHFile(f"{name}: unknown checksum type {checksum_type} at byte {offset}")
        body = raw[HEADER_SIZE:data_with_header]
        if self.compression == Compression.GZ:
            try:
                decompressor = zlib.decompressobj(47)  # gzip or zlib framing
                data = decompressor.decompress(body, uncompressed + 1)
            except zlib.error as e:
                raise CorruptHFile(f"{name}: block at byte {offset} does not decompress: {e}") from e
        else:
            data = bytes(body)
        if len(data) != uncompressed:
            raise CorruptHFile(
                f"{name}: block {magic!r} at byte {offset} holds {len(data)} bytes, "
                f"its header says {uncompressed}"
            )
        return Block(magic, offset, total, data)


# -- file info blocks --------------------------------------------------------------------------------------


def parse_file_info(block: Block) -> dict[bytes, bytes]:
    """The file info's key/value pairs: ``PBUF``, then a varint-delimited ``InfoProto`` of
    ``BytesBytesPair`` messages."""
    data = block.data
    if data[:4] != FILE_INFO_MAGIC:
        raise UnsupportedHFile(f"file info at byte {block.offset} is not protobuf (no {FILE_INFO_MAGIC!r})")
    length, pos = read_varint(data, 4)
    if pos + length > len(data):
        raise CorruptHFile(f"file info message of {length} bytes runs past its block")
    info: dict[bytes, bytes] = {}
    for pair in parse_protobuf(data[pos : pos + length]).get(1, []):
        if not isinstance(pair, bytes):
            raise CorruptHFile("file info entry is not a message")
        fields = parse_protobuf(pair)
        first, second = fields.get(1, [b""])[-1], fields.get(2, [b""])[-1]
        if not isinstance(first, bytes) or not isinstance(second, bytes):
            raise CorruptHFile("file info entry's key or value is not bytes")
        info[first] = second
    return info


# -- data blocks: KeyValues --------------------------------------------------------------------------------


def read_vlong(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A Hadoop ``WritableUtils`` vint/vlong at ``pos``: ``(value, next position)``."""
    if pos >= len(buf):
        raise CorruptHFile(f"truncated vlong at byte {pos}")
    first = buf[pos] - 256 if buf[pos] > 127 else buf[pos]
    if first >= -112:
        return first, pos + 1
    size = -119 - first if first < -120 else -111 - first
    if pos + size > len(buf):
        raise CorruptHFile(f"truncated vlong at byte {pos}")
    value = int.from_bytes(buf[pos + 1 : pos + size], "big")
    return (~value if first < -120 else value), pos + size


def row_of_key(key: bytes | memoryview) -> bytes:
    """The row of a KeyValue key (also of the bare ``int16 length, row`` index keys)."""
    if len(key) < 2:
        raise CorruptHFile(f"key of {len(key)} bytes has no row length")
    (length,) = _SHORT.unpack_from(key, 0)
    if 2 + length > len(key):
        raise CorruptHFile(f"key's row length {length} runs past the key ({len(key)} bytes)")
    return bytes(key[2 : 2 + length])


@dataclass(frozen=True, slots=True)
class KeyValue:
    """One cell: its key's parts, its value, tags and memstore timestamp (MVCC), as stored."""

    row: bytes
    family: bytes
    qualifier: bytes
    timestamp: int
    type: int
    value: bytes
    tags: bytes = b""
    mvcc: int = 0

    @staticmethod
    def parse_key(key: bytes) -> tuple[bytes, bytes, bytes, int, int]:
        """``(row, family, qualifier, timestamp, type)`` of a full KeyValue key."""
        row = row_of_key(key)
        pos = 2 + len(row)
        if pos + 1 + 9 > len(key):
            raise CorruptHFile(f"KeyValue key of {len(key)} bytes is too short for its row of {len(row)}")
        family_len = key[pos]
        if pos + 1 + family_len > len(key) - 9:
            raise CorruptHFile("KeyValue family runs past its key")
        family = bytes(key[pos + 1 : pos + 1 + family_len])
        qualifier = bytes(key[pos + 1 + family_len : len(key) - 9])
        timestamp = int.from_bytes(key[-9:-1], "big", signed=True)
        return row, family, qualifier, timestamp, key[-1]


@dataclass(frozen=True, slots=True)
class CellLayout:
    """What follows each KeyValue's value in this file's data blocks, as its file info says: tags (where
    ``hfile.MAX_TAGS_LEN`` is present) and a memstore timestamp (``KEY_VALUE_VERSION`` 1, or Hudi's own
    writer's ``MAX_MEMSTORE_TS_KEY``); ``name`` names the file in errors."""

    tags: bool
    mvcc: bool
    name: str

    def cells(self, block: Block) -> Iterator[tuple[bytes, bytes, bytes, int]]:
        """``(key, value, tags, memstore timestamp)`` of each KeyValue of a data block."""
        data, pos, end = block.data, 0, len(block.data)
        tags, mvcc, name = self.tags, self.mvcc, self.name
        unpack = _KV_LENS.unpack_from
        while pos < end:
            if pos + 8 > end:
                raise CorruptHFile(f"{name}: truncated cell in block at byte {block.offset}")
            key_len, value_len = unpack(data, pos)
            key_start = pos + 8
            value_start = key_start + key_len
            pos = value_start + value_len
            if key_len < 2 or value_len < 0 or pos > end:
                raise CorruptHFile(f"{name}: cell lengths run past the block at byte {block.offset}")
            tag_bytes = b""
            if tags:
                if pos + 2 > end:
                    raise CorruptHFile(f"{name}: truncated tags in block at byte {block.offset}")
                tags_len = _SHORT.unpack_from(data, pos)[0]
                tag_bytes = data[pos + 2 : pos + 2 + tags_len]
                pos += 2 + tags_len
            memstore_ts = 0
            if mvcc:
                memstore_ts, pos = read_vlong(data, pos)
            if pos > end:
                raise CorruptHFile(f"{name}: cell runs past the block at byte {block.offset}")
            yield (
                data[key_start:value_start],
                data[value_start : value_start + value_len],
                tag_bytes,
                memstore_ts,
            )

    def pairs(self, block: Block) -> Iterator[tuple[bytes, bytes]]:
        """``(row, value)`` of each KeyValue of a data block."""
        for key, value, _, _ in self.cells(block):
            (length,) = _SHORT.unpack_from(key, 0)
            if 2 + length > len(key):
                raise CorruptHFile(f"{self.name}: row length {length} runs past its key at {block.offset}")
            yield key[2 : 2 + length], value
