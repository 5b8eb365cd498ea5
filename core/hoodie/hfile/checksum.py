"""Block checksums of HFiles: one CRC32C or CRC32 per ``bytes per checksum`` chunk of a block's header and
on-disk data (the block header's checksum type says which), CRC32C computed vectorized over numpy.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from enum import IntEnum
from functools import cache

import numpy as np
import numpy.typing as npt


class ChecksumType(IntEnum):
    NULL = 0
    CRC32 = 1
    CRC32C = 2


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
