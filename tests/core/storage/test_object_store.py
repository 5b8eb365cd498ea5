"""Storage on object stores, on real servers on 127.0.0.1 (moto's S3 server, Azurite for Azure): every
operation of the interface, conditional creates and replaces, and processes racing to create one timeline file
(exactly one wins); then the same through a proxy that throttles, fails, resets and delays requests
(``support.s3_faults``): retried where it is safe, and a conditional write that landed is known to be ours."""

from __future__ import annotations

import multiprocessing
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.errors import FileAlreadyExists, StorageError, VersionConflict, WriteOutcomeUnknown
from hoodie.storage import Storage
from hoodie.storage.object_store import UPLOAD_CHUNK_BYTES
from support.azurite import Azurite
from support.s3_faults import FaultProxy, Kind
from support.s3_server import S3Server


@pytest.fixture(params=["s3", "azure"])
def s3(request: pytest.FixtureRequest) -> Storage:
    """A fresh table folder on S3 (moto), or on Azure (Azurite)."""
    if request.param == "s3":
        request.applymarker(pytest.mark.s3)
        root = request.getfixturevalue("s3_server").bucket("lake")
    else:
        request.applymarker(pytest.mark.azure)
        root = request.getfixturevalue("azurite").container("lake")
    return Storage.for_uri(f"{root}/t-{uuid.uuid4().hex[:8]}")


def test_create_is_a_conditional_put(s3: Storage) -> None:
    assert s3.conditional_create
    s3.create("p/f.bin", b"one")
    with pytest.raises(FileAlreadyExists):
        s3.create("p/f.bin", b"two")
    assert s3.read("p/f.bin") == b"one"
    s3.create("p/f.bin", b"two", overwrite=True)
    assert s3.read("p/f.bin") == b"two"


def test_listing_folders_exists_and_deletes(s3: Storage) -> None:
    for path in ("a/x", "a/b/y", "c", ".hoodie/timeline/1.commit"):
        s3.create(path, path.encode())
    assert [(f.name, f.is_dir) for f in s3.list("")] == [(".hoodie", True), ("a", True), ("c", False)]
    assert [f.path for f in s3.list("a", recursive=True)] == ["a/b/y", "a/x"]
    assert s3.list("missing") == []
    assert s3.exists("a")
    assert s3.exists("a/x")
    assert not s3.exists("a/z")
    assert s3.info("a").is_dir
    assert s3.size("c") == 1
    assert s3.delete("c")
    assert not s3.delete("c")
    with pytest.raises(FileNotFoundError):
        s3.delete("c", missing_ok=False)
    with pytest.raises(FileNotFoundError):
        s3.read("c")
    s3.delete_dir("a")
    assert not s3.exists("a")
    child = s3.child(".hoodie")
    assert [f.name for f in child.list("timeline")] == ["1.commit"]
    assert child.full_path("timeline/1.commit") == s3.full_path(".hoodie/timeline/1.commit")
    assert s3.full_path("c").startswith(s3.uri.split("/t-")[0])


def test_data_files_stream_and_read_back_by_range(s3: Storage) -> None:
    table = pa.table({"x": list(range(100_000)), "s": [f"v{i}" for i in range(100_000)]})
    with s3.create_stream("p/f.parquet") as out:
        pq.write_table(table, out, row_group_size=10_000)
    with s3.open_input_file("p/f.parquet") as f:
        back = pq.ParquetFile(f)
        assert back.num_row_groups == 10
        assert back.read_row_group(7).column("x")[0].as_py() == 70_000

    def broken() -> None:
        with s3.create_stream("p/broken.parquet") as out:
            out.write(b"partial")
            raise RuntimeError("the writer failed")

    with pytest.raises(RuntimeError):
        broken()
    assert not s3.exists("p/broken.parquet")


def test_replace_if_version(s3: Storage) -> None:
    version = s3.create("lock.json", b"1")
    assert version
    data, read_version = s3.read_versioned("lock.json")
    assert (data, read_version) == (b"1", version)
    newer = s3.replace_if_version("lock.json", b"2", version)
    with pytest.raises(VersionConflict):
        s3.replace_if_version("lock.json", b"3", version)
    assert s3.read_versioned("lock.json") == (b"2", newer)


def test_requests_are_counted_by_kind(s3: Storage) -> None:
    before = s3.requests.snapshot()
    s3.create("x", b"1")
    s3.read("x")
    s3.list("")
    after = s3.requests.snapshot()
    assert {k: after.get(k, 0) - before.get(k, 0) for k in after} == {"PUT": 1, "GET": 1, "LIST": 1}


@pytest.mark.s3
def test_options_name_the_bad_key(s3_server: S3Server) -> None:
    with pytest.raises(StorageError, match="no_such_option"):
        Storage.for_uri("s3://lake/t", {"no_such_option": "1"})
    # pyarrow's keys, as tables[].storage_options held them before, still work.
    legacy = Storage.for_uri(
        "s3://lake/legacy",
        {
            "access_key": "hoodied-test",
            "secret_key": "hoodied-test-secret",
            "region": "us-east-1",
            "endpoint_override": s3_server.endpoint.removeprefix("http://"),
            "scheme": "http",
        },
    )
    legacy.create("x", b"1", overwrite=True)
    assert legacy.read("x") == b"1"


def _race(uri: str, i: int, start: object, results: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    storage = Storage.for_uri(uri)
    try:
        storage.create(".hoodie/timeline/20260101000000000.commit.requested", str(i).encode())
        results.put(i)  # type: ignore[attr-defined]
    except FileAlreadyExists:
        results.put(-1)  # type: ignore[attr-defined]


def test_processes_racing_to_create_a_timeline_file_have_one_winner(s3: Storage, tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    for _ in range(5):
        uri = f"{s3.uri}/race-{uuid.uuid4().hex[:6]}"
        start = ctx.Barrier(6)
        results = ctx.Queue()
        procs = [ctx.Process(target=_race, args=(uri, i, start, results)) for i in range(6)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        outcome = sorted(results.get(timeout=10) for _ in procs)
        winners = [i for i in outcome if i >= 0]
        assert len(winners) == 1, outcome
        assert (
            Storage.for_uri(uri).read(".hoodie/timeline/20260101000000000.commit.requested")
            == str(winners[0]).encode()
        )


# -- under faults (a fault-injecting proxy in front of moto) ------------------------------------------------

#: Fail fast: a total outage must not cost minutes per request here.
QUICK = {"max_retries": "3", "init_backoff": "10ms", "max_backoff": "50ms"}


def _through(proxy: FaultProxy, **options: str) -> Storage:
    return Storage.for_uri(f"s3://lake/f-{uuid.uuid4().hex[:8]}", proxy.storage_options(**options))


@pytest.mark.s3
@pytest.mark.parametrize("kind", ["503", "500", "reset"])
def test_a_create_that_landed_but_whose_answer_was_lost_is_ours(s3_faults: FaultProxy, kind: Kind) -> None:
    """The store applied the conditional PUT, then its answer was an error or a reset. obstore sends it again
    (a 5xx) and the condition fails on our own object, or gives up (a reset); either way it is our write."""
    s3 = _through(s3_faults)
    with s3_faults.faults(kind=kind, at="response", methods=["PUT"], limit=1):
        version = s3.create(".hoodie/timeline/1.commit", b"ours")
    assert s3_faults.injected(kind) == 1
    assert s3.read_versioned(".hoodie/timeline/1.commit") == (b"ours", version)
    with pytest.raises(FileAlreadyExists):  # and it still is create-if-absent
        s3.create(".hoodie/timeline/1.commit", b"again")


@pytest.mark.s3
@pytest.mark.parametrize("limit", [1, None])
def test_a_create_beside_another_writers_object_still_loses(s3_faults: FaultProxy, limit: int | None) -> None:
    """The store's answer (a 412) hidden behind a 500: sent again, the 412 comes through (``limit=1``); or
    never does, and the object read back is another writer's (every answer lost). A replace at the version
    that is there lands, whether or not its answers are lost."""
    s3 = _through(s3_faults, **QUICK)
    Storage.for_uri(s3.uri).create("f", b"theirs")  # straight to the store
    with s3_faults.faults(kind="500", at="response", methods=["PUT"], limit=limit):
        with pytest.raises(FileAlreadyExists):
            s3.create("f", b"ours")
        with pytest.raises(VersionConflict):
            s3.replace_if_version("f", b"ours", '"not-its-version"')
        version = Storage.for_uri(s3.uri).read_versioned("f")[1]
        new = s3.replace_if_version("f", b"ours", version)
    assert Storage.for_uri(s3.uri).read_versioned("f") == (b"ours", new)


@pytest.mark.s3
@pytest.mark.parametrize("kind", ["503", "reset"])
def test_a_replace_that_landed_but_whose_answer_was_lost_is_ours(s3_faults: FaultProxy, kind: Kind) -> None:
    """The storage lock's renewal: an If-Match PUT that landed is not a lost lock."""
    s3 = _through(s3_faults)
    first = s3.create("lock.json", b"1")
    assert first
    with s3_faults.faults(kind=kind, at="response", methods=["PUT"], limit=1):
        second = s3.replace_if_version("lock.json", b"2", first)
    assert s3.read_versioned("lock.json") == (b"2", second)
    with pytest.raises(VersionConflict):
        s3.replace_if_version("lock.json", b"3", first)


@pytest.mark.azure
def test_a_conditional_write_that_landed_is_ours_on_azure(
    azurite: Azurite, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same on Azure (a 409 or 412 on our own blob), the proxy in front of Azurite."""
    with FaultProxy(azurite.url) as proxy:
        monkeypatch.setenv("AZURITE_BLOB_STORAGE_URL", proxy.endpoint)
        # A container of its own: stores are shared per container, and this one must be reached by the proxy.
        az = Storage.for_uri(f"{azurite.container(f'faults{uuid.uuid4().hex[:8]}')}/t")
        with proxy.faults(kind="500", at="response", methods=["PUT"], limit=1):
            version = az.create("lock.json", b"1")
        assert version
        with proxy.faults(kind="reset", at="response", methods=["PUT"], limit=1):
            newer = az.replace_if_version("lock.json", b"2", version)
        assert az.read_versioned("lock.json") == (b"2", newer)
        assert proxy.injected() == 2


@pytest.mark.s3
def test_a_create_the_store_answered_too_late_is_ours(s3_faults: FaultProxy) -> None:
    """A timeout after the PUT landed: obstore does not send a conditional PUT again; we do, and find it."""
    s3 = _through(s3_faults, timeout="1s")
    with s3_faults.faults(kind="slow", delay=3, at="response", methods=["PUT"], limit=1):
        s3.create("slow", b"ours")
    assert s3.read("slow") == b"ours"


@pytest.mark.s3
def test_requests_obstore_does_not_send_again_are_sent_again(s3_faults: FaultProxy) -> None:
    """A reset conditional PUT (before or after landing), a listing cut mid-body, a 404 cut mid-body, a reset
    DELETE (a POST): obstore reports each at once."""
    s3 = _through(s3_faults)
    for i in range(3):
        s3.create(f"d/{i}", b"x")
    with s3_faults.faults(kind="reset", methods=["PUT"], limit=1):
        s3.create("d/3", b"x")
    with s3_faults.faults(kind="reset", at="body", methods=["GET"], match="list-type", limit=2):
        assert [f.name for f in s3.list("d")] == ["0", "1", "2", "3"]
        assert len(s3.list("", recursive=True)) == 4
    cut_404 = s3_faults.faults(kind="reset", at="body", methods=["GET"], limit=1)
    with cut_404, pytest.raises(FileNotFoundError):
        s3.read("d/missing")  # the 404's body cut: not found all the same
    with s3_faults.faults(kind="reset", methods=["POST"], limit=1):
        assert s3.delete("d/0")
    with s3_faults.faults(kind="reset", at="response", methods=["POST"], limit=1):
        s3.delete_dir("d")
    assert s3.list("") == []
    assert s3_faults.counts()["injected"] == {
        "reset": 6,
        "reset@request": 2,
        "reset@body": 3,  # the first listing twice (sent again once, cut again), the 404
        "reset@response": 1,
    }


@pytest.mark.s3
@pytest.mark.parametrize("kind", ["503", "500", "reset"])
def test_every_operation_survives_a_third_of_its_requests_failing(s3_faults: FaultProxy, kind: Kind) -> None:
    s3 = _through(s3_faults)
    table = pa.table({"x": list(range(50_000))})
    with s3_faults.faults(kind=kind, rate=0.3):
        for i in range(10):
            s3.create(f"t/{i}.commit", str(i).encode())
        with s3.create_stream("p/f.parquet") as out:
            pq.write_table(table, out, row_group_size=5_000)
        with s3.open_input_file("p/f.parquet") as f:
            assert pq.ParquetFile(f).read_row_group(3).column("x")[0].as_py() == 15_000
        assert [s3.read(f"t/{i}.commit") for i in range(10)] == [str(i).encode() for i in range(10)]
        assert len(s3.list("t")) == 10
        assert s3.exists("p/f.parquet")
        assert s3.delete("t/0.commit")
        s3.delete_dir("p")
    assert s3_faults.injected(kind) >= 3
    assert [f.name for f in s3.list("", recursive=True)] == [f"{i}.commit" for i in range(1, 10)]


@pytest.mark.s3
def test_a_stream_the_store_fails_raises_a_storage_error_not_a_file_error(s3_faults: FaultProxy) -> None:
    """obstore's reader and writer fail as files do (``OSError``), which pyarrow passes on and readers take
    for a damaged file (a compaction would report committed data as corrupt); ours raise StorageError."""
    s3 = _through(s3_faults, **QUICK)
    with s3.create_stream("p/f.parquet") as out:
        pq.write_table(pa.table({"x": list(range(100_000))}), out, row_group_size=10_000)
    with s3.open_input_file("p/f.parquet") as f:
        reads_fail = s3_faults.faults(kind="503", methods=["GET"], match=r"f\.parquet")
        with reads_fail, pytest.raises(StorageError, match="503 Service Unavailable"):
            pq.read_table(f)
    with s3_faults.faults(kind="503", methods=["PUT"]), pytest.raises(StorageError, match="503"):
        _upload_two_parts(s3, "p/big.bin")
    assert not s3.exists("p/big.bin")


def _upload_two_parts(s3: Storage, path: str, *, then: Exception | None = None) -> None:
    """Stream two parts' worth, the first part on its way before the second is written (or ``then`` is
    raised)."""
    with s3.create_stream(path) as out:
        out.write(bytes(UPLOAD_CHUNK_BYTES + 1))
        time.sleep(0.5)
        if then is not None:
            raise then
        out.write(bytes(UPLOAD_CHUNK_BYTES))


def _incomplete_uploads(server: S3Server, key_suffix: str) -> list[str]:
    uploads = server.client().list_multipart_uploads(Bucket="lake").get("Uploads", [])  # type: ignore[attr-defined]
    return [u["Key"] for u in uploads if u["Key"].endswith(key_suffix)]


@pytest.mark.s3
def test_an_abandoned_upload_leaves_no_parts_behind(s3_server: S3Server) -> None:
    """A stream whose writer fails after a part went out (pyarrow, the caller): its multipart upload is
    aborted, not left invisible and billed until the bucket's lifecycle rule."""
    s3 = Storage.for_uri(f"s3://lake/u-{uuid.uuid4().hex[:8]}")
    with pytest.raises(RuntimeError):
        _upload_two_parts(s3, "p/big.bin", then=RuntimeError("the writer failed"))
    assert not s3.exists("p/big.bin")
    assert _incomplete_uploads(s3_server, "p/big.bin") == []


@pytest.mark.s3
def test_an_outage_fails_with_the_stores_answer(s3_faults: FaultProxy) -> None:
    s3 = _through(s3_faults, **QUICK)
    s3.create("there", b"x")
    with s3_faults.faults(kind="503"):
        with pytest.raises(StorageError, match="SlowDown") as failed:
            s3.read("there")
        assert s3.full_path("there") in str(failed.value)
        assert "(4 attempts in " in str(failed.value)  # max_retries 3
        assert "Debug source" not in str(failed.value)
        with pytest.raises(StorageError, match="cannot list"):
            s3.list("")


@pytest.mark.s3
def test_a_write_whose_outcome_cannot_be_told_says_so(s3_faults: FaultProxy) -> None:
    """The conditional PUT landed and its answer was lost; then every request fails, so reading it back
    fails too: not a failure (it may have happened) but an unknown outcome. Once the store answers again the
    write turns out to have happened."""
    s3 = _through(s3_faults, **QUICK)
    s3_faults.inject(kind="reset", at="response", methods=["PUT"], limit=1)
    s3_faults.inject(kind="500", after=1, after_methods=["PUT"])  # everything, once that PUT went through
    with pytest.raises(WriteOutcomeUnknown, match="cannot tell whether"):
        s3.create("maybe", b"ours")
    s3_faults.heal()
    assert s3.read("maybe") == b"ours"
    with s3_faults.faults(kind="500", methods=["PUT"]):  # it never reached the store: definitely not written
        with pytest.raises(StorageError, match="not written") as failed:
            s3.create("never", b"ours")
        assert not isinstance(failed.value, WriteOutcomeUnknown)
    assert not s3.exists("never")


def _race_through_faults(uri: str, options: dict[str, str], i: int, start: object, results: object) -> None:
    start.wait()  # type: ignore[attr-defined]
    storage = Storage.for_uri(uri, options)
    try:
        storage.create(".hoodie/timeline/20260101000000000.commit.requested", str(i).encode())
        results.put(i)  # type: ignore[attr-defined]
    except FileAlreadyExists:
        results.put(-1)  # type: ignore[attr-defined]
    except StorageError as e:
        results.put(f"{type(e).__name__}: {e}")  # type: ignore[attr-defined]


@pytest.mark.s3
def test_racing_creators_have_one_winner_through_faults(s3_faults: FaultProxy) -> None:
    """Six processes race to create one timeline file while a third of the PUTs land and lose their answer:
    exactly one wins, its content is the file's, and every other one learns it lost (none is told it lost
    to itself, none is told it won beside the winner)."""
    s3_faults.inject(kind="500", at="response", methods=["PUT"], rate=0.2)
    s3_faults.inject(kind="reset", at="response", methods=["PUT"], rate=0.2)
    ctx = multiprocessing.get_context("spawn")
    for _ in range(3):
        uri = f"s3://lake/race-{uuid.uuid4().hex[:6]}"
        start = ctx.Barrier(6)
        results = ctx.Queue()
        args = [(uri, s3_faults.storage_options(), i, start, results) for i in range(6)]
        procs = [ctx.Process(target=_race_through_faults, args=a) for a in args]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        outcome = [results.get(timeout=10) for _ in procs]
        winners = [i for i in outcome if isinstance(i, int) and i >= 0]
        assert len(winners) == 1, outcome
        assert outcome.count(-1) == 5, outcome
        path = ".hoodie/timeline/20260101000000000.commit.requested"
        assert Storage.for_uri(uri).read(path) == str(winners[0]).encode()
