"""Which recent void decisions hold archival back (``hoodie/write/late_files.py``): an instant a takeover
removed after the active timeline's first instant (archiving past it would make a late file of it read as
an archived commit's), not one on the timeline, nor one before its first instant (archived, or read as
archived already); and decisions older than the horizon count no more."""

from __future__ import annotations

import time
from pathlib import Path

from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.write.decision import void_attempts
from hoodie.write.late_files import (
    CLOCK_SKEW_SECONDS,
    LATE_REQUEST_HORIZON_SECONDS,
    LateFiles,
    recent_late_files,
    removed_instants_with_late_files,
)


def test_only_instants_removed_after_the_timelines_start_hold_archival(tmp_path: Path) -> None:
    generate_table(str(tmp_path / "t"), GenerateSpec(table_version=8, rows=20, commits=3, partitions=1))
    storage = Storage.for_uri(str(tmp_path / "t"))
    timeline = Table.load(storage).timeline
    first, second, _ = (w.time for w in timeline.completed_writes())
    removed = str(int(first) + 1)  # a millisecond after the first commit: between it and the second
    assert first < removed < second
    assert timeline.get(removed) is None
    before_start = "20000101000000000"
    for instant in (removed, before_start, second):  # second: completed by the takeover, on the timeline
        assert void_attempts(storage, instant, [3], by=4) is None
    assert removed_instants_with_late_files(storage, timeline) == [removed]
    swept = {late.instant_time: late for late in recent_late_files(storage)}
    assert swept[removed] == LateFiles(removed, None, frozenset({3}))
    assert set(swept) == {removed, before_start, second}  # all of them are swept
    later = time.time() + LATE_REQUEST_HORIZON_SECONDS + CLOCK_SKEW_SECONDS + 1
    assert recent_late_files(storage, now=later) == []
