from __future__ import annotations

import pytest

from hoodie.timeline.instant import State
from hoodie.timeline.timeline import Timeline

V6_NAMES = [
    "20250922132154428.deltacommit.requested",
    "20250922132154428.deltacommit.inflight",
    "20250922132154428.deltacommit",
    "20250922132201931.compaction.requested",
    "20250922132201931.compaction.inflight",
    "20250922132201931.commit",
    "20250922132203239.replacecommit.requested",
    "20250922132203239.replacecommit.inflight",
    "20250922132205093.deltacommit.requested",
    "20250922132207268.compaction.requested",
    ".20250922132154428.deltacommit.crc",
    "hoodie.properties",
    "archived",
]


def test_state_is_highest_file_present() -> None:
    tl = Timeline.from_file_names(V6_NAMES, layout_version=1, folder=".hoodie")
    assert [(i.time, i.action, i.state) for i in tl] == [
        ("20250922132154428", "deltacommit", State.COMPLETED),
        ("20250922132201931", "commit", State.COMPLETED),
        ("20250922132203239", "replacecommit", State.INFLIGHT),
        ("20250922132205093", "deltacommit", State.REQUESTED),
        ("20250922132207268", "compaction", State.REQUESTED),
    ]
    assert tl.was_compaction("20250922132201931")
    assert [i.time for i in tl.pending_compactions()] == ["20250922132207268"]
    assert [i.time for i in tl.completed_writes()] == ["20250922132154428", "20250922132201931"]
    assert (
        tl.file_of("20250922132201931", State.REQUESTED) == ".hoodie/20250922132201931.compaction.requested"
    )
    assert tl.file_of("20250922132201931") == ".hoodie/20250922132201931.commit"


def test_layout2_completion_times_and_as_of() -> None:
    names = [
        "20250920122812485.deltacommit.requested",
        "20250920122812485.deltacommit.inflight",
        "20250920122812485_20250920122815151.deltacommit",
        "20250920122815757.deltacommit.requested",
        "20250920122815757_20250920122817405.deltacommit",
        "20250920122817842.deltacommit.inflight",
    ]
    tl = Timeline.from_file_names(names, layout_version=2, folder=".hoodie/timeline")
    assert tl.get("20250920122812485").completion_time == "20250920122815151"  # type: ignore[union-attr]
    assert [i.time for i in tl.filter_as_of("20250920122815757").completed_writes()] == [
        "20250920122812485",
        "20250920122815757",
    ]
    assert [i.time for i in tl.completed_writes_in_range("20250920122812485", None)] == ["20250920122815757"]
    assert [i.time for i in tl.pending()] == ["20250920122817842"]


def test_instants_before_the_write_timeline_start_count_as_committed() -> None:
    names = [
        "20240101000000000.savepoint",  # savepoints do not start the write timeline
        "20240102000000000.deltacommit.requested",  # pending: not the start either
        "20240103000000000.deltacommit.requested",
        "20240103000000000.deltacommit.inflight",
        "20240103000000000.deltacommit",
        "20240104000000000.deltacommit.requested",
    ]
    tl = Timeline.from_file_names(names, layout_version=1, folder=".hoodie")
    assert tl.write_timeline_start() == "20240103000000000"
    assert tl.is_committed("20231231000000000")  # archived
    assert not tl.is_committed("20231231000000000", as_of="20231230000000000")
    assert not tl.is_committed("20240102000000000")  # on the timeline, pending
    assert tl.is_committed("20240103000000000")
    assert not tl.is_committed("20240103000000000", as_of="20240102000000000")
    assert not tl.is_committed("20240104000000000")
    assert not tl.is_committed("20240105000000000")  # unknown and after the start: never written


def test_empty_timeline_has_no_start_and_nothing_committed() -> None:
    tl = Timeline.from_file_names([], layout_version=2, folder=".hoodie/timeline")
    assert tl.write_timeline_start() is None
    assert not tl.is_committed("20240101000000000")


@pytest.mark.parametrize("layout", [1, 2])
def test_a_savepoint_at_its_commits_time_leaves_the_commit_committed(layout: int) -> None:
    """Hudi gives a savepoint the time of the commit it holds: both instants stand, and the commit's files
    stay committed (a savepoint shadowing its commit made that commit's data invisible to reads)."""
    t, c = "20240101100000000", "20240101100001000"
    done = f"{t}_{c}" if layout == 2 else t
    names = [
        f"{t}.commit.requested",
        f"{t}.inflight",
        f"{done}.commit",
        f"{t}.savepoint.inflight",
        f"{done}.savepoint",
    ]
    timeline = Timeline.from_file_names(names, layout_version=layout, folder="f")
    assert [(i.action, i.state) for i in timeline] == [
        ("commit", State.COMPLETED),
        ("savepoint", State.COMPLETED),
    ]
    assert timeline.is_committed(t)
    assert [i.time for i in timeline.completed_writes()] == [t]
    assert timeline.file_of(t, State.COMPLETED) == f"f/{done}.commit"
    assert timeline.file_of(t, State.COMPLETED, action="savepoint") == f"f/{done}.savepoint"
    assert timeline.file_of(t, State.INFLIGHT, action="savepoint") == f"f/{t}.savepoint.inflight"
    assert len(timeline.filter_as_of(t)) == 2
