"""The fixed trailer of an HFile v3: its last 4096 bytes, ``TRABLK"$`` then a varint-delimited
``FileTrailerProto`` (offsets of the file's sections, counts, the compression codec), zero padding, and the
version as a big-endian int32 (minor version in the top byte, major in the low three).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

from hoodie.errors import CorruptHFile, UnsupportedHFile
from hoodie.hfile.protobuf import parse_protobuf, read_varint

TRAILER_MAGIC = b'TRABLK"$'
TRAILER_SIZE = 4096  # v3 trailers are fixed at 4 KiB
SUPPORTED_MAJOR_VERSION = 3

_INT = struct.Struct(">i")


class Compression(IntEnum):
    """HBase ``Compression.Algorithm`` ordinals, as stored in the trailer."""

    LZO = 0
    GZ = 1
    NONE = 2
    SNAPPY = 3
    LZ4 = 4
    BZIP2 = 5
    ZSTD = 6


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
