"""What a scan that feeds a rewrite checks beyond the framing: committed bytes are never dropped.

Hudi's log format has no checksum. A reader skips a block whose framing does not check out (a CORRUPT
block), as Hudi does: a writer that crashed mid-append leaves a torn block at the end of a log, and the
instant that wrote it never completed. A rewrite (compaction, clustering, indexing, a copy-on-write merge)
must not do the same for bytes a *completed* commit wrote: its output replaces the log, the clean deletes the
log later, and the skipped records are gone for good. So, when the scan feeds a rewrite:

- **Committed ranges.** Every completed deltacommit records, per log file it wrote, where its bytes start and
  how many it wrote (``HoodieDeltaWriteStat.logOffset`` and ``fileSizeInBytes``: Hudi's append handle sets
  them from each append's start position and size, summed over the appends of one commit). A CORRUPT block
  overlapping such a range raises :class:`~hoodie.errors.CorruptLogBlock` naming the file, the offset and
  the instant. Only damage outside every committed range is skipped: a torn tail.
- **Archived writers.** Appends to a log file come in time order, so bytes before the first range of the
  active timeline may have been written by an instant archived since (one older than the write timeline's
  start), whose metadata is not read here: damage there cannot be told from a torn tail, and is refused too.
- **Headers.** An intact data or delete block inside the range instant ``X`` wrote must say ``X`` in its
  INSTANT_TIME header: a damaged header would make the block count as another (uncommitted) instant's, and
  be dropped without a word. A data block's SCHEMA header must hold the columns and types of the writer
  schema its commit recorded (``extraMetadata.schema``; meta fields aside): a damaged field name would read
  as a missing column (nulls), a damaged decimal scale as other numbers. Checked against every fixture
  table: all 127 committed data blocks agree with their commit's schema.
- **Records.** The meta fields repeat what the file says: every record of a data block carries the block's
  instant as ``_hoodie_commit_time`` (blocks of a log compaction keep their records' own), the file's
  partition as ``_hoodie_partition_path``, and a ``_hoodie_record_key`` its key fields print to (simple,
  complex and non-partitioned key generators over string and integer key fields); a delete names the file's
  partition; a Parquet block's content has exactly the columns its schema header declares (checked on every
  fixture's Parquet blocks), and no null where the header declares a column non-null (a damaged definition
  level reads as one). A value that disagrees is damage inside a record (Avro content carries no checksum).

Damage confined to the bytes of an ordinary column's value still decodes and cannot be noticed: the format
holds no redundancy for it (Hudi's own readers return the same values). Readers (:meth:`Table.read`) keep
Hudi's behaviour: they skip every CORRUPT block and log what they skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from hoodie.config import KEY_GENERATOR_CLASSES, KEYGENERATOR_CLASS, KEYGENERATOR_TYPE, TableConfig
from hoodie.errors import CorruptLogBlock, HoodieError
from hoodie.keygen import record_keys
from hoodie.log.block import DELETE_PARTITION_PATH, BlockType, LogBlock
from hoodie.log.log_file import LogFile
from hoodie.schema import avro_to_arrow_schema
from hoodie.timeline.instant import DELTA_COMMIT
from hoodie.timeline.timeline import Timeline

if TYPE_CHECKING:  # only a type here: the timeline's codecs name log files, so they import this package
    from hoodie.timeline.metadata import CommitMetadata

__all__ = ["LogIntegrity", "WrittenRange"]

logger = logging.getLogger(__name__)

COMMIT_TIME = "_hoodie_commit_time"
PARTITION_PATH = "_hoodie_partition_path"
RECORD_KEY = "_hoodie_record_key"
META_FIELDS = frozenset(
    {
        COMMIT_TIME,
        "_hoodie_commit_seqno",
        RECORD_KEY,
        PARTITION_PATH,
        "_hoodie_file_name",
        "_hoodie_operation",
    },
)

#: Key generators whose record keys :func:`hoodie.keygen.record_keys` prints exactly (over string and
#: integer key fields); other generators (timestamp, custom) are not re-checked.
_CHECKED_KEY_GENERATORS = frozenset(
    {KEY_GENERATOR_CLASSES[k] for k in ("SIMPLE", "COMPLEX", "NON_PARTITION")}
)


@dataclass(frozen=True, slots=True)
class WrittenRange:
    """Bytes ``[start, end)`` of a log file (path relative to the base path) written by a completed instant;
    ``end`` is ``None`` when the commit did not record a size (the rest of the file)."""

    log_file: str
    start: int
    end: int | None
    instant_time: str

    def overlaps(self, offset: int, length: int) -> bool:
        return offset < (self.end if self.end is not None else offset + length + 1) and self.start < (
            offset + max(length, 1)
        )

    def contains(self, offset: int) -> bool:
        return self.start <= offset and (self.end is None or offset < self.end)

    def describe(self) -> str:
        end = "the end" if self.end is None else str(self.end)
        return f"bytes {self.start}..{end} written by completed instant {self.instant_time}"


@dataclass
class LogIntegrity:
    """The checks of the module doc for one table view; commit metadata is read lazily, once per instant.

    ``metadata_of(t)`` reads the commit metadata of completed instant ``t``.
    """

    config: TableConfig
    timeline: Timeline
    metadata_of: Callable[[str], CommitMetadata]
    _ranges: dict[str, list[WrittenRange]] | None = field(default=None, init=False, repr=False)
    _read: set[str] = field(default_factory=set, init=False, repr=False)
    _writer_fields: dict[str, dict[str, pa.DataType] | None] = field(
        default_factory=dict, init=False, repr=False
    )

    # -- committed ranges ---------------------------------------------------------------------------------

    def ranges_of(self, path: str) -> list[WrittenRange]:
        """The committed ranges of one log file, ordered by start."""
        name = path.rsplit("/", 1)[-1]
        log = LogFile.try_parse(name)
        if log is None:
            return []
        if self.config.table_version >= 8:
            # A v8+ log file is written by one deltacommit, the instant in its name (log compaction too).
            candidates: Sequence[str] = [log.instant] if self.timeline.is_completed(log.instant) else []
        else:
            # A v6 log file is appended to by the deltacommits writing its slice, at or after its base
            # instant.
            candidates = [
                i.time
                for i in self.timeline.completed_writes()
                if i.action == DELTA_COMMIT and i.time >= log.instant
            ]
        self._load(candidates)
        assert self._ranges is not None
        return sorted(self._ranges.get(path, []), key=lambda r: r.start)

    def _load(self, instants: Sequence[str]) -> None:
        if self._ranges is None:
            self._ranges = {}
        for t in instants:
            if t in self._read:
                continue
            self._read.add(t)
            metadata = self.metadata_of(t)
            for stat in metadata.write_stats:
                if not stat.path or LogFile.try_parse(stat.path.rsplit("/", 1)[-1]) is None:
                    continue
                start = stat.log_offset or 0
                size = stat.file_size_in_bytes
                end = start + size if size is not None and size > 0 else None
                self._ranges.setdefault(stat.path, []).append(WrittenRange(stat.path, start, end, t))

    def _archived_writer_possible(self, path: str, ranges: Sequence[WrittenRange], offset: int) -> bool:
        """Whether bytes at ``offset`` may have been written by an instant archived since (see the module
        doc): the file's instant is older than the write timeline's start and no active range ends before."""
        log = LogFile.try_parse(path.rsplit("/", 1)[-1])
        start = self.timeline.write_timeline_start()
        if log is None or start is None or log.instant >= start:
            return False
        return not any(r.end is not None and r.end <= offset for r in ranges)

    def check_corrupt(self, path: str, offset: int, length: int, reason: str) -> None:
        """Raise :class:`CorruptLogBlock` when damaged bytes ``[offset, offset + length)`` of ``path`` may be
        committed data; return when they are a torn tail no completed commit covers."""
        ranges = self.ranges_of(path)
        for r in ranges:
            if r.overlaps(offset, length):
                raise CorruptLogBlock(
                    f"{path}: damaged bytes at offset {offset} ({length} bytes: {reason}) lie inside "
                    f"{r.describe()}; refusing to rewrite the file group rather than drop committed records"
                )
        if self._archived_writer_possible(path, ranges, offset):
            raise CorruptLogBlock(
                f"{path}: damaged bytes at offset {offset} ({length} bytes: {reason}) may have been "
                "written by an instant archived from the active timeline; they cannot be told from a torn "
                "tail, so the file group is not rewritten"
            )

    def check_header(self, path: str, block: LogBlock) -> None:
        """Raise when an intact data or delete block lies in one instant's committed range but its header
        names another."""
        if block.block_type not in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE):
            return
        for r in self.ranges_of(path):
            if r.contains(block.offset) and block.instant_time != r.instant_time:
                raise CorruptLogBlock(
                    f"{path}: {block.describe()} says instant {block.instant_time!r} but lies inside "
                    f"{r.describe()}: its header is damaged"
                )

    def check_schema(self, path: str, block: LogBlock) -> None:
        """Raise when a committed data block's SCHEMA header disagrees with its commit's writer schema."""
        if block.block_type not in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA) or block.is_partial:
            return
        instant = block.instant_time
        if instant is None or block.schema is None or not self.timeline.is_completed(instant):
            return
        expected = self._writer_schema_fields(instant)
        if expected is None:
            return
        try:
            found = _data_fields(block.schema)
        except HoodieError as e:
            raise CorruptLogBlock(f"{path}: {block.describe()}: its SCHEMA header is unusable: {e}") from e
        if found != expected:
            differ = sorted(set(found) ^ set(expected)) or sorted(
                n for n in found if found[n] != expected.get(n)
            )
            raise CorruptLogBlock(
                f"{path}: {block.describe()}: its SCHEMA header does not match the writer schema completed "
                f"instant {instant} recorded (columns {differ[:5]} differ): its header is damaged"
            )

    def _writer_schema_fields(self, instant: str) -> dict[str, pa.DataType] | None:
        if instant not in self._writer_fields:
            schema = self.metadata_of(instant).extra_metadata.get("schema")
            try:
                self._writer_fields[instant] = _data_fields(schema) if schema else None
            except HoodieError:
                self._writer_fields[instant] = None  # a commit schema we cannot read checks nothing
        return self._writer_fields[instant]

    # -- records ------------------------------------------------------------------------------------------

    def check_records(self, path: str, block: LogBlock, table: pa.Table) -> None:
        """Raise when a decoded block's meta fields disagree with its file and header (module doc); the
        message names the block, the caller adds the file."""
        partition = path.rsplit("/", 1)[0] if "/" in path else ""
        what = block.describe()
        if block.block_type is BlockType.DELETE:
            _expect_all(table, DELETE_PARTITION_PATH, partition, what, "the file's partition")
            return
        _expect_declared(table, block, what)
        if block.instant_time is not None and not block.compacted_block_times:
            _expect_all(table, COMMIT_TIME, block.instant_time, what, "the block's instant")
        _expect_all(table, PARTITION_PATH, partition, what, "the file's partition")
        self._check_keys(table, what)

    def _check_keys(self, table: pa.Table, what: str) -> None:
        fields = self.config.record_key_fields
        if RECORD_KEY not in table.column_names or not fields or table.num_rows == 0:
            return
        if self._key_generator() not in _CHECKED_KEY_GENERATORS:
            return
        if any(f not in table.column_names for f in fields):
            return
        types = [table.schema.field(f).type for f in fields]
        if not all(pa.types.is_string(t) or pa.types.is_integer(t) for t in types):
            return
        stored = table.column(RECORD_KEY).combine_chunks().cast(pa.string())
        try:
            printed = record_keys(table, fields)
        except HoodieError as e:
            raise CorruptLogBlock(f"{what}: its key fields do not make record keys: {e}") from e
        same = pc.fill_null(pc.equal(stored, printed), False)
        if len(fields) == 1:
            # Older writers print a one-field complex key as "field:value".
            prefixed = pc.binary_join_element_wise(f"{fields[0]}:", printed, "")
            same = pc.or_(same, pc.fill_null(pc.equal(stored, prefixed), False))
        if not pc.all(same).as_py():
            row = pc.index(same, False).as_py()
            raise CorruptLogBlock(
                f"{what}: record {row} has _hoodie_record_key {stored[row].as_py()!r} but its key field(s) "
                f"{list(fields)} print {printed[row].as_py()!r}: the record is damaged"
            )

    def _key_generator(self) -> str:
        props: Mapping[str, str] = self.config.props
        kind = (props.get(KEYGENERATOR_TYPE) or "").strip().upper()
        if kind:
            return KEY_GENERATOR_CLASSES.get(kind, kind)
        explicit = (props.get(KEYGENERATOR_CLASS) or "").strip()
        if explicit:
            return explicit
        # No key generator recorded: Hudi infers simple / complex / non-partitioned from the fields.
        return KEY_GENERATOR_CLASSES["SIMPLE"]


def _data_fields(avro_schema: str) -> dict[str, pa.DataType]:
    """The columns of a writer schema other than the meta fields, with their Arrow types (a damaged meta field
    name is no meta field: it shows up here)."""
    return {f.name: f.type for f in avro_to_arrow_schema(avro_schema) if f.name not in META_FIELDS}


def _expect_declared(table: pa.Table, block: LogBlock, what: str) -> None:
    """The decoded columns are those the block's schema declares (a Parquet block's footer names its own:
    a damaged name would read as a missing column), and the non-null ones hold no null."""
    if block.schema is None:
        return
    try:
        declared = avro_to_arrow_schema(block.schema)
    except HoodieError:
        return  # an unusable schema header is refused where the block is decoded
    if table.column_names != declared.names:
        differ = sorted(set(table.column_names) ^ set(declared.names))
        raise CorruptLogBlock(
            f"{what}: its content has columns {differ[:5]} its schema header does not (or lacks some it "
            "declares): the block is damaged"
        )
    for f in declared:
        nulls = table.column(f.name).null_count
        if not f.nullable and nulls:
            raise CorruptLogBlock(
                f"{what}: column {f.name} holds {nulls} null(s) although the block's schema declares it "
                "non-null: the block is damaged"
            )


def _expect_all(table: pa.Table, column: str, expected: str, what: str, meaning: str) -> None:
    if column not in table.column_names or table.num_rows == 0:
        return
    values = table.column(column).combine_chunks()
    if values.null_count == len(values):
        return  # a table that does not populate meta fields leaves them null
    wrong = pc.fill_null(pc.not_equal(values.cast(pa.string()), expected), True)
    if pc.any(wrong).as_py():
        row = pc.index(wrong, True).as_py()
        raise CorruptLogBlock(
            f"{what}: record {row} has {column} {values[row].as_py()!r}, not {expected!r} ({meaning}): "
            "the record is damaged"
        )
