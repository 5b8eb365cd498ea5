"""What timeline files hold: commit metadata and the plans of table services, decoded and encoded exactly.

Which file holds what (``t`` = requested time, see :mod:`hoodie.timeline.instant` for the names)::

    commit / deltacommit            requested: empty (v8+: sometimes commit metadata)
                                    inflight, completed: commit metadata        -> CommitMetadata
    replacecommit                   requested: HoodieRequestedReplaceMetadata   -> RequestedReplaceMetadata
                                    inflight: commit metadata, completed: replace commit metadata
    clustering (v8+)                requested: HoodieRequestedReplaceMetadata   -> ClusteringPlan
    compaction / logcompaction      requested: HoodieCompactionPlan             -> CompactionPlan
    clean                           requested, inflight: HoodieCleanerPlan      -> CleanerPlan
                                    completed: HoodieCleanMetadata              -> CleanMetadata
    rollback                        requested: HoodieRollbackPlan               -> RollbackPlan
                                    completed: HoodieRollbackMetadata           -> RollbackMetadata
    indexing                        requested: HoodieIndexPlan                  -> IndexPlan
                                    completed: HoodieIndexCommitMetadata        -> IndexCommitMetadata
    savepoint                       completed: HoodieSavepointMetadata          -> SavepointMetadata
    restore                         requested: HoodieRestorePlan                -> RestorePlan
                                    completed: HoodieRestoreMetadata            -> RestoreMetadata

Commit metadata is pretty-printed JSON (Jackson's ``DefaultPrettyPrinter``) in table version 6 and an Avro
object container in 8 and 9; v8+ tables upgraded from v6 keep their old JSON files, so decoding goes by the
content, not the version. Every plan is an Avro container in every version (:mod:`hoodie.avro.container`).

Decoders are pure (bytes in, value out) and raise :class:`~hoodie.errors.CorruptTimelineFile` naming the
problem. Encoders write what the table's Hudi writes: the Avro schema set of its line (:mod:`hoodie.avro`),
the plan versions of :data:`PLAN_VERSIONS`, and for v6 JSON the exact bytes of Jackson's output, key order
included (kept from the file for decoded metadata, Java's ``HashMap`` order for new maps).

Paths: version 1 compaction plans stored full paths, version 2 stores file names; we always hold names and
refuse entries that do not lie directly in their partition (:class:`~hoodie.errors.PathOutsideTable`).
Clustering slices, clean plans and rollback plans store full paths (of wherever the table lived when
planned); they are kept as written, checked to lie in their partition, and their names are available
through :func:`file_name_in_partition`.

Which module holds what: one kind of record each, decoded and encoded, then the helpers beneath them::

    commit             CommitMetadata, WriteStat, RuntimeStats
    compaction_plan    CompactionPlan
    clustering_plan    ClusteringPlan, RequestedReplaceMetadata
    clean              CleanerPlan, CleanMetadata
    rollback           RollbackPlan, RollbackMetadata
    restore            RestorePlan, RestoreMetadata
    index              IndexPlan, IndexCommitMetadata
    savepoint          SavepointMetadata
    fields             typed fields of decoded records; reading and writing single-record Avro containers
    versions           PlanVersions: the record versions each table version writes
    paths              plan entries' file names in their partition, plans' file groups

Java's HashMap order and Jackson's JSON output (v6 commit metadata) come from :mod:`hoodie.java_compat`.
"""

from __future__ import annotations

from hoodie.timeline.metadata.clean import (
    ActionInstant,
    CleanerPlan,
    CleanFileInfo,
    CleanMetadata,
    CleanPartitionMetadata,
    decode_clean_metadata,
    decode_cleaner_plan,
    encode_clean_metadata,
    encode_cleaner_plan,
)
from hoodie.timeline.metadata.clustering_plan import (
    ClusteringGroup,
    ClusteringPlan,
    ClusteringStrategy,
    RequestedReplaceMetadata,
    SliceInfo,
    decode_clustering_plan,
    decode_requested_replace_metadata,
    encode_clustering_plan,
    encode_requested_replace_metadata,
)
from hoodie.timeline.metadata.commit import (
    CommitMetadata,
    RuntimeStats,
    WriteStat,
    decode_commit_metadata,
    encode_commit_metadata,
)
from hoodie.timeline.metadata.compaction_plan import (
    CompactionOperation,
    CompactionPlan,
    CompactionStrategy,
    decode_compaction_plan,
    encode_compaction_plan,
)
from hoodie.timeline.metadata.index import (
    IndexCommitMetadata,
    IndexPartitionInfo,
    IndexPlan,
    decode_index_commit_metadata,
    decode_index_plan,
    encode_index_commit_metadata,
    encode_index_plan,
)
from hoodie.timeline.metadata.paths import (
    file_name_in_partition,
)
from hoodie.timeline.metadata.restore import (
    RestoreMetadata,
    RestorePlan,
    decode_restore_metadata,
    decode_restore_plan,
    encode_restore_metadata,
    encode_restore_plan,
)
from hoodie.timeline.metadata.rollback import (
    InstantInfo,
    RollbackMetadata,
    RollbackPartitionMetadata,
    RollbackPlan,
    RollbackRequest,
    decode_rollback_metadata,
    decode_rollback_plan,
    encode_rollback_metadata,
    encode_rollback_plan,
)
from hoodie.timeline.metadata.savepoint import (
    SavepointMetadata,
    SavepointPartitionMetadata,
    decode_savepoint_metadata,
    encode_savepoint_metadata,
)
from hoodie.timeline.metadata.versions import (
    PLAN_VERSIONS,
    PlanVersions,
    plan_versions,
)

__all__ = [
    "PLAN_VERSIONS",
    "ActionInstant",
    "CleanFileInfo",
    "CleanMetadata",
    "CleanPartitionMetadata",
    "CleanerPlan",
    "ClusteringGroup",
    "ClusteringPlan",
    "ClusteringStrategy",
    "CommitMetadata",
    "CompactionOperation",
    "CompactionPlan",
    "CompactionStrategy",
    "IndexCommitMetadata",
    "IndexPartitionInfo",
    "IndexPlan",
    "InstantInfo",
    "PlanVersions",
    "RequestedReplaceMetadata",
    "RestoreMetadata",
    "RestorePlan",
    "RollbackMetadata",
    "RollbackPartitionMetadata",
    "RollbackPlan",
    "RollbackRequest",
    "RuntimeStats",
    "SavepointMetadata",
    "SavepointPartitionMetadata",
    "SliceInfo",
    "WriteStat",
    "decode_clean_metadata",
    "decode_cleaner_plan",
    "decode_clustering_plan",
    "decode_commit_metadata",
    "decode_compaction_plan",
    "decode_index_commit_metadata",
    "decode_index_plan",
    "decode_requested_replace_metadata",
    "decode_restore_metadata",
    "decode_restore_plan",
    "decode_rollback_metadata",
    "decode_rollback_plan",
    "decode_savepoint_metadata",
    "encode_clean_metadata",
    "encode_cleaner_plan",
    "encode_clustering_plan",
    "encode_commit_metadata",
    "encode_compaction_plan",
    "encode_index_commit_metadata",
    "encode_index_plan",
    "encode_requested_replace_metadata",
    "encode_restore_metadata",
    "encode_restore_plan",
    "encode_rollback_metadata",
    "encode_rollback_plan",
    "encode_savepoint_metadata",
    "file_name_in_partition",
    "plan_versions",
]
