"""Why a table's next instant of each service does or does not run: one sentence per service for ``hoodied
status``, ``/status`` and the status page, and a short code per held-back service for the
``hoodied_table_blocked_info`` metric.

Decided in this order, the first that applies wins:

1. ``held``: a pending restore holds every service;
2. ``paused`` / ``draining``: an operator's ``hoodied ctl pause|drain``;
3. with an instant pending: ``cancelled`` (``hoodied ctl cancel``, until ``retry``), ``given_up`` (retries
   exhausted or damaged data, until ``retry`` or a restart), running (here or on the claim holder),
   ``blocked`` (it waits for another instant, or it is a writer's instant left alone), ``cap`` (the table's
   ``max_concurrent_jobs`` is reached), else due, with its urgency;
4. with nothing pending: an operator's trigger waiting for the next poll, else the last scheduling's reason
   (the service's trigger: "trigger NUM_COMMITS does not fire: 3 deltacommit(s) (bound 5) ..."), else that
   hoodied does not schedule the service on this table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hoodie.registry import service_named
from hoodie.timeline.instant import Instant
from hoodied.control import ACTIVE
from hoodied.work import WatchedTable


@dataclass(frozen=True)
class RunnerView:
    """What the runner of this replica knows, as the explanation needs it."""

    running: Callable[[WatchedTable, str, str], bool]  # (table, service, instant) runs here
    given_up: Callable[[WatchedTable, str, str], str | None]  # why an instant is given up here, or None
    at_cap: Callable[[WatchedTable], bool]  # the table's job cap is reached here


@dataclass(frozen=True)
class Explanation:
    blocked: dict[str, tuple[str, str]]  # service -> (code, sentence), held back only
    next: dict[str, str]  # service -> sentence, every service the table runs


def _note_text(by: str, reason: str) -> str:
    return f"by {by}" + (f": {reason}" if reason else "")


def explain(table: WatchedTable, runner: RunnerView) -> Explanation:
    """Why each service ``table`` runs does or does not run next (see the module docstring)."""
    blocked: dict[str, tuple[str, str]] = {}
    nxt: dict[str, str] = {}
    control = table.control
    for service in table.settings.services:
        if not service_named(service).has_instants:
            continue
        pending: list[Instant] = table.pending.get(service, [])
        if table.held:
            blocked[service] = ("held", table.held)
        elif control.state != ACTIVE:
            note = control.note
            who = _note_text(note.by, note.reason) if note else ""
            blocked[service] = (control.state, f"table {control.state} {who}".strip())
        elif pending:
            blocked_reason = _pending(table, service, pending[0], runner, nxt)
            if blocked_reason is not None:
                blocked[service] = blocked_reason
        else:
            trigger = control.triggers.get(service)
            if trigger is not None:
                nxt[service] = (
                    f"triggered {_note_text(trigger.by, trigger.reason)}; scheduled at the next poll"
                )
            elif service in table.settings.schedule:
                nxt[service] = table.schedule_reasons.get(service, "scheduling not evaluated yet")
            else:
                nxt[service] = f"nothing pending; hoodied does not schedule {service} on this table"
        if service in blocked:
            nxt[service] = blocked[service][1]
    return Explanation(blocked, nxt)


def _pending(
    table: WatchedTable, service: str, first: Instant, runner: RunnerView, nxt: dict[str, str]
) -> tuple[str, str] | None:
    T = first.time
    state = first.state.name.lower()
    cancelled = table.control.is_cancelled(service, T)
    if cancelled is not None:
        return ("cancelled", f"{T} cancelled {_note_text(cancelled.by, cancelled.reason)}; hoodied ctl retry")
    given_up = runner.given_up(table, service, T)
    if given_up is not None:
        return ("given_up", f"{T} given up: {given_up}; hoodied ctl retry")
    if runner.running(table, service, T):
        nxt[service] = f"{T} running on this replica"
        return None
    foreign = table.foreign.get(T)
    if foreign is not None:
        return ("blocked", foreign)
    last = table.last_results.get(service)
    if last is not None and last.instant == T and last.kind == "deferred":
        return ("blocked", f"{T} waits: {last.message}")
    if runner.at_cap(table):
        cap = table.settings.max_concurrent_jobs
        return ("cap", f"{T} {state}: the table runs {cap} job(s) at once (max_concurrent_jobs)")
    nxt[service] = f"{T} {state}: due (urgency {table.urgency.get(service, 0.0):.1f})"
    return None


__all__ = ["Explanation", "RunnerView", "explain"]
