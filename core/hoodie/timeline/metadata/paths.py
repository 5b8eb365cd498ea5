"""The paths that plans and metadata name: file names checked to lie directly in their partition, and a
plan's file group checked (its id, partition and files) before anything is written for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hoodie.errors import PathOutsideTable
from hoodie.file_group.base_file import BaseFile
from hoodie.log.log_file import LogFile
from hoodie.storage import check_relative

__all__ = [
    "check_file_group",
    "check_in_partition",
    "file_name_in_partition",
]

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def _path_parts(path: str) -> list[str]:
    """The components of a path with any ``scheme:`` / ``scheme://authority`` prefix removed."""
    m = _SCHEME_RE.match(path)
    if m:
        path = path[m.end() :]
        if path.startswith("//"):
            slash = path.find("/", 2)
            path = "" if slash < 0 else path[slash:]
    return [p for p in path.split("/") if p != ""]


def file_name_in_partition(
    path: str, partition_path: str, *, base_path: str | None = None, allow_path: bool = True
) -> str:
    """The file name of a plan entry that must lie directly in ``partition_path``.

    ``path`` is a bare file name, a path relative to the base path, or a full path (any ``scheme:`` prefix is
    ignored); its parent folders must end with the partition's (and, given ``base_path``, be exactly the
    base path's followed by the partition's). With ``allow_path=False`` only a bare name is accepted.
    Anything else, ``..``, ``.`` or an empty name raises :class:`~hoodie.errors.PathOutsideTable`.
    """
    if not isinstance(path, str) or "\\" in path or "\x00" in path:
        raise PathOutsideTable(f"file path {path!r} is malformed")
    partition_parts = check_relative(partition_path).split("/") if partition_path not in ("", ".") else []
    raw = path.split("/")
    name = raw[-1]
    if name in ("", ".", ".."):
        raise PathOutsideTable(f"file path {path!r} does not end in a file name")
    if len(raw) == 1:
        return name
    if not allow_path:
        raise PathOutsideTable(f"{path!r} should be a file name in partition {partition_path!r}, not a path")
    parents = _path_parts(path)[:-1]
    if any(p in (".", "..") for p in parents):
        raise PathOutsideTable(f"file path {path!r} climbs out of its folder")
    if base_path is not None:
        expected = _path_parts(base_path) + partition_parts
        if parents != expected:
            raise PathOutsideTable(
                f"file path {path!r} is not in partition {partition_path!r} of the table at {base_path!r}"
            )
    elif partition_parts and parents[-len(partition_parts) :] != partition_parts:
        raise PathOutsideTable(f"file path {path!r} is not in partition {partition_path!r}")
    return name


def check_in_partition(paths: Iterable[str | None], partition_path: str, what: str) -> None:
    for p in paths:
        if p:
            try:
                file_name_in_partition(p, partition_path)
            except PathOutsideTable as e:
                raise PathOutsideTable(f"{what}: {e}") from None


_FILE_ID_RE = re.compile(r"[^./\\_\x00][^/\\_\x00]*")


def check_file_group(file_id: str, partition_path: str, names: Iterable[str | None], what: str) -> None:
    """Check a plan's file group before anything is written for it: the file id is one name Hudi's file
    names can carry (no path separator, no ``_``, which separates a file name's fields, not hidden); the
    partition lies in the table; and every base or log file the plan names for it is a file of that group.
    Raises :class:`~hoodie.errors.PathOutsideTable`, naming ``what``."""
    if not _FILE_ID_RE.fullmatch(file_id or ""):
        raise PathOutsideTable(f"{what}: file id {file_id!r} is not a file id Hudi writes")
    if partition_path not in ("", "."):
        try:
            check_relative(partition_path)
        except PathOutsideTable as e:
            raise PathOutsideTable(f"{what}: {e}") from None
    for path in names:
        if not path:
            continue
        name = path.rsplit("/", 1)[-1]
        owner = _file_id_of(name)
        if owner != file_id:
            raise PathOutsideTable(
                f"{what}: {name!r} is not a base or log file of file group {file_id!r}"
                + (f" (it belongs to {owner!r})" if owner else "")
            )


def _file_id_of(name: str) -> str | None:
    base = BaseFile.try_parse(name)
    if base is not None:
        return base.file_id
    log = LogFile.try_parse(name)
    return log.file_id if log is not None else None
