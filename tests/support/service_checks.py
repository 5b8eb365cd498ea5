"""One way to run each table service to completion and to judge what readers see before and after it
(hudi-rs's answers; ours where hudi-rs cannot answer), shared by the service sweep over every fixture table
and the tests of tables that repeat record keys."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from hoodie import Table
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.clustering.execute import cluster_in_process
from hoodie.clustering.plan import ClusteringConfig, schedule_clustering
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.compaction.strategy import CompactionConfig, Strategy
from hoodie.config import METADATA_PARTITIONS
from hoodie.indexing.execute import INDEXABLE, run_indexing, schedule_indexing
from hoodie.lock import LockProvider
from hoodie.metadata.records import MetadataPartition
from hoodie.storage import Storage
from hoodie.table import RECORD_KEY
from support.compaction_checks import key_columns
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleRows, Query

#: Columns a rewrite changes by design: the file name of the rewritten files.
IGNORED = ("_hoodie_file_name",)
SERVICES = ("compaction", "clean", "clustering", "indexing")


@dataclass(frozen=True)
class Reads:
    """The answers about one state of the table: hudi-rs's, and ours where hudi-rs cannot answer (a few
    fixture tables it cannot read; test_conformance states their expected rows independently)."""

    snapshot: pa.Table
    read_optimized: pa.Table
    as_of: dict[str, pa.Table]
    by_hudi_rs: dict[str, bool]  # query label -> answered by hudi-rs


@dataclass(frozen=True)
class Outcome:
    service: str
    outcome: str  # "done", "nothing to do", "not applicable", "refused"
    reason: str
    seconds: float


def read_all(root: Path, times: list[str]) -> Reads:
    """The snapshot, read-optimized query and time travel to each of ``times`` (a fresh oracle: the answers
    of one are cached per path)."""
    queries = [Query.snapshot(), Query.read_optimized(), *(Query.snapshot(as_of=t) for t in times)]
    with tempfile.TemporaryDirectory(prefix="hoodie-oracle-") as work:
        answers = HudiOracle(Path(work)).run(root, queries)
    table = Table.open(str(root))
    labels = ["snapshot", "read-optimized", *times]
    ours: list[Callable[[], pa.Table]] = [
        table.read,
        lambda: table.read(read_optimized=True),
        *((lambda t=t: table.read(as_of=t)) for t in times),
    ]
    rows = [a.table if isinstance(a, OracleRows) else read() for a, read in zip(answers, ours, strict=True)]
    by_hudi_rs = {label: isinstance(a, OracleRows) for label, a in zip(labels, answers, strict=True)}
    return Reads(rows[0], rows[1], dict(zip(times, rows[2:], strict=True)), by_hudi_rs)


def judge(root: Path, before: Reads, service: str, context: str) -> Reads:
    """The answers after ``service`` equal those before (see the module doc); returns them."""
    table = Table.open(str(root))
    earliest = table.earliest_time_travel()
    times = [t for t in before.as_of if earliest is None or t >= earliest]
    after = read_all(root, times)
    for label, was in before.by_hudi_rs.items():
        if was and label in after.by_hudi_rs:
            assert after.by_hudi_rs[label], f"{context}: hudi-rs cannot answer {label} after {service}"
    keys = key_columns(table, before.snapshot)

    def same(now: pa.Table, was: pa.Table, what: str) -> None:
        assert_same_rows(
            now, was, keys, ignore_columns=IGNORED, check_types=False, context=f"{context}: {what}"
        )

    same(after.snapshot, before.snapshot, "snapshot")
    # Unchanged, or merged into the snapshot where a rewrite compacted the log files of every slice.
    merged = not any(s.log_files for s in table.file_slices())
    if service in ("compaction", "clustering") and merged:
        same(after.read_optimized, before.snapshot, "read-optimized (merged)")
    elif service not in ("compaction", "clustering"):
        same(after.read_optimized, before.read_optimized, "read-optimized")
    # (a clustering leaving log files elsewhere: the clustered groups read merged, the others as before.)
    for t in times:
        same(after.as_of[t], before.as_of[t], f"as of {t}")
    return after


def run_service(
    service: str,
    storage: Storage,
    lock: LockProvider,
    *,
    sort_columns: Sequence[str] | None = None,
    clustering: ClusteringConfig | None = None,
    indexes: Sequence[str] | None = None,
) -> tuple[str, str]:
    """Run one service to completion; (outcome, reason). Compaction: every slice with log files; clean: keep
    the latest commit; clustering: ``clustering``'s plan (default: every file group, no writer being beside
    the table, sorted by ``sort_columns``, by default the record key, so a single small file is clustered
    too); indexing:
    ``indexes`` (default: every one hoodied builds that the table lacks)."""
    if service == "compaction":
        if not Table.open(storage.uri).config.is_mor:
            return "not applicable", "a COPY_ON_WRITE table has no log files to compact"
        scheduled = schedule_compaction(storage, lock, config=CompactionConfig(strategy=Strategy.UNBOUNDED))
        if scheduled.instant is None:
            return "nothing to do", scheduled.reason
        result = compact_in_process(storage, lock, scheduled.instant.time)
        return (
            "done",
            f"{result.records_written} records in {len(result.metadata.write_stats)} slices",
        )
    if service == "clustering":
        if clustering is None:
            fields = Table.open(storage.uri).config.record_key_fields
            sort = tuple(sort_columns) if sort_columns is not None else (fields[0] if fields else RECORD_KEY,)
            clustering = ClusteringConfig(sort_columns=sort, update_strategy=UpdateStrategy.ALLOW)
        cl = schedule_clustering(storage, lock, config=clustering, respect_trigger=False)
        if cl.instant is None:
            return "nothing to do", cl.reason
        done = cluster_in_process(storage, lock, cl.instant.time)
        return "done", f"{done.file_groups_replaced} file groups replaced"
    if service == "clean":
        config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=1)
        sc = schedule_clean(storage, lock, config=config)
        if sc.instant is None:
            return "nothing to do", sc.reason
        cleaned = clean_in_process(storage, lock, sc.instant.time)
        return "done", f"{cleaned.files_deleted} files deleted"
    table = Table.open(storage.uri)
    built = set(filter(None, table.config.props.get(METADATA_PARTITIONS, "").split(",")))
    wanted = [p for p in (indexes if indexes is not None else INDEXABLE) if p not in built]
    if not table.config.partition_fields or table.config.table_version < 8:
        wanted = [p for p in wanted if p != MetadataPartition.PARTITION_STATS]
    if not wanted:
        return "nothing to do", "every index is built"
    si = schedule_indexing(storage, lock, wanted)
    if si.instant is None:
        return "nothing to do", si.reason
    indexed = run_indexing(storage, lock, si.instant.time)
    return "done", f"built {', '.join(indexed.partitions)} ({indexed.records} records)"


__all__ = ["IGNORED", "SERVICES", "Outcome", "Reads", "judge", "read_all", "run_service"]
