"""How requests to an object store are retried: one policy, two executors.

A store that throttles (503 ``SlowDown``), fails (500 ``InternalError``), drops a connection or answers late
must cost a job time, never its result. The policy (:class:`RetryPolicy`) is ``object_store``'s own, given
explicitly so it does not move with an ``obstore`` upgrade and can be tuned per table by storage options:

=================  =======  ==================================================================================
option             default  meaning
=================  =======  ==================================================================================
``max_retries``    10       retries of one request after its first attempt (0: none)
``retry_timeout``  3m       no retry starts later than this after the first attempt
``init_backoff``   100ms    the first wait; each next one is drawn between it and ``backoff_base`` times the
                            one before (decorrelated jitter), at most ``max_backoff``
``max_backoff``    15s
``backoff_base``   2
=================  =======  ==================================================================================

Durations are seconds or ``<number><unit>`` with ``ms``, ``s``, ``m`` or ``h``. The client's ``timeout`` (30 s
per request, the whole response included) and ``connect_timeout`` (5 s) are storage options too.

Who retries what (measured against a fault-injecting proxy, ``tests/support/s3_faults.py``). ``obstore``
retries every request answered with a 5xx status, and a request that breaks before or while being sent when
it is safe or idempotent (GET, HEAD, a plain PUT); a body that breaks mid-way it resumes with a ranged GET.
What it cannot finish, it reports at once, as a generic error:

- a conditional PUT (``If-None-Match: *``, ``If-Match``) whose connection broke or timed out (it may have
  landed), and a DELETE (S3 deletes by POST) whose connection broke;
- an error answer whose body breaks mid-way: a 404 comes back as a generic error, not as "not found";
- a listing whose answer breaks mid-body;

and a conditional PUT that landed and lost its answer to a 5xx it sends again, to find its condition failed
on *our own* object (a 412): a timeline write reported lost to another writer. The resolution of that is in
:mod:`hoodie.storage.object_store` (each conditional write carries a token).

So a request for a whole object or listing (GET, HEAD, LIST, PUT, DELETE) is sent by :func:`resend`, with this
policy, on a store that does not retry at all (each attempt one HTTP request, each outcome seen); the requests
of streams (the ranged reads of Parquet files, the parts of a multipart upload) are left to ``obstore``,
which resumes them where they broke. Each request has one retry layer, never two.
"""

from __future__ import annotations

import datetime as dt
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from obstore.exceptions import GenericError

from hoodie.durations import duration_problem, duration_seconds
from hoodie.errors import StorageError
from hoodie.storage.store_errors import permanent

MAX_RETRIES = "max_retries"
MAX_RETRIES_DEFAULT = 10
RETRY_TIMEOUT = "retry_timeout"
RETRY_TIMEOUT_DEFAULT = 180.0
INIT_BACKOFF = "init_backoff"
INIT_BACKOFF_DEFAULT = 0.1
MAX_BACKOFF = "max_backoff"
MAX_BACKOFF_DEFAULT = 15.0
BACKOFF_BASE = "backoff_base"
BACKOFF_BASE_DEFAULT = 2.0
#: The storage options this module reads (and takes out of what goes to the store).
RETRY_KEYS = frozenset({MAX_RETRIES, RETRY_TIMEOUT, INIT_BACKOFF, MAX_BACKOFF, BACKOFF_BASE})

_T = TypeVar("_T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a failed request is tried again (see the module doc)."""

    max_retries: int = MAX_RETRIES_DEFAULT
    retry_timeout: float = RETRY_TIMEOUT_DEFAULT
    init_backoff: float = INIT_BACKOFF_DEFAULT
    max_backoff: float = MAX_BACKOFF_DEFAULT
    backoff_base: float = BACKOFF_BASE_DEFAULT

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise StorageError(f"{MAX_RETRIES}={self.max_retries}: must be at least 0")
        if self.backoff_base < 1:
            raise StorageError(f"{BACKOFF_BASE}={self.backoff_base}: must be at least 1")
        if self.init_backoff > self.max_backoff:
            raise StorageError(
                f"{INIT_BACKOFF}={self.init_backoff:g}s is more than {MAX_BACKOFF}={self.max_backoff:g}s"
            )

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> RetryPolicy:
        """The policy of storage options (absent keys take their defaults); :class:`StorageError` naming the
        key and the value for one that does not parse."""
        raw = options.get(MAX_RETRIES)
        try:
            max_retries = MAX_RETRIES_DEFAULT if raw is None else int(str(raw).strip())
        except ValueError:
            raise StorageError(f"{MAX_RETRIES}={raw!r}: not an integer") from None
        base_raw = options.get(BACKOFF_BASE)
        try:
            base = BACKOFF_BASE_DEFAULT if base_raw is None else float(str(base_raw).strip())
        except ValueError:
            raise StorageError(f"{BACKOFF_BASE}={base_raw!r}: not a number") from None
        return cls(
            max_retries=max_retries,
            retry_timeout=_seconds(options, RETRY_TIMEOUT, RETRY_TIMEOUT_DEFAULT),
            init_backoff=_seconds(options, INIT_BACKOFF, INIT_BACKOFF_DEFAULT),
            max_backoff=_seconds(options, MAX_BACKOFF, MAX_BACKOFF_DEFAULT),
            backoff_base=base,
        )

    def obstore_config(self, *, retrying: bool = True) -> dict[str, Any]:
        """The policy as ``obstore``'s ``retry_config``; with ``retrying=False`` one that never retries (for
        the store :func:`resend` drives)."""
        return {
            "max_retries": self.max_retries if retrying else 0,
            "retry_timeout": dt.timedelta(seconds=self.retry_timeout),
            "backoff": {
                "init_backoff": dt.timedelta(seconds=self.init_backoff),
                "max_backoff": dt.timedelta(seconds=self.max_backoff),
                "base": self.backoff_base,
            },
        }

    def backoffs(self, rng: random.Random | None = None) -> Iterator[float]:
        """The waits before each retry, as ``object_store``'s ``Backoff`` draws them: ``init_backoff`` first,
        then each drawn between ``init_backoff`` and ``backoff_base`` times the one before (decorrelated
        jitter), never more than ``max_backoff``."""
        draw = rng or random.Random()
        wait = self.init_backoff
        for _ in range(self.max_retries):
            yield wait
            wait = min(self.max_backoff, draw.uniform(self.init_backoff, wait * self.backoff_base))


def transient(error: BaseException) -> bool:
    """Whether a failed request may succeed when sent again: ``obstore``'s generic error, which is what a
    broken connection, a timeout and a 5xx status come back as, unless the store's answer in it is a refusal
    no retry changes (no such bucket, bad credentials, access denied:
    :func:`hoodie.storage.store_errors.permanent`). Not-found, precondition and configuration errors have
    types of their own and are answers, not failures."""
    return isinstance(error, GenericError) and not permanent(str(error))


def resend(
    policy: RetryPolicy,
    request: Callable[[], _T],
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> _T:
    """``request()``, sent again after each :func:`transient` failure while the policy allows (at most
    ``max_retries`` more times, none starting after ``retry_timeout``); the last failure is raised as it came,
    with a note of the attempts made (:func:`attempts_note`). ``request`` must be safe to send twice: a read,
    an idempotent write, or a conditional write that recognises its own earlier landing."""
    started = clock()
    waits = policy.backoffs()
    attempts = 0
    while True:
        attempts += 1
        try:
            return request()
        except Exception as e:
            if not transient(e):
                raise
            wait = next(waits, None)
            if wait is None or clock() - started + wait > policy.retry_timeout:
                e.add_note(f"{attempts} attempt{'s' if attempts > 1 else ''} in {clock() - started:.1f} s")
                raise
            sleep(wait)


def attempts_note(error: BaseException) -> str:
    """The attempts :func:`resend` made before giving ``error`` up (``11 attempts in 4.2 s``), or ``""``."""
    return "; ".join(getattr(error, "__notes__", ()))


def _seconds(options: Mapping[str, str], key: str, default: float) -> float:
    raw = options.get(key)
    if raw is None or str(raw).strip() == "":
        return default
    seconds = duration_seconds(str(raw))
    if seconds is None:
        raise StorageError(f"{key}={raw!r}: not a duration (seconds, or e.g. 500ms, 30s, 5m)")
    if (problem := duration_problem(seconds)) is not None:
        raise StorageError(f"{key}={raw!r}: {problem}")
    return seconds


__all__ = [
    "BACKOFF_BASE",
    "INIT_BACKOFF",
    "MAX_BACKOFF",
    "MAX_RETRIES",
    "RETRY_KEYS",
    "RETRY_TIMEOUT",
    "RetryPolicy",
    "attempts_note",
    "resend",
    "transient",
]
