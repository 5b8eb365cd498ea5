from __future__ import annotations

import pytest

from hoodie.config import RecordMergeMode, TableConfig, TableType, parse_properties, table_checksum
from hoodie.errors import InvalidTableConfig, UnsupportedTable

V8 = """#Updated at 2025-09-20T19:27:56.240Z
hoodie.table.version=8
hoodie.table.name=hudi-v8-table-mor_table
hoodie.table.type=MERGE_ON_READ
hoodie.table.checksum=2126289046
hoodie.record.merge.mode=COMMIT_TIME_ORDERING
hoodie.table.partition.fields=partition
hoodie.table.recordkey.fields=id
hoodie.timeline.layout.version=2
hoodie.timeline.path=timeline
"""


def test_properties_grammar() -> None:
    text = (
        "# comment\n! also comment\na=1\nb : two\nc\\:d=e\\:f\n"
        "long=first \\\n    second\nempty=\nspaced   value\n"
    )
    assert parse_properties(text) == {
        "a": "1",
        "b": "two",
        "c:d": "e:f",
        "long": "first second",
        "empty": "",
        "spaced": "value",
    }


def test_checksum_matches_hudi() -> None:
    assert table_checksum("default", "v8_trips_8i3u1d") == 1197752875
    assert table_checksum("default", "v6_trips_8i3d") == 3180720914
    assert table_checksum("", "trips") == 3761586722


def test_v8_config() -> None:
    cfg = TableConfig.from_text(V8)
    assert cfg.table_version == 8
    assert cfg.table_type is TableType.MERGE_ON_READ
    assert cfg.timeline_path == ".hoodie/timeline"
    assert cfg.record_merge_mode is RecordMergeMode.COMMIT_TIME_ORDERING
    assert cfg.partition_fields == ("partition",)


@pytest.mark.parametrize("version", ["3", "4", "5", "7"])
def test_unsupported_versions_are_refused_by_name(version: str) -> None:
    with pytest.raises(UnsupportedTable, match=f"table version {version}"):
        TableConfig.from_text(V8.replace("hoodie.table.version=8", f"hoodie.table.version={version}"))


@pytest.mark.parametrize("fmt", ["LANCE", "ORC", "HFILE"])
def test_unsupported_formats_are_refused_by_name(fmt: str) -> None:
    with pytest.raises(UnsupportedTable, match=fmt):
        TableConfig.from_text(V8 + f"hoodie.table.base.file.format={fmt}\n")


def test_checksum_mismatch_is_an_error() -> None:
    with pytest.raises(InvalidTableConfig, match="checksum"):
        TableConfig.from_text(V8.replace("2126289046", "2126289047"))


def test_bad_boolean_names_key() -> None:
    with pytest.raises(InvalidTableConfig, match=r"hoodie\.populate\.meta\.fields"):
        TableConfig.from_text(V8 + "hoodie.populate.meta.fields=yes\n")


def test_custom_keygen_partition_fields_drop_type_suffix() -> None:
    cfg = TableConfig.from_text(
        V8 + "hoodie.table.partition.fields=partition_field_country:SIMPLE,partition_field_date:TIMESTAMP\n"
    )
    assert cfg.partition_fields == ("partition_field_country", "partition_field_date")
