"""An indexing taken over from a stalled run completes once (issue 33): the first executor's store holds
every request of its process from a chosen write on (:mod:`support.stall`), past its heartbeat and table
lock; a second executor takes the instant over; then the first wakes. Judged: one completed file of the
instant on the data timeline and in the metadata table, the built partitions listed as built and none left
inflight, the metadata table agreeing with the files, and hudi-rs reading the same rows.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from hoodie.config import METADATA_PARTITIONS_INFLIGHT
from hoodie.errors import LostRace
from hoodie.indexing.execute import IndexingFailed, drop_index, pending_indexing, schedule_indexing
from hoodie.indexing.service import INDEXING
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import Table
from hoodied.jobs import JobRun
from support.metadata_checks import check_metadata_table, generate_small_table
from support.service_checks import judge, read_all
from support.stall import stalling_storage
from support.stalled_takeover import (
    LOCK_EXPIRY,
    Outcome,
    assert_the_right_run_won,
    completed_files,
    run_instant,
    stalled_then_taken_over,
    trigger,
)

WANTED = ["record_index", "column_stats"]


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("stall_at", ["completed-file", "metadata-completed", "decision"])
def test_a_stalled_indexing_and_a_takeover_complete_it_once(
    tmp_path: Path, version: int, stall_at: str
) -> None:
    """``completed-file``: the first run decided, wrote the metadata table and its PUT of the completed file
    is held; the takeover's void finds the decision and completes it with the records it built itself.
    ``metadata-completed``: the PUT of the first run's deltacommit completed file is held; the takeover
    writes the deltacommit at the completion time the decision recorded, so the held PUT collides.
    ``decision``: the takeover voids the first attempt and completes; the woken run's decision fails.
    (Before indexing decided its completion, the first case left two completed ``indexing`` files on v8+.)"""
    root = tmp_path / "t"
    generate_small_table(root, version, 2)
    storage = Storage.for_uri(str(root))
    scheduled = schedule_indexing(storage, FileSystemLock(storage), WANTED)
    assert scheduled.instant is not None, scheduled.reason
    T = scheduled.instant.time
    before = read_all(root, [])

    first, second = stalled_then_taken_over(root, T, trigger(stall_at, T, "indexing"), INDEXING)

    assert_the_right_run_won("decision" if stall_at == "decision" else "completed-file", first, second)
    assert len(completed_files(root, T, ".indexing")) == 1, completed_files(root, T, ".indexing")
    mdt = root / ".hoodie" / "metadata"
    assert len(completed_files(mdt, T, ".deltacommit")) == 1, completed_files(mdt, T, ".deltacommit")
    config = Table.open(str(root)).config
    assert set(WANTED) <= set(config.metadata_partitions)
    assert config.props.get(METADATA_PARTITIONS_INFLIGHT, "") == ""
    check_metadata_table(root, f"an indexing taken over from a run stalled at its {stall_at}")
    judge(root, before, "indexing", f"a takeover of an indexing stalled at its {stall_at}")


@pytest.mark.parametrize("stall_at", ["decision", "completed-file"])
def test_an_index_dropped_while_its_indexing_run_is_stalled(tmp_path: Path, stall_at: str) -> None:
    """A drop while an indexing run of the partitions is stalled past its lock and lease. ``decision``: the
    run had not decided; the drop voids its attempt and deletes the pending indexing, and the woken run's
    decision fails, writing nothing. ``completed-file``: the run decided (and wrote the metadata table); the
    drop is refused, changing nothing, the woken run completes, and the drop then succeeds. (Before, the
    drop deleted the pending indexing and the held PUT left a completed ``indexing`` without its requested
    file.)"""
    root = tmp_path / "t"
    generate_small_table(root, 8, 2)
    storage = Storage.for_uri(str(root))
    scheduled = schedule_indexing(storage, FileSystemLock(storage), WANTED)
    assert scheduled.instant is not None, scheduled.reason
    T = scheduled.instant.time
    before = read_all(root, [])
    stalled, backend = stalling_storage(str(root), trigger(stall_at, T, "indexing"))
    first: dict[str, Outcome] = {}

    def run_first() -> None:
        try:
            first["run"] = run_instant(stalled, T, "a", INDEXING, {})
        except BaseException as e:  # the test judges how the woken run ended
            first["run"] = e

    thread = threading.Thread(target=run_first, name="stalled-indexing", daemon=True)
    thread.start()
    assert backend.stalled(120), f"the indexing never reached its {stall_at}: {first}"
    lock = FileSystemLock(storage, expire_seconds=LOCK_EXPIRY, acquire_timeout=120)
    if stall_at == "decision":
        assert drop_index(storage, lock, WANTED) == WANTED
    else:
        with pytest.raises(IndexingFailed, match=f"indexing {T} .* decided to complete"):
            drop_index(storage, lock, WANTED)
        assert set(WANTED) <= set(Table.open(str(root)).config.props[METADATA_PARTITIONS_INFLIGHT].split(","))
    backend.release()
    thread.join(120)
    assert not thread.is_alive(), "the woken indexing run did not finish"

    mdt = root / ".hoodie" / "metadata"
    if stall_at == "decision":
        assert isinstance(first["run"], LostRace), first["run"]
        assert "voided" in str(first["run"]), first["run"]
        assert completed_files(root, T, ".indexing") == []
        assert completed_files(mdt, T, ".deltacommit") == []
        assert not pending_indexing(Table.open(str(root)))
    else:
        assert isinstance(first["run"], JobRun), first["run"]
        assert len(completed_files(root, T, ".indexing")) == 1, completed_files(root, T, ".indexing")
        assert set(WANTED) <= set(Table.open(str(root)).config.metadata_partitions)
        assert drop_index(storage, lock, WANTED) == WANTED
    timeline = sorted(p.name for p in (root / ".hoodie" / "timeline").iterdir() if p.name.startswith(T))
    if completed_files(root, T, ".indexing"):  # never a completed file without its requested one
        assert f"{T}.indexing.requested" in timeline, timeline
    config = Table.open(str(root)).config
    assert not set(WANTED) & set(config.metadata_partitions)
    assert config.props.get(METADATA_PARTITIONS_INFLIGHT, "") == ""
    check_metadata_table(root, f"an index dropped while its indexing run stalled at its {stall_at}")
    judge(root, before, "indexing", f"a drop during an indexing stalled at its {stall_at}")
