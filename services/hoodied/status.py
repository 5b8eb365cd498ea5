"""What a replica says about its tables (``/status``, ``/api/v1``, the status page): one table's record, and
which tables a request gets.

A fleet of 100,000 tables cannot be one answer: building and encoding every table's record takes seconds
(about 20 us a table to encode alone), so a request names the tables it wants (:class:`StatusQuery`): by
name, or a page of them in name order (``offset``, ``limit``, at most :data:`DEFAULT_LIMIT` by default: every
table of a fleet that size, as before) or in urgency order (the page's most urgent). Only the selected
tables' records are built; what every table contributes is counted from the watched tables directly
(:func:`summarize`: how many, in which control state, with errors), with no record built.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import parse_qs

from hoodie.storage.redact import redact_uri
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodied.coordination import claim_name
from hoodied.urgency import urgency
from hoodied.work import WatchedTable

#: Tables per answer unless the request asks for another number.
DEFAULT_LIMIT = 1000
#: The most a request may ask for at once.
MAX_LIMIT = 10_000

Order = Literal["name", "urgency"]


@dataclass(frozen=True)
class StatusQuery:
    """Which tables an answer holds: those ``names`` (all of them that are watched), else ``limit`` tables
    from ``offset`` in ``order`` (by name; or most urgent first, then by name)."""

    names: frozenset[str] | None = None
    offset: int = 0
    limit: int = DEFAULT_LIMIT
    order: Order = "name"

    @classmethod
    def parse(cls, query: str) -> StatusQuery:
        """The query of a request's query string (``table=a&table=b``, ``offset=``, ``limit=``,
        ``order=name|urgency``); :class:`ValueError` naming what is wrong."""
        fields = parse_qs(query, keep_blank_values=True)
        unknown = set(fields) - {"table", "offset", "limit", "order"}
        if unknown:
            raise ValueError(f"unknown parameter(s): {', '.join(sorted(unknown))}")
        offset = _whole(fields, "offset", 0, 0, None)
        limit = _whole(fields, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
        order = fields.get("order", ["name"])[-1]
        if order not in ("name", "urgency"):
            raise ValueError(f"order must be name or urgency, not {order!r}")
        names = frozenset(fields["table"]) if "table" in fields else None
        return cls(names, offset, limit, "urgency" if order == "urgency" else "name")

    def to_query(self, offset: int) -> str:
        """This query's string at another ``offset`` (the next page's)."""
        parts = [f"offset={offset}", f"limit={self.limit}"]
        if self.order != "name":
            parts.append(f"order={self.order}")
        return "&".join(parts)


def _whole(fields: Mapping[str, list[str]], name: str, default: int, low: int, high: int | None) -> int:
    if name not in fields:
        return default
    text = fields[name][-1]
    if not text.isdigit() or int(text) < low or (high is not None and int(text) > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise ValueError(f"{name} must be a whole number {bound}, not {text!r}")
    return int(text)


def table_urgency(t: WatchedTable) -> float | None:
    """The highest urgency of the table's services with pending instants (None when none is pending)."""
    if not t.pending:  # most of a fleet, most of the time
        return None
    values = [urgency(s, t.backlog, t.settings.priority) for s, instants in t.pending.items() if instants]
    return max(values) if values else None


def select(tables: Sequence[WatchedTable], query: StatusQuery) -> tuple[list[WatchedTable], int | None]:
    """The tables ``query`` asks for, in its order, and the offset of the next page (None: no more)."""
    if query.names is not None:
        return [t for t in tables if t.name in query.names], None
    end = query.offset + query.limit
    if query.order == "urgency":

        def key(t: WatchedTable) -> tuple[int, float, str]:
            u = table_urgency(t)
            return (0, -u, t.name) if u is not None else (1, 0.0, t.name)

        chosen = heapq.nsmallest(end, tables, key=key)[query.offset :]
    else:
        chosen = heapq.nsmallest(end, tables, key=lambda t: t.name)[query.offset :]
    return chosen, end if end < len(tables) else None


def summarize(tables: Sequence[WatchedTable]) -> dict[str, object]:
    """What every table contributes, counted without building its record: how many there are, how many in
    each control state, and how many have an error (of the last poll or of scheduling)."""
    states: Counter[str] = Counter()
    with_errors = 0
    for t in tables:
        states[t.control.state] += 1
        if t.last_error or t.schedule_error:
            with_errors += 1
    return {"tables": len(tables), "states": dict(states), "with_errors": with_errors}


def who(holder: object) -> str:
    """A claim's holder as people read it: its replica and where it runs."""
    if isinstance(holder, Mapping):
        return f"{holder.get('replica', '?')} ({holder.get('host', '?')}:{holder.get('pid', '?')})"
    return str(holder)


def table_status(t: WatchedTable, holders: Mapping[str, Mapping[str, object]]) -> dict[str, object]:
    """One table's record (the shape :mod:`hoodied.status_page` renders); ``holders``: the claims' holders
    by ``<table key>/<claim name>``."""
    control = t.control
    note = control.note
    backlog: dict[str, object] = {}
    if t.backlog is not None and t.config is not None:
        backlog = t.backlog.to_json(InstantTimeGenerator().now_in_zone(t.config))
    return {
        "uri": redact_uri(t.uri),
        "identity": t.identity,
        "control": {
            "state": control.state,
            **({"by": note.by, "reason": note.reason, "at": note.at} if note else {}),
            "triggers": {s: n.to_json() for s, n in control.triggers.items()},
            "cancelled": {s: n.to_json() for s, n in control.cancelled.items()},
        },
        "priority": t.settings.priority,
        "max_concurrent_jobs": t.settings.max_concurrent_jobs,
        "poll_interval": t.poll_interval,
        "polled_by": t.owner,
        "poll_overran": t.overran,
        "urgency": {
            s: urgency(s, t.backlog, t.settings.priority) for s, instants in t.pending.items() if instants
        },
        "backlog": backlog,
        "pending": [
            {
                "action": s,
                "instant": i.time,
                "state": i.state.name.lower(),
                "claimed_by": who(holder)
                if (holder := holders.get(f"{t.key}/{claim_name(s, i.time)}"))
                else None,
            }
            for s, instants in t.pending.items()
            for i in instants
        ],
        "next": dict(t.next),
        "blocked": {s: code for s, (code, _) in t.blocked.items()},
        "last_error": t.last_error,
        "schedule_error": t.schedule_error,
        "held": t.held,
        "last_results": {s: o.__dict__ for s, o in t.last_results.items()},
    }


__all__ = [
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "StatusQuery",
    "select",
    "summarize",
    "table_status",
    "table_urgency",
    "who",
]
