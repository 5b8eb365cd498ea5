"""hoodied.zookeeper against a real ZooKeeper server (tests/support/zk_server.py) and Apache Curator's lock.

Two :class:`ZooKeeper` objects are two replicas (two sessions). Sessions are expired from the server side
(:func:`zk_server.expire_session`), the way a long pause or a network partition ends them, or cut short
without ending (:class:`zk_server.TcpProxy`), the way a network blip does. Curator's
``InterProcessMutex`` (Hudi's ``ZookeeperBasedLockProvider``) runs as a small Java program compiled here
(``java/CuratorLockProbe.java``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import Permissions

from hoodie import Table
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.service import COMPACTION
from hoodie.errors import LockError, LockLost, LockTimeout
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodied.errors import ClaimHeld, ClaimLost, ServiceError
from hoodied.zookeeper import ZooKeeper, ZooKeeperConfig
from support.server_process import free_port
from support.stall import PausingStorage
from support.zk_server import TcpProxy, ZooKeeperServer, expire_session, java_classpath

SESSION_TIMEOUT = 4.0
EVENT_THREAD = "hoodied-zookeeper-events"
PROBE_SOURCE = Path(__file__).parent / "java" / "CuratorLockProbe.java"
CURATOR_JARS = ("curator-recipes.jar", "curator-framework.jar", "curator-client.jar")

Replica = Callable[..., ZooKeeper]


def wait_for(condition: Callable[[], bool], timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def base_path() -> str:
    """A fresh base path per test, so tests never see each other's claims."""
    return f"/hoodied-test-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def replica(zookeeper_server: ZooKeeperServer, base_path: str) -> Iterator[Replica]:
    """A factory of started ZooKeeper objects (each its own session), stopped at the end of the test."""
    started: list[ZooKeeper] = []

    def make(name: str = "r1", **config: Any) -> ZooKeeper:
        settings = {
            "connect": zookeeper_server.connect,
            "base_path": base_path,
            "session_timeout": SESSION_TIMEOUT,
            "connection_timeout": 10.0,
        }
        zk = ZooKeeper(
            ZooKeeperConfig(**{**settings, **config}),
            {"host": f"host-{name}", "pid": 4242, "replica": name},
        )
        zk.start()
        started.append(zk)
        return zk

    yield make
    for zk in started:
        zk.stop()


@pytest.fixture
def inspector(zookeeper_server: ZooKeeperServer) -> Iterator[Any]:
    """A plain kazoo client, to look at the nodes as they are."""
    client = KazooClient(hosts=zookeeper_server.connect, timeout=SESSION_TIMEOUT)
    client.start(timeout=10)
    yield client
    client.stop()
    client.close()


# -- configuration and start-up ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "named"),
    [
        ({"connect": ""}, "connect"),
        ({"base_path": "hoodied"}, "'hoodied'"),
        ({"base_path": "/a//b"}, "'/a//b'"),
        ({"base_path": "/a/"}, "'/a/'"),
        ({"session_timeout": 0}, "session_timeout=0"),
        ({"connection_timeout": -1.0}, "connection_timeout=-1.0"),
        ({"auth": (("digest",),)}, "('digest',)"),
        ({"acl": "world"}, "'world'"),
        ({"acl": "creator"}, "needs auth"),
    ],
)
def test_config_rejects_bad_values_naming_them(config: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        ZooKeeperConfig(**{"connect": "127.0.0.1:2181", **config})


def test_config_defaults() -> None:
    config = ZooKeeperConfig("zk1:2181,zk2:2181/chroot")
    assert (config.base_path, config.session_timeout, config.connection_timeout) == ("/hoodied", 30.0, 15.0)
    assert (config.auth, config.acl) == ((), "open")


@pytest.mark.parametrize("bad", ["", "a/b", ".", ".."])
def test_claim_scope_and_name_are_single_segments(bad: str) -> None:
    zk = ZooKeeper(ZooKeeperConfig("127.0.0.1:2181"), {})
    for call in (lambda: zk.claim(bad, "x"), lambda: zk.claim("x", bad), lambda: zk.holder("x", bad)):
        with pytest.raises(ValueError, match="single ZooKeeper path segment"):
            call()
    with pytest.raises(ValueError, match="single ZooKeeper path segment"):
        zk.claims(bad)


@pytest.mark.parametrize("bad", ["locks/t", "/locks//t", "/locks/t/", "/locks/./t", "/locks/../t"])
def test_lock_path_must_be_absolute(bad: str) -> None:
    zk = ZooKeeper(ZooKeeperConfig("127.0.0.1:2181"), {})
    with pytest.raises(ValueError, match="lock path"):
        zk.table_lock(bad)


def test_start_fails_on_a_dead_port_naming_the_connect_string() -> None:
    connect = f"127.0.0.1:{free_port()}"
    zk = ZooKeeper(ZooKeeperConfig(connect, connection_timeout=1.0), {})
    started = time.monotonic()
    with pytest.raises(ServiceError, match=connect):
        zk.start()
    assert time.monotonic() - started < 5
    assert (zk.state, zk.connected, zk.client_id) == ("CLOSED", False, None)
    with pytest.raises(ServiceError, match="CLOSED"):
        zk.claim("t", "c")


@pytest.mark.zookeeper
def test_start_fails_when_the_chroot_is_missing(zookeeper_server: ZooKeeperServer) -> None:
    connect = f"{zookeeper_server.connect}/no-such-chroot-{uuid.uuid4().hex[:6]}"
    with pytest.raises(ServiceError, match="chroot"):
        ZooKeeper(ZooKeeperConfig(connect, connection_timeout=5.0), {}).start()


@pytest.mark.zookeeper
def test_state_and_listeners(zookeeper_server: ZooKeeperServer, base_path: str) -> None:
    zk = ZooKeeper(ZooKeeperConfig(zookeeper_server.connect, base_path=base_path), {"replica": "r1"})
    seen: list[tuple[str, str]] = []
    zk.add_listener(lambda state: seen.append((state, threading.current_thread().name)))
    assert (zk.state, zk.connected, zk.client_id) == ("CLOSED", False, None)
    zk.start()
    assert zk.state == "CONNECTED"
    assert zk.connected
    client_id = zk.client_id
    assert client_id is not None
    assert isinstance(client_id[0], int)
    assert isinstance(client_id[1], bytes)
    zk.stop()
    assert zk.state == "CLOSED"
    assert zk.client_id is None
    assert seen == [("CONNECTED", EVENT_THREAD), ("CLOSED", EVENT_THREAD)]


# -- claims -----------------------------------------------------------------------------------------------


@pytest.mark.zookeeper
def test_claims_are_exclusive_across_sessions(replica: Replica, inspector: Any, base_path: str) -> None:
    a, b = replica("replica-a"), replica("replica-b")
    claim = a.claim("table-1", "compaction-001")
    claim.check()

    with pytest.raises(ClaimHeld, match=r"replica replica-a on host host-replica-a \(pid 4242\)"):
        b.claim("table-1", "compaction-001")
    other = b.claim("table-1", "compaction-002")  # another instant: free

    holder = b.holder("table-1", "compaction-001")
    assert holder is not None
    assert holder["replica"] == "replica-a"
    assert holder["token"] == claim.token
    assert isinstance(holder["claimed_at_ms"], int)
    assert abs(holder["claimed_at_ms"] - time.time() * 1000) < 60_000
    assert b.holder("table-1", "compaction-003") is None
    assert set(a.claims("table-1")) == {"compaction-001", "compaction-002"}
    assert a.claims("table-1")["compaction-002"]["replica"] == "replica-b"
    assert a.claims("no-such-table") == {}

    node = f"{base_path}/claims/table-1/compaction-001"
    _data, stat = inspector.get(node)
    assert stat.ephemeralOwner == a.client_id[0]  # type: ignore[index]

    claim.release()
    claim.release()  # idempotent
    with pytest.raises(ClaimLost):
        claim.check()
    assert inspector.exists(node) is None
    taken = b.claim("table-1", "compaction-001")
    taken.check()
    assert a.holder("table-1", "compaction-001")["replica"] == "replica-b"  # type: ignore[index]
    other.release()
    taken.release()
    assert a.claims("table-1") == {}


@pytest.mark.zookeeper
def test_claim_is_lost_when_the_session_expires(
    replica: Replica, zookeeper_server: ZooKeeperServer, inspector: Any, base_path: str
) -> None:
    a, b = replica("replica-a"), replica("replica-b")
    states: list[str] = []
    a.add_listener(states.append)
    claim = a.claim("table-1", "clean-007")
    fired: list[str] = []
    lost = threading.Event()

    def on_lost() -> None:
        fired.append(threading.current_thread().name)
        lost.set()

    claim.on_lost(on_lost)
    assert not claim.lost
    old_session = a.client_id
    assert old_session is not None

    expire_session(zookeeper_server.connect, old_session)
    assert lost.wait(10), "on_lost did not fire"
    assert fired == [EVENT_THREAD]
    assert claim.lost
    with pytest.raises(ClaimLost):
        claim.check()

    # The node died with the session: another replica claims at once.
    assert inspector.exists(f"{base_path}/claims/table-1/clean-007") is None
    taken = b.claim("table-1", "clean-007")

    # Back on a new session, the old claim stays lost, and releasing it leaves the new holder alone.
    wait_for(lambda: states[-1:] == ["CONNECTED"], what="a new session")
    assert a.client_id is not None
    assert a.client_id[0] != old_session[0]
    assert "LOST" in states
    assert claim.lost
    with pytest.raises(ClaimLost):
        claim.check()
    late: list[bool] = []
    claim.on_lost(lambda: late.append(True))  # already lost: runs at once
    assert late == [True]
    claim.release()
    taken.check()
    assert fired == [EVENT_THREAD]  # once
    assert a.holder("table-1", "clean-007")["replica"] == "replica-b"  # type: ignore[index]


@pytest.fixture
def proxy(zookeeper_server: ZooKeeperServer) -> Iterator[TcpProxy]:
    relay = TcpProxy(zookeeper_server.connect)
    yield relay
    relay.close()


@pytest.mark.zookeeper
def test_a_blip_voids_claims_and_locks_even_when_the_session_survives(
    replica: Replica, proxy: TcpProxy, inspector: Any, base_path: str
) -> None:
    a, b = replica("replica-a", connect=proxy.connect), replica("replica-b")
    states: list[str] = []
    a.add_listener(states.append)
    claim = a.claim("table-1", "compaction-1")
    fired = threading.Event()
    claim.on_lost(fired.set)
    lock_path = f"{base_path}/locks/table-1"
    lock = a.table_lock(lock_path)
    lock.acquire(5)
    session = a.client_id
    assert session is not None

    proxy.cut()
    assert fired.wait(10), "on_lost did not fire on SUSPENDED"
    wait_for(lambda: states[-2:] == ["SUSPENDED", "CONNECTED"], what="a reconnection")
    assert a.client_id == session  # the same session: its nodes are still there...
    node = f"{base_path}/claims/table-1/compaction-1"
    assert inspector.exists(node).ephemeralOwner == session[0]
    # ...but what was held through it is void (another process may have acted meanwhile).
    assert claim.lost
    with pytest.raises(ClaimLost, match="SUSPENDED"):
        claim.check()
    assert not lock.is_held
    with pytest.raises(ClaimHeld):
        b.claim("table-1", "compaction-1")  # until released: the node is still ours

    claim.release()
    with pytest.raises(LockLost):
        lock.release()
    assert inspector.exists(node) is None
    assert inspector.get_children(lock_path) == []  # the contender node went with the release
    b.claim("table-1", "compaction-1").release()
    other = b.table_lock(lock_path)
    other.acquire(0)
    other.release()


@pytest.mark.zookeeper
def test_creator_acl_keeps_other_identities_out(
    replica: Replica, zookeeper_server: ZooKeeperServer, inspector: Any, base_path: str
) -> None:
    owner = replica("owner", auth=(("digest", "hoodied:secret"),), acl="creator")
    stranger = replica("stranger", auth=(("digest", "someone:else"),))
    claim = owner.claim("table-1", "compaction-1")
    node = f"{base_path}/claims/table-1/compaction-1"
    with pytest.raises(NoAuthError):
        inspector.get(node)
    same = KazooClient(hosts=zookeeper_server.connect, auth_data=[("digest", "hoodied:secret")])
    same.start(timeout=10)
    try:
        acls, _stat = same.get_acls(node)
    finally:
        same.stop()
        same.close()
    assert [(acl.id.scheme, acl.id.id.split(":")[0], acl.perms) for acl in acls] == [
        ("digest", "hoodied", Permissions.ALL)
    ]
    with pytest.raises(ServiceError, match="NoAuth"):
        stranger.holder("table-1", "compaction-1")
    assert owner.holder("table-1", "compaction-1") is not None
    claim.release()


# -- the table lock ---------------------------------------------------------------------------------------


@pytest.mark.zookeeper
def test_lock_excludes_other_sessions(replica: Replica, base_path: str) -> None:
    path = f"{base_path}/locks/table-1"
    inside = 0
    overlaps: list[str] = []
    entries: list[str] = []
    guard = threading.Lock()
    failures: list[BaseException] = []

    def work(zk: ZooKeeper, name: str) -> None:
        nonlocal inside
        try:
            for _ in range(4):
                lock = zk.table_lock(path, acquire_timeout=20)
                assert isinstance(lock, LockProvider)
                with lock:
                    assert lock.is_held
                    with guard:
                        inside += 1
                        if inside != 1:
                            overlaps.append(name)
                    entries.append(name)
                    time.sleep(0.02)
                    with guard:
                        inside -= 1
                assert not lock.is_held
        except BaseException as e:  # reported by the test thread
            failures.append(e)

    threads = [threading.Thread(target=work, args=(replica(n), n)) for n in ("a", "b", "c")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert overlaps == []
    assert sorted(entries) == ["a"] * 4 + ["b"] * 4 + ["c"] * 4


@pytest.mark.zookeeper
def test_lock_timeout_names_the_holder_and_leaves_no_contender(
    replica: Replica, inspector: Any, base_path: str
) -> None:
    a, b = replica("replica-a"), replica("replica-b")
    path = f"{base_path}/locks/table-1"
    held = a.table_lock(path)
    held.acquire(5)
    assert held.is_held
    assert held.node is not None
    assert "-lock-" in held.node
    waiting = b.table_lock(path)
    started = time.monotonic()
    with pytest.raises(LockTimeout, match="replica-a"):
        waiting.acquire(0.5)
    assert 0.4 < time.monotonic() - started < 5
    with pytest.raises(LockTimeout):
        waiting.acquire(0)
    assert not waiting.is_held
    assert inspector.get_children(path) == [held.node.rsplit("/", 1)[1]]

    with pytest.raises(LockError, match="not re-entrant"):
        held.acquire(1)
    held.release()
    with pytest.raises(LockError, match="not held"):
        held.release()
    waiting.acquire(0)  # free now: a try-lock gets it
    assert waiting.is_held
    waiting.release()
    assert inspector.get_children(path) == []


@pytest.mark.zookeeper
def test_lock_is_lost_with_the_session(
    replica: Replica, zookeeper_server: ZooKeeperServer, inspector: Any, base_path: str
) -> None:
    a, b = replica("replica-a"), replica("replica-b")
    path = f"{base_path}/locks/table-1"
    lock = a.table_lock(path)
    lock.acquire(5)
    states: list[str] = []
    a.add_listener(states.append)
    client_id = a.client_id
    assert client_id is not None
    expire_session(zookeeper_server.connect, client_id)
    wait_for(lambda: "LOST" in states, what="the session to be LOST")
    assert not lock.is_held
    other = b.table_lock(path)
    other.acquire(5)  # our node died with the session
    with pytest.raises(LockLost):
        lock.release()
    assert other.is_held
    other.release()
    wait_for(lambda: a.connected, what="a new session")
    again = a.table_lock(path)
    again.acquire(5)
    assert again.is_held
    again.release()
    assert inspector.get_children(path) == []


@pytest.mark.zookeeper
def test_a_lock_asked_again_after_its_session_was_lost_says_lost(
    replica: Replica, zookeeper_server: ZooKeeperServer, base_path: str
) -> None:
    """A block under the lock that asks for it again (``held``) after the session expired learns the lock
    was lost (before, "already held by this object"), and once released it is taken afresh."""
    a = replica("replica-a")
    lock = a.table_lock(f"{base_path}/locks/table-1")
    lock.acquire(5)
    client_id = a.client_id
    assert client_id is not None
    expire_session(zookeeper_server.connect, client_id)
    wait_for(lambda: not lock.is_held, what="the lock to be lost")
    with pytest.raises(LockLost, match="lost while held"):
        lock.acquire(5)
    with pytest.raises(LockLost):
        lock.release()
    wait_for(lambda: a.connected, what="a new session")
    lock.acquire(5)
    assert lock.is_held
    lock.release()


@pytest.mark.zookeeper
def test_a_plan_landed_under_a_lost_lock_is_checked_again_under_the_lock(
    replica: Replica, zookeeper_server: ZooKeeperServer, base_path: str, tmp_path: Path
) -> None:
    """Found by the chaos campaign (seed 407): a scheduler paused at its requested PUT until its ZooKeeper
    session expired; meanwhile another scheduled and started a compaction of the same file groups. Its plan
    landed on waking, and the check after the landing failed with the lock lost, so the overlap stayed until
    a run found it. Now the plan is checked again under the lock taken afresh, and withdrawn."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=300, commits=3, partitions=2, seed=3))
    storage = Storage.for_uri(str(root))
    a, b = replica("replica-a"), replica("replica-b")
    path = f"{base_path}/locks/t"
    paused_lock = a.table_lock(path, acquire_timeout=30)
    generator = InstantTimeGenerator()
    started: list[str] = []

    def expire_then_another_schedules_and_starts() -> None:
        client_id = a.client_id
        assert client_id is not None
        expire_session(zookeeper_server.connect, client_id)
        wait_for(lambda: not paused_lock.is_held, what="the paused scheduler's lock to be lost")
        other_lock = b.table_lock(path, acquire_timeout=30)
        newer = schedule_compaction(storage, other_lock, time_generator=generator).instant
        assert newer is not None
        COMPACTION.prepare(storage, other_lock, newer.time, {})  # inflight; its tasks still to run
        started.append(newer.time)

    paused = PausingStorage.for_uri(str(root))
    assert isinstance(paused, PausingStorage)
    paused.meanwhile = expire_then_another_schedules_and_starts
    late = schedule_compaction(paused, paused_lock, time_generator=generator)
    assert late.instant is None, "the late plan stayed beside the started one it overlaps"
    assert "withdrawn" in late.reason
    assert started[0] in late.reason
    table = Table.open(str(root))
    assert [i.time for i in table.timeline.pending_compactions()] == started
    assert not paused_lock.is_held


# -- interoperability with Curator (Hudi's writers) -------------------------------------------------------


class CuratorProbe:
    """Runs CuratorLockProbe (Curator's InterProcessMutex) against the test server."""

    def __init__(self, classpath: str, connect: str) -> None:
        self.classpath = classpath
        self.connect = connect

    def start(self, mode: str, path: str, seconds: float) -> subprocess.Popen[str]:
        command = ["java", "-cp", self.classpath, "CuratorLockProbe", mode, self.connect, path, str(seconds)]
        return subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )


def read_event(process: subprocess.Popen[str], expected: str) -> int:
    """The epoch ms of the probe's next line, which must start with ``expected``."""
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    word, _, ms = line.partition(" ")
    assert word == expected, f"the Curator probe said {line!r}, not {expected}"
    return int(ms)


@pytest.fixture(scope="module")
def curator(zookeeper_server: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory) -> CuratorProbe:
    java_dir = Path(os.environ.get("HOODIE_JAVA_DIR", "/usr/share/java"))
    if shutil.which("javac") is None:
        pytest.skip("no javac to build the Curator probe (.ci/run installs openjdk-17-jdk-headless)")
    missing = [jar for jar in CURATOR_JARS if not (java_dir / jar).exists()]
    if missing:
        pytest.skip(
            f"Curator jars {', '.join(missing)} not in {java_dir} (.ci/run installs libcurator-recipes-java)"
        )
    jars = java_classpath((*CURATOR_JARS, "zookeeper.jar", "zookeeper-jute.jar", "slf4j-nop.jar"), java_dir)
    out = tmp_path_factory.mktemp("curator_probe")
    classpath = os.pathsep.join([str(out), *(str(jar) for jar in jars)])
    subprocess.run(
        ["javac", "-nowarn", "-d", str(out), "-cp", classpath, str(PROBE_SOURCE)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return CuratorProbe(classpath, zookeeper_server.connect)


@pytest.mark.zookeeper
def test_curator_holder_excludes_us(replica: Replica, curator: CuratorProbe, base_path: str) -> None:
    path = f"{base_path}/locks/hudi_table"
    java = curator.start("hold", path, 30)
    try:
        read_event(java, "ACQUIRED")
        lock = replica("a").table_lock(path)
        with pytest.raises(LockTimeout):
            lock.acquire(0.5)

        acquired_ms: list[int] = []

        def take() -> None:
            lock.acquire(20)
            acquired_ms.append(int(time.time() * 1000))

        waiter = threading.Thread(target=take)
        waiter.start()
        time.sleep(0.3)
        assert not acquired_ms  # still waiting behind Curator
        assert java.stdin is not None
        # The probe stamps RELEASED after its delete's reply, which can reach it after ZooKeeper's
        # watch event reached us; the release cannot precede our asking for it, so that is the bound.
        asked_ms = int(time.time() * 1000)
        java.stdin.write("release\n")
        java.stdin.flush()
        read_event(java, "RELEASED")
        waiter.join(20)
        assert acquired_ms
        assert acquired_ms[0] >= asked_ms
        assert lock.is_held
        lock.release()
    finally:
        java.kill()
        java.communicate(timeout=10)


@pytest.mark.zookeeper
def test_we_exclude_a_curator_writer(
    replica: Replica, curator: CuratorProbe, inspector: Any, base_path: str
) -> None:
    path = f"{base_path}/locks/hudi_table"
    lock = replica("a").table_lock(path)
    lock.acquire(5)
    tried = curator.start("try", path, 1)
    assert read_event(tried, "TIMEOUT")
    tried.communicate(timeout=10)

    java = curator.start("try", path, 20)
    try:
        wait_for(lambda: len(inspector.get_children(path)) == 2, what="Curator to queue behind us")
        assert any(child.startswith("_c_") for child in inspector.get_children(path))
        released_ms = int(time.time() * 1000)
        lock.release()
        assert read_event(java, "ACQUIRED") >= released_ms
        read_event(java, "RELEASED")
    finally:
        java.kill()
        java.communicate(timeout=10)


@pytest.mark.zookeeper
def test_a_stale_document_update_fails_and_changes_nothing(replica: Replica) -> None:
    """Control documents are replaced by compare-and-set on the node's version (issue 33): a replica that read
    version V, paused, and woke after another replica's update, writes nothing."""
    first, second = replica("r1"), replica("r2")
    assert first.write_document("control", "t", b"v0", None)
    assert not second.write_document("control", "t", b"late create", None)  # create-if-absent
    found = first.read_document("control", "t")
    assert found is not None
    stale_version = found[1]
    assert second.write_document("control", "t", b"second's", stale_version)
    assert not first.write_document("control", "t", b"first's, stale", stale_version)
    assert second.read_document("control", "t") == (b"second's", stale_version + 1)
