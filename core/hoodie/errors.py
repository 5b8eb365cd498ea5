"""The errors of the format library, in the words of the format.

Every error the library raises on purpose derives from :class:`HoodieError`, so callers (the daemon, the CLI)
can tell "the table or input is bad" apart from bugs. Messages name what was found and where.
"""

from __future__ import annotations


class HoodieError(Exception):
    """Base class of every error raised on purpose by :mod:`hoodie`."""


class UnsupportedTable(HoodieError):
    """The table exists but is of a kind this library refuses to read or write.

    Raised up front for table versions other than 6, 8 and 9, base file formats other than PARQUET, and
    features whose semantics we do not implement. The message names the value that was found.
    """


class InvalidTableConfig(HoodieError):
    """``hoodie.properties`` is missing, unreadable, or holds a value that cannot be right."""


class TableNotFound(HoodieError):
    """No Hudi table (no ``.hoodie/hoodie.properties``) at the given location."""


class InvalidInstant(HoodieError):
    """A timeline file name or instant time does not follow Hudi's grammar."""


class InvalidFileName(HoodieError):
    """A base or log file name does not follow Hudi's grammar."""


class CorruptTimelineFile(HoodieError):
    """A timeline file (commit metadata, plan) cannot be decoded."""


class CorruptLogBlock(HoodieError):
    """A log block's magic, lengths or content do not check out."""


class SchemaMismatch(HoodieError):
    """A file's column cannot be read as the table schema's type (an evolution Hudi does not allow)."""


class CorruptBaseFile(HoodieError):
    """A base (Parquet) file cannot be read."""


class PathOutsideTable(HoodieError):
    """A path (in a plan or metadata) resolves outside the table's base path."""


class StorageError(HoodieError):
    """The storage backend failed an operation."""


class FileAlreadyExists(StorageError):
    """A create-if-absent found the file already present."""
