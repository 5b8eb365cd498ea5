"""Fixtures for the log tests: the shared Hudi fixtures (skipping when absent) and a tiny log writer.

The writer packs blocks exactly as Hudi's ``HoodieLogFormatWriter`` does (see the grammar in
``hoodie.log.block``); it exists to build cases the real files do not cover, never to check itself.
"""

from __future__ import annotations

import io
import json
import struct
import zipfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest

from support.shared import fixtures_dir, missing_message

MAGIC = b"#HUDI#"
LOG_VECTORS = "vectors/log-blocks"
AVRO_VECTOR = "valid_log_avro_data/.ff32ab89-5ad0-4968-83b4-89a34c95d32f-0_20250316025816068.log.1_0-54-122"
DELETE_VECTOR = "valid_log_delete/.6d3d1d6e-2298-4080-a0c1-494877d6f40a-0_20250618054711154.log.1_0-26-85"
PARQUET_VECTOR = (
    "valid_log_parquet_data/.ee2ace10-7667-40f5-9848-0a144b5ea064-0_20250113230302428.log.1_0-188-387"
)
ROLLBACK_VECTOR = "valid_log_rollback/.0712b9f9-d2d5-4cae-bcf4-8fd7146af503-0_20250126040823628.log.2_1-0-1"
KRYO_DELETE_CONTENT = "delete-block-v2-content-10-records.data"


@pytest.fixture(scope="session")
def fixtures_root() -> Path:
    """The shared fixtures folder ($HOODIE_FIXTURES or <repo>/../shared/fixtures); skips when absent."""
    root = fixtures_dir()
    if not (root / LOG_VECTORS).is_dir():
        pytest.skip(missing_message(root / LOG_VECTORS))
    return root


@dataclass(frozen=True)
class Vectors:
    """The real log files of ``vectors/log-blocks`` (written by Hudi)."""

    root: Path

    @property
    def avro(self) -> Path:
        """One AVRO_DATA block, 1 record, instant 20250316025828811."""
        return self.root / AVRO_VECTOR

    @property
    def delete(self) -> Path:
        """One DELETE block (version 3), 3 keys, instant 20250618054714114."""
        return self.root / DELETE_VECTOR

    @property
    def parquet(self) -> Path:
        """One PARQUET_DATA block, 1 record, instant 20250113230424191."""
        return self.root / PARQUET_VECTOR

    @property
    def rollback(self) -> Path:
        """One rollback COMMAND block, instant 20250126040936578, target 20250126040826878."""
        return self.root / ROLLBACK_VECTOR

    @property
    def kryo_delete_content(self) -> Path:
        """The content (not a whole block) of a version-2, Kryo-serialized delete block of 10 records."""
        return self.root / KRYO_DELETE_CONTENT


@pytest.fixture(scope="session")
def vectors(fixtures_root: Path) -> Vectors:
    return Vectors(fixtures_root / LOG_VECTORS)


@pytest.fixture
def unzip_table(fixtures_root: Path, tmp_path: Path) -> Callable[[str], Path]:
    """Unzip ``tables/<zip>`` into a temporary folder; returns the table base path (holding .hoodie)."""

    def unzip(zip_name: str) -> Path:
        archive = fixtures_root / "tables" / zip_name
        if not archive.is_file():
            pytest.skip(f"fixture table {zip_name} not found under {fixtures_root / 'tables'}")
        target = tmp_path / archive.stem
        with zipfile.ZipFile(archive) as z:
            z.extractall(target)
        bases = sorted(
            p.parent
            for p in target.rglob(".hoodie")
            if p.is_dir() and "__MACOSX" not in p.parts and ".hoodie" not in p.parent.parts
        )
        assert bases, f"no .hoodie folder in {zip_name}"
        return bases[0]

    return unzip


class LogWriter:
    """Packs Hudi log blocks and block contents, big-endian, like Hudi's writer (test helper)."""

    COMMAND, DELETE, CORRUPT, AVRO_DATA, HFILE_DATA, PARQUET_DATA, CDC_DATA = range(7)
    INSTANT_TIME, TARGET_INSTANT_TIME, SCHEMA, COMMAND_BLOCK_TYPE, COMPACTED_BLOCK_TIMES = range(5)

    @staticmethod
    def pack_map(entries: Mapping[int, str]) -> bytes:
        out = struct.pack(">i", len(entries))
        for key, value in entries.items():
            raw = value.encode("utf-8")
            out += struct.pack(">ii", key, len(raw)) + raw
        return out

    def block(
        self,
        block_type: int,
        header: Mapping[int, str],
        content: bytes = b"",
        footer: Mapping[int, str] | None = None,
        format_version: int = 1,
    ) -> bytes:
        body = struct.pack(">ii", format_version, block_type) + self.pack_map(header)
        body += struct.pack(">q", len(content)) + content + self.pack_map(footer or {})
        length = len(body) + 8  # the reverse pointer is counted in the block length
        before_pointer = MAGIC + struct.pack(">q", length) + body
        return before_pointer + struct.pack(">q", len(before_pointer))

    @staticmethod
    def avro_content(schema: Any, records: Iterable[Mapping[str, Any]], version: int = 3) -> bytes:
        parsed = fastavro.parse_schema(schema)
        bodies = []
        for record in records:
            buf = io.BytesIO()
            fastavro.schemaless_writer(buf, parsed, dict(record))
            bodies.append(buf.getvalue())
        out = struct.pack(">ii", version, len(bodies))
        for body in bodies:
            out += struct.pack(">i", len(body)) + body
        return out

    def data_block(
        self,
        instant: str,
        schema: Mapping[str, Any],
        records: Iterable[Mapping[str, Any]],
        extra_header: Mapping[int, str] | None = None,
    ) -> bytes:
        header = {self.INSTANT_TIME: instant, self.SCHEMA: json.dumps(schema), **(extra_header or {})}
        return self.block(self.AVRO_DATA, header, self.avro_content(schema, records))

    @staticmethod
    def delete_content(schema: Any, records: list[Mapping[str, Any]], version: int = 3) -> bytes:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), {"deleteRecordList": records})
        payload = buf.getvalue()
        return struct.pack(">ii", version, len(payload)) + payload

    def rollback_block(self, instant: str, target: str) -> bytes:
        header = {self.INSTANT_TIME: instant, self.TARGET_INSTANT_TIME: target, self.COMMAND_BLOCK_TYPE: "0"}
        return self.block(self.COMMAND, header)


@pytest.fixture(scope="session")
def log_writer() -> LogWriter:
    return LogWriter()


SIMPLE_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "rec",
    "namespace": "hoodie.test",
    "fields": [
        {"name": "_hoodie_record_key", "type": ["null", "string"], "default": None},
        {"name": "value", "type": "long"},
    ],
}


@pytest.fixture(scope="session")
def simple_schema() -> dict[str, Any]:
    """A two-column record schema (key, value) for synthetic data blocks."""
    return SIMPLE_SCHEMA
