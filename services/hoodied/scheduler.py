"""Scheduling: deciding, per table, whether a service is due and requesting its instant (Hudi's strategies and
triggers, through each service's :meth:`~hoodie.table_service.TableService.schedule`).

A table is considered when its timeline changed since the last decision, or every ``reschedule_interval``
(time-based triggers). After the services it schedules, the services without instants that the table runs
(archival) do their work, under the same claim. One replica schedules a table at a time (the table's
``schedule`` claim); each service schedules under the table lock. A service that cannot be scheduled (a
read-only table, a lock that timed out, a bad setting) is logged and recorded in
:attr:`WatchedTable.schedule_error`; the other services and the poll go on.

An operator's ``hoodied ctl trigger`` (:mod:`hoodied.control`) makes the table due at once and schedules its
service without consulting the trigger (planned when there is anything to plan, whether or not hoodied
schedules that service on the table); the command is then consumed, and what came of it is written to the
table's history. A paused or draining table is not scheduled at all.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from hoodie.registry import MAINTENANCE, service_named
from hoodie.table import Table
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodied.config import DaemonConfig
from hoodied.control import ControlStore, Note, TableControl
from hoodied.coordination import SCHEDULE_CLAIM, Coordination
from hoodied.errors import ClaimHeld
from hoodied.history import append, control_record
from hoodied.logs import log_context
from hoodied.metrics import Metrics
from hoodied.work import WatchedTable, table_settings

logger = logging.getLogger(__name__)


class Scheduler:
    """Schedules the services a table's ``schedule`` names (see the module docstring)."""

    def __init__(
        self,
        config: DaemonConfig,
        coordination: Coordination,
        metrics: Metrics,
        stopping: threading.Event,
        *,
        control: ControlStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.coordination = coordination
        self.metrics = metrics
        self._stopping = stopping
        self._control = control
        self._clock = clock

    def due(self, table: WatchedTable) -> bool:
        now = self._clock()
        if not table.control.claims_allowed:
            return False
        if table.control.triggers:
            return True
        if (
            table.listing != table.scheduled_listing
            or now - table.scheduled_at >= self.config.reschedule_interval
        ):
            table.scheduled_at = now
            return True
        return False

    def schedule(self, table: WatchedTable) -> bool:
        """Schedule what is due on ``table``; true when something was scheduled. A service that cannot be
        scheduled (a read-only table, a lock that timed out, a bad setting) is logged and recorded in
        :attr:`WatchedTable.schedule_error`; the other services and the poll go on."""
        assert table.config is not None
        storage = table.storage
        maintenance = self.maintenance(table)
        triggers = {s: n for s, n in table.control.triggers.items() if s in table.settings.services}
        if not table.settings.schedule and not maintenance and not triggers:
            return False
        try:
            claim = self.coordination.claim(storage, table.key, SCHEDULE_CLAIM)
        except ClaimHeld:
            logger.debug("another replica is scheduling %s", table.name)
            return False
        except Exception as e:
            self._failed(table, "any service", e)
            return False
        scheduled = False
        errors = False
        try:
            generator = InstantTimeGenerator()
            for service, note in triggers.items():
                if self._stopping.is_set():
                    break
                scheduled |= self._triggered(table, service, note, generator)
            for service in table.settings.schedule:
                if self._stopping.is_set():
                    break
                if service in triggers:
                    continue
                try:
                    instant, reason = self._schedule_one(table, service, generator)
                except Exception as e:
                    errors = True
                    self._failed(table, service, e)
                    continue
                table.schedule_reasons[service] = reason
                if instant is not None:
                    scheduled = True
                    self.metrics.instants_scheduled.labels(table=table.name, action=service).inc()
                    with log_context(action=service, instant=instant.time):
                        logger.info("scheduled %s %s on %s: %s", service, instant.time, table.name, reason)
                else:
                    logger.debug("no %s scheduled on %s: %s", service, table.name, reason)
            for service in maintenance:
                if self._stopping.is_set():
                    break
                try:
                    scheduled |= self._maintain(table, service)
                except Exception as e:
                    errors = True
                    self._failed(table, service, e)
        finally:
            claim.release()
        if not errors:
            table.schedule_error = None
        return scheduled

    def _triggered(
        self, table: WatchedTable, service: str, note: Note, generator: InstantTimeGenerator
    ) -> bool:
        """Schedule ``service`` for an operator's trigger, consume the trigger and record what came of it."""
        try:
            instant, reason = self._schedule_one(table, service, generator, respect_trigger=False)
        except Exception as e:
            self._failed(table, service, e)
            instant, reason = None, f"cannot schedule: {type(e).__name__}: {e}"
        outcome = f"scheduled {instant.time}" if instant is not None else f"nothing scheduled: {reason}"
        table.schedule_reasons[service] = f"triggered by {note.by}: {outcome}"
        with log_context(action=service, **({"instant": instant.time} if instant is not None else {})):
            logger.info(
                "trigger of %s on %s by %s (%s): %s", service, table.name, note.by, note.reason, outcome
            )
        if instant is not None:
            self.metrics.instants_scheduled.labels(table=table.name, action=service).inc()
        self.metrics.control_commands.labels(table.name, "triggered").inc()
        if self._control is not None:

            def consume(c: TableControl) -> TableControl:
                if c.triggers.get(service) != note:
                    return c  # a newer trigger: left for the next poll
                return replace(c, triggers={k: v for k, v in c.triggers.items() if k != service})

            try:
                table.control = self._control.update(table.key, consume)
            except Exception as e:
                logger.error("could not consume the trigger of %s on %s: %s", service, table.name, e)
        append(
            table.storage,
            control_record(
                table.name,
                self.config.replica,
                "triggered",
                by=note.by,
                reason=f"{note.reason}: {outcome}" if note.reason else outcome,
                service=service,
                instant=instant.time if instant is not None else "",
            ),
            keep=self.config.admin.history_keep,
        )
        return instant is not None

    def maintenance(self, table: WatchedTable) -> list[str]:
        """The services without instants ``table`` runs (archival) that may have work on its last view, in
        registry order (decided without I/O: an idle table costs no claim)."""
        if table.config is None or table.timeline is None:
            return []
        view = Table(table.storage, table.config, table.timeline)
        out = []
        for name in MAINTENANCE:
            if name not in table.settings.services:
                continue
            try:
                if service_named(name).maintenance_due(view, table_settings(table)):
                    out.append(name)
            except Exception as e:
                self._failed(table, name, e)
        return out

    def _maintain(self, table: WatchedTable, name: str) -> bool:
        """Run one service without instants on ``table``; true when it changed the timeline."""
        assert table.config is not None
        assert table.timeline is not None
        service = service_named(name)
        storage, config = table.storage, table.config
        if service.applies_to(config) is not None:
            return False
        lock = self.coordination.table_lock(table.name, storage, config, table.settings.hoodie)
        done = service.maintain(Table(storage, config, table.timeline), lock, table_settings(table))
        if done.items:
            self.metrics.instants_archived.labels(table=table.name).inc(done.items)
        if done.changed:
            with log_context(action=name):
                logger.info("%s on %s: %s", name, table.name, done.summary)
        else:
            logger.debug("%s on %s: %s", name, table.name, done.summary)
        return done.changed

    def _failed(self, table: WatchedTable, service: str, e: BaseException) -> None:
        message = f"cannot schedule {service}: {type(e).__name__}: {e}"
        if message != table.schedule_error:
            logger.error("table %s (%s): %s", table.name, table.uri, message)
        table.schedule_error = message

    def _schedule_one(
        self, table: WatchedTable, name: str, generator: InstantTimeGenerator, *, respect_trigger: bool = True
    ) -> tuple[Instant | None, str]:
        """Schedule one service on ``table`` if its trigger fires and there is something to plan."""
        assert table.config is not None
        assert table.timeline is not None
        service = service_named(name)
        storage, config = table.storage, table.config
        not_here = service.applies_to(config)
        if not_here is not None:
            return None, not_here
        lock = self.coordination.table_lock(table.name, storage, config, table.settings.hoodie)
        view = Table(storage, config, table.timeline)
        scheduled = service.schedule(
            view, lock, table_settings(table), generator, respect_trigger=respect_trigger
        )
        if scheduled.files_deleted:
            self.metrics.files_deleted.labels(table=table.name, action="rollback").inc(
                scheduled.files_deleted
            )
        return scheduled.instant, scheduled.reason


__all__ = ["Scheduler"]
