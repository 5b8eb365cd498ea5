"""What every compaction must preserve, as one check shared by the core and the Spark tests.

Before: hudi-rs's snapshot (when hudi-rs can read the table) and ours. After: hudi-rs's snapshot and
read-optimized query equal the snapshot before on every column but ``_hoodie_file_name`` (which names the new
base file, as Hudi's compaction writes it); so do ours; time travel to the last write before the compaction
is unchanged; and the timeline holds the completed compaction whose metadata names every file it wrote with
the rows each holds.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie import Table
from hoodie.timeline.instant import COMMIT, State
from hoodie.timeline.metadata import CommitMetadata
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleResult, OracleRows, Query

IGNORED = ("_hoodie_file_name",)


def key_columns(table: Table, result: pa.Table) -> list[str]:
    if table.config.populate_meta_fields:
        return ["_hoodie_partition_path", "_hoodie_record_key"]
    fields = [*table.config.record_key_fields, *table.config.partition_fields]
    return [f for f in dict.fromkeys(fields) if f in result.column_names]


@dataclass(frozen=True)
class Before:
    ours: pa.Table
    theirs: pa.Table | None  # None where hudi-rs cannot read the table
    last_write: str | None
    ours_at_last_write: pa.Table | None
    # hudi-rs judged only after: while a v6 compaction is pending, hudi-rs 0.5.0 misses the log files that
    # writes put in the pending slice, so its snapshot then is not a reference.
    hudi_rs_after_only: bool = False


def _ask(root: Path | str, queries: list[Query]) -> list[OracleResult]:
    """Ask a new oracle (answers are cached per path, and compaction changes the table under the path)."""
    with tempfile.TemporaryDirectory(prefix="hoodie-oracle-") as work:
        return HudiOracle(Path(work)).run(root, queries)


def capture(root: Path | str, *, hudi_rs: bool = True) -> Before:
    """The reads a compaction must keep; ``hudi_rs=False``: judge hudi-rs after by our read before."""
    table = Table.open(str(root))
    writes = table.timeline.completed_writes()
    last = writes[-1].time if writes else None
    theirs = _ask(root, [Query.snapshot()])[0] if hudi_rs else None
    return Before(
        ours=table.read(),
        theirs=theirs.table if isinstance(theirs, OracleRows) else None,
        last_write=last,
        ours_at_last_write=table.read(as_of=last) if last else None,
        hudi_rs_after_only=not hudi_rs,
    )


def assert_no_stray_files(table: Table, instant_time: str, written: set[str | None], context: str) -> None:
    """Every base file of ``instant_time`` on storage is one its commit names, and its markers are gone."""
    on_storage = {
        f.path
        for f in table.storage.list("", recursive=True)
        if f.name.endswith(f"_{instant_time}.parquet") and f.path.split("/")[0] != ".hoodie"
    }
    assert on_storage == written, f"{context}: stray base files {sorted(on_storage - written)}"
    assert not table.storage.exists(f".hoodie/.temp/{instant_time}"), f"{context}: markers left behind"


def check_after(
    root: Path | str, before: Before, instant_time: str, context: str, *, writes_after: bool = False
) -> CommitMetadata:
    """Check the table after compaction ``instant_time`` completed; returns its commit metadata.

    ``writes_after``: writes landed after the compaction was planned (they sit in log files of the new slice),
    so the read-optimized query is not expected to equal the snapshot.
    """
    table = Table.open(str(root))
    instant = table.timeline.get(instant_time)
    assert instant is not None, f"{context}: compaction {instant_time} is not on the timeline"
    assert instant.state is State.COMPLETED, f"{context}: {instant} did not complete"
    assert instant.action == COMMIT
    assert table.timeline.was_compaction(instant_time)
    md = table.commit_metadata(instant)
    assert md.operation_type == "COMPACT"
    assert md.compacted is True
    assert md.extra_metadata.get("schema")
    for stat in md.write_stats:
        assert stat.path, stat
        assert stat.file_id, stat
        assert stat.path.endswith(f"_{instant_time}.parquet"), stat
        with table.storage.open_input_file(stat.path) as f:
            assert pq.read_metadata(f).num_rows == stat.num_writes, stat.path
        assert stat.prev_commit, stat
        assert stat.total_log_files_compacted, stat
    assert_no_stray_files(table, instant_time, {s.path for s in md.write_stats}, context)

    ours_after = table.read()
    ours_ro = table.read(read_optimized=True)
    keys = key_columns(table, before.ours)
    assert_same_rows(ours_after, before.ours, keys, ignore_columns=IGNORED, context=f"{context}: ours after")
    if not writes_after:
        assert_same_rows(ours_ro, before.ours, keys, ignore_columns=IGNORED, context=f"{context}: ours RO")
    if before.last_write and before.ours_at_last_write is not None:
        assert_same_rows(
            table.read(as_of=before.last_write),
            before.ours_at_last_write,
            keys,
            # A time travel to after the compaction's instant time reads its base files once it completed.
            ignore_columns=IGNORED,
            context=f"{context}: ours as of {before.last_write}",
        )
    reference = before.ours if before.hudi_rs_after_only else before.theirs
    if reference is not None:
        snap, ro = _ask(root, [Query.snapshot(), Query.read_optimized()])
        assert isinstance(snap, OracleRows), f"{context}: hudi-rs cannot read the compacted table: {snap}"
        assert isinstance(ro, OracleRows), f"{context}: hudi-rs read-optimized fails: {ro}"
        theirs_keys = key_columns(table, reference)
        results = [("snapshot", snap.table)] + ([] if writes_after else [("read-optimized", ro.table)])
        for name, result in results:
            assert_same_rows(
                result,
                reference,
                theirs_keys,
                ignore_columns=IGNORED,
                context=f"{context}: hudi-rs {name} after vs hudi-rs snapshot before",
            )
    return md
