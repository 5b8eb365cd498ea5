from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hoodie.errors import FileAlreadyExists, PathOutsideTable, StorageError
from hoodie.storage import Storage, check_relative


@pytest.mark.parametrize("bad", ["/etc/passwd", "../x", "a/../../x", "a//b", "a/./b"])
def test_paths_may_not_leave_the_base_path(bad: str) -> None:
    with pytest.raises(PathOutsideTable):
        check_relative(bad)


def test_relative_paths_are_normalised() -> None:
    assert check_relative("a/b/") == "a/b"
    assert check_relative("") == ""


def test_create_is_create_if_absent_and_read_back(tmp_path: Path) -> None:
    s = Storage.for_uri(str(tmp_path))
    s.create("p/f.bin", b"one")
    with pytest.raises(FileAlreadyExists):
        s.create("p/f.bin", b"two")
    assert s.read("p/f.bin") == b"one"
    s.create("p/f.bin", b"two", overwrite=True)
    assert s.read("p/f.bin") == b"two"
    assert [f.name for f in s.list("p")] == ["f.bin"], "no temporary file is left behind"


def test_create_stream_appears_only_when_complete(tmp_path: Path) -> None:
    s = Storage.for_uri(str(tmp_path))
    with s.create_stream("p/big.bin") as out:
        out.write(b"x" * 1000)
        assert not s.exists("p/big.bin")
    assert s.size("p/big.bin") == 1000

    def fail_midway() -> None:
        with s.create_stream("p/broken.bin") as out:
            out.write(b"partial")
            raise RuntimeError("writer failed")

    with pytest.raises(RuntimeError):
        fail_midway()
    assert not s.exists("p/broken.bin")

    def write_again() -> None:
        with s.create_stream("p/big.bin") as out:
            out.write(b"y")

    with pytest.raises(FileAlreadyExists):
        write_again()
    assert s.size("p/big.bin") == 1000
    assert sorted(f.name for f in s.list("p")) == ["big.bin"]


def test_racing_creates_have_exactly_one_winner(tmp_path: Path) -> None:
    s = Storage.for_uri(str(tmp_path))
    wins: list[int] = []
    barrier = threading.Barrier(8)

    def attempt(i: int) -> None:
        barrier.wait()
        try:
            s.create("race", str(i).encode())
            wins.append(i)
        except FileAlreadyExists:
            pass

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert s.read("race") == str(wins[0]).encode()


def test_missing_files_and_bad_uris(tmp_path: Path) -> None:
    s = Storage.for_uri(str(tmp_path))
    with pytest.raises(FileNotFoundError):
        s.read("nope")
    assert not s.delete("nope")
    with pytest.raises(FileNotFoundError):
        s.delete("nope", missing_ok=False)
    with pytest.raises(StorageError):
        Storage.for_uri("nosuchscheme://bucket/t")
