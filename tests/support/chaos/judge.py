"""What a chaos trial must hold at its end (see :mod:`support.chaos`), each check returning the problems it
found as sentences (none: it holds) and what it counted."""

from __future__ import annotations

import json
import re
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from hoodie import Table
from hoodie.file_group.base_file import BaseFile
from hoodie.file_group.file_group import FileGroupId
from hoodie.log.log_file import LogFile
from hoodie.storage import Storage
from hoodie.timeline.archived.load import load_archived_timeline
from hoodie.timeline.instant import Instant, State
from hoodie.timeline.metadata import decode_compaction_plan, decode_requested_replace_metadata
from support.chaos.ledger import Entry, expected_rows
from support.hudi_oracle import HudiOracle, OracleRows, Query

_SERVICE_ACTIONS = frozenset({"compaction", "logcompaction", "clustering", "replacecommit", "indexing"})


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    records_checked: int = 0
    batches_acked: int = 0
    batches_failed: int = 0
    batches_unacked_committed: int = 0
    batches_unacked_lost: int = 0
    completed: Counter[str] = field(default_factory=Counter)  # table-service instants by action


def completed_times(table: Table) -> dict[str, Instant]:
    """Every completed instant, active or archived, by time."""
    out = {i.time: i for i in load_archived_timeline(table.storage, table.config).completed()}
    out.update({i.time: i for i in table.timeline.completed()})
    return out


def check_records(
    table: Table,
    seed: int,
    ledger: Mapping[int, Entry],
    verdict: Verdict,
) -> None:
    """The writer's acknowledged batches all committed, and the table holds exactly the fold of the committed
    batches: every key once, with its latest value (read by hudi-rs; a table on S3 through the store's
    environment variables, which the hudi-rs child inherits)."""
    done = completed_times(table)
    committed: list[tuple[str, int]] = []
    for number, entry in sorted(ledger.items()):
        landed = entry.instant is not None and entry.instant in done
        if entry.acked:
            verdict.batches_acked += 1
            if not landed:
                verdict.problems.append(
                    f"batch {number} was acknowledged (instant {entry.instant}) but its commit is not on the "
                    "timeline: a committed write was lost"
                )
                continue
        elif entry.failed is not None:
            verdict.batches_failed += 1
        elif landed:
            verdict.batches_unacked_committed += 1
        else:
            verdict.batches_unacked_lost += 1
        if landed:
            assert entry.instant is not None
            committed.append((entry.instant, number))
    expected = expected_rows(seed, [n for _, n in sorted(committed)])
    with tempfile.TemporaryDirectory() as work:
        result = HudiOracle(Path(work)).one(table.storage.uri, Query.snapshot())
    if not isinstance(result, OracleRows):
        verdict.problems.append(f"hudi-rs cannot read the table: {result}")
        return
    rows = result.table.select(["key", "value"])
    compare_rows(rows, expected, "hudi-rs", verdict)
    ours = table.read(columns=["key", "value"])
    compare_rows(ours, expected, "our reader", verdict)
    verdict.records_checked += len(expected)


def compare_rows(rows: pa.Table, expected: Mapping[str, int], reader: str, verdict: Verdict) -> None:
    keys = rows.column("key").to_pylist()
    values = rows.column("value").to_pylist()
    counts = Counter(keys)
    twice = sorted(k for k, n in counts.items() if n > 1)
    if twice:
        verdict.problems.append(f"{reader}: {len(twice)} key(s) read more than once, e.g. {twice[:5]}")
    got = dict(zip(keys, values, strict=True))
    missing = sorted(set(expected) - set(got))
    extra = sorted(set(got) - set(expected))
    wrong = sorted(k for k in set(got) & set(expected) if got[k] != expected[k])
    if missing:
        verdict.problems.append(f"{reader}: {len(missing)} record(s) lost, e.g. {missing[:5]}")
    if extra:
        verdict.problems.append(
            f"{reader}: {len(extra)} record(s) that should not be there, e.g. {extra[:5]}"
        )
    if wrong:
        k = wrong[0]
        verdict.problems.append(
            f"{reader}: {len(wrong)} record(s) with an old value, e.g. {k}: {got[k]} instead of {expected[k]}"
        )


#: The metadata table's base path, relative to the table's.
METADATA_FOLDER = ".hoodie/metadata"


def completed_files(storage: Storage, timeline: str) -> Counter[str]:
    """How many completed files each instant time has in the timeline folder ``timeline`` (none when the
    folder is absent: a table without a metadata table). Two for one time is a double completion: v6's
    ``T.commit`` names one file per instant, but v8+'s ``T_<completion>.commit`` lets two processes that
    each completed the instant leave a file each, and a reader then takes either."""
    names = [f.name for f in storage.list(timeline) if not f.is_dir]
    return Counter(
        i.time for i in (Instant.try_parse(n) for n in names) if i is not None and i.state is State.COMPLETED
    )


def check_single_completion(
    table: Table,
    logs: Sequence[Path],
    writer_instants: set[str],
    verdict: Verdict,
    others: Mapping[tuple[str, str], int] | None = None,
) -> None:
    """Each instant completed once: one completed file per instant on the active timeline, none both active
    and archived, and at most one run that said it completed it: the daemons' logs, and ``others``
    ((service, instant) -> how many times) from runs that do not log as a daemon (an operator's one-offs)."""
    per_time = completed_files(table.storage, table.config.timeline_path)
    twice = sorted(t for t, n in per_time.items() if n > 1)
    if twice:
        verdict.problems.append(f"instant(s) with two completed files: {twice[:5]}")
    metadata_timeline = f"{METADATA_FOLDER}/{table.config.timeline_path}"
    twice = sorted(t for t, n in completed_files(table.storage, metadata_timeline).items() if n > 1)
    if twice:
        verdict.problems.append(f"metadata table instant(s) with two completed files: {twice[:5]}")
    archived = {i.time for i in load_archived_timeline(table.storage, table.config).completed()}
    both = sorted(set(per_time) & archived)
    if both:
        verdict.problems.append(f"instant(s) both archived and on the active timeline: {both[:5]}")
    completions: Counter[tuple[str, str]] = Counter()
    done = re.compile(r"^(\w+) (\d{17}) of \S+ completed in ")
    for log in logs:
        for line in log.read_text(errors="replace").splitlines():
            if not line.startswith("{"):
                continue
            try:
                message = str(json.loads(line).get("msg", ""))
            except ValueError:
                continue
            m = done.match(message)
            if m:
                completions[(m.group(1), m.group(2))] += 1
    completions.update(others or {})
    again = sorted(k for k, n in completions.items() if n > 1)
    if again:
        verdict.problems.append(f"instant(s) completed by two runs (daemon logs, one-offs): {again[:5]}")
    for (service, _), n in completions.items():
        verdict.completed[service] += n
    for t, instant in completed_times(table).items():
        if t not in writer_instants and instant.action not in ("clean", "rollback", "savepoint", "restore"):
            verdict.completed[f"timeline:{instant.action}"] += 1


def _file_group(path: str) -> FileGroupId | None:
    partition, _, name = path.rpartition("/")
    parsed = LogFile.try_parse(name) or BaseFile.try_parse(name)
    return None if parsed is None else FileGroupId(partition, parsed.file_id)


def check_no_orphans(table: Table, verdict: Verdict) -> None:
    """After the last clean, every data file belongs to a latest file slice (nothing of failed attempts)."""
    # A table service a replica requested as it was stopping is work for the next replica, not a problem:
    # nothing of it is written yet.
    pending = [
        i
        for i in table.timeline.pending()
        if not (i.state is State.REQUESTED and i.action in _SERVICE_ACTIONS)
    ]
    if pending:
        verdict.problems.append(
            "instants still pending after the trial settled: "
            + ", ".join(f"{i.action} {i.time} ({i.state.name.lower()})" for i in pending[:5])
        )
    live: set[str] = set()
    for s in table.file_slices():
        if s.base_file_path is not None:
            live.add(s.base_file_path)
        live.update(s.log_file_paths)
    on_storage = {
        f.path
        for f in table.storage.list("", recursive=True)
        if not f.is_dir
        and not f.path.startswith(".hoodie/")
        and not f.name.startswith(".hoodie_partition_metadata")
    }
    # The clean keeps every slice of a file group a pending clustering will rewrite (hoodie.clean.plan):
    # with a clustering requested as a replica stopped, its groups' older slices stay until it has run.
    held = table.pending_clustering_file_groups()
    orphans = sorted(p for p in on_storage - live if _file_group(p) not in held)
    if orphans:
        verdict.problems.append(
            f"{len(orphans)} file(s) outside the live file slices after a clean: {orphans[:5]}"
        )
    gone = sorted(live - on_storage)
    if gone:
        verdict.problems.append(f"{len(gone)} file(s) of live slices missing from storage: {gone[:5]}")


def check_written_files_exist(table: Table, verdict: Verdict) -> None:
    """Every file a completed commit on the active timeline names (its write stats: a writer's commit, a
    compaction's, a log compaction's, a clustering's replacecommit) exists, unless a later completion took it
    out of the table legitimately: its file group was replaced (clustering), or a completed commit wrote a
    newer base file of its group (then a clean may have removed the older slice). Nothing else removes a
    committed file: a rollback or a failed-writes clean removes only files of instants that never completed,
    so a missing file here is a stale delete that landed (a paused cleaner or rollback woken late) or a
    commit that names files its run never finished writing."""
    replaced = table.replace_times()
    named: list[tuple[str, str]] = []  # (commit time, path)
    newest_base: dict[FileGroupId, str] = {}
    for instant in table.timeline.completed_writes():
        try:
            paths = table.commit_metadata(instant).written_file_paths
        except (KeyError, FileNotFoundError):  # archived since the timeline was read
            continue
        for path in paths:
            named.append((instant.time, path))
            base = BaseFile.try_parse(path.rpartition("/")[2])
            group = _file_group(path)
            if base is not None and group is not None:
                newest_base[group] = max(newest_base.get(group, ""), instant.time)
    on_storage = {f.path for f in table.storage.list("", recursive=True) if not f.is_dir}
    missing = []
    for time, path in named:
        group = _file_group(path)
        if group is None or group in replaced or newest_base.get(group, "") > time:
            continue
        if path not in on_storage:
            missing.append(f"{path} (of {time})")
    if missing:
        verdict.problems.append(
            f"{len(missing)} file(s) named by completed commits of the latest slices missing: {missing[:5]}"
        )


def check_history_complete(table: Table, seen: Mapping[str, str], verdict: Verdict) -> None:
    """Every instant seen completed during the trial (``seen``: time -> action, from the writer's ledger,
    the daemons' logs and the timeline samples of :class:`TimelineSamples`) is still completed on the active
    timeline or in the history (archived timeline, LSM history): archival moves instants, it never loses one
    (a manifest or ``_version_`` written late by a paused archiver could point at a history without them)."""
    held = completed_times(table)
    lost = sorted(f"{action} {time}" for time, action in seen.items() if time not in held)
    if lost:
        verdict.problems.append(
            f"{len(lost)} instant(s) seen completed, neither on the timeline nor in its history: {lost[:5]}"
        )


def pending_plan_groups(table: Table) -> dict[FileGroupId, list[str]]:
    """Each file group in a pending compaction, log compaction or clustering plan, with the instant times of
    every pending plan naming it (a plan whose requested file is gone names nothing)."""
    timeline = table.timeline
    out: dict[FileGroupId, list[str]] = {}
    kinds = [
        *((i, "compaction") for i in timeline.pending_compactions()),
        *((i, "compaction") for i in timeline.pending_log_compactions()),
        *((i, "clustering") for i in timeline.pending_clusterings(table_version=table.config.table_version)),
    ]
    for instant, kind in kinds:
        try:
            data = table.storage.read(timeline.file_of(instant.time, State.REQUESTED))
        except (KeyError, FileNotFoundError):
            continue
        groups: set[FileGroupId] = set()
        if kind == "compaction":
            groups = {
                FileGroupId(op.partition_path, op.file_id) for op in decode_compaction_plan(data).operations
            }
        else:
            plan = decode_requested_replace_metadata(data).clustering_plan
            if plan is not None:  # a v6 insert overwrite: no plan
                groups = {FileGroupId(s.partition_path, s.file_id) for s in plan.slices}
        for group in groups:
            out.setdefault(group, []).append(instant.time)
    return out


def plan_overlaps(table: Table) -> dict[FileGroupId, tuple[str, ...]]:
    """File groups two or more pending plans share, with those plans' instant times."""
    return {g: tuple(sorted(ts)) for g, ts in pending_plan_groups(table).items() if len(ts) > 1}


def check_plans_disjoint(table: Table, verdict: Verdict) -> None:
    """No two pending plans (compaction, log compaction, clustering; requested or inflight) share a file
    group: both would rewrite the same slice, and the second to complete would replace what the first
    wrote (Hudi's planners skip groups under a pending plan; a plan written late by a paused scheduler is
    what breaks the rule)."""
    overlaps = plan_overlaps(table)
    if overlaps:
        shown = [f"{g} in {', '.join(ts)}" for g, ts in overlaps.items()]
        verdict.problems.append(f"{len(overlaps)} file group(s) in two pending plans: {shown[:5]}")


@dataclass
class TimelineSamples:
    """What the trial saw of the table while it ran, sampled now and then (:meth:`sample`): every instant seen
    completed (for :func:`check_history_complete`), and file groups two pending plans shared in two samples
    running (a scheduler withdraws its own plan right after it landed when it overlaps an older one, so one
    sample may catch the overlap in passing; one that lasts is a violation)."""

    seen: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    samples: int = 0
    _last: dict[FileGroupId, tuple[str, ...]] = field(default_factory=dict)

    def sample(self, table: Table) -> None:
        self.samples += 1
        for instant in table.timeline.completed():
            self.seen.setdefault(instant.time, instant.action)
        overlaps = plan_overlaps(table)
        lasting = [g for g, ts in overlaps.items() if self._last.get(g) == ts]
        for g in lasting:
            problem = f"file group {g} in two pending plans {', '.join(overlaps[g])} in two samples running"
            if problem not in self.problems:
                self.problems.append(problem)
        self._last = overlaps


__all__ = [
    "METADATA_FOLDER",
    "TimelineSamples",
    "Verdict",
    "check_history_complete",
    "check_no_orphans",
    "check_plans_disjoint",
    "check_records",
    "check_single_completion",
    "check_written_files_exist",
    "completed_files",
    "completed_times",
    "pending_plan_groups",
    "plan_overlaps",
]
