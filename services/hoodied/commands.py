"""Issuing an operator command (``hoodied ctl`` and the API share this): check it against the table, write it
to the control store (:mod:`hoodied.control`), log who and why, and add it to the table's history.

A command names a table the configuration watches, and (trigger, cancel, retry) a service the table runs;
``cancel`` names an instant that is pending. Anything else is a :class:`~hoodied.control.ControlError` that
says what is wrong, and nothing is written.
"""

from __future__ import annotations

import logging

from hoodie.registry import SERVICE_NAMES, SERVICES
from hoodie.table import Table
from hoodied.control import (
    NEEDS_SERVICE,
    Command,
    ControlError,
    ControlStore,
    NotPending,
    TableControl,
    apply_command,
)
from hoodied.history import append, control_record
from hoodied.work import WatchedTable

logger = logging.getLogger(__name__)


def check_command(table: WatchedTable, command: Command, pending: dict[str, list[str]] | None) -> None:
    """Raise :class:`ControlError` when ``command`` cannot apply to ``table``; ``pending``: per service, the
    pending instant times (None: not known, not checked)."""
    service = command.service
    if command.command in NEEDS_SERVICE:
        if service not in SERVICE_NAMES:
            raise ControlError(f"{service!r} is not a service (one of {', '.join(SERVICE_NAMES)})")
        if service not in table.settings.services:
            raise ControlError(
                f"table {table.name} does not run {service} (services: {', '.join(table.settings.services)})"
            )
    if (
        command.command == "cancel"
        and pending is not None
        and service is not None
        and command.instant not in pending.get(service, [])
    ):
        raise NotPending(f"{service} {command.instant} is not pending on table {table.name}")


def pending_times(table: WatchedTable) -> dict[str, list[str]]:
    """Per service, the instants pending on the table now (read from storage)."""
    view = Table.load(table.storage)
    return {s.name: [i.time for i in s.pending(view)] for s in SERVICES if s.has_instants}


def issue(
    store: ControlStore, table: WatchedTable, command: Command, *, replica: str, history_keep: int
) -> TableControl:
    """Write ``command`` for ``table`` (checked first by the caller with :func:`check_command`); returns the
    table's control document as written."""
    written = store.update(table.key, lambda c: apply_command(c, command))
    logger.info("ctl %s on table %s", command.describe(), table.name)
    append(
        table.storage,
        control_record(
            table.name,
            replica,
            command.command,
            by=command.by,
            reason=command.reason,
            service=command.service or "",
            instant=command.instant or "",
        ),
        keep=history_keep,
    )
    return written


__all__ = ["check_command", "issue", "pending_times"]
