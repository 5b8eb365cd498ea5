"""Paths relative to a table's base path, and the rule that keeps them inside it.

Relative paths may not climb out of the base path: ``..`` components, absolute paths, empty components raise
:class:`~hoodie.errors.PathOutsideTable`, so a malformed plan cannot make us read or write elsewhere.
"""

from __future__ import annotations

from hoodie.errors import PathOutsideTable


def check_relative(path: str) -> str:
    """Return ``path`` normalised (no leading/trailing slash), or raise if it leaves the base path."""
    if path in ("", "."):
        return ""
    if path.startswith("/") or "\\" in path:
        raise PathOutsideTable(f"path {path!r} is not relative to the table's base path")
    parts = path.strip("/").split("/")
    for part in parts:
        if part in ("", ".", ".."):
            raise PathOutsideTable(f"path {path!r} leaves the table's base path or is malformed")
    return "/".join(parts)


def join(root: str, rel: str) -> str:
    """``root/rel`` (either may be empty)."""
    if not root:
        return rel
    return f"{root}/{rel}" if rel else root


__all__ = ["check_relative", "join"]
