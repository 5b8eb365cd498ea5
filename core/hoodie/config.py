"""Table configuration: ``.hoodie/hoodie.properties``.

The file is a Java properties file. :func:`parse_properties` reads that grammar (comments, ``key=value`` or
``key:value``, backslash escapes, line continuations); :class:`TableConfig` validates the keys that decide how
the table is read and gives them typed accessors. Everything this library refuses is refused here, up front,
with :class:`~hoodie.errors.UnsupportedTable`: table versions other than 6, 8 and 9 and base file formats
other than PARQUET.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar, Self

from hoodie.errors import (
    FileAlreadyExists,
    InvalidTableConfig,
    StorageError,
    TableAlreadyExists,
    TableNotFound,
    UnsupportedTable,
)
from hoodie.storage import Storage

PROPERTIES_FILE = ".hoodie/hoodie.properties"
PROPERTIES_BACKUP_FILE = ".hoodie/hoodie.properties.backup"

SUPPORTED_VERSIONS = (6, 8, 9)

# Keys, with their defaults next to them where Hudi has one.
NAME = "hoodie.table.name"
DATABASE_NAME = "hoodie.database.name"
TABLE_TYPE = "hoodie.table.type"
TABLE_VERSION = "hoodie.table.version"
TIMELINE_LAYOUT_VERSION = "hoodie.timeline.layout.version"
RECORDKEY_FIELDS = "hoodie.table.recordkey.fields"
PARTITION_FIELDS = "hoodie.table.partition.fields"
PRECOMBINE_FIELD = "hoodie.table.precombine.field"
ORDERING_FIELDS = "hoodie.table.ordering.fields"
BASE_FILE_FORMAT = "hoodie.table.base.file.format"
BASE_FILE_FORMAT_DEFAULT = "PARQUET"
LOG_FILE_FORMAT = "hoodie.table.log.file.format"
METADATA_PARTITIONS = "hoodie.table.metadata.partitions"
METADATA_PARTITIONS_INFLIGHT = "hoodie.table.metadata.partitions.inflight"
POPULATE_META_FIELDS = "hoodie.populate.meta.fields"
POPULATE_META_FIELDS_DEFAULT = True
HIVE_STYLE_PARTITIONING = "hoodie.datasource.write.hive_style_partitioning"
HIVE_STYLE_PARTITIONING_DEFAULT = False
URL_ENCODE_PARTITIONING = "hoodie.datasource.write.partitionpath.urlencode"
DROP_PARTITION_COLUMNS = "hoodie.datasource.write.drop.partition.columns"
KEYGENERATOR_CLASS = "hoodie.table.keygenerator.class"
KEYGENERATOR_TYPE = "hoodie.table.keygenerator.type"
RECORD_MERGE_MODE = "hoodie.record.merge.mode"
PAYLOAD_CLASS = "hoodie.compaction.payload.class"
LEGACY_PAYLOAD_CLASS = "hoodie.table.payload.class"
PAYLOAD_CLASS_DEFAULT = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
TIMELINE_PATH = "hoodie.timeline.path"
TIMELINE_PATH_DEFAULT = "timeline"
TIMELINE_HISTORY_PATH = "hoodie.timeline.history.path"
TIMELINE_HISTORY_PATH_DEFAULT = "history"
ARCHIVELOG_FOLDER = "hoodie.archivelog.folder"
ARCHIVELOG_FOLDER_DEFAULT = "archived"
TIMELINE_TIMEZONE = "hoodie.table.timeline.timezone"
TIMELINE_TIMEZONE_DEFAULT = "LOCAL"
CREATE_SCHEMA = "hoodie.table.create.schema"
CHECKSUM = "hoodie.table.checksum"
CDC_ENABLED = "hoodie.table.cdc.enabled"
INITIAL_VERSION = "hoodie.table.initial.version"
TABLE_FORMAT = "hoodie.table.format"
TABLE_FORMAT_DEFAULT = "native"
RECORD_MERGE_STRATEGY_ID = "hoodie.record.merge.strategy.id"
LEGACY_RECORD_MERGER_STRATEGY = "hoodie.compaction.record.merger.strategy"  # 0.x name of the strategy id

# HoodieRecordMerger's strategy ids.
EVENT_TIME_MERGE_STRATEGY_ID = "eeb8d96f-b1e4-49fd-bbf8-28ac514178e5"  # also 0.x's default Avro merger
COMMIT_TIME_MERGE_STRATEGY_ID = "ce9acb64-bde0-424c-9b91-f6ebba25356d"
PAYLOAD_MERGE_STRATEGY_ID = "00000000-0000-0000-0000-000000000000"

DEFAULT_PAYLOAD_CLASS = "org.apache.hudi.common.model.DefaultHoodieRecordPayload"
OVERWRITE_PAYLOAD_CLASS = "org.apache.hudi.common.model.OverwriteWithLatestAvroPayload"
EVENT_TIME_PAYLOAD_CLASS = "org.apache.hudi.common.model.EventTimeAvroPayload"

# Key generator types (v8+ ``hoodie.table.keygenerator.type``) and classes (v6 ``...keygenerator.class``).
KEY_GENERATOR_CLASSES = {
    "SIMPLE": "org.apache.hudi.keygen.SimpleKeyGenerator",
    "COMPLEX": "org.apache.hudi.keygen.ComplexKeyGenerator",
    "NON_PARTITION": "org.apache.hudi.keygen.NonpartitionedKeyGenerator",
    "TIMESTAMP": "org.apache.hudi.keygen.TimestampBasedKeyGenerator",
    "CUSTOM": "org.apache.hudi.keygen.CustomKeyGenerator",
    "GLOBAL_DELETE": "org.apache.hudi.keygen.GlobalDeleteKeyGenerator",
}


class TableType(Enum):
    COPY_ON_WRITE = "COPY_ON_WRITE"
    MERGE_ON_READ = "MERGE_ON_READ"


class RecordMergeMode(Enum):
    """How two versions of a record are reconciled (``hoodie.record.merge.mode``)."""

    COMMIT_TIME_ORDERING = "COMMIT_TIME_ORDERING"
    EVENT_TIME_ORDERING = "EVENT_TIME_ORDERING"
    CUSTOM = "CUSTOM"


def parse_properties(text: str) -> dict[str, str]:
    """Parse the Java ``.properties`` grammar into an ordered dict (later keys win, as in Java)."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        # A line ending in an odd number of backslashes continues on the next line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, value = _split_key_value(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in " \t\f":
            j += 1
    return key, line[j:]


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and i + 6 <= len(s):
            try:
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    text = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in text):
        # Java writes characters beyond the BMP as two \\u escapes (a UTF-16 surrogate pair): join them.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def table_checksum(database: str, table: str) -> int:
    """Hudi's ``hoodie.table.checksum``: CRC32 of ``"<database>.<table>"`` (database may be empty)."""
    return zlib.crc32(f"{database}.{table}".encode())


def _parse_bool(key: str, value: str) -> bool:
    v = value.strip().lower()
    if v == "true":
        return True
    if v == "false":
        return False
    raise InvalidTableConfig(f"{key}={value!r} is not a boolean (true or false)")


def is_metadata_table_props(props: Mapping[str, str]) -> bool:
    """Whether ``hoodie.properties`` describes a metadata table (``.hoodie/metadata``): its key generator."""
    return props.get(KEYGENERATOR_TYPE, "").strip() == "HOODIE_TABLE_METADATA" or props.get(
        KEYGENERATOR_CLASS, ""
    ).strip().endswith(".HoodieTableMetadataKeyGenerator")


def _split_fields(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(f.strip() for f in value.split(",") if f.strip())


@dataclass(frozen=True)
class TableConfig:
    """The validated contents of ``hoodie.properties``. ``props`` holds every key as read."""

    props: Mapping[str, str]

    #: The only base file format accepted (a data table's; the metadata table's config says HFILE).
    base_format_required: ClassVar[str] = "PARQUET"

    def __post_init__(self) -> None:
        self._validate()

    def _format_hint(self, fmt: str) -> str:
        if fmt == "HFILE" and is_metadata_table_props(self.props):
            return "; this is a metadata table: open its data table, two levels up"
        return ""

    # -- loading -----------------------------------------------------------------------------------------

    @classmethod
    def from_text(cls, text: str) -> Self:
        return cls(parse_properties(text))

    @classmethod
    def load(cls, storage: Storage) -> Self:
        """Read and validate the table config, falling back to the backup file as Hudi does.

        Hudi writes ``hoodie.properties.backup`` before rewriting ``hoodie.properties``; when the main file is
        missing, empty or fails its checksum, a valid backup is used instead.
        """
        try:
            main = storage.read(PROPERTIES_FILE).decode("utf-8", errors="strict")
        except FileNotFoundError:
            if not storage.exists(PROPERTIES_BACKUP_FILE):
                raise TableNotFound(f"no Hudi table at {storage.uri}: {PROPERTIES_FILE} is missing") from None
            main = ""
        except UnicodeDecodeError as e:
            raise InvalidTableConfig(f"{PROPERTIES_FILE} is not UTF-8 text: {e}") from e
        try:
            return cls.from_text(main)
        except InvalidTableConfig as main_error:
            if isinstance(main_error, UnsupportedTable):
                raise
            try:
                backup = storage.read(PROPERTIES_BACKUP_FILE).decode("utf-8")
            except (FileNotFoundError, UnicodeDecodeError):
                raise main_error from None
            try:
                return cls.from_text(backup)
            except InvalidTableConfig:
                raise main_error from None

    @classmethod
    def for_new_table(
        cls,
        name: str,
        table_type: TableType | str,
        table_version: int,
        record_key_fields: Sequence[str],
        partition_fields: Sequence[str] = (),
        ordering_fields: Sequence[str] = (),
        *,
        key_generator: str | None = None,
        populate_meta_fields: bool = True,
        hive_style: bool = HIVE_STYLE_PARTITIONING_DEFAULT,
        merge_mode: RecordMergeMode | str | None = None,
        payload_class: str | None = None,
        timeline_timezone: str | None = "UTC",
        create_schema: str | None = None,
        database_name: str = "",
        url_encode_partitioning: bool = False,
        drop_partition_columns: bool = False,
    ) -> TableConfig:
        """The config of a new table, with the keys Hudi writes when it creates one (see
        :func:`new_table_properties`)."""
        return cls(
            new_table_properties(
                name,
                table_type,
                table_version,
                record_key_fields,
                partition_fields,
                ordering_fields,
                key_generator=key_generator,
                populate_meta_fields=populate_meta_fields,
                hive_style=hive_style,
                merge_mode=merge_mode,
                payload_class=payload_class,
                timeline_timezone=timeline_timezone,
                create_schema=create_schema,
                database_name=database_name,
                url_encode_partitioning=url_encode_partitioning,
                drop_partition_columns=drop_partition_columns,
            )
        )

    # -- writing -----------------------------------------------------------------------------------------

    def updated(self, changes: Mapping[str, str | None]) -> TableConfig:
        """A copy with ``changes`` applied (``None`` removes a key); new keys go last, as Hudi's upsert does.
        The checksum follows the (possibly new) name."""
        props = dict(self.props)
        for key, value in changes.items():
            if value is None:
                props.pop(key, None)
            else:
                props[key] = value
        if CHECKSUM in props and NAME in props:
            props[CHECKSUM] = str(table_checksum(props.get(DATABASE_NAME, "").strip(), props[NAME].strip()))
        return TableConfig(props)

    def to_text(self, *, now: dt.datetime | None = None, header: str | None = None) -> str:
        """The file as Hudi writes it (``java.util.Properties.store`` on Java 9+).

        Two comment lines (``#<header> <ISO instant>`` and ``#<date>``, here always in UTC), then every key in
        the order Java's ``Properties`` iterates them (:func:`java_properties_order`) with Java's escapes,
        ``\\n``-terminated. ``hoodie.table.checksum`` is recomputed from the names. ``header`` defaults to
        Hudi's: ``Updated at`` when the config already carries a checksum, else ``Properties saved on``.
        """
        moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
        props = dict(self.props)
        if header is None:
            header = "Updated at" if CHECKSUM in props else "Properties saved on"
        props[CHECKSUM] = str(table_checksum(self.database_name, self.name))
        lines = [f"#{header} {_java_instant_text(moment)}", f"#{_java_date_text(moment)}"]
        for key in java_properties_order(props):
            lines.append(f"{_java_escape(key, is_key=True)}={_java_escape(props[key], is_key=False)}")
        return "\n".join(lines) + "\n"

    def store(self, storage: Storage) -> TableConfig:
        """Replace the table's ``hoodie.properties`` with this config, as ``HoodieTableConfig.modify`` does:

        0. recover from an interrupted earlier update (a valid backup replaces a missing or corrupt file);
        1. copy the current file to ``hoodie.properties.backup`` (readers fall back to it);
        2. write the new file (checksum recomputed) with an atomic replace;
        3. read it back and check its checksum (on a mismatch the file is deleted and readers use the backup);
        4. delete the backup.

        Hudi deletes the file between steps 1 and 2; an atomic replace makes that unnecessary (readers see the
        old or the new file, never none). The caller holds the table lock: two updates must not interleave.
        Returns the config as stored.
        """
        recover_properties(storage)
        try:
            current = storage.read(PROPERTIES_FILE)
        except FileNotFoundError:
            raise TableNotFound(f"no Hudi table at {storage.uri}: {PROPERTIES_FILE} is missing") from None
        try:
            storage.create(PROPERTIES_BACKUP_FILE, current, overwrite=not storage.conditional_create)
        except FileAlreadyExists:
            raise StorageError(
                f"{PROPERTIES_BACKUP_FILE} appeared while updating the table config: another update runs"
            ) from None
        text = self.to_text()
        storage.create(PROPERTIES_FILE, text.encode("utf-8"), overwrite=True)
        stored = parse_properties(storage.read(PROPERTIES_FILE).decode("utf-8"))
        if stored.get(CHECKSUM) != str(table_checksum(self.database_name, self.name)):
            storage.delete(PROPERTIES_FILE)
            raise StorageError(
                f"{PROPERTIES_FILE} did not read back with its checksum; the backup stays in use"
            )
        storage.delete(PROPERTIES_BACKUP_FILE)
        return TableConfig(stored)

    def create(self, storage: Storage) -> None:
        """Write ``hoodie.properties`` of a new table (``#Properties saved on``), refusing an existing table.

        Where the storage has an atomic create-if-absent (local, object stores with conditional writes) this
        is one; elsewhere the check and the write are separate and the caller must make sure nobody creates
        the table meanwhile.
        """
        data = self.to_text(header="Properties saved on").encode("utf-8")
        exists = TableAlreadyExists(f"a Hudi table already exists at {storage.uri} ({PROPERTIES_FILE})")
        if storage.conditional_create:
            try:
                storage.create(PROPERTIES_FILE, data)
            except FileAlreadyExists:
                raise exists from None
            return
        if storage.exists(PROPERTIES_FILE):
            raise exists
        storage.create(PROPERTIES_FILE, data, overwrite=True)

    # -- validation --------------------------------------------------------------------------------------

    def _require(self, key: str) -> str:
        value = self.props.get(key)
        if value is None or value.strip() == "":
            raise InvalidTableConfig(f"{PROPERTIES_FILE}: required key {key} is missing")
        return value.strip()

    def _validate(self) -> None:
        if not self.props:
            raise InvalidTableConfig(f"{PROPERTIES_FILE} is empty")
        # Order matters: refuse unsupported tables by what they are before complaining about details.
        raw_version = self._require(TABLE_VERSION)
        try:
            version = int(raw_version)
        except ValueError:
            raise InvalidTableConfig(f"{TABLE_VERSION}={raw_version!r} is not an integer") from None
        if version not in SUPPORTED_VERSIONS:
            raise UnsupportedTable(
                f"table version {version} is not supported (supported: 6, 8, 9); "
                "upgrade the table with Hudi before using hoodied"
            )
        fmt = self.props.get(BASE_FILE_FORMAT, BASE_FILE_FORMAT_DEFAULT).strip().upper()
        if fmt != self.base_format_required:
            raise UnsupportedTable(
                f"hoodie.table.base.file.format={fmt!r} is not supported "
                f"(only {self.base_format_required}{self._format_hint(fmt)})"
            )
        self._require(NAME)
        raw_type = self._require(TABLE_TYPE)
        try:
            TableType(raw_type.upper())
        except ValueError:
            raise InvalidTableConfig(
                f"{TABLE_TYPE}={raw_type!r} is not COPY_ON_WRITE or MERGE_ON_READ"
            ) from None
        layout = self.props.get(TIMELINE_LAYOUT_VERSION)
        if layout is not None:
            try:
                layout_v = int(layout)
            except ValueError:
                raise InvalidTableConfig(f"{TIMELINE_LAYOUT_VERSION}={layout!r} is not an integer") from None
            expected = 1 if version == 6 else 2
            if layout_v != expected:
                raise UnsupportedTable(
                    f"{TIMELINE_LAYOUT_VERSION}={layout_v} does not match table version {version} "
                    f"(expected {expected})"
                )
        for key in (
            POPULATE_META_FIELDS,
            HIVE_STYLE_PARTITIONING,
            URL_ENCODE_PARTITIONING,
            DROP_PARTITION_COLUMNS,
        ):
            if key in self.props:
                _parse_bool(key, self.props[key])
        mode = self.props.get(RECORD_MERGE_MODE)
        if mode:
            try:
                RecordMergeMode(mode.strip().upper())
            except ValueError:
                raise InvalidTableConfig(f"{RECORD_MERGE_MODE}={mode!r} is not a known merge mode") from None
        raw_checksum = self.props.get(CHECKSUM)
        if raw_checksum is not None:
            try:
                checksum = int(raw_checksum)
            except ValueError:
                raise InvalidTableConfig(f"{CHECKSUM}={raw_checksum!r} is not an integer") from None
            expected_sum = table_checksum(self.database_name, self.name)
            if checksum != expected_sum:
                raise InvalidTableConfig(
                    f"{CHECKSUM}={checksum} does not match the table name "
                    f"{self.database_name + '.' if self.database_name else ''}{self.name} "
                    f"(expected {expected_sum}); the file is corrupt or was edited by hand"
                )
        elif version >= 8:
            raise InvalidTableConfig(f"{PROPERTIES_FILE}: required key {CHECKSUM} is missing")

    # -- typed accessors ---------------------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.props[NAME].strip()

    @property
    def database_name(self) -> str:
        return self.props.get(DATABASE_NAME, "").strip()

    @property
    def table_version(self) -> int:
        return int(self.props[TABLE_VERSION])

    @property
    def table_type(self) -> TableType:
        return TableType(self.props[TABLE_TYPE].strip().upper())

    @property
    def is_mor(self) -> bool:
        return self.table_type is TableType.MERGE_ON_READ

    @property
    def timeline_layout_version(self) -> int:
        return 1 if self.table_version == 6 else 2

    @property
    def record_key_fields(self) -> tuple[str, ...]:
        return _split_fields(self.props.get(RECORDKEY_FIELDS))

    @property
    def partition_fields(self) -> tuple[str, ...]:
        """Partition field names, without the ``:TYPE`` suffix custom key generators add."""
        return tuple(f.split(":", 1)[0] for f in _split_fields(self.props.get(PARTITION_FIELDS)))

    @property
    def ordering_fields(self) -> tuple[str, ...]:
        """The ordering (precombine) fields: v9 ``ordering.fields``, else ``precombine.field``."""
        return _split_fields(self.props.get(ORDERING_FIELDS) or self.props.get(PRECOMBINE_FIELD))

    @property
    def populate_meta_fields(self) -> bool:
        v = self.props.get(POPULATE_META_FIELDS)
        return POPULATE_META_FIELDS_DEFAULT if v is None else _parse_bool(POPULATE_META_FIELDS, v)

    @property
    def hive_style_partitioning(self) -> bool:
        v = self.props.get(HIVE_STYLE_PARTITIONING)
        return HIVE_STYLE_PARTITIONING_DEFAULT if v is None else _parse_bool(HIVE_STYLE_PARTITIONING, v)

    @property
    def payload_class(self) -> str:
        return (
            self.props.get(PAYLOAD_CLASS) or self.props.get(LEGACY_PAYLOAD_CLASS) or PAYLOAD_CLASS_DEFAULT
        ).strip()

    @property
    def record_merge_mode(self) -> RecordMergeMode:
        """The merge mode; for v6 tables inferred from payload class and ordering field as Hudi 1.x does."""
        mode = self.props.get(RECORD_MERGE_MODE)
        if mode:
            return RecordMergeMode(mode.strip().upper())
        payload = self.payload_class.rsplit(".", 1)[-1]
        if payload == "OverwriteWithLatestAvroPayload" and self.table_version >= 8:
            return RecordMergeMode.COMMIT_TIME_ORDERING
        if payload in ("DefaultHoodieRecordPayload", "EventTimeAvroPayload"):
            return RecordMergeMode.EVENT_TIME_ORDERING
        if self.table_version == 6 and payload == "OverwriteWithLatestAvroPayload":
            # 0.x default payload: the ordering field breaks ties among incoming records only; against stored
            # data the latest write wins.
            return RecordMergeMode.COMMIT_TIME_ORDERING
        return RecordMergeMode.CUSTOM

    @property
    def timeline_path(self) -> str:
        """The folder holding the active timeline, relative to the base path."""
        if self.table_version == 6:
            return ".hoodie"
        return ".hoodie/" + self.props.get(TIMELINE_PATH, TIMELINE_PATH_DEFAULT).strip()

    @property
    def timeline_timezone(self) -> str:
        return self.props.get(TIMELINE_TIMEZONE, TIMELINE_TIMEZONE_DEFAULT).strip().upper()

    @property
    def metadata_partitions(self) -> tuple[str, ...]:
        return _split_fields(self.props.get(METADATA_PARTITIONS))

    @property
    def create_schema(self) -> str | None:
        return self.props.get(CREATE_SCHEMA)


# ---------------------------------------------------------------------------------------------------------
# New tables


def _infer_key_generator(record_key_fields: Sequence[str], partition_fields: Sequence[str]) -> str:
    if not partition_fields:
        return "NON_PARTITION"
    if len(record_key_fields) > 1 or len(partition_fields) > 1:
        return "COMPLEX"
    return "SIMPLE"


def _merge_mode_of_payload(payload_class: str) -> RecordMergeMode:
    if payload_class in (DEFAULT_PAYLOAD_CLASS, EVENT_TIME_PAYLOAD_CLASS):
        return RecordMergeMode.EVENT_TIME_ORDERING
    if payload_class == OVERWRITE_PAYLOAD_CLASS:
        return RecordMergeMode.COMMIT_TIME_ORDERING
    return RecordMergeMode.CUSTOM


def new_table_properties(
    name: str,
    table_type: TableType | str,
    table_version: int,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str] = (),
    ordering_fields: Sequence[str] = (),
    *,
    key_generator: str | None = None,
    populate_meta_fields: bool = True,
    hive_style: bool = HIVE_STYLE_PARTITIONING_DEFAULT,
    merge_mode: RecordMergeMode | str | None = None,
    payload_class: str | None = None,
    timeline_timezone: str | None = "UTC",
    create_schema: str | None = None,
    database_name: str = "",
    url_encode_partitioning: bool = False,
    drop_partition_columns: bool = False,
) -> dict[str, str]:
    """The ``hoodie.properties`` keys of a new table, as Hudi's Spark SQL ``CREATE TABLE`` writes them.

    Checked against the fixture tables created by Hudi 0.15 (v6), 1.0 (v8) and 1.1 (v9):

    - every version: name, type, version, layout version, ``archivelog.folder=archived``, record key fields,
      partition fields (when partitioned), ``drop.partition.columns``, ``hive_style_partitioning``,
      ``partitionpath.urlencode``, database name (when given), create schema (when given), checksum;
    - v6: ``keygenerator.class``, ``precombine.field``, ``compaction.payload.class`` (the payload, default
      ``OverwriteWithLatestAvroPayload``) and ``compaction.record.merger.strategy``;
    - v8: ``initial.version``, ``keygenerator.type``, ``precombine.field``, ``record.merge.mode``, the payload
      class and ``record.merge.strategy.id`` that go with the mode, ``timeline.path`` and
      ``timeline.history.path``;
    - v9: as v8 but ``ordering.fields`` and ``table.format=native``, and no payload class or strategy id
      (Hudi 1.1 writes the merge mode alone for event- and commit-time ordering).

    Beyond Hudi's defaults: ``hoodie.table.timeline.timezone`` is written when ``timeline_timezone`` is given
    (default UTC: Hudi's writers then use the zone our instant times use), and
    ``hoodie.populate.meta.fields=false`` when meta fields are off. The merge mode defaults as in Hudi 1.x:
    from the payload class when one is given, else (v8+) event-time ordering with an ordering field and
    commit-time ordering without; v6 defaults to 0.x's ``OverwriteWithLatestAvroPayload``.
    ``key_generator`` is a type name (``SIMPLE``, ``COMPLEX``, ``NON_PARTITION``, ``TIMESTAMP``, ``CUSTOM``)
    or, for v6, a class name; by default it is inferred from the fields.
    Bad combinations raise ValueError; table versions other than 6, 8, 9 UnsupportedTable.
    """
    if table_version not in SUPPORTED_VERSIONS:
        raise UnsupportedTable(f"table version {table_version} is not supported (supported: 6, 8, 9)")
    if not name.strip():
        raise ValueError("a table needs a name")
    ttype = table_type if isinstance(table_type, TableType) else TableType(str(table_type).strip().upper())
    keys = [f.strip() for f in record_key_fields if f.strip()]
    parts = [f.strip() for f in partition_fields if f.strip()]
    ordering = [f.strip() for f in ordering_fields if f.strip()]
    if not keys:
        raise ValueError("a table needs at least one record key field")
    if table_version < 9 and len(ordering) > 1:
        raise ValueError(f"table version {table_version} takes one precombine field, not {ordering}")

    # Merge mode, payload class and merge strategy id, as inferred by Hudi 1.x.
    mode = None
    if merge_mode is not None:
        mode = RecordMergeMode(
            merge_mode.value if isinstance(merge_mode, RecordMergeMode) else merge_mode.upper()
        )
    if payload_class:
        payload_mode = _merge_mode_of_payload(payload_class)
        if mode is not None and mode is not payload_mode:
            raise ValueError(f"merge mode {mode.value} contradicts payload class {payload_class}")
        mode = payload_mode
    elif mode is None:
        # Hudi 1.x infers from the ordering field; 0.x always defaulted to OverwriteWithLatestAvroPayload.
        event_time = bool(ordering) and table_version >= 8
        mode = RecordMergeMode.EVENT_TIME_ORDERING if event_time else RecordMergeMode.COMMIT_TIME_ORDERING
    if mode is RecordMergeMode.CUSTOM and not payload_class:
        raise ValueError("merge mode CUSTOM needs a payload class")
    if mode is RecordMergeMode.CUSTOM and table_version >= 9:
        raise UnsupportedTable(
            "creating v9 tables with a custom payload (merge mode CUSTOM) is not supported"
        )
    payload = payload_class or (
        DEFAULT_PAYLOAD_CLASS if mode is RecordMergeMode.EVENT_TIME_ORDERING else OVERWRITE_PAYLOAD_CLASS
    )

    keygen = (key_generator or _infer_key_generator(keys, parts)).strip()
    if "." in keygen:
        by_class = {c: t for t, c in KEY_GENERATOR_CLASSES.items()}
        if table_version >= 8 and keygen not in by_class:
            raise ValueError(f"key generator class {keygen} has no key generator type for v{table_version}")
        keygen_class, keygen_type = keygen, by_class.get(keygen, "")
    else:
        keygen_type = keygen.upper()
        if keygen_type not in KEY_GENERATOR_CLASSES:
            raise ValueError(
                f"unknown key generator type {keygen!r} (one of {sorted(KEY_GENERATOR_CLASSES)})"
            )
        keygen_class = KEY_GENERATOR_CLASSES[keygen_type]

    props: dict[str, str] = {}
    if table_version == 6:
        props[PAYLOAD_CLASS] = payload
    else:
        props[INITIAL_VERSION] = str(table_version)
        props[KEYGENERATOR_TYPE] = keygen_type
    props[TABLE_TYPE] = ttype.value
    if ordering and table_version < 9:
        props[PRECOMBINE_FIELD] = ordering[0]
    if parts:
        props[PARTITION_FIELDS] = ",".join(parts)
    props[ARCHIVELOG_FOLDER] = ARCHIVELOG_FOLDER_DEFAULT
    if create_schema:
        props[CREATE_SCHEMA] = create_schema
    props[TIMELINE_LAYOUT_VERSION] = "1" if table_version == 6 else "2"
    if table_version >= 8:
        props[TIMELINE_HISTORY_PATH] = TIMELINE_HISTORY_PATH_DEFAULT
    props[DROP_PARTITION_COLUMNS] = _bool_text(drop_partition_columns)
    if table_version >= 9:
        props[TABLE_FORMAT] = TABLE_FORMAT_DEFAULT
    if table_version == 8:
        props[PAYLOAD_CLASS] = payload
        props[RECORD_MERGE_STRATEGY_ID] = {
            RecordMergeMode.EVENT_TIME_ORDERING: EVENT_TIME_MERGE_STRATEGY_ID,
            RecordMergeMode.COMMIT_TIME_ORDERING: COMMIT_TIME_MERGE_STRATEGY_ID,
            RecordMergeMode.CUSTOM: PAYLOAD_MERGE_STRATEGY_ID,
        }[mode]
    props[NAME] = name.strip()
    props[RECORDKEY_FIELDS] = ",".join(keys)
    if table_version >= 8:
        props[TIMELINE_PATH] = TIMELINE_PATH_DEFAULT
    if ordering and table_version >= 9:
        props[ORDERING_FIELDS] = ",".join(ordering)
    if table_version == 6:
        props[LEGACY_RECORD_MERGER_STRATEGY] = EVENT_TIME_MERGE_STRATEGY_ID
    props[HIVE_STYLE_PARTITIONING] = _bool_text(hive_style)
    if table_version == 6:
        props[KEYGENERATOR_CLASS] = keygen_class
    if not populate_meta_fields:
        props[POPULATE_META_FIELDS] = "false"
    if database_name.strip():
        props[DATABASE_NAME] = database_name.strip()
    props[URL_ENCODE_PARTITIONING] = _bool_text(url_encode_partitioning)
    if table_version >= 8:
        props[RECORD_MERGE_MODE] = mode.value
    if timeline_timezone is not None:
        zone = timeline_timezone.strip().upper()
        if zone not in ("UTC", "LOCAL"):
            raise ValueError(f"timeline time zone {timeline_timezone!r} is not UTC or LOCAL")
        props[TIMELINE_TIMEZONE] = zone
    props[TABLE_VERSION] = str(table_version)
    props[CHECKSUM] = str(table_checksum(database_name.strip(), name.strip()))
    return props


def create_table_properties(
    name: str,
    table_type: TableType | str,
    table_version: int,
    record_key_fields: Sequence[str],
    partition_fields: Sequence[str] = (),
    ordering_fields: Sequence[str] = (),
    *,
    key_generator: str | None = None,
    populate_meta_fields: bool = True,
    hive_style: bool = HIVE_STYLE_PARTITIONING_DEFAULT,
    merge_mode: RecordMergeMode | str | None = None,
    payload_class: str | None = None,
    timeline_timezone: str | None = "UTC",
    create_schema: str | None = None,
    database_name: str = "",
    url_encode_partitioning: bool = False,
    drop_partition_columns: bool = False,
    now: dt.datetime | None = None,
) -> str:
    """The text of a new table's ``hoodie.properties`` (``#Properties saved on ...``); see
    :func:`new_table_properties` for the keys. Write it with :meth:`TableConfig.create` semantics (refuse an
    existing table)."""
    config = TableConfig.for_new_table(
        name,
        table_type,
        table_version,
        record_key_fields,
        partition_fields,
        ordering_fields,
        key_generator=key_generator,
        populate_meta_fields=populate_meta_fields,
        hive_style=hive_style,
        merge_mode=merge_mode,
        payload_class=payload_class,
        timeline_timezone=timeline_timezone,
        create_schema=create_schema,
        database_name=database_name,
        url_encode_partitioning=url_encode_partitioning,
        drop_partition_columns=drop_partition_columns,
    )
    return config.to_text(now=now, header="Properties saved on")


def _bool_text(value: bool) -> str:
    return "true" if value else "false"


def recover_properties(storage: Storage) -> None:
    """Finish or undo an interrupted update of ``hoodie.properties`` (Hudi's ``recoverIfNeeded``).

    When the file is missing or fails validation and a valid backup exists, the backup becomes the file;
    the backup is deleted in every case but one: a corrupt file with a corrupt backup raises
    InvalidTableConfig and leaves both for a person to look at. Unlike Hudi we never delete a valid file
    that merely lacks a checksum (v6 tables written before 0.11).
    """
    try:
        main = storage.read(PROPERTIES_FILE).decode("utf-8")
        TableConfig.from_text(main)
        main_ok = True
    except FileNotFoundError:
        main_ok = False
    except (UnicodeDecodeError, InvalidTableConfig):
        main_ok = False
    if not main_ok:
        try:
            backup = storage.read(PROPERTIES_BACKUP_FILE)
        except FileNotFoundError:
            return
        try:
            backup_config = TableConfig.from_text(backup.decode("utf-8"))
        except (UnicodeDecodeError, InvalidTableConfig) as e:
            raise InvalidTableConfig(
                f"{PROPERTIES_FILE} is missing or corrupt and so is {PROPERTIES_BACKUP_FILE}: {e}"
            ) from None
        if CHECKSUM not in backup_config.props:
            raise InvalidTableConfig(f"{PROPERTIES_BACKUP_FILE} carries no checksum; not restoring it")
        storage.create(PROPERTIES_FILE, backup, overwrite=True)
    storage.delete(PROPERTIES_BACKUP_FILE)


# ---------------------------------------------------------------------------------------------------------
# java.util.Properties.store


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _utf16_units(s: str) -> list[int]:
    data = s.encode("utf-16-be", errors="surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def _spread(h: int) -> int:
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """The order in which ``java.util.Properties.store`` (Java 9+) writes keys put in this order.

    ``Properties`` keeps its entries in a ``ConcurrentHashMap`` created for 8 entries (a table of 16 bins)
    and writes them in iteration order: bin by bin (bin = spread hash & (n - 1)), in insertion order within a
    bin; at 3/4 full the table doubles and each bin splits as ``ConcurrentHashMap.transfer`` does (the
    entries before the bin's last run of equal split bits come out reversed). Every Hudi 1.x fixture written
    by Java 9+ has its keys in exactly this order. Bins that would reach 8 entries (never seen with the few
    dozen keys of a table config) are not modelled.
    """
    n = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    count = 0
    size_ctl = n - (n >> 2)
    for key in keys:
        h = _spread(_java_string_hash(key))
        bin_ = table[h & (n - 1)]
        if any(k == key for _, k in bin_):
            continue
        bin_.append((h, key))
        count += 1
        if count >= size_ctl:
            grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
            for i, entries in enumerate(table):
                if not entries:
                    continue
                bits = [eh & n for eh, _ in entries]
                last_run = len(entries) - 1
                while last_run > 0 and bits[last_run - 1] == bits[-1]:
                    last_run -= 1
                low: list[tuple[int, str]] = []
                high: list[tuple[int, str]] = []
                (high if bits[-1] else low).extend(entries[last_run:])
                for j in range(last_run):
                    (high if bits[j] else low).insert(0, entries[j])
                grown[i], grown[i + n] = low, high
            table, n = grown, 2 * n
            size_ctl = n - (n >> 2)
    return [key for entries in table for _, key in entries]


def _java_escape(s: str, *, is_key: bool) -> str:
    """``Properties.saveConvert``: keys escape every space, values a leading one; ``= : # !`` and control
    characters are escaped; anything outside printable ASCII becomes ``\\uXXXX`` (UTF-16 units)."""
    out: list[str] = []
    for i, unit in enumerate(_utf16_units(s)):
        c = chr(unit)
        if 61 < unit < 127:
            out.append("\\\\" if c == "\\" else c)
        elif c == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "=:#!":
            out.append("\\" + c)
        elif unit < 0x20 or unit > 0x7E:
            out.append(f"\\u{unit:04X}")
        else:
            out.append(c)
    return "".join(out)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _java_instant_text(moment: dt.datetime) -> str:
    """``java.time.Instant.toString()`` (ISO-8601, fraction in groups of three digits, ``Z``)."""
    u = moment.astimezone(dt.UTC)
    fraction = ""
    if u.microsecond:
        fraction = f".{u.microsecond // 1000:03d}" if u.microsecond % 1000 == 0 else f".{u.microsecond:06d}"
    return u.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _java_date_text(moment: dt.datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``EEE MMM dd HH:mm:ss zzz yyyy``."""
    u = moment.astimezone(dt.UTC)
    return f"{_DAYS[u.weekday()]} {_MONTHS[u.month - 1]} {u.day:02d} {u:%H:%M:%S} UTC {u.year}"
