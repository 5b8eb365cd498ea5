"""Instant times: format and zone, past the timeline's greatest time, strictly increasing across processes."""

from __future__ import annotations

import datetime as dt
import multiprocessing
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie.config import TIMELINE_TIMEZONE, TableConfig
from hoodie.errors import InvalidInstant
from hoodie.lock import FileSystemLock
from hoodie.new_table import new_table_properties
from hoodie.storage import Storage
from hoodie.timeline.instant import COMMIT, Instant, State
from hoodie.timeline.instant_time import (
    InstantTimeGenerator,
    format_instant_time,
    latest_time_on_timeline,
    parse_instant_time,
)
from hoodie.timeline.timeline import Timeline
from hoodie.timeline.writer import TimelineWriter

FIXED = dt.datetime(2025, 3, 4, 5, 6, 7, 891_234, tzinfo=dt.UTC)


def _new_table(root: Path, version: int, **kwargs: str) -> tuple[Storage, TableConfig]:
    storage = Storage.for_uri(str(root))
    config = TableConfig(new_table_properties("t", "COPY_ON_WRITE", version, ["id"], **kwargs))  # type: ignore[arg-type]
    config.create(storage)
    return storage, TableConfig.load(storage)


def _fixed_clock(moment: dt.datetime) -> Callable[[], dt.datetime]:
    return lambda: moment


def test_format_and_parse() -> None:
    assert format_instant_time(FIXED.replace(tzinfo=None)) == "20250304050607891"
    assert parse_instant_time("20250304050607891") == dt.datetime(2025, 3, 4, 5, 6, 7, 891_000)
    assert parse_instant_time("20250304050607") == dt.datetime(2025, 3, 4, 5, 6, 7)
    with pytest.raises(InvalidInstant):
        parse_instant_time("2025030405060")
    with pytest.raises(InvalidInstant):
        parse_instant_time("20251304050607891")


def test_utc_and_local_zones(tmp_path: Path) -> None:
    storage, config = _new_table(tmp_path / "utc", 8)
    assert config.props[TIMELINE_TIMEZONE] == "UTC"
    gen = InstantTimeGenerator("LOCAL", max_clock_skew_ms=0, clock=_fixed_clock(FIXED))
    assert gen.next(storage, config) == "20250304050607891"  # the table's explicit UTC wins
    storage, config = _new_table(tmp_path / "local", 8, timeline_timezone="LOCAL")
    local = FIXED.astimezone()
    assert gen.next(storage, config) == format_instant_time(local)
    # A table without the key: the generator's zone stands in for Hudi's JVM default.
    bare = TableConfig({k: v for k, v in config.props.items() if k != TIMELINE_TIMEZONE})
    assert (
        InstantTimeGenerator("UTC", 0, clock=_fixed_clock(FIXED)).next(storage, bare) == "20250304050607891"
    )
    with pytest.raises(ValueError, match="UTC or LOCAL"):
        InstantTimeGenerator("PST")


@pytest.mark.parametrize("version", [6, 8])
def test_moves_past_every_time_on_the_timeline(tmp_path: Path, version: int) -> None:
    storage, config = _new_table(tmp_path, version)
    lock = FileSystemLock(storage)
    gen = InstantTimeGenerator(max_clock_skew_ms=0, clock=_fixed_clock(FIXED))
    writer = TimelineWriter(storage, config, lock, time_generator=gen)
    # A writer whose clock ran ahead (or whose zone is east of ours) left a later instant.
    ahead = "20250304060000999"
    writer.complete(writer.start(writer.request(COMMIT, ahead)))
    first = gen.next(storage, config, lock)
    timeline = Timeline.load(storage, config)
    latest = latest_time_on_timeline(timeline)
    assert latest is not None
    assert first > latest >= ahead
    if version == 8:
        completion = timeline.get(ahead)
        assert completion is not None
        assert completion.completion_time == latest
    # Without writing anything, the generator never repeats itself either.
    second = gen.next(storage, config, lock)
    assert second > first
    assert parse_instant_time(second) - parse_instant_time(first) == dt.timedelta(milliseconds=1)


def test_legacy_14_digit_times_compare_as_their_second(tmp_path: Path) -> None:
    storage, config = _new_table(tmp_path, 6)
    (tmp_path / ".hoodie" / "20250304050607.commit").write_bytes(b"")
    gen = InstantTimeGenerator(max_clock_skew_ms=0, clock=_fixed_clock(FIXED.replace(microsecond=0)))
    assert gen.next(storage, config) == "20250304050607001"


def test_holds_the_lock_for_the_clock_skew(tmp_path: Path) -> None:
    storage, config = _new_table(tmp_path, 8)
    lock = FileSystemLock(storage)
    gen = InstantTimeGenerator(max_clock_skew_ms=60)
    started = time.monotonic()
    t = gen.next(storage, config, lock)
    assert time.monotonic() - started >= 0.06
    assert not lock.is_held  # taken and given back
    assert parse_instant_time(t) <= dt.datetime.now(dt.UTC).replace(tzinfo=None)
    with lock:  # inside the caller's critical section the generator does not take it again
        assert gen.completion_time(storage, config, lock) > t


# -- many processes ------------------------------------------------------------------------------------------


def _generate(root: str, rounds: int, write_timeline: bool, skew_ms: int) -> None:
    """Take instant times through the lock; append each to a log under the lock (so the log's order is the
    order of acquisition), and, if asked, request it on the timeline."""
    storage = Storage.for_uri(root)
    config = TableConfig.load(storage)
    lock = FileSystemLock(storage, expire_seconds=30, poll_seconds=0.002)
    gen = InstantTimeGenerator(max_clock_skew_ms=skew_ms)
    writer = TimelineWriter(storage, config, lock)
    with open(Path(root) / "times.log", "a") as log:
        for _ in range(rounds):
            with lock:
                t = gen.next(storage, config, lock)
                if write_timeline:
                    writer.request(COMMIT, t)
                log.write(t + "\n")
                log.flush()


@pytest.mark.parametrize(
    ("version", "write_timeline"),
    [(8, True), (6, True), (8, False)],
    ids=["v8-requested", "v6-requested", "v8-clock-and-skew-only"],
)
def test_processes_get_unique_times_in_lock_order(tmp_path: Path, version: int, write_timeline: bool) -> None:
    storage, config = _new_table(tmp_path, version)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["hoodie.lock", "hoodie.timeline.writer"])
    workers = [ctx.Process(target=_generate, args=(str(tmp_path), 6, write_timeline, 3)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
        assert w.exitcode == 0
    times = (tmp_path / "times.log").read_text().split()
    assert len(times) == 24
    assert times == sorted(times)
    assert len(set(times)) == 24
    if write_timeline:
        timeline = Timeline.load(storage, config)
        assert [i.time for i in timeline] == times
        assert all(i.state is State.REQUESTED and i.action == COMMIT for i in timeline)
        assert [Instant.parse(i.file_name).time for i in timeline] == times
