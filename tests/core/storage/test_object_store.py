"""Storage on object stores, on real servers on 127.0.0.1 (moto's S3 server, Azurite for Azure): every
operation of the interface, conditional creates and replaces, and processes racing to create one timeline file
(exactly one wins)."""

from __future__ import annotations

import multiprocessing
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.errors import FileAlreadyExists, StorageError, VersionConflict
from hoodie.storage import Storage
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
