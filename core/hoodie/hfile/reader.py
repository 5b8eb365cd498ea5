"""Reading HBase HFiles (format version 3), the files of Hudi's metadata table.

An HFile v3 is, from the front:

- the data section: ``DATABLK*`` blocks of KeyValues in key order, with inline blocks (``IDXLEAF2`` leaf
  index blocks of a multi-level index, bloom chunks) between them;
- the meta section: ``METABLKc`` blocks named by the meta index (Hudi keeps its bloom filter there);
- the load-on-open section: the data index root (``IDXROOT2``), intermediate index blocks (``IDXINTE2``)
  before it, the meta index root (``IDXROOT2``), the file info (``FILEINF2``);
- the fixed trailer: the last 4096 bytes, ``TRABLK"$`` then a varint-delimited ``FileTrailerProto``, zero
  padding, and the version as a big-endian int32 (minor version in the top byte, major in the low three).

Every block has a 33-byte header: magic (8), on-disk size without header (int32), uncompressed size without
header (int32), previous block offset (int64), checksum type (byte: 0 none, 1 CRC32, 2 CRC32C), bytes per
checksum (int32), on-disk data size with header (int32). The (compressed) data follows, then one 4-byte
checksum per ``bytes per checksum`` chunk of header plus data. Every block is compressed with the file's
codec (trailer field 12: 1 GZ, 2 NONE).

Root index entries are ``int64 offset, int32 on-disk size, vint key length, key``; non-root index blocks are
``int32 n, int32[n + 1] entry offsets, entries (int64 offset, int32 size, key)``. A KeyValue is ``int32 key
length, int32 value length, key, value`` then, where the file info holds ``hfile.MAX_TAGS_LEN``, an int16
tags length and the tags, then, where ``KEY_VALUE_VERSION`` is 1, the memstore timestamp as a Hadoop vlong.
The key is ``int16 row length, row, int8 family length, family, qualifier, int64 timestamp, int8 type``.

Keys are compared by row (Hudi's record key; family and qualifier are empty in Hudi's files). Index keys may
be shortened "fake" keys that sort between two blocks, or the bare ``int16 length, row`` that Hudi's own
writer puts there; only their row is used.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import cache
from typing import Protocol

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodie.errors import CorruptHFile, UnsupportedHFile
from hoodie.storage import Storage

TRAILER_MAGIC = b'TRABLK"$'
TRAILER_SIZE = 4096  # v3 trailers are fixed at 4 KiB
HEADER_SIZE = 33
FILE_INFO_MAGIC = b"PBUF"
SUPPORTED_MAJOR_VERSION = 3

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
MAX_MEMSTORE_TS = b"MAX_MEMSTORE_TS_KEY"

_CACHED_BLOCKS = 4  # decoded data blocks kept for lookups
_HEADER = struct.Struct(">8siiqBii")
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">H")
_KV_LENS = struct.Struct(">ii")
_ENTRY = struct.Struct(">qi")


class Compression(IntEnum):
    """HBase ``Compression.Algorithm`` ordinals, as stored in the trailer."""

    LZO = 0
    GZ = 1
    NONE = 2
    SNAPPY = 3
    LZ4 = 4
    BZIP2 = 5
    ZSTD = 6


class ChecksumType(IntEnum):
    NULL = 0
    CRC32 = 1
    CRC32C = 2


class KeyType(IntEnum):
    """``KeyValue.Type`` codes."""

    MINIMUM = 0
    PUT = 4
    DELETE = 8
    DELETE_FAMILY_VERSION = 10
    DELETE_COLUMN = 12
    DELETE_FAMILY = 14
    MAXIMUM = 255


# -- CRC32C (Castagnoli, reflected 0x82F63B78), vectorized over numpy ----------------------------------------
#
# The CRC register update is linear over GF(2): feeding n zero bytes is a 32x32 bit matrix, applied with four
# byte-indexed tables. A message is cut into pieces of _PIECE bytes (front-padded with zeros, which do not
# change a CRC started at zero), every piece of every message is run through the byte table in parallel,
# and the piece CRCs are folded pairwise, shifting the left one past the right one's length.

_POLY = 0x82F63B78
_PIECE = 16


def _byte_table() -> npt.NDArray[np.uint32]:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLY), table >> 1).astype(np.uint32)
    return table


_TABLE = _byte_table()
_TABLE_LIST: list[int] = _TABLE.tolist()
_SHORT_MESSAGE = 1024  # below this many bytes in all, a plain loop beats numpy's per-call overhead


def _crc32c_loop(message: bytes | memoryview) -> int:
    crc, table = 0xFFFFFFFF, _TABLE_LIST
    for byte in bytes(message):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _apply(tables: npt.NDArray[np.uint32], values: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Apply the linear map given by its four byte tables to every value."""
    result: npt.NDArray[np.uint32] = (
        tables[0][values & 0xFF]
        ^ tables[1][(values >> 8) & 0xFF]
        ^ tables[2][(values >> 16) & 0xFF]
        ^ tables[3][values >> 24]
    )
    return result


def _tables_of(columns: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
    """Byte tables of the map whose image of bit ``i`` is ``columns[i]``."""
    tables = np.zeros((4, 256), dtype=np.uint32)
    byte = np.arange(256)
    for k in range(4):
        for bit in range(8):
            tables[k] ^= np.where(byte >> bit & 1, columns[8 * k + bit], 0).astype(np.uint32)
    return tables


@cache
def _zero_shift(log2_bytes: int) -> npt.NDArray[np.uint32]:
    """Byte tables of feeding ``2 ** log2_bytes`` zero bytes to the CRC register."""
    if log2_bytes == 0:
        basis = np.uint32(1) << np.arange(32, dtype=np.uint32)
        columns = _TABLE[basis & 0xFF] ^ (basis >> 8)
    else:
        half = _zero_shift(log2_bytes - 1)
        basis = np.uint32(1) << np.arange(32, dtype=np.uint32)
        columns = _apply(half, _apply(half, basis))
    return _tables_of(columns.astype(np.uint32))


def crc32c_many(messages: Sequence[bytes | memoryview]) -> list[int]:
    """The CRC32C of each message (as ``google-crc32c`` or Java's ``CRC32C`` compute it)."""
    if sum(len(m) for m in messages) < _SHORT_MESSAGE:
        return [_crc32c_loop(m) for m in messages]
    longest = max(len(m) for m in messages)
    pieces = 1
    while pieces * _PIECE < longest:
        pieces *= 2
    width = pieces * _PIECE
    matrix = np.zeros((len(messages), width), dtype=np.uint8)
    for row, message in enumerate(messages):
        if len(message):
            matrix[row, width - len(message) :] = np.frombuffer(message, dtype=np.uint8)
    grid = matrix.reshape(len(messages) * pieces, _PIECE)
    crc = np.zeros(len(messages) * pieces, dtype=np.uint32)
    for column in range(_PIECE):
        crc = _TABLE[(crc ^ grid[:, column]) & 0xFF] ^ (crc >> 8)
    level = _PIECE.bit_length() - 1
    while crc.size > len(messages):
        pairs = crc.reshape(-1, 2)
        crc = _apply(_zero_shift(level), pairs[:, 0]) ^ pairs[:, 1]
        level += 1
    # The register starts at all ones: add the all-ones state shifted past each message, then invert.
    lengths = [len(m) for m in messages]
    return [(int(c) ^ _ones_shifted(n)) ^ 0xFFFFFFFF for c, n in zip(crc, lengths, strict=True)]


@cache
def _ones_shifted(length: int) -> int:
    value = np.array([0xFFFFFFFF], dtype=np.uint32)
    bit = 0
    while length >> bit:
        if length >> bit & 1:
            value = _apply(_zero_shift(bit), value)
        bit += 1
    return int(value[0])


def crc32c(data: bytes | memoryview) -> int:
    return crc32c_many([data])[0]


def block_checksums(checksum_type: int, data: memoryview, bytes_per_checksum: int) -> list[int]:
    """One checksum per ``bytes_per_checksum`` chunk of ``data`` (a block's header and on-disk data)."""
    chunks = [data[i : i + bytes_per_checksum] for i in range(0, len(data), bytes_per_checksum)]
    if checksum_type == ChecksumType.CRC32C:
        return crc32c_many(chunks)
    if checksum_type == ChecksumType.CRC32:
        return [zlib.crc32(chunk) for chunk in chunks]
    return [0] * len(chunks)


# -- small decoders ----------------------------------------------------------------------------------------


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """A protobuf base-128 varint at ``pos``: ``(value, next position)``."""
    result = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise CorruptHFile(f"truncated or overlong protobuf varint at byte {pos}")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def parse_protobuf(buf: bytes | memoryview) -> dict[int, list[int | bytes]]:
    """The fields of a protobuf message by number (varints as ints, length-delimited as bytes)."""
    fields: dict[int, list[int | bytes]] = {}
    pos = 0
    while pos < len(buf):
        tag, pos = read_varint(buf, pos)
        number, wire = tag >> 3, tag & 7
        value: int | bytes
        if wire == 0:
            value, pos = read_varint(buf, pos)
        elif wire == 2:
            length, pos = read_varint(buf, pos)
            if pos + length > len(buf):
                raise CorruptHFile(f"protobuf field {number} runs past its message ({length} bytes)")
            value = bytes(buf[pos : pos + length])
            pos += length
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos : pos + 8], "little"), pos + 8
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos : pos + 4], "little"), pos + 4
        else:
            raise CorruptHFile(f"unexpected protobuf wire type {wire} for field {number}")
        fields.setdefault(number, []).append(value)
    if pos != len(buf):
        raise CorruptHFile("protobuf message runs past its length")
    return fields


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


# -- trailer ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Trailer:
    """The fixed file trailer (``FileTrailerProto``)."""

    major_version: int
    minor_version: int
    file_info_offset: int
    load_on_open_offset: int
    uncompressed_data_index_size: int
    total_uncompressed_bytes: int
    data_index_count: int
    meta_index_count: int
    entry_count: int
    num_data_index_levels: int
    first_data_block_offset: int
    last_data_block_offset: int
    comparator_class_name: str
    compression: Compression

    @classmethod
    def parse(cls, data: bytes | memoryview, file_size: int) -> Trailer:
        """The trailer of a file from its last :data:`TRAILER_SIZE` bytes (or fewer, for a truncated file)."""
        if len(data) < 4:
            raise CorruptHFile(f"file of {file_size} bytes is too short for an HFile trailer")
        version = _INT.unpack_from(data, len(data) - 4)[0] & 0xFFFFFFFF
        major, minor = version & 0x00FFFFFF, version >> 24
        if major != SUPPORTED_MAJOR_VERSION:
            if major in (1, 2):
                raise UnsupportedHFile(f"HFile major version {major} (minor {minor}); only version 3 is read")
            raise CorruptHFile(
                f"no HFile version at the end of the file: found {version:#010x} "
                f"(major {major}, minor {minor}); truncated or not an HFile"
            )
        if len(data) < TRAILER_SIZE or file_size < TRAILER_SIZE:
            raise CorruptHFile(f"file of {file_size} bytes is too short for an HFile v3 trailer")
        if bytes(data[:8]) != TRAILER_MAGIC:
            raise CorruptHFile(f"bad trailer magic {bytes(data[:8])!r} at byte {file_size - TRAILER_SIZE}")
        length, pos = read_varint(data, 8)
        if pos + length > TRAILER_SIZE - 4:
            raise CorruptHFile(f"trailer message of {length} bytes does not fit in the trailer")
        fields = parse_protobuf(data[pos : pos + length])

        def number(field: int, default: int = 0) -> int:
            value = fields.get(field, [default])[-1]
            if not isinstance(value, int):
                raise CorruptHFile(f"trailer field {field} is not a number")
            return value

        if any(fields.get(13, ())):  # Hudi's own writer puts an empty key in every trailer
            raise UnsupportedHFile("encrypted HFile (trailer holds an encryption key)")
        codec = number(12, Compression.NONE)
        if codec not in (Compression.GZ, Compression.NONE):
            name = Compression(codec).name if codec in Compression._value2member_map_ else str(codec)
            raise UnsupportedHFile(f"HFile compression codec {name}; only GZ and NONE are read")
        comparator = fields.get(11, [b""])[-1]
        comparator_name = comparator.decode("utf-8", "replace") if isinstance(comparator, bytes) else ""
        trailer = cls(
            major_version=major,
            minor_version=minor,
            file_info_offset=number(1),
            load_on_open_offset=number(2),
            uncompressed_data_index_size=number(3),
            total_uncompressed_bytes=number(4),
            data_index_count=number(5),
            meta_index_count=number(6),
            entry_count=number(7),
            num_data_index_levels=number(8, 1),
            first_data_block_offset=number(9),
            last_data_block_offset=number(10),
            comparator_class_name=comparator_name,
            compression=Compression(codec),
        )
        body_end = file_size - TRAILER_SIZE
        for name in ("file_info_offset", "load_on_open_offset"):
            if not 0 <= getattr(trailer, name) < body_end:
                raise CorruptHFile(f"trailer's {name} {getattr(trailer, name)} is outside the file's body")
        return trailer


# -- blocks -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Block:
    """One block, checked and decompressed: its magic, where it sits and its uncompressed data."""

    magic: bytes
    offset: int
    on_disk_size: int  # with header and checksums
    data: bytes


@dataclass(frozen=True, slots=True)
class IndexEntry:
    """One entry of a block index: the block it points to and the row of its (first or fake) key."""

    offset: int
    size: int
    key: bytes

    @property
    def row(self) -> bytes:
        return row_of_key(self.key)


class _Source(Protocol):
    def __call__(self, offset: int, length: int) -> bytes | memoryview: ...


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

    def _init(self, read: _Source, size: int, name: str) -> None:
        self._read = read
        self.size = size
        self.name = name
        tail_start = max(0, size - TRAILER_SIZE)
        self.trailer = Trailer.parse(read(tail_start, size - tail_start), size)
        self._body_end = size - TRAILER_SIZE
        self._load_on_open()

    # -- the load-on-open section ------------------------------------------------------------------------

    def _load_on_open(self) -> None:
        t = self.trailer
        offset = t.load_on_open_offset
        root = self.read_block(offset, expect=(ROOT_INDEX_MAGIC,))
        self._data_root = self._parse_root_index(root, t.data_index_count)
        self._root_rows = [entry.row for entry in self._data_root]
        self._index_cache: dict[int, tuple[list[IndexEntry], list[bytes]]] = {}
        self._pair_cache: dict[int, tuple[list[bytes], list[bytes], int]] = {}
        offset += root.on_disk_size
        meta = self.read_block(offset, expect=(ROOT_INDEX_MAGIC,))
        self.meta_index = {e.key: e for e in self._parse_root_index(meta, t.meta_index_count)}
        info = self.read_block(t.file_info_offset, expect=(FILE_INFO_BLOCK_MAGIC,))
        self.file_info = self._parse_file_info(info)
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
        if t.data_index_count == 0 and t.entry_count:
            raise CorruptHFile(f"trailer counts {t.entry_count} entries but the data index is empty")
        for entry in self._data_root:
            if not 0 <= entry.offset < t.load_on_open_offset:
                raise CorruptHFile(
                    f"data index entry points at byte {entry.offset}, outside the data section"
                )

    def _parse_root_index(self, block: Block, count: int) -> list[IndexEntry]:
        data, pos, entries = block.data, 0, []
        for _ in range(count):
            if pos + 12 > len(data):
                raise CorruptHFile(
                    f"root index block at byte {block.offset} holds fewer than {count} entries"
                )
            offset, size = _ENTRY.unpack_from(data, pos)
            length, pos = read_vlong(data, pos + 12)
            if length < 0 or pos + length > len(data):
                raise CorruptHFile(f"root index key of {length} bytes runs past its block at {block.offset}")
            entries.append(IndexEntry(offset, size, data[pos : pos + length]))
            pos += length
        return entries

    def _parse_non_root_index(self, block: Block) -> list[IndexEntry]:
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

    def _parse_file_info(self, block: Block) -> dict[bytes, bytes]:
        data = block.data
        if data[:4] != FILE_INFO_MAGIC:
            raise UnsupportedHFile(
                f"file info at byte {block.offset} is not protobuf (no {FILE_INFO_MAGIC!r})"
            )
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

    # -- blocks ------------------------------------------------------------------------------------------

    def read_block(self, offset: int, *, expect: tuple[bytes, ...] | None = None) -> Block:
        """The block at ``offset``, its checksums verified and its data decompressed."""
        if not 0 <= offset <= self._body_end - HEADER_SIZE:
            raise CorruptHFile(f"{self.name}: block offset {offset} is outside the file's body")
        header = self._read(offset, HEADER_SIZE)
        magic, on_disk, uncompressed, _prev, checksum_type, per_checksum, data_with_header = (
            _HEADER.unpack_from(header, 0)
        )
        if expect is not None and magic not in expect:
            raise CorruptHFile(
                f"{self.name}: expected a {expect[0]!r} block at byte {offset}, found {magic!r}"
            )
        total = HEADER_SIZE + on_disk
        if (
            on_disk < 0
            or uncompressed < 0
            or offset + total > self._body_end
            or not HEADER_SIZE <= data_with_header <= total
        ):
            raise CorruptHFile(f"{self.name}: block {magic!r} at byte {offset} has impossible sizes")
        raw = memoryview(self._read(offset, total))
        if checksum_type in (ChecksumType.CRC32, ChecksumType.CRC32C):
            if per_checksum <= 0:
                raise CorruptHFile(
                    f"{self.name}: block at byte {offset} has {per_checksum} bytes per checksum"
                )
            chunks = -(-data_with_header // per_checksum)
            stored = raw[data_with_header:]
            if len(stored) != 4 * chunks:
                raise CorruptHFile(f"{self.name}: block at byte {offset} has {len(stored)} checksum bytes")
            expected = struct.unpack(f">{chunks}I", stored)
            actual = block_checksums(checksum_type, raw[:data_with_header], per_checksum)
            if list(expected) != actual:
                raise CorruptHFile(f"{self.name}: checksum mismatch in block {magic!r} at byte {offset}")
        elif checksum_type != ChecksumType.NULL:
            raise CorruptHFile(f"{self.name}: unknown checksum type {checksum_type} at byte {offset}")
        body = raw[HEADER_SIZE:data_with_header]
        if self.trailer.compression == Compression.GZ:
            try:
                decompressor = zlib.decompressobj(47)  # gzip or zlib framing
                data = decompressor.decompress(body, uncompressed + 1)
            except zlib.error as e:
                raise CorruptHFile(f"{self.name}: block at byte {offset} does not decompress: {e}") from e
        else:
            data = bytes(body)
        if len(data) != uncompressed:
            raise CorruptHFile(
                f"{self.name}: block {magic!r} at byte {offset} holds {len(data)} bytes, "
                f"its header says {uncompressed}"
            )
        return Block(magic, offset, total, data)

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

    def _cells(self, block: Block) -> Iterator[tuple[bytes, bytes, bytes, int]]:
        """``(key, value, tags, memstore timestamp)`` of each KeyValue of a data block."""
        data, pos, end = block.data, 0, len(block.data)
        tags, mvcc = self.includes_tags, self.includes_mvcc
        unpack = _KV_LENS.unpack_from
        while pos < end:
            if pos + 8 > end:
                raise CorruptHFile(f"{self.name}: truncated cell in block at byte {block.offset}")
            key_len, value_len = unpack(data, pos)
            key_start = pos + 8
            value_start = key_start + key_len
            pos = value_start + value_len
            if key_len < 2 or value_len < 0 or pos > end:
                raise CorruptHFile(f"{self.name}: cell lengths run past the block at byte {block.offset}")
            tag_bytes = b""
            if tags:
                if pos + 2 > end:
                    raise CorruptHFile(f"{self.name}: truncated tags in block at byte {block.offset}")
                tags_len = _SHORT.unpack_from(data, pos)[0]
                tag_bytes = data[pos + 2 : pos + 2 + tags_len]
                pos += 2 + tags_len
            memstore_ts = 0
            if mvcc:
                memstore_ts, pos = read_vlong(data, pos)
            if pos > end:
                raise CorruptHFile(f"{self.name}: cell runs past the block at byte {block.offset}")
            yield (
                data[key_start:value_start],
                data[value_start : value_start + value_len],
                tag_bytes,
                memstore_ts,
            )

    def _pairs(self, block: Block) -> Iterator[tuple[bytes, bytes]]:
        for key, value, _, _ in self._cells(block):
            (length,) = _SHORT.unpack_from(key, 0)
            if 2 + length > len(key):
                raise CorruptHFile(f"{self.name}: row length {length} runs past its key at {block.offset}")
            yield key[2 : 2 + length], value

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
            for pair in self._pairs(block):
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
            for key, value, tags, mvcc in self._cells(block):
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
            entries, rows = self._index_level(entries[self._search(rows, key)].offset)
        offset, last, first = (
            entries[self._search(rows, key)].offset,
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
                for row, value in self._pairs(block):
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
            entries = self._parse_non_root_index(self.read_block(offset, expect=expect))
            if not entries:
                raise CorruptHFile(f"{self.name}: empty index block at byte {offset}")
            cached = self._index_cache[offset] = (entries, [entry.row for entry in entries])
        return cached

    @staticmethod
    def _search(rows: list[bytes], key: bytes) -> int:
        """The last entry whose row sorts before ``key`` (the block where rows ``>= key`` may begin)."""
        return max(0, bisect.bisect_left(rows, key) - 1)

    def meta_block(self, name: bytes) -> bytes | None:
        """The data of the meta block called ``name`` (Hudi's ``bloomFilter``), or ``None``."""
        entry = self.meta_index.get(name)
        if entry is None:
            return None
        return self.read_block(entry.offset, expect=(META_MAGIC,)).data
