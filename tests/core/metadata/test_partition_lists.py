"""The built and being-built lists of metadata-table partitions (hoodie.metadata.partition_lists)."""

from __future__ import annotations

from pathlib import Path

from hoodie.config import METADATA_PARTITIONS, METADATA_PARTITIONS_INFLIGHT
from hoodie.indexing.execute import drop_index, schedule_indexing
from hoodie.lock import FileSystemLock
from hoodie.metadata.partition_lists import listed, mark_built
from hoodie.storage import Storage
from support.metadata_checks import generate_small_table


def test_marking_built_leaves_a_dropped_partition_dropped(
    tmp_path: Path,
) -> None:
    """An indexing run that wakes after an operator dropped the index it built must not list it again: its
    folder is gone, and readers would look for it."""
    generate_small_table(tmp_path / "t", 8, 2)
    storage = Storage.for_uri(str(tmp_path / "t"))
    lock = FileSystemLock(storage)
    schedule_indexing(storage, lock, ["record_index", "column_stats"])
    drop_index(storage, lock, ["record_index"])

    config = mark_built(storage, ["record_index", "column_stats"])

    assert listed(config, METADATA_PARTITIONS) == ["column_stats", "files"]
    assert listed(config, METADATA_PARTITIONS_INFLIGHT) == []
    assert mark_built(storage, ["column_stats"]).props == config.props  # a second call changes nothing
