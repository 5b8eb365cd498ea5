"""Leases with margins: a holder starts no write that can outlast its lease.

A lease (the instant lease of :mod:`hoodie.write.heartbeat`, the storage-based table lock of
:mod:`hoodie.lock.storage_based`, a ZooKeeper session) only says who *should* write. A process that is paused
(a GC pause, a stopped VM, a request stuck in a retry loop) can wake after its lease passed and still send the
write it had prepared; compare-and-set on the shared file makes that write fail, and this module keeps such a
write from being *started* too late. Two rules:

1. **At configuration time** (:func:`check_store_fits_lease`): the longest one request to the object store
   can take, retries and back-offs included (:func:`request_deadline_ms`), plus the clock-skew bound, must fit
   in the part of the lease a healthy holder always has left: the expiry minus one renewal interval (right
   before a beat the holder has ``expiry - interval`` left; a write that fits in that never needs the lease
   longer than it has). When it does not, the retry budget (``retry_timeout``) is *clamped* to fit, and only
   a single attempt's ``timeout`` that cannot fit by itself is *refused* (:class:`LeaseMarginConfigError`
   naming the keys). Why clamp rather than refuse: with the defaults (a 30 s ``timeout``, a 3 min
   ``retry_timeout``, a 2 min instant lease) every configuration would be refused, and the clamp loses
   nothing real: the lease's own beats go through the same store, so a store that fails for longer than the
   lease has already lost it, and a write still retrying then is void anyway. ``timeout`` is never clamped:
   it bounds every request, the parts of a large upload included, and a shorter one would fail them.
2. **Before a lease-fenced write** (:func:`require_margin`): the lease's remaining validity
   (:func:`remaining_ms`, the holder's own clock minus the skew bound) must exceed the write's deadline,
   else :class:`LeaseMarginTooShort` (a :class:`~hoodie.errors.LeaseLost`: nothing was written, the run must
   not write, and deletes nothing of the instant).

**Clocks.** A lease's expiry is judged by *another* host's clock against the holder's (the instant lease's
``beat_ms``, the storage lock's ``validUntil``). The rules assume every host's wall clock is within
:data:`CLOCK_SKEW_MS` (1 s; NTP keeps hosts within milliseconds) of every other's, and that a holder's clock
does not jump forward or back by more than that while it holds a lease. A holder counts its lease from the
time it read *before* it sent the write that renewed it, so the request's own latency only shortens what it
believes it has. The storage lock adds Hudi's own 500 ms drift buffer on the reader's side
(:data:`~hoodie.lock.storage_based.CLOCK_DRIFT_MS`); the skew bound here is the holder's side. A pause is not
a clock jump: a holder that wakes after its lease passed finds :func:`remaining_ms` negative and stops; one
paused *between* :func:`require_margin` and its write is what compare-and-set is for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from hoodie.durations import duration_seconds
from hoodie.errors import InvalidWriteConfig, LeaseLost
from hoodie.settings import int_setting
from hoodie.storage.identity import STORE_OF_SCHEME
from hoodie.storage.retry import RETRY_KEYS, RETRY_TIMEOUT, RetryPolicy

#: How far apart two hosts' wall clocks may be (see the module doc): 1 s.
CLOCK_SKEW_MS = 1_000
#: The store client's per-request ``timeout`` (the whole request, connecting included) and its default, as
#: ``object_store`` defines them.
TIMEOUT = "timeout"
TIMEOUT_DEFAULT_SECONDS = 30.0
#: The shortest retry budget a clamp leaves: below this, a store that throttles for a moment fails the write.
MIN_RETRY_TIMEOUT_SECONDS = 1.0

_HEARTBEAT_INTERVAL_MS = "hoodie.client.heartbeat.interval_in_ms"
_HEARTBEAT_INTERVAL_MS_DEFAULT = 60_000
_HEARTBEAT_MISSES = "hoodie.client.heartbeat.tolerable.misses"
_HEARTBEAT_MISSES_DEFAULT = 2
_LOCK_PROVIDER = "hoodie.write.lock.provider"
_STORAGE_LOCK_CLASS = "org.apache.hudi.client.transaction.lock.StorageBasedLockProvider"
_LOCK_VALIDITY = "hoodie.write.lock.storage.validity.timeout.secs"
_LOCK_VALIDITY_DEFAULT = 300
_LOCK_RENEW = "hoodie.write.lock.storage.renew.interval.secs"
_LOCK_RENEW_LEGACY = "hoodie.write.lock.storage.heartbeat.poll.secs"
_LOCK_RENEW_DEFAULT = 30


class LeaseMarginTooShort(LeaseLost):
    """The lease has less validity left than the write about to start may take (:func:`require_margin`).
    Raised before anything is sent: the write definitely did not happen."""


class LeaseMarginConfigError(InvalidWriteConfig):
    """The store's single request can outlast what a lease guarantees (:func:`check_store_fits_lease`). The
    message names the keys on both sides."""


@dataclass(frozen=True)
class Lease:
    """A kind of lease as configured: what a healthy holder always has left is ``expiry_ms - renew_ms``
    (right before its next renewal). ``keys`` name its settings, for messages."""

    name: str
    expiry_ms: int
    renew_ms: int
    keys: str

    @property
    def guaranteed_ms(self) -> int:
        """The validity a holder whose renewals succeed never drops below."""
        return self.expiry_ms - self.renew_ms


@dataclass(frozen=True)
class StoreFit:
    """The outcome of :func:`check_store_fits_lease`: the storage options to use (``retry_timeout`` clamped
    where needed) and a warning per clamp."""

    options: Mapping[str, str]
    warnings: tuple[str, ...] = ()


def remaining_ms(valid_until_ms: int, now_ms: int, *, skew_ms: int = CLOCK_SKEW_MS) -> int:
    """What is left of a lease valid until ``valid_until_ms`` (the holder's clock) at ``now_ms`` (the same
    clock), less the clock-skew bound: another host may see it expire that much sooner. Negative once
    passed."""
    return valid_until_ms - now_ms - skew_ms


def require_margin(remaining: int, deadline_ms: int, *, lease: str) -> None:
    """Refuse to start a write that may take up to ``deadline_ms`` when the lease has only ``remaining`` ms
    left (:func:`remaining_ms`): :class:`LeaseMarginTooShort`, naming ``lease``. A write must end while its
    lease is certainly still valid, since the store judges it only by compare-and-set, and a takeover's
    compare-and-set may come first."""
    if remaining <= deadline_ms:
        raise LeaseMarginTooShort(
            f"{lease} has {max(remaining, 0) / 1000:.1f} s left (clock skew of {CLOCK_SKEW_MS} ms allowed "
            f"for), less than the {deadline_ms / 1000:.1f} s the write may take: not starting it"
        )


def is_object_store(uri: str) -> bool:
    """Whether ``uri`` names an object store (whose requests :func:`request_deadline_ms` bounds)."""
    return urlparse(uri).scheme.lower() in STORE_OF_SCHEME


def request_deadline_ms(options: Mapping[str, str]) -> int:
    """The longest one request to an object store configured by ``options`` can take through
    :func:`~hoodie.storage.retry.resend`: no retry starts after ``retry_timeout``, and each attempt takes at
    most ``timeout``; nor are there more than ``max_retries`` + 1 attempts with at most ``max_backoff``
    between them. The smaller of the two bounds."""
    policy = RetryPolicy.from_options({k: v for k, v in options.items() if k in RETRY_KEYS})
    timeout = _timeout_seconds(options)
    by_budget = policy.retry_timeout + timeout
    by_count = (policy.max_retries + 1) * timeout + policy.max_retries * policy.max_backoff
    return int(min(by_budget, by_count) * 1000)


def leases_of(settings: Mapping[str, str]) -> list[Lease]:
    """The leases a table's ``hoodie.*`` settings configure: the instant lease (always) and the storage-based
    table lock (when it is the lock provider)."""
    interval = int_setting(settings, _HEARTBEAT_INTERVAL_MS, _HEARTBEAT_INTERVAL_MS_DEFAULT, minimum=1)
    misses = int_setting(settings, _HEARTBEAT_MISSES, _HEARTBEAT_MISSES_DEFAULT, minimum=1)
    out = [
        Lease(
            "the instant lease",
            interval * misses,
            interval,
            f"{_HEARTBEAT_INTERVAL_MS} x {_HEARTBEAT_MISSES}",
        )
    ]
    if settings.get(_LOCK_PROVIDER, "").strip() == _STORAGE_LOCK_CLASS:
        validity = int_setting(settings, _LOCK_VALIDITY, _LOCK_VALIDITY_DEFAULT, minimum=1)
        renew = int_setting(
            settings, _LOCK_RENEW, _LOCK_RENEW_DEFAULT, minimum=1, aliases=(_LOCK_RENEW_LEGACY,)
        )
        out.append(
            Lease("the storage lock", validity * 1000, renew * 1000, f"{_LOCK_VALIDITY}, {_LOCK_RENEW}")
        )
    return out


def check_store_fits_lease(uri: str, options: Mapping[str, str], settings: Mapping[str, str]) -> StoreFit:
    """Rule 1 of the module doc for a table at ``uri`` with storage ``options`` and ``hoodie.*``
    ``settings``: the options to open its storage with (``retry_timeout`` clamped so that one request fits in
    every lease's guaranteed part, skew included), with a warning per clamp of a value the options set (the
    default is fitted silently); :class:`LeaseMarginConfigError`
    when one attempt's ``timeout`` cannot fit by itself, or a lease guarantees no time at all. Other stores
    (local disk, HDFS) have no request deadline of their own: their options come back unchanged."""
    if not is_object_store(uri):
        return StoreFit(dict(options))
    out = dict(options)
    warnings: list[str] = []
    timeout = _timeout_seconds(options)
    for lease in leases_of(settings):
        budget_ms = lease.guaranteed_ms - CLOCK_SKEW_MS
        if budget_ms <= int(timeout * 1000):
            raise LeaseMarginConfigError(
                f"one store request may take {TIMEOUT}={timeout:g} s, but {lease.name} guarantees a holder "
                f"only {max(budget_ms, 0) / 1000:g} s ({lease.keys}: expiry {lease.expiry_ms / 1000:g} s "
                f"less one renewal of {lease.renew_ms / 1000:g} s and {CLOCK_SKEW_MS} ms of clock skew): "
                f"lower {TIMEOUT} or lengthen the lease"
            )
        deadline = request_deadline_ms(out)
        if deadline <= budget_ms:
            continue
        clamped = budget_ms / 1000 - timeout
        if clamped < MIN_RETRY_TIMEOUT_SECONDS:
            raise LeaseMarginConfigError(
                f"{lease.name} ({lease.keys}) leaves {budget_ms / 1000:g} s for a store request, which "
                f"{TIMEOUT}={timeout:g} s fills with no time to retry ({RETRY_TIMEOUT} would be "
                f"{clamped:g} s): lower {TIMEOUT} or lengthen the lease"
            )
        was = out.get(RETRY_TIMEOUT)
        out[RETRY_TIMEOUT] = f"{int(clamped * 1000)}ms"
        if was is None:  # the default budget is fitted to the lease as a matter of course: nothing to warn of
            continue
        warnings.append(
            f"{RETRY_TIMEOUT} lowered from {was or 'its default'} to {out[RETRY_TIMEOUT]} (with {TIMEOUT}="
            f"{timeout:g} s a request could take {deadline / 1000:g} s with its retries, more "
            f"than the {budget_ms / 1000:g} s {lease.name} guarantees: {lease.keys})"
        )
    return StoreFit(out, tuple(warnings))


def _timeout_seconds(options: Mapping[str, str]) -> float:
    raw = options.get(TIMEOUT)
    if raw is None or str(raw).strip() == "":
        return TIMEOUT_DEFAULT_SECONDS
    seconds = duration_seconds(str(raw))
    if seconds is None or seconds <= 0:
        raise LeaseMarginConfigError(f"{TIMEOUT}={raw!r}: not a positive duration (seconds, or e.g. 30s)")
    return seconds


__all__ = [
    "CLOCK_SKEW_MS",
    "Lease",
    "LeaseMarginConfigError",
    "LeaseMarginTooShort",
    "StoreFit",
    "check_store_fits_lease",
    "is_object_store",
    "leases_of",
    "remaining_ms",
    "request_deadline_ms",
    "require_margin",
]
