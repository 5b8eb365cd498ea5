"""The ``version`` each kind of timeline record (plans, clean/rollback/index/savepoint metadata) carries
when a table version's Hudi writes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from hoodie.avro import schema_set

__all__ = [
    "PLAN_VERSIONS",
    "PlanVersions",
    "plan_versions",
]


@dataclass(frozen=True)
class PlanVersions:
    """The ``version`` each kind of timeline record carries when the table's Hudi writes it."""

    compaction_plan: int
    cleaner_plan: int
    clean_metadata: int
    clustering_plan: int
    requested_replace: int
    index_plan: int
    index_commit_metadata: int
    rollback_plan: int
    rollback_metadata: int
    savepoint_metadata: int
    restore_plan: int = 2
    restore_metadata: int = 1


# Hudi 0.14/0.15 (v6) and 1.x (v8, v9) agree on all of them (checked against the fixture tables: v6 and v8
# compaction plans 2, cleaner plans 2, clean metadata 2, clustering plans 1, rollback plans and metadata 1,
# v8/v9 index plans 1; CompactionUtils, CleanerUtils and ClusteringPlanStrategy name the same "latest").
# Restore plans are version 2 and restore metadata version 1 in both lines (RestorePlanActionExecutor,
# TimelineMetadataUtils.convertRestoreMetadata).
_SAME = PlanVersions(
    compaction_plan=2,
    cleaner_plan=2,
    clean_metadata=2,
    clustering_plan=1,
    requested_replace=1,
    index_plan=1,
    index_commit_metadata=1,
    rollback_plan=1,
    rollback_metadata=1,
    savepoint_metadata=1,
)
PLAN_VERSIONS: Mapping[int, PlanVersions] = {6: _SAME, 8: _SAME, 9: _SAME}


def plan_versions(table_version: int) -> PlanVersions:
    """The plan versions written for a table version; unsupported versions raise UnsupportedTable."""
    schema_set(table_version)  # refuses anything but 6, 8, 9 with a message naming the version
    return PLAN_VERSIONS[table_version]
