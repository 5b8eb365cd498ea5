from __future__ import annotations

import pytest

from hoodie.errors import InvalidInstant
from hoodie.timeline.instant import Instant, State


@pytest.mark.parametrize(
    ("name", "time", "action", "state", "completion"),
    [
        (
            "20240402123035233.deltacommit.requested",
            "20240402123035233",
            "deltacommit",
            State.REQUESTED,
            None,
        ),
        ("20240402123035233.deltacommit.inflight", "20240402123035233", "deltacommit", State.INFLIGHT, None),
        ("20240402123035233.inflight", "20240402123035233", "commit", State.INFLIGHT, None),
        ("20240402123035233.commit", "20240402123035233", "commit", State.COMPLETED, None),
        ("20240402123035233.commit.requested", "20240402123035233", "commit", State.REQUESTED, None),
        (
            "20250920122812485_20250920122815151.deltacommit",
            "20250920122812485",
            "deltacommit",
            State.COMPLETED,
            "20250920122815151",
        ),
        ("20250920122820195.compaction.requested", "20250920122820195", "compaction", State.REQUESTED, None),
        ("20250920122821706.clustering.inflight", "20250920122821706", "clustering", State.INFLIGHT, None),
        ("20240402123035.clean", "20240402123035", "clean", State.COMPLETED, None),
    ],
)
def test_parse_and_print_back(
    name: str, time: str, action: str, state: State, completion: str | None
) -> None:
    instant = Instant.parse(name)
    assert (instant.time, instant.action, instant.state, instant.completion_time) == (
        time,
        action,
        state,
        completion,
    )
    assert instant.file_name == name


@pytest.mark.parametrize(
    "name",
    [
        "hoodie.properties",
        ".20240402123035233.commit.crc",
        "20240402123035233.bogus",
        "2024040212303.commit",
        "20240402123035233_20240402123035299.commit.requested",
        "20240402123035233.commit.requested.extra",
        "archived",
    ],
)
def test_rejects_other_names(name: str) -> None:
    with pytest.raises(InvalidInstant):
        Instant.parse(name)
    assert Instant.try_parse(name) is None


def test_layouts_name_completed_instants_differently() -> None:
    i = Instant("20240402123035233", "commit", State.COMPLETED, "20240402123036000")
    assert i.file_name_for(2) == "20240402123035233_20240402123036000.commit"
    assert i.file_name_for(1) == "20240402123035233.commit"
    with pytest.raises(InvalidInstant):
        Instant("20240402123035233", "commit", State.COMPLETED).file_name_for(2)


def test_pending_instant_cannot_carry_completion_time() -> None:
    with pytest.raises(InvalidInstant):
        Instant("20240402123035233", "commit", State.INFLIGHT, "20240402123036000")
