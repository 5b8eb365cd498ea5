"""One pending plan per file group (issue 33, case 3): a scheduler that paused right at its ``.requested`` PUT
while the table lock (a lease) passed to another lands its plan after the other planned the same file groups.

The pause is real: scheduler P1 writes through a storage that, at its first requested PUT, first lets
scheduler P2 schedule in full under a lock of its own (the lease that passed), then lands P1's plan. Both
plans are then on disk, over shared file groups, as in the fault review. The judge of the outcome reads the
completed instants' plans from the timeline (not :mod:`hoodie.write.plan_overlap`): no file group is in two
completed plans, and the older plan is the one that ran.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.service import CLUSTERING
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.service import COMPACTION
from hoodie.errors import NothingToDo, OverlappingPlan
from hoodie.lock import FileSystemLock, LockProvider
from hoodie.storage import Storage
from hoodie.table_service import TableService, run_in_process
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import COMPACTION as COMPACTION_ACTION
from hoodie.timeline.instant import LOG_COMPACTION, REPLACE_COMMIT, Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import decode_compaction_plan, decode_requested_replace_metadata
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.plan_overlap import revalidate_requested
from support.stall import PausingStorage

#: No writer beside these tables: clustering plans every small slice (the default leaves the last writers'
#: groups out, which here would be every group).
NO_WRITERS = ClusteringConfig(update_strategy=UpdateStrategy.ALLOW)
SERVICES: dict[str, TableService] = {"compaction": COMPACTION, "clustering": CLUSTERING}
PAIRS = [("compaction", "compaction"), ("compaction", "clustering"), ("clustering", "compaction")]


def _schedule(
    service: str, storage: Storage, lock: LockProvider, generator: InstantTimeGenerator
) -> tuple[Instant | None, str]:
    if service == "compaction":
        c = schedule_compaction(storage, lock, time_generator=generator)
        return c.instant, c.reason
    s = schedule_clustering(storage, lock, config=NO_WRITERS, respect_trigger=False, time_generator=generator)
    return s.instant, s.reason


def _plans(root: Path, *, completed: bool) -> dict[str, set[tuple[str, str]]]:
    """The file groups of each compaction and clustering plan on the timeline, pending or completed, read
    from their requested files."""
    table = Table.open(str(root))
    timeline = table.timeline
    out: dict[str, set[tuple[str, str]]] = {}
    for instant in timeline:
        if instant.is_completed is not completed:
            continue
        action = timeline.requested_action(instant.time)
        if action not in (COMPACTION_ACTION, LOG_COMPACTION, REPLACE_COMMIT, "clustering"):
            continue
        data = (root / timeline.file_of(instant.time, State.REQUESTED)).read_bytes()
        if action in (COMPACTION_ACTION, LOG_COMPACTION):
            out[instant.time] = {
                (o.partition_path, o.file_id) for o in decode_compaction_plan(data).operations
            }
        else:
            plan = decode_requested_replace_metadata(data).clustering_plan
            if plan is not None:
                out[instant.time] = {(s.partition_path, s.file_id) for s in plan.slices}
    return out


def _assert_one_completed_plan_per_group(root: Path) -> None:
    seen: dict[tuple[str, str], str] = {}
    for time, groups in sorted(_plans(root, completed=True).items()):
        for group in groups:
            assert group not in seen, f"file group {group} in two completed plans: {seen[group]} and {time}"
            seen[group] = time


class LatePlan:
    """P1 planned ``first`` at T1 under the lock and paused at its PUT; P2, holding the lock meanwhile,
    scheduled ``second`` at T2 over the same file groups; then P1's plan landed."""

    def __init__(self, tmp_path: Path, version: int, first: str, second: str) -> None:
        self.root = tmp_path / "t"
        generate_table(
            str(self.root),
            GenerateSpec(table_version=version, rows=300, commits=3, partitions=2, seed=3),
        )
        self.storage = Storage.for_uri(str(self.root))
        self.lock = FileSystemLock(self.storage)
        self.first, self.second = SERVICES[first], SERVICES[second]
        generator = InstantTimeGenerator()
        p1_storage = PausingStorage.for_uri(str(self.root))
        # The lease P2 holds while P1 still believes it holds its own.
        p2_lock = FileSystemLock(self.storage, path=".hoodie/lock.p2")
        got: dict[str, tuple[Instant | None, str]] = {}

        def p2_schedules() -> None:
            got["p2"] = _schedule(second, self.storage, p2_lock, generator)

        assert isinstance(p1_storage, PausingStorage)
        p1_storage.meanwhile = p2_schedules
        self.p1 = _schedule(first, p1_storage, FileSystemLock(p1_storage), generator)
        self.p2 = got["p2"]

    @property
    def t1(self) -> str:
        assert self.p1[0] is not None, self.p1[1]
        return self.p1[0].time

    @property
    def t2(self) -> str:
        assert self.p2[0] is not None, self.p2[1]
        return self.p2[0].time

    def pending(self) -> dict[str, set[tuple[str, str]]]:
        return _plans(self.root, completed=False)

    def run(self, service: TableService, time: str) -> None:
        run_in_process(service.prepare(self.storage, self.lock, time, {}))


@pytest.mark.parametrize("version", [6, 8])
@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_two_landed_plans_over_one_file_group_end_with_one_completed_the_older(
    tmp_path: Path, version: int, first: str, second: str
) -> None:
    case = LatePlan(tmp_path, version, first, second)
    # The issue's state: both plans landed (P1's re-validation after its PUT finds only a newer plan, which
    # yields to it, not it to the newer) and they share file groups.
    t1, t2 = case.t1, case.t2
    assert t1 < t2
    pending = case.pending()
    assert pending.keys() == {t1, t2}
    shared = pending[t1] & pending[t2]
    assert shared
    # The newer is run first (the worst order): refused, its requested plan deleted, as if never scheduled.
    with pytest.raises(OverlappingPlan) as refused:
        case.run(case.second, t2)
    message = str(refused.value)
    assert t1 in message
    assert t2 in message
    assert str(sorted(shared)[0][1]) in message
    assert case.pending().keys() == {t1}
    assert Table.open(str(case.root)).timeline.get(t2) is None
    # The older runs; the newer is nothing to do any more.
    case.run(case.first, t1)
    with pytest.raises(NothingToDo):
        case.run(case.second, t2)
    assert case.pending() == {}
    completed = _plans(case.root, completed=True)
    assert t1 in completed
    assert t2 not in completed
    _assert_one_completed_plan_per_group(case.root)


@pytest.mark.parametrize("version", [6, 9])
@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_the_older_plan_starting_withdraws_the_newer_requested_one(
    tmp_path: Path, version: int, first: str, second: str
) -> None:
    case = LatePlan(tmp_path, version, first, second)
    t1, t2 = case.t1, case.t2
    job = case.first.prepare(case.storage, case.lock, t1, {})
    assert case.pending().keys() == {t1}  # the newer, only requested, yields to the one starting
    run_in_process(job)
    with pytest.raises(NothingToDo):
        case.run(case.second, t2)
    assert t2 not in _plans(case.root, completed=True)
    _assert_one_completed_plan_per_group(case.root)


@pytest.mark.parametrize("version", [6, 8])
def test_of_two_landed_plans_the_newer_withdraws_itself_on_revalidation(tmp_path: Path, version: int) -> None:
    """Both schedulers re-read after their PUT: whichever order they do it in, the newer loses."""
    case = LatePlan(tmp_path, version, "compaction", "clustering")
    t1 = case.t1
    older, newer = case.p1[0], case.p2[0]
    assert older is not None
    assert newer is not None
    assert revalidate_requested(case.storage, case.lock, older, what="compaction") is None
    reason = revalidate_requested(case.storage, case.lock, newer, what="clustering")
    assert reason is not None
    assert t1 in reason
    assert case.pending().keys() == {t1}
    assert revalidate_requested(case.storage, case.lock, older, what="compaction") is None


@pytest.mark.parametrize("version", [6, 8])
def test_a_plan_landing_after_an_overlapping_newer_one_started_withdraws_itself(
    tmp_path: Path, version: int
) -> None:
    """P2 scheduled and started its compaction while P1 paused; P1's plan, landing late, yields to it."""
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_version=version, rows=300, commits=3, partitions=2, seed=3))
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    generator = InstantTimeGenerator()
    p1_storage = PausingStorage.for_uri(str(root))
    p2_lock = FileSystemLock(storage, path=".hoodie/lock.p2")
    started: list[str] = []

    def p2_schedules_and_starts() -> None:
        instant, reason = _schedule("compaction", storage, p2_lock, generator)
        assert instant is not None, reason
        COMPACTION.prepare(storage, p2_lock, instant.time, {})  # inflight; its tasks still to run
        started.append(instant.time)

    assert isinstance(p1_storage, PausingStorage)
    p1_storage.meanwhile = p2_schedules_and_starts
    p1, reason = _schedule("clustering", p1_storage, FileSystemLock(p1_storage), generator)
    assert p1 is None, "P1's plan stayed beside the started one it overlaps"
    assert "withdrawn" in reason
    assert started[0] in reason
    assert _plans(root, completed=False).keys() == {started[0]}
    run_in_process(COMPACTION.prepare(storage, lock, started[0], {}))  # the abandoned attempt, run again
    _assert_one_completed_plan_per_group(root)


@pytest.mark.parametrize("version", [6, 8])
def test_an_inflight_plan_that_overlaps_an_older_pending_one_is_refused_and_kept(
    tmp_path: Path, version: int
) -> None:
    """A newer plan already started (by a runner that did not see the older one) is never deleted on this
    rule's word: it is refused, for a human; the older, only requested, yields to it and is deleted."""
    case = LatePlan(tmp_path, version, "compaction", "compaction")
    t1, t2 = case.t1, case.t2
    config = Table.open(str(case.root)).config
    TimelineWriter(case.storage, config, case.lock).start(Instant(t2, COMPACTION_ACTION, State.REQUESTED))
    with pytest.raises(OverlappingPlan, match="a human decides"):
        case.run(COMPACTION, t2)
    assert Table.open(str(case.root)).timeline.get(t2).state is State.INFLIGHT  # type: ignore[union-attr]
    with pytest.raises(OverlappingPlan, match="deleted"):
        case.run(COMPACTION, t1)
    assert case.pending().keys() == {t2}
    case.run(COMPACTION, t2)
    assert case.pending() == {}
    _assert_one_completed_plan_per_group(case.root)
