"""The metadata table (``.hoodie/metadata``): what hoodied can do with it until it keeps it up to date.

A table service that commits without updating the metadata table would hide its new files from readers
that list files through it. Until hoodied writes the metadata table, a table that has one is refused,
unless the user disables it as Hudi's writers do: a Hudi writer running with ``hoodie.metadata.enable=false``
deletes the metadata table (``HoodieTable.maybeDeleteMetadataTable``) and clears
``hoodie.table.metadata.partitions``; readers then list the file system, and a later writer with the metadata
table enabled builds it again from the files.
"""

from __future__ import annotations

import logging

from hoodie.config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT, TableConfig
from hoodie.errors import HoodieError
from hoodie.lock import LockProvider, held
from hoodie.storage import Storage

METADATA_TABLE_PATH = ".hoodie/metadata"
METADATA_ENABLE = "hoodie.metadata.enable"

logger = logging.getLogger(__name__)


class MetadataTableNotSupported(HoodieError):
    """The table has a metadata table, which hoodied cannot keep consistent yet."""


def has_metadata_table(storage: Storage, config: TableConfig) -> bool:
    return bool(config.metadata_partitions) or storage.exists(
        f"{METADATA_TABLE_PATH}/.hoodie/hoodie.properties"
    )


def refuse_metadata_table(storage: Storage, config: TableConfig, service: str) -> None:
    """Raise :class:`MetadataTableNotSupported` when the table has a metadata table ``service`` would leave
    behind (its file listing would go stale: readers listing through it would miss new files or look for
    deleted ones)."""
    if has_metadata_table(storage, config):
        raise MetadataTableNotSupported(
            f"{storage.uri} has a metadata table (partitions: "
            f"{', '.join(config.metadata_partitions) or '?'}); "
            f"hoodied cannot yet keep it consistent with a {service}, and committing without it would leave "
            "readers that list through it with a wrong file listing. Refusing; run Hudi's table service for "
            f"this table, or disable the metadata table ({METADATA_ENABLE}=false: deleted as Hudi's writers "
            "do, rebuilt by the next writer that enables it)"
        )


def delete_metadata_table(storage: Storage, lock: LockProvider) -> bool:
    """Delete the table's metadata table as a Hudi writer with the metadata table disabled does; returns
    whether there was one. The table config stops naming its partitions first, so no reader looks for it
    while it is being deleted."""
    with held(lock):
        config = TableConfig.load(storage)
        if not has_metadata_table(storage, config):
            return False
        if config.props.get(METADATA_PARTITIONS) or config.props.get(METADATA_PARTITIONS_INFLIGHT):
            config.updated({METADATA_PARTITIONS: "", METADATA_PARTITIONS_INFLIGHT: ""}).store(storage)
        storage.delete_dir(METADATA_TABLE_PATH)
    logger.warning("deleted the metadata table of %s (%s=false)", storage.uri, METADATA_ENABLE)
    return True


__all__ = [
    "METADATA_ENABLE",
    "METADATA_TABLE_PATH",
    "MetadataTableNotSupported",
    "delete_metadata_table",
    "has_metadata_table",
    "refuse_metadata_table",
]
