"""What every clustering must preserve and produce, as one check shared by the core and the Spark tests.

Before: hudi-rs's snapshot (when hudi-rs can read the table), ours, and the records and live file groups of
every file group. After: hudi-rs's snapshot and ours equal the snapshots before on every column but
``_hoodie_file_name`` (which names the new base file, as Hudi's clustering writes it); time travel to the last
write before the clustering is unchanged; the timeline holds the completed replacecommit (operation CLUSTER)
replacing exactly the plan's file groups with new ones that hold exactly their records, each file sorted by
the sort columns; the clustered partitions hold as many fewer live file groups as planned; no stray file or
marker is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie import Table
from hoodie.clustering.plan import requested_action
from hoodie.file_group.file_group import FileGroupId
from hoodie.timeline.instant import REPLACE_COMMIT, State
from hoodie.timeline.metadata import ClusteringPlan, CommitMetadata
from support.compaction_checks import IGNORED, assert_no_stray_files, key_columns
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleRows, Query


@dataclass(frozen=True)
class Before:
    ours: pa.Table
    theirs: pa.Table | None  # None where hudi-rs cannot read the table
    last_write: str | None
    ours_at_last_write: pa.Table | None
    rows_by_group: dict[FileGroupId, int]


def _hudi_rs_snapshot(root: Path | str) -> pa.Table | None:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hoodie-oracle-") as work:
        result = HudiOracle(Path(work)).run(root, [Query.snapshot()])[0]
    return result.table if isinstance(result, OracleRows) else None


def live_groups(table: Table) -> dict[str, set[str]]:
    """Live file ids by partition."""
    out: dict[str, set[str]] = {}
    for s in table.file_slices():
        out.setdefault(s.partition_path, set()).add(s.file_id)
    return out


def capture(root: Path | str, *, hudi_rs: bool = True) -> Before:
    table = Table.open(str(root))
    writes = table.timeline.completed_writes()
    last = writes[-1].time if writes else None
    rows: dict[FileGroupId, int] = {}
    for s in table.file_slices():
        merged = table.read_file_slice(s)
        rows[s.group] = 0 if merged is None else _live_rows(merged)
    return Before(
        ours=table.read(),
        theirs=_hudi_rs_snapshot(root) if hudi_rs else None,
        last_write=last,
        ours_at_last_write=table.read(as_of=last) if last else None,
        rows_by_group=rows,
    )


def _live_rows(t: pa.Table) -> int:
    if "_hoodie_is_deleted" in t.column_names:
        return int(pc.sum(pc.invert(pc.fill_null(t.column("_hoodie_is_deleted"), False))).as_py() or 0)
    return t.num_rows


def assert_sorted(t: pa.Table, columns: Sequence[str], context: str) -> None:
    """Rows ordered by ``columns`` ascending, nulls last (what a stable sort of the file gives back)."""
    if not columns or t.num_rows < 2:
        return
    order = pc.sort_indices(t, sort_keys=[(c, "ascending", "at_end") for c in columns])
    resorted = t.take(order).select(list(columns))
    assert resorted.equals(t.select(list(columns))), f"{context}: rows are not sorted by {list(columns)}"


def check_after(
    root: Path | str,
    before: Before,
    instant_time: str,
    plan: ClusteringPlan,
    context: str,
    *,
    sort_columns: Sequence[str] = (),
) -> CommitMetadata:
    """Check the table after clustering ``instant_time`` of ``plan`` completed; returns its metadata."""
    table = Table.open(str(root))
    cfg = table.config
    instant = table.timeline.get(instant_time)
    assert instant is not None, f"{context}: clustering {instant_time} is not on the timeline"
    assert instant.state is State.COMPLETED, f"{context}: {instant} did not complete"
    assert instant.action == REPLACE_COMMIT
    assert table.timeline.requested_action(instant_time) == requested_action(cfg.table_version)
    md = table.commit_metadata(instant)
    assert md.operation_type == "CLUSTER"
    assert md.replace is True
    assert md.compacted is False
    schema = md.extra_metadata.get("schema")
    assert schema, context
    assert "_hoodie_commit_time" not in schema, f"{context}: the writer schema holds meta fields"

    planned: dict[str, set[str]] = {}
    for s in plan.slices:
        planned.setdefault(s.partition_path, set()).add(s.file_id)
    assert {p: set(ids) for p, ids in md.partition_to_replace_file_ids.items()} == planned, context

    inputs = {FileGroupId(s.partition_path, s.file_id) for s in plan.slices}
    new_ids: dict[str, set[str]] = {}
    for stat in md.write_stats:
        assert stat.path, stat
        assert stat.file_id, stat
        assert stat.path.endswith(f"_{instant_time}.parquet"), stat
        assert stat.file_id.endswith("-0"), stat
        assert FileGroupId(stat.partition_path or "", stat.file_id) not in inputs, stat
        assert stat.prev_commit == "null", stat
        assert stat.num_deletes == 0, stat
        assert stat.num_update_writes == 0, stat
        assert stat.num_writes == stat.num_inserts, stat
        assert stat.runtime_stats is not None, stat
        assert stat.runtime_stats.total_create_time is not None, stat
        with table.storage.open_input_file(stat.path) as f:
            written = pq.read_table(f)
        assert written.num_rows == stat.num_writes, stat.path
        assert (stat.total_write_bytes or 0) == (stat.file_size_in_bytes or -1) > 0, stat
        if cfg.populate_meta_fields:
            names = set(written.column("_hoodie_file_name").to_pylist())
            assert names == {stat.path.rsplit("/", 1)[-1]}, f"{context}: _hoodie_file_name {names}"
        else:
            assert "_hoodie_commit_time" not in written.column_names, f"{context}: meta columns written"
        assert_sorted(written, sort_columns, f"{context}: {stat.path}")
        new_ids.setdefault(stat.partition_path or "", set()).add(stat.file_id)
    # Every record of the replaced file groups is in the new ones, once.
    expected_rows = sum(before.rows_by_group.get(g, 0) for g in inputs)
    assert sum(s.num_writes or 0 for s in md.write_stats) == expected_rows, context

    # No stray base file of the clustering, no markers.
    assert_no_stray_files(table, instant_time, {s.path for s in md.write_stats}, context)

    # The clustered partitions' live file groups: the planned ones replaced by the new ones.
    before_groups: dict[str, set[str]] = {}
    for g in before.rows_by_group:
        before_groups.setdefault(g.partition_path, set()).add(g.file_id)
    after_groups = live_groups(table)
    for partition, ids in planned.items():
        expected = (before_groups.get(partition, set()) - ids) | new_ids.get(partition, set())
        assert after_groups.get(partition, set()) == expected, f"{context}: live file groups of {partition}"
        assert len(expected) <= len(before_groups.get(partition, set())), context

    keys = key_columns(table, before.ours)
    assert_same_rows(
        table.read(), before.ours, keys, ignore_columns=IGNORED, context=f"{context}: ours after"
    )
    if before.last_write and before.ours_at_last_write is not None:
        assert_same_rows(
            table.read(as_of=before.last_write),
            before.ours_at_last_write,
            keys,
            ignore_columns=IGNORED,
            context=f"{context}: ours as of {before.last_write}",
        )
    if before.theirs is not None:
        theirs = _hudi_rs_snapshot(root)
        assert theirs is not None, f"{context}: hudi-rs cannot read the clustered table"
        assert_same_rows(
            theirs,
            before.theirs,
            key_columns(table, before.theirs),
            ignore_columns=IGNORED,
            context=f"{context}: hudi-rs snapshot after vs before",
        )
    return md
