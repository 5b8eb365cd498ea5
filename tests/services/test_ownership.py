"""Who started an inflight instant, and when hoodied takes one over (hoodied.ownership): the rule itself, the
record a run leaves (and removes when it loses the start to another process), and the one-off commands'
refusal of a foreign instant unless ``--take-over`` is given."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clean.execute import prepare_clean
from hoodie.compaction.execute import prepare_compaction
from hoodie.compaction.service import COMPACTION
from hoodie.errors import CommitConflict
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.timeline.instant import Instant, State
from hoodied.cli import main
from hoodied.errors import ClaimLost
from hoodied.jobs import run_service_job
from hoodied.ownership import (
    NEVER,
    StartRaced,
    decide,
    forget_start,
    read_start,
    record_start,
    started_by,
)
from support.daemon_tables import assert_same_snapshot, mor_table, snapshot


def _inflight(root: Path, instant: Instant) -> Instant:
    table = Table.open(str(root))
    now = table.timeline.get(instant.time)
    assert now is not None
    assert now.state is State.INFLIGHT
    return now


def test_the_takeover_rule(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", 8, seed=31)
    storage = Storage.for_uri(str(t.root))
    target = t.pending[1]
    prepare_compaction(storage, FileSystemLock(storage), target.time)
    instant = _inflight(t.root, target)
    table = Table.open(str(t.root))
    now = time.time()

    foreign = decide(table, "compaction", instant, {}, NEVER, now)
    assert not foreign.allowed
    assert foreign.foreign
    assert foreign.reason.endswith("left alone (takeover_foreign_after: never)")
    # Its inflight file was written just now: an hour's limit is not reached, a second's is.
    assert not decide(table, "compaction", instant, {}, 3600.0, now).allowed
    assert decide(table, "compaction", instant, {}, 1.0, now + 5).allowed

    heartbeat = t.root / ".hoodie" / ".heartbeat" / target.time
    heartbeat.parent.mkdir(exist_ok=True)
    heartbeat.touch()
    fresh = decide(table, "compaction", instant, {}, 1.0, now + 5)
    assert not fresh.allowed  # a live heartbeat beats the age limit
    assert "heartbeat is fresh" in fresh.reason
    short = {
        "hoodie.client.heartbeat.interval_in_ms": "1000",
        "hoodie.client.heartbeat.tolerable.misses": "2",
    }
    expired = decide(table, "compaction", instant, short, NEVER, now + 3)
    assert expired.allowed
    assert "heartbeat expired" in expired.reason

    record_start(storage, "compaction", target.time, "r1", "a1")
    assert started_by(storage, "compaction", target.time) is not None
    ours = decide(table, "compaction", instant, short, NEVER, now + 3)
    assert ours.allowed
    assert not ours.foreign
    assert "hoodied replica r1" in ours.reason
    assert not decide(
        table, "compaction", instant, {}, NEVER, now
    ).allowed  # ours, but its heartbeat is fresh
    forget_start(storage, "compaction", target.time)
    assert started_by(storage, "compaction", target.time) is None


def test_a_start_lost_to_another_process_leaves_no_record(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", 6, seed=32)
    storage = Storage.for_uri(str(t.root))
    lock = FileSystemLock(storage)
    target = t.pending[1]
    seen = Table.open(str(t.root))  # the runner's view: requested
    prepare_compaction(storage, lock, target.time)  # another process starts it meanwhile
    with pytest.raises(CommitConflict):
        run_service_job(None, COMPACTION, storage, lock, target.time, table=seen, replica="r1")
    assert started_by(storage, "compaction", target.time) is None  # it is not ours: no takeover by grace
    _inflight(t.root, target)


def test_a_run_whose_claim_lapsed_leaves_the_new_holders_start_alone(tmp_path: Path) -> None:
    """A run re-checks its claim before it records its start: a replica whose claim lapsed while it
    prepared once wrote its record over the one of the replica that had taken the instant over and started
    it, then, losing the start, removed it; that inflight instant then passed for foreign and was left
    alone for good (found by the chaos campaign)."""
    t = mor_table(tmp_path / "t", 8, seed=34)
    storage = Storage.for_uri(str(t.root))
    lock = FileSystemLock(storage)
    target = t.pending[1]
    before = snapshot(t.root)
    seen = Table.open(str(t.root))  # the late runner's view: requested
    record_start(storage, "compaction", target.time, "r1", "a2")  # r1 holds the claim now and starts it
    prepare_compaction(storage, lock, target.time)

    def lapsed() -> None:
        raise ClaimLost("the claim is r1's now")

    with pytest.raises(ClaimLost):
        run_service_job(None, COMPACTION, storage, lock, target.time, table=seen, replica="r3", fence=lapsed)
    record = started_by(storage, "compaction", target.time)
    assert record is not None
    assert record["replica"] == "r1"
    instant = _inflight(t.root, target)
    assert not decide(Table.open(str(t.root)), "compaction", instant, {}, NEVER).foreign
    assert_same_snapshot(before, snapshot(t.root), "a run whose claim lapsed")


def test_a_start_recorded_over_a_stale_read_fails_and_changes_nothing(tmp_path: Path) -> None:
    """The write itself carries the condition: a run that read the start record (none, or another's at
    version V) when it took its claim, then paused past it while another run recorded its start, gets
    StartRaced and leaves the other's record as it was."""
    storage = Storage.for_uri(str(tmp_path))
    late = read_start(storage, "compaction", "20260101000000000")  # none yet
    assert late.record is None
    assert late.version is None
    record_start(storage, "compaction", "20260101000000000", "r1", "a1", seen=late)  # r1 read it too
    written = storage.read(".hoodie/.aux/hoodied/started/compaction-20260101000000000.json")
    with pytest.raises(StartRaced, match="another run started it"):
        record_start(storage, "compaction", "20260101000000000", "r2", "a2", seen=late)
    assert storage.read(".hoodie/.aux/hoodied/started/compaction-20260101000000000.json") == written

    # Over an existing record: the version read decides, not whose record it is.
    stale = read_start(storage, "compaction", "20260101000000000")
    assert stale.record is not None
    assert stale.record["attempt"] == "a1"
    record_start(
        storage,
        "compaction",
        "20260101000000000",
        "r3",
        "a3",
        seen=read_start(storage, "compaction", "20260101000000000"),
    )
    taken = storage.read(".hoodie/.aux/hoodied/started/compaction-20260101000000000.json")
    with pytest.raises(StartRaced):
        record_start(storage, "compaction", "20260101000000000", "r1", "a4", seen=stale)
    assert storage.read(".hoodie/.aux/hoodied/started/compaction-20260101000000000.json") == taken
    record = started_by(storage, "compaction", "20260101000000000")
    assert record is not None
    assert record["attempt"] == "a3"


def test_forgetting_an_attempt_removes_its_record_only(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", 6, seed=36)
    storage = Storage.for_uri(str(t.root))
    T = t.pending[1].time
    first = record_start(storage, "compaction", T, "r1", "a3")
    second = record_start(storage, "compaction", T, "r2", "a4")  # r2 recorded itself since
    forget_start(storage, "compaction", T, first)
    record = started_by(storage, "compaction", T)
    assert record is not None
    assert record["replica"] == "r2"
    forget_start(storage, "compaction", T, second)
    assert started_by(storage, "compaction", T) is None
    record_start(storage, "compaction", T, "r1", "a5")
    forget_start(storage, "compaction", T)  # the instant completed: whoever's record it is goes
    assert started_by(storage, "compaction", T) is None


def test_a_completed_run_removes_its_record(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", 9, seed=33)
    storage = Storage.for_uri(str(t.root))
    target = t.pending[1]
    run = run_service_job(None, COMPACTION, storage, FileSystemLock(storage), target.time, replica="r1")
    assert run.done.instant.is_completed
    assert started_by(storage, "compaction", target.time) is None


def test_a_one_off_run_refuses_a_foreign_instant_unless_told_to_take_it_over(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    t = mor_table(tmp_path / "t", 8, seed=34)
    before = snapshot(t.root)
    storage = Storage.for_uri(str(t.root))
    clean = t.pending[0]
    prepare_clean(storage, FileSystemLock(storage), clean.time)  # Hudi's cleaner started it, say
    inflight = t.root / ".hoodie" / "timeline" / f"{clean.time}.clean.inflight"
    assert inflight.exists()
    command = ["clean", str(t.root), "--mode", "execute", "--instant", clean.time]
    assert main(command) == 3
    out = capsys.readouterr().out
    assert f"clean {clean.time} of {t.root} is inflight: not started by hoodied" in out
    assert "--take-over runs it" in out
    _inflight(t.root, clean)
    old = time.time() - 3600
    os.utime(inflight, (old, old))  # an hour old changes nothing: the one-off run has no age limit
    assert main(command) == 3
    capsys.readouterr()
    assert main([*command, "--take-over"]) == 0
    assert f"completed clean {clean.time}" in capsys.readouterr().out
    now = Table.open(str(t.root)).timeline.get(clean.time)
    assert now is not None
    assert now.is_completed
    assert_same_snapshot(before, snapshot(t.root), "after the clean")
