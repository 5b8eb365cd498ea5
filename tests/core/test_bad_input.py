"""Bad input (``fixtures/vectors/bad-input``): a clear :class:`HoodieError` naming the culprit, never a crash.

The vectors come from hudi-rs's test data. Each case either opens and works (the minimal table config) or
fails with a :class:`~hoodie.errors.HoodieError` whose message names the offending key or file; a KeyError,
ValueError, AttributeError or a silent wrong answer is a failure.

Where the right behaviour is debatable the tests pin the one that loses nothing, and say why:

- ``table_props_no_create_schema``: a table that was created but never written, with no schema anywhere.
  hudi-rs reads it as no rows (its ``get_schema`` says SchemaNotFound). Refusing the read would make a new,
  valid table unreadable; returning no rows loses nothing, as long as no data column is made up.
- An empty completed commit file means empty commit metadata (Hudi's ``HoodieCommitMetadata`` reads zero bytes
  so; hudi-rs errors), while a completed commit that cannot be decoded stops the read: skipping it could
  hide the files it wrote or replaced.
- Booleans other than ``true``/``false`` (``0``, ``1``, ``-1``): Java's ``Boolean.parseBoolean`` silently
  reads them as false; we refuse them, since guessing wrong would misplace partition values.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.errors import CorruptTimelineFile, HoodieError, InvalidTableConfig
from support.shared import missing_message

pytestmark = pytest.mark.fixtures

PROPERTIES = Path(".hoodie") / "hoodie.properties"
META_COLUMNS = {
    "_hoodie_commit_time",
    "_hoodie_commit_seqno",
    "_hoodie_record_key",
    "_hoodie_partition_path",
    "_hoodie_file_name",
}


@pytest.fixture(scope="module")
def bad_input(fixtures_path: Path) -> Path:
    folder = fixtures_path / "vectors" / "bad-input"
    if not folder.is_dir():
        pytest.skip(missing_message(folder))
    return folder


def refuse(root: Path, *, read: bool = True) -> HoodieError:
    """The HoodieError that opening (and reading) ``root`` raises; any other exception fails the test."""

    def attempt() -> None:
        table = Table.open(str(root))
        if read:
            table.read()

    with pytest.raises(HoodieError) as raised:
        attempt()
    return raised.value


def set_property(root: Path, key: str, value: str | None) -> None:
    """Set (or with ``None`` remove) one key of ``root``'s hoodie.properties."""
    path = root / PROPERTIES
    lines = [ln for ln in path.read_text().splitlines() if not ln.startswith(f"{key}=")]
    if value is not None:
        lines.append(f"{key}={value}")
    path.write_text("\n".join(lines) + "\n")


# -- table_props_valid_minimum and table_props_no_create_schema: created, never written ----------------------


@pytest.mark.parametrize("case", ["table_props_valid_minimum", "table_props_no_create_schema"])
def test_table_never_written_opens_and_reads_as_empty(bad_input: Path, case: str) -> None:
    table = Table.open(str(bad_input / case))
    assert table.config.table_version == 6
    assert not table.config.is_mor
    assert table.timeline.completed() == []
    assert table.file_slices() == []
    result = table.read()
    assert result.num_rows == 0
    invented = set(result.column_names) - META_COLUMNS
    assert not invented, f"no schema is recorded anywhere, yet the result has columns {sorted(invented)}"


def test_valid_minimum_config_values(bad_input: Path) -> None:
    config = Table.open(str(bad_input / "table_props_valid_minimum")).config
    assert config.record_key_fields == ("uuid",)
    assert config.populate_meta_fields  # the default
    assert config.partition_fields == ()


# -- table_props_invalid -----------------------------------------------------------------------------------

#: The bad values of table_props_invalid, each a reason on its own to refuse the table.
INVALID_VALUES = {
    "hoodie.table.type": "cow",
    "hoodie.table.base.file.format": "foo",
    "hoodie.table.checksum": "bar",
    "hoodie.table.version": "baz",
    "hoodie.timeline.layout.version": "_",
    "hoodie.datasource.write.drop.partition.columns": "1",
    "hoodie.datasource.write.hive_style_partitioning": "0",
    "hoodie.datasource.write.partitionpath.urlencode": "-1",
}


def test_invalid_properties_are_refused_naming_one(bad_input: Path) -> None:
    error = refuse(bad_input / "table_props_invalid")
    named = [k for k in INVALID_VALUES if k in str(error)]
    assert named, f"the error names none of the bad keys: {error}"


@pytest.mark.parametrize(("key", "value"), sorted(INVALID_VALUES.items()))
def test_each_invalid_value_alone_is_refused_naming_key_and_value(
    bad_input: Path, table_copy: Callable[[Path], Path], key: str, value: str
) -> None:
    root = table_copy(bad_input / "table_props_valid_minimum")
    set_property(root, key, value)
    error = refuse(root)
    assert key in str(error), f"the error does not name {key}: {error}"
    assert re.search(re.escape(value), str(error), re.IGNORECASE), (
        f"the error does not quote {value!r}: {error}"
    )


# -- table_props_partial: hoodie.table.type is missing -------------------------------------------------------


def test_partial_properties_name_the_missing_key(bad_input: Path) -> None:
    error = refuse(bad_input / "table_props_partial")
    assert isinstance(error, InvalidTableConfig)
    assert "hoodie.table.type" in str(error)


# -- table_props_valid: the checksum is CRC32(".trips") but the table is db.trips -------------------------


def test_checksum_mismatch_is_refused(bad_input: Path) -> None:
    error = refuse(bad_input / "table_props_valid")
    assert isinstance(error, InvalidTableConfig)
    assert "hoodie.table.checksum" in str(error)
    assert "3761586722" in str(error)


def test_checksum_mismatch_falls_back_to_a_valid_backup(
    bad_input: Path, table_copy: Callable[[Path], Path]
) -> None:
    # Hudi writes hoodie.properties.backup before rewriting hoodie.properties and reads it when the main file
    # fails its checksum: a torn rewrite must not make the table unreadable.
    root = table_copy(bad_input / "table_props_valid")
    text = (root / PROPERTIES).read_text()
    backup = text.replace("hoodie.table.checksum=3761586722", "hoodie.table.checksum=2086522725")  # db.trips
    (root / ".hoodie" / "hoodie.properties.backup").write_text(backup)
    table = Table.open(str(root))
    assert table.config.database_name == "db"
    assert table.config.name == "trips"


# -- commits_with_invalid_content ----------------------------------------------------------------------------

EMPTY_COMMIT = "20240402123035233"
ARRAY_COMMIT = "20240402144910683"


def test_empty_properties_file_is_refused(bad_input: Path) -> None:
    error = refuse(bad_input / "commits_with_invalid_content", read=False)
    assert isinstance(error, InvalidTableConfig)
    assert "hoodie.properties" in str(error)


@pytest.fixture
def invalid_commits(bad_input: Path, table_copy: Callable[[Path], Path]) -> Path:
    """commits_with_invalid_content with the valid minimal hoodie.properties (a v6 COW table) put in."""
    root = table_copy(bad_input / "commits_with_invalid_content")
    (root / PROPERTIES).write_text((bad_input / "table_props_valid_minimum" / PROPERTIES).read_text())
    return root


def test_invalid_commit_content_still_opens_and_lists(invalid_commits: Path) -> None:
    table = Table.open(str(invalid_commits))
    assert [(i.time, i.action) for i in table.timeline.completed()] == [
        (EMPTY_COMMIT, "commit"),
        (ARRAY_COMMIT, "commit"),
    ]


def test_commit_holding_a_json_array_stops_the_read_naming_the_file(invalid_commits: Path) -> None:
    table = Table.open(str(invalid_commits))
    with pytest.raises(HoodieError) as raised:
        table.read()
    assert isinstance(raised.value, CorruptTimelineFile), f"{type(raised.value).__name__}: {raised.value}"
    assert f"{ARRAY_COMMIT}.commit" in str(raised.value)


def test_empty_commit_file_is_empty_metadata(invalid_commits: Path) -> None:
    table = Table.open(str(invalid_commits))
    metadata = table.commit_metadata(EMPTY_COMMIT)
    assert metadata.partition_to_write_stats == {}
    assert metadata.extra_metadata == {}
    assert table.file_slices(as_of=EMPTY_COMMIT) == []
    # Queries read with the latest table schema, which the corrupt later commit would hold: they stop.
    with pytest.raises(CorruptTimelineFile, match=ARRAY_COMMIT):
        table.read(as_of=EMPTY_COMMIT)
