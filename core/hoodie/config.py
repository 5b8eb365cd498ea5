"""Table configuration: ``.hoodie/hoodie.properties``.

The file is a Java properties file. :func:`parse_properties` reads that grammar (comments, ``key=value`` or
``key:value``, backslash escapes, line continuations); :class:`TableConfig` validates the keys that decide how
the table is read and gives them typed accessors. Everything this library refuses is refused here, up front,
with :class:`~hoodie.errors.UnsupportedTable`: table versions other than 6, 8 and 9 and base file formats
other than PARQUET.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from hoodie.errors import InvalidTableConfig, TableNotFound, UnsupportedTable
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
    return "".join(out)


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


def _split_fields(value: str | None) -> tuple[str, ...]:
    if not value:
        return ()
    return tuple(f.strip() for f in value.split(",") if f.strip())


@dataclass(frozen=True)
class TableConfig:
    """The validated contents of ``hoodie.properties``. ``props`` holds every key as read."""

    props: Mapping[str, str]

    def __post_init__(self) -> None:
        self._validate()

    # -- loading -----------------------------------------------------------------------------------------

    @classmethod
    def from_text(cls, text: str) -> TableConfig:
        return cls(parse_properties(text))

    @classmethod
    def load(cls, storage: Storage) -> TableConfig:
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
        if fmt != "PARQUET":
            raise UnsupportedTable(f"hoodie.table.base.file.format={fmt!r} is not supported (only PARQUET)")
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
