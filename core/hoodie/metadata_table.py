"""The metadata table (``.hoodie/metadata``) as the table services see it: refusing a table whose metadata
table they cannot keep consistent (:func:`refuse_metadata_table`), and deleting it when the user disables it
as Hudi's writers do: a Hudi writer running with ``hoodie.metadata.enable=false`` deletes the metadata table
(``HoodieTable.maybeDeleteMetadataTable``) and clears ``hoodie.table.metadata.partitions``; readers then list
the file system, and a later writer with the metadata table enabled builds it again from the files.
Reading and writing it: :mod:`hoodie.metadata`.
"""

from __future__ import annotations

import logging

from hoodie.config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT, TableConfig
from hoodie.lock import LockProvider, held
from hoodie.metadata.reader import METADATA_TABLE_PATH
from hoodie.metadata.writer import MetadataTableNotSupported, check_supported
from hoodie.storage import Storage

METADATA_ENABLE = "hoodie.metadata.enable"

logger = logging.getLogger(__name__)


def has_metadata_table(storage: Storage, config: TableConfig) -> bool:
    return bool(config.metadata_partitions) or storage.exists(
        f"{METADATA_TABLE_PATH}/.hoodie/hoodie.properties"
    )


def refuse_metadata_table(
    storage: Storage, config: TableConfig, service: str, *, writer: bool = False
) -> None:
    """Raise :class:`MetadataTableNotSupported` when the table has a metadata table ``service`` could not
    keep consistent (a partition hoodied does not maintain, such as an expression index): refused before
    any work, never committed half-way. Reads only the table config (the daemon asks at every poll)."""
    check_supported(storage, config, service, writer=writer)


def delete_metadata_table(
    storage: Storage, lock: LockProvider, *, reason: str = f"{METADATA_ENABLE}=false"
) -> bool:
    """Delete the table's metadata table as a Hudi writer with the metadata table disabled does (or a restore
    that cannot take it back, ``reason`` says which); returns whether there was one. The table config stops
    naming its partitions first, so no reader looks for it while it is being deleted."""
    with held(lock):
        config = TableConfig.load(storage)
        if not has_metadata_table(storage, config):
            return False
        if config.props.get(METADATA_PARTITIONS) or config.props.get(METADATA_PARTITIONS_INFLIGHT):
            config.updated({METADATA_PARTITIONS: "", METADATA_PARTITIONS_INFLIGHT: ""}).store(storage)
        storage.delete_dir(METADATA_TABLE_PATH)
    logger.warning("deleted the metadata table of %s (%s)", storage.uri, reason)
    return True


__all__ = [
    "METADATA_ENABLE",
    "METADATA_TABLE_PATH",
    "MetadataTableNotSupported",
    "delete_metadata_table",
    "has_metadata_table",
    "refuse_metadata_table",
]
