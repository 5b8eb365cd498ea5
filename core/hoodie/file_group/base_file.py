"""Base files: the columnar files of a file slice, named after their file group and writing instant.

Grammar::

    <fileId>_<writeToken>_<instantTime>.<extension>

    036ded81-58b2-4f8c-9e1c-9f1e0c3c5a4d-0_1-1112-3191_20251220210129235.parquet

``fileId`` is ``<uuid>-<n>`` for data tables (the metadata table uses names like ``files-0000-0``);
``writeToken`` is ``<taskPartitionId>-<stageId>-<taskAttemptId>`` (``1-0-1`` when unknown); the instant is the
commit (or compaction / clustering) that created the file and is the base instant of its file slice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hoodie.errors import InvalidFileName

_BASE_FILE_RE = re.compile(
    r"^(?P<file_id>[^.].*?)_(?P<token>\d+-\d+-\d+)_(?P<instant>\d{14,20})\.(?P<ext>[A-Za-z]+)$"
)

UNKNOWN_WRITE_TOKEN = "1-0-1"


@dataclass(frozen=True, slots=True)
class BaseFile:
    """A parsed base file name. ``BaseFile.parse(name).file_name == name``."""

    file_id: str
    write_token: str
    instant_time: str
    extension: str = "parquet"

    @classmethod
    def parse(cls, name: str) -> BaseFile:
        m = _BASE_FILE_RE.match(name)
        if not m:
            raise InvalidFileName(f"{name!r} is not a base file name (<fileId>_<writeToken>_<instant>.<ext>)")
        return cls(m["file_id"], m["token"], m["instant"], m["ext"])

    @classmethod
    def try_parse(cls, name: str) -> BaseFile | None:
        m = _BASE_FILE_RE.match(name)
        return cls(m["file_id"], m["token"], m["instant"], m["ext"]) if m else None

    @property
    def file_name(self) -> str:
        return f"{self.file_id}_{self.write_token}_{self.instant_time}.{self.extension}"
