"""Hudi's record-key bloom filters, byte for byte: ``org.apache.hudi.bloomfilter`` in base file footers.

Two kinds, named by their type code (footer key ``hoodie_bloom_filter_type_code``; absent means ``SIMPLE``):

- ``SIMPLE``: Hadoop's ``BloomFilter``: one bit vector.
- ``DYNAMIC_V0``: Hudi's ``HoodieDynamicBoundedBloomFilter``: rows of simple filters, each sized for ``nr``
  keys. Keys go to the last row until it holds ``nr``; then a row is added while ``rows * nr < maxNr``;
  once that bound is reached the next key goes to row 0 and every later key round-robin over the rows
  (0, 1, ..., rows - 1, 0, ...). A key might be present when any row says so.

Sizing (Hudi ``BloomFilterUtils``), for ``n`` entries and false-positive rate ``p``::

    vectorSize = ceil(n * (-ln p / (ln 2)^2))        nbHash = ceil(ln 2 * vectorSize / n)

(60000 entries at 1e-9, Hudi's defaults: 2587966 bits, 30 hashes.)

Hashing a key: its UTF-8 bytes (never empty) are hashed ``nbHash`` times, each hash seeded with the previous
one (the first with 0); hash ``h`` sets bit ``abs(h % vectorSize)`` with Java's ``%`` (the sign of the
dividend). Hash type 1 is Hadoop's 32-bit MurmurHash (MurmurHash2, ``m = 0x5bd1e995``, ``r = 24``, the one to
three tail bytes sign-extended and mixed as ``t[0] << 16 ^ t[1] << 8 ^ t[2]`` for three, ``t[0] << 8 ^ t[1]``
for two); hash type 0 is Hadoop's JenkinsHash (Bob Jenkins' lookup3 ``hashlittle``), only ever met in old
Hadoop-written filters. Hudi writes murmur.

Serialized form (Java ``DataOutput``, big-endian)::

    simple  := int32 -1 (version), int32 nbHash, byte hashType, int32 vectorSize, bits
    bits    := ceil(vectorSize / 8) bytes; bit i is byte i / 8, mask 1 << (i % 8)
    dynamic := int32 -1, int32 nbHash, byte hashType, int32 vectorSize,
               int32 nr, int32 currentNbRecord, int32 rows, simple * rows

(a positive first int32 is Hadoop's unversioned form: it is nbHash, and the hash is Jenkins). Footers hold the
standard Base64 (with padding) of these bytes.

Adding keys is vectorised: keys are grouped by byte length and hashed column-wise with numpy ``uint32``
arithmetic, so a million keys take a fraction of a second; :func:`murmur_hash` and :func:`jenkins_hash` are
the scalar definitions the vectorised code is tested against.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hoodie.errors import CorruptBloomFilter

__all__ = [
    "DYNAMIC_V0",
    "FOOTER_KEY",
    "FOOTER_TYPE_CODE_KEY",
    "JENKINS_HASH",
    "MURMUR_HASH",
    "OLD_FOOTER_KEY",
    "SIMPLE",
    "BloomFilter",
    "DynamicBloomFilter",
    "SimpleBloomFilter",
    "bloom_filter_from_bytes",
    "bloom_filter_size",
    "deserialize_bloom_filter",
    "hash_positions",
    "hash_positions_many",
    "jenkins_hash",
    "murmur_hash",
    "new_bloom_filter",
    "read_bloom_filter",
]

SIMPLE = "SIMPLE"
DYNAMIC_V0 = "DYNAMIC_V0"
TYPE_CODES = (SIMPLE, DYNAMIC_V0)

JENKINS_HASH = 0
MURMUR_HASH = 1
HASH_TYPES = (JENKINS_HASH, MURMUR_HASH)

FOOTER_KEY = b"org.apache.hudi.bloomfilter"
OLD_FOOTER_KEY = b"com.uber.hoodie.bloomfilter"
FOOTER_TYPE_CODE_KEY = b"hoodie_bloom_filter_type_code"

_VERSION = -1
_HEADER = struct.Struct(">iibi")  # version, nbHash, hashType, vectorSize
_DYNAMIC_HEADER = struct.Struct(">iii")  # nr, currentNbRecord, rows
_MAX_INT = 2**31 - 1

_M = np.uint32(0x5BD1E995)
_CHUNK = 1 << 16  # keys hashed together: bounds the (nbHash, chunk) position matrix

U32Array: TypeAlias = npt.NDArray[np.uint32]
BoolArray: TypeAlias = npt.NDArray[np.bool_]
Keys: TypeAlias = "pa.Array | pa.ChunkedArray | Sequence[str]"
"""Keys to add or test: an Arrow string (or binary) array, chunked or not, or a sequence of ``str``."""


# -- sizing ------------------------------------------------------------------------------------------------


def bloom_filter_size(num_entries: int, fpp: float) -> tuple[int, int]:
    """``(vectorSize, nbHash)`` of a filter for ``num_entries`` keys at false-positive rate ``fpp``.

    Evaluated in the same order as Hudi's ``BloomFilterUtils`` (double arithmetic, then ``ceil``), so the
    results are the same integers.
    """
    if num_entries <= 0 or num_entries > _MAX_INT:
        raise ValueError(f"a bloom filter needs a positive number of entries (int32), not {num_entries}")
    if not 0.0 < fpp < 1.0:
        raise ValueError(f"a bloom filter's false-positive rate must lie strictly between 0 and 1, not {fpp}")
    log2 = math.log(2)
    bits = math.ceil(num_entries * (-math.log(fpp) / (log2 * log2)))
    if bits > _MAX_INT:
        raise ValueError(f"a bloom filter for {num_entries} entries at {fpp} needs {bits} bits: over int32")
    hashes = math.ceil(log2 * bits / num_entries)
    return bits, hashes


# -- scalar hashes -----------------------------------------------------------------------------------------


def _signed32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def _sign_extend_byte(b: int) -> int:
    return b - 256 if b & 0x80 else b


def murmur_hash(data: bytes, seed: int = 0) -> int:
    """Hadoop's ``MurmurHash.hash(data, length, seed)``, as a signed 32-bit int (Java's ``int``)."""
    m = 0x5BD1E995
    length = len(data)
    h = (seed ^ length) & 0xFFFFFFFF
    len4 = length >> 2
    for i in range(len4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    left = length - (len4 << 2)
    if left:
        tail = [_sign_extend_byte(b) for b in data[length - left :]]
        if left >= 3:
            h ^= (tail[-3] << 16) & 0xFFFFFFFF
        if left >= 2:
            h ^= (tail[-2] << 8) & 0xFFFFFFFF
        h ^= tail[-1] & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return _signed32(h)


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & 0xFFFFFFFF


def jenkins_hash(data: bytes, seed: int = 0) -> int:
    """Hadoop's ``JenkinsHash.hash(data, length, seed)`` (lookup3 ``hashlittle``), as a signed 32-bit int."""
    mask = 0xFFFFFFFF
    length = len(data)
    a = b = c = (0xDEADBEEF + length + seed) & mask
    if length == 0:
        return _signed32(c)
    padded = data + bytes(-length % 12)
    blocks = len(padded) // 12
    for block in range(blocks):
        w0, w1, w2 = struct.unpack_from("<III", padded, 12 * block)
        a, b, c = (a + w0) & mask, (b + w1) & mask, (c + w2) & mask
        if block == blocks - 1:
            break
        a = (a - c) & mask
        a ^= _rot(c, 4)
        c = (c + b) & mask
        b = (b - a) & mask
        b ^= _rot(a, 6)
        a = (a + c) & mask
        c = (c - b) & mask
        c ^= _rot(b, 8)
        b = (b + a) & mask
        a = (a - c) & mask
        a ^= _rot(c, 16)
        c = (c + b) & mask
        b = (b - a) & mask
        b ^= _rot(a, 19)
        a = (a + c) & mask
        c = (c - b) & mask
        c ^= _rot(b, 4)
        b = (b + a) & mask
    c ^= b
    c = (c - _rot(b, 14)) & mask
    a ^= c
    a = (a - _rot(c, 11)) & mask
    b ^= a
    b = (b - _rot(a, 25)) & mask
    c ^= b
    c = (c - _rot(b, 16)) & mask
    a ^= c
    a = (a - _rot(c, 4)) & mask
    b ^= a
    b = (b - _rot(a, 14)) & mask
    c ^= b
    c = (c - _rot(b, 24)) & mask
    return _signed32(c)


def hash_positions(key: bytes, num_hashes: int, vector_size: int, hash_type: int = MURMUR_HASH) -> list[int]:
    """The bits one key sets (Hadoop ``HashFunction.hash``): chained hashes, ``abs(h % vectorSize)``."""
    if not key:
        raise ValueError("a bloom filter key must not be empty (Hudi refuses empty keys)")
    hash_fn = murmur_hash if hash_type == MURMUR_HASH else jenkins_hash
    out = []
    h = 0
    for _ in range(num_hashes):
        h = hash_fn(key, h)
        out.append(abs(h) % vector_size)  # == abs(h % v) with Java's truncating %
    return out


# -- vectorised hashes -------------------------------------------------------------------------------------


def _utf8_chunks(keys: Keys) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]]:
    """(offsets, data) of the UTF-8 bytes of the keys, in order, at most :data:`_CHUNK` keys at a time."""
    if isinstance(keys, pa.ChunkedArray):
        arrays = list(keys.chunks)
    elif isinstance(keys, pa.Array):
        arrays = [keys]
    else:
        arrays = [pa.array(list(keys), type=pa.string())]
    for arr in arrays:
        if pa.types.is_dictionary(arr.type) or pa.types.is_string_view(arr.type):
            arr = arr.cast(pa.large_string())
        if pa.types.is_binary_view(arr.type):
            arr = arr.cast(pa.large_binary())
        if pa.types.is_string(arr.type) or pa.types.is_binary(arr.type):
            offset_type: type[np.integer] = np.int32
        elif pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type):
            offset_type = np.int64
        else:
            raise TypeError(f"bloom filter keys must be strings, not {arr.type}")
        if arr.null_count:
            raise ValueError("bloom filter keys must not be null (Hudi record keys never are)")
        if len(arr) == 0:
            continue
        buffers = arr.buffers()
        offsets = np.frombuffer(buffers[1], dtype=offset_type)[arr.offset : arr.offset + len(arr) + 1]
        data_buffer = buffers[2]
        data = np.zeros(0, np.uint8) if data_buffer is None else np.frombuffer(data_buffer, dtype=np.uint8)
        for start in range(0, len(arr), _CHUNK):
            stop = min(start + _CHUNK, len(arr))
            yield offsets[start : stop + 1].astype(np.int64), data


def _length_groups(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8]
) -> Iterator[tuple[slice | npt.NDArray[np.intp], int, npt.NDArray[np.uint8]]]:
    """Keys of equal byte length: (their indexes in the chunk, the length, an (n, length) byte matrix)."""
    lengths = np.diff(offsets)
    if lengths.size and int(lengths.min()) == 0:
        raise ValueError("a bloom filter key must not be empty (Hudi refuses empty keys)")
    first = int(lengths[0])
    if bool(np.all(lengths == first)):  # the usual case (UUIDs): one contiguous block, no gather
        block = data[int(offsets[0]) : int(offsets[-1])]
        yield slice(None), first, block.reshape(-1, first)
        return
    order = np.argsort(lengths, kind="stable")
    sorted_lengths = lengths[order]
    bounds = np.flatnonzero(np.diff(sorted_lengths)) + 1
    for idx in np.split(order, bounds):
        length = int(lengths[idx[0]])
        matrix = data[offsets[idx][:, None] + np.arange(length)]
        yield idx, length, matrix


class _MurmurGroup:
    """Keys of one byte length prepared for Murmur: the seed-independent parts computed once."""

    def __init__(self, matrix: npt.NDArray[np.uint8], length: int) -> None:
        self.length = np.uint32(length & 0xFFFFFFFF)
        len4 = length >> 2
        n = matrix.shape[0]
        if len4:
            words = np.ascontiguousarray(matrix[:, : 4 * len4]).view("<u4").astype(np.uint32, copy=False)
            k = words * _M
            k ^= k >> np.uint32(24)
            k *= _M
            self.mixed: U32Array = np.ascontiguousarray(k.T)
        else:
            self.mixed = np.zeros((0, n), np.uint32)
        left = length - 4 * len4
        self.tail: U32Array | None = None
        if left:
            t = matrix[:, 4 * len4 :].view(np.int8).astype(np.int32)
            tail = t[:, -1].copy()
            if left >= 2:
                tail ^= t[:, -2] << 8
            if left >= 3:
                tail ^= t[:, -3] << 16
            self.tail = tail.view(np.uint32)

    def hash(self, seeds: U32Array) -> U32Array:
        h = seeds ^ self.length
        for row in self.mixed:
            h *= _M
            h ^= row
        if self.tail is not None:
            h ^= self.tail
            h *= _M
        h ^= h >> np.uint32(13)
        h *= _M
        h ^= h >> np.uint32(15)
        return h


def _rotv(x: U32Array, k: int) -> U32Array:
    return (x << np.uint32(k)) | (x >> np.uint32(32 - k))


class _JenkinsGroup:
    """Keys of one byte length prepared for Jenkins lookup3: little-endian words of 12-byte blocks."""

    def __init__(self, matrix: npt.NDArray[np.uint8], length: int) -> None:
        self.length = length
        n = matrix.shape[0]
        blocks = max(1, -(-length // 12))
        padded = np.zeros((n, 12 * blocks), np.uint8)
        padded[:, :length] = matrix
        self.words: U32Array = np.ascontiguousarray(padded.view("<u4").astype(np.uint32, copy=False).T)

    def hash(self, seeds: U32Array) -> U32Array:
        init = np.uint32((0xDEADBEEF + self.length) & 0xFFFFFFFF)
        a = seeds + init
        if self.length == 0:
            return a
        b = a.copy()
        c = a.copy()
        blocks = self.words.shape[0] // 3
        for block in range(blocks):
            a += self.words[3 * block]
            b += self.words[3 * block + 1]
            c += self.words[3 * block + 2]
            if block == blocks - 1:
                break
            a -= c
            a ^= _rotv(c, 4)
            c += b
            b -= a
            b ^= _rotv(a, 6)
            a += c
            c -= b
            c ^= _rotv(b, 8)
            b += a
            a -= c
            a ^= _rotv(c, 16)
            c += b
            b -= a
            b ^= _rotv(a, 19)
            a += c
            c -= b
            c ^= _rotv(b, 4)
            b += a
        c ^= b
        c -= _rotv(b, 14)
        a ^= c
        a -= _rotv(c, 11)
        b ^= a
        b -= _rotv(a, 25)
        c ^= b
        c -= _rotv(b, 16)
        a ^= c
        a -= _rotv(c, 4)
        b ^= a
        b -= _rotv(a, 14)
        c ^= b
        c -= _rotv(b, 24)
        return c


def _chunk_positions(
    offsets: npt.NDArray[np.int64],
    data: npt.NDArray[np.uint8],
    num_hashes: int,
    vector_size: int,
    hash_type: int,
) -> U32Array:
    """Bit positions, shape (num_hashes, keys), of one chunk of keys."""
    n = len(offsets) - 1
    out = np.empty((num_hashes, n), np.uint32)
    modulus = np.uint32(vector_size)
    for idx, length, matrix in _length_groups(offsets, data):
        group: _MurmurGroup | _JenkinsGroup = (
            _MurmurGroup(matrix, length) if hash_type == MURMUR_HASH else _JenkinsGroup(matrix, length)
        )
        h = np.zeros(matrix.shape[0], np.uint32)
        for i in range(num_hashes):
            h = group.hash(h)
            # Java: Math.abs(h % v) == |h| % v; |INT_MIN| wraps to INT_MIN, whose uint32 view is 2^31.
            magnitude = np.abs(h.view(np.int32)).view(np.uint32)
            out[i, idx] = magnitude % modulus
    return out


def hash_positions_many(
    keys: Keys, num_hashes: int, vector_size: int, hash_type: int = MURMUR_HASH
) -> U32Array:
    """:func:`hash_positions` of many keys at once: an array of shape ``(num_hashes, len(keys))``."""
    parts = [
        _chunk_positions(offsets, data, num_hashes, vector_size, hash_type)
        for offsets, data in _utf8_chunks(keys)
    ]
    if not parts:
        return np.zeros((num_hashes, 0), np.uint32)
    return np.concatenate(parts, axis=1) if len(parts) > 1 else parts[0]


# -- filters -----------------------------------------------------------------------------------------------


def _check_params(vector_size: int, num_hashes: int, hash_type: int) -> None:
    if not 0 < vector_size <= _MAX_INT:
        raise ValueError(f"a bloom filter's vector size must be a positive int32, not {vector_size}")
    if not 0 < num_hashes <= _MAX_INT:
        raise ValueError(f"a bloom filter's number of hashes must be a positive int32, not {num_hashes}")
    if hash_type not in HASH_TYPES:
        raise ValueError(f"unknown hash type {hash_type} (0 = Jenkins, 1 = Murmur)")


class BloomFilter(ABC):
    """A Hudi bloom filter over record keys (UTF-8 strings). Not thread-safe; adding is in key order."""

    type_code: str
    vector_size: int
    num_hashes: int
    hash_type: int

    @abstractmethod
    def add_keys(self, keys: Keys) -> None:
        """Add keys in order (for ``DYNAMIC_V0`` the order decides which row each key lands in)."""

    def add(self, key: str) -> None:
        """Add one key."""
        self.add_keys([key])

    @abstractmethod
    def _contains_positions(self, positions: U32Array) -> BoolArray:
        """Membership of keys given their positions, shape (num_hashes, n)."""

    def might_contain(self, key: str) -> bool:
        """False when the key was certainly never added."""
        positions = hash_positions(key.encode("utf-8"), self.num_hashes, self.vector_size, self.hash_type)
        return bool(self._contains_positions(np.array(positions, np.uint32).reshape(-1, 1))[0])

    def might_contain_many(self, keys: Keys) -> BoolArray:
        """:meth:`might_contain` of many keys: a numpy bool array in key order."""
        positions = hash_positions_many(keys, self.num_hashes, self.vector_size, self.hash_type)
        return self._contains_positions(positions)

    @abstractmethod
    def to_bytes(self) -> bytes:
        """The serialized form (see the module docstring)."""

    def serialize(self) -> str:
        """The Base64 text stored in parquet footers under ``org.apache.hudi.bloomfilter``."""
        return base64.b64encode(self.to_bytes()).decode("ascii")

    def _header(self) -> bytes:
        return _HEADER.pack(_VERSION, self.num_hashes, self.hash_type, self.vector_size)


def _pack_bits(bits: BoolArray) -> bytes:
    return np.packbits(bits, bitorder="little").tobytes()


class SimpleBloomFilter(BloomFilter):
    """Hadoop's ``BloomFilter`` as Hudi's ``SimpleBloomFilter`` wraps it (type code ``SIMPLE``)."""

    type_code = SIMPLE

    def __init__(
        self, vector_size: int, num_hashes: int, hash_type: int = MURMUR_HASH, bits: BoolArray | None = None
    ) -> None:
        _check_params(vector_size, num_hashes, hash_type)
        self.vector_size = vector_size
        self.num_hashes = num_hashes
        self.hash_type = hash_type
        if bits is None:
            bits = np.zeros(vector_size, np.bool_)
        elif bits.shape != (vector_size,):
            raise ValueError(f"bit vector of shape {bits.shape} for a filter of {vector_size} bits")
        self.bits: BoolArray = bits

    @classmethod
    def for_entries(cls, num_entries: int, fpp: float, hash_type: int = MURMUR_HASH) -> SimpleBloomFilter:
        """An empty filter sized for ``num_entries`` keys at false-positive rate ``fpp``."""
        vector_size, num_hashes = bloom_filter_size(num_entries, fpp)
        return cls(vector_size, num_hashes, hash_type)

    def add_keys(self, keys: Keys) -> None:
        for offsets, data in _utf8_chunks(keys):
            positions = _chunk_positions(offsets, data, self.num_hashes, self.vector_size, self.hash_type)
            self.bits[positions.ravel()] = True

    def _contains_positions(self, positions: U32Array) -> BoolArray:
        found: BoolArray = np.logical_and.reduce(self.bits[positions], axis=0)
        return found

    def to_bytes(self) -> bytes:
        return self._header() + _pack_bits(self.bits)


class DynamicBloomFilter(BloomFilter):
    """Hudi's ``HoodieDynamicBoundedBloomFilter`` (type code ``DYNAMIC_V0``): bounded rows of simple filters.

    ``entries_per_row`` is ``nr`` (the configured number of entries), ``max_entries`` the bound on
    ``rows * nr`` after which keys go round-robin over the rows. The bound and the round-robin cursor are not
    serialized: a deserialized filter has ``max_entries = 0`` and no cursor, exactly as Hudi's.
    """

    type_code = DYNAMIC_V0

    def __init__(
        self,
        vector_size: int,
        num_hashes: int,
        entries_per_row: int,
        max_entries: int,
        hash_type: int = MURMUR_HASH,
        *,
        rows: list[BoolArray] | None = None,
        current_count: int = 0,
    ) -> None:
        _check_params(vector_size, num_hashes, hash_type)
        self.vector_size = vector_size
        self.num_hashes = num_hashes
        self.hash_type = hash_type
        self.entries_per_row = entries_per_row
        self.max_entries = max_entries
        self.rows: list[BoolArray] = rows if rows is not None else [np.zeros(vector_size, np.bool_)]
        if not self.rows:
            raise ValueError("a dynamic bloom filter has at least one row")
        self.current_count = current_count
        self._reached_max = False
        self._cursor = 0

    @classmethod
    def for_entries(
        cls, num_entries: int, fpp: float, max_entries: int, hash_type: int = MURMUR_HASH
    ) -> DynamicBloomFilter:
        """An empty filter with rows sized for ``num_entries`` keys at ``fpp``, bounded by ``max_entries``."""
        vector_size, num_hashes = bloom_filter_size(num_entries, fpp)
        return cls(vector_size, num_hashes, num_entries, max_entries, hash_type)

    def _assign_rows(self, n: int) -> npt.NDArray[np.int64]:
        """The row each of the next ``n`` keys goes to, advancing the state as Hudi's ``add`` does."""
        out = np.empty(n, np.int64)
        i = 0
        while i < n:
            if self._reached_max:
                rest = n - i
                out[i:] = (self._cursor + np.arange(rest, dtype=np.int64)) % len(self.rows)
                self._cursor += rest
                self.current_count += rest
                break
            if self.current_count >= self.entries_per_row:
                if len(self.rows) * self.entries_per_row < self.max_entries:
                    self.rows.append(np.zeros(self.vector_size, np.bool_))
                    self.current_count = 0
                else:
                    self._reached_max = True  # this key goes to row 0 and the cursor does not move
                    out[i] = 0
                    self.current_count += 1
                    i += 1
                    continue
            take = min(self.entries_per_row - self.current_count, n - i)
            out[i : i + take] = len(self.rows) - 1
            self.current_count += take
            i += take
        return out

    def add_keys(self, keys: Keys) -> None:
        for offsets, data in _utf8_chunks(keys):
            positions = _chunk_positions(offsets, data, self.num_hashes, self.vector_size, self.hash_type)
            rows = self._assign_rows(positions.shape[1])
            first, last = int(rows.min()), int(rows.max())
            if first == last:
                self.rows[first][positions.ravel()] = True
                continue
            for r in range(first, last + 1):
                self.rows[r][positions[:, rows == r].ravel()] = True

    def _contains_positions(self, positions: U32Array) -> BoolArray:
        found = np.zeros(positions.shape[1], np.bool_)
        for bits in self.rows:
            found |= bits[positions].all(axis=0)
        return found

    def to_bytes(self) -> bytes:
        parts = [
            self._header(),
            _DYNAMIC_HEADER.pack(
                _java_int(self.entries_per_row), _java_int(self.current_count), len(self.rows)
            ),
        ]
        row_header = self._header()
        for bits in self.rows:
            parts.append(row_header)
            parts.append(_pack_bits(bits))
        return b"".join(parts)


def _java_int(value: int) -> int:
    """``value`` wrapped to int32 as a Java ``int`` counter would be."""
    return _signed32(value)


# -- construction and reading ------------------------------------------------------------------------------


def new_bloom_filter(
    type_code: str = DYNAMIC_V0, num_entries: int = 60000, fpp: float = 1e-9, max_entries: int = 100000
) -> BloomFilter:
    """A new, empty filter as Hudi's ``BloomFilterFactory.createBloomFilter`` makes it (Murmur hashing).

    ``type_code`` is ``SIMPLE`` or ``DYNAMIC_V0`` (any case); ``max_entries`` only matters for the latter.
    """
    code = type_code.upper()
    if code == SIMPLE:
        return SimpleBloomFilter.for_entries(num_entries, fpp)
    if code == DYNAMIC_V0:
        return DynamicBloomFilter.for_entries(num_entries, fpp, max_entries)
    raise ValueError(f"unknown bloom filter type code {type_code!r} (expected SIMPLE or DYNAMIC_V0)")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def unpack(self, fmt: struct.Struct) -> tuple[int, ...]:
        if self.pos + fmt.size > len(self.data):
            raise CorruptBloomFilter(f"bloom filter ends after {len(self.data)} bytes, inside a header")
        values = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return tuple(int(v) for v in values)

    def header(self) -> tuple[int, int, int]:
        """(nbHash, hashType, vectorSize), accepting Hadoop's unversioned form as its reader does."""
        (version,) = self.unpack(_INT)
        if version > 0:
            num_hashes, hash_type = version, JENKINS_HASH
        elif version == _VERSION:
            num_hashes, hash_type = self.unpack(_INT_BYTE)
        else:
            raise CorruptBloomFilter(f"unsupported bloom filter version {version}")
        (vector_size,) = self.unpack(_INT)
        if vector_size <= 0 or num_hashes <= 0 or hash_type not in HASH_TYPES:
            raise CorruptBloomFilter(
                f"bloom filter header is invalid: {num_hashes} hashes, hash type {hash_type}, "
                f"{vector_size} bits"
            )
        return num_hashes, hash_type, vector_size

    def bits(self, vector_size: int) -> BoolArray:
        size = (vector_size + 7) // 8
        if self.pos + size > len(self.data):
            raise CorruptBloomFilter(
                f"bloom filter bit vector of {vector_size} bits needs {size} bytes, "
                f"{len(self.data) - self.pos} remain"
            )
        raw = np.frombuffer(self.data, np.uint8, count=size, offset=self.pos)
        self.pos += size
        return np.unpackbits(raw, bitorder="little", count=vector_size).astype(np.bool_)


_INT = struct.Struct(">i")
_INT_BYTE = struct.Struct(">ib")


def bloom_filter_from_bytes(data: bytes, type_code: str | None = None) -> BloomFilter:
    """Parse the serialized bytes of a filter of ``type_code`` (``None`` means ``SIMPLE``, as in Hudi)."""
    code = (type_code or SIMPLE).upper()
    reader = _Reader(data)
    if code == SIMPLE:
        num_hashes, hash_type, vector_size = reader.header()
        result: BloomFilter = SimpleBloomFilter(vector_size, num_hashes, hash_type, reader.bits(vector_size))
    elif code == DYNAMIC_V0:
        num_hashes, hash_type, vector_size = reader.header()
        nr, count, num_rows = reader.unpack(_DYNAMIC_HEADER)
        if num_rows <= 0:
            raise CorruptBloomFilter(f"dynamic bloom filter has {num_rows} rows")
        rows: list[BoolArray] = []
        for _ in range(num_rows):
            row_header = reader.header()
            if row_header != (num_hashes, hash_type, vector_size):
                raise CorruptBloomFilter(
                    f"dynamic bloom filter row {len(rows)} has (hashes, hash type, bits) {row_header}, "
                    f"the filter {(num_hashes, hash_type, vector_size)}"
                )
            rows.append(reader.bits(vector_size))
        result = DynamicBloomFilter(vector_size, num_hashes, nr, 0, hash_type, rows=rows, current_count=count)
    else:
        raise CorruptBloomFilter(
            f"unknown bloom filter type code {type_code!r} (expected SIMPLE, DYNAMIC_V0)"
        )
    if reader.pos != len(data):
        raise CorruptBloomFilter(f"{len(data) - reader.pos} bytes follow the {code} bloom filter")
    return result


def deserialize_bloom_filter(text: str, type_code: str | None = None) -> BloomFilter:
    """Parse the Base64 text of a footer (Hudi ``BloomFilterFactory.fromString``); ``None`` means SIMPLE.

    Raises :class:`~hoodie.errors.CorruptBloomFilter` when the text is not Base64 or the bytes do not parse.
    """
    try:
        data = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as e:
        raise CorruptBloomFilter(f"bloom filter text is not Base64: {e}") from e
    return bloom_filter_from_bytes(data, type_code)


def read_bloom_filter(parquet_footer_metadata: Mapping[bytes, bytes] | None) -> BloomFilter | None:
    """The bloom filter of a parquet base file, from its footer key-value metadata; ``None`` when absent.

    Reads ``org.apache.hudi.bloomfilter`` (or the pre-Apache ``com.uber.hoodie.bloomfilter``) and the type in
    ``hoodie_bloom_filter_type_code`` (absent: ``SIMPLE``), as Hudi's ``readBloomFilterFromMetadata`` does.
    """
    if not parquet_footer_metadata:
        return None
    text = parquet_footer_metadata.get(FOOTER_KEY) or parquet_footer_metadata.get(OLD_FOOTER_KEY)
    if text is None:
        return None
    raw_code = parquet_footer_metadata.get(FOOTER_TYPE_CODE_KEY)
    try:
        code = raw_code.decode("utf-8") if raw_code is not None else None
        return deserialize_bloom_filter(text.decode("ascii"), code)
    except UnicodeDecodeError as e:
        raise CorruptBloomFilter(f"bloom filter footer is not text: {e}") from e
