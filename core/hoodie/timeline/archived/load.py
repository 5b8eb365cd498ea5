"""Reading a table's archived timeline in whichever layout its timeline uses (layout 2: the LSM history;
layouts 0 and 1: the archive log)."""

from __future__ import annotations

from hoodie.config import TableConfig
from hoodie.storage import Storage
from hoodie.timeline.archived import ArchivedTimeline
from hoodie.timeline.archived.archive_log import read_archive_log
from hoodie.timeline.archived.lsm import read_lsm_history


def load_archived_timeline(
    storage: Storage, config: TableConfig, *, start: str | None = None, end: str | None = None
) -> ArchivedTimeline:
    """The table's history; with ``start``/``end``, the LSM layout reads only the files and rows of instants
    requested in ``(start, end]`` (the archive log is read whole and filtered)."""
    if config.timeline_layout_version >= 2:
        return ArchivedTimeline.of(read_lsm_history(storage, config, start=start, end=end))
    entries = read_archive_log(storage, config)
    if start is not None or end is not None:
        entries = [e for e in entries if (start is None or e.time > start) and (end is None or e.time <= end)]
    return ArchivedTimeline.of(entries)


__all__ = ["load_archived_timeline"]
