"""Which metadata-table partitions a table has built and which it is building: the two lists in
``hoodie.properties`` (``hoodie.table.metadata.partitions`` and ``...partitions.inflight``).

Readers use a partition only once it is in the first list; an indexing instant builds the partitions of the
second and moves them to the first when it completes. Both the indexer and the roll forward of its decided
completion (:mod:`hoodie.write.decision`) make that move, so it is idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from hoodie.config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT, TableConfig
from hoodie.storage import Storage


def listed(config: TableConfig, key: str) -> list[str]:
    """The partitions ``config`` lists under ``key`` (one of the two lists), in their order."""
    return [p.strip() for p in config.props.get(key, "").split(",") if p.strip()]


def store_partition_lists(storage: Storage, built: Sequence[str], inflight: Sequence[str]) -> TableConfig:
    """Write both lists (each sorted, without repeats) into the table's properties as they are now."""
    config = TableConfig.load(storage)
    return config.updated(
        {
            METADATA_PARTITIONS: ",".join(sorted(set(built))),
            METADATA_PARTITIONS_INFLIGHT: ",".join(sorted(set(inflight))),
        }
    ).store(storage)


def mark_built(storage: Storage, partitions: Iterable[str]) -> TableConfig:
    """Move ``partitions`` from the list being built to the built one (under the table lock; a second call
    changes nothing). A partition in neither list was dropped meanwhile (``--mode dropindex``): it stays
    dropped, so a run that wakes late cannot list a partition whose folder is gone."""
    config = TableConfig.load(storage)
    built = set(listed(config, METADATA_PARTITIONS))
    inflight = set(listed(config, METADATA_PARTITIONS_INFLIGHT))
    done = set(partitions) & (built | inflight)
    built |= done
    still = inflight - done
    return store_partition_lists(storage, sorted(built), sorted(still))


__all__ = ["listed", "mark_built", "store_partition_lists"]
