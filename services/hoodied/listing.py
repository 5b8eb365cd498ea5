"""How a poll learns what a table's timeline folder holds, at the least cost (:func:`list_timeline`).

- On a local file system the folder's modification time is looked at first (one ``stat``). Adding, removing
  or renaming a file in a folder sets its time; so a folder whose time is still the one it had when it was
  last listed, a time already :data:`QUIET_FOLDER_AGE` old then, holds the files of that listing, and is not
  listed again. A folder of a hundred instants' files costs a hundred times more to list than to look at.
  Only a time that old vouches: a file added in the same tick of the file system's clock as the change
  before it leaves the folder's time as it was. A folder is listed all the same once
  :data:`LISTING_MAX_AGE` after its last listing (a clock set back, a file server whose clock lags ours).
- Object stores have no folders, hence no times: their folders are listed at every poll, many tables at
  once (:mod:`hoodied.table_polls`): a listing there is a round trip, and ten thousand of them one after
  another would outlast the poll interval.

The table's ``hoodie.properties`` is read with the first listing, whenever the listing changed (the poller
does) and again once :data:`CONFIG_MAX_AGE` after it was last read, even on a table whose timeline stays as it
was: a table whose properties vanished (dropped, deleted by mistake) then fails its polls and shows as failing
in ``/status`` and ``hoodied_table_poll_failures_total`` within that time, instead of looking healthy until
its next write. Hudi's backup, ``hoodie.properties.backup``, stands in for a missing file as it does for
Hudi's readers. Once per five minutes a table, the read is no cost a poll would notice.

A quiet table, polled less often (:mod:`hoodied.poll_interval`), reads them every :data:`CONFIG_POLLS` polls
(at the default ceiling of five minutes, every 50 minutes: a poll of an idle table stays one request). A table
with change notifications is the exception (:func:`config_max_age`): its properties are read when an
event names it (a bucket's events cover ``.hoodie/hoodie.properties``) and when its timeline changed, not by
its sweeps, so that a sweep of an idle table costs its one listing (six an hour at the default sweep).
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Final

from hoodie.config import TableConfig
from hoodied.work import WatchedTable

#: Seconds a local folder's modification time must be older than its listing to vouch for it later (above
#: the granularity of every file system's times: FAT's 2 s).
QUIET_FOLDER_AGE: Final = 5.0
#: Seconds after which a local folder is listed again whatever its time says.
LISTING_MAX_AGE: Final = 300.0
#: Seconds after which a table's ``hoodie.properties`` is read again although its timeline did not change.
CONFIG_MAX_AGE: Final = 300.0
#: ... and at least this many of its polls (a quiet table's polls are far apart: :func:`config_max_age`).
CONFIG_POLLS: Final = 10


def config_max_age(table: WatchedTable, *, announced: bool) -> float:
    """Seconds after which a poll reads ``table``'s ``hoodie.properties`` again although its timeline did not
    change: :data:`CONFIG_MAX_AGE`, or :data:`CONFIG_POLLS` of the table's polls at its interval now when
    that is longer (a quiet table polled every five minutes reads it about once an hour); with change
    notifications, at once when an event named the table (``announced``) and never on a sweep (see the
    module docstring)."""
    if table.settings.change_notifications:
        return 0.0 if announced else math.inf
    return max(CONFIG_MAX_AGE, CONFIG_POLLS * (table.poll_interval or 0.0))


@dataclass(frozen=True)
class Listed:
    """What a look at a table's timeline folder found."""

    names: frozenset[str]  # the names of the files in the folder
    config: TableConfig | None = None  # the table's config, read first because the table had none
    fresh: bool = True  # listed now (False: the folder's unchanged time vouches for the last listing)
    folder_time_ns: int | None = None  # the folder's time before the listing, when old enough to vouch


def list_timeline(
    table: WatchedTable, config: TableConfig | None, now: float, *, config_max_age: float = CONFIG_MAX_AGE
) -> Listed:
    """The files of ``table``'s timeline folder (see the module docstring), reading its config first when
    ``config`` is None or was read ``config_max_age`` ago. ``now``: the poller's monotonic clock.
    Changes nothing in ``table``: the poller records a fresh listing's folder time
    (:attr:`WatchedTable.listed_folder_time_ns`) and a config read (:attr:`WatchedTable.config_read_at`) once
    it took the listing in."""
    storage = table.storage
    loaded = None
    if config is None or now - table.config_read_at >= config_max_age:
        config = loaded = TableConfig.load(storage)
    folder = config.timeline_path
    folder_time = None
    if storage.is_local:
        with contextlib.suppress(FileNotFoundError):
            folder_time = storage.info(folder).mtime_ns
        if (
            loaded is None
            and table.listing is not None
            and folder_time is not None
            and folder_time == table.listed_folder_time_ns
            and now - table.listed_at < LISTING_MAX_AGE
        ):
            return Listed(table.listing, fresh=False)
    started = time.time_ns()
    names = frozenset(f.name for f in storage.list(folder) if not f.is_dir)
    vouching = folder_time is not None and started - folder_time >= QUIET_FOLDER_AGE * 1e9
    return Listed(names, loaded, True, folder_time if vouching else None)


__all__ = [
    "CONFIG_MAX_AGE",
    "CONFIG_POLLS",
    "LISTING_MAX_AGE",
    "QUIET_FOLDER_AGE",
    "Listed",
    "config_max_age",
    "list_timeline",
]
