"""The protobuf wire format, as far as HFiles need it: the trailer (``FileTrailerProto``) and the file info
are protobuf messages, read here as varints and fields by number.
"""

from __future__ import annotations

from hoodie.errors import CorruptHFile


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
