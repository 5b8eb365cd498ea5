"""One pending plan per file group: a file group in a pending compaction, log compaction or clustering plan is
in no other pending plan of those services (Hudi's rule; its planners skip such groups, and so do ours:
:func:`hoodie.compaction.plan.blocked_file_groups`).

The planners alone cannot keep the rule when the table lock is a lease (the storage-based lock, or any lock
whose holder can pause past its expiry): a scheduler that checked the timeline under the lock and paused
right before its ``.requested`` PUT lands its plan after another scheduler, holding the lock meanwhile,
planned the same file groups (issue 33). Both plans would run and complete, the second rewriting slices the
first already replaced.

So the rule is checked again on a timeline re-read after the plan landed, and decided by instant times and
states alone, so that every process that sees both plans picks the same loser. A plan **yields** to another
plan of those services that shares a file group with it and is

- **older and pending** (requested or inflight): had the two schedulers seen each other, the newer would
  have skipped the group; or
- **newer and started** (inflight or completed): its files are being, or have been, written; only its own
  runner may remove them, and running ours as well would rewrite a slice twice. (A newer plan overlaps ours
  only when ours was invisible to its planner, i.e. landed late.)

A plan that yields and is only requested is deleted, its requested file and nothing else: no task has
written for it, so deleting it is as if it had never been scheduled. A plan already inflight is refused and
left as it is, for a human to decide: rolling back an attempt someone started, on this rule's word, could
destroy work about to commit.

Two places apply the rule: the scheduler, right after its requested file landed
(:func:`revalidate_requested`, called by :func:`hoodie.write.service_instant.request_planned`), and every
run right before it moves a plan to inflight, under the table lock (:func:`ensure_alone`,
:func:`start_alone`). A run that does not yield withdraws the newer requested plans that overlap its own:
they yield to it anyway, and once it completed they could no longer tell (an older completed plan does not
make a newer one yield, since plans over a group compacted or clustered earlier are the normal case).

Everything here trusts the table lock only to serialise the steps of live holders: a holder that lost its
lease while paused still reaches the same verdict, because the verdict depends on the timeline alone.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hoodie.config import TableConfig
from hoodie.errors import CorruptTimelineFile, OverlappingPlan
from hoodie.file_group.file_group import FileGroupId
from hoodie.lock import LockProvider, held
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import CLUSTERING, COMPACTION, LOG_COMPACTION, REPLACE_COMMIT, Instant, State
from hoodie.timeline.metadata import decode_compaction_plan, decode_requested_replace_metadata
from hoodie.timeline.writer import TimelineWriter

logger = logging.getLogger(__name__)

#: The actions a plan of the three services is requested under, with the service's name for messages (a
#: v6 clustering is a ``replacecommit`` whose requested file holds a clustering plan; one without a plan, an
#: INSERT OVERWRITE, holds no file group).
PLAN_SERVICES: dict[str, str] = {
    COMPACTION: "compaction",
    LOG_COMPACTION: "log compaction",
    CLUSTERING: "clustering",
    REPLACE_COMMIT: "clustering",
}

#: How many shared file groups a message names.
NAMED_GROUPS = 5


@dataclass(frozen=True)
class PlanGroups:
    """A plan of one of the three services: its instant (in its latest state), the service's name and the
    file groups it rewrites."""

    instant: Instant
    service: str
    groups: frozenset[FileGroupId]

    def __str__(self) -> str:
        return f"{self.service} {self.instant.time} ({self.instant.state.name.lower()})"


@dataclass(frozen=True)
class Overlap:
    """A plan that yields (``plan``) to another (``rival``) over the file groups ``shared`` (sorted)."""

    plan: PlanGroups
    rival: PlanGroups
    shared: tuple[FileGroupId, ...]

    def describe(self) -> str:
        names = ", ".join(str(g) for g in self.shared[:NAMED_GROUPS])
        more = f" and {len(self.shared) - NAMED_GROUPS} more" if len(self.shared) > NAMED_GROUPS else ""
        older = self.rival.instant.time < self.plan.instant.time
        why = "older pending" if older else "newer, already started,"
        return (
            f"{self.plan} shares {len(self.shared)} file group(s) with the {why} {self.rival}: {names}{more} "
            "(Hudi allows one pending compaction, log compaction or clustering plan per file group)"
        )


def plan_groups(table: Table, instant_time: str) -> PlanGroups | None:
    """The plan requested at ``instant_time`` on ``table``'s timeline, or ``None`` when the instant is not a
    plan of the three services (or its requested file is gone: archived, or withdrawn since the listing)."""
    timeline = table.timeline
    instant = timeline.get(instant_time)
    action = timeline.requested_action(instant_time)
    if instant is None or action not in PLAN_SERVICES:
        return None
    try:
        data = table.storage.read(timeline.file_of(instant_time, State.REQUESTED))
    except (KeyError, FileNotFoundError):
        return None
    if action in (COMPACTION, LOG_COMPACTION):
        operations = decode_compaction_plan(data).operations
        groups = frozenset(FileGroupId(op.partition_path, op.file_id) for op in operations)
    else:
        try:
            plan = decode_requested_replace_metadata(data).clustering_plan
        except CorruptTimelineFile:
            if action != REPLACE_COMMIT:
                raise
            plan = None  # a write's replacecommit whose requested file some writer filled otherwise
        if plan is None:
            return None
        groups = frozenset(FileGroupId(s.partition_path, s.file_id) for s in plan.slices)
    return PlanGroups(instant, PLAN_SERVICES[action], groups)


def yields_to(table: Table, plan: PlanGroups) -> Overlap | None:
    """The plan ``plan`` yields to on ``table``'s timeline (see the module doc), the oldest first, or
    ``None`` when it may run."""
    for other in table.timeline:
        if other.time == plan.instant.time:
            continue
        older = other.time < plan.instant.time
        if (older and other.is_completed) or (not older and other.state is State.REQUESTED):
            continue
        overlap = _overlap(table, plan, other)
        if overlap is not None:
            return overlap
    return None


def newer_requested(table: Table, plan: PlanGroups) -> list[Overlap]:
    """The newer plans, only requested, that overlap ``plan`` (each as an :class:`Overlap` of the newer
    plan yielding to ``plan``)."""
    out: list[Overlap] = []
    for other in table.timeline:
        if other.time <= plan.instant.time or other.state is not State.REQUESTED:
            continue
        overlap = _overlap(table, plan, other)
        if overlap is not None:
            out.append(Overlap(overlap.rival, plan, overlap.shared))
    return out


def _overlap(table: Table, plan: PlanGroups, other: Instant) -> Overlap | None:
    """The overlap of ``plan`` with ``other``'s plan. A rival plan that cannot be read is passed over, with
    a warning: no run of it can start (each fails on the same plan and reports it on that instant), so it
    writes nothing, and one damaged plan must not stop every other plan of the table."""
    if table.timeline.requested_action(other.time) not in PLAN_SERVICES:
        return None  # a write, a clean, ...: read no file
    try:
        rival = plan_groups(table, other.time)
    except CorruptTimelineFile as e:
        logger.warning(
            "%s: the plan of %s is unreadable, so %s is not checked against it: %s",
            table.storage.uri,
            other,
            plan.instant,
            e,
        )
        return None
    if rival is None:
        return None
    shared = plan.groups & rival.groups
    if not shared:
        return None
    return Overlap(plan, rival, tuple(sorted(shared, key=lambda g: (g.partition_path, g.file_id))))


def withdraw(
    storage: Storage, lock: LockProvider, instant: Instant, *, config: TableConfig | None = None
) -> bool:
    """Delete the requested file of the plan at ``instant.time`` while it is still only requested (under
    the table lock, on a timeline re-read there); returns whether it was deleted. Anything inflight or
    completed is never touched. ``config``: the table's, when the caller read it already."""
    with held(lock):
        table = Table.load(storage, config)
        now = table.timeline.get(instant.time)
        if now is None or now.state is not State.REQUESTED or now.action != instant.action:
            return False
        storage.delete(table.timeline.file_of(instant.time, State.REQUESTED))
    return True


def revalidate_requested(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    *,
    what: str,
    config: TableConfig | None = None,
) -> str | None:
    """Check the plan a scheduler has just requested at ``instant`` against the timeline re-read now (after
    its requested file landed); when it yields, withdraw it. Returns why it is not scheduled after all, or
    ``None`` when it stands. ``what`` names the service in logs; ``config`` is the table's, when read."""
    if instant.action not in PLAN_SERVICES:
        return None
    with held(lock):
        table = Table.load(storage, config)
        plan = plan_groups(table, instant.time)
        if plan is None:
            reason = "its requested file is gone: an older overlapping plan started and withdrew it"
            logger.warning("%s %s of %s not scheduled: %s", what, instant.time, storage.uri, reason)
            return reason
        overlap = yields_to(table, plan)
        if overlap is None:
            return None
        if plan.instant.state is not State.REQUESTED or not withdraw(
            storage, lock, plan.instant, config=config
        ):
            logger.error(
                "%s of %s: %s; it has started already, left for a human",
                what,
                storage.uri,
                overlap.describe(),
            )
            return None
    reason = f"withdrawn: {overlap.describe()}"
    logger.warning(
        "%s %s of %s not scheduled (its requested file deleted): %s",
        what,
        instant.time,
        storage.uri,
        overlap.describe(),
    )
    return reason


def ensure_alone(
    storage: Storage,
    lock: LockProvider,
    instant: Instant,
    *,
    what: str,
    config: TableConfig | None = None,
) -> list[Instant]:
    """Before a run moves the plan at ``instant`` to inflight (or rolls back its abandoned attempt): under
    the table lock, on the timeline re-read there, raise :class:`~hoodie.errors.OverlappingPlan` when the
    plan yields (deleting it first when it is only requested; an inflight one is left for a human), else
    withdraw the newer requested plans that overlap it and return them (a view read before holds their
    plans still). ``what`` names the service in logs; ``config`` is the table's, when read already (only
    the timeline is listed again)."""
    withdrawn: list[Instant] = []
    with held(lock):
        table = Table.load(storage, config)
        plan = plan_groups(table, instant.time)
        if plan is None:
            return withdrawn  # not pending any more: the run's own checks say so in its words
        overlap = yields_to(table, plan)
        if overlap is not None:
            if plan.instant.state is State.REQUESTED and withdraw(storage, lock, plan.instant, config=config):
                message = f"{overlap.describe()}; its requested plan was deleted, as if never scheduled"
                logger.warning("%s of %s refused: %s", what, storage.uri, message)
            else:
                message = (
                    f"{overlap.describe()}; it is {plan.instant.state.name.lower()}, so it is neither run "
                    "nor deleted: a human decides which plan to roll back"
                )
                logger.error("%s of %s refused: %s", what, storage.uri, message)
            raise OverlappingPlan(f"{storage.uri}: {message}")
        for newer in newer_requested(table, plan):
            if withdraw(storage, lock, newer.plan.instant, config=config):
                withdrawn.append(newer.plan.instant)
                logger.warning(
                    "%s of %s: withdrew the newer requested %s before starting: %s",
                    what,
                    storage.uri,
                    newer.plan,
                    newer.describe(),
                )
    return withdrawn


def start_alone(
    storage: Storage, lock: LockProvider, writer: TimelineWriter, instant: Instant, *, what: str
) -> tuple[Instant, list[Instant]]:
    """Move the requested plan at ``instant`` to inflight with :func:`ensure_alone` checked in the same hold
    of the table lock, so that no plan it must yield to lands between the check and the inflight file (from
    a live lock holder). Returns the inflight instant and the newer plans withdrawn on the way (when there
    are any, a view the caller read before is stale: it lists their plans, whose files are gone)."""
    with held(lock):
        withdrawn = ensure_alone(storage, lock, instant, what=what, config=writer.config)
        return writer.start(instant), withdrawn


__all__ = [
    "NAMED_GROUPS",
    "PLAN_SERVICES",
    "Overlap",
    "PlanGroups",
    "ensure_alone",
    "newer_requested",
    "plan_groups",
    "revalidate_requested",
    "start_alone",
    "withdraw",
]
