"""The writers' update strategy: what a Hudi writer does with an update or delete of a file group that a
pending clustering rewrites, set by ``hoodie.clustering.updates.strategy`` (``HoodieClusteringConfig``).

A clustering reads the slices its plan names and writes their records into new file groups; an update that
lands in one of those groups after the plan was made is either lost by the clustering or makes it fail. Hudi's
Spark writers therefore check, right after tagging and before any file is written
(``BaseSparkCommitActionExecutor.clusteringHandleUpdate``), the file groups their batch updates or deletes
against the file groups of every pending clustering plan:

- ``org.apache.hudi.client.clustering.update.strategy.SparkRejectUpdateStrategy`` (Hudi's default): the write
  fails with ``HoodieClusteringUpdateException`` ("Not allowed to update the clustering file group
  HoodieFileGroupId{...}. For pending clustering operations, we are not going to support update for now.").
  So a table service must not plan the file groups its writers are updating. (Hudi 1.x refuses an
  ``INSERT OVERWRITE`` that would replace such a group the same way.)
- ``...SparkAllowUpdateStrategy``: the write goes on. With
  ``hoodie.clustering.rollback.pending.replacecommit.on.conflict=true`` the writer first rolls the
  conflicting clustering back; otherwise the conflict is left to the commit: under optimistic concurrency
  Hudi 1.x writers count every pending clustering whose plan names a group they wrote as a conflict
  (``SimpleConcurrentFileWritesConflictResolutionStrategy``), and a clustering that commits after such a write
  must fail (hoodied's does: :mod:`hoodie.clustering.conflict`).
- ``...SparkConsistentBucketDuplicateUpdateStrategy``: for the consistent-hashing bucket index, whose
  clustering resizes buckets; it writes each such update to the old and the new bucket. hoodied plans no
  bucket clustering, so a table configured with it is refused, naming the key.

Inserts never fail: Hudi's ``UpsertPartitioner`` leaves file groups of a pending clustering out of the small
files that take new records (whatever the strategy), so they go to other small files or new file groups.

:func:`check_updates` is the reject rule, for a writer that has tagged its batch (our table writer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum

from hoodie.errors import ClusteringUpdateRejected, InvalidWriteConfig
from hoodie.file_group.file_group import FileGroupId
from hoodie.settings import setting

UPDATES_STRATEGY = "hoodie.clustering.updates.strategy"

_PACKAGE = "org.apache.hudi.client.clustering.update.strategy."
#: Hudi's strategy for the consistent-hashing bucket index (see the module doc): refused.
CONSISTENT_BUCKET_STRATEGY = f"{_PACKAGE}SparkConsistentBucketDuplicateUpdateStrategy"


class UpdateStrategy(StrEnum):
    """The update strategies hoodied pairs its planning with, by Hudi's class name."""

    REJECT = f"{_PACKAGE}SparkRejectUpdateStrategy"
    ALLOW = f"{_PACKAGE}SparkAllowUpdateStrategy"

    @property
    def simple_name(self) -> str:
        return self.value.rpartition(".")[2]

    @classmethod
    def parse(cls, name: str) -> UpdateStrategy:
        """A strategy from Hudi's class name or its simple class name (case-insensitive)."""
        text = name.strip()
        package, _, simple = text.rpartition(".")
        if package and f"{package}." != _PACKAGE:
            raise InvalidWriteConfig(
                f"{UPDATES_STRATEGY}={name!r}: a custom update strategy class; hoodied plans clustering for "
                f"Hudi's {cls.REJECT.simple_name} or {cls.ALLOW.simple_name} only"
            )
        for s in cls:
            if s.simple_name.lower() == simple.lower():
                return s
        if simple.lower() == CONSISTENT_BUCKET_STRATEGY.rpartition(".")[2].lower():
            raise InvalidWriteConfig(
                f"{UPDATES_STRATEGY}={name!r}: the consistent-hashing bucket index's strategy; hoodied plans "
                "size-based clustering only, not bucket resizing: run Hudi's table services on this table"
            )
        known = ", ".join(s.simple_name for s in cls)
        raise InvalidWriteConfig(
            f"{UPDATES_STRATEGY}={name!r}: not an update strategy hoodied knows ({known})"
        )

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> UpdateStrategy:
        """The strategy a table's writers use: the key's value, else Hudi's default (reject)."""
        raw = setting(config, UPDATES_STRATEGY)
        return UPDATES_STRATEGY_DEFAULT if raw is None else cls.parse(raw)


UPDATES_STRATEGY_DEFAULT = UpdateStrategy.REJECT


def check_updates(
    instant_time: str, updated: Iterable[FileGroupId], pending_clustering: Mapping[FileGroupId, str]
) -> None:
    """The reject rule: raise :class:`~hoodie.errors.ClusteringUpdateRejected` when a write at
    ``instant_time`` updates or deletes records of a file group that a pending clustering rewrites
    (``pending_clustering``: group -> the clustering's instant time). Called before anything is written."""
    hit = sorted((g for g in set(updated) if g in pending_clustering), key=str)
    if not hit:
        return
    by_clustering: dict[str, list[FileGroupId]] = {}
    for g in hit:
        by_clustering.setdefault(pending_clustering[g], []).append(g)
    named = "; ".join(
        f"{', '.join(str(g) for g in groups[:5])}{' ...' if len(groups) > 5 else ''} (clustering {t})"
        for t, groups in sorted(by_clustering.items())
    )
    raise ClusteringUpdateRejected(
        f"write {instant_time} updates or deletes records of {len(hit)} file group(s) under pending "
        f"clustering: {named}. Not allowed with {UPDATES_STRATEGY}={UpdateStrategy.REJECT.simple_name}, "
        "as in Hudi; nothing was written. Retry after the clustering completes, or leave those records out",
        clustering_instants=tuple(sorted(by_clustering)),
        file_groups=tuple(hit),
    )


__all__ = [
    "CONSISTENT_BUCKET_STRATEGY",
    "UPDATES_STRATEGY",
    "UPDATES_STRATEGY_DEFAULT",
    "UpdateStrategy",
    "check_updates",
]
