"""Avro object container files holding one record: how Hudi stores plans and v8+ commit metadata.

Layout (Avro 1.x specification, all integers zig-zag varints)::

    "Obj" 0x01                                   magic
    map<string, bytes> metadata                  Hudi writes only "avro.schema" (no "avro.codec": null codec)
    16 bytes sync marker
    block: long record count (1), long byte size, the record in Avro binary, the 16-byte sync marker

Records are read with the writer schema embedded in the file, never with ours: the files of every Hudi
version decode as written. Whatever does not check out raises :class:`~hoodie.errors.CorruptTimelineFile`.
Writing mirrors Hudi's ``DataFileWriter`` byte for byte (same header, same single block); only the sync
marker, random in Java, is derived from the content here unless given, so encoding is a pure function.
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import fastavro

from hoodie.avro import AvroSchema
from hoodie.errors import CorruptTimelineFile
from hoodie.varint import varint

__all__ = [
    "MAGIC",
    "SingleRecordContainer",
    "read_container",
    "read_single_record",
    "write_single_record",
]

MAGIC = b"Obj\x01"
SYNC_SIZE = 16


@dataclass(frozen=True)
class SingleRecordContainer:
    """What a one-record container holds: the writer schema (its text and full name), the sync marker, the
    record (as fastavro decodes it: dicts, lists, str, int, float, bool, None)."""

    schema_name: str
    schema_json: str
    sync_marker: bytes
    record: dict[str, Any]

    @property
    def schema_short_name(self) -> str:
        """The writer schema's name without namespace (``HoodieCompactionPlan``)."""
        return self.schema_name.rsplit(".", 1)[-1]


class _Reader:
    """A cursor over bytes that raises CorruptTimelineFile, never IndexError, on truncation."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise CorruptTimelineFile(
                f"Avro container truncated: {what} needs {n} bytes at offset {self.pos}, "
                f"{len(self.data) - self.pos} left"
            )
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def long(self, what: str) -> int:
        shift = 0
        acc = 0
        while True:
            if self.pos >= len(self.data):
                raise CorruptTimelineFile(f"Avro container truncated while reading {what}")
            byte = self.data[self.pos]
            self.pos += 1
            acc |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return (acc >> 1) ^ -(acc & 1)
            shift += 7
            if shift > 63:
                raise CorruptTimelineFile(f"Avro container: malformed varint for {what}")


def read_container(data: bytes) -> SingleRecordContainer:
    """Decode an Avro object container that holds exactly one record, with its embedded writer schema."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if data[:4] != MAGIC:
        raise CorruptTimelineFile(
            f"not an Avro object container: starts with {data[:4]!r}, expected {MAGIC!r}"
            if data
            else "not an Avro object container: the content is empty"
        )
    cur = _Reader(data)
    cur.pos = len(MAGIC)
    metadata = _read_metadata(cur)
    sync = cur.take(SYNC_SIZE, "sync marker")
    schema_bytes = metadata.get("avro.schema")
    if schema_bytes is None:
        raise CorruptTimelineFile("Avro container has no 'avro.schema' in its header")
    codec = metadata.get("avro.codec", b"null").decode("utf-8", "replace")
    if codec not in ("null", "deflate"):
        raise CorruptTimelineFile(
            f"Avro container uses codec {codec!r}; Hudi writes timeline files uncompressed"
        )
    try:
        schema_json = schema_bytes.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptTimelineFile(f"Avro container's writer schema is not UTF-8: {e}") from None
    name, parsed = _parse_writer_schema(schema_json)

    if cur.pos == len(data):
        raise CorruptTimelineFile(f"Avro container of {name} holds no record")
    count = cur.long("block record count")
    size = cur.long("block size")
    block = cur.take(size, "data block")
    block_sync = cur.take(SYNC_SIZE, "block sync marker")
    if block_sync != sync:
        raise CorruptTimelineFile("Avro container's block sync marker does not match its header")
    if count != 1:
        raise CorruptTimelineFile(f"Avro container of {name} holds {count} records in a block, expected 1")
    if cur.pos != len(data):
        raise CorruptTimelineFile(
            f"Avro container of {name} has {len(data) - cur.pos} bytes after its single block, expected none"
        )
    if codec == "deflate":
        try:
            block = zlib.decompress(block, -15)
        except zlib.error as e:
            raise CorruptTimelineFile(f"Avro container's deflate block does not inflate: {e}") from None
    stream = io.BytesIO(block)
    try:
        record = fastavro.schemaless_reader(stream, parsed, None)
    except Exception as e:  # fastavro raises EOFError, ValueError, UnicodeDecodeError, IndexError...
        raise CorruptTimelineFile(f"Avro record of {name} does not decode: {type(e).__name__}: {e}") from None
    if stream.tell() != len(block):
        raise CorruptTimelineFile(
            f"Avro record of {name} ends after {stream.tell()} of its block's {len(block)} bytes"
        )
    if not isinstance(record, dict):
        raise CorruptTimelineFile(f"Avro container of {name} does not hold a record")
    return SingleRecordContainer(name, schema_json, sync, record)


def read_single_record(data: bytes, *, expect: str | tuple[str, ...] | None = None) -> dict[str, Any]:
    """The one record of an Avro container (see :func:`read_container`).

    ``expect`` names the acceptable writer schema(s), short (``HoodieCleanerPlan``) or full names; a file
    written with another schema raises CorruptTimelineFile naming both.
    """
    container = read_container(data)
    if expect is not None:
        wanted = (expect,) if isinstance(expect, str) else expect
        found = container.schema_name
        if not any(found == w or container.schema_short_name == w.rsplit(".", 1)[-1] for w in wanted):
            raise CorruptTimelineFile(f"expected an Avro {' or '.join(wanted)}, found {found}")
    return container.record


def write_single_record(
    record: Mapping[str, Any], schema: AvroSchema, *, sync_marker: bytes | None = None
) -> bytes:
    """An Avro container with ``record`` in ``schema``, as Hudi's Java ``DataFileWriter`` lays it out.

    The header holds only ``avro.schema`` (the schema's Java text, like Hudi's), no codec. ``sync_marker``
    defaults to the first 16 bytes of the MD5 of schema and record bytes (Java uses a random one).
    Raises ValueError if the record does not fit the schema.
    """
    body = io.BytesIO()
    try:
        fastavro.schemaless_writer(body, schema.parsed, dict(record), strict=True)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"record does not fit {schema.name}: {e}") from e
    block = body.getvalue()
    schema_bytes = schema.java_json.encode("utf-8")
    if sync_marker is None:
        sync_marker = hashlib.md5(schema_bytes + block, usedforsecurity=False).digest()
    if len(sync_marker) != SYNC_SIZE:
        raise ValueError(f"a sync marker has {SYNC_SIZE} bytes, got {len(sync_marker)}")
    out = bytearray(MAGIC)
    out += _long(1)  # metadata map: one block of one entry, then the end marker
    out += _bytes(b"avro.schema")
    out += _bytes(schema_bytes)
    out += _long(0)
    out += sync_marker
    out += _long(1)
    out += _long(len(block))
    out += block
    out += sync_marker
    return bytes(out)


def _read_metadata(cur: _Reader) -> dict[str, bytes]:
    metadata: dict[str, bytes] = {}
    while True:
        count = cur.long("header map block count")
        if count == 0:
            return metadata
        if count < 0:
            cur.long("header map block size")
            count = -count
        if count > len(cur.data):
            raise CorruptTimelineFile(f"Avro container header claims {count} entries")
        for _ in range(count):
            key = cur.take(cur.long("header key length"), "header key")
            value = cur.take(cur.long("header value length"), "header value")
            metadata[key.decode("utf-8", "replace")] = value


@lru_cache(maxsize=256)
def _parse_writer_schema(schema_json: str) -> tuple[str, Any]:
    try:
        schema = json.loads(schema_json)
        parsed = fastavro.parse_schema(schema, _write_hint=False)
    except Exception as e:  # json.JSONDecodeError, fastavro.schema.SchemaParseException, ...
        raise CorruptTimelineFile(
            f"Avro container's writer schema is invalid: {type(e).__name__}: {e}"
        ) from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise CorruptTimelineFile("Avro container's writer schema is not a record schema")
    return str(parsed["name"]), parsed


def _long(n: int) -> bytes:
    """An Avro long: zig-zag, then a base-128 varint."""
    return varint((n << 1) ^ (n >> 63))


def _bytes(b: bytes) -> bytes:
    return _long(len(b)) + b
