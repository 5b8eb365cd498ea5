"""Scheduling a table service decides "nothing to do" without the table lock and without an instant time (so
without the clock-skew wait); when there is a plan, the lock is held once, for the instant time and the plan's
write, and the skew wait happens once."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UPDATES_STRATEGY, UpdateStrategy
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.trigger import TriggerConfig
from hoodie.config import TableConfig
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator


class CountingLock(FileSystemLock):
    """The file-system lock, counting its acquisitions."""

    acquired = 0

    def acquire(self, timeout: float) -> None:
        super().acquire(timeout)
        self.acquired += 1


class CountingGenerator(InstantTimeGenerator):
    """The instant-time generator, counting the times it handed out (each one a clock-skew wait)."""

    handed_out = 0

    def next(self, storage: Storage, config: TableConfig, lock: object = None) -> str:  # type: ignore[override]
        self.handed_out += 1
        return super().next(storage, config)


Scheduler = Callable[[Storage, FileSystemLock, InstantTimeGenerator], Instant | None]


def _compaction(storage: Storage, lock: FileSystemLock, generator: InstantTimeGenerator) -> Instant | None:
    trigger = TriggerConfig.from_config({"hoodie.compact.inline.max.delta.commits": "1"})
    return schedule_compaction(storage, lock, trigger=trigger, time_generator=generator).instant


def _clustering(storage: Storage, lock: FileSystemLock, generator: InstantTimeGenerator) -> Instant | None:
    config = ClusteringConfig.from_config(
        {"hoodie.clustering.inline.max.commits": "1", UPDATES_STRATEGY: UpdateStrategy.ALLOW.value}
    )
    return schedule_clustering(storage, lock, config=config, time_generator=generator).instant


def _clean(storage: Storage, lock: FileSystemLock, generator: InstantTimeGenerator) -> Instant | None:
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=1)
    return schedule_clean(
        storage, lock, config=config, respect_trigger=True, time_generator=generator
    ).instant


SCHEDULERS = {"compaction": _compaction, "clustering": _clustering, "clean": _clean}


def _table(root: Path, table_type: str, commits: int) -> Storage:
    generate_table(
        str(root),
        GenerateSpec(table_type=table_type, table_version=8, rows=60, commits=commits, partitions=1, seed=4),  # type: ignore[arg-type]
    )
    return Storage.for_uri(str(root))


@pytest.mark.parametrize("service", sorted(SCHEDULERS))
def test_nothing_due_takes_no_lock_and_no_instant_time(tmp_path: Path, service: str) -> None:
    # One commit: nothing to compact (no log file), nothing to cluster below the trigger, nothing to clean.
    table_type = "MERGE_ON_READ" if service == "compaction" else "COPY_ON_WRITE"
    storage = _table(tmp_path / "t", table_type, commits=1)
    lock, generator = CountingLock(storage), CountingGenerator(max_clock_skew_ms=200)
    started = dt.datetime.now()
    assert SCHEDULERS[service](storage, lock, generator) is None
    assert (lock.acquired, generator.handed_out) == (0, 0)
    assert dt.datetime.now() - started < dt.timedelta(seconds=5)


@pytest.mark.parametrize("service", sorted(SCHEDULERS))
def test_a_plan_takes_the_lock_and_one_instant_time(tmp_path: Path, service: str) -> None:
    table_type = "MERGE_ON_READ" if service == "compaction" else "COPY_ON_WRITE"
    storage = _table(tmp_path / "t", table_type, commits=4)
    lock, generator = CountingLock(storage), CountingGenerator(max_clock_skew_ms=0)
    instant = SCHEDULERS[service](storage, lock, generator)
    assert instant is not None
    assert (lock.acquired, generator.handed_out) == (1, 1)
