"""The archived timeline of table version 6: Hudi log files of ``HoodieArchivedMetaEntry`` records.

Where and what (Hudi's ``TimelineArchiverV1``, ``ArchivedTimelineLoaderV1``, ``HoodieArchivedLogFile``)::

    .hoodie/<hoodie.archivelog.folder>/          default "archived"; an empty value means .hoodie itself
        .commits_.archive.<N>[_<writeToken>]     a log file: file id "commits", empty instant, ".archive"
                                                 N = 1, 2, ...; writeToken <task>-<stage>-<attempt>
    file    := block*                            the log block grammar of :mod:`hoodie.log.block`
    block   := AVRO_DATA, header SCHEMA only      no INSTANT_TIME: the blocks belong to no instant
               content version 3, hoodie.commits.archival.batch (10) records per block
    record  := HoodieArchivedMetaEntry            one per STATE FILE of the active timeline (see below)

A record names its state file by ``commitTime`` (requested time), ``actionType`` (the action the file
names: ``compaction`` while pending, ``commit`` once completed) and ``actionState`` (REQUESTED, INFLIGHT,
COMPLETED; null in very old files, meaning COMPLETED); ``stateTransitionTime`` is the file's modification
time as ``yyyyMMddHHmmssSSS`` in the timeline's time zone, and ``version`` stays null (Hudi never sets it).
The file's content goes, decoded, into one payload field (:func:`archive_records_of` gives the rules).

Reading (:func:`read_archive_log`) takes every archive file, newest (highest N) first as Hudi's loader does,
and every record of every Avro data block. A crashed archiver leaves a torn last block in the newest file:
it is skipped with a warning. Damage anywhere else raises :class:`~hoodie.errors.CorruptTimelineFile` naming
the file and offset, since skipping it would silently drop history.

Writing (:func:`write_archive_log`) puts the records of one archival run into a NEW file, version N + 1 of
the highest present, created whole with the storage's create-if-absent: object stores cannot append, and
Hudi's readers read every file, so nothing is lost by never appending as Hudi 0.x does where it can.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import io
import json
import logging
import re
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import fastavro

from hoodie.avro import load_schema
from hoodie.avro.container import read_container
from hoodie.config import ARCHIVELOG_FOLDER, ARCHIVELOG_FOLDER_DEFAULT, TableConfig
from hoodie.errors import (
    CorruptTimelineFile,
    FileAlreadyExists,
    InvalidFileName,
    InvalidInstant,
    InvalidTableConfig,
    PathOutsideTable,
    UnsupportedTable,
)
from hoodie.failpoints import failpoint
from hoodie.log.block import BlockType, HeaderKey, LogBlock, iter_blocks
from hoodie.log.writer import AVRO_DATA_BLOCK_VERSION, frame_block
from hoodie.storage import Storage, check_relative
from hoodie.timeline.archived import ArchivedInstant, StateFile
from hoodie.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMMIT,
    COMPACTION,
    DELTA_COMMIT,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    ROLLBACK,
    SAVEPOINT,
    Instant,
    State,
)
from hoodie.timeline.instant_time import format_instant_time
from hoodie.timeline.metadata.commit import commit_metadata_to_avro, decode_commit_metadata
from hoodie.timeline.metadata.fields import conform

__all__ = [
    "ARCHIVAL_BATCH_DEFAULT",
    "ARCHIVE_TABLE_VERSION",
    "ArchiveLogFile",
    "archive_files",
    "archive_folder",
    "archive_records_of",
    "archive_schema",
    "encode_archive_block",
    "read_archive_log",
    "write_archive_log",
]

logger = logging.getLogger(__name__)

ARCHIVE_TABLE_VERSION = 6
"""The only table version whose history is an archive log (8+ keep the LSM history)."""
ARCHIVAL_BATCH_DEFAULT = 10
"""``hoodie.commits.archival.batch``: records per Avro data block."""
ROLLING_STAT_KEY = "ROLLING_STAT"
"""Hudi empties this extraMetadata key of archived commit metadata ("do not archive rolling stats")."""

_ENTRY = "HoodieArchivedMetaEntry"
_NAME_RE = re.compile(r"\.commits_\.archive\.(\d+)(?:_(\d+-\d+-\d+))?")
_GLOB_PREFIX = ".commits_.archive"  # Hudi globs ".commits_.archive*"
_WRITE_TOKEN_RE = re.compile(r"\d+-\d+-\d+")
_I32 = struct.Struct(">i")
_I32_PAIR = struct.Struct(">ii")
_AVRO_BLOCK_VERSIONS = frozenset({1, 2, 3})
_CREATE_ATTEMPTS = 100
_STATES = {s.name: s for s in State}


# -- names ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ArchiveLogFile:
    """An archive file's name: ``.commits_.archive.<version>[_<writeToken>]``.

    ``ArchiveLogFile.parse(name).file_name == name``. A separate grammar from data log files
    (:class:`~hoodie.log.log_file.LogFile`): the file id is always ``commits`` and the instant empty.
    """

    version: int
    write_token: str | None = None

    def __post_init__(self) -> None:
        if self.version < 0:
            raise InvalidFileName(f"archive file version must not be negative, got {self.version}")
        if self.write_token is not None and not _WRITE_TOKEN_RE.fullmatch(self.write_token):
            raise InvalidFileName(
                f"write token {self.write_token!r} is not <taskPartitionId>-<stageId>-<taskAttemptId>"
            )

    @classmethod
    def parse(cls, name: str) -> ArchiveLogFile:
        """Parse an archive file name (not a path); :class:`InvalidFileName` for anything else."""
        m = _NAME_RE.fullmatch(name)
        if m is None:
            raise InvalidFileName(f"{name!r} is not an archive file name (.commits_.archive.<N>_<token>)")
        parsed = cls(int(m.group(1)), m.group(2))
        if parsed.file_name != name:  # e.g. a version written with leading zeros
            raise InvalidFileName(f"{name!r} does not print back the same (as {parsed.file_name!r})")
        return parsed

    @classmethod
    def try_parse(cls, name: str) -> ArchiveLogFile | None:
        """Like :meth:`parse`, but ``None`` for names that are not archive files (``.crc`` side files)."""
        try:
            return cls.parse(name)
        except InvalidFileName:
            return None

    @property
    def file_name(self) -> str:
        token = "" if self.write_token is None else f"_{self.write_token}"
        return f"{_GLOB_PREFIX}.{self.version}{token}"

    def __str__(self) -> str:
        return self.file_name


def archive_folder(config: TableConfig) -> str:
    """The archive folder relative to the base path: ``.hoodie/<hoodie.archivelog.folder>``.

    Hudi joins the key's value (default ``archived``) to the meta folder, so an empty value is ``.hoodie``
    itself (the layout of very old tables). A value that leaves ``.hoodie`` raises InvalidTableConfig.
    """
    value = config.props.get(ARCHIVELOG_FOLDER, ARCHIVELOG_FOLDER_DEFAULT).strip()
    try:
        sub = check_relative(value)
    except PathOutsideTable:
        raise InvalidTableConfig(f"{ARCHIVELOG_FOLDER}={value!r} is not a folder below .hoodie") from None
    return f".hoodie/{sub}" if sub else ".hoodie"


def archive_files(storage: Storage, config: TableConfig) -> list[ArchiveLogFile]:
    """The archive files present, newest (highest version) first: the order Hudi's loader reads them in.

    ``.crc`` side files are no archive files. Other names that start like one (Hudi's glob takes them) but
    do not follow the grammar are left out with a warning: no archiver writes them.
    """
    found: list[ArchiveLogFile] = []
    for info in storage.list(archive_folder(config)):
        if info.is_dir or not info.name.startswith(_GLOB_PREFIX) or info.name.endswith(".crc"):
            continue
        parsed = ArchiveLogFile.try_parse(info.name)
        if parsed is None:
            logger.warning("ignoring %s: not an archive file name (.commits_.archive.<N>_<token>)", info.path)
            continue
        found.append(parsed)
    found.sort(key=lambda f: (-f.version, f.write_token or ""))
    return found


# -- reading -------------------------------------------------------------------------------------------------


def read_archive_log(storage: Storage, config: TableConfig) -> list[ArchivedInstant]:
    """Every record of every archive file, one :class:`ArchivedInstant` per archived state file.

    Files newest first (as Hudi reads them), then blocks and records in file order. Each entry's instant is
    (``commitTime``, ``actionType``, ``actionState``; null = COMPLETED) without a completion time (this
    layout keeps none) and its ``record`` the decoded record, in the writer schema of its block. Only a torn
    tail of the newest file is skipped (logged); other damage raises CorruptTimelineFile naming file and
    offset.
    """
    folder = archive_folder(config)
    out: list[ArchivedInstant] = []
    for i, archive in enumerate(archive_files(storage, config)):
        path = f"{folder}/{archive.file_name}"
        out.extend(_read_file(path, storage.read(path), newest=i == 0))
    return out


def _read_file(path: str, data: bytes, *, newest: bool) -> list[ArchivedInstant]:
    blocks = list(iter_blocks(data))
    last_sound = max((i for i, b in enumerate(blocks) if b.block_type is not BlockType.CORRUPT), default=-1)
    out: list[ArchivedInstant] = []
    for i, block in enumerate(blocks):
        if block.block_type is BlockType.CORRUPT:
            reason = block.corrupt_reason or "corrupt block"
            if newest and i > last_sound:
                logger.warning(
                    "skipping the torn tail of %s at offset %d (%d bytes), left by a crashed archiver: %s",
                    path,
                    block.offset,
                    block.length,
                    reason,
                )
                continue
            where = "the tail of an older archive file" if i > last_sound else "the middle of the file"
            raise CorruptTimelineFile(
                f"{path}: damaged bytes at offset {block.offset} ({block.length} bytes, {where}): {reason}"
            )
        if block.block_type is not BlockType.AVRO_DATA:
            logger.warning(
                "%s: skipping the %s (archive files hold Avro data blocks)", path, block.describe()
            )
            continue
        for record in _decode_records(path, block):
            out.append(ArchivedInstant(_instant_of(path, block, record), record=record))
    return out


@lru_cache(maxsize=8)
def _parsed_schema(text: str) -> Any:
    return fastavro.parse_schema(json.loads(text))


def _decode_records(path: str, block: LogBlock) -> list[dict[str, Any]]:
    """The records of an archive data block, decoded with the block's SCHEMA header as writer schema."""
    what = f"{path}: {block.describe()}"
    if block.schema is None:
        raise CorruptTimelineFile(f"{what}: no SCHEMA header, the records cannot be decoded")
    try:
        schema = _parsed_schema(block.schema)
    except Exception as e:  # fastavro and json raise many types on a bad schema
        raise CorruptTimelineFile(f"{what}: its SCHEMA header is unusable: {type(e).__name__}: {e}") from e
    content = block.content
    size = len(content)
    if size < 8:
        raise CorruptTimelineFile(f"{what}: {size} content bytes, too short for version and record count")
    version, count = _I32_PAIR.unpack_from(content, 0)
    if version not in _AVRO_BLOCK_VERSIONS:
        raise CorruptTimelineFile(f"{what}: unknown Avro data block version {version}")
    if count < 0 or count > (size - 8) // 4:
        raise CorruptTimelineFile(f"{what}: record count {count} does not fit in {size} content bytes")
    records: list[dict[str, Any]] = []
    stream = io.BytesIO(content)
    pos = 8
    for i in range(count):
        if pos + 4 > size:
            raise CorruptTimelineFile(f"{what}: the content ends before record {i}")
        (length,) = _I32.unpack_from(content, pos)
        pos += 4
        if length < 0 or pos + length > size:
            raise CorruptTimelineFile(f"{what}: record {i} length {length} runs past the content")
        stream.seek(pos)
        try:
            record = fastavro.schemaless_reader(stream, schema, None)
        except Exception as e:  # fastavro raises many exception types on bad bytes
            raise CorruptTimelineFile(f"{what}: record {i} does not decode: {type(e).__name__}: {e}") from e
        if stream.tell() != pos + length or not isinstance(record, dict):
            raise CorruptTimelineFile(
                f"{what}: record {i} decodes to {stream.tell() - pos} bytes but its length says {length}"
            )
        records.append(record)
        pos += length
    if pos != size:
        raise CorruptTimelineFile(f"{what}: {size - pos} bytes after the last of {count} records")
    return records


def _instant_of(path: str, block: LogBlock, record: Mapping[str, Any]) -> Instant:
    time, action, state_name = record.get("commitTime"), record.get("actionType"), record.get("actionState")
    what = f"{path}: {block.describe()}: record {time!r} {action!r} {state_name!r}"
    state = State.COMPLETED if state_name is None else _STATES.get(str(state_name))
    if state is None:
        raise CorruptTimelineFile(f"{what}: unknown actionState (REQUESTED, INFLIGHT or COMPLETED)")
    if not isinstance(time, str) or not isinstance(action, str):
        raise CorruptTimelineFile(f"{what}: commitTime and actionType must be set")
    try:
        return Instant(time, action, state)
    except InvalidInstant as e:
        raise CorruptTimelineFile(f"{what}: {e}") from e


# -- records -------------------------------------------------------------------------------------------------


def archive_schema() -> str:
    """The ``HoodieArchivedMetaEntry`` schema text our blocks carry in their SCHEMA header: Hudi 0.15.0's
    (the schema set of table version 6), as Avro's Java ``Schema.toString()`` prints it. (Files written by
    Hudi 0.14 carry that release's text, without the clean records' ``extraMetadata``; readers decode each
    block with its own header, so both read alike.)"""
    return load_schema(_ENTRY, ARCHIVE_TABLE_VERSION).java_json


def _check_table_version(table_version: int) -> None:
    if table_version != ARCHIVE_TABLE_VERSION:
        raise UnsupportedTable(
            f"table version {table_version} has no archive log: it is the history of table version 6 "
            "(8 and 9 keep an LSM history under .hoodie/timeline/history)"
        )


def archive_records_of(
    states: Sequence[StateFile], *, table_version: int, timeline_timezone: str = "LOCAL"
) -> list[dict[str, Any]]:
    """The ``HoodieArchivedMetaEntry`` record of each state file, in the order given (Hudi's
    ``MetadataConversionUtils.createMetaWrapper`` of table version 6, as the 0.14 archives in the fixtures
    show it). Every record has every field of :func:`archive_schema`; the payload field by state file:

    ===============================================  =============================================
    clean requested / inflight, completed            hoodieCleanerPlan, hoodieCleanMetadata
    commit, deltacommit (any state)                  hoodieCommitMetadata (JSON converted to Avro)
    replacecommit/clustering requested               hoodieRequestedReplaceMetadata
    ... inflight, completed                          HoodieInflightReplaceMetadata,
                                                     hoodieReplaceCommitMetadata
    rollback completed (pending: none)               hoodieRollbackMetadata
    savepoint                                        hoodieSavePointMetadata
    compaction, logcompaction requested (inflight:   hoodieCompactionPlan
    none)
    ===============================================  =============================================

    Archived commit metadata gets ``extraMetadata["ROLLING_STAT"] = ""`` and, when ``compacted``,
    operationType ``COMPACT``; empty pending commit files archive as empty metadata of operationType
    UNKNOWN (Hudi's empty Java object). A completed file that is empty, and any other empty file whose
    action has a payload, archives as a record without payload (Hudi: "empty completed instants due to
    crash"). Avro payloads are fitted to table version 6's schemas (as Hudi reads them into its classes).

    ``stateTransitionTime`` is the state file's modification time, an aware one first moved to the
    timeline's zone (``hoodie.table.timeline.timezone``: UTC, or LOCAL for this machine's zone), a naive
    one taken as is; null when unknown. Raises CorruptTimelineFile (naming the file) for content that does
    not decode, ValueError for actions Hudi never archives (indexing, restore, schema commits),
    UnsupportedTable for table versions other than 6.
    """
    _check_table_version(table_version)
    zone = timeline_timezone.strip().upper()
    if zone not in ("UTC", "LOCAL"):
        raise ValueError(f"timeline time zone must be UTC or LOCAL, not {timeline_timezone!r}")
    return [_record_of(state, zone) for state in states]


def _transition_time(modified: dt.datetime | None, zone: str) -> str | None:
    if modified is None:
        return None
    if modified.tzinfo is not None:
        modified = modified.astimezone(dt.UTC) if zone == "UTC" else modified.astimezone()
    return format_instant_time(modified)


def _record_of(state: StateFile, zone: str) -> dict[str, Any]:
    instant = state.instant
    fields = load_schema(_ENTRY, ARCHIVE_TABLE_VERSION).definition["fields"]
    record: dict[str, Any] = {f["name"]: None for f in fields}  # version too: Hudi leaves it null
    record.update(
        commitTime=instant.time,
        actionType=instant.action,
        actionState=instant.state.name,
        stateTransitionTime=_transition_time(state.modified, zone),
    )
    try:
        payload = _payload_of(state)
    except CorruptTimelineFile as e:
        raise CorruptTimelineFile(f"{state.name}: {e}") from e
    if payload is not None:
        field, value = payload
        record[field] = value
    return record


def _payload_of(state: StateFile) -> tuple[str, dict[str, Any]] | None:
    """(payload field, Avro record) of a state file, or None for a record without payload."""
    instant, data = state.instant, state.content
    action, st = instant.action, instant.state
    if action in (COMMIT, DELTA_COMMIT):
        if not data and st is State.COMPLETED:
            return None
        return "hoodieCommitMetadata", _archived_commit(data, action, replace=False)
    if action in (REPLACE_COMMIT, CLUSTERING):
        if not data:
            return None
        if st is State.COMPLETED:
            return "hoodieReplaceCommitMetadata", _archived_commit(data, action, replace=True)
        if st is State.INFLIGHT:
            return "HoodieInflightReplaceMetadata", _archived_commit(data, action, replace=False)
        return "hoodieRequestedReplaceMetadata", _avro_payload(data, "HoodieRequestedReplaceMetadata")
    if action == CLEAN:
        if not data:
            return None
        if st is State.COMPLETED:
            return "hoodieCleanMetadata", _avro_payload(data, "HoodieCleanMetadata")
        return "hoodieCleanerPlan", _avro_payload(data, "HoodieCleanerPlan")
    if action == ROLLBACK:
        if not data or st is not State.COMPLETED:
            return None
        return "hoodieRollbackMetadata", _avro_payload(data, "HoodieRollbackMetadata")
    if action == SAVEPOINT:
        if not data:
            return None
        return "hoodieSavePointMetadata", _avro_payload(data, "HoodieSavepointMetadata")
    if action in (COMPACTION, LOG_COMPACTION):
        if not data or st is not State.REQUESTED:
            return None
        return "hoodieCompactionPlan", _avro_payload(data, "HoodieCompactionPlan")
    raise ValueError(f"{state.name}: Hudi never archives {action} instants (no archive record for them)")


def _archived_commit(data: bytes, action: str, *, replace: bool) -> dict[str, Any]:
    """Commit metadata as Hudi archives it: its Java object (replace form for a completed replacecommit,
    plain otherwise) converted to Avro, rolling stats emptied, ``compacted`` as operationType COMPACT."""
    md = decode_commit_metadata(data, table_version=ARCHIVE_TABLE_VERSION, action=action)
    if replace != md.replace:
        replaced = md.partition_to_replace_file_ids if replace else {}
        md = dataclasses.replace(md, replace=replace, partition_to_replace_file_ids=replaced)
    if md.operation_type is None and "operationType" not in (md.json_keys or ()):
        md = dataclasses.replace(md, operation_type="UNKNOWN")  # the Java object's default (empty files too)
    record = commit_metadata_to_avro(md, table_version=ARCHIVE_TABLE_VERSION)
    if md.compacted:
        record["operationType"] = "COMPACT"
    extra = dict(record.get("extraMetadata") or {})
    extra[ROLLING_STAT_KEY] = ""
    record["extraMetadata"] = extra
    return record


def _avro_payload(data: bytes, name: str) -> dict[str, Any]:
    """The record of an Avro timeline file, fitted to table version 6's schema of ``name``."""
    container = read_container(data)
    if container.schema_short_name != name:
        raise CorruptTimelineFile(f"expected an Avro {name}, found {container.schema_name}")
    return _fit(container.record, name)


def _fit(record: dict[str, Any], name: str) -> dict[str, Any]:
    """Avro schema resolution into Hudi's class of ``name``: its fields only, defaults for missing ones."""
    return conform(record, load_schema(name, ARCHIVE_TABLE_VERSION))


# -- writing -------------------------------------------------------------------------------------------------


def encode_archive_block(records: Sequence[Mapping[str, Any]], *, schema: str | None = None) -> bytes:
    """An archive block: AVRO_DATA, header SCHEMA only (``schema``, default :func:`archive_schema`),
    content version 3, the records in Avro binary (the bytes of Java's ``BinaryEncoder``). Raises
    ValueError naming the record when one does not fit the schema."""
    text = archive_schema() if schema is None else schema
    parsed = _parsed_schema(text)
    parts = [_I32_PAIR.pack(AVRO_DATA_BLOCK_VERSION, len(records))]
    for i, record in enumerate(records):
        buf = io.BytesIO()
        try:
            fastavro.schemaless_writer(buf, parsed, dict(record))
        except Exception as e:  # fastavro raises many exception types on values that do not fit
            name = f"{record.get('commitTime')} {record.get('actionType')} {record.get('actionState')}"
            raise ValueError(f"archive record {i} ({name}) does not fit the schema: {e}") from e
        raw = buf.getvalue()
        parts.append(_I32.pack(len(raw)))
        parts.append(raw)
    return frame_block(BlockType.AVRO_DATA, {HeaderKey.SCHEMA: text}, b"".join(parts))


def write_archive_log(
    storage: Storage,
    config: TableConfig,
    states: Sequence[StateFile],
    *,
    records_per_block: int = ARCHIVAL_BATCH_DEFAULT,
    write_token: str = "1-0-1",
) -> str:
    """Archive ``states`` (see :func:`archive_records_of`) into a new archive file and return its name.

    The file is ``.commits_.archive.<N + 1>_<write_token>`` for the highest version N present (1 when none),
    made of blocks of ``records_per_block`` records (``hoodie.commits.archival.batch``), created whole with
    the storage's create-if-absent; a name taken meanwhile moves to the next version. Existing files are
    never appended to. Raises ValueError when there is nothing to archive.
    """
    _check_table_version(config.table_version)
    if records_per_block < 1:
        raise ValueError(f"hoodie.commits.archival.batch must be positive, not {records_per_block}")
    ArchiveLogFile(1, write_token)  # validates the token
    records = archive_records_of(
        states, table_version=config.table_version, timeline_timezone=config.timeline_timezone
    )
    if not records:
        raise ValueError("no state files to archive")
    data = b"".join(
        encode_archive_block(records[i : i + records_per_block])
        for i in range(0, len(records), records_per_block)
    )
    folder = archive_folder(config)
    version = _highest_version(storage, config) + 1
    failpoint("archival.before_history_write")
    for _ in range(_CREATE_ATTEMPTS):
        name = ArchiveLogFile(version, write_token).file_name
        try:
            storage.create(f"{folder}/{name}", data)
            break
        except FileAlreadyExists:
            version = max(version + 1, _highest_version(storage, config) + 1)
    else:
        raise FileAlreadyExists(f"no free archive file version in {folder} after {_CREATE_ATTEMPTS} tries")
    logger.info("archived %d state file(s) into %s/%s (%d bytes)", len(records), folder, name, len(data))
    failpoint("archival.after_history_write")
    return name


def _highest_version(storage: Storage, config: TableConfig) -> int:
    files = archive_files(storage, config)
    return files[0].version if files else 0
