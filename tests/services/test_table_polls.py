"""hoodied.table_polls: table polls on workers, a bounded number at once, each waited for up to a deadline."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from hoodie.storage import Storage
from hoodied.config import TableSettings
from hoodied.table_polls import TablePolls
from hoodied.work import WatchedTable


def _table(tmp_path: Path, name: str) -> WatchedTable:
    return WatchedTable(str(tmp_path / name), name, TableSettings(), Storage.for_uri(str(tmp_path / name)))


class Concurrency:
    """Counts the bodies running at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0
        self._lock = threading.Lock()

    def body(self, seconds: float) -> bool:
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        time.sleep(seconds)
        with self._lock:
            self.now -= 1
        return True


def test_no_more_polls_run_at_once_than_the_bound(tmp_path: Path) -> None:
    polls = TablePolls(bound=4, deadline=30.0)
    seen = Concurrency()
    tables = [_table(tmp_path, f"t{i}") for i in range(20)]
    for table in tables:
        assert polls.start(table, lambda: seen.body(0.05))
    done = polls.wait()
    assert sorted(t.name for t, ok in done.ended if ok) == sorted(t.name for t in tables)
    assert done.overran == []
    assert seen.most == 4


def test_a_poll_past_its_deadline_is_left_running_and_the_others_go_on(tmp_path: Path) -> None:
    """One worker only: the slow poll overruns, a stand-in worker polls the rest within the round, and the
    slow table is not handed over again until its poll ended; its outcome counts in the round that sees it
    end."""
    release = threading.Event()
    overruns: list[tuple[str, float]] = []
    polls = TablePolls(bound=1, deadline=0.3, on_overrun=lambda t, s: overruns.append((t.name, s)))
    slow, *quick = [_table(tmp_path, f"t{i}") for i in range(4)]
    polls.start(slow, lambda: release.wait(30.0))
    for table in quick:
        polls.start(table, lambda: True)
    began = time.monotonic()
    first = polls.wait()
    assert time.monotonic() - began < 5.0
    assert first.overran == [slow]
    assert sorted(t.name for t, _ in first.ended) == sorted(t.name for t in quick)
    assert [name for name, _ in overruns] == [slow.name]
    assert overruns[0][1] >= 0.3
    assert polls.running(slow)
    assert not polls.start(slow, lambda: True)  # its poll goes on: not handed over twice
    release.set()
    assert polls.join(5.0)
    second = polls.wait()
    assert second.ended == [(slow, True)]
    assert second.overran == []
    assert polls.start(slow, lambda: True)
    assert polls.wait().ended == [(slow, True)]


def test_the_deadline_runs_from_when_a_worker_takes_the_poll_up(tmp_path: Path) -> None:
    """Twelve polls of 0.2 s on two workers take 1.2 s: none overruns a 0.5 s deadline although most wait
    longer than that for a worker."""
    polls = TablePolls(bound=2, deadline=0.5)
    for i in range(12):
        polls.start(_table(tmp_path, f"t{i}"), lambda: time.sleep(0.2) is None)
    done = polls.wait()
    assert done.overran == []
    assert len(done.ended) == 12


def test_wait_all_ignores_the_deadline(tmp_path: Path) -> None:
    polls = TablePolls(bound=2, deadline=0.1)
    table = _table(tmp_path, "t")
    polls.start(table, lambda: time.sleep(0.4) is None)
    done = polls.wait(deadline=False)
    assert done.ended == [(table, True)]
    assert done.overran == []


def test_a_failing_body_counts_as_failed_and_the_worker_survives(tmp_path: Path) -> None:
    def boom() -> bool:
        raise RuntimeError("boom")

    polls = TablePolls(bound=1, deadline=5.0)
    bad, good = _table(tmp_path, "bad"), _table(tmp_path, "good")
    polls.start(bad, boom)
    polls.start(good, lambda: True)
    assert sorted((t.name, ok) for t, ok in polls.wait().ended) == [("bad", False), ("good", True)]


def test_stopping_drops_the_polls_not_taken_up(tmp_path: Path) -> None:
    release = threading.Event()
    polls = TablePolls(bound=1, deadline=30.0)
    first = _table(tmp_path, "first")
    polls.start(first, lambda: release.wait(30.0))
    queued = [_table(tmp_path, f"q{i}") for i in range(3)]
    for table in queued:
        polls.start(table, lambda: True)
    stopping = threading.Event()
    stopping.set()
    threading.Timer(0.3, release.set).start()
    done = polls.wait(stopping=stopping)
    assert done.ended == [(first, True)]
    assert not any(polls.running(t) for t in queued)


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="poll_concurrency"):
        TablePolls(bound=0, deadline=1.0)
