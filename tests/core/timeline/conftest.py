"""Fixture tables and Hudi's reference schemas for the timeline tests.

The real tables live as zips in ``../shared/fixtures/tables`` (or ``$HOODIE_FIXTURES/tables``); each is
unzipped once per session, timeline files only, into a temporary folder. Tests that ask for
``fixture_table_zip`` run once per zip; without the fixtures they skip, saying where they looked.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.timeline.instant import Instant
from support.shared import fixtures_dir, missing_message, spec_dir

MISSING = missing_message(fixtures_dir() / "tables")


def table_zips() -> list[str]:
    """The fixture zips, as paths relative to ``tables/`` (``hudi-rs/sample_table_cow_v6_empty.zip``)."""
    tables = fixtures_dir() / "tables"
    if not tables.is_dir():
        return []
    return sorted(str(p.relative_to(tables)) for p in tables.rglob("*.zip"))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "fixture_table_zip" in metafunc.fixturenames:
        zips = table_zips()
        if zips:
            metafunc.parametrize("fixture_table_zip", zips, ids=[z.removesuffix(".zip") for z in zips])
        else:
            metafunc.parametrize(
                "fixture_table_zip", [pytest.param(None, marks=pytest.mark.skip(reason=MISSING))]
            )


@dataclass(frozen=True)
class TimelineFile:
    """One timeline file of a fixture table, with its content."""

    path: str  # relative to the zip's root, for messages
    instant: Instant
    data: bytes


@dataclass(frozen=True)
class FixtureTable:
    """A table (or metadata table) found in a zip: where, which version, its timeline files in name order."""

    zip_name: str
    root: str
    table_version: int
    timeline: tuple[TimelineFile, ...]

    @property
    def is_metadata_table(self) -> bool:
        return self.root.endswith(".hoodie/metadata")


class FixtureTables:
    """Unzips fixture tables on first use (timeline files and ``hoodie.properties`` only) and caches them."""

    def __init__(self, tables_dir: Path, work: Path) -> None:
        self._tables_dir = tables_dir
        self._work = work
        self._cache: dict[str, list[FixtureTable]] = {}

    def load(self, zip_name: str) -> list[FixtureTable]:
        if zip_name not in self._cache:
            self._cache[zip_name] = list(self._extract(zip_name))
        return self._cache[zip_name]

    def _extract(self, zip_name: str) -> Iterator[FixtureTable]:
        target = self._work / zip_name.replace("/", "__")
        with zipfile.ZipFile(self._tables_dir / zip_name) as zf:
            members = [
                m
                for m in zf.namelist()
                if "__MACOSX" not in m
                and "/.hoodie/" in f"/{m}"
                and not m.endswith("/")
                and (m.endswith("/hoodie.properties") or Instant.try_parse(m.rsplit("/", 1)[-1]) is not None)
            ]
            zf.extractall(target, members)
        for props in sorted(target.rglob(".hoodie/hoodie.properties")):
            hoodie = props.parent
            root = hoodie.parent
            version = _table_version(props)
            files: list[TimelineFile] = []
            for folder in (hoodie, hoodie / "timeline"):
                if not folder.is_dir():
                    continue
                for p in sorted(folder.iterdir()):
                    instant = Instant.try_parse(p.name) if p.is_file() else None
                    if instant is not None:
                        files.append(TimelineFile(str(p.relative_to(target)), instant, p.read_bytes()))
            yield FixtureTable(zip_name, str(root.relative_to(target)), version, tuple(files))


def _table_version(props: Path) -> int:
    for line in props.read_text(encoding="utf-8").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "hoodie.table.version":
            return int(value.strip())
    raise AssertionError(f"{props} names no hoodie.table.version")


@pytest.fixture(scope="session")
def fixture_tables(tmp_path_factory: pytest.TempPathFactory) -> FixtureTables:
    tables = fixtures_dir() / "tables"
    if not tables.is_dir():
        pytest.skip(MISSING)
    return FixtureTables(tables, tmp_path_factory.mktemp("fixture-timelines"))


@pytest.fixture(scope="session")
def fixture_table_zips() -> list[str]:
    """All fixture zips (empty when the fixtures are absent)."""
    return table_zips()


@pytest.fixture(scope="session")
def fixture_vectors() -> Path:
    vectors = fixtures_dir() / "vectors"
    if not vectors.is_dir():
        pytest.skip(MISSING)
    return vectors


# ---------------------------------------------------------------------------------------------------------
# Hudi's own schemas, read independently of hoodie.avro


def strip_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside JSON strings."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


class ReferenceSchemas:
    """One of Hudi's schema folders (``hudi-0.15.0``, ``hudi-1.0.0-branchpoint``, ``hudi-master``): every
    named type, and any record made self-contained (named types inlined at first use) and parsed."""

    def __init__(self, folder: Path) -> None:
        self.named: dict[str, dict[str, Any]] = {}
        for path in sorted(folder.glob("*.avsc")):
            self._collect(json.loads(strip_comments(path.read_text(encoding="utf-8"))), "")
        self._parsed: dict[str, Any] = {}

    def _collect(self, schema: Any, space: str) -> None:
        if isinstance(schema, list):
            for s in schema:
                self._collect(s, space)
        elif isinstance(schema, dict):
            kind = schema.get("type")
            if kind in ("record", "enum", "fixed"):
                name = schema["name"]
                full = name if "." in name else f"{schema.get('namespace', space)}.{name}"
                self.named[full] = schema
                for f in schema.get("fields", ()):
                    self._collect(f["type"], full.rsplit(".", 1)[0])
            elif kind == "array":
                self._collect(schema["items"], space)
            elif kind == "map":
                self._collect(schema["values"], space)

    def parsed(self, full_name: str) -> Any:
        if full_name not in self._parsed:
            schema = self._inline(full_name, full_name.rsplit(".", 1)[0], set())
            self._parsed[full_name] = fastavro.parse_schema(schema)
        return self._parsed[full_name]

    def _inline(self, schema: Any, space: str, seen: set[str]) -> Any:
        if isinstance(schema, str):
            full = schema if "." in schema else f"{space}.{schema}"
            if full not in self.named:
                return schema
            if full in seen:
                return full
            definition = self.named[full]
            return self._inline(definition, full.rsplit(".", 1)[0], seen)
        if isinstance(schema, list):
            return [self._inline(s, space, seen) for s in schema]
        out = dict(schema)
        kind = schema.get("type")
        if kind in ("record", "enum", "fixed"):
            name = schema["name"]
            full = name if "." in name else f"{schema.get('namespace', space)}.{name}"
            seen.add(full)
            out["name"], out["namespace"] = full.rsplit(".", 1)[1], full.rsplit(".", 1)[0]
            if kind == "record":
                own = full.rsplit(".", 1)[0]
                out["fields"] = [{**f, "type": self._inline(f["type"], own, seen)} for f in schema["fields"]]
        elif kind == "array":
            out["items"] = self._inline(schema["items"], space, seen)
        elif kind == "map":
            out["values"] = self._inline(schema["values"], space, seen)
        return out


@pytest.fixture(scope="session")
def reference_schemas() -> dict[str, ReferenceSchemas]:
    """Hudi's reference schema sets by folder name."""
    avro = spec_dir() / "avro"
    if not avro.is_dir():
        pytest.skip(missing_message(avro))
    return {d.name: ReferenceSchemas(d) for d in sorted(avro.iterdir()) if d.is_dir()}
