"""Archiving a table: moving the instants :func:`~hoodie.archival.plan.plan_archival` chose from the active
timeline into the history, crash-safe, under the table lock.

The order is Hudi's, and it is what makes a crash at any point harmless:

1. write the history (layout 2: one LSM Parquet file, then a new manifest and ``_version_``; layout 1: a new
   archive log file) -- until the manifest (or the archive file) exists nothing has changed for readers;
2. delete the archived instants' pending state files (``.requested``, ``.inflight``) and their marker folders;
3. delete their completed files one at a time, oldest first (deleting a completed file first would make a
   finished compaction or clustering look pending again);
4. layout 2: compact the LSM's levels and clean old manifests and unreferenced files.

A crash after step 1 leaves the instants both in the history and on the active timeline: readers take the
active copy, and the next run finds the same instants chosen, sees the history already holds them (the LSM
batch is listed in the manifest; the archive log holds their records) and goes on with the deletes. Nothing
is lost and nothing is written twice.

The metadata table's own timeline is archived after the data table's by the same rules with its own bounds
(``hoodie.keep.min/max.commits`` + 1, as Hudi's metadata writer configures it; it never archives at or after
the data table's first commit or earliest pending instant).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hoodie.archival.plan import (
    ArchivalConfig,
    ArchivalInputs,
    ArchivalPlan,
    MetadataTableState,
    commits,
    keep_bounds,
    plan_archival,
)
from hoodie.clean.plan import CleanConfig, CleanPolicy
from hoodie.compaction.trigger import MAX_DELTA_COMMITS, TriggerConfig
from hoodie.config import TableConfig
from hoodie.errors import HoodieError
from hoodie.failpoints import failpoint
from hoodie.lock import LockProvider, held
from hoodie.metadata.reader import METADATA_TABLE_PATH, MetadataTableConfig
from hoodie.metadata_table import has_metadata_table
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.archived import StateFile
from hoodie.timeline.archived.archive_log import read_archive_log, write_archive_log
from hoodie.timeline.archived.lsm import compact_and_clean_lsm, lsm_instants_of, write_lsm_batch
from hoodie.timeline.instant import CLEAN, COMMIT, REPLACE_COMMIT, Instant, State
from hoodie.timeline.metadata import CleanerPlan, decode_cleaner_plan
from hoodie.timeline.timeline import Timeline
from hoodie.write.late_files import removed_instants_with_late_files

logger = logging.getLogger(__name__)

#: Hudi's metadata writer: compaction after this many deltacommits (its archival bound follows it).
METADATA_MAX_DELTA_COMMITS = "hoodie.metadata.compact.max.delta.commits"
METADATA_MAX_DELTA_COMMITS_DEFAULT = 10
#: Parquet codec of the LSM history files (Hudi's write config default).
PARQUET_CODEC = "hoodie.parquet.compression.codec"


@dataclass(frozen=True)
class ArchivalResult:
    """What one archival of one table (data or metadata timeline) did."""

    table: str  # the base path archived (the data table's or its metadata table's)
    archived: tuple[Instant, ...]
    files_deleted: int
    history_file: str | None
    reason: str
    active_instants: int  # instants left on the active timeline
    lsm_compactions: int = 0


def archival_inputs(table: Table, *, data_timeline: Timeline | None = None) -> ArchivalInputs:
    """Load what the rules read beyond ``table``'s view: the latest completed clean's plan, the metadata
    table's latest compaction (for a data table that has one), and the instants a takeover removed that
    voided attempts may still land files of (a data table's; one listing of its decisions folder)."""
    timeline = table.timeline
    cleans = [i for i in timeline.completed() if i.action == CLEAN]
    plan: CleanerPlan | None = None
    if cleans:
        for state in (State.REQUESTED, State.INFLIGHT):
            try:
                data = table.storage.read(timeline.file_of(cleans[-1].time, state))
            except (KeyError, FileNotFoundError):
                continue
            if data:
                plan = decode_cleaner_plan(data)
                break
    mdt = MetadataTableState(present=False)
    if data_timeline is None and has_metadata_table(table.storage, table.config):
        mdt_storage = table.storage.child(METADATA_TABLE_PATH)
        mdt_config = MetadataTableConfig.load(mdt_storage)
        mdt_timeline = Timeline.load(mdt_storage, mdt_config)
        compactions = [i for i in mdt_timeline.completed() if i.action in (COMMIT, REPLACE_COMMIT)]
        mdt = MetadataTableState(True, compactions[-1].time if compactions else None)
    late = () if data_timeline is not None else removed_instants_with_late_files(table.storage, timeline)
    return ArchivalInputs(table, plan, mdt, data_timeline, tuple(late))


def due(table: Table, settings: Mapping[str, str]) -> bool:
    """Whether archival may have work: more commits active than the bounds keep, or a metadata table (whose
    own timeline is only known by listing it). Decided on ``table``'s view alone, with no I/O."""
    if table.config.metadata_partitions:
        return True
    archival, clean, _ = _configs(settings, metadata=False)
    _, high = keep_bounds(table, archival, clean)
    return len(commits(table.timeline)) > high


def decide(
    table: Table, settings: Mapping[str, str], *, data_timeline: Timeline | None = None
) -> ArchivalPlan:
    """The archival plan for ``table``'s view (read without the lock: an idle table costs no lock). The
    count comes first: a table within its bounds costs no read."""
    archival, clean, trigger = _configs(settings, metadata=data_timeline is not None)
    low, high = keep_bounds(table, archival, clean)
    active = len(commits(table.timeline))
    if active <= high:
        return ArchivalPlan((), f"{active} commit(s) active (<= {high} to keep)", low, high)
    return plan_archival(archival_inputs(table, data_timeline=data_timeline), archival, clean, trigger)


def archive(
    storage: Storage,
    lock: LockProvider,
    settings: Mapping[str, str],
    *,
    table: Table | None = None,
    include_metadata_table: bool = True,
) -> list[ArchivalResult]:
    """Archive the table at ``storage`` (then its metadata table's timeline): one result each.

    ``table`` is the caller's view; when it shows nothing to archive, the lock is never taken. The plan that
    is carried out is made again on a view read under the lock."""
    view = table if table is not None else Table.load(storage)
    results = [_archive_one(storage, lock, settings, view, lambda: Table.load(storage))]
    if include_metadata_table and has_metadata_table(storage, view.config):
        mdt_storage = storage.child(METADATA_TABLE_PATH)

        def load_mdt() -> Table:
            config = MetadataTableConfig.load(mdt_storage)
            return Table(mdt_storage, config, Timeline.load(mdt_storage, config))

        results.append(_archive_one(mdt_storage, lock, settings, load_mdt(), load_mdt, data=view))
    return results


def _archive_one(
    storage: Storage,
    lock: LockProvider,
    settings: Mapping[str, str],
    view: Table,
    load: Callable[[], Table],
    *,
    data: Table | None = None,
) -> ArchivalResult:
    """Archive one timeline: ``view`` is the caller's, ``load`` reads it again (under the lock); ``data`` is
    the data table's view when ``view`` is its metadata table."""
    plan = decide(view, settings, data_timeline=data.timeline if data is not None else None)
    if not plan.instants:
        return ArchivalResult(storage.uri, (), 0, None, plan.reason, len(view.timeline))
    with held(lock):
        fresh = load()
        data_timeline = data.refresh().timeline if data is not None else None
        plan = decide(fresh, settings, data_timeline=data_timeline)
        if not plan.instants:
            return ArchivalResult(storage.uri, (), 0, None, plan.reason, len(fresh.timeline))
        return _carry_out(storage, fresh, plan, settings)


def _carry_out(
    storage: Storage, table: Table, plan: ArchivalPlan, settings: Mapping[str, str]
) -> ArchivalResult:
    timeline = table.timeline
    states = _state_files(storage, timeline, plan.instants)
    archival, _, _ = _configs(settings, metadata=False)
    history_file: str | None
    if timeline.layout_version >= 2:
        rows = lsm_instants_of(states)
        codec = settings.get(PARQUET_CODEC, "gzip") or "gzip"
        history_file = write_lsm_batch(storage, table.config, rows, compression=codec)
    else:
        history_file = _write_archive_log_once(storage, table.config, states, archival.archival_batch)
    failpoint("archival.after_history")
    deleted = 0
    for state in states:
        if state.instant.state is not State.COMPLETED:
            deleted += storage.delete(f"{timeline.folder}/{state.name}")
    for time in sorted({i.time for i in plan.instants}):
        storage.delete_dir(f".hoodie/.temp/{time}")
    failpoint("archival.after_pending_deleted")
    for state in sorted(states, key=lambda s: s.instant.time):
        if state.instant.state is State.COMPLETED:
            deleted += storage.delete(f"{timeline.folder}/{state.name}")
    failpoint("archival.after_completed_deleted")
    compactions = 0
    if timeline.layout_version >= 2:
        compactions = compact_and_clean_lsm(
            storage, table.config, batch_size=archival.timeline_compaction_batch
        )
    left = len(timeline) - len({i.time for i in plan.instants})
    logger.debug(
        "archived %d instant(s) of %s (%s): %d timeline file(s) moved to %s; %d instant(s) stay active",
        len(plan.instants),
        storage.uri,
        plan.reason,
        deleted,
        history_file or "the history (already there)",
        left,
    )
    return ArchivalResult(storage.uri, plan.instants, deleted, history_file, plan.reason, left, compactions)


def _state_files(storage: Storage, timeline: Timeline, instants: Sequence[Instant]) -> list[StateFile]:
    """Every state file of the chosen instants, with its bytes and modification time (one listing)."""
    mtimes = {f.name: f.mtime_ns for f in storage.list(timeline.folder) if not f.is_dir}
    out = []
    for instant in instants:
        for state_instant, name in timeline.files.get(instant.time, ()):
            mtime = mtimes.get(name)
            modified = dt.datetime.fromtimestamp(mtime / 1e9, dt.UTC) if mtime is not None else None
            out.append(StateFile(state_instant, name, storage.read(f"{timeline.folder}/{name}"), modified))
    return out


def _write_archive_log_once(
    storage: Storage, config: TableConfig, states: Sequence[StateFile], records_per_block: int
) -> str | None:
    """Layout 1: write the states the archive log does not hold yet (a crashed run may have written them)."""
    held_states = {(e.time, e.instant.action, e.instant.state) for e in read_archive_log(storage, config)}
    missing = [s for s in states if (s.instant.time, s.instant.action, s.instant.state) not in held_states]
    if not missing:
        return None
    return write_archive_log(storage, config, missing, records_per_block=records_per_block)


def _configs(
    settings: Mapping[str, str], *, metadata: bool
) -> tuple[ArchivalConfig, CleanConfig, TriggerConfig]:
    """The data table's archival, clean and compaction-trigger settings; for its metadata table, Hudi's
    derivation (keep one more commit each way, keep two file versions, compact every
    ``hoodie.metadata.compact.max.delta.commits``)."""
    archival = ArchivalConfig.from_config(settings)
    if not metadata:
        return archival, CleanConfig.from_config(settings), TriggerConfig.from_config(settings)
    mdt_archival = ArchivalConfig(
        min_commits=archival.min_commits + 1,
        max_commits=archival.max_commits + 1,
        beyond_savepoint=archival.beyond_savepoint,
        timeline_compaction_batch=archival.timeline_compaction_batch,
        archival_batch=archival.archival_batch,
    )
    mdt_clean = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=2)
    deltas = settings.get(METADATA_MAX_DELTA_COMMITS, str(METADATA_MAX_DELTA_COMMITS_DEFAULT))
    mdt_trigger = TriggerConfig.from_config({MAX_DELTA_COMMITS: deltas})
    return mdt_archival, mdt_clean, mdt_trigger


def check_settings(settings: Mapping[str, str]) -> None:
    """Parse the archival keys so a bad one fails at start-up, naming itself."""
    try:
        _configs(settings, metadata=True)
    except ValueError as e:
        raise HoodieError(str(e)) from e


__all__ = ["ArchivalResult", "archival_inputs", "archive", "check_settings", "decide", "due"]
