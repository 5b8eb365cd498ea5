"""The table services hoodied runs, in one place: the daemon, the CLI, configuration and metrics iterate
over :data:`SERVICES` instead of naming each. Adding a service is one package in :mod:`hoodie` plus its line
here."""

from __future__ import annotations

from hoodie.archival.service import ARCHIVAL
from hoodie.clean.service import CLEAN
from hoodie.clustering.service import CLUSTERING
from hoodie.compaction.service import COMPACTION
from hoodie.errors import HoodieError
from hoodie.indexing.service import INDEXING
from hoodie.logcompaction.service import LOG_COMPACTION
from hoodie.table_service import TableService
from hoodie.ttl.service import TTL

#: Every service, in the order users see them listed (work is ordered by :attr:`TableService.priority`).
SERVICES: tuple[TableService, ...] = (
    COMPACTION,
    LOG_COMPACTION,
    CLUSTERING,
    CLEAN,
    INDEXING,
    TTL,
    ARCHIVAL,
)

#: Their names, in the same order.
SERVICE_NAMES: tuple[str, ...] = tuple(s.name for s in SERVICES)

#: The services hoodied schedules on its own.
SCHEDULABLE: tuple[str, ...] = tuple(s.name for s in SERVICES if s.schedulable)

#: The services without instants, run after the others of each table that lists them (archival).
MAINTENANCE: tuple[str, ...] = tuple(s.name for s in SERVICES if not s.has_instants)


def service_named(name: str) -> TableService:
    """The service called ``name``; :class:`~hoodie.errors.HoodieError` naming the known ones otherwise."""
    for service in SERVICES:
        if service.name == name:
            return service
    raise HoodieError(f"no table service {name!r} (one of {', '.join(SERVICE_NAMES)})")


__all__ = ["MAINTENANCE", "SCHEDULABLE", "SERVICES", "SERVICE_NAMES", "service_named"]
