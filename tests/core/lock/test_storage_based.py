"""The storage-based lock (Hudi's StorageBasedLockProvider) on an S3-compatible server: Hudi's file and
JSON, exclusion between processes, a dead holder's lock free after its validity, a lost lock reported; and
through a store that fails (``support.s3_faults``): writes whose answers were lost are ours, and a lock given
up in an outage does not block this process for its validity."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
import uuid

import pytest

from hoodie.errors import InvalidWriteConfig, LockLost, LockTimeout, WriteOutcomeUnknown
from hoodie.lease_margin import CLOCK_SKEW_MS, LeaseMarginTooShort
from hoodie.lock import StorageLock, StorageLockConfig
from hoodie.lock.storage_based import LOCK_FILE, encode_state, orphaned_owners
from hoodie.storage import Storage
from support.lock_processes import FAST, count_in_processes, wait_out_a_killed_holder
from support.s3_faults import FaultProxy
from support.s3_server import S3Server

pytestmark = [pytest.mark.s3, pytest.mark.slow]


@pytest.fixture
def table_uri(s3_server: S3Server) -> str:
    return f"{s3_server.bucket('locks')}/t-{uuid.uuid4().hex[:8]}"


def test_the_lock_file_is_hudis(table_uri: str) -> None:
    storage = Storage.for_uri(table_uri)
    lock = StorageLock(storage, FAST)
    with lock:
        doc = json.loads(storage.read(LOCK_FILE))
        assert list(doc) == ["expired", "validUntil", "owner"]
        assert doc["expired"] is False
        assert doc["owner"] == lock.owner
        assert doc["validUntil"] > time.time() * 1000 + 8000
    doc = json.loads(storage.read(LOCK_FILE))
    assert doc["expired"] is True  # released: marked expired, never deleted
    assert encode_state(False, 5, "o") == b'{"expired":false,"validUntil":5,"owner":"o"}'


def test_a_second_holder_waits_then_takes_it(table_uri: str) -> None:
    storage = Storage.for_uri(table_uri)
    first, second = StorageLock(storage, FAST), StorageLock(storage, FAST)
    first.acquire(5)
    with pytest.raises(LockTimeout, match=f"held by owner {first.owner}"):
        second.acquire(1.5)
    first.release()
    second.acquire(5)
    assert second.is_held
    second.release()


def test_renewal_keeps_it_and_a_takeover_is_reported(table_uri: str) -> None:
    storage = Storage.for_uri(table_uri)
    lock = StorageLock(storage, FAST)
    lock.acquire(5)
    first = json.loads(storage.read(LOCK_FILE))["validUntil"]
    time.sleep(2.5)
    assert json.loads(storage.read(LOCK_FILE))["validUntil"] > first  # renewed
    # Someone else overwrites the lock (as a holder that believed it expired would): ours is lost.
    state = lock.state()
    assert state is not None
    storage.replace_if_version(LOCK_FILE, encode_state(False, 2**62, "intruder"), state.version)
    time.sleep(2.5)
    assert not lock.is_held
    with pytest.raises(LockLost):
        lock.release()


def test_settings_are_checked_as_hudi_checks_them() -> None:
    with pytest.raises(InvalidWriteConfig, match="at least 10 times"):
        StorageLockConfig(validity_seconds=20, renew_seconds=5)
    config = StorageLockConfig.from_config({"hoodie.write.lock.storage.heartbeat.poll.secs": "2"})
    assert config == StorageLockConfig(validity_seconds=300, renew_seconds=2)


def test_processes_exclude_each_other(table_uri: str) -> None:
    assert count_in_processes(table_uri, 3, 6) == b"18"  # no increment lost: never two holders


def test_a_dead_holders_lock_is_free_after_its_validity(table_uri: str) -> None:
    waited = wait_out_a_killed_holder(table_uri)
    assert 8 < waited < 20, waited  # validity 10 s after its last renewal, + 0.5 s of clock drift


# -- under store faults (a fault-injecting proxy in front of the server) -------------------------------------


def test_renewals_and_a_release_whose_answers_were_lost_keep_and_free_the_lock(s3_faults: FaultProxy) -> None:
    """The acquiring write, a renewal and the release each land, then lose their answer (a 500): sent again,
    each would find its condition failed on our own write (a lock "taken over" by itself)."""
    storage = Storage.for_uri(f"s3://lake/l-{uuid.uuid4().hex[:8]}", s3_faults.storage_options())
    lock = StorageLock(storage, FAST)
    landed_then_lost = {"kind": "500", "at": "response", "methods": ["PUT"], "limit": 1}
    with s3_faults.faults(**landed_then_lost):
        lock.acquire(5)
    with s3_faults.faults(**landed_then_lost):
        time.sleep(1.5)  # a renewal
        assert s3_faults.injected("500") == 2
    assert lock.is_held
    with s3_faults.faults(**landed_then_lost):
        lock.release()
    assert s3_faults.injected("500") == 3
    assert json.loads(storage.read(LOCK_FILE))["expired"] is True


def test_a_lock_given_up_in_an_outage_is_taken_back_at_once_by_this_process(s3_faults: FaultProxy) -> None:
    """The store fails mid-acquire, after the lock write landed, and cannot be read back: the lock names an
    owner no one holds. Once the store is back, the next lock of this process takes it at once; another
    process waits for its validity, as for a dead holder's."""
    quick = {"max_retries": "2", "init_backoff": "10ms", "max_backoff": "20ms"}
    uri = f"s3://lake/l-{uuid.uuid4().hex[:8]}"
    storage = Storage.for_uri(uri, s3_faults.storage_options(**quick))
    given_up = StorageLock(storage, FAST)
    s3_faults.inject(kind="reset", at="response", methods=["PUT"], limit=1)
    s3_faults.inject(kind="503", after=1, after_methods=["PUT"])  # everything, once that PUT landed
    with pytest.raises(WriteOutcomeUnknown):
        given_up.acquire(5)
    s3_faults.heal()
    state = StorageLock(Storage.for_uri(uri), FAST).state()
    assert state is not None
    assert state.owner == given_up.owner
    assert not state.expired
    assert given_up.owner in orphaned_owners()
    ctx = multiprocessing.get_context("spawn")
    elsewhere = ctx.Process(target=_acquire_within, args=(uri, 1.5))
    elsewhere.start()
    elsewhere.join(60)
    assert elsewhere.exitcode == 3, "another process waits for the validity"
    started = time.monotonic()
    with StorageLock(storage, FAST) as next_one:
        assert next_one.is_held
    assert time.monotonic() - started < 3


def _acquire_within(uri: str, seconds: float) -> None:
    try:
        StorageLock(Storage.for_uri(uri), FAST).acquire(seconds)
    except LockTimeout:
        os._exit(3)
    os._exit(0)


def test_a_write_that_can_outlast_the_lock_is_refused(table_uri: str) -> None:
    """The holder's remaining validity (its own clock, less the clock-skew bound) against a write's
    deadline (hoodie.lease_margin)."""
    now = [int(time.time() * 1000)]
    lock = StorageLock(
        Storage.for_uri(table_uri),
        StorageLockConfig(validity_seconds=100, renew_seconds=10),
        clock_ms=lambda: now[0],
    )
    assert lock.remaining_ms() < 0  # not held
    lock.acquire(5)
    try:
        assert lock.remaining_ms() == 100_000 - CLOCK_SKEW_MS
        lock.require_margin(60_000)
        now[0] += 45_000  # e.g. a pause: 55 s left, less the skew
        with pytest.raises(LeaseMarginTooShort, match=r"table_lock\.json has 54\.0 s left"):
            lock.require_margin(60_000)
    finally:
        lock.release()
    with pytest.raises(LeaseMarginTooShort):
        lock.require_margin(0)
