"""The file groups writers are working on: those the latest writer commits wrote, and those pending writes
are writing now. A clustering plan beside writers with Hudi's default update strategy leaves them out.

Why: a Hudi writer with ``SparkRejectUpdateStrategy`` fails as soon as its batch updates a file group under
pending clustering (:mod:`hoodie.clustering.update_strategy`), and a Hudi 1.x writer under optimistic
concurrency fails its commit when a pending clustering names a file group it wrote, whatever its strategy.
Writers mostly update what they wrote lately (recent keys, the small files their inserts filled), so a plan
that takes only file groups no recent writer commit touched and no pending write is touching keeps out of
their way; the groups it leaves are planned once they have cooled down. Hudi has no plan setting for this
(its ``hoodie.clustering.plan.partition.filter.mode=RECENT_DAYS`` with
``hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions`` skips whole date partitions, which
helps only tables partitioned by day), so the number of commits is hoodied's own key,
``hoodie.clustering.hoodied.recent.write.commits`` (:data:`RECENT_WRITE_COMMITS`).

Rules:

- Writer commits: completed commits, deltacommits and replacecommits on the active timeline, newest first,
  except table services' (operation ``COMPACT``, ``LOG_COMPACT``, ``CLUSTER``: they rewrite groups, no writer
  is behind them). The last ``n`` of them count; every file group their write stats name (updated, appended
  to, or created by inserts) or that they replaced is recently written.
- Pending writes: requested or inflight commits, deltacommits and replacecommits that are not clusterings.
  The groups one is writing are those its markers name (a base file created or merged, a log file appended)
  and those the write stats of its inflight file name (Hudi writers record their workload profile there,
  update and small-file buckets by file id, before they write). A write that has not got that far names
  none yet: the recent commits are what covers it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId
from hoodie.log.log_file import LogFile
from hoodie.table import Table
from hoodie.timeline.instant import WRITE_ACTIONS, Instant
from hoodie.timeline.metadata import CommitMetadata
from hoodie.write.markers import IOType, Markers

#: How many of the latest writer commits make a file group "recently written" (hoodied's key; 0: none).
RECENT_WRITE_COMMITS = "hoodie.clustering.hoodied.recent.write.commits"
#: One clustering trigger's worth of commits (``hoodie.clustering.async.max.commits``, 4) plus one: a group
#: written since the last clustering was due is not planned; one left alone for five commits is cold.
RECENT_WRITE_COMMITS_DEFAULT = 5

#: Operation types of table services' commits (not writers').
SERVICE_OPERATIONS = frozenset({"COMPACT", "LOG_COMPACT", "CLUSTER"})


@dataclass(frozen=True)
class WriterGroups:
    """The file groups writers are working on, each with the instant that wrote (or is writing) it last."""

    recent: dict[FileGroupId, str]
    pending: dict[FileGroupId, str]
    #: The writer commits looked at, newest first.
    commits: tuple[str, ...]

    def get(self, group: FileGroupId) -> str | None:
        """The instant holding ``group`` (a pending write first), or ``None``."""
        return self.pending.get(group) or self.recent.get(group)

    def __contains__(self, group: object) -> bool:
        return group in self.pending or group in self.recent


def writer_groups(table: Table, recent_commits: int) -> WriterGroups:
    """The groups of the last ``recent_commits`` writer commits and of the pending writes of the view
    (see the module doc)."""
    recent: dict[FileGroupId, str] = {}
    commits: list[str] = []
    if recent_commits > 0:
        for instant in reversed(table.timeline.completed_writes()):
            md = table.commit_metadata(instant)
            if md.operation_type in SERVICE_OPERATIONS:
                continue
            commits.append(instant.time)
            for group in groups_written(md):
                recent.setdefault(group, instant.time)
            if len(commits) >= recent_commits:
                break
    clusterings = set(table.pending_clustering_file_groups().values())
    pending: dict[FileGroupId, str] = {}
    for instant in table.timeline.pending():
        if instant.action in WRITE_ACTIONS and instant.time not in clusterings:
            for group in pending_write_groups(table, instant):
                pending.setdefault(group, instant.time)
    return WriterGroups(recent, pending, tuple(commits))


def groups_written(md: CommitMetadata) -> set[FileGroupId]:
    """The file groups a commit's write stats name, and those it replaced."""
    out = {FileGroupId(s.partition_path or "", s.file_id) for s in md.write_stats if s.file_id}
    out |= {FileGroupId(p, f) for p, f in md.replaced_file_ids}
    return out


def pending_write_groups(table: Table, instant: Instant) -> set[FileGroupId]:
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
    md = table.inflight_metadata(instant)
    if md is not None:
        out |= {FileGroupId(s.partition_path or "", s.file_id) for s in md.write_stats if s.file_id}
    return out


__all__ = [
    "RECENT_WRITE_COMMITS",
    "RECENT_WRITE_COMMITS_DEFAULT",
    "SERVICE_OPERATIONS",
    "WriterGroups",
    "groups_written",
    "pending_write_groups",
    "writer_groups",
]
