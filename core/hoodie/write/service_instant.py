"""The steps every plan-driven service run shares around its own work (compaction, log compaction,
clustering): finding the pending instant it runs, starting again from its plan when an earlier attempt was
abandoned, the schema it writes with, and matching the tasks' results to its tasks before the commit.

Each step's rule is the same for every service; only the words of its messages and the error it raises
differ, so those are passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from hoodie.errors import HoodieError, NothingToDo
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import Instant, State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.timeline import Timeline
from hoodie.write.rollback import RollbackResult, rollback_unfinished
from hoodie.write.service_commit import without_meta_fields


class _Indexed(Protocol):
    @property
    def index(self) -> int: ...


ResultT = TypeVar("ResultT", bound=_Indexed)


def pending_instant(
    timeline: Timeline,
    pending: Sequence[Instant],
    instant_time: str | None,
    *,
    what: str,
    where: str,
    completed: Callable[[str], bool],
    nothing: Callable[[str], NothingToDo],
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
            + ("has already completed" if done else f"is not a pending {what} on the timeline")
        )
    return found


def restart_abandoned(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    groups: Sequence[tuple[str, str | None]],
    generator: InstantTimeGenerator,
) -> tuple[Instant, RollbackResult | None]:
    """An inflight instant found by a run that holds its claim is an abandoned attempt: its files in
    ``groups`` are rolled back and the run starts again from the requested plan. Returns the instant to
    start (requested) and what the rollback did (``None`` when there was nothing to roll back)."""
    if instant.state is not State.INFLIGHT:
        return instant, None
    rolled_back = rollback_unfinished(storage, lock, instant, groups, time_generator=generator)
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


__all__ = ["pending_instant", "restart_abandoned", "results_by_task", "writer_schema"]
