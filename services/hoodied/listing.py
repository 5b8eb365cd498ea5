"""How a poll learns what a table's timeline folder holds, at the least cost (:func:`list_timeline`).

- On a local file system the folder's modification time is looked at first (one ``stat``). Adding, removing
  or renaming a file in a folder sets its time; so a folder whose time is still the one it had when it was
  last listed, a time already :data:`QUIET_FOLDER_AGE` old then, holds the files of that listing, and is not
  listed again. A folder of a hundred instants' files costs a hundred times more to list than to look at.
  Only a time that old vouches: a file added in the same tick of the file system's clock as the change
  before it leaves the folder's time as it was. A folder is listed all the same once
  :data:`LISTING_MAX_AGE` after its last listing (a clock set back, a file server whose clock lags ours).
- Object stores have no folders, hence no times: their folders are listed, :data:`LISTING_THREADS` tables
  at once ahead of the poll's walk (:class:`ListingAhead`): a listing there is a round trip, and ten
  thousand of them one after another would outlast the poll interval.

The table's ``hoodie.properties`` is read with the first listing, whenever the listing changed (the poller
does) and again once :data:`CONFIG_MAX_AGE` after it was last read, even on a table whose timeline stays as it
was: a table whose properties vanished (dropped, deleted by mistake) then fails its polls and shows as failing
in ``/status`` and ``hoodied_table_poll_failures_total`` within that time, instead of looking healthy until
its next write. Hudi's backup, ``hoodie.properties.backup``, stands in for a missing file as it does for
Hudi's readers. Once per five minutes a table, the read is no cost a poll would notice.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final

from hoodie.config import TableConfig
from hoodied.logs import log_context
from hoodied.work import WatchedTable

#: Seconds a local folder's modification time must be older than its listing to vouch for it later (above
#: the granularity of every file system's times: FAT's 2 s).
QUIET_FOLDER_AGE: Final = 5.0
#: Seconds after which a local folder is listed again whatever its time says.
LISTING_MAX_AGE: Final = 300.0
#: Seconds after which a table's ``hoodie.properties`` is read again although its timeline did not change.
CONFIG_MAX_AGE: Final = 300.0
#: Listings of object-store tables under way at once during a poll.
LISTING_THREADS: Final = 16


@dataclass(frozen=True)
class Listed:
    """What a look at a table's timeline folder found."""

    names: frozenset[str]  # the names of the files in the folder
    config: TableConfig | None = None  # the table's config, read first because the table had none
    fresh: bool = True  # listed now (False: the folder's unchanged time vouches for the last listing)
    folder_time_ns: int | None = None  # the folder's time before the listing, when old enough to vouch


def list_timeline(table: WatchedTable, config: TableConfig | None, now: float) -> Listed:
    """The files of ``table``'s timeline folder (see the module docstring), reading its config first when
    ``config`` is None or was read :data:`CONFIG_MAX_AGE` ago. ``now``: the poller's monotonic clock.
    Changes nothing in ``table``: the poller records a fresh listing's folder time
    (:attr:`WatchedTable.listed_folder_time_ns`) and a config read (:attr:`WatchedTable.config_read_at`) once
    it took the listing in."""
    storage = table.storage
    loaded = None
    if config is None or now - table.config_read_at >= CONFIG_MAX_AGE:
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


class ListingAhead:
    """Lists the timeline folders of a poll's object-store tables on :data:`LISTING_THREADS` threads while
    the poll walks its tables (a ``with`` block: leaving it waits for the listings under way)."""

    def __init__(self, tables: Sequence[WatchedTable], now: float) -> None:
        self._tables = [t for t in tables if not t.storage.is_local]
        self._now = now
        self._pool = ThreadPoolExecutor(LISTING_THREADS, thread_name_prefix="hoodied-list")
        self._listed: dict[str, Future[Listed]] = {}

    def __enter__(self) -> ListingAhead:
        for table in self._tables:
            self._listed[table.uri] = self._pool.submit(self._list, table, table.config)
        return self

    def _list(self, table: WatchedTable, config: TableConfig | None) -> Listed:
        with log_context(table=table.name):
            return list_timeline(table, config, self._now)

    def get(self, table: WatchedTable) -> Future[Listed] | None:
        """The listing of ``table`` under way or done; None when it is not listed ahead (a local table)."""
        return self._listed.get(table.uri)

    def cancel(self) -> None:
        """Drop the listings not begun (the poll stops)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


__all__ = [
    "CONFIG_MAX_AGE",
    "LISTING_MAX_AGE",
    "LISTING_THREADS",
    "QUIET_FOLDER_AGE",
    "Listed",
    "ListingAhead",
    "list_timeline",
]
