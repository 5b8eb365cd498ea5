"""Conflicts of a clustering with writes: which write touched the plan's file groups after it was planned.

A write instant (commit, deltacommit, replacecommit; not this clustering) conflicts when it touched one of the
plan's file groups (its write stats or replaced file ids name it) and either completed after the clustering
was requested (v8+: completion time after the clustering's instant time; v6: instant time after it, the
scheduling rule making that enough), or is still pending (its markers or inflight metadata name the group:
:func:`hoodie.clustering.recent_writes.pending_write_groups`).
What a conflict does to the clustering is :mod:`hoodie.clustering.execute`'s business.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie.clustering.plan import is_clustering
from hoodie.clustering.recent_writes import groups_written, pending_write_groups
from hoodie.file_group.file_group import FileGroupId
from hoodie.table import Table
from hoodie.timeline.instant import WRITE_ACTIONS, Instant
from hoodie.timeline.metadata import ClusteringPlan


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
        overlap = sorted(ours & groups_written(table.commit_metadata(other)), key=str)
        if overlap:
            return Conflict(other, tuple(overlap), pending=False)
    for other in timeline.pending():
        if (
            other.time == instant_time
            or other.action not in WRITE_ACTIONS
            or is_clustering(table, other.time)
        ):
            continue
        overlap = sorted(ours & pending_write_groups(table, other), key=str)
        if overlap:
            return Conflict(other, tuple(overlap), pending=True)
    return None


__all__ = ["Conflict", "find_conflict"]
