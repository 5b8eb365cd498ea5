"""Thrift's compact protocol, as Parquet encodes its footer (``FileMetaData``), read into a tree that keeps
every field it meets, known or not, so that a footer read and written again is the same bytes.

Only what Parquet's footer uses is supported: structs, lists, the integer types, doubles, binaries and
booleans. A set or a map in the input is refused (:class:`ThriftError`), not skipped: writing back a struct
with a field dropped would silently change the footer.

Encoding (Apache Thrift, ``TCompactProtocol``): integers are zigzag varints; a field header is one byte,
``delta << 4 | type`` where ``delta`` (1..15) is the field id minus the previous one, else ``type`` followed
by the id as a zigzag varint; a boolean field carries its value in the type (1 true, 2 false); a struct ends
with a zero byte; a list header is ``size << 4 | element type`` for sizes below 15, else ``0xF0 | type`` and
the size as a varint; binaries are a varint length and the bytes.
"""

from __future__ import annotations

import builtins
import struct as _struct
from dataclasses import dataclass, field

from hoodie.errors import HoodieError

BOOL_TRUE, BOOL_FALSE, BYTE, I16, I32, I64, DOUBLE, BINARY, LIST, SET, MAP, STRUCT = range(1, 13)
_INTEGERS = (BYTE, I16, I32, I64)


class ThriftError(HoodieError):
    """Bytes that are not a compact-protocol struct of the kinds a Parquet footer holds."""


@dataclass
class ThriftList:
    """A list: its elements' type code and the elements."""

    element_type: int
    items: list[Value]


@dataclass
class Struct:
    """A struct: ``(field id, type code, value)`` triples in the order read (Parquet writers write ids in
    increasing order; so does :meth:`set` when it adds one)."""

    fields: list[tuple[int, int, Value]] = field(default_factory=list)

    def get(self, field_id: int) -> Value | None:
        for fid, _, value in self.fields:
            if fid == field_id:
                return value
        return None

    def has(self, field_id: int) -> bool:
        return any(fid == field_id for fid, _, _ in self.fields)

    def set(self, field_id: int, type_code: int, value: Value) -> None:
        """Replace the field's value, or add the field in id order."""
        for i, (fid, _, _) in enumerate(self.fields):
            if fid == field_id:
                self.fields[i] = (field_id, type_code, value)
                return
            if fid > field_id:
                self.fields.insert(i, (field_id, type_code, value))
                return
        self.fields.append((field_id, type_code, value))

    def struct(self, field_id: int) -> Struct:
        value = self.get(field_id)
        if not isinstance(value, Struct):
            raise ThriftError(f"field {field_id} is not a struct")
        return value

    def list(self, field_id: int) -> ThriftList:
        value = self.get(field_id)
        if not isinstance(value, ThriftList):
            raise ThriftError(f"field {field_id} is not a list")
        return value

    def structs(self, field_id: int) -> builtins.list[Struct]:
        """A list-of-structs field's elements."""
        items = self.list(field_id).items
        if not all(isinstance(item, Struct) for item in items):
            raise ThriftError(f"field {field_id} is not a list of structs")
        return items  # type: ignore[return-value]

    def int(self, field_id: int) -> int:
        value = self.get(field_id)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ThriftError(f"field {field_id} is not an integer")
        return value


Value = bool | int | float | bytes | Struct | ThriftList


# -- reading -----------------------------------------------------------------------------------------------


class _Reader:
    def __init__(self, data: bytes | memoryview) -> None:
        self.data = memoryview(data).cast("B")  # bytes as 0..255 whatever the buffer's format
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ThriftError("truncated: the bytes end inside a struct")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ThriftError("varint longer than 64 bits")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ThriftError(f"truncated: {n} bytes announced, {len(self.data) - self.pos} left")
        out = bytes(self.data[self.pos : self.pos + n])
        self.pos += n
        return out

    def value(self, type_code: int) -> Value:
        if type_code in _INTEGERS:
            return self.zigzag() if type_code != BYTE else _signed_byte(self.byte())
        if type_code == BINARY:
            return self.take(self.varint())
        if type_code == DOUBLE:
            return float(_struct.unpack("<d", self.take(8))[0])
        if type_code == STRUCT:
            return self.struct()
        if type_code == LIST:
            header = self.byte()
            size, element_type = header >> 4, header & 0x0F
            if size == 15:
                size = self.varint()
            if element_type in (BOOL_TRUE, BOOL_FALSE):
                return ThriftList(element_type, [self.byte() == BOOL_TRUE for _ in range(size)])
            return ThriftList(element_type, [self.value(element_type) for _ in range(size)])
        raise ThriftError(f"type {type_code} is not one a Parquet footer holds")

    def struct(self) -> Struct:
        out = Struct()
        last = 0
        while True:
            header = self.byte()
            if header == 0:
                return out
            delta, type_code = header >> 4, header & 0x0F
            field_id = last + delta if delta else self.zigzag()
            if type_code in (BOOL_TRUE, BOOL_FALSE):
                out.fields.append((field_id, type_code, type_code == BOOL_TRUE))
            else:
                out.fields.append((field_id, type_code, self.value(type_code)))
            last = field_id


def _signed_byte(b: int) -> int:
    return b - 256 if b > 127 else b


def read_struct(data: bytes | memoryview) -> Struct:
    """The struct ``data`` holds, all of it: bytes after the struct's end are an error."""
    reader = _Reader(data)
    out = reader.struct()
    if reader.pos != len(reader.data):
        raise ThriftError(f"{len(reader.data) - reader.pos} bytes after the struct's end")
    return out


# -- writing -----------------------------------------------------------------------------------------------


def _varint(n: int, out: bytearray) -> None:
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


def _zigzag(n: int, out: bytearray) -> None:
    _varint((n << 1) ^ (n >> 63), out)


def _write_value(type_code: int, value: Value, out: bytearray) -> None:
    if type_code in _INTEGERS:
        assert isinstance(value, int)
        if type_code == BYTE:
            out.append(value & 0xFF)
        else:
            _zigzag(value, out)
    elif type_code == BINARY:
        assert isinstance(value, bytes)
        _varint(len(value), out)
        out += value
    elif type_code == DOUBLE:
        assert isinstance(value, float)
        out += _struct.pack("<d", value)
    elif type_code == STRUCT:
        assert isinstance(value, Struct)
        _write_struct(value, out)
    elif type_code == LIST:
        assert isinstance(value, ThriftList)
        size, element_type = len(value.items), value.element_type
        if size < 15:
            out.append(size << 4 | element_type)
        else:
            out.append(0xF0 | element_type)
            _varint(size, out)
        for item in value.items:
            if element_type in (BOOL_TRUE, BOOL_FALSE):
                out.append(BOOL_TRUE if item else BOOL_FALSE)
            else:
                _write_value(element_type, item, out)
    else:
        raise ThriftError(f"type {type_code} is not one a Parquet footer holds")


def _write_struct(value: Struct, out: bytearray) -> None:
    last = 0
    for field_id, type_code, item in value.fields:
        if type_code in (BOOL_TRUE, BOOL_FALSE):
            type_code = BOOL_TRUE if item else BOOL_FALSE
        delta = field_id - last
        if 0 < delta <= 15:
            out.append(delta << 4 | type_code)
        else:
            out.append(type_code)
            _zigzag(field_id, out)
        if type_code not in (BOOL_TRUE, BOOL_FALSE):
            _write_value(type_code, item, out)
        last = field_id
    out.append(0)


def write_struct(value: Struct) -> bytes:
    """``value`` in the compact protocol."""
    out = bytearray()
    _write_struct(value, out)
    return bytes(out)


__all__ = [
    "BINARY",
    "BOOL_FALSE",
    "BOOL_TRUE",
    "BYTE",
    "DOUBLE",
    "I16",
    "I32",
    "I64",
    "LIST",
    "STRUCT",
    "Struct",
    "ThriftError",
    "ThriftList",
    "Value",
    "read_struct",
    "write_struct",
]
