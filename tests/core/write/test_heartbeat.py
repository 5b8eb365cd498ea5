"""The instant lease kept in Hudi's heartbeat file (hoodie.write.heartbeat), on local disk and on the S3
server: one holder at a time, a fresh lease never taken, an expired one taken by exactly one of two, a
paused holder that wakes finds its lease lost; and the local compare-and-set it stands on."""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie.errors import LeaseHeld, LeaseLost, VersionConflict
from hoodie.lease_margin import CLOCK_SKEW_MS, LeaseMarginTooShort
from hoodie.storage import Storage
from hoodie.write.heartbeat import (
    HeartbeatConfig,
    InstantLease,
    LeaseHolder,
    heartbeat_path,
    last_heartbeat_ms,
    process_start_ticks,
    read_lease,
)
from support.s3_server import S3Server

T = "20261128010203456"
#: Beats never come on their own in these tests (the clock is theirs): an hour's interval.
SLOW = HeartbeatConfig(interval_ms=3_600_000, tolerable_misses=2)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["local", "s3"])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Storage:
    if request.param == "local":
        return Storage.for_uri(str(tmp_path / "t"))
    s3: S3Server = request.getfixturevalue("s3_server")
    return Storage.for_uri(f"{s3.bucket('leases')}/t-{uuid.uuid4().hex[:8]}")


def lease(
    storage: Storage, attempt: str, clock: Callable[[], float], config: HeartbeatConfig = SLOW
) -> InstantLease:
    return InstantLease(storage, T, config, replica=f"r-{attempt}", attempt=attempt, clock=clock)


def test_one_holder_at_a_time_and_the_holder_is_named(storage: Storage) -> None:
    clock = Clock()
    first = lease(storage, "1", clock).take()
    state = read_lease(storage, T)
    assert state.holder is not None
    assert state.holder.attempt == "1"
    assert state.holder.pid == os.getpid()
    with pytest.raises(LeaseHeld, match=r"held by replica r-1 \(.*pid \d+, attempt 1\)"):
        lease(storage, "2", clock).take()
    clock.now += SLOW.expiry_ms / 1000  # exactly at the expiry: still fresh (Hudi's rule is strict)
    with pytest.raises(LeaseHeld):
        lease(storage, "2", clock).take()
    first.beat()
    first.check(reread=True)
    first.release()
    assert read_lease(storage, T).version is None  # released: the file goes, as Hudi's stop() deletes it
    lease(storage, "2", clock).take().release()


def test_an_expired_lease_is_taken_and_its_old_holder_wakes_fenced(storage: Storage) -> None:
    clock = Clock()
    old = lease(storage, "1", clock).take()
    clock.now += SLOW.expiry_ms / 1000 + 1  # the holder was paused past the expiry
    new = lease(storage, "2", clock).take()
    with pytest.raises(LeaseLost):
        old.check()  # its own last beat is too old: lost before it even asks the store
    assert old.lost is not None
    with pytest.raises(LeaseLost):
        old.beat()
    new.beat()
    new.check(reread=True)
    old.release()  # a lost lease's release leaves the new holder's file alone
    state = read_lease(storage, T)
    assert state.holder is not None
    assert state.holder.attempt == "2"
    new.release()


def test_a_holder_whose_file_was_taken_over_finds_out_at_its_next_beat(storage: Storage) -> None:
    clock = Clock()
    old = lease(storage, "1", clock).take()
    clock.now += SLOW.expiry_ms / 1000 + 1
    new = lease(storage, "2", clock).take()
    clock.now = time.time()  # the old holder's view of time: its last beat looks recent to it
    old._last_ok_ms = int(clock.now * 1000)  # (as if its clock had not moved while it was stopped)
    with pytest.raises(LeaseLost, match="replaced or removed"):
        old.beat()  # its compare-and-set names a version that is gone
    with pytest.raises(LeaseLost):
        old.check(reread=True)
    new.release()


def test_of_two_runs_taking_an_expired_lease_exactly_one_wins(storage: Storage) -> None:
    clock = Clock()
    lease(storage, "0", clock).take()  # its holder dies: the lease expires
    clock.now += SLOW.expiry_ms / 1000 + 1
    state = read_lease(storage, T)
    assert state.version is not None
    # Both read the same expired version; the store lets one compare-and-set through.
    assert state.holder is not None
    path = heartbeat_path(T)
    fresh = dataclasses.replace(state.holder, attempt="1", beat_ms=int(clock.now * 1000))
    storage.replace_if_version(path, fresh.encode(), state.version)
    with pytest.raises(VersionConflict):
        storage.replace_if_version(path, fresh.encode(), state.version)
    # And a run that took its decision on that version but writes after the winner is refused.
    with pytest.raises(LeaseHeld):
        lease(storage, "2", clock).take()


def test_a_lost_lease_calls_back_once(storage: Storage) -> None:
    clock = Clock()
    calls: list[str] = []
    held = lease(storage, "1", clock).take()
    held.on_lost(calls.append)
    clock.now += SLOW.expiry_ms / 1000 + 1
    with pytest.raises(LeaseLost):
        held.check()
    with pytest.raises(LeaseLost):
        held.check()
    assert len(calls) == 1
    assert "past the expiry" in calls[0]
    held.release()


def test_the_lease_beats_on_its_own_and_hudis_empty_heartbeat_reads_by_its_time(storage: Storage) -> None:
    fast = HeartbeatConfig(interval_ms=200, tolerable_misses=2)
    held = InstantLease(storage, T, fast, replica="r", attempt="1").take()
    first = read_lease(storage, T).beat_ms
    deadline = time.monotonic() + 10
    while read_lease(storage, T).beat_ms == first:
        assert time.monotonic() < deadline, "no beat within 10 s"
        time.sleep(0.05)
    held.check(reread=True)
    held.release()
    storage.create(heartbeat_path(T), b"", overwrite=True)  # a Hudi writer's heartbeat: empty, its time
    state = read_lease(storage, T)
    assert state.holder is None
    assert abs(state.beat_ms - time.time() * 1000) < 60_000
    assert last_heartbeat_ms(storage, T) == state.beat_ms
    with pytest.raises(LeaseHeld, match=r"a writer \(Hudi heartbeat\)"):  # (S3 keeps whole seconds)
        InstantLease(storage, T, SLOW, replica="r", attempt="2").take()


def _replace(args: tuple[str, str, str, int]) -> bool:
    root, name, version, i = args
    storage = Storage.for_uri(root)
    try:
        storage.replace_if_version(name, f"writer {i}".encode(), version)
    except VersionConflict:
        return False
    return True


def test_local_compare_and_set_lets_exactly_one_of_many_processes_through(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path / "t"))
    storage.create("f", b"start")
    data, version = storage.read_versioned("f")
    assert data == b"start"
    with multiprocessing.get_context("spawn").Pool(8) as pool:
        won = pool.map(_replace, [(str(tmp_path / "t"), "f", version, i) for i in range(16)])
    assert sum(won) == 1
    winner = won.index(True)
    assert storage.read("f") == f"writer {winner}".encode()
    with pytest.raises(VersionConflict):
        storage.replace_if_version("f", b"late", version)
    _, now = storage.read_versioned("f")
    assert storage.replace_if_version("f", b"next", now) != now


def test_a_lease_whose_holder_died_on_this_machine_is_taken_at_once(tmp_path: Path) -> None:
    """A run killed here (SIGKILL, a crash) leaves a fresh heartbeat; a process that shares its process
    table sees the pid gone and need not wait for the expiry. A holder elsewhere (another machine or PID
    namespace) is waited for."""
    storage = Storage.for_uri(str(tmp_path / "t"))
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        alive = dataclasses.replace(
            LeaseHolder.of_this_process("dead", "9", int(time.time() * 1000)),
            pid=child.pid,
            process_start=process_start_ticks(child.pid) or 0,
        )
        storage.create(heartbeat_path(T), alive.encode())
        with pytest.raises(LeaseHeld, match="replica dead"):
            InstantLease(storage, T, SLOW, replica="r", attempt="1").take()
    finally:
        child.kill()
        child.wait()
    assert alive.gone()
    InstantLease(storage, T, SLOW, replica="r", attempt="1").take().release()
    elsewhere = dataclasses.replace(alive, machine="another-boot/pid:[1]", beat_ms=int(time.time() * 1000))
    assert not elsewhere.gone()
    storage.create(heartbeat_path(T), elsewhere.encode(), overwrite=True)
    with pytest.raises(LeaseHeld):
        InstantLease(storage, T, SLOW, replica="r", attempt="2").take()


def test_the_lease_says_what_is_left_of_it_and_refuses_a_write_that_may_outlast_it(storage: Storage) -> None:
    clock = Clock()
    held = lease(storage, "1", clock).take()
    left = held.remaining_ms()
    assert left == SLOW.expiry_ms - CLOCK_SKEW_MS  # a beat just now; another host may see it end 1 s sooner
    held.require_margin(left - 1)
    with pytest.raises(LeaseMarginTooShort, match=r"has \d+\.\d s left"):
        held.require_margin(left)
    clock.now += 10
    assert held.remaining_ms() == left - 10_000
    clock.now += SLOW.expiry_ms / 1000
    with pytest.raises(LeaseLost):  # a margin too short is a lost lease to the caller
        held.require_margin(0)
    held.release()
    assert held.remaining_ms() == -1


def test_a_takeover_records_the_attempts_it_superseded(storage: Storage) -> None:
    clock = Clock()
    lease(storage, "11", clock).take()
    clock.now += SLOW.expiry_ms / 1000 + 1
    second = lease(storage, "12", clock).take()
    assert second.superseded == frozenset({11})
    clock.now += SLOW.expiry_ms / 1000 + 1
    third = lease(storage, "13", clock).take()
    assert third.superseded == frozenset({11, 12})  # the whole chain: a takeover voids every one of them


def test_a_short_margin_is_renewed_by_a_beat_before_a_write_is_refused(storage: Storage) -> None:
    """Right before a beat a healthy holder has less left than right after it: ``ensure_margin`` beats once
    (a compare-and-set) rather than give up the run, and refuses when the lease has passed on."""
    clock = Clock()
    held = lease(storage, "1", clock).take()
    full = held.remaining_ms()
    clock.now += 10
    before = read_lease(storage, T).holder
    held.ensure_margin(full - 5_000)  # 10 s gone: short by 5 s, so it beats
    after = read_lease(storage, T).holder
    assert before is not None
    assert after is not None
    assert after.beat_ms == before.beat_ms + 10_000
    assert held.remaining_ms() == full
    held.ensure_margin(full - 1)  # enough left: no beat
    assert read_lease(storage, T).holder == after
    held.ensure_margin(0)  # nothing to fit (local disk)
    with pytest.raises(LeaseMarginTooShort):  # no beat can give more than the expiry
        held.ensure_margin(full)
    # Another run replaced the file (it took the instant over): the beat's compare-and-set fails.
    other = dataclasses.replace(after, attempt="2", replica="r-2")
    storage.create(heartbeat_path(T), other.encode(), overwrite=True)
    clock.now += 10
    with pytest.raises(LeaseLost, match="replaced or removed"):
        held.ensure_margin(full - 5_000)
    assert read_lease(storage, T).holder == other
    held.release()
    assert read_lease(storage, T).holder == other  # not its file to delete


def test_a_lease_past_its_expiry_is_not_renewed_for_a_margin(storage: Storage) -> None:
    clock = Clock()
    held = lease(storage, "1", clock).take()
    clock.now += SLOW.expiry_ms / 1000 + 1
    with pytest.raises(LeaseLost, match="past the expiry"):
        held.ensure_margin(1)
    state = read_lease(storage, T).holder
    assert state is not None
    assert state.attempt == "1"  # the file stays as it was: the holder did not beat
    held.release()
