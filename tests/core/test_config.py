from __future__ import annotations

import datetime as dt
import uuid
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from hoodie.config import (
    CHECKSUM,
    PROPERTIES_BACKUP_FILE,
    PROPERTIES_FILE,
    TIMELINE_TIMEZONE,
    RecordMergeMode,
    TableConfig,
    TableType,
    recover_properties,
    table_checksum,
)
from hoodie.errors import InvalidTableConfig, TableAlreadyExists, UnsupportedTable, VersionConflict
from hoodie.java_compat import java_properties_order, parse_properties
from hoodie.new_table import create_table_properties, new_table_properties
from hoodie.storage import Storage
from hoodie.storage.local import LocalBackend
from support.s3_server import S3Server

if TYPE_CHECKING:
    from support.fixture_tables import FixtureTable

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


# -- writing hoodie.properties ------------------------------------------------------------------------------


def _fixture_properties(table: FixtureTable) -> str:
    with zipfile.ZipFile(table.zip_path) as zf:
        prefix = f"{table.root_in_zip}/" if table.root_in_zip else ""
        return zf.read(f"{prefix}.hoodie/hoodie.properties").decode("utf-8")


def _keys_in_file_order(text: str) -> list[str]:
    return list(parse_properties(text))


def test_fixture_properties_round_trip(supported_table: FixtureTable) -> None:
    text = _fixture_properties(supported_table)
    config = TableConfig.from_text(text)
    written = config.to_text()
    assert parse_properties(written) == parse_properties(text)
    assert TableConfig.from_text(written) == config
    assert written.splitlines()[0].startswith("#Updated at ")  # it carries a checksum: Hudi says "Updated"


def test_fixtures_written_by_java_9_are_reproduced_byte_for_byte(
    fixture_tables: tuple[FixtureTable, ...],
) -> None:
    """Properties.store on Java 9+ writes keys in ConcurrentHashMap order: every fixture in that order comes
    out of to_text identical below the two comment lines (and the other fixtures, Java 8's insertion order,
    still parse back equal)."""
    exact = 0
    for table in fixture_tables:
        if table.refusal is not None:
            continue
        text = _fixture_properties(table)
        keys = _keys_in_file_order(text)
        if java_properties_order(keys) != keys:
            continue
        assert TableConfig.from_text(text).to_text().splitlines()[2:] == text.splitlines()[2:], table.id
        exact += 1
    assert exact >= 20


def test_header_lines_are_javas() -> None:
    moment = dt.datetime(2026, 3, 7, 22, 26, 23, 352546, tzinfo=dt.UTC)
    lines = TableConfig.from_text(V8).to_text(now=moment).splitlines()
    assert lines[:2] == ["#Updated at 2026-03-07T22:26:23.352546Z", "#Sat Mar 07 22:26:23 UTC 2026"]
    on_the_ms = moment.replace(microsecond=352000)
    assert (
        TableConfig.from_text(V8).to_text(now=on_the_ms).startswith("#Updated at 2026-03-07T22:26:23.352Z\n")
    )
    no_checksum = TableConfig.from_text(
        V8.replace("hoodie.table.version=8", "hoodie.table.version=6")
        .replace("hoodie.timeline.layout.version=2", "hoodie.timeline.layout.version=1")
        .replace("hoodie.table.checksum=2126289046\n", "")
    )
    text = no_checksum.to_text(now=moment.replace(microsecond=0))
    assert text.startswith("#Properties saved on 2026-03-07T22:26:23Z\n")
    assert f"{CHECKSUM}={table_checksum('', 'hudi-v8-table-mor_table')}\n" in text


def test_java_escapes_round_trip() -> None:
    config = TableConfig.from_text(V8).updated(
        {
            "a key=with:specials#!": " leading space, = : # ! \\ and \u00e9\u4e2d\U0001f600\nnext\tline",
            "hoodie.table.create.schema": '{"type":"record","name":"r"}',
        }
    )
    text = config.to_text()
    assert "a\\ key\\=with\\:specials\\#\\!=" in text
    assert "=\\ leading space, \\= \\: \\# \\! \\\\ and \\u00E9\\u4E2D\\uD83D\\uDE00\\nnext\\tline\n" in text
    assert 'hoodie.table.create.schema={"type"\\:"record","name"\\:"r"}\n' in text
    assert text.isascii()
    assert parse_properties(text) == {**config.props, CHECKSUM: config.props[CHECKSUM]}


def test_java_properties_order_models_concurrent_hash_map() -> None:
    # Written by Hudi 1.0.2 on Java 17 (hudi-rs v8 fixture): 19 keys, one resize of the map.
    keys = [
        "hoodie.compaction.payload.class",
        "hoodie.table.initial.version",
        "hoodie.table.keygenerator.type",
        "hoodie.table.type",
        "hoodie.archivelog.folder",
        "hoodie.table.create.schema",
        "hoodie.timeline.layout.version",
        "hoodie.timeline.history.path",
        "hoodie.table.checksum",
        "hoodie.datasource.write.drop.partition.columns",
        "hoodie.record.merge.strategy.id",
        "hoodie.table.recordkey.fields",
        "hoodie.table.name",
        "hoodie.timeline.path",
        "hoodie.datasource.write.hive_style_partitioning",
        "hoodie.database.name",
        "hoodie.record.merge.mode",
        "hoodie.datasource.write.partitionpath.urlencode",
        "hoodie.table.version",
    ]
    assert java_properties_order(keys) == keys
    # Only keys sharing a bin depend on the insertion order: reversed, just those pairs change places.
    swapped = java_properties_order(reversed(keys))
    assert sorted(swapped) == sorted(keys)
    assert [(a, b) for a, b in zip(swapped, keys, strict=True) if a != b] == [
        ("hoodie.table.keygenerator.type", "hoodie.table.initial.version"),
        ("hoodie.table.initial.version", "hoodie.table.keygenerator.type"),
        ("hoodie.table.name", "hoodie.table.recordkey.fields"),
        ("hoodie.table.recordkey.fields", "hoodie.table.name"),
    ]
    assert java_properties_order(["b", "a", "b"]) == ["a", "b"]


class RecordingStorage(Storage):
    """The local file system, noting every write and delete (to check the order of the update protocol)."""

    def __init__(self, root: Path) -> None:
        super().__init__(LocalBackend(), str(root), str(root))
        self.calls: list[str] = []

    def create(self, path: str, data: bytes, *, overwrite: bool = False) -> str | None:
        self.calls.append(f"create {path}")
        return super().create(path, data, overwrite=overwrite)

    def replace_if_version(self, path: str, data: bytes, version: str) -> str:
        self.calls.append(f"replace {path}")
        return super().replace_if_version(path, data, version)

    def delete(self, path: str, *, missing_ok: bool = True) -> bool:
        self.calls.append(f"delete {path}")
        return super().delete(path, missing_ok=missing_ok)


def test_store_backs_up_then_replaces_then_drops_the_backup(tmp_path: Path) -> None:
    storage = RecordingStorage(tmp_path)
    TableConfig(new_table_properties("t", "MERGE_ON_READ", 8, ["id"], ["p"], database_name="db")).create(
        storage
    )
    before = storage.read(PROPERTIES_FILE)
    storage.calls.clear()
    config = TableConfig.load(storage)
    stored = config.updated({"hoodie.table.metadata.partitions": "files"}).store(storage)
    assert storage.calls == [
        f"delete {PROPERTIES_BACKUP_FILE}",  # recovery: no backup from an earlier attempt
        f"create {PROPERTIES_BACKUP_FILE}",
        f"replace {PROPERTIES_FILE}",  # compare-and-set on the version read
        f"delete {PROPERTIES_BACKUP_FILE}",
    ]
    assert not storage.exists(PROPERTIES_BACKUP_FILE)
    assert stored == TableConfig.load(storage)
    assert stored.metadata_partitions == ("files",)
    assert stored.props[CHECKSUM] == str(table_checksum("db", "t"))
    assert storage.read(PROPERTIES_FILE) != before
    assert storage.read(PROPERTIES_FILE).startswith(b"#Updated at ")


def test_an_interrupted_update_is_recovered_from_the_backup(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    original = TableConfig(new_table_properties("t", "COPY_ON_WRITE", 9, ["id"]))
    original.create(storage)
    good = storage.read(PROPERTIES_FILE)
    # Crash after the backup, with a torn new file.
    storage.create(PROPERTIES_BACKUP_FILE, good)
    storage.create(PROPERTIES_FILE, good[: len(good) // 3], overwrite=True)
    assert TableConfig.load(storage) == TableConfig.from_text(good.decode())  # readers fall back
    updated = TableConfig.load(storage).updated({"hoodie.table.cdc.enabled": "false"}).store(storage)
    assert TableConfig.load(storage) == updated
    assert not storage.exists(PROPERTIES_BACKUP_FILE)
    # Crash after deleting (Hudi deletes before writing): the backup becomes the file again.
    storage.create(PROPERTIES_BACKUP_FILE, good)
    storage.delete(PROPERTIES_FILE)
    recover_properties(storage)
    assert storage.read(PROPERTIES_FILE) == good
    assert not storage.exists(PROPERTIES_BACKUP_FILE)
    # A corrupt file and a corrupt backup: nothing is touched, the error says so.
    storage.create(PROPERTIES_FILE, b"hoodie.table.name=t\n", overwrite=True)
    storage.create(PROPERTIES_BACKUP_FILE, b"garbage=1\n")
    with pytest.raises(InvalidTableConfig, match="so is"):
        recover_properties(storage)
    assert storage.exists(PROPERTIES_BACKUP_FILE)


def test_create_refuses_an_existing_table(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    config = TableConfig(new_table_properties("t", TableType.COPY_ON_WRITE, 6, ["id"]))
    config.create(storage)
    assert storage.read(PROPERTIES_FILE).startswith(b"#Properties saved on ")
    with pytest.raises(TableAlreadyExists):
        config.create(storage)
    assert TableConfig.load(storage) == TableConfig(parse_properties(storage.read(PROPERTIES_FILE).decode()))


def _args_like(props: dict[str, str]) -> dict[str, object]:
    version = int(props["hoodie.table.version"])
    ordering = props.get("hoodie.table.ordering.fields") or props.get("hoodie.table.precombine.field") or ""
    return {
        "name": props["hoodie.table.name"],
        "table_type": props["hoodie.table.type"],
        "table_version": version,
        "record_key_fields": props["hoodie.table.recordkey.fields"].split(","),
        "partition_fields": [p for p in props.get("hoodie.table.partition.fields", "").split(",") if p],
        "ordering_fields": [o for o in ordering.split(",") if o],
        "key_generator": props.get("hoodie.table.keygenerator.type")
        or props.get("hoodie.table.keygenerator.class"),
        "populate_meta_fields": props.get("hoodie.populate.meta.fields", "true") == "true",
        "hive_style": props["hoodie.datasource.write.hive_style_partitioning"] == "true",
        "create_schema": props.get("hoodie.table.create.schema"),
        "database_name": props.get("hoodie.database.name", ""),
        "merge_mode": props.get("hoodie.record.merge.mode"),
    }


# Tables as Hudi's Spark SQL CREATE TABLE left them ("#Properties saved on", no commit changed them).
NEW_TABLES = [
    "hudi-rs/sample_table_mor_parquet_v6_simplekeygen_nonhivestyle:v6_simplekeygen_nonhivestyle",
    "hudi-rs/sample_table_mor_parquet_v6_complexkeygen_hivestyle:v6_complexkeygen_hivestyle",
    "hudi-rs/sample_table_mor_parquet_v6_empty:v6_empty",
    "hudi-rs/sample_table_cow_v8_empty:v8_empty",
    "hudi-rs/sample_table_cow_v8_simplekeygen_nonhivestyle:v8_simplekeygen_nonhivestyle",
    "hudi-rs/sample_table_cow_v8_simplekeygen_hivestyle_no_metafields:v8_simplekeygen_hivestyle_no_metafields",
    "hudi-rs/sample_table_cow_v8_complexkeygen_hivestyle:v8_complexkeygen_hivestyle",
    "hudi-rs/sample_table_cow_v9_txns_simple_nometa:v9_txns_simple_nometa",
    "hudi-rs/sample_table_mor_avro_v9_txns_complex_nometa:v9_txns_complex_nometa",
    "hudi-rs/sample_table_mor_avro_v9_txns_nonpart_nometa:v9_txns_nonpart_nometa",
]


@pytest.mark.parametrize("table_id", NEW_TABLES)
def test_new_tables_have_the_keys_hudi_writes(
    table_id: str, fixture_tables: tuple[FixtureTable, ...]
) -> None:
    [table] = [t for t in fixture_tables if t.id == table_id]
    theirs = parse_properties(_fixture_properties(table))
    ours = new_table_properties(**_args_like(theirs))  # type: ignore[arg-type]
    assert {k: ours.get(k) for k in theirs} == theirs
    extra = set(ours) - set(theirs)
    assert extra == {TIMELINE_TIMEZONE}  # written on purpose: Hudi's writers then use our zone
    assert ours[TIMELINE_TIMEZONE] == "UTC"
    text = create_table_properties(new_table_properties(**_args_like(theirs)))  # type: ignore[arg-type]
    assert text.startswith("#Properties saved on ")
    assert parse_properties(text) == ours
    # (The key order of a new file follows the order Hudi happened to put the keys in its map, which differs
    # between tables even for the same keys; it is reproduced when a file is rewritten, see above.)


def test_new_table_merge_settings_per_version() -> None:
    v8 = new_table_properties("t", "MERGE_ON_READ", 8, ["id"], ordering_fields=["ts"])
    assert (v8["hoodie.record.merge.mode"], v8["hoodie.record.merge.strategy.id"]) == (
        "EVENT_TIME_ORDERING",
        "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5",
    )
    assert v8["hoodie.compaction.payload.class"].endswith("DefaultHoodieRecordPayload")
    custom = new_table_properties("t", "MERGE_ON_READ", 8, ["id"], payload_class="com.example.MyPayload")
    assert (custom["hoodie.record.merge.mode"], custom["hoodie.record.merge.strategy.id"]) == (
        "CUSTOM",
        "00000000-0000-0000-0000-000000000000",
    )
    v6 = new_table_properties("t", "MERGE_ON_READ", 6, ["id"], ["p"], ["ts"])
    assert v6["hoodie.compaction.payload.class"].endswith("OverwriteWithLatestAvroPayload")  # 0.x default
    assert v6["hoodie.table.keygenerator.class"] == "org.apache.hudi.keygen.SimpleKeyGenerator"
    assert "hoodie.record.merge.mode" not in v6
    v6_event = new_table_properties(
        "t", "MERGE_ON_READ", 6, ["id"], merge_mode=RecordMergeMode.EVENT_TIME_ORDERING
    )
    assert TableConfig(v6_event).record_merge_mode is RecordMergeMode.EVENT_TIME_ORDERING
    v9 = new_table_properties("t", "COPY_ON_WRITE", 9, ["a", "b"], ["p"], ["ts", "seq"])
    assert v9["hoodie.table.ordering.fields"] == "ts,seq"
    assert "hoodie.table.precombine.field" not in v9
    assert v9["hoodie.table.keygenerator.type"] == "COMPLEX"
    assert "hoodie.compaction.payload.class" not in v9
    assert "hoodie.record.merge.strategy.id" not in v9
    for version in (6, 8, 9):
        cfg = TableConfig(new_table_properties("t", "COPY_ON_WRITE", version, ["id"], timeline_timezone=None))
        assert TIMELINE_TIMEZONE not in cfg.props
        assert cfg.timeline_layout_version == (1 if version == 6 else 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"table_version": 7}, UnsupportedTable, "table version 7"),
        ({"record_key_fields": []}, ValueError, "record key"),
        ({"ordering_fields": ["a", "b"]}, ValueError, "one precombine field"),
        ({"merge_mode": "CUSTOM"}, ValueError, "needs a payload class"),
        (
            {
                "merge_mode": "COMMIT_TIME_ORDERING",
                "payload_class": "org.apache.hudi.common.model.DefaultHoodieRecordPayload",
            },
            ValueError,
            "contradicts",
        ),
        ({"key_generator": "FANCY"}, ValueError, "unknown key generator"),
        ({"timeline_timezone": "PST"}, ValueError, "UTC or LOCAL"),
        ({"table_version": 9, "payload_class": "com.example.P"}, UnsupportedTable, "CUSTOM"),
    ],
)
def test_new_table_refusals(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    args: dict[str, object] = {
        "name": "t",
        "table_type": "COPY_ON_WRITE",
        "table_version": 8,
        "record_key_fields": ["id"],
        **kwargs,
    }
    with pytest.raises(error, match=match):
        new_table_properties(**args)  # type: ignore[arg-type]


def test_a_stale_config_update_fails_and_changes_nothing(tmp_path: Path) -> None:
    """A writer that read the config, then lost the race to another update (its lock lapsed while it was
    paused), writes nothing: the other writer's file stands and no backup is left."""
    storage = Storage.for_uri(str(tmp_path))
    TableConfig(new_table_properties("t", "MERGE_ON_READ", 8, ["id"], ["p"], database_name="db")).create(
        storage
    )
    stale = TableConfig.load(storage)
    TableConfig.load(storage).updated({"hoodie.table.cdc.enabled": "true"}).store(storage)
    winner = storage.read(PROPERTIES_FILE)
    with pytest.raises(VersionConflict, match="changed since this config was read"):
        stale.updated({"hoodie.table.metadata.partitions": "files"}).store(storage)
    assert storage.read(PROPERTIES_FILE) == winner
    assert not storage.exists(PROPERTIES_BACKUP_FILE)


class _RacedStorage(Storage):
    """Local disk where another writer replaces ``hoodie.properties`` right after this one's backup: between
    its read of the version and its compare-and-set."""

    def __init__(self, root: Path, other: bytes) -> None:
        super().__init__(LocalBackend(), str(root), str(root))
        self._other: bytes | None = other

    def create(self, path: str, data: bytes, *, overwrite: bool = False) -> str | None:
        made = super().create(path, data, overwrite=overwrite)
        if path == PROPERTIES_BACKUP_FILE and self._other is not None:
            other, self._other = self._other, None
            super().create(PROPERTIES_FILE, other, overwrite=True)
        return made


def test_a_config_update_raced_after_its_read_fails_and_changes_nothing(tmp_path: Path) -> None:
    plain = Storage.for_uri(str(tmp_path))
    props = new_table_properties("t", "MERGE_ON_READ", 8, ["id"], ["p"], database_name="db")
    TableConfig(props).create(plain)
    other = TableConfig.load(plain).updated({"hoodie.table.cdc.enabled": "true"}).to_text().encode("utf-8")
    storage = _RacedStorage(tmp_path, other)
    with pytest.raises(VersionConflict):
        TableConfig.load(storage).updated({"hoodie.table.metadata.partitions": "files"}).store(storage)
    assert storage.read(PROPERTIES_FILE) == other
    assert not storage.exists(PROPERTIES_BACKUP_FILE)


@pytest.mark.s3
def test_a_stale_config_update_fails_and_changes_nothing_on_an_object_store(s3_server: S3Server) -> None:
    """The same on an S3-compatible server: the replace is a PUT with ``If-Match`` on the ETag read."""
    storage = Storage.for_uri(f"{s3_server.bucket('config')}/t-{uuid.uuid4().hex[:8]}")
    assert storage.compare_and_set
    TableConfig(new_table_properties("t", "MERGE_ON_READ", 8, ["id"], ["p"], database_name="db")).create(
        storage
    )
    stale = TableConfig.load(storage)
    TableConfig.load(storage).updated({"hoodie.table.cdc.enabled": "true"}).store(storage)
    winner = storage.read(PROPERTIES_FILE)
    with pytest.raises(VersionConflict):
        stale.updated({"hoodie.table.metadata.partitions": "files"}).store(storage)
    assert storage.read(PROPERTIES_FILE) == winner
    assert not storage.exists(PROPERTIES_BACKUP_FILE)
