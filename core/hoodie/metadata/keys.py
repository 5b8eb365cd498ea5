"""The keys of the metadata table's statistics and bloom filter records, and which file group holds a key.

Keys (:func:`column_stats_key`, :func:`partition_stats_key`, :func:`bloom_filter_key`) are concatenated
Base64 strings (standard alphabet, with padding) of hashes, column first, then partition, then file::

    column_stats     B64(XXH64(column)) + B64(XXH64(partition)) + B64(MD5(file name))   48 characters
    partition_stats  B64(XXH64(column)) + B64(XXH64(partition))                          24 characters
    bloom_filters    B64(XXH64(partition)) + B64(MD5(file name))                         36 characters

XXH64 runs over the UTF-8 bytes with seed ``0xFFFFFFFFDABADABA`` (Hudi's int seed ``0xdabadaba`` widened to a
long) and is written as 8 big-endian bytes; MD5 gives 16. The partition is named as the ``files`` partition
names it: a non-partitioned table's ``""`` is ``"."``. :func:`file_group_index` says which file group of a
metadata-table partition holds a key (Java's ``String.hashCode``, as Hudi's ``HoodieTableMetadataUtil``).
"""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hoodie.metadata.records import NON_PARTITIONED_NAME

__all__ = [
    "HASH_SEED",
    "bloom_filter_key",
    "column_stats_key",
    "file_group_index",
    "file_group_indexes",
    "java_string_hash",
    "partition_stats_key",
    "xxh64",
]

# -- hashing ----------------------------------------------------------------------------------------------

#: The XXH64 seed of Hudi's ``HashID``: the int ``0xdabadaba`` sign-extended to a long.
HASH_SEED = 0xFFFFFFFFDABADABA

_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * _P2) & _MASK, 31) * _P1) & _MASK


def xxh64(data: bytes, seed: int = 0) -> int:
    """The XXH64 hash of ``data`` as an unsigned 64-bit integer (the xxHash specification, in pure Python)."""
    seed &= _MASK
    n = len(data)
    pos = 0
    if n >= 32:
        v1 = (seed + _P1 + _P2) & _MASK
        v2 = (seed + _P2) & _MASK
        v3 = seed
        v4 = (seed - _P1) & _MASK
        while pos + 32 <= n:
            a, b, c, d = struct.unpack_from("<4Q", data, pos)
            v1, v2, v3, v4 = _round(v1, a), _round(v2, b), _round(v3, c), _round(v4, d)
            pos += 32
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _MASK
        for v in (v1, v2, v3, v4):
            h = ((h ^ _round(0, v)) * _P1 + _P4) & _MASK
    else:
        h = (seed + _P5) & _MASK
    h = (h + n) & _MASK
    while pos + 8 <= n:
        (lane,) = struct.unpack_from("<Q", data, pos)
        h = (_rotl(h ^ _round(0, lane), 27) * _P1 + _P4) & _MASK
        pos += 8
    if pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl(h ^ ((word * _P1) & _MASK), 23) * _P2 + _P3) & _MASK
        pos += 4
    while pos < n:
        h = (_rotl(h ^ ((data[pos] * _P5) & _MASK), 11) * _P1) & _MASK
        pos += 1
    h = ((h ^ (h >> 33)) * _P2) & _MASK
    h = ((h ^ (h >> 29)) * _P3) & _MASK
    return h ^ (h >> 32)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _hash64(text: str) -> str:
    return _b64(struct.pack(">Q", xxh64(text.encode("utf-8"), HASH_SEED)))


def _hash128(text: str) -> str:
    return _b64(hashlib.md5(text.encode("utf-8"), usedforsecurity=False).digest())


def _partition_id(partition_path: str) -> str:
    return partition_path or NON_PARTITIONED_NAME


def column_stats_key(column: str, partition_path: str, file_name: str) -> str:
    """The ``column_stats`` key of one column of one file (``file_name`` without its partition folder)."""
    return _hash64(column) + _hash64(_partition_id(partition_path)) + _hash128(file_name)


def partition_stats_key(column: str, partition_path: str) -> str:
    """The ``partition_stats`` key of one column of one partition."""
    return _hash64(column) + _hash64(_partition_id(partition_path))


def bloom_filter_key(partition_path: str, file_name: str) -> str:
    """The ``bloom_filters`` key of one base file."""
    return _hash64(_partition_id(partition_path)) + _hash128(file_name)


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode``: ``31 * h + c`` over the UTF-16 code units, wrapped to a signed int32."""
    h = 0
    units = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _java_abs(x: int) -> int:
    # Math.abs(int): Integer.MIN_VALUE has no positive counterpart and stays negative.
    return x if x == -(1 << 31) else abs(x)


def _java_rem(a: int, n: int) -> int:
    # Java's % keeps the sign of the dividend.
    r = abs(a) % n
    return -r if a < 0 else r


def file_group_index(key: str, count: int) -> int:
    """Which of ``count`` file groups of a metadata-table partition holds ``key``: Hudi's
    ``mapRecordKeyToFileGroupIndex``, ``abs(abs(hashCode) % count)`` with Java's int arithmetic.
    (Secondary indexes of table version 9 hash only the ``"<secondary key>$"`` prefix of their keys.)"""
    if count <= 0:
        raise ValueError(f"a metadata-table partition has at least one file group, not {count}")
    return _java_abs(_java_rem(_java_abs(java_string_hash(key)), count))


def file_group_indexes(keys: Sequence[str], count: int) -> npt.NDArray[np.int64]:
    """:func:`file_group_index` of many keys at once (numpy over the keys' UTF-16 code units)."""
    if count <= 0:
        raise ValueError(f"a metadata-table partition has at least one file group, not {count}")
    n = len(keys)
    if not n:
        return np.zeros(0, np.int64)
    encoded = [k.encode("utf-16-le", "surrogatepass") for k in keys]
    lengths = np.fromiter((len(e) // 2 for e in encoded), np.int64, n)
    units = np.frombuffer(b"".join(encoded), "<u2").astype(np.uint64)
    starts = np.zeros(n, np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    h = np.zeros(n, np.uint64)
    for j in range(int(lengths.max())):
        live = lengths > j
        h[live] = (h[live] * np.uint64(31) + units[starts[live] + j]) & np.uint64(0xFFFFFFFF)
    signed = h.astype(np.int64)
    signed[signed >= 1 << 31] -= 1 << 32
    # abs(abs(h) % count) with Java's int: abs(MIN_VALUE) stays negative, % keeps the dividend's sign
    absolute = np.where(signed == -(1 << 31), signed, np.abs(signed))
    remainder = np.abs(absolute) % count
    remainder = np.where(absolute < 0, -remainder, remainder)
    return np.asarray(np.abs(remainder), np.int64)
