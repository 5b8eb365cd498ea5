"""Hudi's partition filter modes of clustering plans: the keys and their defaults, bad values named, and which
partitions each mode leaves, in which order."""

from __future__ import annotations

import pytest

from hoodie.clustering.partition_filter import (
    CLUSTER_BEGIN_PARTITION,
    CLUSTER_END_PARTITION,
    DAYBASED_LOOKBACK_PARTITIONS,
    DAYBASED_SKIP_FROM_LATEST_PARTITIONS,
    PARTITION_FILTER_MODE,
    FilterMode,
    PartitionFilter,
)
from hoodie.errors import InvalidWriteConfig

DAYS = ["2025/01/03", "2025/01/01", "2025/01/05", "2025/01/02", "2025/01/04"]
NOON = "20250101120000000"


def test_defaults_are_hudis() -> None:
    f = PartitionFilter.from_config({})
    assert f == PartitionFilter()
    assert (f.mode, f.lookback_partitions, f.skip_from_latest) == (FilterMode.NONE, 2, 0)
    assert (f.begin_partition, f.end_partition) == (None, None)
    assert f.apply(DAYS, NOON) == sorted(DAYS)


def test_keys_are_read() -> None:
    f = PartitionFilter.from_config(
        {
            PARTITION_FILTER_MODE: "recent_days",
            DAYBASED_LOOKBACK_PARTITIONS: "3",
            DAYBASED_SKIP_FROM_LATEST_PARTITIONS: "1",
            CLUSTER_BEGIN_PARTITION: "a",
            CLUSTER_END_PARTITION: "b",
        }
    )
    assert f == PartitionFilter(FilterMode.RECENT_DAYS, 3, 1, "a", "b")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (PARTITION_FILTER_MODE, "LATEST", "not one of NONE, RECENT_DAYS, SELECTED_PARTITIONS, DAY_ROLLING"),
        (DAYBASED_LOOKBACK_PARTITIONS, "two", "not an integer"),
        (DAYBASED_SKIP_FROM_LATEST_PARTITIONS, "3000000000", "out of range"),
    ],
)
def test_bad_values_name_the_key_and_the_value(key: str, value: str, message: str) -> None:
    with pytest.raises(InvalidWriteConfig, match=message) as e:
        PartitionFilter.from_config({key: value})
    assert key in str(e.value)


def test_recent_days_skips_the_latest_partitions_and_looks_back_newest_first() -> None:
    recent = PartitionFilter(FilterMode.RECENT_DAYS)  # Hudi's defaults: the latest two
    assert recent.apply(DAYS, NOON) == ["2025/01/05", "2025/01/04"]
    # The partition writers are filling (the latest) is left alone.
    skip = PartitionFilter(FilterMode.RECENT_DAYS, lookback_partitions=2, skip_from_latest=1)
    assert skip.apply(DAYS, NOON) == ["2025/01/04", "2025/01/03"]
    # A lookback of 0 or less takes every partition after the skipped ones; a negative skip skips none.
    assert PartitionFilter(FilterMode.RECENT_DAYS, 0, 2).apply(DAYS, NOON) == [
        "2025/01/03",
        "2025/01/02",
        "2025/01/01",
    ]
    assert PartitionFilter(FilterMode.RECENT_DAYS, -1, -4).apply(DAYS, NOON) == sorted(DAYS, reverse=True)
    assert PartitionFilter(FilterMode.RECENT_DAYS, 2, 9).apply(DAYS, NOON) == []


def test_selected_partitions_are_the_inclusive_range_of_the_bounds_set() -> None:
    between = PartitionFilter(
        FilterMode.SELECTED_PARTITIONS, begin_partition="2025/01/02", end_partition="2025/01/04"
    )
    assert between.apply(DAYS, NOON) == ["2025/01/02", "2025/01/03", "2025/01/04"]
    since = PartitionFilter(FilterMode.SELECTED_PARTITIONS, begin_partition="2025/01/04")
    assert since.apply(DAYS, NOON) == ["2025/01/04", "2025/01/05"]
    assert PartitionFilter(FilterMode.SELECTED_PARTITIONS).apply(DAYS, NOON) == sorted(DAYS)


def test_day_rolling_takes_the_partitions_of_the_instant_times_hour() -> None:
    partitions = [f"p{i:02d}" for i in range(50)]
    rolling = PartitionFilter(FilterMode.DAY_ROLLING)
    assert rolling.apply(partitions, "20250101000000000") == ["p00", "p24", "p48"]
    assert rolling.apply(partitions, "20250101235959999") == ["p23", "p47"]
    assert rolling.apply(partitions, NOON) == ["p12", "p36"]
