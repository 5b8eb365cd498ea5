"""Archival as a :class:`~hoodie.table_service.TableService`: moving old completed instants from the active
timeline into the table's history (:mod:`hoodie.archival.plan` decides which, :mod:`hoodie.archival.execute`
moves them).

Archival has no instants of its own (Hudi records no action for it), so there is nothing pending and nothing
to prepare: each run is :meth:`Archival.maintain`, which the daemon calls after a table's other services and
``hoodied archive`` on demand. A run on a table with nothing to archive reads only the view it is given and
takes no lock.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hoodie.archival.execute import archive, check_settings, due
from hoodie.errors import NothingToDo
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import Fence, Maintained, Scheduled, ServiceJob, TableService
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator


class Archival(TableService):
    name = "archival"
    priority = 9  # runs last: it moves what the other services finished
    schedulable = False
    requested_by = "archival is never scheduled: it runs after the other services of every table listing it"
    has_instants = False

    def check_settings(self, settings: Mapping[str, str]) -> None:
        check_settings(settings)

    def pending(self, table: Table) -> list[Instant]:
        return []

    def schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None = None,
        *,
        respect_trigger: bool = True,
    ) -> Scheduled:
        return Scheduled(None, "archival has no instants to schedule; it runs through maintain()")

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[Any, Any]:
        raise NothingToDo("archival has no pending instants")

    def maintenance_due(self, table: Table, settings: Mapping[str, str]) -> bool:
        return due(table, settings)

    def maintain(self, table: Table, lock: LockProvider, settings: Mapping[str, str]) -> Maintained:
        results = archive(table.storage, lock, settings, table=table)
        moved = sum(len(r.archived) for r in results)
        parts = []
        for r in results:
            where = "metadata table" if r.table != table.storage.uri else "table"
            if r.archived:
                parts.append(f"{where}: {len(r.archived)} instant(s) archived, {r.active_instants} active")
            else:
                parts.append(f"{where}: {r.reason}")
        return Maintained(bool(moved), "; ".join(parts), sum(r.files_deleted for r in results), moved)


ARCHIVAL = Archival()

__all__ = ["ARCHIVAL", "Archival"]
