"""Tables of three columns, ``key``, ``part`` (the partition) and ``value``, written by our table writer, for
the tests that name each record they write and delete."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa

from hoodie.testing.table_writer import TableWriter

SCHEMA = pa.schema([("key", pa.string()), ("part", pa.string()), ("value", pa.int64())])


def create(
    root: Path, table_type: Literal["COPY_ON_WRITE", "MERGE_ON_READ"], table_version: int
) -> TableWriter:
    """An empty table at ``root`` keyed by ``key``, partitioned by ``part``, and its writer."""
    return TableWriter.create(
        str(root),
        name=root.name,
        table_type=table_type,
        table_version=table_version,
        schema=SCHEMA,
        record_key_fields=["key"],
        partition_fields=["part"],
    )


def rows(keys: Sequence[str], value: int, part: str = "p") -> pa.Table:
    """One record per key, all with ``value``, in partition ``part``."""
    return pa.table(
        {"key": list(keys), "part": [part] * len(keys), "value": [value] * len(keys)}, schema=SCHEMA
    )


def keys(names: Sequence[str], part: str = "p") -> pa.Table:
    """The keys of records to delete."""
    return rows(names, 0, part).select(["key", "part"])


__all__ = ["SCHEMA", "create", "keys", "rows"]
