"""Our copy of Hudi's Avro schemas, and one-record object containers read and written like Hudi's."""

from __future__ import annotations

import io
import json
from importlib import resources
from pathlib import Path
from typing import Any

import fastavro
import pytest

from hoodie.avro import NAMESPACE, load_schema, schema_set
from hoodie.avro.container import MAGIC, read_container, read_single_record, write_single_record
from hoodie.errors import CorruptTimelineFile, UnsupportedTable
from support.shared import fixtures_dir, missing_message, spec_dir

REFERENCE = spec_dir() / "avro"
VECTORS = fixtures_dir() / "vectors"
# Which of Hudi's reference folders each of our schema sets copies.
SET_SOURCES = {"v6": "hudi-0.15.0", "v8": "hudi-master"}
# The metadata-table record is the one schema whose v8 (1.0.0) and v9 (master) forms differ: one file each.
METADATA_SET_SOURCES = {"v6": "hudi-0.15.0", "v8": "hudi-1.0.0-branchpoint", "v9": "hudi-master"}
SCHEMAS = resources.files("hoodie.avro").joinpath("schemas")
OUR_FILES = sorted(p.name for p in SCHEMAS.iterdir() if p.name.endswith(".avsc"))


def strip_comments(text: str) -> str:
    """Remove ``//`` and ``/* */`` comments outside JSON strings."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end < 0 else end + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


@pytest.fixture(scope="module")
def reference() -> Path:
    if not REFERENCE.is_dir():
        pytest.skip(missing_message(REFERENCE))
    return REFERENCE


@pytest.mark.parametrize("file_name", OUR_FILES)
def test_schema_copy_is_identical_to_hudis(file_name: str, reference: Path) -> None:
    """Names, field order, types, defaults and docs: the reference file minus its comments."""
    stem, _, rest = file_name.partition(".")
    sets = [rest.removesuffix(".avsc")] if rest != "avsc" else list(SET_SOURCES)
    ours = json.loads(SCHEMAS.joinpath(file_name).read_text(encoding="utf-8"))
    sources = METADATA_SET_SOURCES if stem == "HoodieMetadata" else SET_SOURCES
    for set_name in sets:
        theirs = json.loads(strip_comments((reference / sources[set_name] / f"{stem}.avsc").read_text()))
        assert json.dumps(ours) == json.dumps(theirs), f"{file_name} differs from {sources[set_name]}"


def test_shared_files_are_shared_only_where_hudi_lines_agree(reference: Path) -> None:
    for file_name in OUR_FILES:
        stem, _, rest = file_name.partition(".")
        if rest == "avsc":
            a, b = (
                strip_comments((reference / d / f"{stem}.avsc").read_text()) for d in SET_SOURCES.values()
            )
            assert json.loads(a) == json.loads(b), f"{stem} differs between Hudi lines but is shared"


@pytest.mark.parametrize("table_version", [6, 8, 9])
@pytest.mark.parametrize(
    "name",
    [
        "HoodieCommitMetadata",
        "HoodieReplaceCommitMetadata",
        "HoodieCompactionPlan",
        "HoodieRequestedReplaceMetadata",
        "HoodieCleanerPlan",
        "HoodieCleanMetadata",
        "HoodieRollbackPlan",
        "HoodieRollbackMetadata",
        "HoodieRestorePlan",
        "HoodieRestoreMetadata",
        "HoodieIndexPlan",
        "HoodieIndexCommitMetadata",
        "HoodieSavepointMetadata",
        "HoodieArchivedMetaEntry",
    ],
)
def test_schemas_are_self_contained(name: str, table_version: int) -> None:
    schema = load_schema(name, table_version)
    assert schema.name == f"{NAMESPACE}.{name}"
    assert schema.short_name == name
    assert schema.set_name == schema_set(table_version)
    # Both the definition and the Java text stand alone: each named type defined once, at first use.
    for text in (json.dumps(schema.definition), schema.java_json):
        assert fastavro.parse_schema(json.loads(text), _write_hint=False)["name"] == schema.name
    assert load_schema(f"{NAMESPACE}.{name}", table_version) is schema


def test_set_differences() -> None:
    v6 = {f["name"] for f in _write_stat_fields(6)}
    v8 = [f["name"] for f in _write_stat_fields(8)]
    assert "runtimeStats" not in v6
    assert v8[-6:] == [
        "runtimeStats",
        "totalLogFilesCompacted",
        "totalLogReadTimeMs",
        "totalLogSizeCompacted",
        "tempPath",
        "numUpdates",
    ]
    assert (
        load_schema("HoodieCompactionPlan", 9).java_json == load_schema("HoodieCompactionPlan", 8).java_json
    )
    assert "missingSchedulePartitions" not in load_schema("HoodieCompactionPlan", 6).java_json


def _write_stat_fields(table_version: int) -> list[dict[str, Any]]:
    stats = load_schema("HoodieCommitMetadata", table_version).definition["fields"][0]["type"][1]
    return list(stats["values"]["items"]["fields"])


@pytest.mark.parametrize("table_version", [3, 5, 7, 10])
def test_unsupported_table_versions(table_version: int) -> None:
    with pytest.raises(UnsupportedTable, match=f"table version {table_version} is not supported"):
        load_schema("HoodieCommitMetadata", table_version)


def test_unknown_schema_name() -> None:
    with pytest.raises(KeyError, match="HoodieNothing"):
        load_schema("HoodieNothing", 8)


def test_java_schema_text_matches_hudis_header() -> None:
    """The text Hudi 1.x embeds (avro.java.string marks, props kept, docs dropped on maps) is ours."""
    text = load_schema("HoodieCleanerPlan", 8).java_json
    assert text.startswith(
        '{"type":"record","name":"HoodieCleanerPlan","namespace":"org.apache.hudi.avro.model","fields":'
        '[{"name":"earliestInstantToRetain","type":["null",{"type":"record","name":"HoodieActionInstant",'
        '"fields":[{"name":"timestamp","type":{"type":"string","avro.java.string":"String"}}'
    )
    assert (
        '{"name":"extraMetadata","type":["null",{"type":"map","values":{"type":"string",'
        '"avro.java.string":"String"},"avro.java.string":"String","default":null}],"default":null}' in text
    )
    rollback = load_schema("HoodieRollbackMetadata", 6).java_json
    assert '{"name":"rollbackLogFiles","type":["null",{"type":"map","values":"long",' in rollback
    assert '"items":"HoodieInstantInfo"' not in rollback  # defined inline at its first use
    assert '"default":[]},"default":[]}' in rollback


def test_rewriting_hudis_v8_vector_gives_the_same_bytes() -> None:
    vector = VECTORS / "metadata" / "v8_deltacommit.avro"
    if not vector.is_file():
        pytest.skip(missing_message(vector))
    data = vector.read_bytes()
    container = read_container(data)
    assert container.schema_short_name == "HoodieCommitMetadata"
    schema = load_schema(container.schema_name, 8)
    assert schema.java_json == container.schema_json
    assert write_single_record(container.record, schema, sync_marker=container.sync_marker) == data


# ---------------------------------------------------------------------------------------------------------
# Containers


RECORD = {
    "version": 1,
    "indexPartitionInfos": [
        {"version": 1, "metadataPartitionPath": "column_stats", "indexUptoInstant": "1", "extraMetadata": {}}
    ],
}


def _index_plan() -> bytes:
    return write_single_record(RECORD, load_schema("HoodieIndexPlan", 8))


def test_write_then_read() -> None:
    data = _index_plan()
    assert data.startswith(MAGIC)
    assert read_single_record(data) == RECORD
    assert read_single_record(data, expect="HoodieIndexPlan") == RECORD
    assert read_single_record(data, expect=(f"{NAMESPACE}.HoodieIndexPlan",)) == RECORD
    assert _index_plan() == data  # deterministic sync marker
    with pytest.raises(
        CorruptTimelineFile, match=r"expected an Avro HoodieCleanerPlan, found .*HoodieIndexPlan"
    ):
        read_single_record(data, expect="HoodieCleanerPlan")


def test_independent_reader_reads_what_we_write() -> None:
    with io.BytesIO(_index_plan()) as fo:
        reader = fastavro.reader(fo)
        assert list(reader) == [RECORD]
        assert set(reader.metadata) == {"avro.schema"}  # like Hudi: no avro.codec entry


@pytest.mark.parametrize("codec", ["null", "deflate"])
def test_we_read_what_an_independent_writer_writes(codec: str) -> None:
    schema = load_schema("HoodieIndexPlan", 8)
    out = io.BytesIO()
    fastavro.writer(out, schema.parsed, [RECORD], codec=codec)
    container = read_container(out.getvalue())
    assert container.record == RECORD
    assert container.schema_name == schema.name


def test_corrupt_containers() -> None:
    data = _index_plan()
    with pytest.raises(CorruptTimelineFile, match="content is empty"):
        read_container(b"")
    with pytest.raises(CorruptTimelineFile, match="not an Avro object container"):
        read_container(b"{}")
    for cut in range(4, len(data)):
        with pytest.raises(CorruptTimelineFile):
            read_container(data[:cut])
    with pytest.raises(CorruptTimelineFile, match="bytes after its single block"):
        read_container(data + b"\x00")
    broken_sync = data[:-1] + bytes([data[-1] ^ 0xFF])
    with pytest.raises(CorruptTimelineFile, match="sync marker does not match"):
        read_container(broken_sync)


def test_containers_with_other_than_one_record() -> None:
    schema = load_schema("HoodieIndexPlan", 8)
    for records in ([], [RECORD, RECORD]):
        out = io.BytesIO()
        fastavro.writer(out, schema.parsed, records)
        with pytest.raises(CorruptTimelineFile, match=r"no record|holds 2 records"):
            read_container(out.getvalue())


def test_record_that_does_not_fit_its_schema() -> None:
    with pytest.raises(ValueError, match=r"does not fit org\.apache\.hudi\.avro\.model\.HoodieIndexPlan"):
        write_single_record({"version": "one"}, load_schema("HoodieIndexPlan", 8))
    with pytest.raises(ValueError, match="16 bytes"):
        write_single_record(RECORD, load_schema("HoodieIndexPlan", 8), sync_marker=b"short")


def test_invalid_writer_schema_is_corrupt() -> None:
    data = _index_plan()
    text = load_schema("HoodieIndexPlan", 8).java_json.encode()
    broken = data.replace(text, text.replace(b'"type":"record"', b'"type":"recorx"'))
    with pytest.raises(CorruptTimelineFile, match="writer schema is invalid"):
        read_container(broken)
