"""hoodie: read and write Apache Hudi tables (table versions 6, 8 and 9) with pyarrow and fastavro.

The public entry point is :class:`hoodie.Table`::

    from hoodie import Table
    table = Table.open("s3://bucket/path/to/table")
    snapshot = table.read()                      # pyarrow.Table, meta columns included
    older = table.read(as_of="20240402123035233")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Table"]

if TYPE_CHECKING:
    from hoodie.table import Table


def __getattr__(name: str) -> Any:
    if name == "Table":
        from hoodie.table import Table

        return Table
    raise AttributeError(name)
