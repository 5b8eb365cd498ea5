"""Timeline file contents: every real file of every fixture table decodes, re-encodes and reads back; what we
write reads with Hudi's own schemas; v6 JSON and Avro come out byte for byte as Hudi wrote them."""

from __future__ import annotations

import dataclasses
import io
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import fastavro
import pytest

from hoodie.avro import load_schema
from hoodie.avro.container import MAGIC, read_container, write_single_record
from hoodie.errors import CorruptTimelineFile, PathOutsideTable, UnsupportedTable
from hoodie.timeline import metadata as md
from hoodie.timeline.instant import State

if TYPE_CHECKING:
    from conftest import FixtureTable, FixtureTables, ReferenceSchemas, TimelineFile

pytestmark = pytest.mark.fixtures

Decoder = Callable[[bytes], Any]
Encoder = Callable[[Any], bytes]


def codec_for(f: TimelineFile, table_version: int) -> tuple[str, Decoder, Encoder]:
    """Which decoder and encoder a timeline file's action and state call for."""
    action, state, v = f.instant.action, f.instant.state, table_version
    if action in ("commit", "deltacommit") or (action == "replacecommit" and state is not State.REQUESTED):
        return (
            "commit metadata",
            lambda d: md.decode_commit_metadata(d, table_version=v, action=action),
            lambda x: md.encode_commit_metadata(x, table_version=v, action=action),
        )
    if action in ("replacecommit", "clustering"):
        return (
            "requested replace",
            md.decode_requested_replace_metadata,
            lambda x: md.encode_requested_replace_metadata(x, table_version=v),
        )
    if action in ("compaction", "logcompaction"):
        return (
            "compaction plan",
            md.decode_compaction_plan,
            lambda x: md.encode_compaction_plan(x, table_version=v),
        )
    if action == "clean" and state is State.COMPLETED:
        return (
            "clean metadata",
            md.decode_clean_metadata,
            lambda x: md.encode_clean_metadata(x, table_version=v),
        )
    if action == "clean":
        return "cleaner plan", md.decode_cleaner_plan, lambda x: md.encode_cleaner_plan(x, table_version=v)
    if action == "rollback" and state is State.COMPLETED:
        return (
            "rollback metadata",
            md.decode_rollback_metadata,
            lambda x: md.encode_rollback_metadata(x, table_version=v),
        )
    if action == "rollback":
        return "rollback plan", md.decode_rollback_plan, lambda x: md.encode_rollback_plan(x, table_version=v)
    if action == "indexing" and state is State.COMPLETED:
        return (
            "index commit metadata",
            md.decode_index_commit_metadata,
            lambda x: md.encode_index_commit_metadata(x, table_version=v),
        )
    if action == "indexing":
        return "index plan", md.decode_index_plan, lambda x: md.encode_index_plan(x, table_version=v)
    if action == "savepoint":
        return (
            "savepoint metadata",
            md.decode_savepoint_metadata,
            lambda x: md.encode_savepoint_metadata(x, table_version=v),
        )
    raise AssertionError(f"no decoder for {f.path}")


def supported(tables: list[FixtureTable]) -> list[FixtureTable]:
    return [t for t in tables if t.table_version in (6, 8, 9)]


# Kinds of content seen across all fixture tables (filled by the per-table test, checked at the end).
COVERAGE: Counter[str] = Counter()


def test_every_timeline_file_decodes_and_round_trips(
    fixture_table_zip: str, fixture_tables: FixtureTables
) -> None:
    tables = fixture_tables.load(fixture_table_zip)
    assert tables, f"no table in {fixture_table_zip}"
    COVERAGE["zips"] += 1
    for table in tables:
        if table.table_version not in (6, 8, 9):
            with pytest.raises(UnsupportedTable, match=str(table.table_version)):
                md.decode_commit_metadata(b"{}", table_version=table.table_version, action="commit")
            continue
        for f in table.timeline:
            if not f.data:
                continue
            kind, decode, encode = codec_for(f, table.table_version)
            form = "avro" if f.data[:4] == MAGIC else "json"
            value = decode(f.data)
            again = encode(value)
            assert decode(again) == value, f"{f.path}: re-encoded {kind} decodes differently"
            COVERAGE[f"{kind} ({form}, v{table.table_version}, {f.instant.state.name.lower()})"] += 1
            COVERAGE[kind] += 1
            if table.is_metadata_table:
                COVERAGE["metadata table"] += 1
            if form == "json":
                # Jackson's exact bytes, from the remembered layout.
                assert again == f.data, f"{f.path}: JSON re-encoding differs from Hudi's bytes"
                continue
            original = read_container(f.data)
            ours = read_container(again)
            assert ours.schema_name == original.schema_name
            schema = load_schema(original.schema_name, table.table_version)
            if schema.java_json == original.schema_json:
                # Same schema as Hudi's writer: with its sync marker we write the very same file.
                rewritten = write_single_record(ours.record, schema, sync_marker=original.sync_marker)
                assert rewritten == f.data, f"{f.path}: Avro re-encoding differs from Hudi's bytes"
                COVERAGE["avro byte-identical"] += 1


def test_fresh_v6_json_matches_hudi_0_14_bytes(fixture_table_zip: str, fixture_tables: FixtureTables) -> None:
    """Metadata built from scratch (no remembered layout) comes out exactly as Hudi 0.14 wrote it: Jackson's
    printer, HoodieWriteStat's field order, java.util.HashMap's key order."""
    for table in supported(fixture_tables.load(fixture_table_zip)):
        for f in table.timeline:
            if f.data[:1] != b"{" or table.table_version != 6:
                continue
            decoded = md.decode_commit_metadata(f.data, table_version=6, action=f.instant.action)
            stats = decoded.write_stats
            if stats and (stats[0].json_keys or ("",))[0] != "fileId":
                continue  # written by Hudi 1.x in v6 mode: another field order
            fresh = dataclasses.replace(
                decoded,
                json_keys=None,
                partition_to_write_stats={
                    p: tuple(dataclasses.replace(s, json_keys=None) for s in ss)
                    for p, ss in decoded.partition_to_write_stats.items()
                },
            )
            out = md.encode_commit_metadata(fresh, table_version=6, action=f.instant.action)
            assert out == f.data, f"{f.path}: fresh encoding differs from Hudi's bytes"
            COVERAGE["fresh v6 json byte-identical"] += 1


REFERENCE_SETS = {6: ("hudi-0.15.0",), 8: ("hudi-1.0.0-branchpoint", "hudi-master"), 9: ("hudi-master",)}


def _project(reference: Any, ours: Any) -> Any:
    """``ours`` reduced to the shape of ``reference`` (the fields a reader schema knows)."""
    if isinstance(reference, dict) and isinstance(ours, dict):
        return {k: _project(v, ours.get(k)) for k, v in reference.items()}
    if isinstance(reference, list) and isinstance(ours, list) and len(reference) == len(ours):
        return [_project(r, o) for r, o in zip(reference, ours, strict=True)]
    return ours


def test_what_we_write_reads_with_hudis_schemas(
    fixture_table_zip: str, fixture_tables: FixtureTables, reference_schemas: dict[str, ReferenceSchemas]
) -> None:
    for table in supported(fixture_tables.load(fixture_table_zip)):
        for f in table.timeline:
            if f.data[:4] != MAGIC:
                continue
            _, decode, encode = codec_for(f, table.table_version)
            ours = encode(decode(f.data))
            record = read_container(ours)
            for set_name in REFERENCE_SETS[table.table_version]:
                reader = reference_schemas[set_name].parsed(record.schema_name)
                with io.BytesIO(ours) as fo:
                    [as_hudi_reads_it] = list(fastavro.reader(fo, reader_schema=reader))
                assert as_hudi_reads_it == _project(as_hudi_reads_it, record.record), f.path
                COVERAGE[f"reads with {set_name}"] += 1


def test_coverage_of_content_kinds(fixture_table_zips: list[str]) -> None:
    """Runs after the per-table tests: the fixtures exercised every kind of content they hold."""
    if not fixture_table_zips or COVERAGE["zips"] != len(fixture_table_zips):
        pytest.skip("the per-table tests did not all run (fixtures absent or deselected)")
    for kind in (
        "commit metadata (json, v6, completed)",
        "commit metadata (json, v6, inflight)",
        "commit metadata (avro, v8, completed)",
        "commit metadata (avro, v9, inflight)",
        "commit metadata (avro, v8, requested)",
        "requested replace",
        "compaction plan",
        "cleaner plan",
        "clean metadata",
        "rollback plan",
        "rollback metadata",
        "index plan",
        "index commit metadata",
        "metadata table",
        "avro byte-identical",
        "fresh v6 json byte-identical",
        "reads with hudi-0.15.0",
        "reads with hudi-1.0.0-branchpoint",
        "reads with hudi-master",
    ):
        assert COVERAGE[kind] > 0, f"no fixture exercised {kind}"


# ---------------------------------------------------------------------------------------------------------
# The byte vectors


def test_v6_commit_vector(fixture_vectors: Any) -> None:
    data = (fixture_vectors / "metadata" / "v6_commit.json").read_bytes()
    m = md.decode_commit_metadata(data, table_version=6, action="commit")
    assert m.operation_type == "UPSERT"
    assert m.compacted is False
    assert not m.replace
    assert list(m.partition_to_write_stats) == [""]
    [stat] = m.write_stats
    assert stat.file_id == "a079bdb3-731c-4894-b855-abfcd6921007-0"
    assert stat.path == "a079bdb3-731c-4894-b855-abfcd6921007-0_0-203-274_20240418173551906.parquet"
    assert stat.file_name == stat.path
    assert stat.prev_commit == "20240418173550988"
    assert (stat.num_writes, stat.num_deletes, stat.num_update_writes, stat.num_inserts) == (4, 0, 1, 1)
    assert stat.total_write_bytes == stat.file_size_in_bytes == 441520
    assert stat.partition_path == ""
    assert (stat.cdc_stats, stat.temp_path, stat.min_event_time) == (None, None, None)
    assert stat.runtime_stats == md.RuntimeStats(
        total_scan_time=0, total_upsert_time=105, total_create_time=0
    )
    assert not stat.is_delta
    assert m.written_file_paths == (stat.path,)
    assert (m.schema or "").startswith('{"type":"record","name":"v6_nonpartitioned_record"')
    assert md.encode_commit_metadata(m, table_version=6, action="commit") == data


def test_v8_deltacommit_vector(fixture_vectors: Any) -> None:
    data = (fixture_vectors / "metadata" / "v8_deltacommit.avro").read_bytes()
    m = md.decode_commit_metadata(data, table_version=8, action="deltacommit")
    assert m.operation_type == "UPSERT"
    assert m.compacted is False
    assert m.version is None
    assert sorted(m.partition_to_write_stats) == ["city=chennai", "city=san_francisco", "city=sao_paulo"]
    [sf] = m.partition_to_write_stats["city=san_francisco"]
    assert sf.file_id == "87a4c895-1f59-4518-972f-27f49a92c7b4-0"
    assert (
        sf.path
        == "city=san_francisco/87a4c895-1f59-4518-972f-27f49a92c7b4-0_0-252-389_20250713011913147.parquet"
    )
    assert sf.prev_commit == "null"
    assert (sf.num_writes, sf.num_inserts, sf.num_updates, sf.file_size_in_bytes) == (4, 4, 0, 436413)
    assert sf.runtime_stats == md.RuntimeStats(0, 0, 87)
    assert (sf.total_log_files, sf.log_files) == (None, None)
    assert sum(s.num_inserts or 0 for s in m.write_stats) == 8
    assert '"name":"v8_trips_8i1u_record"' in (m.schema or "")
    again = md.encode_commit_metadata(m, table_version=8, action="deltacommit")
    schema = load_schema("HoodieCommitMetadata", 8)
    sync = read_container(data).sync_marker
    assert write_single_record(read_container(again).record, schema, sync_marker=sync) == data


# ---------------------------------------------------------------------------------------------------------
# Bad input


def test_commit_json_that_is_not_an_object_is_corrupt(fixture_vectors: Any) -> None:
    folder = fixture_vectors / "bad-input" / "commits_with_invalid_content" / ".hoodie"
    with pytest.raises(CorruptTimelineFile, match=r"JSON is a list, expected an object"):
        md.decode_commit_metadata(
            (folder / "20240402144910683.commit").read_bytes(), table_version=6, action="commit"
        )
    # The empty completed commit beside it is empty metadata, as Hudi reads it.
    empty = (folder / "20240402123035233.commit").read_bytes()
    assert md.decode_commit_metadata(empty, table_version=6, action="commit") == md.CommitMetadata()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01garbage", "neither an Avro container nor JSON"),
        (b"{not json", "neither an Avro container nor JSON"),
        (b'"a string"', "JSON is a string"),
        (b"\xff\xfe{}", "neither an Avro container nor JSON"),
        (b'{"partitionToWriteStats": []}', "partitionToWriteStats is a list"),
        (b'{"partitionToWriteStats": {"p": {}}}', "write stats of partition 'p' are a object"),
        (b'{"partitionToWriteStats": {"p": [{"numWrites": "4"}]}}', "'numWrites' is a string"),
        (b'{"partitionToWriteStats": {"p": [7]}}', "is a number, expected an object"),
        (b'{"extraMetadata": {"schema": 1}}', "'extraMetadata' is a object, expected a map of strings"),
        (b'{"compacted": "no"}', "'compacted' is a string, expected a boolean"),
        (b"Obj\x01\x02", "truncated"),
    ],
)
def test_corrupt_commit_metadata(content: bytes, message: str) -> None:
    with pytest.raises(CorruptTimelineFile, match=message):
        md.decode_commit_metadata(content, table_version=8, action="commit")


def test_plan_of_the_wrong_kind_is_corrupt() -> None:
    plan = md.encode_index_plan(md.IndexPlan((md.IndexPartitionInfo("files"),)), table_version=8)
    with pytest.raises(
        CorruptTimelineFile, match="expected an Avro HoodieCommitMetadata, found HoodieIndexPlan"
    ):
        md.decode_commit_metadata(plan, table_version=8, action="commit")
    with pytest.raises(CorruptTimelineFile, match="expected an Avro HoodieCompactionPlan"):
        md.decode_compaction_plan(plan)
    with pytest.raises(CorruptTimelineFile, match="compaction plan is empty"):
        md.decode_compaction_plan(b"")
    with pytest.raises(CorruptTimelineFile, match="not an Avro object container"):
        md.decode_cleaner_plan(b'{"policy": "KEEP_LATEST_COMMITS"}')


def test_unsupported_table_versions_are_refused() -> None:
    for version in (5, 7, 10):
        with pytest.raises(UnsupportedTable, match=f"table version {version} is not supported"):
            md.decode_commit_metadata(b"", table_version=version, action="commit")
        with pytest.raises(UnsupportedTable, match=f"table version {version}"):
            md.encode_compaction_plan(md.CompactionPlan(), table_version=version)


def test_actions_without_commit_metadata_are_refused() -> None:
    with pytest.raises(ValueError, match="'clean' instants do not hold commit metadata"):
        md.decode_commit_metadata(b"", table_version=6, action="clean")
    with pytest.raises(ValueError, match="replace commit metadata belongs to a replacecommit"):
        md.encode_commit_metadata(md.CommitMetadata(replace=True), table_version=8, action="commit")
    with pytest.raises(ValueError, match="needs replace=True"):
        md.CommitMetadata(partition_to_replace_file_ids={"p": ["f1"]})


# ---------------------------------------------------------------------------------------------------------
# Building and writing metadata


STAT = md.WriteStat(
    file_id="f1-0",
    path="2024/01/01/f1-0_0-1-2_20240101000000000.parquet",
    partition_path="2024/01/01",
    prev_commit="null",
    num_writes=10,
    num_inserts=10,
    total_write_bytes=1234,
    file_size_in_bytes=1234,
    runtime_stats=md.RuntimeStats(0, 0, 5),
)


@pytest.mark.parametrize("table_version", [6, 8, 9])
def test_fresh_replace_commit_round_trips(table_version: int) -> None:
    m = md.CommitMetadata(
        partition_to_write_stats={"2024/01/01": [STAT]},
        extra_metadata={"schema": '{"type":"record","name":"r","fields":[]}', "checkpoint": "\u00e9\x01"},
        operation_type="CLUSTER",
        compacted=False,
        partition_to_replace_file_ids={"2024/01/01": ["f0-0", "f2-0"]},
        replace=True,
    )
    data = md.encode_commit_metadata(m, table_version=table_version, action="replacecommit")
    back = md.decode_commit_metadata(data, table_version=table_version, action="replacecommit")
    if table_version == 6:
        # Jackson prints Java primitives: the stat's unset counters come back as 0.
        [stat] = back.write_stats
        assert (stat.num_deletes, stat.total_log_blocks, stat.min_event_time) == (0, 0, None)
        assert dataclasses.replace(back, partition_to_write_stats=m.partition_to_write_stats) == m
    else:
        assert back == m
    assert back.replaced_file_ids == (("2024/01/01", "f0-0"), ("2024/01/01", "f2-0"))
    assert back.written_file_paths == (STAT.path,)
    if table_version == 6:
        text = data.decode("utf-8")
        assert text.startswith(
            '{\n  "partitionToWriteStats" : {\n    "2024/01/01" : [ {\n      "fileId" : "f1-0",'
        )
        assert '"numDeletes" : 0,' in text  # Java primitives print 0, never null
        assert '"cdcStats" : null,' in text
        assert '"checkpoint" : "\u00e9\\u0001"' in text  # Jackson: raw UTF-8, upper-case \\u escapes
        assert text.endswith('"partitionToReplaceFileIds" : {\n    "2024/01/01" : [ "f0-0", "f2-0" ]\n  }\n}')
    else:
        assert read_container(data).schema_name == "org.apache.hudi.avro.model.HoodieReplaceCommitMetadata"


def test_v6_json_maps_come_out_in_java_hash_map_order() -> None:
    m = md.CommitMetadata(
        partition_to_write_stats={"10": [], "30": []},
        extra_metadata={},
        operation_type="UPSERT",
        compacted=False,
    )
    text = md.encode_commit_metadata(m, table_version=6, action="deltacommit").decode()
    # "30".hashCode() lands in bucket 13 and "10".hashCode() in bucket 15 of a 16-bucket HashMap.
    assert text.index('"30" : [ ]') < text.index('"10" : [ ]')
    assert '"extraMetadata" : { },' in text


def test_v6_json_keeps_unknown_keys_and_java_doubles() -> None:
    m = md.CommitMetadata(extra={"ratio": 1.5e10, "small": 0.001, "nested": {"val": None}}, compacted=True)
    text = md.encode_commit_metadata(m, table_version=6, action="commit").decode()
    assert '"ratio" : 1.5E10,' in text
    assert '"small" : 0.001,' in text
    assert '"nested" : {\n    "val" : null\n  }' in text
    back = md.decode_commit_metadata(text.encode(), table_version=6, action="commit")
    assert back.extra == m.extra
    assert back.compacted is True


def test_delta_write_stat_layout_for_v6() -> None:
    stat = dataclasses.replace(
        STAT, log_version=1, log_offset=0, base_file="b.parquet", log_files=[".f1-0_1.log.1"]
    )
    m = md.CommitMetadata(partition_to_write_stats={"2024/01/01": [stat]}, operation_type="UPSERT")
    text = md.encode_commit_metadata(m, table_version=6, action="deltacommit").decode()
    tail = (
        '"logVersion" : 1,\n      "logOffset" : 0,\n      "baseFile" : "b.parquet",\n'
        '      "logFiles" : [ ".f1-0_1.log.1" ],\n      "recordsStats" : {\n        "val" : null\n      }'
    )
    assert tail in text
    [back] = md.decode_commit_metadata(text.encode(), table_version=6, action="deltacommit").write_stats
    assert back.log_files == (".f1-0_1.log.1",)
    assert back.extra == {"recordsStats": {"val": None}}


def test_avro_commit_metadata_drops_nothing_it_can_hold() -> None:
    stat = dataclasses.replace(
        STAT, cdc_stats={"cdc.log": 7}, total_log_read_time_ms=3, prev_base_file="x.parquet"
    )
    m = md.CommitMetadata(partition_to_write_stats={"2024/01/01": [stat]}, version=1)
    for v in (8, 9):
        back = md.decode_commit_metadata(
            md.encode_commit_metadata(m, table_version=v, action="commit"), table_version=v, action="commit"
        )
        assert back == m


COMPACTION = md.CompactionPlan(
    operations=(
        md.CompactionOperation(
            base_instant_time="20240101000000000",
            file_id="f1-0",
            partition_path="2024/01/01",
            data_file_path="f1-0_0-1-2_20240101000000000.parquet",
            delta_file_paths=(".f1-0_20240101000000000.log.1_0-1-2",),
            metrics={"TOTAL_LOG_FILES": 1.0, "TOTAL_IO_MB": 12.5},
        ),
        md.CompactionOperation(
            base_instant_time="20240101000000000",
            file_id="f2-0",
            partition_path="2024/01/01",
            delta_file_paths=(".f2-0_20240101000000000.log.1_0-1-2",),
        ),
    ),
    extra_metadata={"k": "v"},
    strategy=md.CompactionStrategy("org.example.Compactor", {"a": "b"}),
)


@pytest.mark.parametrize("table_version", [6, 8, 9])
def test_plans_round_trip(table_version: int) -> None:
    v = table_version
    assert md.decode_compaction_plan(md.encode_compaction_plan(COMPACTION, table_version=v)) == COMPACTION

    slice_ = md.SliceInfo("f1-0", "2024/01/01", "/base/2024/01/01/f1-0_0-1-2_20240101000000000.parquet")
    clustering = md.ClusteringPlan(
        input_groups=(
            md.ClusteringGroup(slices=(slice_,), metrics={"TOTAL_IO_MB": 1.0}, num_output_file_groups=1),
        ),
        strategy=md.ClusteringStrategy("org.example.SortAndSize", {"sort": "ts"}),
        preserve_hoodie_metadata=True,
    )
    data = md.encode_clustering_plan(clustering, table_version=v)
    assert md.decode_clustering_plan(data) == clustering
    requested = md.decode_requested_replace_metadata(data)
    assert (requested.operation_type, requested.version) == ("CLUSTER", 1)
    assert slice_.data_file_name == "f1-0_0-1-2_20240101000000000.parquet"

    overwrite = md.RequestedReplaceMetadata(version=None)
    assert (
        md.decode_requested_replace_metadata(md.encode_requested_replace_metadata(overwrite, table_version=v))
        == overwrite
    )
    with pytest.raises(CorruptTimelineFile, match="holds no clustering plan"):
        md.decode_clustering_plan(md.encode_requested_replace_metadata(overwrite, table_version=v))

    cleaner = md.CleanerPlan(
        policy="KEEP_LATEST_COMMITS",
        earliest_instant_to_retain=md.ActionInstant("20240101000000000", "commit", "COMPLETED"),
        last_completed_commit_timestamp="20240102000000000",
        file_paths_to_be_deleted_per_partition={"p": (md.CleanFileInfo("/base/p/a.parquet"),)},
        extra_metadata={"x": "y"},
    )
    back = md.decode_cleaner_plan(md.encode_cleaner_plan(cleaner, table_version=v))
    assert back == cleaner
    assert back.version == 2

    clean = md.CleanMetadata(
        start_clean_time="20240103000000000",
        time_taken_in_millis=12,
        total_files_deleted=1,
        earliest_commit_to_retain="20240101000000000",
        partition_metadata={
            "p": md.CleanPartitionMetadata("p", "KEEP_LATEST_COMMITS", ("a.parquet",), ("a.parquet",))
        },
    )
    assert md.decode_clean_metadata(md.encode_clean_metadata(clean, table_version=v)) == clean

    rollback_plan = md.RollbackPlan(
        md.InstantInfo("20240104000000000", "deltacommit"),
        (
            md.RollbackRequest(
                "p", "f1-0", "20240101000000000", ("/base/p/b.parquet",), {"/base/p/.f1-0_1.log.1": 10}
            ),
        ),
    )
    assert md.decode_rollback_plan(md.encode_rollback_plan(rollback_plan, table_version=v)) == rollback_plan
    rollback = md.RollbackMetadata(
        "20240105000000000",
        3,
        1,
        ("20240104000000000",),
        {"p": md.RollbackPartitionMetadata("p", ("/base/p/b.parquet",), (), {"/base/p/.f1-0_1.log.2": 90})},
        (md.InstantInfo("20240104000000000", "deltacommit"),),
    )
    assert md.decode_rollback_metadata(md.encode_rollback_metadata(rollback, table_version=v)) == rollback

    infos = (md.IndexPartitionInfo("column_stats", "20240101000000000", {"cols": "a,b"} if v != 6 else {}),)
    assert md.decode_index_plan(md.encode_index_plan(md.IndexPlan(infos), table_version=v)) == md.IndexPlan(
        infos
    )
    commit = md.IndexCommitMetadata(infos, "BUILD")
    assert md.decode_index_commit_metadata(md.encode_index_commit_metadata(commit, table_version=v)) == commit

    savepoint = md.SavepointMetadata(
        "hoodied",
        1704067200,
        "before the migration",
        {"p": md.SavepointPartitionMetadata("p", ("a.parquet",))},
    )
    assert md.decode_savepoint_metadata(md.encode_savepoint_metadata(savepoint, table_version=v)) == savepoint


def test_fresh_plans_read_with_hudis_schemas(reference_schemas: dict[str, ReferenceSchemas]) -> None:
    savepoint = md.SavepointMetadata("me", 1, "", {"p": md.SavepointPartitionMetadata("p", ("a.parquet",))})
    for v, sets in REFERENCE_SETS.items():
        for data in (
            md.encode_compaction_plan(COMPACTION, table_version=v),
            md.encode_savepoint_metadata(savepoint, table_version=v),
        ):
            name = read_container(data).schema_name
            for set_name in sets:
                with io.BytesIO(data) as fo:
                    [record] = list(
                        fastavro.reader(fo, reader_schema=reference_schemas[set_name].parsed(name))
                    )
                assert record["version"] in (1, 2)


def test_index_partition_extra_metadata_is_not_in_the_v6_schema() -> None:
    info = md.IndexPartitionInfo("column_stats", "20240101000000000", {"cols": "a"})
    back = md.decode_index_plan(md.encode_index_plan(md.IndexPlan((info,)), table_version=6))
    assert back.index_partition_infos[0].extra_metadata == {}


# ---------------------------------------------------------------------------------------------------------
# Paths in plans


def _raw_compaction_plan(
    version: int,
    data_file: str | None,
    deltas: list[str],
    partition: str = "2024/01/01",
    file_id: str = "f1-0",
) -> bytes:
    schema = load_schema("HoodieCompactionPlan", 8)
    record = {
        "operations": [
            {
                "baseInstantTime": "20240101000000000",
                "deltaFilePaths": deltas,
                "dataFilePath": data_file,
                "fileId": file_id,
                "partitionPath": partition,
                "metrics": None,
                "bootstrapFilePath": None,
            }
        ],
        "extraMetadata": None,
        "version": version,
        "strategy": None,
        "preserveHoodieMetadata": False,
        "missingSchedulePartitions": None,
    }
    return write_single_record(record, schema)


def test_version_1_compaction_plan_paths_become_names() -> None:
    data = _raw_compaction_plan(
        1,
        "hdfs://nn:8020/warehouse/t/2024/01/01/f1-0_0-1-2_20240101000000000.parquet",
        ["file:/warehouse/t/2024/01/01/.f1-0_20240101000000000.log.1_0-1-2"],
    )
    plan = md.decode_compaction_plan(data)
    [op] = plan.operations
    assert op.data_file_path == "f1-0_0-1-2_20240101000000000.parquet"
    assert op.delta_file_paths == (".f1-0_20240101000000000.log.1_0-1-2",)
    assert (op.metrics, plan.extra_metadata, plan.version) == ({}, {}, 2)
    assert md.decode_compaction_plan(data, base_path="/warehouse/t").operations == plan.operations
    with pytest.raises(PathOutsideTable, match="not in partition '2024/01/01' of the table at '/elsewhere'"):
        md.decode_compaction_plan(data, base_path="/elsewhere")
    # Written back, it is a version 2 plan of names.
    assert read_container(md.encode_compaction_plan(plan, table_version=8)).record["version"] == 2


@pytest.mark.parametrize(
    ("version", "data_file", "deltas", "partition"),
    [
        (1, "/t/2024/01/02/f1-0_0-1-2_1.parquet", [], "2024/01/01"),  # another partition
        (1, "/t/2024/01/01/../../../etc/f1-0_0-1-2_1.parquet", [], "2024/01/01"),
        (1, "/t/2024/01/01/..", [], "2024/01/01"),
        (2, "2024/01/01/f1-0_0-1-2_1.parquet", [], "2024/01/01"),  # version 2 holds names only
        (2, None, ["../.f1-0_1.log.1_0-1-2"], "2024/01/01"),
        (2, "..", [], "2024/01/01"),
        (2, "f1-0_0-1-2_1.parquet", [], "../outside"),
        (2, "f1-0_0-1-2_1.parquet", [], "/abs"),
    ],
)
def test_compaction_plan_paths_outside_their_partition_are_refused(
    version: int, data_file: str | None, deltas: list[str], partition: str
) -> None:
    with pytest.raises(PathOutsideTable):
        md.decode_compaction_plan(_raw_compaction_plan(version, data_file, deltas, partition))


@pytest.mark.parametrize(
    ("file_id", "data_file", "deltas", "why"),
    [
        ("../f1-0", None, [], "not a file id"),
        ("a/b", None, [], "not a file id"),
        ("f1_0", None, [], "not a file id"),
        ("", None, [], "not a file id"),
        (".f1-0", None, [], "not a file id"),
        ("f1-0", "f2-0_0-1-2_20240101000000000.parquet", [], "belongs to 'f2-0'"),
        ("f1-0", None, [".f2-0_1.log.1_0-1-2"], "belongs to 'f2-0'"),
        ("f1-0", "hoodie.properties", [], "not a base or log file"),
    ],
)
def test_a_plans_file_group_is_checked_when_the_plan_is_read(
    file_id: str, data_file: str | None, deltas: list[str], why: str
) -> None:
    """Before any task writes: a file id a file name cannot carry, or files of another group, are refused."""
    raw = _raw_compaction_plan(2, data_file, deltas, file_id=file_id)
    with pytest.raises(PathOutsideTable, match=why):
        md.decode_compaction_plan(raw)


def test_file_name_in_partition() -> None:
    f = md.file_name_in_partition
    assert f("a.parquet", "p") == "a.parquet"
    assert f("/base/p/a.parquet", "p") == "a.parquet"
    assert f("s3a://bucket/base/x=1/y=2/a.parquet", "x=1/y=2", base_path="s3://bucket/base") == "a.parquet"
    assert f("/base/a.parquet", "") == "a.parquet"
    assert f("/base/a.parquet", "", base_path="file:/base") == "a.parquet"
    with pytest.raises(PathOutsideTable):
        f("/base/q/a.parquet", "p")
    with pytest.raises(PathOutsideTable):
        f("p/a.parquet", "p", allow_path=False)
    with pytest.raises(PathOutsideTable):
        f("/base/p/", "p")
    with pytest.raises(PathOutsideTable):
        f("a\\b.parquet", "p")
    with pytest.raises(PathOutsideTable):
        md.CompactionOperation("1", "f", "p", data_file_path="../a.parquet")


def test_plans_with_files_outside_their_partition_are_refused() -> None:
    bad_slice = md.ClusteringPlan(
        input_groups=(
            md.ClusteringGroup(slices=(md.SliceInfo("f1-0", "p", "/base/q/f1-0_1-2-3_1.parquet"),)),
        )
    )
    with pytest.raises(PathOutsideTable, match="clustering slice 'f1-0'"):
        md.decode_clustering_plan(md.encode_clustering_plan(bad_slice, table_version=8))
    bad_clean = md.CleanerPlan(
        policy="KEEP_LATEST_COMMITS",
        file_paths_to_be_deleted_per_partition={"p": (md.CleanFileInfo("/base/q/a"),)},
    )
    with pytest.raises(PathOutsideTable, match="cleaner plan"):
        md.decode_cleaner_plan(md.encode_cleaner_plan(bad_clean, table_version=8))
    bad_rollback = md.RollbackPlan(
        rollback_requests=(md.RollbackRequest("p", files_to_be_deleted=("/b/../p/a",)),)
    )
    with pytest.raises(PathOutsideTable, match="rollback plan"):
        md.decode_rollback_plan(md.encode_rollback_plan(bad_rollback, table_version=8))


def test_version_1_cleaner_plan_needs_full_paths_before_writing() -> None:
    v1 = md.CleanerPlan(
        policy="KEEP_LATEST_COMMITS", files_to_be_deleted_per_partition={"p": ["a.parquet"]}, version=1
    )
    with pytest.raises(ValueError, match="with_full_paths"):
        md.encode_cleaner_plan(v1, table_version=8)
    v2 = v1.with_full_paths("s3://bucket/base/")
    assert v2.version == 2
    assert v2.file_paths_to_be_deleted_per_partition == {
        "p": (md.CleanFileInfo("s3://bucket/base/p/a.parquet", False),)
    }
    assert md.decode_cleaner_plan(md.encode_cleaner_plan(v2, table_version=8)) == v2


def test_version_1_clean_metadata_keeps_names() -> None:
    schema = load_schema("HoodieCleanMetadata", 8)
    partition = {
        "partitionPath": "p",
        "policy": "KEEP_LATEST_COMMITS",
        "deletePathPatterns": ["/base/p/a.parquet"],
        "successDeleteFiles": ["/base/p/a.parquet"],
        "failedDeleteFiles": [],
        "isPartitionDeleted": None,
    }
    record = {
        "startCleanTime": "1",
        "timeTakenInMillis": 1,
        "totalFilesDeleted": 1,
        "earliestCommitToRetain": "0",
        "lastCompletedCommitTimestamp": "",
        "partitionMetadata": {"p": partition},
        "version": 1,
        "bootstrapPartitionMetadata": None,
        "extraMetadata": None,
    }
    clean = md.decode_clean_metadata(write_single_record(record, schema))
    assert clean.version == 2
    assert clean.partition_metadata["p"].success_delete_files == ("a.parquet",)
