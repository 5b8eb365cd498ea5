"""The writers' update strategy: Hudi's key, class names and default, bad values named; and the reject rule
(an update or delete of a file group under pending clustering is refused, naming the groups and the
clustering)."""

from __future__ import annotations

import pytest

from hoodie.clustering.update_strategy import (
    CONSISTENT_BUCKET_STRATEGY,
    UPDATES_STRATEGY,
    UPDATES_STRATEGY_DEFAULT,
    UpdateStrategy,
    check_updates,
)
from hoodie.errors import ClusteringUpdateRejected, InvalidWriteConfig
from hoodie.file_group.file_group import FileGroupId

PACKAGE = "org.apache.hudi.client.clustering.update.strategy."


def test_the_default_is_hudis_reject_strategy() -> None:
    assert UPDATES_STRATEGY == "hoodie.clustering.updates.strategy"
    assert UPDATES_STRATEGY_DEFAULT is UpdateStrategy.REJECT
    assert UpdateStrategy.REJECT.value == f"{PACKAGE}SparkRejectUpdateStrategy"
    assert UpdateStrategy.ALLOW.value == f"{PACKAGE}SparkAllowUpdateStrategy"
    assert UpdateStrategy.from_config({}) is UpdateStrategy.REJECT
    assert UpdateStrategy.from_config({UPDATES_STRATEGY: "  "}) is UpdateStrategy.REJECT


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"{PACKAGE}SparkRejectUpdateStrategy", UpdateStrategy.REJECT),
        (f"{PACKAGE}SparkAllowUpdateStrategy", UpdateStrategy.ALLOW),
        ("SparkAllowUpdateStrategy", UpdateStrategy.ALLOW),
        (" sparkrejectupdatestrategy ", UpdateStrategy.REJECT),
    ],
)
def test_hudis_class_names_and_simple_names_are_read(value: str, expected: UpdateStrategy) -> None:
    assert UpdateStrategy.from_config({UPDATES_STRATEGY: value}) is expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("allow", "not an update strategy hoodied knows"),
        ("com.example.MyUpdateStrategy", "custom update strategy class"),
        (CONSISTENT_BUCKET_STRATEGY, "consistent-hashing bucket index"),
        ("SparkConsistentBucketDuplicateUpdateStrategy", "run Hudi's table services"),
    ],
)
def test_other_strategies_are_refused_naming_the_key_and_the_value(value: str, message: str) -> None:
    with pytest.raises(InvalidWriteConfig, match=message) as e:
        UpdateStrategy.from_config({UPDATES_STRATEGY: value})
    assert UPDATES_STRATEGY in str(e.value)
    assert value in str(e.value)


def test_updates_outside_pending_clustering_pass() -> None:
    pending = {FileGroupId("a", "f1-0"): "20250101000000000"}
    check_updates("20250102000000000", [FileGroupId("a", "f2-0"), FileGroupId("b", "f1-0")], pending)
    check_updates("20250102000000000", [], pending)


def test_an_update_of_a_group_under_clustering_is_rejected_naming_groups_and_clusterings() -> None:
    pending = {
        FileGroupId("a", "f1-0"): "20250101000000000",
        FileGroupId("a", "f2-0"): "20250101000000000",
        FileGroupId("b", "f3-0"): "20250101000000001",
    }
    updated = [FileGroupId("a", "f2-0"), FileGroupId("b", "f3-0"), FileGroupId("b", "f9-0")]
    with pytest.raises(ClusteringUpdateRejected) as e:
        check_updates("20250102000000000", updated, pending)
    message = str(e.value)
    assert "write 20250102000000000" in message
    assert "a/f2-0 (clustering 20250101000000000)" in message
    assert "b/f3-0 (clustering 20250101000000001)" in message
    assert "f1-0" not in message
    assert "f9-0" not in message
    assert "SparkRejectUpdateStrategy" in message
    assert "nothing was written" in message
    assert e.value.clustering_instants == ("20250101000000000", "20250101000000001")
    assert e.value.file_groups == (FileGroupId("a", "f2-0"), FileGroupId("b", "f3-0"))
