"""Layout optimization of clustering output: Hudi's ``linear``, ``z-order`` and ``hilbert`` orders, with the
byte and bit mappings Hudi's Spark executor uses (``SpaceCurveSortingHelper``, ``BinaryUtil``,
``HilbertCurveUtils``, davidmoten ``hilbert-curve`` 0.2.2), computed column-wise with numpy and pyarrow.

Keys (:class:`LayoutConfig`; Hudi's ``HoodieClusteringConfig``):

- ``hoodie.layout.optimize.strategy``: ``linear`` (default), ``z-order`` (also ``zorder``) or ``hilbert``,
  any case.
- ``hoodie.layout.optimize.curve.build.method``: ``direct`` (default) or ``sample``. Hudi's ``sample``
  (``RangeSampleSort.sortDataFrameBySample``) reservoir-samples the group (seeds from Spark's partition and
  RDD ids, ``hoodie.layout.optimize.build.curve.sample.size`` read from the Spark *session* conf, default
  200000), cuts range bounds per column from the sample, replaces each value by its bound rank (null: one
  past the last), spreads the ranks of columns with fewer bounds with ``ThreadLocalRandom`` jitter, and
  orders by the z-curve of the ranks (``BinaryUtil.intTo8Byte``) or a 32-bit Hilbert curve over them; its
  output depends on the sample and the jitter, so there is no one order to reproduce. hoodied refuses it:
  a configuration naming it with a curve is an :class:`~hoodie.errors.InvalidWriteConfig`, a plan naming it
  an :class:`~hoodie.errors.UnsupportedTable` (with ``linear`` Hudi ignores the method, and so do we).
- ``hoodie.layout.optimize.build.curve.sample.size``: only read by ``sample``; checked to be a positive int.
- ``hoodie.layout.optimize.enable`` and ``hoodie.layout.optimize.data.skipping.enable``: deprecated since
  Hudi 0.11 and without effect in Hudi; not read here either. Data skipping itself is a reader's business
  (min/max column statistics in the base files' footers, and the metadata table's column stats, which a
  clustering's commit updates like any other write); it changes nothing in planning or execution.

Where the layout comes from: Hudi's planners write only ``sort.columns`` into a plan's ``strategyParams``,
and Hudi's executors take the layout from their *own* write config (``MultipleSparkJobExecutionStrategy
.getPartitioner``), not from the plan. hoodied's planner also records a curve layout in the plan
(:meth:`LayoutConfig.strategy_params`); at execution the plan's keys win, and a plan without them (Hudi's)
takes the executor's configuration (:meth:`LayoutConfig.for_plan`), as Hudi does. A plan without sort
columns is never reordered, whatever the layout.

Orders (:func:`sort_indices`), each ascending and stable (rows with equal keys keep their input order):

- linear: by the sort columns, nulls last (hoodied's order since before this module).
- one sort column with a curve: Hudi range-partitions by the column (``repartitionByRange``, Spark's
  ascending order, nulls first) and does not build a curve; hoodied sorts by it, nulls first.
- z-order (DIRECT), two or more columns: every column value becomes 8 bytes (:func:`zorder_bytes`) and the key
  interleaves their bits, most significant first, column by column (``BinaryUtil.interleaving(cols, 8)``:
  bit ``k·n + i`` of the key is bit ``k`` of column ``i``). Keys compare as unsigned bytes.
- hilbert (DIRECT): every column value becomes a Java ``long`` (:func:`hilbert_longs`), and the key is the
  index of the point on ``HilbertCurve.bits(63).dimensions(n)`` (Skilling's transform, :func:`hilbert_index`):
  only the low 63 bits of each coordinate count (a negative value acts as value + 2^63). The index is Java's
  ``BigInteger.toByteArray()`` (minimal two's complement, big-endian) left-padded with zeros to 63 bytes, or
  cut to its first 63 bytes when longer (eight columns or more: the order then breaks, as Hudi's does).

The column order of a curve is not the ``sort.columns`` order: Hudi collects the columns into a
``java.util.HashMap`` keyed by the column's position in the row schema (the five meta columns first, then
the table's columns) and iterates that map (:func:`curve_column_order`).

The per-type rules (Spark's type of the column as Hudi's frame sees it; the value used for null in brackets):

=================  ==================================================  ==========================
type               z-order: 8 bytes, big-endian                        hilbert: one long
=================  ==================================================  ==========================
long               v XOR 2^63  [Long.MAX]                              v  [Long.MAX]
int, short         4 zero bytes, then (v XOR 2^31)  [Int/Short.MAX]    v  [Long.MAX]
byte               7 zero bytes, then the byte  [Byte.MAX]             v & 0xFF  [Long.MAX]
double, float      raw IEEE bits (a float widened); v > 0: top bit     ``doubleToLongBits`` (one
                   flipped; v < 0: all bits inverted; 0.0, -0.0, NaN   NaN)  [Long.MAX]
                   as they are  [Double.MAX, Float.MAX]
string             UTF-8: first 8 bytes, or left-padded  [""]          those 8 bytes  [Long.MAX]
binary             first 8 bytes, or left-padded  [one zero byte]      those 8 bytes  [Long.MAX]
date               epoch ms of its midnight, long rule  [Long.MAX]     the same ms  [Long.MAX]
timestamp          epoch ms (floored), long rule  [Long.MAX]           the same ms  [Long.MAX]
decimal            integer part (truncated, low 64 bits), long rule    the same  [Long.MAX]
boolean            int rule on 1 / 0  [false]                          true: Long.MAX, else 0
=================  ==================================================  ==========================

Arrow types are read as Spark sees the table's Avro types: int64, int32, int16, int8, float64, float32,
string, binary (fixed too), bool, date32/date64, zoned timestamps of any unit, decimal128/256, Avro's
time-millis (int) and time-micros (long). A naive timestamp (Avro ``local-timestamp-*``) is Spark's
``TIMESTAMP_NTZ``, which neither of Hudi's mappings takes; nested and other types are refused too
(:class:`~hoodie.errors.UnsupportedTable`), as Hudi's executor fails on them. Dates are taken at UTC midnight
(Spark's ``java.sql.Date`` uses the JVM's zone: the same on a UTC host); dates and timestamps before the
Gregorian switch (1582-10-15), which Spark rebases to the Julian calendar, are not rebased.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hoodie.errors import InvalidWriteConfig, UnsupportedTable
from hoodie.settings import int_setting, setting

# -- config keys, with Hudi's defaults ---------------------------------------------------------------------

LAYOUT_OPTIMIZE_STRATEGY = "hoodie.layout.optimize.strategy"
CURVE_BUILD_METHOD = "hoodie.layout.optimize.curve.build.method"
BUILD_CURVE_SAMPLE_SIZE = "hoodie.layout.optimize.build.curve.sample.size"
BUILD_CURVE_SAMPLE_SIZE_DEFAULT = 200_000
# hoodie.layout.optimize.enable and .data.skipping.enable are not read (no effect in Hudi since 0.11), so the
# daemon's key check warns that they have no effect.

#: Bits per coordinate of Hudi's Hilbert curve, and the width its index is padded (or cut) to.
HILBERT_BITS = 63
HILBERT_KEY_BYTES = 63

_LONG_MAX = (1 << 63) - 1
_INT_MAX = (1 << 31) - 1
_SHORT_MAX = (1 << 15) - 1
_BYTE_MAX = (1 << 7) - 1
_DOUBLE_MAX = float(np.finfo(np.float64).max)
_FLOAT_MAX = float(np.finfo(np.float32).max)  # Float.MAX_VALUE widened to double, exactly
_MS_PER_DAY = 86_400_000
_SIGN64 = np.uint64(1 << 63)
_CHUNK_ROWS = 1 << 16  # rows whose bits are spread at once (64 bytes per row and column)


class LayoutStrategy(enum.Enum):
    """``hoodie.layout.optimize.strategy``; the value is how plans spell it (Hudi 0.10-0.14 read only these
    lower-case values, later versions any case)."""

    LINEAR = "linear"
    ZORDER = "z-order"
    HILBERT = "hilbert"

    @property
    def is_curve(self) -> bool:
        return self is not LayoutStrategy.LINEAR

    @classmethod
    def parse(cls, raw: str, where: str) -> LayoutStrategy:
        """Hudi's ``resolveLayoutOptimizationStrategy``: a name or value, any case. ``where`` names the source
        of the value in the error (the key, or the plan and the key)."""
        v = raw.strip().lower()
        found = {
            "linear": cls.LINEAR,
            "z-order": cls.ZORDER,
            "zorder": cls.ZORDER,
            "hilbert": cls.HILBERT,
        }.get(v)
        if found is None:
            raise InvalidWriteConfig(f"{where}={raw!r}: expected linear, z-order or hilbert")
        return found


class CurveBuildMethod(enum.Enum):
    """``hoodie.layout.optimize.curve.build.method``."""

    DIRECT = "direct"
    SAMPLE = "sample"

    @classmethod
    def parse(cls, raw: str, where: str) -> CurveBuildMethod:
        v = raw.strip().lower()
        if v == "direct":
            return cls.DIRECT
        if v == "sample":
            return cls.SAMPLE
        raise InvalidWriteConfig(f"{where}={raw!r}: expected direct or sample")


_SAMPLE_REFUSED = (
    "hoodied builds space-filling curves by direct mapping only: Hudi's sample method orders by ranks within "
    "bounds cut from a random sample, with random jitter, so its order cannot be reproduced; use direct"
)


@dataclass(frozen=True)
class LayoutConfig:
    """How clustering orders rows within a group (the keys above; defaults as Hudi's)."""

    strategy: LayoutStrategy = LayoutStrategy.LINEAR
    build_method: CurveBuildMethod = CurveBuildMethod.DIRECT
    sample_size: int = BUILD_CURVE_SAMPLE_SIZE_DEFAULT

    def __post_init__(self) -> None:
        if self.sample_size < 1:
            raise InvalidWriteConfig(f"{BUILD_CURVE_SAMPLE_SIZE}={self.sample_size!r}: must be positive")
        if self.strategy.is_curve and self.build_method is CurveBuildMethod.SAMPLE:
            raise InvalidWriteConfig(
                f"{CURVE_BUILD_METHOD}=sample with {LAYOUT_OPTIMIZE_STRATEGY}={self.strategy.value}: "
                + _SAMPLE_REFUSED
            )

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> LayoutConfig:
        """Read the keys from a configuration; a bad value raises naming the key and the value."""
        raw_strategy = setting(config, LAYOUT_OPTIMIZE_STRATEGY)
        raw_method = setting(config, CURVE_BUILD_METHOD)
        return cls(
            strategy=(
                LayoutStrategy.parse(raw_strategy, LAYOUT_OPTIMIZE_STRATEGY)
                if raw_strategy is not None
                else LayoutStrategy.LINEAR
            ),
            build_method=(
                CurveBuildMethod.parse(raw_method, CURVE_BUILD_METHOD)
                if raw_method is not None
                else CurveBuildMethod.DIRECT
            ),
            sample_size=int_setting(
                config, BUILD_CURVE_SAMPLE_SIZE, BUILD_CURVE_SAMPLE_SIZE_DEFAULT, minimum=1, bits=32
            ),
        )

    def strategy_params(self) -> dict[str, str]:
        """What hoodied's planner records in a plan's ``strategyParams`` (with sort columns): the curve and
        its build method; nothing for ``linear``, so that linear plans stay as Hudi writes them."""
        if not self.strategy.is_curve:
            return {}
        return {LAYOUT_OPTIMIZE_STRATEGY: self.strategy.value, CURVE_BUILD_METHOD: self.build_method.value}

    def for_plan(self, params: Mapping[str, str], instant_time: str) -> LayoutStrategy:
        """The layout a plan with ``params`` is executed with: the plan's keys where it has them, else this
        (the executor's) configuration. Raises :class:`~hoodie.errors.UnsupportedTable` for a plan whose
        layout hoodied does not run (an unknown strategy, or the ``sample`` build method with a curve)."""
        where = f"clustering {instant_time}: strategy parameter "
        raw_strategy = (params.get(LAYOUT_OPTIMIZE_STRATEGY) or "").strip()
        raw_method = (params.get(CURVE_BUILD_METHOD) or "").strip()
        try:
            strategy = (
                LayoutStrategy.parse(raw_strategy, where + LAYOUT_OPTIMIZE_STRATEGY)
                if raw_strategy
                else self.strategy
            )
            method = (
                CurveBuildMethod.parse(raw_method, where + CURVE_BUILD_METHOD)
                if raw_method
                else self.build_method
            )
        except InvalidWriteConfig as e:
            raise UnsupportedTable(str(e)) from None
        if strategy.is_curve and method is CurveBuildMethod.SAMPLE:
            raise UnsupportedTable(
                f"clustering {instant_time}: {CURVE_BUILD_METHOD}=sample with {LAYOUT_OPTIMIZE_STRATEGY}="
                f"{strategy.value}: {_SAMPLE_REFUSED}. Roll the plan back (it is rewritten by the next "
                "schedule) or run it with Hudi"
            )
        return strategy


# -- column order ------------------------------------------------------------------------------------------


def row_positions(names: Sequence[str], meta_columns: Sequence[str]) -> dict[str, int]:
    """Each column's position in the row schema of Hudi's clustering frame: the meta columns first (Hudi adds
    them to the frame's schema whether or not the table populates them), then the others in order."""
    out = {c: i for i, c in enumerate(meta_columns)}
    data = [c for c in names if c not in out]
    out.update({c: len(meta_columns) + i for i, c in enumerate(data)})
    return out


def curve_column_order(columns: Sequence[str], positions: Mapping[str, int]) -> list[str]:
    """The order Hudi's curve takes ``columns`` in: the iteration order of the ``java.util.HashMap`` that
    ``Collectors.toMap`` fills with (position -> column) in ``sort.columns`` order.

    An ``Integer`` key hashes to itself (positions are far below 2^16) and lands in bucket ``position mod
    capacity``; the table starts at 16 buckets and doubles when it holds more than 3/4 of its capacity, or
    when a bucket reaches nine entries while there are fewer than 64 buckets; resizing keeps the entries of a
    bucket in their order. So the order is by bucket, then by insertion. A bucket of nine entries in a table
    of 64 or more buckets becomes a tree whose order is not modelled: refused (it needs nine sort columns
    whose positions agree modulo 64)."""
    if len(set(columns)) != len(columns):
        raise UnsupportedTable(f"sort columns {', '.join(columns)}: a column is repeated")
    missing = [c for c in columns if c not in positions]
    if missing:
        raise UnsupportedTable(f"sort column(s) {', '.join(missing)} are not columns of the rows")
    capacity = 16
    inserted: list[int] = []
    for c in columns:
        pos = positions[c]
        if pos >= 1 << 16:
            raise UnsupportedTable(f"sort column {c} at position {pos}: its Java hash order is not modelled")
        inserted.append(pos)
        same_bucket = sum(1 for p in inserted if p % capacity == pos % capacity)
        if same_bucket >= 9:
            if capacity >= 64:
                raise UnsupportedTable(
                    f"sort columns {', '.join(columns)}: nine of them share a Java HashMap bucket, whose "
                    "tree order is not modelled"
                )
            capacity *= 2
        if len(inserted) > capacity * 3 // 4:
            capacity *= 2
    order = sorted(range(len(columns)), key=lambda i: (inserted[i] % capacity, i))
    return [columns[i] for i in order]


# -- per-column mappings -----------------------------------------------------------------------------------


def _spark_kind(t: pa.DataType) -> str | None:
    """The Spark type Hudi's frame holds for an Arrow column type (see the module doc), or ``None``."""
    if pa.types.is_dictionary(t):
        return _spark_kind(t.value_type)
    if pa.types.is_int64(t) or pa.types.is_time64(t):
        return "long"
    if pa.types.is_int32(t) or pa.types.is_time32(t):
        return "int"
    if pa.types.is_int16(t):
        return "short"
    if pa.types.is_int8(t):
        return "byte"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_fixed_size_binary(t)
        or pa.types.is_binary_view(t)
    ):
        return "binary"
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_date(t):
        return "date"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else None
    if pa.types.is_decimal(t) and t.bit_width in (128, 256):
        return "decimal"
    return None


def curve_type_problem(name: str, t: pa.DataType) -> str | None:
    """Why a column of type ``t`` cannot be on a curve, or ``None`` when it can."""
    if _spark_kind(t) is not None:
        return None
    if pa.types.is_timestamp(t):
        return (
            f"column {name} is a timestamp without time zone ({t}), Spark's TIMESTAMP_NTZ, which Hudi's "
            "space-filling curves do not map"
        )
    return f"column {name} of type {t} has no space-filling-curve mapping in Hudi"


def curve_problems(schema: pa.Schema, columns: Sequence[str]) -> list[str]:
    """Why the columns of ``schema`` named by ``columns`` cannot be on a curve (empty when they can)."""
    out = []
    for c in columns:
        if c not in schema.names:
            out.append(f"{c} is not a column of the table schema")
            continue
        problem = curve_type_problem(c, schema.field(c).type)
        if problem is not None:
            out.append(problem)
    return out


def _plain(arr: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0)
    if pa.types.is_dictionary(arr.type):
        arr = arr.dictionary_decode()
    return arr


def _ints(arr: pa.Array, fill: int) -> np.ndarray:
    """An integer-valued column (any width; temporal types by their storage) as int64, nulls as ``fill``."""
    storage = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[arr.type.bit_width]
    raw = arr.cast(storage) if not pa.types.is_integer(arr.type) else arr
    return np.asarray(pc.fill_null(raw.cast(pa.int64()), fill).to_numpy(zero_copy_only=False), dtype=np.int64)


def _epoch_ms(arr: pa.Array) -> np.ndarray:
    """Dates as the epoch ms of their (UTC) midnight, timestamps as epoch ms floored; nulls as Long.MAX."""
    t = arr.type
    valid = _valid(arr)
    if pa.types.is_date32(t):
        ms = _ints(arr, 0) * _MS_PER_DAY
    elif pa.types.is_date64(t):
        ms = _ints(arr, 0)
    else:
        v = _ints(arr, 0)
        per_ms = {"s": None, "ms": 1, "us": 1_000, "ns": 1_000_000}[t.unit]
        ms = v * 1000 if per_ms is None else np.floor_divide(v, per_ms)
    return np.where(valid, ms, _LONG_MAX).astype(np.int64)


def _valid(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _decimal_longs(arr: pa.Array) -> np.ndarray:
    """``BigDecimal.longValue()``: the integer part, truncated toward zero, its low 64 bits; nulls as
    Long.MAX."""
    t = arr.type
    whole_type = pa.decimal128(t.precision, 0) if t.bit_width == 128 else pa.decimal256(t.precision, 0)
    whole = pc.cast(arr, whole_type, safe=False)  # Arrow truncates toward zero
    words = t.bit_width // 64
    buf = whole.buffers()[1]
    low = np.frombuffer(buf, dtype="<i8").reshape(-1, words)[whole.offset : whole.offset + len(whole), 0]
    return np.where(_valid(arr), low, _LONG_MAX).astype(np.int64)


def _prefix8(arr: pa.Array) -> np.ndarray:
    """``BinaryUtil.paddingTo8Byte`` of each value's bytes (UTF-8 for strings): the first 8 bytes, or all of
    them right-aligned after leading zeros; a null is empty (all zeros). Shape (n, 8), uint8."""
    n = len(arr)
    out = np.zeros((n, 8), dtype=np.uint8)
    if n == 0:
        return out
    t = arr.type
    if pa.types.is_fixed_size_binary(t):
        width = t.byte_width
        data = np.frombuffer(arr.buffers()[1], dtype=np.uint8)
        start = arr.offset * width
        mat = data[start : start + n * width].reshape(n, width)
        take = min(width, 8)
        out[:, 8 - take :] = mat[:, :take]
        out[~_valid(arr)] = 0
        return out
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        arr = arr.cast(pa.large_binary())
    elif pa.types.is_string(t):
        arr = arr.cast(pa.binary())
    elif pa.types.is_large_string(t):
        arr = arr.cast(pa.large_binary())
    offset_type = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    raw_offsets = np.frombuffer(arr.buffers()[1], dtype=offset_type)
    offsets = raw_offsets[arr.offset : arr.offset + n + 1].astype(np.int64)
    data_buf = arr.buffers()[2]
    if data_buf is None or data_buf.size == 0:
        return out
    data = np.frombuffer(data_buf, dtype=np.uint8)
    starts = offsets[:-1]
    lengths = np.minimum(np.diff(offsets), 8)
    lengths[~_valid(arr)] = 0
    for j in range(8):  # byte j of the prefix, for every value at least j + 1 bytes long
        rows = np.nonzero(lengths > j)[0]
        out[rows, 8 - lengths[rows] + j] = data[starts[rows] + j]
    return out


def _be_bytes(u: np.ndarray) -> np.ndarray:
    """uint64 values as 8 big-endian bytes each, shape (n, 8)."""
    return np.ascontiguousarray(u.astype(">u8")).view(np.uint8).reshape(-1, 8)


def _be_long(b: np.ndarray) -> np.ndarray:
    """8 big-endian bytes per row as uint64."""
    return np.ascontiguousarray(b).view(">u8").reshape(-1).astype(np.uint64)


def _double_bits_z(f: np.ndarray) -> np.ndarray:
    """``BinaryUtil.doubleTo8Byte``: the raw bits, top bit flipped for v > 0, all inverted for v < 0."""
    bits = f.view(np.uint64)
    with np.errstate(invalid="ignore"):
        pos, neg = f > 0, f < 0
    return np.where(pos, bits ^ _SIGN64, np.where(neg, ~bits, bits))


def zorder_bytes(arr: pa.Array | pa.ChunkedArray, name: str = "column") -> np.ndarray:
    """Hudi's z-order mapping of one column (``SpaceCurveSortingHelper.mapColumnValueTo8Bytes``): 8 bytes per
    row, shape (n, 8), uint8 (rules in the module doc)."""
    arr = _plain(arr)
    kind = _spark_kind(arr.type)
    if kind is None:
        raise UnsupportedTable(curve_type_problem(name, arr.type) or name)
    if kind == "long":
        return _be_bytes(_ints(arr, _LONG_MAX).view(np.uint64) ^ _SIGN64)
    if kind in ("int", "short"):
        fill = _INT_MAX if kind == "int" else _SHORT_MAX
        v = (_ints(arr, fill).astype(np.int32).view(np.uint32) ^ np.uint32(1 << 31)).astype(np.uint64)
        return _be_bytes(v)
    if kind == "byte":
        v = _ints(arr, _BYTE_MAX).astype(np.int8).view(np.uint8).astype(np.uint64)
        return _be_bytes(v)
    if kind in ("double", "float"):
        fmax = _DOUBLE_MAX if kind == "double" else _FLOAT_MAX
        f = np.asarray(pc.fill_null(arr, fmax).to_numpy(zero_copy_only=False)).astype(np.float64)
        return _be_bytes(_double_bits_z(f))
    if kind in ("string", "binary"):
        return _prefix8(arr)
    if kind == "boolean":
        b = np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)
        return _be_bytes(b.astype(np.uint64) ^ np.uint64(1 << 31))
    if kind in ("date", "timestamp"):
        return _be_bytes(_epoch_ms(arr).view(np.uint64) ^ _SIGN64)
    assert kind == "decimal"
    return _be_bytes(_decimal_longs(arr).view(np.uint64) ^ _SIGN64)


def hilbert_longs(arr: pa.Array | pa.ChunkedArray, name: str = "column") -> np.ndarray:
    """Hudi's Hilbert mapping of one column (``SpaceCurveSortingHelper.mapColumnValueToLong``): one Java
    ``long`` per row, as int64 (rules in the module doc)."""
    arr = _plain(arr)
    kind = _spark_kind(arr.type)
    if kind is None:
        raise UnsupportedTable(curve_type_problem(name, arr.type) or name)
    valid = _valid(arr)
    if kind in ("long", "int", "short"):
        v = _ints(arr, 0)
    elif kind == "byte":
        v = _ints(arr, 0) & 0xFF
    elif kind in ("double", "float"):
        f = np.asarray(pc.fill_null(arr, 0.0).to_numpy(zero_copy_only=False)).astype(np.float64)
        # doubleToLongBits: the raw bits, every NaN as the canonical one.
        v = np.where(np.isnan(f), np.int64(0x7FF8000000000000), f.view(np.int64))
    elif kind in ("string", "binary"):
        v = _be_long(_prefix8(arr)).view(np.int64)
    elif kind == "boolean":
        b = np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)
        return np.where(b, np.int64(_LONG_MAX), np.int64(0))
    elif kind in ("date", "timestamp"):
        v = _epoch_ms(arr)
    else:
        v = _decimal_longs(arr)
    return np.where(valid, v, np.int64(_LONG_MAX)).astype(np.int64)


# -- curves ------------------------------------------------------------------------------------------------


def interleave(columns: Sequence[np.ndarray]) -> np.ndarray:
    """``BinaryUtil.interleaving(cols, 8)``: bit ``k·n + i`` (most significant first) of the result is bit
    ``k`` of column ``i``; each column is (rows, 8) uint8, the result (rows, 8·n)."""
    if not columns:
        raise ValueError("no columns to interleave")
    stacked = np.stack([np.asarray(c, dtype=np.uint8) for c in columns], axis=1)  # (rows, n, 8)
    rows, n, _ = stacked.shape
    out = np.empty((rows, 8 * n), dtype=np.uint8)
    for lo in range(0, rows, _CHUNK_ROWS):  # bounded memory: 64 bytes per bit matrix row and column
        part = stacked[lo : lo + _CHUNK_ROWS]
        bits = np.unpackbits(part, axis=2)  # (chunk, n, 64), most significant bit first
        out[lo : lo + len(part)] = np.packbits(bits.transpose(0, 2, 1).reshape(len(part), 64 * n), axis=1)
    return out


def _hilbert_transpose(points: np.ndarray, bits: int) -> np.ndarray:
    """Skilling's ``AxestoTranspose`` as davidmoten's ``HilbertCurve.transposedIndex``, every row at once;
    ``points`` (rows, n) int64, the result (rows, n) uint64."""
    x = [points[:, i].astype(np.int64).view(np.uint64).copy() for i in range(points.shape[1])]
    n = len(x)
    q = 1 << (bits - 1)
    while q > 1:  # inverse undo
        p = np.uint64(q - 1)
        uq = np.uint64(q)
        for i in range(n):
            has = (x[i] & uq) != 0
            t = np.where(has, np.uint64(0), (x[0] ^ x[i]) & p)
            x0 = np.where(has, x[0] ^ p, x[0] ^ t)
            x[i] = x[i] ^ t
            x[0] = x0
        q >>= 1
    for i in range(1, n):  # Gray encode
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros_like(x[0])
    q = 1 << (bits - 1)
    while q > 1:
        t ^= np.where((x[n - 1] & np.uint64(q)) != 0, np.uint64(q - 1), np.uint64(0))
        q >>= 1
    return np.stack([xi ^ t for xi in x], axis=1)


def hilbert_index(points: np.ndarray, bits: int = HILBERT_BITS) -> np.ndarray:
    """``HilbertCurve.bits(bits).dimensions(n).index(point)`` of every row of ``points`` ((rows, n) int64,
    Java longs) as big-endian unsigned bytes, shape (rows, ceil(bits·n / 8)): the transposed index's bits
    ``bits - 1`` down to 0, coordinate by coordinate (higher bits of a coordinate do not count)."""
    points = np.asarray(points, dtype=np.int64)
    rows, n = points.shape
    x = _hilbert_transpose(points, bits)  # (rows, n)
    be = np.ascontiguousarray(x.astype(">u8")).view(np.uint8).reshape(rows, n, 8)
    pad = (-(bits * n)) % 8
    out = np.empty((rows, (bits * n + pad) // 8), dtype=np.uint8)
    for lo in range(0, rows, _CHUNK_ROWS):  # bounded memory, as in interleave
        part = be[lo : lo + _CHUNK_ROWS]
        kept = np.unpackbits(part, axis=2)[:, :, 64 - bits :]  # (chunk, n, bits), most significant first
        flat = kept.transpose(0, 2, 1).reshape(len(part), bits * n)
        if pad:
            flat = np.concatenate([np.zeros((len(part), pad), dtype=np.uint8), flat], axis=1)
        out[lo : lo + len(part)] = np.packbits(flat, axis=1)
    return out


def java_bytes_padded(magnitude: np.ndarray, width: int = HILBERT_KEY_BYTES) -> np.ndarray:
    """``HilbertCurveUtils.paddingToNByte(index.toByteArray(), width)`` for non-negative big-endian
    ``magnitude`` rows: the minimal two's complement bytes (a zero byte ahead when the top bit is set; ``[0]``
    for zero), left-padded with zeros to ``width``, or their first ``width`` bytes when longer."""
    rows, w = magnitude.shape
    full = np.concatenate([np.zeros((rows, 1), dtype=np.uint8), magnitude], axis=1)  # room for a sign byte
    nonzero = magnitude != 0
    first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), w)
    top = magnitude[np.arange(rows), np.minimum(first, w - 1)] if w else np.zeros(rows, dtype=np.uint8)
    minimal = np.where(first == w, 1, w - first + (top >= 0x80).astype(np.int64))
    size = max(w + 1, width)
    padded = np.concatenate([np.zeros((rows, size - (w + 1)), dtype=np.uint8), full], axis=1)
    start = size - np.maximum(minimal, width)
    return np.take_along_axis(padded, start[:, None] + np.arange(width)[None, :], axis=1)


def curve_keys(
    rows: pa.Table, columns: Sequence[str], strategy: LayoutStrategy, positions: Mapping[str, int]
) -> np.ndarray:
    """Hudi's sort key of every row on the curve over ``columns`` (two or more), shape (rows, key bytes):
    z-order 8·n bytes, Hilbert 63 bytes; columns taken in :func:`curve_column_order`."""
    return _curve_keys(rows, columns, strategy, positions, exact=True)


def _curve_keys(
    rows: pa.Table,
    columns: Sequence[str],
    strategy: LayoutStrategy,
    positions: Mapping[str, int],
    exact: bool,
) -> np.ndarray:
    """As :func:`curve_keys`; with ``exact`` off, a Hilbert index that never takes more than 63 bytes as Java
    bytes (up to seven columns) is left as its ``ceil(63·n / 8)`` magnitude bytes: Hudi's key only adds
    leading zeros to those, which changes no comparison and saves the memory."""
    if not strategy.is_curve:
        raise ValueError("linear has no curve")
    ordered = curve_column_order(columns, positions)
    if strategy is LayoutStrategy.ZORDER:
        return interleave([zorder_bytes(rows.column(c), c) for c in ordered])
    points = np.stack([hilbert_longs(rows.column(c), c) for c in ordered], axis=1)
    magnitude = hilbert_index(points)
    if not exact and HILBERT_BITS * len(ordered) + 1 <= HILBERT_KEY_BYTES * 8:
        return magnitude
    return java_bytes_padded(magnitude)


def key_words(keys: np.ndarray) -> np.ndarray:
    """Byte-string keys (rows, width) as big-endian uint64 words (rows, ceil(width / 8)), zero-padded: two
    keys compare as unsigned bytes exactly as their word tuples compare."""
    rows, width = keys.shape
    pad = (-width) % 8
    if pad:
        keys = np.concatenate([keys, np.zeros((rows, pad), dtype=np.uint8)], axis=1)
    return np.ascontiguousarray(keys).view(">u8").astype(np.uint64)


def words_order(words: np.ndarray) -> np.ndarray:
    """Stable ascending order of rows of uint64 words (rows, words), the first word most significant."""
    return np.lexsort(tuple(words[:, j] for j in range(words.shape[1] - 1, -1, -1)))


def key_order(keys: np.ndarray) -> np.ndarray:
    """Stable ascending order of byte-string keys (rows, width), compared as unsigned bytes (Hudi's
    ``ByteArraySorting``)."""
    return words_order(key_words(keys))


def curve_key_words(
    rows: pa.Table, columns: Sequence[str], strategy: LayoutStrategy, positions: Mapping[str, int]
) -> np.ndarray:
    """The curve key :func:`sort_indices` orders ``rows`` by (two or more ``columns``), as :func:`key_words`.
    A row's key depends on that row alone (the direct mapping: no statistics of other rows), so keys computed
    apart, slice by slice, compare across slices as they would in one table."""
    return key_words(_curve_keys(rows, columns, strategy, positions, exact=False))


def sort_indices(
    rows: pa.Table, columns: Sequence[str], strategy: LayoutStrategy, positions: Mapping[str, int]
) -> pa.Array:
    """The order clustering writes ``rows`` in (see the module doc); ``positions`` as
    :func:`row_positions`."""
    if not columns or rows.num_rows < 2:
        return pa.array(np.arange(rows.num_rows, dtype=np.int64))
    if not strategy.is_curve:
        return pc.sort_indices(rows, sort_keys=[(c, "ascending", "at_end") for c in columns])
    if len(columns) == 1:
        return pc.sort_indices(rows, sort_keys=[(columns[0], "ascending", "at_start")])
    return pa.array(key_order(_curve_keys(rows, columns, strategy, positions, exact=False)))


__all__ = [
    "BUILD_CURVE_SAMPLE_SIZE",
    "BUILD_CURVE_SAMPLE_SIZE_DEFAULT",
    "CURVE_BUILD_METHOD",
    "HILBERT_BITS",
    "HILBERT_KEY_BYTES",
    "LAYOUT_OPTIMIZE_STRATEGY",
    "CurveBuildMethod",
    "LayoutConfig",
    "LayoutStrategy",
    "curve_column_order",
    "curve_key_words",
    "curve_keys",
    "curve_problems",
    "curve_type_problem",
    "hilbert_index",
    "hilbert_longs",
    "interleave",
    "java_bytes_padded",
    "key_order",
    "key_words",
    "row_positions",
    "sort_indices",
    "words_order",
    "zorder_bytes",
]
