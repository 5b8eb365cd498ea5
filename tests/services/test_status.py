"""Which tables a status answer holds (``hoodied/status.py``): a fleet is paged by name or by urgency, named
tables are picked out, the counts cover every table without building its record, and a bad query is a 400
naming what is wrong (issue 34: ``/status`` and the page of 100,000 tables answer in under a second)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hoodie.storage import Storage
from hoodie.timeline.instant import COMPACTION, Instant, State
from hoodied.config import TableSettings
from hoodied.control import PAUSED, TableControl
from hoodied.health import HealthServer, Heartbeats
from hoodied.metrics import Metrics
from hoodied.status import DEFAULT_LIMIT, StatusQuery, select, summarize, table_status
from hoodied.work import WatchedTable


def _fleet(tmp_path: Path, n: int) -> list[WatchedTable]:
    storage = Storage.for_uri(str(tmp_path))  # never read: records come from what the polls learnt
    return [
        WatchedTable(f"{tmp_path}/t{i:06d}", f"t{i:06d}", TableSettings(), storage, identity=f"t{i:06d}")
        for i in range(n)
    ]


def test_a_fleet_is_paged_by_name_to_its_end(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, 2_500)
    fleet.reverse()  # the supervisor's order is not the answer's
    seen: list[str] = []
    query = StatusQuery()
    while True:
        page, after = select(fleet, query)
        seen += [t.name for t in page]
        if after is None:
            break
        query = StatusQuery.parse(query.to_query(after))
    assert len(seen) == 2_500
    assert seen == sorted(seen)
    assert len(select(fleet, StatusQuery())[0]) == DEFAULT_LIMIT
    assert select(fleet, StatusQuery(offset=2_499, limit=5))[1] is None
    assert select(fleet, StatusQuery(offset=9_999))[0] == []
    named, after = select(fleet, StatusQuery(names=frozenset({"t000007", "t001234", "nope"})))
    assert sorted(t.name for t in named) == ["t000007", "t001234"]
    assert after is None


def test_the_most_urgent_come_first_and_the_counts_cover_every_table(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, 300)
    pending = Instant("20261128000000000", COMPACTION, State.REQUESTED)
    fleet[250].pending = {"compaction": [pending]}
    fleet[250].settings = TableSettings(priority=5.0)
    fleet[17].pending = {"compaction": [pending]}
    fleet[3].control = TableControl(state=PAUSED)
    fleet[4].last_error = "cannot list: timed out"
    page, after = select(fleet, StatusQuery(limit=3, order="urgency"))
    assert [t.name for t in page] == ["t000250", "t000017", "t000000"]
    assert after == 3
    assert summarize(fleet) == {"tables": 300, "states": {"active": 299, "paused": 1}, "with_errors": 1}
    record = table_status(fleet[250], {})
    assert record["urgency"] == {"compaction": 5.0}
    assert record["pending"] == [
        {"action": "compaction", "instant": pending.time, "state": "requested", "claimed_by": None}
    ]


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("limit=0", "limit must be a whole number from 1 to 10000"),
        ("limit=10001", "limit must be a whole number from 1 to 10000"),
        ("offset=-1", "offset must be a whole number of at least 0"),
        ("order=size", "order must be name or urgency"),
        ("tables=a", "unknown parameter(s): tables"),
    ],
)
def test_a_bad_query_is_a_400_naming_what_is_wrong(query: str, error: str) -> None:
    asked: list[StatusQuery] = []

    def status(selected: StatusQuery) -> object:
        asked.append(selected)
        return {"tables": {}}

    with HealthServer(Metrics(), Heartbeats(time.time()), 1.0, status_fn=status) as server:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{server.url}/status?{query}", timeout=10)
        assert refused.value.code == 400
        assert error in json.loads(refused.value.read())["error"]
        with urllib.request.urlopen(f"{server.url}/status?table=a&table=b&order=urgency", timeout=10) as r:
            assert r.status == 200
    assert asked == [StatusQuery(names=frozenset({"a", "b"}), order="urgency")]


def test_the_status_of_a_hundred_thousand_tables_is_built_in_well_under_a_second(tmp_path: Path) -> None:
    """Selecting a page (by name and by urgency) and counting the fleet: the work of ``/status`` and the page
    that grows with the fleet (a record is built for the page's tables only)."""
    fleet = _fleet(tmp_path, 100_000)
    started = time.perf_counter()
    for order in ("name", "urgency"):
        page, _ = select(fleet, StatusQuery(order=order))  # type: ignore[arg-type]
        records = {t.name: table_status(t, {}) for t in page}
        json.dumps({"summary": summarize(fleet), "tables": records})
    took = time.perf_counter() - started
    assert took < 2.0, f"{took:.2f} s for both orders"  # 0.3-0.5 s on 2 busy cores; generous
