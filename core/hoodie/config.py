"""Table configuration: ``.hoodie/hoodie.properties``.

The file is a Java properties file, read and written as Java does by :mod:`hoodie.java_compat`;
:class:`TableConfig` validates the keys that decide how
the table is read and gives them typed accessors. Everything this library refuses is refused here, up front,
with :class:`~hoodie.errors.UnsupportedTable`: table versions other than 6, 8 and 9 and base file formats
other than PARQUET. A new table's keys come from :mod:`hoodie.new_table`.
"""

from __future__ import annotations

import datetime as dt
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar, Self

from hoodie.errors import (
    FileAlreadyExists,
    InvalidTableConfig,
    StorageError,
    TableAlreadyExists,
    TableNotFound,
    UnsupportedTable,
    VersionConflict,
)
from hoodie.java_compat import parse_properties, store_properties
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
    #: The props this config was derived from by :meth:`updated` (the file as read): :meth:`store` refuses to
    #: write when the file no longer holds them. None for a config as read, or built from scratch.
    based_on: Mapping[str, str] | None = field(default=None, compare=False, repr=False)

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
        return TableConfig(props, self.based_on if self.based_on is not None else dict(self.props))

    def to_text(self, *, now: dt.datetime | None = None, header: str | None = None) -> str:
        """The file as Hudi writes it (``java.util.Properties.store`` on Java 9+).

        Two comment lines (``#<header> <ISO instant>`` and ``#<date>``, here always in UTC), then every key in
        the order Java's ``Properties`` iterates them, with Java's escapes (see
        :func:`~hoodie.java_compat.store_properties`). ``hoodie.table.checksum`` is recomputed from the names.
        ``header`` defaults to Hudi's: ``Updated at`` when the config already carries a checksum, else
        ``Properties saved on``.
        """
        moment = (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
        props = dict(self.props)
        if header is None:
            header = "Updated at" if CHECKSUM in props else "Properties saved on"
        props[CHECKSUM] = str(table_checksum(self.database_name, self.name))
        return store_properties(props, header, moment)

    def store(self, storage: Storage) -> TableConfig:
        """Replace the table's ``hoodie.properties`` with this config, as ``HoodieTableConfig.modify`` does:

        0. recover from an interrupted earlier update (a valid backup replaces a missing or corrupt file);
        1. copy the current file to ``hoodie.properties.backup`` (readers fall back to it);
        2. write the new file (checksum recomputed) with an atomic replace;
        3. read it back and check its checksum (on a mismatch the file is deleted and readers use the backup);
        4. delete the backup.

        Hudi deletes the file between steps 1 and 2; an atomic replace makes that unnecessary (readers see the
        old or the new file, never none). The caller holds the table lock: two updates must not interleave.

        A lock is a lease, not a fence: a holder paused past it may wake and write. So the write of step 2 is
        a compare-and-set (:meth:`~hoodie.storage.Storage.replace_if_version`) on the version read in step 1,
        and a config derived by :meth:`updated` is written only while the file still holds the props it was
        derived from: a writer whose read is stale gets :class:`~hoodie.errors.VersionConflict`, its backup is
        removed, and the file stays as the other writer left it. Where the store has no compare-and-set
        (HDFS, ``conditional_put: false``) the table lock alone keeps updates apart, as in Hudi.
        Returns the config as stored.
        """
        recover_properties(storage)
        try:
            current, version = storage.read_for_update(PROPERTIES_FILE)
        except FileNotFoundError:
            raise TableNotFound(f"no Hudi table at {storage.uri}: {PROPERTIES_FILE} is missing") from None
        if self.based_on is not None and parse_properties(current.decode("utf-8", "replace")) != dict(
            self.based_on
        ):
            raise VersionConflict(
                f"{PROPERTIES_FILE} changed since this config was read (another writer updated it): "
                "read it again"
            )
        try:
            storage.create(PROPERTIES_BACKUP_FILE, current, overwrite=not storage.conditional_create)
        except FileAlreadyExists:
            raise StorageError(
                f"{PROPERTIES_BACKUP_FILE} appeared while updating the table config: another update runs"
            ) from None
        text = self.to_text()
        if version is None:
            storage.create(PROPERTIES_FILE, text.encode("utf-8"), overwrite=True)
        else:
            try:
                storage.replace_if_version(PROPERTIES_FILE, text.encode("utf-8"), version)
            except VersionConflict:
                storage.delete(PROPERTIES_BACKUP_FILE)  # ours (created above); the file is the other's
                raise
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


def recover_properties(storage: Storage) -> None:
    """Finish or undo an interrupted update of ``hoodie.properties`` (Hudi's ``recoverIfNeeded``).

    When the file is missing or fails validation and a valid backup exists, the backup becomes the file;
    the backup is deleted in every case but one: a corrupt file with a corrupt backup raises
    InvalidTableConfig and leaves both for a person to look at. The restore is conditional on the state read
    (create-if-absent for a missing file, compare-and-set for a corrupt one): when another writer got there
    first, its file stands and so does the backup. Unlike Hudi we never delete a valid file
    that merely lacks a checksum (v6 tables written before 0.11).
    """
    version: str | None = None
    missing = False
    try:
        raw, version = storage.read_for_update(PROPERTIES_FILE)
        TableConfig.from_text(raw.decode("utf-8"))
        main_ok = True
    except FileNotFoundError:
        main_ok, missing = False, True
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
        try:
            if version is not None:  # corrupt: replace the version read, not whatever is there by now
                storage.replace_if_version(PROPERTIES_FILE, backup, version)
            elif missing and storage.conditional_create:  # missing: create it unless someone did meanwhile
                storage.create(PROPERTIES_FILE, backup)
            else:
                storage.create(PROPERTIES_FILE, backup, overwrite=True)
        except (VersionConflict, FileAlreadyExists):
            return  # another writer restored or updated it: the backup is theirs to delete
    storage.delete(PROPERTIES_BACKUP_FILE)
