"""One poller per table across replicas (issue 34): rendezvous hashing over the replicas' ZooKeeper list."""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import pytest

from hoodied.config import ZooKeeperSettings
from hoodied.coordination import EmbeddedCoordination, ZooKeeperCoordination
from hoodied.metrics import Metrics
from hoodied.table_split import TableSplit, owner_of
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig
from support.zk_server import ZooKeeperServer, expire_session

KEYS = [f"table{i}-{uuid.uuid5(uuid.NAMESPACE_URL, str(i)).hex[:12]}" for i in range(3000)]


def test_each_table_has_one_owner_and_the_shares_are_even() -> None:
    members = ["r1", "r2", "r3"]
    shares = Counter(owner_of(k, members) for k in KEYS)
    assert set(shares) == set(members)
    assert all(900 <= n <= 1100 for n in shares.values()), shares  # a third each, within 10 %
    assert owner_of("t", []) is None
    assert all(owner_of(k, reversed(members)) == owner_of(k, members) for k in KEYS[:100])  # order-free


def test_a_replica_leaving_moves_only_its_own_tables() -> None:
    before = {k: owner_of(k, ["r1", "r2", "r3"]) for k in KEYS}
    after = {k: owner_of(k, ["r1", "r3"]) for k in KEYS}
    moved = [k for k in KEYS if before[k] != after[k]]
    assert moved
    assert all(before[k] == "r2" for k in moved)
    joined = {k: owner_of(k, ["r1", "r2", "r3", "r4"]) for k in KEYS}
    assert all(joined[k] in (before[k], "r4") for k in KEYS)  # a newcomer takes tables, nobody swaps


def test_embedded_owns_every_table() -> None:
    split = TableSplit("solo", EmbeddedCoordination(Metrics()))
    assert not split.refresh()
    assert split.members is None
    assert all(split.owns(k) for k in KEYS[:50])


@pytest.fixture
def coordinations(zookeeper_server: ZooKeeperServer) -> Iterator[Callable[[str], ZooKeeperCoordination]]:
    base = f"/hoodied-split-{uuid.uuid4().hex[:8]}"
    started: list[ZooKeeper] = []
    settings = ZooKeeperSettings(connect=zookeeper_server.connect, base_path=base, session_timeout=4.0)

    def make(name: str) -> ZooKeeperCoordination:
        zk = ZooKeeper(
            ZooKeeperConfig(connect=zookeeper_server.connect, base_path=base, session_timeout=4.0),
            {"replica": name, "host": "h", "pid": 1},
        )
        zk.start()
        started.append(zk)
        return ZooKeeperCoordination(zk, settings, Metrics())

    yield make
    for zk in started:
        zk.stop()


@pytest.mark.zookeeper
def test_replicas_split_the_tables_and_take_over_a_lost_ones_share(
    coordinations: Callable[[str], ZooKeeperCoordination], zookeeper_server: ZooKeeperServer
) -> None:
    a, b, c = (TableSplit(n, coordinations(n)) for n in ("a", "b", "c"))
    for split in (a, b, c):
        split.refresh()
    for split in (a, b, c):
        split.refresh()  # each sees the others now
        assert split.members == ("a", "b", "c")
    owned = {s.replica: {k for k in KEYS if s.owns(k)} for s in (a, b, c)}
    assert sum(len(v) for v in owned.values()) == len(KEYS)  # every table once
    assert set().union(*owned.values()) == set(KEYS)
    # b's session ends (a crash, a long pause): its node goes with it, and a and c take its tables.
    zk_b = b._coordination.zookeeper  # type: ignore[attr-defined]
    client_id = zk_b.client_id
    assert client_id is not None
    started = time.monotonic()
    expire_session(zookeeper_server.connect, client_id)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        a.refresh()
        if "b" not in (a.members or ()):
            break
        time.sleep(0.1)
    assert a.members == ("a", "c"), a.members
    assert time.monotonic() - started < 4.0 + 2  # within the session timeout
    c.refresh()
    now = {s.replica: {k for k in KEYS if s.owns(k)} for s in (a, c)}
    assert now["a"] | now["c"] == set(KEYS)
    assert not now["a"] & now["c"]
    assert owned["a"] <= now["a"]  # nobody's tables moved but b's
    # b, back on a new session, joins again at its next refresh.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and a.members != ("a", "b", "c"):
        b.refresh()
        a.refresh()
        time.sleep(0.1)
    assert a.members == ("a", "b", "c")
