"""Compaction as a table service (``hoodie/compaction/service.py``): the steps every service shares, and how
often a run reads the table: once by the runner after its claim (handed to ``prepare``), once under the lock
at the commit, the timeline once per task (a late task must see that its instant is no longer inflight)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hoodie.compaction.service import COMPACTION
from hoodie.config import TableConfig
from hoodie.errors import NothingToDo
from hoodie.lock import FileSystemLock
from hoodie.registry import SERVICE_NAMES, service_named
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import run_in_process
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodie.timeline.timeline import Timeline


@pytest.fixture
def mor(tmp_path: Path) -> tuple[Storage, FileSystemLock]:
    root = tmp_path / "t"
    spec = GenerateSpec(
        table_version=8, table_type="MERGE_ON_READ", rows=400, commits=3, partitions=2, seed=3
    )
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    return storage, FileSystemLock(storage)


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts every read of a table's config (``hoodie.properties``) and listing of its timeline."""
    counts: Counter[str] = Counter()
    for cls, name in ((TableConfig, "load"), (Timeline, "load")):
        original = getattr(cls, name).__func__

        def counted(
            klass: Any, *args: Any, _original: Any = original, _name: str = cls.__name__, **kw: Any
        ) -> Any:
            counts[_name] += 1
            return _original(klass, *args, **kw)

        monkeypatch.setattr(cls, name, classmethod(counted))
    return counts


def test_a_run_reads_the_table_once_before_and_once_under_the_lock(
    mor: tuple[Storage, FileSystemLock], monkeypatch: pytest.MonkeyPatch
) -> None:
    storage, lock = mor
    view = Table.load(storage)
    scheduled = COMPACTION.schedule(view, lock, {"hoodie.compact.inline.max.delta.commits": "1"})
    assert scheduled.instant is not None, scheduled.reason
    counts = _count_reads(monkeypatch)
    claimed = Table.load(storage)  # the runner's read after its claim
    job = COMPACTION.prepare(storage, lock, scheduled.instant.time, {}, claimed)
    done = run_in_process(job)
    tasks = len(job.tasks)
    assert tasks >= 2
    # Config: the runner's read, the commit's under the lock, the metadata-table upkeep's under the lock.
    # Timeline: the runner's, the overlap check's before the inflight (under the lock: one pending plan per
    # file group), one per task, the commit's, and the completion time's (under the lock).
    assert counts == {"TableConfig": 3, "Timeline": 4 + tasks}, counts
    assert done.instant.state is State.COMPLETED
    assert done.records > 0
    assert done.summary.startswith(f"{tasks} base file(s), {done.records} record(s)"), done.summary


def test_a_completed_instant_is_nothing_to_do(mor: tuple[Storage, FileSystemLock]) -> None:
    storage, lock = mor
    view = Table.load(storage)
    scheduled = COMPACTION.schedule(view, lock, {"hoodie.compact.inline.max.delta.commits": "1"})
    assert scheduled.instant is not None
    T = scheduled.instant.time
    assert [i.time for i in COMPACTION.pending(Table.load(storage))] == [T]
    run_in_process(COMPACTION.prepare(storage, lock, T, {}))
    assert COMPACTION.pending(Table.load(storage)) == []
    with pytest.raises(NothingToDo, match=f"compaction {T} .* has already completed"):
        COMPACTION.prepare(storage, lock, T, {})


def test_the_trigger_decides_on_the_view_it_is_handed(mor: tuple[Storage, FileSystemLock]) -> None:
    storage, lock = mor
    view = Table.load(storage)
    not_yet = COMPACTION.schedule(view, lock, {"hoodie.compact.inline.max.delta.commits": "50"})
    assert not_yet.instant is None
    assert "50" in not_yet.reason
    assert not Table.load(storage).timeline.pending()


def test_the_registry_names_every_service_once() -> None:
    assert SERVICE_NAMES == (
        "compaction",
        "logcompaction",
        "clustering",
        "clean",
        "indexing",
        "ttl",
        "archival",
    )
    assert service_named("compaction") is COMPACTION
    assert len({service_named(n).priority for n in SERVICE_NAMES}) == len(SERVICE_NAMES)
    with pytest.raises(Exception, match="no table service 'compact'"):
        service_named("compact")
