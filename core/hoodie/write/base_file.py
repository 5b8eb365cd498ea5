"""Parquet base files, written as Hudi's parquet-avro writer (``HoodieAvroParquetWriter``) writes them.

A base file holds the rows of one file slice. With meta fields (``hoodie.populate.meta.fields``, the default)
its first five columns are, in this order::

    _hoodie_commit_time      the instant that wrote the row (a 17-digit instant time)
    _hoodie_commit_seqno     <commit_time>_<taskPartitionId>_<recordIndex>, the index counting from 0 per file
    _hoodie_record_key       the record key
    _hoodie_partition_path   the partition path ("" when unpartitioned)
    _hoodie_file_name        the base file's own name

The Avro schema is the table schema with those five prepended as ``{"name": ..., "type": ["null", "string"],
"doc": "", "default": null}`` (Hudi ``HoodieAvroUtils.addMetadataFields``). The footer's key-value metadata::

    parquet.avro.schema            that Avro schema (JSON)
    writer.model.name              avro
    org.apache.hudi.bloomfilter    Base64 of the record keys' bloom filter (see hoodie.bloom)
    hoodie_bloom_filter_type_code  the filter's type code, only for DYNAMIC_V0
    hoodie_min_record_key          least record key   } only when the file has rows
    hoodie_max_record_key          greatest record key }

Without meta fields Hudi writes no bloom filter and no key range, only the schema keys; so do we. Keys are
ordered as Java orders ``String`` (UTF-16 code units), which differs from byte order only between
supplementary characters and U+E000..U+FFFF.

Column types are what parquet-avro writes for the Avro schema, with these differences that pyarrow cannot
avoid (readers of Hudi tables, hudi-rs, Spark and parquet-avro itself, read both forms):

- lists are the standard three-level form (``repeated group list { element }``), where parquet-avro writes
  its old two-level form (``repeated <type> array``) by default;
- ``decimal`` on ``bytes`` is a ``FIXED_LEN_BYTE_ARRAY`` of the minimal width (parquet-avro: ``BINARY``), and
  ``decimal`` on a ``fixed`` wider than the minimal width for its precision is written at the minimal width;
- ``enum`` is ``BINARY (STRING)`` (parquet-avro: ``BINARY (ENUM)``); ``uuid`` on ``fixed(16)`` has no UUID
  annotation;
- the root group is named ``schema`` (parquet-avro: the record's full name), ``created_by`` names
  parquet-cpp-arrow, and the file is format version 2.6 (timestamps in nanoseconds need it).

Timestamps keep their unit: ``timestamp-millis`` is ``INT64 TIMESTAMP(MILLIS, isAdjustedToUTC=true)``,
``local-timestamp-*`` ``isAdjustedToUTC=false``, ``time-millis`` ``INT32 TIME(MILLIS, isAdjustedToUTC=true)``,
``date`` ``INT32 DATE``, decimals ``FIXED_LEN_BYTE_ARRAY DECIMAL``.

Sizes: ``hoodie.parquet.block.size`` bounds row groups. pyarrow counts row groups in rows, so the bound is
turned into rows from the in-memory (uncompressed) size per row, which gives row groups at most that large
on disk. ``hoodie.parquet.max.file.size`` is for callers that split rows into files; one call writes one file.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hoodie.bloom import DYNAMIC_V0, FOOTER_KEY, FOOTER_TYPE_CODE_KEY, SIMPLE, new_bloom_filter
from hoodie.errors import InvalidWriteConfig, SchemaMismatch, UnsupportedTable
from hoodie.parquet.column_parallel import ColumnParallelWriter, encode_threads
from hoodie.read.merge import record_keys as _record_keys
from hoodie.schema import avro_to_arrow_schema
from hoodie.settings import bool_setting, int_setting, probability_setting
from hoodie.storage import Storage

_T = TypeVar("_T")

__all__ = [
    "META_COLUMNS",
    "BaseFileStats",
    "ParquetOptions",
    "add_meta_columns",
    "prefetched",
    "with_meta_fields",
    "write_base_file",
    "write_base_file_chunks",
]

# -- config keys, with Hudi's defaults ---------------------------------------------------------------------

PARQUET_COMPRESSION_CODEC = "hoodie.parquet.compression.codec"
PARQUET_COMPRESSION_CODEC_DEFAULT = "gzip"  # Hudi 0.x and 1.x releases
PARQUET_BLOCK_SIZE = "hoodie.parquet.block.size"
PARQUET_BLOCK_SIZE_DEFAULT = 120 * 1024 * 1024
PARQUET_PAGE_SIZE = "hoodie.parquet.page.size"
PARQUET_PAGE_SIZE_DEFAULT = 1024 * 1024
PARQUET_MAX_FILE_SIZE = "hoodie.parquet.max.file.size"
PARQUET_MAX_FILE_SIZE_DEFAULT = 120 * 1024 * 1024
PARQUET_DICTIONARY_ENABLED = "hoodie.parquet.dictionary.enabled"
PARQUET_DICTIONARY_ENABLED_DEFAULT = True
PARQUET_BLOOM_FILTER_ENABLED = "hoodie.parquet.bloom.filter.enabled"  # since 0.15.0
PARQUET_BLOOM_FILTER_ENABLED_DEFAULT = True
BLOOM_FILTER_TYPE = "hoodie.bloom.index.filter.type"
BLOOM_FILTER_TYPE_DEFAULT = DYNAMIC_V0
BLOOM_FILTER_NUM_ENTRIES = "hoodie.index.bloom.num_entries"
BLOOM_FILTER_NUM_ENTRIES_DEFAULT = 60000
BLOOM_FILTER_FPP = "hoodie.index.bloom.fpp"
BLOOM_FILTER_FPP_DEFAULT = 0.000000001
BLOOM_FILTER_DYNAMIC_MAX_ENTRIES = "hoodie.bloom.index.filter.dynamic.max.entries"
BLOOM_FILTER_DYNAMIC_MAX_ENTRIES_DEFAULT = 100000
# hoodied's own: the threads encoding one file's columns (hoodie.parquet.column_parallel); 0 is the cores
# available, at most 4. The file is the same bytes whatever the number.
PARQUET_ENCODE_THREADS = "hoodie.parquet.hoodied.encode.threads"
PARQUET_ENCODE_THREADS_DEFAULT = 0

# Hudi's codec names (parquet-mr ``CompressionCodecName``, any case; "" is uncompressed) -> pyarrow's.
_CODECS = {
    "": "none",
    "uncompressed": "none",
    "snappy": "snappy",
    "gzip": "gzip",
    "brotli": "brotli",
    "lz4": "lz4",
    "lz4_raw": "lz4",
    "zstd": "zstd",
}
# parquet-mr's default levels where pyarrow's differ: Hadoop's zlib default (6), parquet's zstd default (3).
_DEFAULT_LEVELS = {"gzip": 6, "zstd": 3}

# -- footer and meta columns -------------------------------------------------------------------------------

AVRO_SCHEMA_KEY = "parquet.avro.schema"
WRITER_MODEL_KEY = "writer.model.name"
WRITER_MODEL = "avro"
MIN_RECORD_KEY = "hoodie_min_record_key"
MAX_RECORD_KEY = "hoodie_max_record_key"

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_COLUMNS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)


@dataclass(frozen=True)
class ParquetOptions:
    """How base files are encoded: Hudi's storage and bloom filter configs, with Hudi's defaults.

    ``compression`` is a Hudi codec name (``gzip``, ``snappy``, ``zstd``, ``lz4``, ``brotli``,
    ``uncompressed``); ``compression_level`` ``None`` means parquet-mr's default for the codec (gzip 6,
    zstd 3). ``bloom_*`` configure the footer filter (:func:`hoodie.bloom.new_bloom_filter`).
    """

    compression: str = PARQUET_COMPRESSION_CODEC_DEFAULT
    compression_level: int | None = None
    row_group_bytes: int = PARQUET_BLOCK_SIZE_DEFAULT
    page_bytes: int = PARQUET_PAGE_SIZE_DEFAULT
    max_file_bytes: int = PARQUET_MAX_FILE_SIZE_DEFAULT
    dictionary_enabled: bool = PARQUET_DICTIONARY_ENABLED_DEFAULT
    bloom_filter_enabled: bool = PARQUET_BLOOM_FILTER_ENABLED_DEFAULT
    bloom_type: str = BLOOM_FILTER_TYPE_DEFAULT
    bloom_num_entries: int = BLOOM_FILTER_NUM_ENTRIES_DEFAULT
    bloom_fpp: float = BLOOM_FILTER_FPP_DEFAULT
    bloom_max_entries: int = BLOOM_FILTER_DYNAMIC_MAX_ENTRIES_DEFAULT
    encode_threads: int = PARQUET_ENCODE_THREADS_DEFAULT

    def __post_init__(self) -> None:
        if self.compression.lower() not in _CODECS:
            raise InvalidWriteConfig(
                f"{PARQUET_COMPRESSION_CODEC}={self.compression!r}: not a codec this writer has "
                f"(one of {', '.join(sorted(c for c in _CODECS if c))})"
            )
        if self.bloom_type.upper() not in (SIMPLE, DYNAMIC_V0):
            raise InvalidWriteConfig(
                f"{BLOOM_FILTER_TYPE}={self.bloom_type!r}: expected SIMPLE or DYNAMIC_V0"
            )
        for key, value in (
            (PARQUET_BLOCK_SIZE, self.row_group_bytes),
            (PARQUET_PAGE_SIZE, self.page_bytes),
            (PARQUET_MAX_FILE_SIZE, self.max_file_bytes),
            (BLOOM_FILTER_NUM_ENTRIES, self.bloom_num_entries),
            (BLOOM_FILTER_DYNAMIC_MAX_ENTRIES, self.bloom_max_entries),
        ):
            if value <= 0:
                raise InvalidWriteConfig(f"{key}={value!r}: must be positive")
        if self.encode_threads < 0:
            raise InvalidWriteConfig(
                f"{PARQUET_ENCODE_THREADS}={self.encode_threads!r}: must be 0 (the cores available) or more"
            )
        if not 0.0 < self.bloom_fpp < 1.0:
            raise InvalidWriteConfig(
                f"{BLOOM_FILTER_FPP}={self.bloom_fpp!r}: must lie strictly between 0 and 1"
            )

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ParquetOptions:
        """Options from Hudi write configs (string values, as in a properties file); absent keys default.

        Raises :class:`~hoodie.errors.InvalidWriteConfig` naming the key and the value for a value that is
        not a number, a boolean, a known codec or bloom filter type, or is out of range.
        """
        return cls(
            compression=config.get(PARQUET_COMPRESSION_CODEC, PARQUET_COMPRESSION_CODEC_DEFAULT).strip(),
            row_group_bytes=int_setting(
                config, PARQUET_BLOCK_SIZE, PARQUET_BLOCK_SIZE_DEFAULT, minimum=1, bits=32
            ),
            page_bytes=int_setting(config, PARQUET_PAGE_SIZE, PARQUET_PAGE_SIZE_DEFAULT, minimum=1, bits=32),
            max_file_bytes=int_setting(
                config, PARQUET_MAX_FILE_SIZE, PARQUET_MAX_FILE_SIZE_DEFAULT, minimum=1, bits=64
            ),
            dictionary_enabled=bool_setting(
                config, PARQUET_DICTIONARY_ENABLED, PARQUET_DICTIONARY_ENABLED_DEFAULT
            ),
            bloom_filter_enabled=bool_setting(
                config, PARQUET_BLOOM_FILTER_ENABLED, PARQUET_BLOOM_FILTER_ENABLED_DEFAULT
            ),
            bloom_type=config.get(BLOOM_FILTER_TYPE, BLOOM_FILTER_TYPE_DEFAULT).strip(),
            bloom_num_entries=int_setting(
                config, BLOOM_FILTER_NUM_ENTRIES, BLOOM_FILTER_NUM_ENTRIES_DEFAULT, minimum=1, bits=32
            ),
            bloom_fpp=probability_setting(config, BLOOM_FILTER_FPP, BLOOM_FILTER_FPP_DEFAULT),
            bloom_max_entries=int_setting(
                config,
                BLOOM_FILTER_DYNAMIC_MAX_ENTRIES,
                BLOOM_FILTER_DYNAMIC_MAX_ENTRIES_DEFAULT,
                minimum=1,
                bits=32,
            ),
            encode_threads=int_setting(
                config, PARQUET_ENCODE_THREADS, PARQUET_ENCODE_THREADS_DEFAULT, minimum=0, bits=32
            ),
        )

    @property
    def pyarrow_compression(self) -> str:
        """The codec's name for ``pyarrow.parquet``."""
        return _CODECS[self.compression.lower()]

    @property
    def pyarrow_compression_level(self) -> int | None:
        """The level handed to pyarrow: the configured one, else parquet-mr's default for the codec."""
        if self.compression_level is not None:
            return self.compression_level
        return _DEFAULT_LEVELS.get(self.pyarrow_compression)


# -- meta columns ------------------------------------------------------------------------------------------


def _constant_strings(value: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, pa.string()), n)


#: The Arrow type of a constant string column as :func:`write_base_file_chunks` writes it.
_CONSTANT_TYPE = pa.dictionary(pa.int32(), pa.string())


def _constant_dictionary(value: str, n: int) -> pa.DictionaryArray:
    """``value`` ``n`` times as a dictionary array (one string, ``n`` zero indices): Parquet writes it byte
    for byte as it writes the plain column, dictionary encoding on or off (``tests/core/write`` checks it),
    and it takes 4 bytes a row instead of the string's length (a file name: about 80)."""
    return pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value], pa.string()))


def add_meta_columns(
    data: pa.Table,
    *,
    commit_time: str,
    partition_path: str,
    file_name: str,
    record_keys: pa.Array | pa.ChunkedArray,
    task_partition_id: int = 0,
    seq_start: int = 0,
) -> pa.Table:
    """``data`` with Hudi's five meta columns first (existing ones replaced), as a create handle fills them.

    ``_hoodie_commit_seqno`` of row ``i`` is ``f"{commit_time}_{task_partition_id}_{seq_start + i}"``
    (Hudi ``HoodieRecord.generateSequenceId``); ``record_keys`` holds the rows' keys in row order.
    """
    n = data.num_rows
    if len(record_keys) != n:
        raise ValueError(f"{len(record_keys)} record keys for {n} rows")
    keys = record_keys.cast(pa.string()) if not pa.types.is_string(record_keys.type) else record_keys
    if keys.null_count:
        raise ValueError("record keys must not be null")
    prefix = pa.scalar(f"{commit_time}_{task_partition_id}_", pa.string())
    counters = pc.cast(pa.array(np.arange(seq_start, seq_start + n, dtype=np.int64)), pa.string())
    seqno = pc.binary_join_element_wise(prefix, counters, "")
    rest = data.drop_columns([c for c in META_COLUMNS if c in data.column_names])
    meta = [
        _constant_strings(commit_time, n),
        seqno,
        keys,
        _constant_strings(partition_path, n),
        _constant_strings(file_name, n),
    ]
    fields = [pa.field(name, pa.string(), nullable=True) for name in META_COLUMNS]
    return pa.Table.from_arrays(
        [*meta, *rest.columns], schema=pa.schema([*fields, *rest.schema], metadata=data.schema.metadata)
    )


def _meta_field(name: str) -> dict[str, Any]:
    return {"name": name, "type": ["null", "string"], "doc": "", "default": None}


def with_meta_fields(avro_schema: str) -> str:
    """The writer schema of a table with meta fields: Hudi's five meta fields first (JSON text).

    A schema that already starts with them exactly is returned unchanged; otherwise meta fields found
    elsewhere are moved to the front and the JSON is printed compactly, keys in their original order, as
    Java's ``Schema.toString()`` prints a schema it parsed.
    """
    try:
        parsed = json.loads(avro_schema)
    except ValueError as e:
        raise UnsupportedTable(f"the Avro schema is not valid JSON: {e}") from e
    if not isinstance(parsed, dict) or not isinstance(parsed.get("fields"), list):
        raise UnsupportedTable("the Avro schema is not a record schema")
    fields = parsed["fields"]
    wanted = [_meta_field(name) for name in META_COLUMNS]
    if fields[: len(META_COLUMNS)] == wanted:
        return avro_schema
    others = [f for f in fields if not (isinstance(f, dict) and f.get("name") in META_COLUMNS)]
    parsed["fields"] = [*wanted, *others]
    return json.dumps(parsed, separators=(",", ":"), ensure_ascii=False)


# -- writing -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BaseFileStats:
    """What a write handle reports about one base file (the parts of Hudi's ``HoodieWriteStat`` it knows)."""

    path: str
    num_rows: int
    file_size_bytes: int
    total_uncompressed_bytes: int
    num_row_groups: int
    min_record_key: str | None
    max_record_key: str | None
    bloom_filter_type: str | None

    @property
    def num_writes(self) -> int:
        """``numWrites``: rows written."""
        return self.num_rows

    @property
    def total_write_bytes(self) -> int:
        """``totalWriteBytes`` (and ``fileSizeInBytes``): the file's size."""
        return self.file_size_bytes


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns in ``schema``'s order and types; absent nullable columns filled with nulls."""
    names = table.column_names
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise SchemaMismatch(f"columns {', '.join(dupes)} appear more than once")
    extra = [n for n in names if n not in set(schema.names)]
    if extra:
        raise SchemaMismatch(f"columns {', '.join(extra)} are not in the Avro schema")
    columns = []
    for field in schema:
        if field.name not in names:
            if not field.nullable:
                raise SchemaMismatch(f"column {field.name} is required by the Avro schema and missing")
            columns.append(pa.nulls(table.num_rows, field.type))
            continue
        column = table.column(field.name)
        if not column.type.equals(field.type):
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatch(
                    f"column {field.name} of type {column.type} cannot be written as {field.type}: {e}"
                ) from e
        if not field.nullable and column.null_count:
            raise SchemaMismatch(f"column {field.name} holds nulls but the Avro schema requires values")
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=pa.schema(list(schema)))


def _key_range(keys: pa.ChunkedArray) -> tuple[str | None, str | None]:
    """Least and greatest key in Java ``String`` order (UTF-16 code units)."""
    if len(keys) == 0:
        return None, None
    extremes = pc.min_max(keys)
    lo, hi = extremes["min"].as_py(), extremes["max"].as_py()
    # Byte order equals UTF-16 order unless supplementary characters (4-byte UTF-8, lead byte 0xF0..0xF4)
    # meet U+E000..U+FFFF; only then compare in Python.
    if any(np.any(np.frombuffer(c.buffers()[2] or b"", np.uint8) >= 0xF0) for c in keys.chunks):
        values = keys.to_pylist()
        lo = min(values, key=lambda s: s.encode("utf-16-be"))
        hi = max(values, key=lambda s: s.encode("utf-16-be"))
    return lo, hi


def _row_group_rows(table: pa.Table, row_group_bytes: int) -> int:
    rows = int(table.num_rows)
    if rows == 0:
        return 1
    per_row = max(1.0, int(table.nbytes) / rows)
    return max(1, min(rows, int(row_group_bytes / per_row)))


def _check_keys(keys: pa.Array | pa.ChunkedArray) -> None:
    if keys.null_count:
        raise SchemaMismatch(
            f"{keys.null_count} of {len(keys)} record keys are null (meta columns come from add_meta_columns)"
        )
    if len(keys) and pc.min(pc.binary_length(keys)).as_py() == 0:
        raise SchemaMismatch("a record key is empty: Hudi record keys never are")


def write_base_file(
    storage: Storage,
    path: str,
    table: pa.Table,
    *,
    avro_schema: str,
    options: ParquetOptions,
    populate_meta_fields: bool = True,
    record_keys: pa.Array | pa.ChunkedArray | None = None,
) -> BaseFileStats:
    """Write ``table`` as the base file at ``path`` (relative to the table's base path), create-if-absent.

    ``avro_schema`` is the table's Avro schema (JSON), with or without meta fields: with
    ``populate_meta_fields`` they are added as Hudi adds them (:func:`with_meta_fields`) and ``table`` must
    already hold them (:func:`add_meta_columns`). Columns are matched by name and cast to the schema's types;
    absent nullable columns are written as nulls. ``record_keys`` are the rows' keys in row order, by default
    the ``_hoodie_record_key`` column; without meta fields no bloom filter or key range is written (as Hudi)
    and the keys only fill :attr:`BaseFileStats.min_record_key` / ``max_record_key``.

    Raises :class:`~hoodie.errors.SchemaMismatch` when the table does not fit the schema and
    :class:`~hoodie.errors.FileAlreadyExists` when the file is there.
    """
    writer_schema = with_meta_fields(avro_schema) if populate_meta_fields else avro_schema
    arrow_schema = avro_to_arrow_schema(writer_schema)
    data = _conform(table, arrow_schema)
    if record_keys is None and populate_meta_fields:
        keys: pa.ChunkedArray | None = data.column(RECORD_KEY)
    elif record_keys is None:
        keys = None
    else:
        if len(record_keys) != data.num_rows:
            raise ValueError(f"{len(record_keys)} record keys for {data.num_rows} rows")
        chunked = pa.chunked_array([record_keys]) if isinstance(record_keys, pa.Array) else record_keys
        keys = chunked.cast(pa.string())
    footer = _KeyFooter(options, populate_meta_fields and options.bloom_filter_enabled)
    if keys is not None:
        _check_keys(keys)
        footer.add(keys)
    group_rows = _row_group_rows(data, options.row_group_bytes)
    return _write_rows(storage, path, writer_schema, data.schema, [data], options, group_rows, footer)


def write_base_file_chunks(
    storage: Storage,
    path: str,
    chunks: Iterable[pa.Table],
    *,
    avro_schema: str,
    options: ParquetOptions,
    populate_meta_fields: bool = True,
    key_fields: Sequence[str] = (),
    constants: Mapping[str, str] | None = None,
    keep_keys: bool = True,
) -> tuple[BaseFileStats, pa.ChunkedArray]:
    """Write the rows of ``chunks`` (one row group each, in order) as the base file at ``path``, as
    :func:`write_base_file` writes a table; for writers that produce their rows a piece at a time (a
    compaction merging one base-file row group after another), so that no piece outlives its row group.

    Returns the file's stats and the record keys of its rows, in order (the ``_hoodie_record_key`` column,
    or built from ``key_fields`` when the table does not populate meta fields); none without ``keep_keys``,
    for writers that must not hold a key per row of the file.
    """
    writer_schema = with_meta_fields(avro_schema) if populate_meta_fields else avro_schema
    constants = dict(constants or {})
    arrow_schema = avro_to_arrow_schema(writer_schema)
    for name in constants:  # a dictionary column of one value each (the bytes written are the same)
        i = arrow_schema.get_field_index(name)
        if i >= 0 and pa.types.is_string(arrow_schema.field(i).type):
            arrow_schema = arrow_schema.set(i, arrow_schema.field(i).with_type(_CONSTANT_TYPE))
    footer = _KeyFooter(options, populate_meta_fields and options.bloom_filter_enabled)
    keys: list[pa.Array] = []

    def conformed() -> Iterator[pa.Table]:
        for chunk in chunks:
            for name, value in constants.items():
                if name in chunk.column_names:
                    chunk = chunk.drop_columns([name])
                chunk = chunk.append_column(name, _constant_dictionary(value, chunk.num_rows))
            chunk = _conform(chunk, arrow_schema)
            if RECORD_KEY in chunk.column_names:
                chunk_keys = chunk.column(RECORD_KEY).combine_chunks()
            else:
                chunk_keys = _record_keys(chunk, key_fields)
            _check_keys(chunk_keys)
            if keep_keys:
                keys.append(chunk_keys)
            footer.add(chunk_keys)
            yield chunk

    row_group_rows = 2**31 - 1  # each chunk is one row group
    # The next chunk is conformed (cast, keys checked) on a thread while pyarrow encodes this one.
    stats = _write_rows(
        storage, path, writer_schema, arrow_schema, prefetched(conformed()), options, row_group_rows, footer
    )
    return stats, pa.chunked_array(keys, pa.string())


def prefetched(items: Iterable[_T], depth: int = 1) -> Iterator[_T]:
    """``items`` computed ``depth`` ahead on a thread: the next piece is gathered (merged, read) while the
    caller encodes this one. Exceptions surface in the caller, in order."""
    it = iter(items)

    def step() -> tuple[bool, _T | None]:
        for item in it:
            return True, item
        return False, None

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hoodie-prefetch") as pool:
        pending = [pool.submit(step) for _ in range(max(1, depth))]
        while True:
            more, item = pending.pop(0).result()
            if not more:
                return
            pending.append(pool.submit(step))
            yield item  # type: ignore[misc]


class _KeyFooter:
    """The key footers (bloom filter, key range), fed a chunk of keys at a time on a thread of its own:
    hashing runs while pyarrow encodes the rows (both release the GIL for their heavy parts)."""

    def __init__(self, options: ParquetOptions, with_bloom: bool) -> None:
        self.options = options
        self.bloom = (
            new_bloom_filter(
                options.bloom_type, options.bloom_num_entries, options.bloom_fpp, options.bloom_max_entries
            )
            if with_bloom
            else None
        )
        self.ranges: list[tuple[str | None, str | None]] = []
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hoodie-bloom")
        self._jobs: list[Future[None]] = []

    def add(self, keys: pa.Array | pa.ChunkedArray) -> None:
        chunked = keys if isinstance(keys, pa.ChunkedArray) else pa.chunked_array([keys])
        self._jobs.append(self._pool.submit(self._add, chunked))

    def _add(self, keys: pa.ChunkedArray) -> None:
        self.ranges.append(_key_range(keys))
        if self.bloom is not None:
            self.bloom.add_keys(keys)

    def finish(self) -> tuple[str | None, str | None, str | None, dict[str, str]]:
        try:
            for job in self._jobs:
                job.result()
        finally:
            self._pool.shutdown()
        los = [lo for lo, _ in self.ranges if lo is not None]
        his = [hi for _, hi in self.ranges if hi is not None]
        lo = min(los, key=lambda k: k.encode("utf-16-be")) if los else None
        hi = max(his, key=lambda k: k.encode("utf-16-be")) if his else None
        if self.bloom is None:
            return lo, hi, None, {}
        extra = {FOOTER_KEY.decode(): self.bloom.serialize()}
        if self.bloom.type_code == DYNAMIC_V0:
            extra[FOOTER_TYPE_CODE_KEY.decode()] = self.bloom.type_code
        if lo is not None and hi is not None:
            extra[MIN_RECORD_KEY] = lo
            extra[MAX_RECORD_KEY] = hi
        return lo, hi, self.bloom.type_code, extra

    def cancel(self) -> None:
        self._pool.shutdown(cancel_futures=True)


def _write_rows(
    storage: Storage,
    path: str,
    writer_schema: str,
    schema: pa.Schema,
    chunks: Iterable[pa.Table],
    options: ParquetOptions,
    row_group_rows: int,
    footer: _KeyFooter,
) -> BaseFileStats:
    """Write ``chunks`` through one Parquet writer (create-if-absent), the key footers last. The writer
    encodes each row group's columns on several threads; the bytes are pyarrow's writer's."""
    num_rows = 0
    try:
        with (
            storage.create_stream(path) as sink,
            ColumnParallelWriter(
                sink,
                schema,
                threads=encode_threads(options.encode_threads),
                version="2.6",
                compression=options.pyarrow_compression,
                compression_level=options.pyarrow_compression_level,
                use_dictionary=options.dictionary_enabled,
                data_page_size=options.page_bytes,
                write_statistics=True,
                use_compliant_nested_type=True,
                store_schema=False,
                write_time_adjusted_to_utc=True,
                # A CRC per page, as parquet-mr (Hudi's writer) writes by default: damage is caught on read.
                write_page_checksum=True,
            ) as writer,
        ):
            for chunk in chunks:
                if chunk.num_rows:
                    writer.write_table(chunk, row_group_size=row_group_rows)
                    num_rows += chunk.num_rows
            lo, hi, bloom_type, extra = footer.finish()
            writer.add_key_value_metadata(
                {AVRO_SCHEMA_KEY: writer_schema, WRITER_MODEL_KEY: WRITER_MODEL, **extra}
            )
    finally:
        footer.cancel()
    with storage.open_input_file(path) as written:
        metadata = pq.read_metadata(written)
        size = written.size()
    return BaseFileStats(
        path=path,
        num_rows=num_rows,
        file_size_bytes=size,
        total_uncompressed_bytes=sum(
            metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)
        ),
        num_row_groups=metadata.num_row_groups,
        min_record_key=lo,
        max_record_key=hi,
        bloom_filter_type=bloom_type,
    )
