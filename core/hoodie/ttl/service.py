"""Partition TTL as a :class:`~hoodie.table_service.TableService`: Hudi's ``KEEP_BY_TIME`` (or
``KEEP_BY_CREATION_TIME``) partition TTL, a ``replacecommit`` of operation ``DELETE_PARTITION`` replacing
every file group of the expired partitions.

Hudi runs a TTL as one write with no plan of its own (the requested file names no partition; the executor
decides at the instant time): hoodied requests the instant when partitions have expired
(:func:`~hoodie.ttl.plan.schedule_ttl`) and decides again at its time when it runs
(:mod:`hoodie.ttl.execute`), one task per partition (reading the keys the record index loses). The tasks
write nothing: a failed run stays pending and is resumed.

Idle polls cost no listing: when a run finds nothing expired, the service remembers (per table) the earliest
time another partition can expire; until then, and as long as the timeline does not change, scheduling
answers from memory. A write, a compaction, a clean or a restore changes the timeline and so the answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from hoodie.config import TableConfig
from hoodie.lock import LockProvider
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.table_service import Done, Fence, Scheduled, ServiceJob, TableService
from hoodie.timeline.instant import Instant
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.ttl.execute import PartitionKeys, TTLResult, TTLTask, commit_ttl, prepare_ttl, read_partition_keys
from hoodie.ttl.plan import TTLConfig, pending_ttls, schedule_ttl

logger = logging.getLogger(__name__)


class PartitionTTL(TableService):
    name = "ttl"
    priority = 1  # a timeline commit; frees space (through the clean) and blocks nothing

    def __init__(self) -> None:
        # base path -> (timeline, settings, earliest next expiry) of the last run that found nothing expired
        self._idle: dict[str, tuple[int, TTLConfig, str | None]] = {}
        self._guard = threading.Lock()

    def applies_to(self, config: TableConfig) -> str | None:
        if not config.partition_fields:
            return "only partitioned tables have partitions to expire"
        return None

    def check_settings(self, settings: Mapping[str, str]) -> None:
        difference = TTLConfig.from_config(settings).hudi_difference()
        if difference:
            logger.warning("%s", difference)

    def pending(self, table: Table) -> list[Instant]:
        return pending_ttls(table)

    def schedule(
        self,
        table: Table,
        lock: LockProvider,
        settings: Mapping[str, str],
        time_generator: InstantTimeGenerator | None = None,
        *,
        respect_trigger: bool = True,
    ) -> Scheduled:
        config = TTLConfig.from_config(settings)
        generator = time_generator or InstantTimeGenerator()
        key = table.storage.uri
        timeline = hash(table.timeline.instants)
        with self._guard:
            remembered = self._idle.get(key)
        if respect_trigger and remembered is not None and remembered[:2] == (timeline, config):
            next_expiry = remembered[2]
            if next_expiry is None or generator.provisional(table.config, table.timeline) <= next_expiry:
                when = f"before {next_expiry}" if next_expiry else "(no partition dated)"
                return Scheduled(None, f"no partition expires {when}; nothing written since the last look")
        result = schedule_ttl(
            table.storage,
            lock,
            config=config,
            respect_trigger=respect_trigger,
            time_generator=generator,
            view=table,
        )
        with self._guard:
            if result.instant is None and result.plan is not None and not result.plan.expired:
                self._idle[key] = (timeline, config, result.plan.next_expiry)
            else:
                self._idle.pop(key, None)
        return Scheduled(result.instant, result.reason)

    def prepare(
        self,
        storage: Storage,
        lock: LockProvider,
        instant_time: str | None,
        settings: Mapping[str, str],
        table: Table | None = None,
        fence: Fence | None = None,
    ) -> ServiceJob[TTLTask, PartitionKeys]:
        prepared = prepare_ttl(storage, lock, instant_time, view=table)

        def commit(results: Sequence[PartitionKeys], fence: Fence | None) -> Done:
            return _done(commit_ttl(storage, lock, prepared, results, fence=fence))

        return ServiceJob(
            self.name,
            prepared.instant,
            prepared.tasks,
            read_partition_keys,
            commit,
            in_driver=not any(t.read_keys for t in prepared.tasks),  # nothing to read: no executor
        )


def _done(result: TTLResult) -> Done:
    return Done(result.instant, result.summary())


TTL = PartitionTTL()

__all__ = ["TTL", "PartitionTTL"]
