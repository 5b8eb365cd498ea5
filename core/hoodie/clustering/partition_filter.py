"""Hudi's partition filter modes of clustering plans (``hoodie.clustering.plan.partition.filter.mode``,
``ClusteringPlanPartitionFilterMode`` and ``ClusteringPlanPartitionFilter``): which of the partitions
selected so far (by ``partition.selected``, else ``partition.regex.pattern``) a plan may take, and in which
order they are planned (and so fill ``max.num.groups``).

- ``NONE`` (Hudi's default): all of them, in sorted order.
- ``RECENT_DAYS``: for tables partitioned by date. The partitions sorted newest (greatest) first, the first
  ``hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions`` (default 0) skipped, then at most
  ``hoodie.clustering.plan.strategy.daybased.lookback.partitions`` (default 2; 0 or less: no limit) taken, in
  that newest-first order. Skipping the latest partitions keeps clustering out of the partitions writers are
  still filling.
- ``SELECTED_PARTITIONS``: those between ``hoodie.clustering.plan.strategy.cluster.begin.partition`` and
  ``...cluster.end.partition`` (string order, both inclusive; an unset bound does not bound).
- ``DAY_ROLLING``: each partition once a day: the sorted partitions whose index modulo 24 is the hour of the
  day. Hudi takes the hour of its JVM's clock; hoodied takes the hour of the clustering's instant time (the
  table's timeline zone), so the choice is a function of the plan's inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from hoodie.errors import InvalidWriteConfig
from hoodie.settings import int_setting, setting
from hoodie.timeline.instant_time import parse_instant_time

PARTITION_FILTER_MODE = "hoodie.clustering.plan.partition.filter.mode"
DAYBASED_LOOKBACK_PARTITIONS = "hoodie.clustering.plan.strategy.daybased.lookback.partitions"
DAYBASED_LOOKBACK_PARTITIONS_DEFAULT = 2
DAYBASED_SKIP_FROM_LATEST_PARTITIONS = "hoodie.clustering.plan.strategy.daybased.skipfromlatest.partitions"
DAYBASED_SKIP_FROM_LATEST_PARTITIONS_DEFAULT = 0
CLUSTER_BEGIN_PARTITION = "hoodie.clustering.plan.strategy.cluster.begin.partition"
CLUSTER_END_PARTITION = "hoodie.clustering.plan.strategy.cluster.end.partition"


class FilterMode(StrEnum):
    """Hudi's ``ClusteringPlanPartitionFilterMode`` values."""

    NONE = "NONE"
    RECENT_DAYS = "RECENT_DAYS"
    SELECTED_PARTITIONS = "SELECTED_PARTITIONS"
    DAY_ROLLING = "DAY_ROLLING"


@dataclass(frozen=True)
class PartitionFilter:
    """One partition filter mode with its parameters (Hudi's keys above; defaults as Hudi's)."""

    mode: FilterMode = FilterMode.NONE
    lookback_partitions: int = DAYBASED_LOOKBACK_PARTITIONS_DEFAULT
    skip_from_latest: int = DAYBASED_SKIP_FROM_LATEST_PARTITIONS_DEFAULT
    begin_partition: str | None = None
    end_partition: str | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> PartitionFilter:
        raw = setting(config, PARTITION_FILTER_MODE)
        mode = FilterMode.NONE
        if raw is not None:
            try:
                mode = FilterMode(raw.upper())
            except ValueError:
                known = ", ".join(m.value for m in FilterMode)
                raise InvalidWriteConfig(f"{PARTITION_FILTER_MODE}={raw!r}: not one of {known}") from None
        return cls(
            mode=mode,
            # Java ints; a negative skip counts as 0 and a lookback of 0 or less as no limit, as in Hudi.
            lookback_partitions=int_setting(
                config,
                DAYBASED_LOOKBACK_PARTITIONS,
                DAYBASED_LOOKBACK_PARTITIONS_DEFAULT,
                minimum=-(2**31),
                bits=32,
            ),
            skip_from_latest=int_setting(
                config,
                DAYBASED_SKIP_FROM_LATEST_PARTITIONS,
                DAYBASED_SKIP_FROM_LATEST_PARTITIONS_DEFAULT,
                minimum=-(2**31),
                bits=32,
            ),
            begin_partition=setting(config, CLUSTER_BEGIN_PARTITION),
            end_partition=setting(config, CLUSTER_END_PARTITION),
        )

    def apply(self, partitions: Sequence[str], instant_time: str) -> list[str]:
        """The partitions a plan at ``instant_time`` may take, in planning order (see the module doc)."""
        ordered = sorted(partitions)
        if self.mode is FilterMode.RECENT_DAYS:
            newest_first = ordered[::-1][max(self.skip_from_latest, 0) :]
            return newest_first[: self.lookback_partitions] if self.lookback_partitions > 0 else newest_first
        if self.mode is FilterMode.SELECTED_PARTITIONS:
            return [
                p
                for p in ordered
                if (self.begin_partition is None or p >= self.begin_partition)
                and (self.end_partition is None or p <= self.end_partition)
            ]
        if self.mode is FilterMode.DAY_ROLLING:
            hour = parse_instant_time(instant_time).hour
            return [p for i, p in enumerate(ordered) if i % 24 == hour]
        return ordered

    def describe(self) -> str:
        """The mode and its parameters, for a reason that nothing was selected."""
        if self.mode is FilterMode.RECENT_DAYS:
            return (
                f"{PARTITION_FILTER_MODE}=RECENT_DAYS ({DAYBASED_SKIP_FROM_LATEST_PARTITIONS}="
                f"{self.skip_from_latest}, {DAYBASED_LOOKBACK_PARTITIONS}={self.lookback_partitions})"
            )
        if self.mode is FilterMode.SELECTED_PARTITIONS:
            return (
                f"{PARTITION_FILTER_MODE}=SELECTED_PARTITIONS ({CLUSTER_BEGIN_PARTITION}="
                f"{self.begin_partition}, {CLUSTER_END_PARTITION}={self.end_partition})"
            )
        return f"{PARTITION_FILTER_MODE}={self.mode.value}"


__all__ = [
    "CLUSTER_BEGIN_PARTITION",
    "CLUSTER_END_PARTITION",
    "DAYBASED_LOOKBACK_PARTITIONS",
    "DAYBASED_LOOKBACK_PARTITIONS_DEFAULT",
    "DAYBASED_SKIP_FROM_LATEST_PARTITIONS",
    "DAYBASED_SKIP_FROM_LATEST_PARTITIONS_DEFAULT",
    "PARTITION_FILTER_MODE",
    "FilterMode",
    "PartitionFilter",
]
