"""Markers: names on disk, listing (direct and Hudi's timeline-server markers), deletion, strays."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodie.errors import InvalidFileName
from hoodie.storage import Storage
from hoodie.timeline.metadata import CommitMetadata, WriteStat
from hoodie.write.markers import IOType, Marker, Markers, unrecorded_files

T = "20250101000000000"
BASE = "f1-0_1-0-1_20250101000000000.parquet"
RETRY = "f1-0_1-0-2_20250101000000000.parquet"  # a failed task attempt's copy
LOG = ".f2-0_20250101000000000.log.1_1-0-1"


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage.for_uri(str(tmp_path))


def test_marker_files_on_disk(storage: Storage, tmp_path: Path) -> None:
    markers = Markers(storage, T)
    assert markers.list() == []
    assert not markers.exists()
    assert markers.create("2025/01/01", BASE, "CREATE") == Marker("2025/01/01", BASE, IOType.CREATE)
    markers.create("2025/01/01", BASE, IOType.CREATE)  # a retried task: harmless
    markers.create("", "g-0_0-1-2_20250101000000000.parquet", IOType.MERGE)  # non-partitioned table
    markers.create("2025/01/02", LOG, IOType.APPEND)
    temp = tmp_path / ".hoodie" / ".temp" / T
    files = sorted(str(p.relative_to(temp)) for p in temp.rglob("*") if p.is_file())
    assert files == [
        f"2025/01/01/{BASE}.marker.CREATE",
        f"2025/01/02/{LOG}.marker.APPEND",
        "g-0_0-1-2_20250101000000000.parquet.marker.MERGE",
    ]
    assert markers.list() == [
        Marker("2025/01/01", BASE, IOType.CREATE),
        Marker("2025/01/02", LOG, IOType.APPEND),
        Marker("", "g-0_0-1-2_20250101000000000.parquet", IOType.MERGE),
    ]
    partition, file_name, io_type = markers.list()[0]  # plain tuples too
    assert (partition, file_name, io_type) == ("2025/01/01", BASE, "CREATE")
    assert markers.exists()
    assert Markers(storage, "20250101000000001").list() == []  # another instant's markers are its own
    assert markers.delete_all() == 3
    assert markers.list() == []
    assert not temp.exists()  # the instant's marker folder goes too
    assert markers.delete_all() == 0


def test_bad_names_are_refused(storage: Storage) -> None:
    markers = Markers(storage, T)
    with pytest.raises(ValueError, match="RENAME"):
        markers.create("p", BASE, "RENAME")
    with pytest.raises(InvalidFileName):
        markers.create("p", "a/b.parquet", IOType.CREATE)
    with pytest.raises(InvalidFileName):
        Marker.parse(f"p/{BASE}")
    assert Marker.parse(f"p/q/{BASE}.marker.MERGE") == Marker("p/q", BASE, IOType.MERGE)


def test_timeline_server_markers_are_read(storage: Storage) -> None:
    # What Hudi's timeline-server-based markers leave: a type file and MARKERS<n> files of marker paths.
    folder = f".hoodie/.temp/{T}"
    storage.create(f"{folder}/MARKERS.type", b"TIMELINE_SERVER_BASED")
    storage.create(f"{folder}/MARKERS0", f"p1/{BASE}.marker.CREATE\np1/{LOG}.marker.APPEND\n".encode())
    storage.create(f"{folder}/MARKERS1", f"p2/{RETRY}.marker.MERGE\nnot a marker\n".encode())
    assert Markers(storage, T).list() == [
        Marker("p1", LOG, IOType.APPEND),
        Marker("p1", BASE, IOType.CREATE),
        Marker("p2", RETRY, IOType.MERGE),
    ]
    assert Markers(storage, T).delete_all() == 3


@pytest.mark.parametrize("table_version", [6, 8])
def test_unrecorded_files_are_the_strays(storage: Storage, table_version: int) -> None:
    markers = Markers(storage, T)
    markers.create("p1", BASE, IOType.CREATE)
    markers.create("p1", RETRY, IOType.CREATE)
    markers.create("p1", LOG, IOType.APPEND)
    markers.create("p1", ".f3-0_20250101000000000.log.1_1-0-2", IOType.APPEND)
    metadata = CommitMetadata(
        partition_to_write_stats={
            "p1": (
                WriteStat(file_id="f1-0", path=f"p1/{BASE}", partition_path="p1"),
                WriteStat(file_id="f2-0", path=f"p1/{LOG}", partition_path="p1"),
            )
        }
    )
    strays = unrecorded_files(markers.list(), metadata, table_version=table_version)
    if table_version == 6:
        assert strays == [f"p1/{RETRY}"]  # v6 log files may hold earlier commits' blocks: never strays
    else:
        assert strays == ["p1/.f3-0_20250101000000000.log.1_1-0-2", f"p1/{RETRY}"]  # sorted by path
