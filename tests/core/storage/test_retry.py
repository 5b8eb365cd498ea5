"""The retry policy of object stores: parsed from storage options (a bad one names its key and value), handed
to obstore as its ``retry_config``, and :func:`resend`'s loop (a fake clock: no test sleeps); and what obstore
retries by itself and what not, pinned against the fault-injecting proxy (``support.s3_faults``)."""

from __future__ import annotations

import datetime as dt
import itertools
import random
import uuid
from collections.abc import Callable
from typing import Any

import obstore
import pytest
from obstore.exceptions import AlreadyExistsError, GenericError, PreconditionError
from obstore.store import S3Store

from hoodie.errors import StorageError
from hoodie.storage.retry import RetryPolicy, attempts_note, resend, transient
from support.s3_faults import FaultProxy


def test_defaults_are_object_stores_own() -> None:
    policy = RetryPolicy.from_options({})
    assert policy == RetryPolicy(max_retries=10, retry_timeout=180.0, init_backoff=0.1, max_backoff=15.0)
    assert policy.obstore_config() == {
        "max_retries": 10,
        "retry_timeout": dt.timedelta(minutes=3),
        "backoff": {
            "init_backoff": dt.timedelta(milliseconds=100),
            "max_backoff": dt.timedelta(seconds=15),
            "base": 2.0,
        },
    }
    assert policy.obstore_config(retrying=False)["max_retries"] == 0


def test_options_are_parsed_with_units() -> None:
    policy = RetryPolicy.from_options(
        {
            "max_retries": "3",
            "retry_timeout": "2m",
            "init_backoff": "50ms",
            "max_backoff": "1.5",
            "backoff_base": "3",
        }
    )
    assert policy == RetryPolicy(
        max_retries=3, retry_timeout=120.0, init_backoff=0.05, max_backoff=1.5, backoff_base=3.0
    )


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_retries": "many"}, "max_retries='many'"),
        ({"max_retries": "-1"}, "max_retries=-1"),
        ({"retry_timeout": "soon"}, "retry_timeout='soon'"),
        ({"init_backoff": "1 fortnight"}, "init_backoff='1 fortnight'"),
        ({"backoff_base": "0.5"}, "backoff_base=0.5"),
        ({"init_backoff": "2s", "max_backoff": "1s"}, "init_backoff=2s"),
        ({"retry_timeout": "9" * 400 + "h"}, "retry_timeout='999.*': is infinite or longer"),
        ({"max_backoff": "9" * 20 + "s"}, "max_backoff='999.*': is infinite or longer than the longest wait"),
    ],
)
def test_a_bad_option_names_its_key_and_value(options: dict[str, str], named: str) -> None:
    with pytest.raises(StorageError, match=named):
        RetryPolicy.from_options(options)


def test_backoffs_are_jittered_within_bounds() -> None:
    policy = RetryPolicy(max_retries=20, init_backoff=0.1, max_backoff=2.0)
    waits = list(policy.backoffs(random.Random(7)))
    assert len(waits) == 20
    assert waits[0] == 0.1
    assert all(0.1 <= w <= 2.0 for w in waits)
    assert all(later <= 2 * earlier for earlier, later in itertools.pairwise(waits))
    assert len(set(waits)) == 20


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _failing(times: int, error: Exception) -> tuple[list[int], object]:
    calls: list[int] = []

    def request() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "done"

    return calls, request


def test_resend_sends_a_transient_failure_again_until_it_succeeds() -> None:
    clock = _Clock()
    calls, request = _failing(3, GenericError("reset"))
    assert resend(RetryPolicy(), request, sleep=clock.sleep, clock=lambda: clock.now) == "done"  # type: ignore[arg-type]
    assert len(calls) == 4
    assert len(clock.slept) == 3


def test_resend_stops_after_max_retries_and_raises_the_last_failure() -> None:
    clock = _Clock()
    calls, request = _failing(100, GenericError("503 SlowDown"))
    with pytest.raises(GenericError, match="SlowDown") as failed:
        resend(RetryPolicy(max_retries=4), request, sleep=clock.sleep, clock=lambda: clock.now)  # type: ignore[arg-type]
    assert len(calls) == 5
    assert attempts_note(failed.value) == f"5 attempts in {clock.now:.1f} s"


def test_resend_starts_no_retry_after_the_retry_timeout() -> None:
    clock = _Clock()
    calls, request = _failing(100, GenericError("500"))
    policy = RetryPolicy(max_retries=1000, retry_timeout=5.0, init_backoff=1.0, max_backoff=1.0)
    with pytest.raises(GenericError):
        resend(policy, request, sleep=clock.sleep, clock=lambda: clock.now)  # type: ignore[arg-type]
    assert clock.now <= 5.0
    assert len(calls) == 6


def test_an_answer_is_not_sent_again() -> None:
    """A failed precondition, a missing object: the store answered; sending it again changes nothing."""
    assert transient(GenericError("x"))
    assert not transient(PreconditionError("x"))
    assert not transient(FileNotFoundError("x"))
    calls, request = _failing(1, PreconditionError("412"))
    with pytest.raises(PreconditionError):
        resend(RetryPolicy(), request, sleep=lambda s: None)  # type: ignore[arg-type]
    assert len(calls) == 1


# -- what obstore does by itself (the facts the module doc states), against the fault-injecting proxy --------


def _raw_store(proxy: FaultProxy, retries: int = 10) -> Any:
    """A plain obstore store through the proxy: the library alone, as hoodie.storage does not use it."""
    config = RetryPolicy(max_retries=retries, init_backoff=0.01, max_backoff=0.05).obstore_config()
    return S3Store(
        "lake",
        config={"endpoint": proxy.endpoint},
        client_options={"allow_http": "true"},
        retry_config=config,
    )


def _put_then(
    fault: dict[str, Any], then: Callable[[Any, str, dict[str, Any]], object]
) -> Callable[..., object]:
    def case(store: Any, proxy: FaultProxy) -> object:
        key = f"obstore/{uuid.uuid4().hex}"
        first = obstore.put(store, key, b"x" * 1000)
        proxy.inject(fault)
        return then(store, key, first)

    return case


CUT_BODY = {"kind": "reset", "at": "body", "limit": 1}


def _read(store: Any, key: str, _: object) -> bytes:
    return bytes(obstore.get(store, key).bytes())


#: (fault, operation, what obstore answers): ``None`` when it retries to success, else the error it raises.
OBSTORE_FACTS = {
    "GET 503 twice: retried": (
        _put_then({"kind": "503", "limit": 2}, _read),
        None,
    ),
    "GET cut mid-body: resumed": (
        _put_then(
            {"kind": "reset", "at": "body", "limit": 1}, lambda s, k, _: bytes(obstore.get(s, k).bytes())
        ),
        None,
    ),
    "a 404 cut mid-body: a generic error, not 'not found'": (
        _put_then(
            {"kind": "reset", "at": "body", "limit": 1}, lambda s, k, _: obstore.get(s, k + "-missing")
        ),
        GenericError,
    ),
    "LIST cut mid-body: not retried": (
        _put_then(
            {"kind": "reset", "at": "body", "limit": 1}, lambda s, k, _: obstore.list(s, "obstore/").collect()
        ),
        GenericError,
    ),
    "plain PUT reset: retried": (
        _put_then({"kind": "reset", "methods": ["PUT"], "limit": 1}, lambda s, k, _: obstore.put(s, k, b"y")),
        None,
    ),
    "conditional PUT reset before the store: not retried": (
        _put_then(
            {"kind": "reset", "methods": ["PUT"], "limit": 1},
            lambda s, k, _: obstore.put(s, k + "-new", b"y", mode="create"),
        ),
        GenericError,
    ),
    "conditional PUT landed, answered 500: retried into a 412 on its own object": (
        _put_then(
            {"kind": "500", "at": "response", "methods": ["PUT"], "limit": 1},
            lambda s, k, _: obstore.put(s, k + "-new", b"y", mode="create"),
        ),
        AlreadyExistsError,
    ),
    "If-Match PUT landed, answered 503: retried into a 412 on its own object": (
        _put_then(
            {"kind": "503", "at": "response", "methods": ["PUT"], "limit": 1},
            lambda s, k, first: obstore.put(s, k, b"y", mode={"e_tag": first["e_tag"]}),
        ),
        PreconditionError,
    ),
    "DELETE (a POST) reset: not retried": (
        _put_then({"kind": "reset", "methods": ["POST"], "limit": 1}, lambda s, k, _: obstore.delete(s, k)),
        GenericError,
    ),
}


@pytest.mark.s3
@pytest.mark.parametrize("fact", list(OBSTORE_FACTS))
def test_what_obstore_does_by_itself(s3_faults: FaultProxy, fact: str) -> None:
    """Pins the behaviour of obstore's own retries that :mod:`hoodie.storage.retry` is built on: an upgrade
    that changes one of them fails here, naming it."""
    case, raises = OBSTORE_FACTS[fact]
    store = _raw_store(s3_faults)
    if raises is None:
        case(store, s3_faults)
    else:
        with pytest.raises(raises):
            case(store, s3_faults)
    assert s3_faults.injected() >= 1


@pytest.mark.s3
def test_obstores_reader_fails_as_a_file_does(s3_faults: FaultProxy) -> None:
    """Its reader raises OSError when the store fails (the error pyarrow readers take for a bad file)."""
    store = _raw_store(s3_faults, retries=1)
    key = f"obstore/{uuid.uuid4().hex}"
    obstore.put(store, key, b"x" * 1000)
    reader = obstore.open_reader(store, key)
    with s3_faults.faults(kind="503", methods=["GET"]), pytest.raises(OSError, match="503"):
        reader.read(10)
