"""The hudi-rs oracle: answers come back as Arrow tables, failures as values, never as a dead test run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from support.hudi_oracle import (
    NO_METADATA_TABLE,
    HudiOracle,
    OracleFailure,
    OracleRows,
    OracleTimeline,
    Query,
    patch_properties,
)


def test_patch_properties_sets_removes_and_appends() -> None:
    text = "#c\nhoodie.table.name=t\nhoodie.table.partition.fields=a\\:SIMPLE\nhoodie.x=1\n"
    patched = patch_properties(
        text, {"hoodie.table.partition.fields": "a", "hoodie.x": None, "hoodie.table.metadata.partitions": ""}
    )
    assert (
        patched
        == "#c\nhoodie.table.name=t\nhoodie.table.partition.fields=a\nhoodie.table.metadata.partitions=\n"
    )


def test_query_descriptions_name_everything() -> None:
    q = Query.incremental("1", "2", patch=NO_METADATA_TABLE)
    assert q.describe() == "incremental (1, 2] patched hoodie.table.metadata.partitions=''"
    assert Query.snapshot().patched({"k": "v"}) == Query.snapshot(patch={"k": "v"})


@pytest.mark.fixtures
def test_rows_timeline_and_cache(fixture_root: Callable[[str], Path], tmp_path: Path) -> None:
    root = fixture_root("hudi-rs/sample_table_cow_v6_nonpartitioned:v6_nonpartitioned")
    oracle = HudiOracle(tmp_path)
    timeline, snapshot = oracle.run(root, [Query.timeline(), Query.snapshot()])
    assert isinstance(timeline, OracleTimeline)
    assert [i.action for i in timeline.instants] == ["commit", "commit"]
    assert isinstance(snapshot, OracleRows)
    assert snapshot.table.column_names[:3] == [
        "_hoodie_commit_time",
        "_hoodie_commit_seqno",
        "_hoodie_record_key",
    ]
    children = oracle._counter
    first = oracle.rows(root, Query.snapshot(as_of=timeline.times[0]))
    assert isinstance(first, pa.Table)
    assert oracle._counter == children + 1
    oracle.run(root, [Query.snapshot(), Query.snapshot(as_of=timeline.times[0])])
    assert oracle._counter == children + 1, "cached answers must not start a child"


@pytest.mark.fixtures
def test_a_panic_is_a_value_and_the_batch_goes_on(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    # hudi-rs 0.5.0 panics ("not yet implemented") on local-timestamp Avro types.
    root = fixture_root("apache-hudi/trips_logical_types_json_cow_read_v8:.")
    oracle = HudiOracle(tmp_path)
    snapshot, timeline = oracle.run(root, [Query.snapshot(), Query.timeline()])
    assert isinstance(snapshot, OracleFailure)
    assert snapshot.kind == "panic"
    assert "not yet implemented" in snapshot.message
    assert isinstance(timeline, OracleTimeline)
    assert len(timeline.instants) == 2


@pytest.mark.fixtures
def test_a_child_out_of_time_fails_each_query_alone(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = fixture_root("hudi-rs/sample_table_cow_v6_nonpartitioned:v6_nonpartitioned")
    oracle = HudiOracle(tmp_path, timeout_s=0.001)
    results = oracle.run(root, [Query.snapshot(), Query.timeline()])
    assert [r.kind for r in results if isinstance(r, OracleFailure)] == ["timeout", "timeout"]


@pytest.mark.fixtures
def test_patched_copy_lists_files_instead_of_the_metadata_table(
    fixture_root: Callable[[str], Path], tmp_path: Path
) -> None:
    root = fixture_root("apache-hudi/hudi-v9-table:hudi-v9-table")
    oracle = HudiOracle(tmp_path)
    plain, patched = oracle.run(root, [Query.snapshot(), Query.snapshot(patch=NO_METADATA_TABLE)])
    # hudi-rs 0.5.0 cannot decompress the metadata table HFiles Hudi 1.1 writes; listing works.
    assert isinstance(plain, OracleFailure)
    assert "HFile" in plain.message
    assert isinstance(patched, OracleRows)
    assert patched.table.num_rows == 8
    assert (root / ".hoodie" / "metadata").is_dir(), "the source table is untouched"
    assert "files" in (root / ".hoodie" / "hoodie.properties").read_text()
