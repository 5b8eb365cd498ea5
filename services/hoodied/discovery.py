"""Discovery: the tables below a discovery root (``discover[]``), each found once whatever leads to it.

A root is walked breadth first down to ``max_depth`` folders below it, past hidden folders (``.``, ``_``) and
not into a table (a folder holding ``.hoodie/hoodie.properties``). Every folder is known by its identity
(:func:`hoodie.storage.identity.table_identity`: on a local file system its real path), and a folder whose
identity was met already is not walked again. So a symbolic link to a table found elsewhere adds no second
table, and a link loop (``a/loop -> a``) ends: once, a root holding one made one table nine tables, each with
a key of its own, whose runners ran one instant apart and deleted each other's files. Breadth first, a
folder is met first by its shortest path, so a folder a link also leads to deeper down is not cut short by
``max_depth``.

A folder met again is *merged*, and :class:`Discovery` lists every such path with the one it was kept as,
which the poller logs and ``/status`` shows: a loop's link (``a/loop`` is ``a``), a second path to a table. A
table is kept as its own path (its identity) when the walk meets that path, else as the path met first (the
shallowest, then the first in name order). A path excluded by ``exclude`` does not count as meeting its
table, so another path that is not excluded still finds it.
A root that does not exist (nothing below it, on an object store) or cannot be listed is an error of its own,
logged and shown in ``/status``, never taken for a root without tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie.storage import Storage
from hoodie.storage.identity import table_identity
from hoodie.storage.redact import redact_uri
from hoodied.config import DiscoveryRoot

PROPERTIES = ".hoodie/hoodie.properties"


@dataclass(frozen=True)
class Found:
    """A table a root holds: the path it was found by (its base path from now on) and its identity."""

    path: str
    identity: str


@dataclass(frozen=True)
class Merged:
    """A second path to a folder or table known by another path (``kept``): a link, a loop's link, a second
    root, or an entry of ``tables``."""

    path: str
    identity: str
    kept: str

    def describe(self) -> str:
        path, kept = redact_uri(self.path), redact_uri(self.kept)
        return f"{path} is {kept} (identity {self.identity}): merged"


@dataclass(frozen=True)
class Discovery:
    """What one scan of a root found: its tables, the paths merged into them, or why it could not be read."""

    root: str
    tables: tuple[Found, ...] = ()
    merged: tuple[Merged, ...] = ()
    error: str | None = None

    def to_json(self) -> dict[str, object]:
        """The root as ``/status`` shows it (credentials hidden)."""
        return {
            "root": redact_uri(self.root),
            "error": self.error,
            "tables": len(self.tables),
            "merged": [
                {
                    "path": redact_uri(m.path),
                    "identity": m.identity,
                    "kept": redact_uri(m.kept),
                }
                for m in self.merged
            ],
        }


def discover(root: DiscoveryRoot) -> Discovery:
    """Scan ``root`` (see the module docstring); an unreadable or missing root is a :class:`Discovery` with
    its ``error`` set, not an exception."""
    try:
        storage = Storage.for_uri(root.root, dict(root.settings.storage_options))
        top = storage.list("")
        if not top and not (storage.is_local and storage.exists("")):
            where = "" if storage.is_local else " (no object below it)"
            return Discovery(root.root, error=f"the discovery root does not exist{where}")
        return _walk(root, storage)
    except Exception as e:  # a store that refuses us, a folder we may not list
        return Discovery(root.root, error=f"cannot scan the discovery root: {type(e).__name__}: {e}")


def _walk(root: DiscoveryRoot, storage: Storage) -> Discovery:
    options = dict(root.settings.storage_options)
    met: dict[str, list[str]] = {}  # identity of each folder met -> the paths it was met by, in order
    tables: set[str] = set()  # identities of the tables found (a set: a root of 100,000 tables looks each up)
    level = [""]
    for depth in range(root.max_depth + 1):
        below: list[str] = []
        for rel in level:
            path = storage.full_path(rel) if rel else root.root
            identity = table_identity(path, options)
            if identity in met:
                met[identity].append(path)
                continue
            if storage.exists(f"{rel}/{PROPERTIES}" if rel else PROPERTIES):
                if not any(p.search(rel) for p in root.exclude):
                    met[identity] = [path]
                    tables.add(identity)
                continue  # never into a table
            met[identity] = [path]
            if depth < root.max_depth:
                below.extend(
                    f"{rel}/{info.name}" if rel else info.name
                    for info in storage.list(rel)
                    if info.is_dir and not info.name.startswith((".", "_"))
                )
        level = below
    found: list[Found] = []
    merged: list[Merged] = []
    for identity, paths in met.items():
        # A table is watched by its own path (its identity) when the walk met that path, else by the first.
        kept = identity if identity in tables and identity in paths else paths[0]
        if identity in tables:
            found.append(Found(kept, identity))
        merged.extend(Merged(p, identity, kept) for p in paths if p != kept)
    return Discovery(root.root, tuple(sorted(found, key=lambda f: f.path)), tuple(merged))


__all__ = ["Discovery", "Found", "Merged", "discover"]
