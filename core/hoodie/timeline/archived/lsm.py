"""The LSM timeline history of timeline layout 2 (table versions 8 and 9): read, written, compacted, cleaned.

Everything lives in one folder, ``<hoodie.timeline.path>/<hoodie.timeline.history.path>`` below ``.hoodie``
(default ``.hoodie/timeline/history``; a metadata table has its own below ``.hoodie/metadata``)::

    _version_                       the latest snapshot version N, UTF-8 decimal, no newline ("2")
    manifest_<N>                    snapshot N: the data files readers see, as Jackson's pretty-printed JSON
                                    {"files" : [ {"fileName" : ..., "fileLen" : ...}, ... ]}
    <min>_<max>_<level>.parquet     rows of HoodieLSMTimelineInstant, one per instant, in requested-time
                                    order; min/max are the first and last requested times, level one digit
    .<name>.crc                     Hadoop's local checksum files, ignored

Only files listed in the latest manifest exist for a reader: others are older snapshots kept for readers
still on them, or torn writes. The latest version is ``_version_``, else (missing or unparsable, as in the
moment an update replaces it) the greatest N of ``manifest_<N>`` files not ending in ``.tmp``, else there is
no history. Creating ``manifest_<N+1>`` is therefore the commit point of every change; ``_version_`` follows.

Archival appends one level-0 file per batch (:func:`write_lsm_batch`); afterwards Hudi merges the oldest
``batch_size`` files of a level into one file of the next level and drops manifest versions and files no
kept snapshot needs (:func:`compact_and_clean_lsm`). Hudi's ``LSMTimelineWriter`` and ``LSMTimeline`` are
the authority; where we differ it is said where.

Deleting a file on a local file system also deletes its ``.crc`` sibling, as Hadoop's checksummed file
system does: a stale checksum beside a rewritten ``manifest_<N>`` would make Hudi's reader fail on it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from hoodie.config import TIMELINE_HISTORY_PATH, TIMELINE_HISTORY_PATH_DEFAULT, TableConfig
from hoodie.errors import (
    CommitConflict,
    CorruptTimelineFile,
    FileAlreadyExists,
    HoodieError,
    InvalidWriteConfig,
    UnsupportedTable,
    VersionConflict,
)
from hoodie.failpoints import failpoint
from hoodie.storage import Storage
from hoodie.timeline.archived import ArchivedInstant, StateFile
from hoodie.timeline.instant import (
    CLEAN,
    CLUSTERING,
    COMPACTION,
    LOG_COMPACTION,
    REPLACE_COMMIT,
    Instant,
    State,
)

logger = logging.getLogger(__name__)

VERSION_FILE = "_version_"
MANIFEST_PREFIX = "manifest_"

#: The level archival writes; a compaction writes the level of its first input plus one.
LEVEL_ZERO = 0
#: ``hoodie.timeline.compaction.batch.size``: files of one level merged at once.
COMPACTION_BATCH_SIZE_DEFAULT = 10
#: ``hoodie.timeline.compaction.target.file.max.bytes`` (a constant in Hudi 1.0.0).
COMPACTION_MAX_FILE_BYTES_DEFAULT = 1000 * 1024 * 1024
#: ``hoodie.timeline.manifest.retained.versions`` (a constant in Hudi 1.0.0).
MANIFEST_RETAINED_VERSIONS_DEFAULT = 3
#: The ``version`` column of every row Hudi writes (``LSMTimeline.LSM_TIMELINE_INSTANT_VERSION_1``).
ROW_VERSION = 1

#: ``HoodieLSMTimelineInstant`` as parquet-avro stores it in the footer (``parquet.avro.schema``): Avro's
#: compact JSON of the generated Java class, strings tagged as Java ``String`` (taken from Hudi's files).
AVRO_SCHEMA = (
    '{"type":"record","name":"HoodieLSMTimelineInstant","namespace":"org.apache.hudi.avro.model","fields":['
    '{"name":"instantTime","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},'
    '{"name":"completionTime","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},'
    '{"name":"action","type":["null",{"type":"string","avro.java.string":"String"}],"default":null},'
    '{"name":"metadata","type":["null","bytes"],"default":null},'
    '{"name":"plan","type":["null","bytes"],"default":null},'
    '{"name":"version","type":"int","default":1}]}'
)
FOOTER_METADATA = {"parquet.avro.schema": AVRO_SCHEMA, "writer.model.name": "avro"}

#: The Parquet columns parquet-avro writes for that schema: nullable unions are optional, ``version`` is
#: required; strings are ``BINARY (String)``.
ARROW_SCHEMA = pa.schema(
    [
        pa.field("instantTime", pa.string()),
        pa.field("completionTime", pa.string()),
        pa.field("action", pa.string()),
        pa.field("metadata", pa.binary()),
        pa.field("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ]
)

# Hudi's codec names (hoodie.parquet.compression.codec) -> (pyarrow codec, level): parquet-mr compresses
# GZIP at zlib's level 6 and ZSTD at level 3.
_CODECS: dict[str, tuple[str, int | None]] = {
    "gzip": ("gzip", 6),
    "snappy": ("snappy", None),
    "zstd": ("zstd", 3),
    "lz4": ("lz4", None),
    "brotli": ("brotli", None),
    "uncompressed": ("none", None),
    "none": ("none", None),
}

_DATA_FILE_RE = re.compile(r"^([0-9]+)_([0-9]+)_([0-9])\.parquet$")
_MANIFEST_RE = re.compile(r"^manifest_([0-9]+)$")
_JAVA_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_INT_MAX = 2**31 - 1


# -- names ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LsmFileName:
    """A data file's name, ``<min>_<max>_<level>.parquet`` (Java: ``^(\\d+)_(\\d+)_(\\d)\\.parquet``).

    ``min_time`` and ``max_time`` are the requested times of its first and last rows; the level is one
    digit.
    """

    min_time: str
    max_time: str
    level: int

    @classmethod
    def parse(cls, name: str) -> LsmFileName:
        """Parse a data file name; raises :class:`ValueError` for anything else."""
        m = _DATA_FILE_RE.match(name)
        if not m:
            raise ValueError(f"{name!r} is not an LSM history file name (<min>_<max>_<level>.parquet)")
        return cls(m.group(1), m.group(2), int(m.group(3)))

    @property
    def name(self) -> str:
        if not 0 <= self.level <= 9:
            raise ValueError(f"LSM level {self.level} does not fit Hudi's one-digit level")
        return f"{self.min_time}_{self.max_time}_{self.level}.parquet"

    def overlaps(self, start: str | None, end: str | None) -> bool:
        """Whether rows of this file may lie in (start, end]: Hudi's pruning by name
        (``TimeRangeFilter.hasOverlappingInRange``), a bound of ``None`` being open."""
        return (start is None or self.max_time > start) and (end is None or self.min_time <= end)


# -- manifests --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestEntry:
    """One data file of a snapshot and its byte size when it was added."""

    file_name: str
    file_len: int


@dataclass(frozen=True)
class Manifest:
    """A snapshot of the history: its data files in the order Hudi keeps them (the previous list minus the
    files a compaction removed, the new file appended last; never sorted)."""

    files: tuple[ManifestEntry, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(e.file_name for e in self.files)

    def updated(self, remove: Iterable[str], add: ManifestEntry) -> Manifest:
        """The next snapshot: ``remove`` taken out, ``add`` appended (``HoodieLSMTimelineManifest.copy``)."""
        gone = set(remove)
        return Manifest((*(e for e in self.files if e.file_name not in gone), add))

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> Manifest:
        """Read a manifest as Hudi's Jackson mapper does: empty content is an empty list, unknown properties
        are ignored, a missing ``fileLen`` is 0. Entries must be data file names (Hudi would fail on others
        later, when it prunes or compacts); anything else raises :class:`CorruptTimelineFile`."""
        if not data:
            return cls()
        try:
            doc = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise CorruptTimelineFile(f"{where}: not a JSON manifest ({e})") from None
        if not isinstance(doc, dict):
            raise CorruptTimelineFile(f"{where}: a manifest is a JSON object, found {type(doc).__name__}")
        raw = doc.get("files", [])
        if not isinstance(raw, list):
            raise CorruptTimelineFile(f"{where}: 'files' is not a list")
        entries = []
        for item in raw:
            name = item.get("fileName") if isinstance(item, dict) else None
            size = item.get("fileLen", 0) if isinstance(item, dict) else None
            if not isinstance(name, str) or not isinstance(size, int) or isinstance(size, bool):
                raise CorruptTimelineFile(f"{where}: manifest entry {item!r} is not a fileName/fileLen pair")
            if not _DATA_FILE_RE.match(name):
                raise CorruptTimelineFile(f"{where}: manifest lists {name!r}, not an LSM history file name")
            entries.append(ManifestEntry(name, size))
        return cls(tuple(entries))

    def to_json(self) -> bytes:
        """Jackson's default pretty printer, byte for byte: ``" : "`` separators, two-space indents, array
        elements on the bracket's line, no final newline."""
        if not self.files:
            return b'{\n  "files" : [ ]\n}'
        items = ", ".join(
            f'{{\n    "fileName" : {json.dumps(e.file_name)},\n    "fileLen" : {e.file_len:d}\n  }}'
            for e in self.files
        )
        return ('{\n  "files" : [ ' + items + " ]\n}").encode("utf-8")


def history_folder(config: TableConfig) -> str:
    """The history folder relative to the base path: ``<timeline path>/<hoodie.timeline.history.path>``
    (default ``.hoodie/timeline/history``). Only timeline layout 2 (table version 8+) has one; version 6
    keeps its archived instants in the archive log, so asking here is refused."""
    if config.timeline_layout_version < 2:
        raise UnsupportedTable(
            f"table version {config.table_version} (timeline layout {config.timeline_layout_version}) has no "
            "LSM history: its archived instants are in the archive log"
        )
    sub = config.props.get(TIMELINE_HISTORY_PATH, TIMELINE_HISTORY_PATH_DEFAULT).strip()
    return f"{config.timeline_path}/{sub}"


def manifest_versions(storage: Storage, folder: str) -> list[int]:
    """The versions of the ``manifest_<N>`` files in ``folder``, ascending (``.tmp`` files and names that
    are not ``manifest_<digits>`` left out; Hudi would fail on the latter)."""
    found = []
    for info in storage.list(folder):
        m = _MANIFEST_RE.match(info.name)
        if m and not info.is_dir:
            found.append(int(m.group(1)))
    return sorted(found)


def latest_version(storage: Storage, folder: str) -> int:
    """The latest snapshot version: ``_version_`` when present and a Java int, else the greatest manifest
    version listed, else -1 (no history)."""
    try:
        text = storage.read(f"{folder}/{VERSION_FILE}").decode("utf-8", errors="replace")
    except FileNotFoundError:
        text = ""
    if _JAVA_INT_RE.match(text) and abs(int(text)) <= _INT_MAX:
        return int(text)
    versions = manifest_versions(storage, folder)
    return versions[-1] if versions else -1


def read_manifest(storage: Storage, folder: str, version: int) -> Manifest:
    """The manifest of snapshot ``version`` (empty for a negative version); a missing or unreadable one
    raises :class:`CorruptTimelineFile`."""
    if version < 0:
        return Manifest()
    path = f"{folder}/{MANIFEST_PREFIX}{version}"
    try:
        data = storage.read(path)
    except FileNotFoundError:
        raise CorruptTimelineFile(f"{path}: the history's snapshot {version} has no manifest") from None
    return Manifest.parse(data, where=path)


def latest_manifest(storage: Storage, folder: str) -> tuple[int, Manifest]:
    """The latest version and its manifest."""
    version = latest_version(storage, folder)
    return version, read_manifest(storage, folder, version)


# -- reading ----------------------------------------------------------------------------------------------


def read_lsm_history(
    storage: Storage, config: TableConfig, *, start: str | None = None, end: str | None = None
) -> list[ArchivedInstant]:
    """The archived instants with requested times in (start, end] (Hudi's ``TimeRangeFilter``; ``None`` is
    an open bound), oldest first, each completed.

    Reads the latest snapshot's files only (others are invisible), skipping those whose name shows they
    hold nothing in range; where two rows share a requested time the first one read wins (files in manifest
    order). A listed file that is missing or does not read raises :class:`CorruptTimelineFile` naming it.
    """
    folder = history_folder(config)
    version, manifest = latest_manifest(storage, folder)
    found: dict[str, ArchivedInstant] = {}
    for name in manifest.names:
        if not LsmFileName.parse(name).overlaps(start, end):
            continue
        path = f"{folder}/{name}"
        for row in _read_rows(storage, path, f"{MANIFEST_PREFIX}{version}"):
            time = row.instant.time
            if (start is None or time > start) and (end is None or time <= end):
                found.setdefault(time, row)
    return [found[t] for t in sorted(found)]


def _read_table(storage: Storage, path: str, listed_in: str) -> pa.Table:
    """A data file's columns of ours that it has (``instantTime`` and ``action`` required)."""
    try:
        parquet = pq.ParquetFile(storage.open_input_file(path))
        names = set(parquet.schema_arrow.names)
        if not {"instantTime", "action"} <= names:
            raise CorruptTimelineFile(
                f"{path}: not a HoodieLSMTimelineInstant file (columns {sorted(names)})"
            )
        return parquet.read(columns=[f.name for f in ARROW_SCHEMA if f.name in names])
    except FileNotFoundError:
        raise CorruptTimelineFile(f"{path}: listed in {listed_in} but missing") from None
    except (pa.ArrowException, OSError, ValueError) as e:
        raise CorruptTimelineFile(f"{path}: not a readable Parquet file ({e})") from None


def _read_rows(storage: Storage, path: str, listed_in: str) -> list[ArchivedInstant]:
    table = _read_table(storage, path, listed_in)
    n = table.num_rows

    def column(name: str) -> list[Any]:
        return table.column(name).to_pylist() if name in table.column_names else [None] * n

    rows = []
    for time, completion, action, metadata, plan in zip(
        column("instantTime"),
        column("completionTime"),
        column("action"),
        column("metadata"),
        column("plan"),
        strict=True,
    ):
        try:
            instant = Instant(time, action, State.COMPLETED, completion)
        except HoodieError as e:
            raise CorruptTimelineFile(f"{path}: row {time!r} is not an archived instant ({e})") from None
        rows.append(ArchivedInstant(instant, metadata=metadata, plan=plan))
    return rows


# -- what archival writes ---------------------------------------------------------------------------------


def lsm_instants_of(states: Sequence[StateFile]) -> list[ArchivedInstant]:
    """The rows Hudi writes for the instants whose active-timeline files are given, oldest first: one per
    requested time that has a completed file (``MetadataConversionUtils.createLSMTimelineInstant``).

    The completed file (the latest completion time where several share the requested time, as cleans may)
    gives the action, completion time and ``metadata`` (its bytes; ``None`` when it is empty). ``plan``
    depends on the action of the pending files (requested, else inflight): a clean's is the requested
    file's bytes, else the inflight's; a compaction's and log compaction's the requested file's; a
    replacecommit's and clustering's the inflight's when not empty, else the requested's when not empty;
    other actions have none. A clean or compaction plan file that is empty gives empty bytes, as in Hudi.
    """
    by_time: dict[str, list[StateFile]] = {}
    for state in states:
        by_time.setdefault(state.instant.time, []).append(state)
    rows = []
    for time in sorted(by_time):
        files = by_time[time]
        completed = [f for f in files if f.instant.state is State.COMPLETED]
        if not completed:
            continue
        done = max(completed, key=lambda f: f.instant.completion_time or "")
        requested = next((f for f in files if f.instant.state is State.REQUESTED), None)
        inflight = next((f for f in files if f.instant.state is State.INFLIGHT), None)
        rows.append(
            ArchivedInstant(
                instant=Instant(time, done.instant.action, State.COMPLETED, done.instant.completion_time),
                metadata=done.content or None,
                plan=_plan_of(requested, inflight),
            )
        )
    return rows


def _plan_of(requested: StateFile | None, inflight: StateFile | None) -> bytes | None:
    pending = requested or inflight
    if pending is None:
        return None
    action = pending.instant.action
    if action == CLEAN:
        return pending.content
    if action in (COMPACTION, LOG_COMPACTION):
        return requested.content if requested is not None else None
    if action in (REPLACE_COMMIT, CLUSTERING):
        for f in (inflight, requested):
            if f is not None and f.content:
                return f.content
    return None


# -- writing ----------------------------------------------------------------------------------------------


def write_lsm_batch(
    storage: Storage, config: TableConfig, rows: Sequence[ArchivedInstant], *, compression: str = "gzip"
) -> str | None:
    """Commit one archival batch to the history (``LSMTimelineWriter.write``); returns the new data file's
    name, or ``None`` when the batch was already committed.

    1. The target is ``<first>_<last>_0.parquet`` (rows sorted by requested time). If it exists and the
       latest manifest lists it (published first: :func:`publish_latest`), an earlier run committed this
       batch and crashed before moving ``_version_`` or deleting the active files: nothing to do. If it
       exists unlisted it is a torn write, deleted.
    2. The rows are written as parquet-avro writes them (:func:`encode_lsm_file`).
    3. Snapshot V+1 is the latest one plus this file (:func:`commit_manifest`).

    Call it under the table lock, as Hudi archives. Deleting the instants' leftover marker folders (Hudi
    does it before writing each row) and then the archived active files is the archiver's part.
    """
    if not rows:
        raise ValueError("an archival batch needs at least one instant")
    ordered = sorted(rows, key=lambda r: r.time)
    for row in ordered:
        if row.instant.state is not State.COMPLETED:
            raise ValueError(f"only completed instants are archived, not {row.instant}")
    folder = history_folder(config)
    name = LsmFileName(ordered[0].time, ordered[-1].time, LEVEL_ZERO).name
    path = f"{folder}/{name}"
    publish_latest(storage, folder)  # a snapshot committed by a run that crashed before _version_ counts
    if storage.exists(path):
        if name in latest_manifest(storage, folder)[1].names:
            return None
        _delete(storage, path)
    data = encode_lsm_file(_rows_table(ordered), compression=compression)
    _create(storage, path, data)
    failpoint("archival.after_history_parquet")
    commit_manifest(storage, folder, (), ManifestEntry(name, len(data)), "archival.after_history_manifest")
    return name


def commit_manifest(
    storage: Storage,
    folder: str,
    remove: Iterable[str],
    add: ManifestEntry,
    failpoint_name: str | None = None,
) -> tuple[int, Manifest]:
    """Make snapshot V+1 (1 when there is none): the latest manifest without ``remove``, with ``add``
    appended (``LSMTimelineWriter.updateManifest``). Returns the new version and manifest.

    Nothing of another writer's is ever deleted or overwritten: a ``manifest_<V+1>`` already there (left
    by a run that crashed before moving ``_version_``) was committed, and is published first
    (:func:`publish_latest`); the new manifest is created without overwriting (the commit point), and a
    writer that finds its ``manifest_<V+1>`` taken meanwhile (another writer committed after this one read
    the history: a stale writer woken after its lock passed on) raises
    :class:`~hoodie.errors.CommitConflict`, having changed nothing; ``_version_`` then moves by
    compare-and-set (:func:`_move_version`)."""
    version = publish_latest(storage, folder)
    manifest = read_manifest(storage, folder, version)
    new = manifest.updated(remove, add)
    new_version = 1 if version < 0 else version + 1
    path = f"{folder}/{MANIFEST_PREFIX}{new_version}"
    try:
        _create(storage, path, new.to_json())
    except FileAlreadyExists:
        raise CommitConflict(
            f"{storage.full_path(path)} was written by another writer after this one read snapshot "
            f"{version}: its change is dropped (nothing of the history was changed by it)"
        ) from None
    if failpoint_name:
        failpoint(failpoint_name)
    _move_version(storage, folder, new_version)
    return new_version, new


def publish_latest(storage: Storage, folder: str) -> int:
    """Roll the history forward: while a ``manifest_<V+1>`` follows the published version V (a writer
    created it, its commit point, and did not move ``_version_``), move ``_version_`` to it; one that does
    not parse (torn: written whole only where the store creates atomically) is deleted instead. Returns the
    latest version (-1: no history)."""
    version = latest_version(storage, folder)
    while True:
        following = 1 if version < 0 else version + 1
        path = f"{folder}/{MANIFEST_PREFIX}{following}"
        try:
            Manifest.parse(storage.read(path), where=path)
        except FileNotFoundError:
            return version
        except CorruptTimelineFile as e:  # torn (a store without atomic creates): never committed
            logger.warning("deleting %s, a torn manifest never published: %s", storage.full_path(path), e)
            _delete(storage, path)
            return version
        _move_version(storage, folder, following)
        version = following


def _move_version(storage: Storage, folder: str, version: int) -> None:
    """Make ``_version_`` name ``version`` unless it names a later one already: a compare-and-set on the
    version read where the store has one (a writer that read an older ``_version_`` never moves it back),
    else Hudi's delete and create."""
    path = f"{folder}/{VERSION_FILE}"
    data = str(version).encode("utf-8")
    if not storage.compare_and_set:
        _delete(storage, path)
        _create(storage, path, data)
        return
    while True:
        try:
            text, tag = storage.read_versioned(path)
        except FileNotFoundError:
            try:
                storage.create(path, data)
            except FileAlreadyExists:
                continue
            return
        current = text.decode("utf-8", errors="replace")
        if _JAVA_INT_RE.match(current) and abs(int(current)) <= _INT_MAX and int(current) >= version:
            return
        try:
            storage.replace_if_version(path, data, tag)
        except VersionConflict:
            continue
        if storage.is_local:  # Hadoop's checksum of the old content must not stand beside the new
            storage.delete(_crc_of(path))
        return


def encode_lsm_file(table: pa.Table, *, compression: str = "gzip") -> bytes:
    """A history data file of ``table`` (:data:`ARROW_SCHEMA`), as parquet-avro writes one: the Avro
    schema in the footer (:data:`FOOTER_METADATA`), Parquet format 1.0 with version-1 pages, dictionaries
    for the repetitive ``action`` and ``version`` only, no statistics on the byte columns, page checksums,
    one row group, codec ``compression`` (a ``hoodie.parquet.compression.codec`` value).

    What pyarrow cannot write like parquet-mr: the root group is named ``schema`` (parquet-avro:
    ``org.apache.hudi.avro.model.HoodieLSMTimelineInstant``) and ``created_by`` names parquet-cpp-arrow.
    Hudi reads by the footer's Avro schema and column names, so neither matters to it.
    """
    codec = _CODECS.get(compression.strip().lower())
    if codec is None:
        raise InvalidWriteConfig(
            f"hoodie.parquet.compression.codec={compression!r} is not one of {', '.join(sorted(_CODECS))}"
        )
    name, level = codec
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(
        sink,
        ARROW_SCHEMA,
        version="1.0",
        compression=name,
        compression_level=level,
        use_dictionary=["action", "version"],
        write_statistics=["instantTime", "completionTime", "action", "version"],
        write_page_checksum=True,
        store_schema=False,
    ) as writer:
        writer.write_table(table, row_group_size=max(1, table.num_rows))
        writer.add_key_value_metadata(FOOTER_METADATA)
    data: bytes = sink.getvalue().to_pybytes()
    return data


def _rows_table(rows: Sequence[ArchivedInstant]) -> pa.Table:
    return pa.table(
        {
            "instantTime": [r.instant.time for r in rows],
            "completionTime": [r.instant.completion_time for r in rows],
            "action": [r.instant.action for r in rows],
            "metadata": [r.metadata for r in rows],
            "plan": [r.plan for r in rows],
            "version": [ROW_VERSION] * len(rows),
        },
        schema=ARROW_SCHEMA,
    )


def _create(storage: Storage, path: str, data: bytes) -> None:
    """Create a file that must not exist (Hudi's ``createImmutableFileInPath``). Where the storage has no
    create-if-absent the caller holds the table lock, and a check then an overwrite is what remains."""
    if storage.conditional_create:
        storage.create(path, data)
        return
    if storage.exists(path):
        raise FileAlreadyExists(f"{storage.full_path(path)} appeared while the history was being updated")
    storage.create(path, data, overwrite=True)


def _delete(storage: Storage, path: str) -> None:
    """Delete a file of the history and, locally, Hadoop's ``.<name>.crc`` beside it."""
    storage.delete(path)
    if storage.is_local:
        storage.delete(_crc_of(path))


def _crc_of(path: str) -> str:
    folder, _, name = path.rpartition("/")
    return f"{folder}/.{name}.crc" if folder else f".{name}.crc"


# -- compaction and clean ---------------------------------------------------------------------------------


def compact_and_clean_lsm(
    storage: Storage,
    config: TableConfig,
    *,
    batch_size: int = COMPACTION_BATCH_SIZE_DEFAULT,
    max_file_bytes: int = COMPACTION_MAX_FILE_BYTES_DEFAULT,
    retained_versions: int = MANIFEST_RETAINED_VERSIONS_DEFAULT,
    compression: str = "gzip",
) -> int:
    """Compact the history level by level, then clean it (``LSMTimelineWriter.compactAndClean``); returns
    the number of compactions done. Hudi runs it after every archival that archived something.

    For level L = 0, 1, ...: when the latest snapshot has at least ``batch_size`` files of level L, the
    candidates are taken from the oldest (by name) until ``batch_size`` are taken or their summed sizes
    pass ``max_file_bytes`` (if that happens with fewer than two taken they are dropped and the walk goes
    on); with two or more their rows, file after file, become ``<min of mins>_<max of maxes>_<L+1>.parquet``
    and a new snapshot replaces them with it. The first level that does not compact ends the loop.

    The clean keeps the newest ``retained_versions`` + compactions manifest versions; when there are more,
    the other manifests are deleted first, then every data file no kept manifest lists.
    """
    folder = history_folder(config)
    _, manifest = latest_manifest(storage, folder)
    level = LEVEL_ZERO
    while True:
        files = sorted(
            (e for e in manifest.files if LsmFileName.parse(e.file_name).level == level),
            key=lambda e: e.file_name,
        )
        if len(files) < batch_size:
            break
        candidates = _candidates(files, batch_size, max_file_bytes)
        if len(candidates) < 2:
            break
        parsed = [LsmFileName.parse(n) for n in candidates]
        out = LsmFileName(
            min(p.min_time for p in parsed), max(p.max_time for p in parsed), parsed[0].level + 1
        ).name
        path = f"{folder}/{out}"
        _delete(storage, path)  # left by a compaction that crashed
        tables = [
            _canonical(_read_table(storage, f"{folder}/{n}", "the latest manifest")) for n in candidates
        ]
        data = encode_lsm_file(pa.concat_tables(tables), compression=compression)
        _create(storage, path, data)
        failpoint("archival.after_lsm_compaction_parquet")
        _, manifest = commit_manifest(
            storage,
            folder,
            candidates,
            ManifestEntry(out, len(data)),
            "archival.after_lsm_compaction_manifest",
        )
        level += 1
    _clean(storage, folder, retained_versions + level)
    return level


def _candidates(files: Sequence[ManifestEntry], batch_size: int, max_file_bytes: int) -> list[str]:
    """``LSMTimelineWriter.getCandidateFiles``: one run of consecutive files to compact."""
    taken: list[str] = []
    total = 0
    for entry in files:
        total += entry.file_len
        taken.append(entry.file_name)
        if len(taken) >= batch_size:
            break
        if total > max_file_bytes:
            if len(taken) >= 2:
                break
            taken, total = [], 0
    return taken


def _canonical(table: pa.Table) -> pa.Table:
    """A file's rows in :data:`ARROW_SCHEMA` (columns a foreign writer left out are null, ``version`` 1)."""
    columns = []
    for f in ARROW_SCHEMA:
        if f.name in table.column_names:
            col = table.column(f.name).cast(f.type)
        else:
            col = pa.chunked_array([pa.nulls(table.num_rows, f.type)], type=f.type)
        if f.name == "version":
            col = col.fill_null(ROW_VERSION)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=ARROW_SCHEMA)


def _clean(storage: Storage, folder: str, keep: int) -> None:
    """``LSMTimelineWriter.clean``: drop manifest versions beyond the newest ``keep``, then data files."""
    versions = manifest_versions(storage, folder)
    if len(versions) <= keep:
        return
    kept = set(versions[-keep:]) if keep > 0 else set()
    needed = {name for v in kept for name in read_manifest(storage, folder, v).names}
    for v in versions:
        if v not in kept:
            _delete(storage, f"{folder}/{MANIFEST_PREFIX}{v}")
    failpoint("archival.after_lsm_clean_manifests")
    for info in storage.list(folder):
        if not info.is_dir and info.name.endswith(".parquet") and info.name not in needed:
            _delete(storage, info.path)


__all__ = [
    "ARROW_SCHEMA",
    "AVRO_SCHEMA",
    "FOOTER_METADATA",
    "LsmFileName",
    "Manifest",
    "ManifestEntry",
    "commit_manifest",
    "compact_and_clean_lsm",
    "encode_lsm_file",
    "history_folder",
    "latest_manifest",
    "latest_version",
    "lsm_instants_of",
    "manifest_versions",
    "publish_latest",
    "read_lsm_history",
    "read_manifest",
]
