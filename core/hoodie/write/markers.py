"""Markers: the record of every file a write is about to create, kept until the write completes.

Grammar (direct markers, Hudi's ``DirectWriteMarkers``; partition path empty for non-partitioned tables)::

    .hoodie/.temp/<instant>/<partition path>/<file name>.marker.<IOType>

    IOType  CREATE   a new base file
            MERGE    a base file rewritten with updates (a new version of the file group)
            APPEND   a log file

A writer creates the marker before the file, so after a crash (or after failed task attempts) the markers
name every file the instant may have left behind. Before completing, files named by markers but absent from
the commit metadata are strays and are deleted (:func:`unrecorded_files`); after completing, the markers are
deleted. Hudi's timeline-server markers (``MARKERS.type`` = ``TIMELINE_SERVER_BASED`` and ``MARKERS<n>``
files holding one marker path per line) are read too, so strays of a Hudi writer can be found.

:meth:`Markers.delete_all` removes the instant's marker folder too, as Hudi does.
"""

from __future__ import annotations

import builtins
import contextlib
import posixpath
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import NamedTuple

from hoodie.errors import FileAlreadyExists, HoodieError, InvalidFileName
from hoodie.storage import Storage, check_relative
from hoodie.timeline.instant import check_time
from hoodie.timeline.metadata import CommitMetadata

MARKERS_FOLDER = ".hoodie/.temp"
MARKER_EXTENSION = ".marker"
MARKER_TYPE_FILE = "MARKERS.type"
TIMELINE_SERVER_MARKERS = "TIMELINE_SERVER_BASED"


class IOType(StrEnum):
    """What the write does with the file a marker names."""

    CREATE = "CREATE"
    MERGE = "MERGE"
    APPEND = "APPEND"


class Marker(NamedTuple):
    """One marker: ``(partition, file_name, io_type)``."""

    partition: str
    file_name: str
    io_type: IOType

    @property
    def path(self) -> str:
        """The data file's path relative to the base path (as commit metadata's write stats name it)."""
        return f"{self.partition}/{self.file_name}" if self.partition else self.file_name

    @property
    def marker_path(self) -> str:
        """The marker's path relative to its instant's marker folder."""
        return f"{self.path}{MARKER_EXTENSION}.{self.io_type.value}"

    @classmethod
    def parse(cls, marker_path: str) -> Marker:
        """Parse ``<partition>/<file>.marker.<IOType>`` (relative to the instant's marker folder)."""
        rel = check_relative(marker_path)
        stem, dot, io_type = rel.rpartition(".")
        if not dot or not stem.endswith(MARKER_EXTENSION) or io_type not in IOType.__members__:
            raise InvalidFileName(f"{marker_path!r} is not a marker (<file>.marker.CREATE|MERGE|APPEND)")
        data_path = stem[: -len(MARKER_EXTENSION)]
        partition, _, file_name = data_path.rpartition("/")
        if not file_name:
            raise InvalidFileName(f"{marker_path!r} names no file")
        return cls(partition, file_name, IOType(io_type))


class Markers:
    """The markers of one instant (direct markers; timeline-server ones are read as well)."""

    def __init__(self, storage: Storage, instant: str) -> None:
        self.storage = storage
        self.instant = check_time(instant)
        self.folder = f"{MARKERS_FOLDER}/{instant}"

    def create(self, partition: str, file_name: str, io_type: IOType | str) -> Marker:
        """Record that the write is about to create ``file_name`` in ``partition``; recording it twice is
        harmless (a retried task)."""
        if "/" in file_name or not file_name:
            raise InvalidFileName(f"{file_name!r} is not a file name")
        marker = Marker(check_relative(partition), file_name, IOType(io_type))
        path = f"{self.folder}/{marker.marker_path}"
        with contextlib.suppress(FileAlreadyExists):
            self.storage.create(path, b"", overwrite=not self.storage.conditional_create)
        return marker

    def list(self) -> builtins.list[Marker]:
        """Every marker of the instant, sorted by path (empty when there are none)."""
        found: set[Marker] = set()
        timeline_server_files: builtins.list[str] = []
        prefix = self.folder + "/"
        for info in self.storage.list(self.folder, recursive=True):
            if info.is_dir:
                continue
            rel = info.path[len(prefix) :] if info.path.startswith(prefix) else info.name
            if "/" not in rel and rel.startswith("MARKERS") and rel != MARKER_TYPE_FILE:
                timeline_server_files.append(info.path)
                continue
            if rel == MARKER_TYPE_FILE:
                continue
            try:
                found.add(Marker.parse(rel))
            except InvalidFileName:
                continue  # not a marker (an unfinished temporary file, a stray)
        for path in timeline_server_files:
            for line in self.storage.read(path).decode("utf-8", errors="replace").splitlines():
                line = line.strip()
                if line:
                    try:
                        found.add(Marker.parse(line))
                    except (InvalidFileName, ValueError):
                        continue
        return sorted(found, key=lambda m: (m.path, m.io_type.value))

    def exists(self) -> bool:
        return bool(self.storage.list(self.folder))

    def delete_all(self) -> int:
        """Delete the instant's marker folder with every marker in it; returns how many markers there were."""
        count = 0
        for info in self.storage.list(self.folder, recursive=True):
            if not info.is_dir and self.storage.delete(info.path):
                count += 1
        self.storage.delete_dir(self.folder)
        return count


def sweep_completed(storage: Storage, is_completed: Callable[[str], bool]) -> list[str]:
    """Delete the marker folders of instants that completed (a writer that died between its commit and
    its marker clean-up leaves one; Hudi removes them the same way). Returns the instants swept."""
    swept = []
    for info in storage.list(MARKERS_FOLDER):
        if not info.is_dir:
            continue
        try:
            instant = check_time(info.name)
        except HoodieError:
            continue
        if is_completed(instant):
            Markers(storage, instant).delete_all()
            swept.append(instant)
    return swept


def unrecorded_files(markers: Iterable[Marker], metadata: CommitMetadata, *, table_version: int) -> list[str]:
    """Files (paths relative to the base path) an instant's markers announce that its commit metadata does
    not list: leftovers of failed task attempts, to delete before the instant completes.

    CREATE and MERGE markers name base files. APPEND markers name log files and count only in table
    versions 8+, where every write writes log files of its own; in v6 a write appends to existing log files
    that hold earlier commits' blocks, so they are never strays (Hudi leaves them too).
    """
    recorded = {posixpath.normpath(p) for p in metadata.written_file_paths}
    strays: set[str] = set()
    for marker in markers:
        if marker.io_type is IOType.APPEND and table_version < 8:
            continue
        if marker.path not in recorded:
            strays.add(marker.path)
    return sorted(strays)
