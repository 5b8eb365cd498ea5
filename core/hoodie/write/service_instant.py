"""The steps every plan-driven service shares around its own work (compaction, log compaction, clustering):
requesting an instant once there is a plan, finding the pending instant a run starts from, starting again
from its plan when an earlier attempt was abandoned, the schema it writes with, and matching the tasks'
results to its tasks before the commit.

Each step's rule is the same for every service; only the words of its messages and the error it raises
differ, so those are passed in.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from hoodie.errors import HoodieError, LockError, NothingToDo
from hoodie.failpoints import failpoint
from hoodie.lock import LockProvider, held
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.timeline import Timeline
from hoodie.write.plan_overlap import revalidate_requested
from hoodie.write.rollback import RollbackResult, rollback_unfinished
from hoodie.write.service_commit import without_meta_fields

logger = logging.getLogger(__name__)


class _Indexed(Protocol):
    @property
    def index(self) -> int: ...


ResultT = TypeVar("ResultT", bound=_Indexed)
PlanT = TypeVar("PlanT")


@dataclass(frozen=True)
class Planned(Generic[PlanT]):
    """A planner's answer: a plan, or ``None`` with the reason nothing was planned."""

    plan: PlanT | None
    reason: str


def request_planned(
    storage: Storage,
    lock: LockProvider,
    table: Table,
    generator: InstantTimeGenerator,
    *,
    what: str,
    plan: Callable[[Table, str], Planned[PlanT]],
    request: Callable[[Table, str, PlanT], Instant],
    preview: bool = False,
) -> tuple[Instant | None, Planned[PlanT]]:
    """Request an instant of a plan made by ``plan(view, instant_time)``; returns the instant (or ``None``)
    and the planner's answer it was made of.

    The plan is first made on ``table`` (read without the lock) at a provisional time: when it is empty, no
    instant time is taken and the lock is never held. Otherwise, under the lock, the instant time is
    generated (with the clock-skew wait), the view read again and the plan made again on it, and
    ``request(view, instant_time, plan)`` writes the requested file: the lock holds from the instant time to
    the requested file, so no write completes in between unseen. Once the file landed, the plan is checked
    against the timeline re-read (:func:`~hoodie.write.plan_overlap.revalidate_requested`): a lock that was
    a lease may have lapsed while this process paused before the write, and a plan that overlaps an older
    pending one is withdrawn and reported as not scheduled. ``what`` names the service in logs.

    ``preview``: only the first plan, on ``table``, is made, and returned with no instant (its reason says
    it is due): what ``hoodied status`` says would be scheduled, by the very steps scheduling takes."""
    ahead = plan(table, generator.provisional(table.config, table.timeline))
    if ahead.plan is None:
        logger.debug("%s of %s not scheduled: %s", what, storage.uri, ahead.reason)
        return None, ahead
    if preview:
        return None, Planned(ahead.plan, f"due: {ahead.reason}")
    landed: Instant | None = None
    try:
        with held(lock):
            failpoint("schedule.under_lock")
            instant_time = generator.next(storage, table.config)
            view = Table.load(storage)  # the view at the instant time, under the lock
            result = plan(view, instant_time)
            made = result.plan
            if made is None:
                logger.debug("%s of %s not scheduled: %s", what, storage.uri, result.reason)
                return None, result
            instant = landed = request(view, instant_time, made)
            # The lock may have been a lease that lapsed while we paused before the PUT: another scheduler
            # may have planned the same file groups meanwhile. Decided on the timeline as it is now.
            withdrawn = revalidate_requested(storage, lock, instant, what=what, config=view.config)
    except LockError as e:
        if landed is None:
            raise
        # The plan landed, and the lock was found lost around it (the lease lapsed while this process was
        # paused): the check is made again under the lock taken afresh, so a plan that overlaps an older
        # one does not stay until a run of either finds it.
        logger.warning(
            "%s %s of %s: the table lock was lost around its requested file (%s); checking the plan again "
            "under the lock",
            what,
            landed.time,
            storage.uri,
            e,
        )
        withdrawn = _revalidate_again(storage, lock, landed, what)
    if withdrawn is not None:
        return None, Planned(None, withdrawn)
    logger.debug("scheduled %s %s on %s: %s", what, instant_time, storage.uri, result.reason)
    return instant, result


#: How long a scheduler whose lock was lost around its landed plan keeps trying to check the plan again.
REVALIDATE_PATIENCE_SECONDS = 60.0


def _revalidate_again(storage: Storage, lock: LockProvider, instant: Instant, what: str) -> str | None:
    """:func:`~hoodie.write.plan_overlap.revalidate_requested` of a plan that landed while the lock was lost,
    under the lock taken afresh. The lock may not be takeable at once (a ZooKeeper session being
    re-established after the one that lapsed): tried again for up to :data:`REVALIDATE_PATIENCE_SECONDS`,
    then the error is raised (a run of either plan still refuses the overlap before it starts)."""
    deadline = time.monotonic() + REVALIDATE_PATIENCE_SECONDS
    while True:
        try:
            return revalidate_requested(storage, lock, instant, what=what, config=None)
        except LockError as e:
            if time.monotonic() >= deadline:
                raise
            logger.info(
                "%s %s of %s: the lock cannot be taken yet (%s); trying again",
                what,
                instant.time,
                storage.uri,
                e,
            )
            time.sleep(0.5)


def pending_instant(
    timeline: Timeline,
    pending: Sequence[Instant],
    instant_time: str | None,
    *,
    what: str,
    where: str,
    completed: Callable[[str], bool],
    nothing: type[NothingToDo],
) -> Instant:
    """The pending instant a run starts from: ``instant_time``'s, else the earliest of ``pending``.

    ``what`` names the service in messages (``compaction``), ``where`` the table; ``completed(t)`` says
    whether ``t`` is an instant of this service that already completed (the message then says so: a retry
    that finds its work done is not an error of the caller's); ``nothing`` makes the service's
    :class:`~hoodie.errors.NothingToDo`.
    """
    if instant_time is None:
        if not pending:
            raise nothing(f"{where} has no pending {what}")
        return pending[0]
    found = timeline.get(instant_time)
    if found is None or found not in pending:
        done = found is not None and found.state is State.COMPLETED and completed(instant_time)
        raise nothing(
            f"{what} {instant_time} of {where} "
            + ("has already completed" if done else f"is not a pending {what} on the timeline"),
            unknown=not done,
        )
    return found


def restart_abandoned(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    groups: Sequence[tuple[str, str | None]],
    generator: InstantTimeGenerator,
    *,
    fence: Callable[[], None] | None = None,
) -> tuple[Instant, RollbackResult | None]:
    """An inflight instant found by a run that holds its claim (and lease: ``fence`` re-checks both under the
    lock before anything is deleted) is an abandoned attempt: its files in ``groups`` are rolled back and
    the run starts again from the requested plan. Returns the instant to start (requested) and what the
    rollback did (``None`` when there was nothing to roll back)."""
    if instant.state is not State.INFLIGHT:
        return instant, None
    rolled_back = rollback_unfinished(storage, lock, instant, groups, time_generator=generator, fence=fence)
    return Instant(instant.time, instant.action, State.REQUESTED), rolled_back


def writer_schema(table: Table, *, writes: str, failed: Callable[[str], HoodieError]) -> str:
    """The Avro schema a run writes its files with: the table's latest (else the one it was created with),
    without meta fields. A table that records none cannot be rewritten: ``failed`` says so, naming what the
    run ``writes`` (``base files``)."""
    schema = table.latest_avro_schema() or table.config.create_schema
    if not schema:
        raise failed(f"{table.storage.uri} records no table schema; cannot write {writes}")
    return without_meta_fields(schema)


def results_by_task(
    results: Sequence[ResultT],
    indexes: Sequence[int],
    *,
    what: str,
    unit: str,
    failed: Callable[[str], HoodieError],
) -> dict[int, ResultT]:
    """The tasks' results by task index, each task's exactly once (an executor may run a task twice; a
    result twice, or none, means the run's outcome is not what its plan says, so it must not commit).
    ``what`` names the run (``compaction 2024...``), ``unit`` a task's work (``operation``, ``group``)."""
    by_index: dict[int, ResultT] = {}
    for r in results:
        if r.index in by_index:
            raise failed(f"{what}: {unit} {r.index} reported twice")
        by_index[r.index] = r
    missing = [i for i in indexes if i not in by_index]
    if missing:
        raise failed(f"{what}: no result for {unit}(s) {missing[:10]}")
    return by_index


__all__ = [
    "Planned",
    "pending_instant",
    "request_planned",
    "restart_abandoned",
    "results_by_task",
    "writer_schema",
]
