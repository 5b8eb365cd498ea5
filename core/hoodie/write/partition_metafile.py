"""A partition's ``.hoodie_partition_metadata``: written by whoever first writes a data file in the partition
(Hudi's ``HoodiePartitionMetadata``); readers find partitions by it."""

from __future__ import annotations

import contextlib
import datetime as dt

from hoodie.errors import FileAlreadyExists
from hoodie.file_group.fs_view import PARTITION_METAFILE
from hoodie.storage import Storage


def write_partition_metafile(storage: Storage, partition: str, commit_time: str) -> None:
    """Write ``<partition>/.hoodie_partition_metadata`` (commit time and depth) unless it is there."""
    path = f"{partition}/{PARTITION_METAFILE}" if partition else PARTITION_METAFILE
    if storage.exists(path):
        return
    depth = len([p for p in partition.split("/") if p]) if partition else 0
    now = dt.datetime.now(dt.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
    text = f"#partition metadata\n#{now}\ncommitTime={commit_time}\npartitionDepth={depth}\n"
    with contextlib.suppress(FileAlreadyExists):  # another writer made it first
        storage.create(path, text.encode("utf-8"))


__all__ = ["write_partition_metafile"]
