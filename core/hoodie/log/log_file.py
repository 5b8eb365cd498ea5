"""Log file names.

Grammar::

    .<fileId>_<instant>.<ext>.<version>[_<writeToken>[.cdc]]

    ext         log (data) | archive (v6 archived timeline)
    instant     table version 6: the base instant of the file slice the log belongs to;
                table version 8+: the instant of the deltacommit that wrote it (a new file per write)
    version     1, 2, ... (v6: the next version when a file is rolled over or appended by another writer)
    writeToken  <taskPartitionId>-<stageId>-<taskAttemptId>, digits
    .cdc        change-data-capture log of the same write

    e.g.  .ff32ab89-5ad0-4968-83b4-89a34c95d32f-0_20250316025816068.log.1_0-54-122

Hudi matches ``^\\.(.+)_(.*)\\.(log|archive)\\.(\\d+)(_((\\d+)-(\\d+)-(\\d+))(.cdc)?)?``; we match the whole
name (so that ``.crc`` side files and other look-alikes are refused) and print it back exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hoodie.errors import InvalidFileName

__all__ = ["LogFile"]

_LOG_FILE_RE = re.compile(r"\.(.+)_(.*)\.(log|archive)\.(\d+)(?:_(\d+-\d+-\d+)(\.cdc)?)?")


@dataclass(frozen=True, slots=True)
class LogFile:
    """A parsed log file name. ``LogFile.parse(name).file_name == name``."""

    file_id: str
    instant: str
    version: int
    write_token: str | None = None
    is_cdc: bool = False
    extension: str = "log"

    def __post_init__(self) -> None:
        if self.extension not in ("log", "archive"):
            raise InvalidFileName(f"log file extension must be 'log' or 'archive', not {self.extension!r}")
        if self.version < 0:
            raise InvalidFileName(f"log file version must not be negative, got {self.version}")
        if self.is_cdc and self.write_token is None:
            raise InvalidFileName("a CDC log file name always has a write token")

    @classmethod
    def parse(cls, name: str) -> LogFile:
        """Parse a log file name (not a path); raises :class:`InvalidFileName` for anything else."""
        m = _LOG_FILE_RE.fullmatch(name)
        if m is None:
            raise InvalidFileName(
                f"{name!r} is not a log file name (.<fileId>_<instant>.log.<version>_<token>)"
            )
        file_id, instant, extension, version, token, cdc = m.groups()
        parsed = cls(file_id, instant, int(version), token, cdc is not None, extension)
        if parsed.file_name != name:  # e.g. a version written with leading zeros
            raise InvalidFileName(f"{name!r} does not print back the same (as {parsed.file_name!r})")
        return parsed

    @classmethod
    def try_parse(cls, name: str) -> LogFile | None:
        """Like :meth:`parse`, but ``None`` for names that are not log files."""
        try:
            return cls.parse(name)
        except InvalidFileName:
            return None

    @property
    def file_name(self) -> str:
        token = "" if self.write_token is None else f"_{self.write_token}{'.cdc' if self.is_cdc else ''}"
        return f".{self.file_id}_{self.instant}.{self.extension}.{self.version}{token}"

    @property
    def sort_key(self) -> tuple[str, int, tuple[int, str], bool, str, str]:
        """Hudi's log file order (``HoodieLogFile.LogFileComparator``) within a file group: by instant (string
        order), then version, then write token (a missing token first), then CDC after data; file id and
        extension last, only to make the order total."""
        token = (0, "") if self.write_token is None else (1, self.write_token)
        return (self.instant, self.version, token, self.is_cdc, self.file_id, self.extension)

    def __str__(self) -> str:
        return self.file_name
