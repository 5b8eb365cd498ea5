from __future__ import annotations

from hoodie.file_group.file_group import FileGroupId
from hoodie.file_group.fs_view import (
    build_file_groups,
    classify_listing,
    read_optimized_slices,
    snapshot_slices,
)
from hoodie.storage import FileInfo
from hoodie.timeline.timeline import Timeline

FG = "5023772b-1fc6-4d7b-a563-21257d92e366-0"
P = "2023-01-01"


def listing(*names: str) -> list[FileInfo]:
    return [FileInfo(f"{P}/{n}", n, 100, None, False) for n in names] + [
        FileInfo(f"{P}/.hoodie_partition_metadata", ".hoodie_partition_metadata", 10, None, False),
        FileInfo(f"{P}/.{FG}_0-1-1_20250101000000000.parquet.crc", "x.crc", 1, None, False),
    ]


def test_v6_pending_compaction_slice_is_merged_with_previous() -> None:
    tl = Timeline.from_file_names(
        [
            "20250101000000000.deltacommit",
            "20250102000000000.deltacommit",
            "20250103000000000.compaction.requested",
            "20250104000000000.deltacommit",
        ],
        layout_version=1,
        folder=".hoodie",
    )
    files = classify_listing(
        listing(
            f"{FG}_0-1-1_20250101000000000.parquet",
            f".{FG}_20250101000000000.log.1_0-2-2",
            f".{FG}_20250103000000000.log.1_0-3-3",
        )
    )
    groups = build_file_groups(files, tl, table_version=6)
    gid = FileGroupId(P, FG)
    assert list(groups[gid].slices) == ["20250101000000000", "20250103000000000"]
    [snap] = snapshot_slices(groups, set())
    assert snap.base_instant == "20250101000000000"
    assert [lf.instant for lf in snap.log_files] == ["20250101000000000", "20250103000000000"]
    [ro] = read_optimized_slices(groups, set())
    assert ro.log_files == ()
    assert snapshot_slices(groups, {gid}) == []


def test_v6_uncommitted_base_file_is_invisible_and_as_of_hides_later_files() -> None:
    tl = Timeline.from_file_names(
        ["20250101000000000.commit", "20250102000000000.commit", "20250103000000000.inflight"],
        layout_version=1,
        folder=".hoodie",
    )
    files = classify_listing(
        listing(
            f"{FG}_0-1-1_20250101000000000.parquet",
            f"{FG}_0-1-1_20250102000000000.parquet",
            f"{FG}_0-1-1_20250103000000000.parquet",
        )
    )
    [latest] = snapshot_slices(build_file_groups(files, tl, table_version=6), set())
    assert latest.base_instant == "20250102000000000"
    [older] = snapshot_slices(build_file_groups(files, tl, table_version=6, as_of="20250101000000000"), set())
    assert older.base_instant == "20250101000000000"


def test_v8_logs_slice_by_completion_time() -> None:
    # d1 completes before compaction c is requested; d2 starts before c but completes after: it belongs to c's
    # slice. d3 is inflight and invisible.
    tl = Timeline.from_file_names(
        [
            "20250101000000000_20250101000000100.deltacommit",
            "20250102000000000_20250102000000100.deltacommit",
            "20250102500000000_20250103500000000.deltacommit",
            "20250103000000000.compaction.requested",
            "20250104000000000.deltacommit.inflight",
        ],
        layout_version=2,
        folder=".hoodie/timeline",
    )
    files = classify_listing(
        listing(
            f"{FG}_0-1-1_20250101000000000.parquet",
            f".{FG}_20250102000000000.log.1_0-1-1",
            f".{FG}_20250102500000000.log.1_0-1-1",
            f".{FG}_20250104000000000.log.1_0-1-1",
        )
    )
    gid = FileGroupId(P, FG)
    groups = build_file_groups(files, tl, table_version=8, pending_compactions={gid: "20250103000000000"})
    slices = groups[gid].ordered()
    assert [(s.base_instant, [lf.instant for lf in s.log_files]) for s in slices] == [
        ("20250101000000000", ["20250102000000000"]),
        ("20250103000000000", ["20250102500000000"]),
    ]
    [snap] = snapshot_slices(groups, set())
    assert [lf.instant for lf in snap.log_files] == ["20250102000000000", "20250102500000000"]
