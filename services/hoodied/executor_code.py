"""The code Spark executors run: shipped with the jobs where executors lack it, and checked by every task.

A task is a pickled call of a ``hoodie`` function (and of :mod:`hoodied.jobs`' task wrapper): the executor
must import the same code the driver planned with, or it would write files by other rules. Two ways to get
it there:

- **Installed**: executors run hoodied's image (Kubernetes executor pods, a standalone cluster of the same
  image), so ``hoodie`` and ``hoodied`` are already importable.
- **Shipped** (``spark.ship_code``): the driver zips both packages as they are imported in the driver
  (:func:`code_archive`) and adds the zip to the session (``SparkContext.addPyFile``); Spark puts it ahead of
  the executor's site-packages, so it wins over an installed copy of another version. ``auto`` (the default)
  ships when the master is not ``local``; the packages' dependencies (pyarrow, fastavro, numpy, obstore) must
  be installed in the executors' Python either way.

Either way every task first compares the code it imported against the driver's :class:`CodeStamp` (the
version and a SHA-256 over both packages' files, by relative path) and fails with :class:`CodeMismatch`,
naming both, before it reads or writes anything: a mismatch is a deployment error, never a wrong file.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import os
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources
from importlib.abc import Traversable
from typing import TYPE_CHECKING

from hoodied import package_version
from hoodied.errors import ServiceError

if TYPE_CHECKING:
    from pyspark import SparkContext

#: The packages an executor imports to run a task.
PACKAGES = ("hoodie", "hoodied")
#: ``spark.ship_code`` values.
SHIP_MODES = ("auto", "always", "never")
#: Names never shipped or hashed (build leftovers of an installed or checked-out package).
_SKIPPED = ("__pycache__",)
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


class CodeMismatch(ServiceError):
    """A task found code on its executor other than the driver's: it stops before touching the table."""


@dataclass(frozen=True)
class CodeStamp:
    """What identifies the code of :data:`PACKAGES`: a digest of the files (what counts), and the installed
    distribution's version (for the message)."""

    version: str
    digest: str

    def __str__(self) -> str:
        return f"hoodied {self.version} ({self.digest[:12]})"


def _files(package: str) -> Iterator[tuple[str, Traversable]]:
    """Every file of ``package`` (a folder or a zip entry alike), by its path relative to the package's
    parent, in a stable order."""
    root = resources.files(package)

    def walk(node: Traversable, rel: str) -> Iterator[tuple[str, Traversable]]:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name in _SKIPPED or child.name.endswith(_SKIPPED_SUFFIXES):
                continue
            path = f"{rel}/{child.name}"
            if child.is_dir():
                yield from walk(child, path)
            elif child.is_file():
                yield path, child

    return walk(root, package)


@functools.cache
def code_stamp() -> CodeStamp:
    """This process's stamp (computed once: both packages' files are read and hashed)."""
    digest = hashlib.sha256()
    for package in PACKAGES:
        for rel, node in _files(package):
            data = node.read_bytes()
            digest.update(f"{rel}\0{len(data)}\0".encode())
            digest.update(data)
    return CodeStamp(package_version(), digest.hexdigest())


def check_code(expected: CodeStamp) -> None:
    """Raise :class:`CodeMismatch` unless this process runs the code ``expected`` names (see the module
    doc)."""
    ours = code_stamp()
    if ours.digest != expected.digest:  # the version of shipped code is "unknown": not installed there
        where = os.path.dirname(os.path.dirname(importlib.import_module("hoodie").__file__ or "?"))
        raise CodeMismatch(
            f"this executor imports {ours} from {where}, the driver runs {expected}: refusing to run the "
            "task. Run executors from the driver's image, or let hoodied ship its code (spark.ship_code)"
        )


def code_archive(folder: str) -> str:
    """A zip of :data:`PACKAGES` as this process imports them, written in ``folder`` (its name carries the
    digest, so executors never mix two versions under one name); returns its path."""
    stamp = code_stamp()
    path = os.path.join(folder, f"hoodied-{stamp.version}-{stamp.digest[:16]}.zip")
    if os.path.exists(path):
        return path
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".zip.tmp")
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
            for package in PACKAGES:
                for rel, node in _files(package):
                    # A fixed timestamp: the same code makes the same bytes.
                    info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    info.external_attr = 0o644 << 16
                    archive.writestr(info, node.read_bytes())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def should_ship(mode: str, master: str) -> bool:
    """Whether ``spark.ship_code`` = ``mode`` ships the code to a session on ``master``."""
    if mode not in SHIP_MODES:
        raise ValueError(f"spark.ship_code: {mode!r} is not one of {', '.join(SHIP_MODES)}")
    if mode == "auto":
        return not master.startswith("local")
    return mode == "always"


def ship_code(sc: SparkContext, folder: str | None = None) -> str:
    """Add the code archive to ``sc``: every task of later jobs imports it first. Returns the archive's
    path."""
    path = code_archive(folder or tempfile.gettempdir())
    sc.addPyFile(path)
    return path


__all__ = [
    "PACKAGES",
    "SHIP_MODES",
    "CodeMismatch",
    "CodeStamp",
    "check_code",
    "code_archive",
    "code_stamp",
    "ship_code",
    "should_ship",
]
