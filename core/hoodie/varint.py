"""Base-128 varints, as protobuf and Avro (after zig-zag) write them."""

from __future__ import annotations


def varint(value: int) -> bytes:
    """A non-negative integer as a base-128 varint: seven bits a byte, low bits first, the high bit set on
    every byte but the last."""
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


__all__ = ["varint"]
