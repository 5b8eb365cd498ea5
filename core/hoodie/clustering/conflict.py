"""Conflicts of a clustering with writes: which write touched the plan's file groups after it was planned.

A write instant (commit, deltacommit, replacecommit; not this clustering) conflicts when it touched one of the
plan's file groups (its write stats or replaced file ids name it) and either completed after the clustering
was requested (v8+: completion time after the clustering's instant time; v6: instant time after it, the
scheduling rule making that enough), or is still pending (its markers or inflight metadata name the group).
What a conflict does to the clustering is :mod:`hoodie.clustering.execute`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie.clustering.plan import is_clustering
from hoodie.errors import CorruptTimelineFile
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId
from hoodie.log.log_file import LogFile
from hoodie.table import Table
from hoodie.timeline.instant import WRITE_ACTIONS, Instant, State
from hoodie.timeline.metadata import ClusteringPlan, decode_commit_metadata
from hoodie.write.markers import IOType, Markers


@dataclass(frozen=True)
class Conflict:
    """A write that touched the clustering's file groups: its instant and the groups."""

    instant: Instant
    groups: tuple[FileGroupId, ...]
    pending: bool

    def describe(self) -> str:
        names = ", ".join(str(g) for g in self.groups[:5])
        when = "is still pending" if self.pending else "completed after the clustering was planned"
        return f"{self.instant.action} {self.instant.time} {when} and wrote file group(s) {names}"


def find_conflict(table: Table, instant_time: str, plan: ClusteringPlan) -> Conflict | None:
    """The first write that conflicts with the clustering at ``instant_time`` (see the module doc)."""
    ours = {FileGroupId(s.partition_path, s.file_id) for s in plan.slices}
    timeline = table.timeline
    v8 = table.config.table_version >= 8
    for other in timeline.completed_writes():
        if other.time == instant_time:
            continue
        after = (other.completion_time or other.time) > instant_time if v8 else other.time > instant_time
        if not after:
            continue
        md = table.commit_metadata(other)
        touched = {FileGroupId(s.partition_path or "", s.file_id) for s in md.write_stats if s.file_id}
        touched |= {FileGroupId(p, f) for p, f in md.replaced_file_ids}
        overlap = sorted(ours & touched, key=str)
        if overlap:
            return Conflict(other, tuple(overlap), pending=False)
    for other in timeline.pending():
        if (
            other.time == instant_time
            or other.action not in WRITE_ACTIONS
            or is_clustering(table, other.time)
        ):
            continue
        overlap = sorted(ours & _pending_groups(table, other), key=str)
        if overlap:
            return Conflict(other, tuple(overlap), pending=True)
    return None


def _pending_groups(table: Table, instant: Instant) -> set[FileGroupId]:
    """File groups a pending write has written to so far: its markers, and its inflight metadata's stats."""
    out: set[FileGroupId] = set()
    for marker in Markers(table.storage, instant.time).list():
        if marker.io_type is IOType.APPEND:
            log = LogFile.try_parse(marker.file_name)
            if log is not None:
                out.add(FileGroupId(marker.partition, log.file_id))
        else:
            base = BaseFile.try_parse(marker.file_name)
            if base is not None:
                out.add(FileGroupId(marker.partition, base.file_id))
    if instant.state is State.INFLIGHT:
        try:
            data = table.storage.read(table.timeline.file_of(instant.time, State.INFLIGHT))
            if data:
                md = decode_commit_metadata(
                    data, table_version=table.config.table_version, action=instant.action
                )
                out |= {FileGroupId(s.partition_path or "", s.file_id) for s in md.write_stats if s.file_id}
        except (KeyError, FileNotFoundError, CorruptTimelineFile):
            pass  # an inflight file we cannot read (or gone: rolled back) names nothing; markers still do
    return out


__all__ = ["Conflict", "find_conflict"]
