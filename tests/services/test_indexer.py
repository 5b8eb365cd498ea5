"""Indexing as a real Spark job (local mode) and through ``hoodied index``: on generated v6 and v8 tables the
indexes the tasks build cover every key and every base file (the same records as a build in one process),
hudi-rs reads through the result, and a lost claim commits nothing; the command schedules, executes, drops
and refuses bad requests as Hudi's ``HoodieIndexer`` does."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from hoodie import Table
from hoodie.indexing.execute import (
    IndexingFailed,
    build_index_records,
    drop_index,
    index_slices,
    pending_indexing,
    schedule_indexing,
)
from hoodie.indexing.service import INDEXING as INDEXING_SERVICE
from hoodie.indexing.service import Indexing
from hoodie.lock import FileSystemLock
from hoodie.metadata.reader import METADATA_TABLE_PATH
from hoodie.storage import Storage
from hoodie.timeline.instant import INDEXING, State
from hoodied.claims import LocalClaim
from hoodied.cli import main
from hoodied.errors import ClaimLost
from hoodied.jobs import run_service_job
from support.compare import assert_same_rows
from support.hudi_oracle import HudiOracle, OracleRows, Query
from support.metadata_checks import check_metadata_table, generate_small_table

pytestmark = pytest.mark.spark

KEYS = ["_hoodie_partition_path", "_hoodie_record_key"]
INDEXES = ["column_stats", "bloom_filters", "record_index"]


def _generate(root: Path, version: int, partitions: int = 2) -> None:
    generate_small_table(root, version, partitions, seed=11)


def _hudi_rs_reads_the_same(root: Path) -> None:
    with tempfile.TemporaryDirectory() as work:
        snapshot = HudiOracle(Path(work)).one(str(root), Query.snapshot())
    assert isinstance(snapshot, OracleRows), snapshot
    assert_same_rows(snapshot.table, Table.open(str(root)).read(), KEYS, context=f"hudi-rs {root}")


def _keys(records: dict[str, list[dict[str, Any]]] | Any) -> dict[str, set[str]]:
    return {p: {r["key"] for r in recs} for p, recs in records.items()}


@pytest.mark.parametrize(("version", "partitions"), [(6, 2), (8, 0)])
def test_spark_job_builds_indexes_covering_every_key_and_file(
    spark: Any, tmp_path: Path, version: int, partitions: int
) -> None:
    root = tmp_path / "t"
    _generate(root, version, partitions)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_indexing(storage, lock, INDEXES)
    assert scheduled.instant is not None, scheduled.reason
    T = scheduled.instant.time
    table = Table.load(storage)
    slices = index_slices(table)
    in_process = build_index_records(storage, table.config, T, INDEXES, slices)

    with LocalClaim(storage, "indexing", T) as claim:
        job = run_service_job(spark, Indexing(parallelism=4), storage, lock, fence=claim.check)

    assert len(slices) > 1
    assert job.tasks == min(4, len(slices)), (job.tasks, len(slices))
    assert job.done.instant.time == T
    assert job.done.summary.startswith("built "), job.done.summary
    assert sorted(job.done.summary[len("built ") :].split(":")[0].split(", ")) == sorted(INDEXES)
    assert job.done.records == sum(len(r) for r in in_process.records.values())
    assert job.done.summary.endswith(" 0 write(s) caught up"), job.done.summary
    table = Table.open(str(root))
    done = table.timeline.get(T)
    assert done is not None
    assert done.state is State.COMPLETED
    assert done.action == INDEXING
    assert sorted(table.config.metadata_partitions) == sorted(["files", *INDEXES])
    assert table.config.props["hoodie.table.metadata.partitions.inflight"] == ""
    mdt = check_metadata_table(root, f"v{version} indexed by Spark")
    assert mdt is not None
    # The tasks' records together are the records of one build over every slice.
    stored = {p: set(mdt.read_partition(p)) for p in INDEXES}
    assert stored == _keys(in_process.records)
    live = Table.open(str(root)).read(columns=["_hoodie_record_key"]).column(0).to_pylist()
    assert len(stored["record_index"]) == len(live)
    _hudi_rs_reads_the_same(root)


def test_a_lost_claim_commits_nothing_and_the_next_run_completes(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_indexing(storage, lock, ["record_index", "column_stats"])
    assert scheduled.instant is not None
    T = scheduled.instant.time
    mdt_timeline = sorted(p.name for p in (root / METADATA_TABLE_PATH / ".hoodie" / "timeline").iterdir())

    def lost() -> None:
        raise ClaimLost(f"indexing {T}: taken over")

    with pytest.raises(ClaimLost, match="taken over"):
        run_service_job(spark, INDEXING_SERVICE, storage, lock, T, fence=lost)
    table = Table.open(str(root))
    assert [i.time for i in pending_indexing(table)] == [T]
    assert table.config.metadata_partitions == ("files",)
    inflight = table.config.props["hoodie.table.metadata.partitions.inflight"].split(",")
    assert sorted(inflight) == ["column_stats", "record_index"]
    after = sorted(p.name for p in (root / METADATA_TABLE_PATH / ".hoodie" / "timeline").iterdir())
    assert after == mdt_timeline  # no deltacommit of the indexing instant
    assert not lock.is_held
    check_metadata_table(root, "claim lost")

    job = run_service_job(spark, INDEXING_SERVICE, storage, lock)
    assert job.done.instant.time == T
    assert not pending_indexing(Table.open(str(root)))
    check_metadata_table(root, "re-run after a lost claim")
    _hudi_rs_reads_the_same(root)


def test_an_index_dropped_while_being_built_is_not_completed(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generate(root, 8, partitions=0)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    scheduled = schedule_indexing(storage, lock, ["record_index", "column_stats"])
    assert scheduled.instant is not None
    assert drop_index(storage, lock, ["record_index"]) == ["record_index"]  # as Hudi's dropindex may
    with pytest.raises(IndexingFailed, match="record_index is no longer being built"):
        run_service_job(spark, INDEXING_SERVICE, storage, lock)
    table = Table.open(str(root))
    assert [i.time for i in pending_indexing(table)] == [scheduled.instant.time]
    assert table.config.metadata_partitions == ("files",)
    check_metadata_table(root, "dropped while built")


def test_cli_schedule_execute_drop_and_bad_requests(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "t"
    _generate(root, 9)
    path = str(root)
    assert main(["index", path, "--mode", "schedule", "--index-types", "COLUMN_STATS,record_index"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scheduled indexing "), out
    assert "builds column_stats, record_index" in out, out
    T = out.split()[2].rstrip(":")
    assert main(["index", path, "--mode", "schedule", "--index-types", "column_stats"]) == 0
    assert "no indexing scheduled" in capsys.readouterr().out
    for drop in ("record_index", "files"):
        assert main(["index", path, "--mode", "dropindex", "--index-types", drop]) == 1
        err = capsys.readouterr().err
        assert f"indexing {T} is building column_stats, record_index: complete it first" in err, err
    assert main(["index", path, "--mode", "execute"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"completed indexing {T}: built column_stats, record_index: "), out
    assert main(["index", path, "--mode", "execute"]) == 0
    assert capsys.readouterr().out == f"no pending indexing on {path}\n"
    assert main(["index", path, "--mode", "schedule-and-execute", "--index-types", "bloom_filters"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("scheduled indexing "), out
    assert "builds bloom_filters" in out, out
    assert "\ncompleted indexing " in out, out
    table = Table.open(path)
    built = ["bloom_filters", "column_stats", "files", "record_index"]
    assert sorted(table.config.metadata_partitions) == built
    assert not table.timeline.pending()
    check_metadata_table(root, "cli indexed")

    assert main(["index", path, "--mode", "dropindex", "--index-types", "record_index"]) == 0
    assert capsys.readouterr().out == f"dropped record_index of {path}\n"
    assert main(["index", path, "--mode", "dropindex", "--index-types", "record_index"]) == 0
    assert capsys.readouterr().out == "no index to drop: record_index\n"
    assert "record_index" not in Table.open(path).config.metadata_partitions
    check_metadata_table(root, "record index dropped")
    _hudi_rs_reads_the_same(root)

    assert main(["index", path, "--mode", "schedule", "--index-types", "column_stats,nope"]) == 2
    err = capsys.readouterr().err
    assert "IndexingFailed: --index-types column_stats,nope: nope is not an index hoodied builds" in err, err
    assert main(["index", path, "--mode", "schedule", "--index-types", "files"]) == 2
    assert "files is not an index hoodied builds" in capsys.readouterr().err
    assert main(["index", path, "--mode", "schedule"]) == 1
    assert "--mode schedule needs --index-types" in capsys.readouterr().err
    assert main(["index", path, "--mode", "schedule", "--index-types", "column_stats", "--instant", T]) == 1
    assert "--instant names a pending indexing" in capsys.readouterr().err
    assert main(["index", path, "--mode", "execute", "--instant", "20990101000000000"]) == 0
    assert "no pending indexing 20990101000000000" in capsys.readouterr().out
    assert main(["index", path, "--mode", "execute", "--conf", "spark.foo"]) == 1
    assert "key=value" in capsys.readouterr().err
    assert main(["index", path, "--mode", "dropindex", "--index-types", "record_index,expr_index_x"]) == 2
    assert "expr_index_x is not an index hoodied drops" in capsys.readouterr().err
    assert not Table.open(path).timeline.pending()

    assert main(["index", path, "--mode", "dropindex", "--index-types", "files"]) == 0
    assert capsys.readouterr().out == f"dropped files of {path}\n"
    assert not (root / METADATA_TABLE_PATH).exists()
    assert Table.open(path).config.metadata_partitions == ()
    _hudi_rs_reads_the_same(root)
