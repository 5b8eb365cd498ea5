"""The real Hudi tables in ``../shared/fixtures``: found by reading the zips' listings, unzipped once.

A table's base path is a folder with ``.hoodie/hoodie.properties`` (never one below ``.hoodie/metadata``,
never in ``__MACOSX``). Kept out of ``conftest.py`` so that test modules import these types by a module name
of their own (several ``conftest`` modules exist, and whichever loaded last answers ``import conftest``).
"""

from __future__ import annotations

import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path, PurePosixPath

from support.shared import fixtures_dir, missing

PROPERTIES = ".hoodie/hoodie.properties"

UNSUPPORTED_VERSIONS = frozenset({3, 4, 5, 7})
UNSUPPORTED_FORMATS = frozenset({"LANCE", "ORC", "HFILE"})


def fixtures_missing_reason() -> str | None:
    """Why fixture tests cannot run here, or ``None`` when the fixtures are present."""
    return missing(fixtures_dir() / "tables")


def read_properties(text: str) -> dict[str, str]:
    """Just enough of the Java properties grammar to classify a fixture (``key=value``, ``\\:`` escapes).

    Deliberately independent of :mod:`hoodie.config`, which is under test.
    """
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        props[key.strip().replace("\\:", ":")] = value.strip().replace("\\:", ":").replace("\\=", "=")
    return props


@dataclass(frozen=True)
class FixtureTable:
    """One table inside one fixture zip, with its ``hoodie.properties`` as read from the zip."""

    zip_path: Path
    root_in_zip: str  # "" when the table is the zip's root folder
    props: Mapping[str, str] = field(compare=False, repr=False)

    @property
    def source(self) -> str:
        """The fixture folder the zip comes from: ``hudi-rs`` or ``apache-hudi``."""
        return self.zip_path.parent.name

    @property
    def name(self) -> str:
        return self.root_in_zip.rsplit("/", 1)[-1] if self.root_in_zip else self.zip_path.stem

    @property
    def id(self) -> str:
        """``<source>/<zip name>:<root in zip>``, e.g. ``apache-hudi/hudi-v8-table-mor:hudi-v8-table-mor``."""
        return f"{self.source}/{self.zip_path.stem}:{self.root_in_zip or '.'}"

    @property
    def version(self) -> int | None:
        raw = self.props.get("hoodie.table.version", "").strip()
        return int(raw) if raw.isdigit() else None

    @property
    def base_format(self) -> str:
        return (self.props.get("hoodie.table.base.file.format") or "PARQUET").strip().upper()

    @property
    def is_mor(self) -> bool:
        return self.props.get("hoodie.table.type", "").strip().upper() == "MERGE_ON_READ"

    @property
    def populates_meta_fields(self) -> bool:
        return self.props.get("hoodie.populate.meta.fields", "true").strip().lower() != "false"

    @property
    def refusal(self) -> str | None:
        """What must make us refuse this table (``"version 5"``, ``"LANCE"``), if anything."""
        if self.version in UNSUPPORTED_VERSIONS:
            return f"version {self.version}"
        if self.base_format in UNSUPPORTED_FORMATS:
            return self.base_format
        return None


@cache
def discover_tables(root: Path | None = None) -> tuple[FixtureTable, ...]:
    """Every table of every fixture zip (both folders), by reading the zips' listings only."""
    base = (root or fixtures_dir()) / "tables"
    found: list[FixtureTable] = []
    for zip_path in sorted(base.glob("*/*.zip")):
        with zipfile.ZipFile(zip_path) as zf:
            for name in sorted(zf.namelist()):
                if not name.endswith(PROPERTIES):
                    continue
                root_in_zip = name[: -len(PROPERTIES)].rstrip("/")
                parts = PurePosixPath(root_in_zip).parts
                if "__MACOSX" in parts or ".hoodie" in parts:
                    continue  # resource forks; metadata tables (<base>/.hoodie/metadata)
                props = read_properties(zf.read(name).decode("utf-8", errors="replace"))
                found.append(FixtureTable(zip_path.resolve(), root_in_zip, props))
    return tuple(found)


def table_roots(folder: Path) -> list[Path]:
    """Table base paths under an unzipped folder (metadata tables and ``__MACOSX`` left out)."""
    roots = []
    for props in sorted(folder.rglob(PROPERTIES)):
        root = props.parent.parent
        parts = root.relative_to(folder).parts
        if "__MACOSX" in parts or ".hoodie" in parts:
            continue
        roots.append(root)
    return roots


class FixtureCache:
    """Unzips each fixture zip at most once per session, into its own folder below ``base``."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self._extracted: dict[Path, Path] = {}

    def extract(self, zip_path: Path) -> Path:
        zip_path = zip_path.resolve()
        if zip_path not in self._extracted:
            target = self.base / zip_path.parent.name / zip_path.stem
            if target.exists():
                shutil.rmtree(target)
            target.mkdir(parents=True)
            with zipfile.ZipFile(zip_path) as zf:
                zf.extractall(target)
            self._extracted[zip_path] = target
        return self._extracted[zip_path]

    def roots(self, zip_path: Path) -> list[Path]:
        """The table roots in a zip, unzipping it if needed."""
        return table_roots(self.extract(zip_path))

    def root(self, table: FixtureTable) -> Path:
        """The unzipped base path of ``table``, shared by the session: never modify it (``table_copy``)."""
        folder = self.extract(table.zip_path)
        return folder / table.root_in_zip if table.root_in_zip else folder
