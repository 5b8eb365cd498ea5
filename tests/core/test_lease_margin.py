"""Leases with margins (hoodie.lease_margin): the store's request deadline checked against the leases at
configuration time (clamped or refused), and a write refused when its lease has less left than it may
take."""

from __future__ import annotations

import pytest

from hoodie import lease_margin
from hoodie.errors import LeaseLost
from hoodie.lease_margin import (
    CLOCK_SKEW_MS,
    LeaseMarginConfigError,
    LeaseMarginTooShort,
    check_store_fits_lease,
    leases_of,
    remaining_ms,
    request_deadline_ms,
    require_margin,
)
from hoodie.lock import storage_based
from hoodie.lock.storage_based import PROVIDER_CLASS
from hoodie.storage.retry import RetryPolicy
from hoodie.write import heartbeat

STORAGE_LOCK = {"hoodie.write.lock.provider": PROVIDER_CLASS}


def test_a_requests_deadline_is_its_retry_budget_plus_one_attempt() -> None:
    # Defaults: no retry starts after 3 min, each attempt up to 30 s.
    assert request_deadline_ms({}) == 210_000
    assert request_deadline_ms({"retry_timeout": "10s", "timeout": "5s"}) == 15_000
    # Few retries: bounded by their count and the longest back-off between them.
    assert request_deadline_ms({"max_retries": "0", "timeout": "5s"}) == 5_000
    assert request_deadline_ms({"max_retries": "2", "timeout": "5s", "max_backoff": "1s"}) == 17_000


def test_the_leases_a_table_configures() -> None:
    (instant,) = leases_of({})
    assert (instant.expiry_ms, instant.guaranteed_ms) == (120_000, 60_000)
    instant, lock = leases_of({**STORAGE_LOCK, "hoodie.write.lock.storage.validity.timeout.secs": "600"})
    assert (lock.expiry_ms, lock.guaranteed_ms) == (600_000, 570_000)


def test_a_retry_budget_longer_than_the_lease_is_clamped_with_a_warning() -> None:
    fit = check_store_fits_lease("s3://bucket/table", {"region": "x"}, {})
    # The instant lease guarantees 120 s - 60 s; less the skew and one 30 s attempt: 29 s of retries.
    assert fit.options == {"region": "x", "retry_timeout": "29000ms"}
    assert RetryPolicy.from_options({"retry_timeout": fit.options["retry_timeout"]}).retry_timeout == 29.0
    assert request_deadline_ms(fit.options) + CLOCK_SKEW_MS <= 60_000
    assert fit.warnings == ()  # the default budget is fitted silently
    mine = check_store_fits_lease("s3://bucket/table", {"retry_timeout": "5m"}, {})
    assert mine.options == {"retry_timeout": "29000ms"}
    (warning,) = mine.warnings
    assert "retry_timeout lowered from 5m to 29000ms" in warning
    assert "hoodie.client.heartbeat.interval_in_ms x hoodie.client.heartbeat.tolerable.misses" in warning


def test_a_budget_that_fits_is_left_alone() -> None:
    options = {"retry_timeout": "20s", "timeout": "10s"}
    assert check_store_fits_lease("gs://bucket/table", options, {}).options == options
    assert check_store_fits_lease("gs://bucket/table", options, {}).warnings == ()
    long_lease = {"hoodie.client.heartbeat.interval_in_ms": "300000"}
    assert check_store_fits_lease("s3://b/t", {}, long_lease).warnings == ()


def test_stores_without_request_deadlines_are_not_touched() -> None:
    for uri in ("/data/table", "file:///data/table", "hdfs://nn/table"):
        assert check_store_fits_lease(uri, {"timeout": "1h"}, {}).options == {"timeout": "1h"}


def test_a_single_attempt_longer_than_the_lease_is_refused_naming_the_keys() -> None:
    with pytest.raises(LeaseMarginConfigError, match=r"timeout=90 s.*hoodie.client.heartbeat.interval_in_ms"):
        check_store_fits_lease("s3://b/t", {"timeout": "90s"}, {})
    # The storage lock's validity less one renewal must hold one attempt too.
    short_lock = {
        **STORAGE_LOCK,
        "hoodie.write.lock.storage.validity.timeout.secs": "60",
        "hoodie.client.heartbeat.interval_in_ms": "600000",
    }
    with pytest.raises(LeaseMarginConfigError, match=r"storage lock.*validity.timeout.secs"):
        check_store_fits_lease("s3://b/t", {}, short_lock)
    with pytest.raises(LeaseMarginConfigError, match="timeout='soon'"):
        check_store_fits_lease("s3://b/t", {"timeout": "soon"}, {})


def test_remaining_validity_allows_for_clock_skew() -> None:
    assert remaining_ms(valid_until_ms=10_000, now_ms=4_000) == 6_000 - CLOCK_SKEW_MS
    assert remaining_ms(valid_until_ms=10_000, now_ms=12_000) < 0


def test_a_write_that_can_outlast_its_lease_is_not_started() -> None:
    require_margin(5_001, 5_000, lease="the lease of 001")
    with pytest.raises(LeaseMarginTooShort, match=r"the lease of 001 has 5\.0 s left.*5\.0 s the write may"):
        require_margin(5_000, 5_000, lease="the lease of 001")
    with pytest.raises(LeaseLost):  # callers that handle a lost lease handle this one too
        require_margin(-3_000, 0, lease="the lease of 001")


def test_the_keys_read_here_are_the_lease_modules_own() -> None:
    """This module sits below the heartbeat and the lock (they call it), so it names their keys itself."""
    assert lease_margin._HEARTBEAT_INTERVAL_MS == heartbeat.HEARTBEAT_INTERVAL_MS
    assert lease_margin._HEARTBEAT_MISSES == heartbeat.HEARTBEAT_TOLERABLE_MISSES
    assert lease_margin._LOCK_VALIDITY == storage_based.VALIDITY_SECONDS
    assert lease_margin._LOCK_RENEW == storage_based.RENEW_SECONDS
    assert leases_of({})[0].expiry_ms == heartbeat.HeartbeatConfig().expiry_ms
