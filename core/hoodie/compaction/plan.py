"""Compaction planning (pure) and scheduling (writes ``compaction.requested`` under the table lock).

:func:`plan_compaction` is a function of a table view and a compaction instant time: it applies Hudi's
scheduling rules and the strategy and returns a :class:`~hoodie.timeline.metadata.CompactionPlan`, or no plan
and the reason. :func:`schedule_compaction` evaluates the trigger and plans on a view read without the lock;
only when there is something to plan does it take the table lock and a fresh instant time, re-read the
timeline, plan again and write the plan; the lock is held from the instant time to the requested file, so no
write can complete in between unseen.

Rules (as Hudi's ``ScheduleCompactionActionExecutor`` and ``BaseHoodieCompactionPlanGenerator``):

- Only MOR tables compact. A table with a metadata table is refused until hoodied keeps it in step (the
  commit would leave the metadata table's file listing behind, and Hudi readers that list through it
  would miss the new base files).
- No completed write and no compaction may have an instant time at or after the compaction's.
- Table version 6 (file slices by instant time): no write (commit, deltacommit, replacecommit) may be pending
  with an earlier instant time: its log files name the slice before the compaction, and records it commits
  after the compaction would be hidden by the new base file. Hudi 0.x checks this only for single writers;
  we check it always, so that no write is lost. Failed writes block it until they are rolled back.
- Table versions 8 and 9 (slices by completion time): writes pending at planning complete into the new slice,
  so they do not block; only log files of writes completed before the plan are compacted.
- File groups in a pending compaction, a pending log compaction or a pending clustering, and replaced file
  groups, are never planned; slices without log files are not either.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hoodie.compaction.strategy import CompactionConfig
from hoodie.compaction.trigger import TriggerConfig, TriggerDecision, evaluate_trigger
from hoodie.errors import UnsupportedTable
from hoodie.file_group.file_group import FileGroupId
from hoodie.lock import LockProvider
from hoodie.metadata_table import MetadataTableNotSupported, refuse_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.instant import COMPACTION, WRITE_ACTIONS, Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import CompactionOperation, CompactionPlan, encode_compaction_plan
from hoodie.timeline.writer import TimelineWriter
from hoodie.write.service_instant import Planned, request_planned

logger = logging.getLogger(__name__)


#: A plan, or ``None`` with the reason nothing was planned.
PlanResult = Planned[CompactionPlan]


@dataclass(frozen=True)
class ScheduleResult:
    """What :func:`schedule_compaction` did: the requested instant (or none) and why."""

    instant: Instant | None
    plan: CompactionPlan | None
    reason: str
    trigger: TriggerDecision | None = None


def check_compactable(table: Table) -> None:
    """Refuse tables compaction must not touch (COW; a metadata table hoodied cannot update)."""
    cfg = table.config
    if not cfg.is_mor:
        raise UnsupportedTable(
            f"{table.base_path} is a COPY_ON_WRITE table: only MERGE_ON_READ tables compact"
        )
    refuse_metadata_table(table.storage, cfg, "compaction")


def blocked_file_groups(table: Table) -> dict[FileGroupId, str]:
    """File groups a new plan must leave alone, each with the pending instant that holds it."""
    out: dict[FileGroupId, str] = dict(table.pending_compaction_file_groups())
    out.update(table.pending_log_compaction_file_groups())
    out.update(table.pending_clustering_file_groups())
    return out


def scheduling_conflict(table: Table, instant_time: str) -> str | None:
    """Why a compaction at ``instant_time`` must not be scheduled now, or ``None`` (Hudi's rules above)."""
    timeline = table.timeline
    later = [
        i
        for i in timeline
        if i.time >= instant_time
        and ((i.is_completed and i.action in WRITE_ACTIONS) or i.action == COMPACTION)
    ]
    if later:
        return (
            f"instant(s) {', '.join(str(i) for i in later[:3])} are at or after the compaction time "
            f"{instant_time}; compaction instants must be later than every write"
        )
    if table.config.table_version < 8:
        pending = [i for i in timeline.pending() if i.action in WRITE_ACTIONS and i.time < instant_time]
        if pending:
            return (
                f"write {pending[0]} is still pending with an earlier instant time than {instant_time}; "
                "on a version 6 table its log files would land in the slice being compacted and its "
                "records would be hidden by the new base file (Hudi: 'Earliest write inflight instant "
                "time must be later than compaction time'); waiting for it to complete or be rolled back"
            )
    return None


def plan_compaction(table: Table, instant_time: str, config: CompactionConfig) -> PlanResult:
    """The compaction plan at ``instant_time`` of the view ``table`` (see the module doc)."""
    check_compactable(table)
    conflict = scheduling_conflict(table, instant_time)
    if conflict is not None:
        return PlanResult(None, conflict)
    groups = table.file_groups()
    replaced = table.replaced_file_groups()
    blocked = blocked_file_groups(table)
    partitions = config.filter_partitions(sorted({gid.partition_path for gid in groups}))
    allowed = set(partitions)
    candidates: list[CompactionOperation] = []
    skipped_blocked = 0
    for gid, group in sorted(groups.items(), key=lambda kv: (kv[0].partition_path, kv[0].file_id)):
        if gid.partition_path not in allowed or gid in replaced:
            continue
        latest = group.latest
        if latest is None or not latest.log_files:
            continue
        if gid in blocked:
            skipped_blocked += 1
            continue
        candidates.append(
            CompactionOperation(
                base_instant_time=latest.base_instant,
                file_id=gid.file_id,
                partition_path=gid.partition_path,
                data_file_path=latest.base_file.file_name if latest.base_file else None,
                delta_file_paths=tuple(lf.file_name for lf in latest.log_files),
                metrics=config.capture_metrics(latest),
            )
        )
    operations = config.order_and_filter(candidates)
    if not operations:
        why = f"no file slice with log files for strategy {config.strategy.value}"
        if skipped_blocked:
            why += f" ({skipped_blocked} file group(s) held by pending compaction or clustering)"
        return PlanResult(None, why)
    plan = CompactionPlan(operations=tuple(operations), preserve_hoodie_metadata=False)
    return PlanResult(
        plan, f"{len(operations)} of {len(candidates)} candidate slice(s) planned by {config.strategy.value}"
    )


def schedule_compaction(
    storage: Storage,
    lock: LockProvider,
    *,
    config: CompactionConfig | None = None,
    trigger: TriggerConfig | None = None,
    time_generator: InstantTimeGenerator | None = None,
    view: Table | None = None,
    preview: bool = False,
) -> ScheduleResult:
    """Plan and request a compaction now.

    With ``trigger`` the trigger must fire first (hoodied's own scheduling); without, the plan is made
    whenever there is something to compact (``hoodied compact --mode schedule``). Trigger and plan are
    first decided on a view read without the lock, at a provisional time: when nothing is due, no instant
    time is taken and the lock is never held. Otherwise the lock is taken, the instant time generated (with
    the clock-skew wait), and the plan made again on the view read under the lock, which the lock holds from
    the instant time to the requested file, so no write can complete in between unseen.

    ``preview``: decide as above on the view and write nothing
    (:func:`~hoodie.write.service_instant.request_planned`).
    """
    config = config or CompactionConfig()
    generator = time_generator or InstantTimeGenerator()
    table = view if view is not None else Table.load(storage)
    check_compactable(table)
    decision = None
    if trigger is not None:
        decision = evaluate_trigger(table.timeline, trigger, generator.now_in_zone(table.config))
        if not decision.fire:
            return ScheduleResult(None, None, decision.reason, decision)

    def request(view: Table, instant_time: str, plan: CompactionPlan) -> Instant:
        content = encode_compaction_plan(plan, table_version=view.config.table_version)
        return TimelineWriter(storage, view.config, lock).request(COMPACTION, instant_time, content)

    instant, result = request_planned(
        storage,
        lock,
        table,
        generator,
        what="compaction",
        plan=lambda view, t: plan_compaction(view, t, config),
        request=request,
        preview=preview,
    )
    return ScheduleResult(instant, result.plan, result.reason, decision)


__all__ = [
    "MetadataTableNotSupported",
    "PlanResult",
    "ScheduleResult",
    "blocked_file_groups",
    "check_compactable",
    "plan_compaction",
    "schedule_compaction",
    "scheduling_conflict",
]
