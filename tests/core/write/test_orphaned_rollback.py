"""hoodie.write.orphaned_rollback: a pending rollback whose instant is gone is finished; one whose instant
completed and was archived (a stale holder's plan) is withdrawn, or refused once inflight, deleting nothing.

The case comes from the chaos campaign (seed 603): a replica's rollback plan PUT, held 20 s in the network
while the replica was paused, landed after another replica had rolled the instant back for good; nothing
would ever finish it, and archival stops at it. Judged by hudi-rs: the same rows before and after.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hoodie.archival.execute import archive
from hoodie.errors import HoodieError
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.archived.load import load_archived_timeline
from hoodie.timeline.instant import REPLACE_COMMIT, ROLLBACK, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import (
    InstantInfo,
    RollbackPlan,
    RollbackRequest,
    decode_rollback_metadata,
    encode_rollback_plan,
)
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.orphaned_rollback import finish_orphaned_rollback, orphaned_rollbacks
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, Query

VERSIONS = [6, 8, 9]


def _plan(storage: Storage, target: str, action: str, paths: list[str]) -> RollbackPlan:
    by_partition: dict[str, list[str]] = {}
    for p in paths:
        by_partition.setdefault(p.rsplit("/", 1)[0], []).append(storage.full_path(p))
    return RollbackPlan(
        instant_to_rollback=InstantInfo(target, action),
        rollback_requests=tuple(
            RollbackRequest(
                partition_path=part, file_id="", latest_base_instant="", files_to_be_deleted=tuple(f)
            )
            for part, f in sorted(by_partition.items())
        ),
    )


def _request(storage: Storage, lock: FileSystemLock, plan: RollbackPlan, *, start: bool = False) -> str:
    table = Table.load(storage)
    writer = TimelineWriter(storage, table.config, lock)
    time = InstantTimeGenerator().next(storage, table.config)
    requested = writer.request(
        ROLLBACK, time, encode_rollback_plan(plan, table_version=table.config.table_version)
    )
    if start:
        writer.start(requested)
    return time


def _same_rows(oracle: HudiOracle, before: Path, after: Path) -> None:
    ours = oracle.rows(after, Query.snapshot())
    theirs = oracle.rows(before, Query.snapshot())
    assert ours.num_rows == theirs.num_rows
    assert_same_rows(ours, theirs, ["_hoodie_record_key", "_hoodie_partition_path"])


def _base_files(root: Path, instant: str) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob(f"*_{instant}.parquet") if ".hoodie" not in p.parts
    )


@pytest.mark.parametrize("version", VERSIONS)
def test_a_rollback_left_pending_after_its_instant_was_removed_is_finished(
    tmp_path: Path, version: int, hudi_oracle: HudiOracle
) -> None:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=version, rows=30, commits=3, partitions=2, seed=7))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    # A clustering attempt's leftover file, of an instant since rolled back for good (no longer on the
    # timeline), and a stale plan naming it and one already deleted.
    gone = InstantTimeGenerator().next(storage, Table.load(storage).config)
    (existing,) = _base_files(root, Table.load(storage).timeline.completed()[0].time)[:1]
    leftover = existing.rsplit("_", 1)[0].replace("_0-", "_7-") + f"_{gone}.parquet"
    shutil.copy(root / existing, root / leftover)
    already = leftover.replace(".parquet", "-x.parquet")
    before = tmp_path / "before"
    shutil.copytree(root, before)
    rollback = _request(storage, lock, _plan(storage, gone, REPLACE_COMMIT, [leftover, already]))

    (orphan,) = orphaned_rollbacks(storage, Table.load(storage).timeline)
    assert orphan.rollback.time == rollback
    done = finish_orphaned_rollback(storage, lock, rollback)
    assert done is not None
    assert done.startswith(f"finished rollback {rollback}")
    assert not (root / leftover).exists()
    timeline = Table.load(storage).timeline
    completed = timeline.get(rollback)
    assert completed is not None
    assert completed.state is State.COMPLETED
    metadata = decode_rollback_metadata(storage.read(timeline.file_of(rollback, State.COMPLETED)))
    assert metadata.commits_rollback == (gone,)
    assert metadata.total_files_deleted == 1
    assert orphaned_rollbacks(storage, timeline) == []
    assert finish_orphaned_rollback(storage, lock, rollback) is None  # nothing left to do
    _same_rows(hudi_oracle, before, root)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_stale_plan_of_an_archived_commit_is_withdrawn_and_deletes_nothing(
    tmp_path: Path, version: int, hudi_oracle: HudiOracle
) -> None:
    """The instant completed and was archived since the plan was made: running the plan would delete
    committed files. Requested, it is withdrawn; inflight (its holder had begun), it is refused."""
    root = tmp_path / "t"
    spec = GenerateSpec(table_version=version, rows=20, commits=8, partitions=1, seed=5, update_fraction=0.5)
    generate_table(str(root), spec)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    settings = {
        "hoodie.keep.min.commits": "2",
        "hoodie.keep.max.commits": "4",
        "hoodie.clean.commits.retained": "1",
    }
    assert archive(storage, lock, settings)
    table = Table.load(storage)
    archived = [i for i in load_archived_timeline(storage, table.config).completed()]
    target = next(i for i in archived if _base_files(root, i.time))
    assert table.timeline.get(target.time) is None
    files = _base_files(root, target.time)
    before = tmp_path / "before"
    shutil.copytree(root, before)

    stale = _request(storage, lock, _plan(storage, target.time, target.action, files))
    assert [o.rollback.time for o in orphaned_rollbacks(storage, Table.load(storage).timeline)] == [stale]
    done = finish_orphaned_rollback(storage, lock, stale)
    assert done == f"withdrew stale rollback {stale} of {target.action} {target.time}"
    assert Table.load(storage).timeline.get(stale) is None
    assert all((root / f).exists() for f in files)

    begun = _request(storage, lock, _plan(storage, target.time, target.action, files), start=True)
    with pytest.raises(HoodieError, match="may have deleted committed files"):
        finish_orphaned_rollback(storage, lock, begun)
    assert all((root / f).exists() for f in files)
    _same_rows(hudi_oracle, before, root)


def test_a_pending_rollback_of_an_instant_still_on_the_timeline_is_no_orphan(tmp_path: Path) -> None:
    """Its instant's next run resumes it (hoodie.write.rollback.pending_rollback_of)."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=8, rows=10, commits=2, partitions=1, seed=1))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    table = Table.load(storage)
    present = table.timeline.completed()[-1]
    rollback = _request(storage, lock, _plan(storage, present.time, present.action, []))
    assert orphaned_rollbacks(storage, Table.load(storage).timeline) == []
    assert finish_orphaned_rollback(storage, lock, rollback) is None
