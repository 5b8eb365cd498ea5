"""File groups and file slices.

A file group is identified by (partition path, file id); it is a sequence of file slices ordered by base
instant. A file slice is a base file (absent while a compaction is pending, or for log-only groups) plus the
log files that apply on top of it. Equality of a file group is its identity, not its contents.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from hoodie.file_group.base_file import BaseFile
from hoodie.log.log_file import LogFile


@dataclass(frozen=True, slots=True)
class FileGroupId:
    partition_path: str
    file_id: str

    def __str__(self) -> str:
        return f"{self.partition_path or '<root>'}/{self.file_id}"


@dataclass(frozen=True)
class FileSlice:
    """A base file (or none) and its log files, in log order, for one base instant of one file group."""

    group: FileGroupId
    base_instant: str
    base_file: BaseFile | None = None
    base_file_size: int = 0
    log_files: tuple[LogFile, ...] = ()
    log_file_sizes: tuple[int, ...] = ()

    @property
    def partition_path(self) -> str:
        return self.group.partition_path

    @property
    def file_id(self) -> str:
        return self.group.file_id

    def _rel(self, name: str) -> str:
        return f"{self.partition_path}/{name}" if self.partition_path else name

    @property
    def base_file_path(self) -> str | None:
        """Path of the base file relative to the table's base path."""
        return self._rel(self.base_file.file_name) if self.base_file else None

    @property
    def log_file_paths(self) -> list[str]:
        return [self._rel(lf.file_name) for lf in self.log_files]

    @property
    def total_size(self) -> int:
        return self.base_file_size + sum(self.log_file_sizes)

    def with_logs_of(self, later: FileSlice) -> FileSlice:
        """This slice's base with this slice's logs followed by ``later``'s (merging a pending compaction)."""
        return FileSlice(
            self.group,
            self.base_instant,
            self.base_file,
            self.base_file_size,
            self.log_files + later.log_files,
            self.log_file_sizes + later.log_file_sizes,
        )


@dataclass(eq=False)
class FileGroup:
    """The slices of one file group, ordered by base instant."""

    id: FileGroupId
    slices: dict[str, FileSlice] = field(default_factory=dict)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FileGroup) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    def ordered(self) -> list[FileSlice]:
        return [self.slices[k] for k in sorted(self.slices)]

    def __iter__(self) -> Iterator[FileSlice]:
        return iter(self.ordered())

    @property
    def latest(self) -> FileSlice | None:
        return self.slices[max(self.slices)] if self.slices else None
