"""In what order work is taken across tables: by urgency, not only by age.

A service's lag on a table (:func:`lag`) is what it would work off, from the table's
:class:`~hoodie.backlog.Backlog`:

- compaction and log compaction: the deltacommits since the last compaction, plus one per
  :data:`LOG_BYTES_UNIT` of log bytes written since (a few big log files weigh as much as many commits);
- clustering: the small files a clustering would pick up, per :data:`SMALL_FILES_UNIT`;
- clean: the commits since the last clean;
- any other service (indexing, TTL): nothing (its instants then go by age).

The urgency of a pending instant is ``priority x (1 + lag)``: the table's ``priority`` weight (default 1)
scales it, and a table with ``priority: 0`` has urgency 0: its work runs only when no other table's is
queued. Work is ordered by urgency (highest first), then by instant time (oldest first), then by the
services' order of priority (cleans first: they free space) (:func:`order_key`).
"""

from __future__ import annotations

from typing import Final

from hoodie.backlog import Backlog

#: Log bytes that weigh as much as one deltacommit.
LOG_BYTES_UNIT: Final = 64 * 1024 * 1024
#: Small files that weigh as much as one unit of lag.
SMALL_FILES_UNIT: Final = 10


def lag(service: str, backlog: Backlog | None) -> float:
    """The lag ``service`` works off on a table with ``backlog`` (0 without a measure)."""
    if backlog is None:
        return 0.0
    if service in ("compaction", "logcompaction"):
        return backlog.delta_commits_since_compaction + backlog.log_bytes_since_compaction / LOG_BYTES_UNIT
    if service == "clustering":
        return backlog.small_files / SMALL_FILES_UNIT
    if service == "clean":
        return float(backlog.commits_since_clean)
    return 0.0


def urgency(service: str, backlog: Backlog | None, priority: float) -> float:
    """``priority x (1 + lag)`` (see the module docstring)."""
    return priority * (1.0 + lag(service, backlog))


def order_key(
    urgency_value: float, instant_time: str, service_priority: int, table_key: str
) -> tuple[float, str, int, str]:
    """Sort key of a work item: most urgent first, then oldest, then by service priority."""
    return (-urgency_value, instant_time, service_priority, table_key)


__all__ = ["LOG_BYTES_UNIT", "SMALL_FILES_UNIT", "lag", "order_key", "urgency"]
