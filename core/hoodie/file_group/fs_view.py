"""The file-system view: which file groups and slices make up the table as of an instant.

Rules (Hudi's ``HoodieTableFileSystemView``):

- A base file is visible when the instant in its name is a completed write at or before ``as_of``, or is
  older than the write timeline's start (archived, hence committed).
- Table version 6: a log file belongs to the slice whose base instant its name carries. Its blocks carry their
  own instant times and are filtered when read (uncommitted and rolled-back blocks are ignored then).
- Table version 8+: a log file is named after the deltacommit that wrote it and is visible when that
  deltacommit completed at or before ``as_of``. It belongs to the slice with the greatest base instant at or
  before the deltacommit's *completion* time; a file group's pending compaction instant opens a slice too
  (writers start it as soon as the compaction is requested).
- File groups replaced by a completed replacecommit (clustering, insert-overwrite) at or before ``as_of`` are
  gone from the view.
- A snapshot reads each group's latest slice; when that slice has no base file yet (pending compaction), it is
  merged with the slices before it down to the last base file. A read-optimized query reads the latest base
  file of each group and no logs.
"""

from __future__ import annotations

import bisect
import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hoodie.errors import InvalidFileName
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroup, FileGroupId, FileSlice
from hoodie.log.log_file import LogFile
from hoodie.storage import FileInfo
from hoodie.timeline.timeline import Timeline

PARTITION_METAFILE = ".hoodie_partition_metadata"


@dataclass(frozen=True, slots=True)
class DataFile:
    """A data file found in a listing: its partition, parsed name, size and modification time."""

    partition_path: str
    name: str
    size: int
    base: BaseFile | None
    log: LogFile | None
    mtime_ns: int | None = None

    @property
    def path(self) -> str:
        """Its path relative to the base path."""
        return f"{self.partition_path}/{self.name}" if self.partition_path else self.name


def classify_listing(files: Iterable[FileInfo], base_extension: str = "parquet") -> list[DataFile]:
    """Pick the base and log files out of a recursive listing of the base path.

    Anything under ``.hoodie`` or another hidden folder, checksum files, partition metafiles and files that do
    not follow Hudi's naming are left out.
    """
    out: list[DataFile] = []
    for f in files:
        if f.is_dir:
            continue
        parent = posixpath.dirname(f.path)
        if parent and any(part.startswith(".") for part in parent.split("/")):
            continue
        name = f.name
        if name.endswith(".crc") or name == PARTITION_METAFILE or name.startswith(PARTITION_METAFILE):
            continue
        if name.startswith("."):
            if ".log." not in name:
                continue
            try:
                log = LogFile.parse(name)
            except InvalidFileName:
                continue
            if log.is_cdc:
                continue
            out.append(DataFile(parent, name, f.size, None, log, f.mtime_ns))
            continue
        base = BaseFile.try_parse(name)
        if base is not None and base.extension == base_extension:
            out.append(DataFile(parent, name, f.size, base, None, f.mtime_ns))
    return out


def build_file_groups(
    files: Iterable[DataFile],
    timeline: Timeline,
    *,
    table_version: int,
    as_of: str | None = None,
    pending_compactions: Mapping[FileGroupId, str] | None = None,
) -> dict[FileGroupId, FileGroup]:
    """Group visible files into file groups and slices as of ``as_of`` (default: the latest instant)."""
    pending_compactions = pending_compactions or {}

    bases: dict[FileGroupId, list[DataFile]] = {}
    logs: dict[FileGroupId, list[DataFile]] = {}
    for f in files:
        if f.base is not None:
            if not timeline.is_committed(f.base.instant_time, as_of):
                continue
            bases.setdefault(FileGroupId(f.partition_path, f.base.file_id), []).append(f)
        elif f.log is not None:
            if table_version >= 8:
                if not timeline.is_committed(f.log.instant, as_of):
                    continue
            elif as_of is not None and f.log.instant > as_of:
                continue
            logs.setdefault(FileGroupId(f.partition_path, f.log.file_id), []).append(f)

    groups: dict[FileGroupId, FileGroup] = {}
    for gid in sorted(set(bases) | set(logs), key=lambda g: (g.partition_path, g.file_id)):
        group = FileGroup(gid)
        slice_bases: dict[str, DataFile] = {}
        for f in bases.get(gid, ()):
            assert f.base is not None
            # Two base files of one instant: a retried task; the timeline's write stats decide which is real.
            # Keep the first by name so the choice is stable; compaction/clustering commits clean these up.
            slice_bases.setdefault(f.base.instant_time, f)
        keys = set(slice_bases)
        pending = pending_compactions.get(gid)
        if pending is not None and (as_of is None or pending <= as_of):
            keys.add(pending)
        slice_logs: dict[str, list[DataFile]] = {k: [] for k in keys}
        sorted_keys = sorted(keys)
        for f in logs.get(gid, ()):
            assert f.log is not None
            if table_version >= 8:
                key = _slice_for_v8_log(
                    f.log.instant, timeline.completion_time_of(f.log.instant), sorted_keys
                )
            else:
                key = f.log.instant
            if key not in slice_logs:
                slice_logs[key] = []
                bisect.insort(sorted_keys, key)
            slice_logs[key].append(f)
        for key in sorted_keys:
            base = slice_bases.get(key)
            lfs = sorted(slice_logs.get(key, ()), key=lambda d: d.log.sort_key if d.log else ())
            if base is None and not lfs:
                continue
            group.slices[key] = FileSlice(
                gid,
                key,
                base.base if base else None,
                base.size if base else 0,
                tuple(d.log for d in lfs if d.log is not None),
                tuple(d.size for d in lfs),
            )
        if group.slices:
            groups[gid] = group
    return groups


def _slice_for_v8_log(delta_time: str, completion_time: str | None, sorted_keys: list[str]) -> str:
    """The base instant of the slice a v8+ log file belongs to (greatest key at or before its completion)."""
    if not sorted_keys:
        return delta_time
    bound = completion_time or delta_time
    idx = bisect.bisect_right(sorted_keys, bound)
    if idx == 0:
        return delta_time
    return sorted_keys[idx - 1]


def snapshot_slices(groups: Mapping[FileGroupId, FileGroup], replaced: set[FileGroupId]) -> list[FileSlice]:
    """The slice a snapshot query reads for every live file group (pending compaction slices merged)."""
    out = []
    for gid, group in groups.items():
        if gid in replaced:
            continue
        ordered = group.ordered()
        if not ordered:
            continue
        merged = ordered[-1]
        i = len(ordered) - 1
        while merged.base_file is None and i > 0:
            i -= 1
            merged = ordered[i].with_logs_of(merged)
        out.append(merged)
    return out


def read_optimized_slices(
    groups: Mapping[FileGroupId, FileGroup], replaced: set[FileGroupId]
) -> list[FileSlice]:
    """The latest base file of every live file group, without log files."""
    out = []
    for gid, group in groups.items():
        if gid in replaced:
            continue
        for s in reversed(group.ordered()):
            if s.base_file is not None:
                out.append(FileSlice(gid, s.base_instant, s.base_file, s.base_file_size))
                break
    return out
