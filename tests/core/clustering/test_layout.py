"""Layout optimization (``hoodie/clustering/layout.py``): the configuration (Hudi's spellings, ``sample``
refused, what plans record), the per-type byte and long mappings and both curves checked against values
worked out by hand from Hudi's definitions (``SpaceCurveSortingHelper``, ``BinaryUtil``, davidmoten's
``HilbertCurve``; the expected bytes are written out below, not computed by the code under test), the Java
HashMap column order, and clustering on generated tables of every version along each curve: every output file
in curve order, and neither hudi-rs's snapshot nor ours changed."""

from __future__ import annotations

import dataclasses
import decimal
import itertools
import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie import Table
from hoodie.clustering.execute import (
    cluster_in_process,
    commit_clustering,
    prepare_clustering,
    run_clustering_task,
)
from hoodie.clustering.layout import (
    BUILD_CURVE_SAMPLE_SIZE,
    CURVE_BUILD_METHOD,
    LAYOUT_OPTIMIZE_STRATEGY,
    CurveBuildMethod,
    LayoutConfig,
    LayoutStrategy,
    curve_column_order,
    curve_keys,
    curve_problems,
    hilbert_index,
    hilbert_longs,
    interleave,
    java_bytes_padded,
    key_order,
    row_positions,
    sort_indices,
    zorder_bytes,
)
from hoodie.clustering.plan import (
    EXECUTION_STRATEGY_CLASS,
    OPERATION_TYPE,
    SORT_COLUMNS,
    ClusteringConfig,
    clustering_plan_of,
    plan_clustering,
    requested_action,
    schedule_clustering,
)
from hoodie.clustering.update_strategy import UpdateStrategy
from hoodie.errors import InvalidWriteConfig, UnsupportedTable
from hoodie.lock import FileSystemLock, held
from hoodie.storage import Storage
from hoodie.table import META_COLUMNS
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodie.timeline.instant_time import InstantTimeGenerator
from hoodie.timeline.metadata import ClusteringStrategy, RequestedReplaceMetadata, plan_versions
from hoodie.timeline.writer import TimelineWriter
from support.clustering_checks import capture, check_after

LONG_MAX = (1 << 63) - 1
ZORDER, HILBERT, LINEAR = LayoutStrategy.ZORDER, LayoutStrategy.HILBERT, LayoutStrategy.LINEAR


def hexes(rows: np.ndarray) -> list[str]:
    return [bytes(r).hex() for r in rows]


# -- configuration -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("linear", LINEAR),
        ("LINEAR", LINEAR),
        ("z-order", ZORDER),
        ("Z-ORDER", ZORDER),
        ("ZORDER", ZORDER),
        ("hilbert", HILBERT),
        ("HILBERT", HILBERT),
    ],
)
def test_the_strategy_takes_hudis_names_and_values_in_any_case(raw: str, expected: LayoutStrategy) -> None:
    assert LayoutConfig.from_config({LAYOUT_OPTIMIZE_STRATEGY: raw}).strategy is expected


def test_defaults_are_hudis_and_bad_values_are_named() -> None:
    c = LayoutConfig.from_config({})
    assert (c.strategy, c.build_method, c.sample_size) == (LINEAR, CurveBuildMethod.DIRECT, 200_000)
    with pytest.raises(InvalidWriteConfig, match=f"{LAYOUT_OPTIMIZE_STRATEGY}='spiral'"):
        LayoutConfig.from_config({LAYOUT_OPTIMIZE_STRATEGY: "spiral"})
    with pytest.raises(InvalidWriteConfig, match=f"{CURVE_BUILD_METHOD}='both'"):
        LayoutConfig.from_config({CURVE_BUILD_METHOD: "both"})
    with pytest.raises(InvalidWriteConfig, match=f"{BUILD_CURVE_SAMPLE_SIZE}='0'"):
        LayoutConfig.from_config({BUILD_CURVE_SAMPLE_SIZE: "0"})


def test_the_sample_method_is_refused_with_a_curve_and_ignored_with_linear() -> None:
    with pytest.raises(InvalidWriteConfig, match="direct mapping only") as e:
        LayoutConfig.from_config({LAYOUT_OPTIMIZE_STRATEGY: "hilbert", CURVE_BUILD_METHOD: "SAMPLE"})
    assert CURVE_BUILD_METHOD in str(e.value)
    linear = LayoutConfig.from_config({CURVE_BUILD_METHOD: "sample"})
    assert linear.strategy is LINEAR
    assert linear.strategy_params() == {}
    with pytest.raises(InvalidWriteConfig, match="direct mapping only"):  # through the clustering config too
        ClusteringConfig.from_config({LAYOUT_OPTIMIZE_STRATEGY: "z-order", CURVE_BUILD_METHOD: "sample"})


def test_plans_record_a_curve_with_the_sort_columns_and_linear_plans_stay_as_hudi_writes_them() -> None:
    def params(conf: dict[str, str]) -> dict[str, str]:
        return dict(ClusteringConfig.from_config(conf).strategy.strategy_params)

    assert params({SORT_COLUMNS: "a,b", LAYOUT_OPTIMIZE_STRATEGY: "Z-ORDER"}) == {
        SORT_COLUMNS: "a,b",
        LAYOUT_OPTIMIZE_STRATEGY: "z-order",
        CURVE_BUILD_METHOD: "direct",
    }
    assert (
        params({SORT_COLUMNS: "a,b", LAYOUT_OPTIMIZE_STRATEGY: "hilbert"})[LAYOUT_OPTIMIZE_STRATEGY]
        == "hilbert"
    )
    assert params({SORT_COLUMNS: "a,b"}) == {SORT_COLUMNS: "a,b"}
    assert params({SORT_COLUMNS: "a,b", LAYOUT_OPTIMIZE_STRATEGY: "linear"}) == {SORT_COLUMNS: "a,b"}
    assert params({LAYOUT_OPTIMIZE_STRATEGY: "hilbert"}) == {}  # no sort columns: nothing is reordered


def test_a_plans_own_keys_win_over_the_executors_configuration() -> None:
    executor = LayoutConfig(ZORDER)
    assert executor.for_plan({}, "T") is ZORDER  # a Hudi plan names no layout: the executor's config
    assert executor.for_plan({LAYOUT_OPTIMIZE_STRATEGY: "hilbert"}, "T") is HILBERT
    assert executor.for_plan({LAYOUT_OPTIMIZE_STRATEGY: "LINEAR"}, "T") is LINEAR
    assert LayoutConfig().for_plan({LAYOUT_OPTIMIZE_STRATEGY: "zorder"}, "T") is ZORDER
    with pytest.raises(UnsupportedTable, match=r"clustering T: .*direct mapping only"):
        LayoutConfig().for_plan({LAYOUT_OPTIMIZE_STRATEGY: "hilbert", CURVE_BUILD_METHOD: "sample"}, "T")
    with pytest.raises(UnsupportedTable, match="'spiral'"):
        LayoutConfig().for_plan({LAYOUT_OPTIMIZE_STRATEGY: "spiral"}, "T")
    # sample with linear: the method does not matter (Hudi ignores it).
    assert LayoutConfig().for_plan({CURVE_BUILD_METHOD: "sample"}, "T") is LINEAR


# -- z-order: 8 bytes per value, by hand -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        # long: v XOR 2^63, big-endian; null -> Long.MAX_VALUE, which XOR 2^63 is all ones.
        (
            pa.array([0, 1, -1, None], pa.int64()),
            ["8000000000000000", "8000000000000001", "7fffffffffffffff", "ffffffffffffffff"],
        ),
        # int: 4 zero bytes, then v XOR 2^31 in 4 bytes; null -> Integer.MAX_VALUE (0x7fffffff ^ 0x80000000).
        (pa.array([1, -1, None], pa.int32()), ["0000000080000001", "000000007fffffff", "00000000ffffffff"]),
        # short: the int rule; null -> Short.MAX_VALUE 0x7fff -> 0x80007fff.
        (pa.array([-2, None], pa.int16()), ["000000007ffffffe", "0000000080007fff"]),
        # byte: seven zero bytes and the raw byte (no sign flip); null -> Byte.MAX_VALUE.
        (pa.array([-1, 1, None], pa.int8()), ["00000000000000ff", "0000000000000001", "000000000000007f"]),
        # double: 1.0 = 0x3ff0000000000000 gets its top bit flipped; -1.0 = 0xbff0... has every bit inverted;
        # 0.0, -0.0 and NaN keep their raw bits; null -> Double.MAX_VALUE 0x7fefffffffffffff, flipped.
        (
            pa.array([1.0, -1.0, 0.0, -0.0, float("nan"), None]),
            [
                "bff0000000000000",
                "400fffffffffffff",
                "0000000000000000",
                "8000000000000000",
                "7ff8000000000000",
                "ffefffffffffffff",
            ],
        ),
        # float: widened to double first; null -> Float.MAX_VALUE = 0x47efffffe0000000 as a double, flipped.
        (pa.array([1.0, None], pa.float32()), ["bff0000000000000", "c7efffffe0000000"]),
        # string: UTF-8 bytes right-aligned after zeros, or the first 8; "é" is c3 a9; null is "" (all zeros).
        (
            pa.array(["ab", "", "abcdefghij", "é", None]),
            [
                "0000000000006162",
                "0000000000000000",
                "6162636465666768",
                "000000000000c3a9",
                "0000000000000000",
            ],
        ),
        # binary (fixed too): the same padding; null is the single byte 0, padded.
        (pa.array([b"\x01\x02", None], pa.binary()), ["0000000000000102", "0000000000000000"]),
        (pa.array([b"\x01\x02\x03", None], pa.binary(3)), ["0000000000010203", "0000000000000000"]),
        # boolean: the int rule on 1 / 0; null is false.
        (pa.array([True, False, None]), ["0000000080000001", "0000000080000000", "0000000080000000"]),
        # date: day 1 is 86,400,000 ms = 0x5265c00, long rule; null -> Long.MAX_VALUE.
        (pa.array([1, None], pa.date32()), ["8000000005265c00", "ffffffffffffffff"]),
        # timestamp: epoch ms, micros dropped (floored: -1 us is -1 ms), long rule.
        (
            pa.array([1999, -1, None], pa.timestamp("us", tz="UTC")),
            ["8000000000000001", "7fffffffffffffff", "ffffffffffffffff"],
        ),
        # decimal: BigDecimal.longValue(), the fraction truncated toward zero: 12.34 -> 12, -12.99 -> -12.
        (
            pa.array([decimal.Decimal("12.34"), decimal.Decimal("-12.99"), None], pa.decimal128(10, 2)),
            ["800000000000000c", "7ffffffffffffff4", "ffffffffffffffff"],
        ),
    ],
    ids=lambda v: str(v.type) if isinstance(v, pa.Array) else None,
)
def test_zorder_bytes_of_each_type(array: pa.Array, expected: list[str]) -> None:
    assert hexes(zorder_bytes(array)) == expected


def test_zorder_bytes_of_a_sliced_chunked_column() -> None:
    chunked = pa.chunked_array([pa.array(["xx", "ab"]), pa.array(["cdefghijkl", None, "z"])])
    assert hexes(zorder_bytes(chunked[1:])) == [
        "0000000000006162",
        "636465666768696a",
        "0000000000000000",
        "000000000000007a",
    ]


def test_interleaving_by_hand() -> None:
    # int 1 -> 00000000 80000001 and int -1 -> 00000000 7fffffff. The first four bytes of both are zero: 64
    # zero bits. Then bit by bit, column 0 first: 0x80 and 0x7f give 1 0, 0 1, 0 1, 0 1 | 0 1, 0 1, 0 1, 0 1
    # = 0x95 0x55; 0x00 and 0xff give 0x55 0x55 (twice); 0x01 and 0xff give 0 1 0 1 0 1 0 1 | 0 1 0 1 0 1 1 1
    # = 0x55 0x57.
    a = zorder_bytes(pa.array([1], pa.int32()))
    b = zorder_bytes(pa.array([-1], pa.int32()))
    assert hexes(interleave([a, b])) == ["0000000000000000" + "9555" + "5555" + "5555" + "5557"]
    assert hexes(interleave([b, a])) == ["0000000000000000" + "6aaa" + "aaaa" + "aaaa" + "aaab"]


def test_interleaving_follows_its_definition_bit_by_bit() -> None:
    """``BinaryUtil.interleaving``: bit k·n + i of the result is bit k of column i (bits counted from the most
    significant), checked one bit at a time in plain Python for three columns of random bytes."""
    rng = np.random.default_rng(5)
    cols = [rng.integers(0, 256, (20, 8), dtype=np.uint8) for _ in range(3)]
    out = interleave(cols)
    assert out.shape == (20, 24)
    for r in range(20):
        result = int.from_bytes(bytes(out[r]), "big")
        for k in range(64):
            for i, col in enumerate(cols):
                bit = (int.from_bytes(bytes(col[r]), "big") >> (63 - k)) & 1
                assert (result >> (24 * 8 - 1 - (k * 3 + i))) & 1 == bit


# -- hilbert: one long per value, and the curve ------------------------------------------------------------


@pytest.mark.parametrize(
    ("array", "expected"),
    [
        (pa.array([5, -5, None], pa.int64()), [5, -5, LONG_MAX]),
        (pa.array([-7, None], pa.int32()), [-7, LONG_MAX]),
        (pa.array([-1, None], pa.int8()), [255, LONG_MAX]),  # the byte read unsigned
        # doubleToLongBits: 1.0 = 0x3ff0000000000000; every NaN the canonical 0x7ff8000000000000.
        (pa.array([1.0, float("nan"), None]), [0x3FF0000000000000, 0x7FF8000000000000, LONG_MAX]),
        # a string's 8 z-order bytes as a long: "ab" = 0x6162; "" = 0; null -> Long.MAX_VALUE (not "").
        (pa.array(["ab", "", None]), [0x6162, 0, LONG_MAX]),
        (pa.array([True, False, None]), [LONG_MAX, 0, 0]),  # true -> Long.MAX_VALUE; null is false
        (pa.array([1, None], pa.date32()), [86_400_000, LONG_MAX]),
        (pa.array([decimal.Decimal("-12.99")], pa.decimal128(10, 2)), [-12]),
    ],
    ids=lambda v: str(v.type) if isinstance(v, pa.Array) else None,
)
def test_hilbert_longs_of_each_type(array: pa.Array, expected: list[int]) -> None:
    assert hilbert_longs(array).tolist() == expected


def test_the_first_hilbert_cell_by_hand() -> None:
    """Two coordinates of 0 or 1 (only bit 0 set). Skilling's undo loop runs for q = 2^62 .. 2: no q bit is
    set, so every step swaps bit 0 of x0 and x1 (t = (x0 ^ x1) & (q - 1)), 62 swaps: no change. Gray encode:
    x1 ^= x0; the last coordinate has no q bit, so t = 0. The index interleaves bit 0 of the two,
    (x0 << 1) | (x0 ^ x1): (0,0) -> 0, (0,1) -> 1, (1,1) -> 2, (1,0) -> 3. As Java's BigInteger bytes ([0x00]
    for zero, one byte else), left-padded to 63 bytes."""
    points = np.array([[0, 0], [0, 1], [1, 1], [1, 0]], dtype=np.int64)
    magnitude = hilbert_index(points)
    assert magnitude.shape == (4, 16)  # 126 bits
    assert [int.from_bytes(bytes(r), "big") for r in magnitude] == [0, 1, 2, 3]
    assert hexes(java_bytes_padded(magnitude)) == ["00" * 62 + f"{v:02x}" for v in range(4)]


def test_hilbert_keys_walk_an_aligned_square_in_unit_steps() -> None:
    """On a Hilbert curve each next point is a neighbour of the last, and an aligned 8x8 square at the origin
    is the first 64 points: sorting its points by key gives indices 0..63 and a walk of unit steps."""
    xs, ys = np.meshgrid(np.arange(8), np.arange(8))
    points = np.stack([xs.ravel(), ys.ravel()], axis=1).astype(np.int64)
    keys = java_bytes_padded(hilbert_index(points))
    order = key_order(keys)
    walk = points[order]
    assert walk[0].tolist() == [0, 0]
    assert [int.from_bytes(bytes(k), "big") for k in keys[order]] == list(range(64))
    steps = np.abs(np.diff(walk, axis=0)).sum(axis=1)
    assert steps.tolist() == [1] * 63


def _transposed(bits: int, point: list[int]) -> list[int]:
    """davidmoten ``HilbertCurve.transposedIndex`` (0.2.2), line by line, on Python ints masked to 64 bits."""
    m = 1 << (bits - 1)
    n = len(point)
    x = [p & ((1 << 64) - 1) for p in point]
    q = m
    while q > 1:
        p = q - 1
        for i in range(n):
            if x[i] & q:
                x[0] ^= p
            else:
                t = (x[0] ^ x[i]) & p
                x[0] ^= t
                x[i] ^= t
        q >>= 1
    for i in range(1, n):
        x[i] ^= x[i - 1]
    t = 0
    q = m
    while q > 1:
        if x[n - 1] & q:
            t ^= q - 1
        q >>= 1
    return [xi ^ t for xi in x]


def _index(bits: int, point: list[int]) -> int:
    """``HilbertCurve.toIndex``: bits ``bits - 1`` .. 0 of the transposed coordinates, one coordinate after
    the other."""
    x = _transposed(bits, point)
    v = 0
    for b in range(bits - 1, -1, -1):
        for xj in x:
            v = (v << 1) | ((xj >> b) & 1)
    return v


def _hudi_key(v: int) -> bytes:
    """``paddingToNByte(BigInteger.toByteArray(), 63)`` of a non-negative index."""
    raw = v.to_bytes(v.bit_length() // 8 + 1, "big")
    return raw[:63] if len(raw) >= 63 else bytes(63 - len(raw)) + raw


@pytest.mark.parametrize("dims", [2, 3, 5, 8, 9])
def test_hilbert_keys_match_the_javas_transcription(dims: int) -> None:
    """Random points (extremes and negatives included) against the Java transcribed above; from eight
    coordinates on the index can take 64 bytes and is cut to its first 63, as Hudi's is."""
    rng = random.Random(dims)
    special = [0, 1, -1, LONG_MAX, -(1 << 63), 1 << 62]
    points = [
        [
            rng.choice([rng.getrandbits(64) - (1 << 63), rng.randint(-9, 9), rng.choice(special)])
            for _ in range(dims)
        ]
        for _ in range(150)
    ]
    keys = java_bytes_padded(hilbert_index(np.array(points, dtype=np.int64)))
    assert [bytes(k) for k in keys] == [_hudi_key(_index(63, p)) for p in points]
    if dims >= 8:  # some indices were long enough to be cut
        assert any(_index(63, p).bit_length() + 1 > 63 * 8 for p in points)


def test_large_inputs_are_spread_in_chunks_with_the_same_result() -> None:
    rng = np.random.default_rng(11)
    n = (1 << 16) + 5  # just over one chunk
    points = rng.integers(-(1 << 63), LONG_MAX, (n, 2), dtype=np.int64, endpoint=True)
    whole = hilbert_index(points)
    assert np.array_equal(whole[-10:], hilbert_index(points[-10:]))
    cols = [rng.integers(0, 256, (n, 8), dtype=np.uint8) for _ in range(2)]
    assert np.array_equal(interleave(cols)[-10:], interleave([c[-10:] for c in cols]))


def test_hilbert_drops_the_sign_bit() -> None:
    """Only the low 63 bits of a coordinate count: -1 is the point 2^63 - 1, the same as Long.MAX_VALUE."""
    a = hilbert_index(np.array([[-1, 3], [-(1 << 63), 3]], dtype=np.int64))
    b = hilbert_index(np.array([[LONG_MAX, 3], [0, 3]], dtype=np.int64))
    assert hexes(a) == hexes(b)


# -- column order ------------------------------------------------------------------------------------------


def test_curve_columns_follow_javas_hashmap_of_schema_positions() -> None:
    # Positions count the five meta columns first: a table column's position is 5 + its index.
    positions = row_positions(["_hoodie_commit_time", "x", "a", "b"], META_COLUMNS)
    assert (positions["x"], positions["a"], positions["b"]) == (5, 6, 7)
    assert positions["_hoodie_record_key"] == 2
    assert row_positions(["x", "a"], META_COLUMNS)["a"] == 6  # the same without meta columns in the rows
    # Up to 12 entries the map has 16 buckets: ascending by position mod 16, not in sort.columns order.
    assert curve_column_order(["b", "a"], {"a": 6, "b": 7}) == ["a", "b"]
    assert curve_column_order(["a", "b"], {"a": 6, "b": 20}) == ["b", "a"]  # 20 mod 16 = 4 < 6
    # Equal buckets keep the sort.columns order: 6 and 22 are both in bucket 6.
    assert curve_column_order(["p", "q"], {"p": 22, "q": 6}) == ["p", "q"]
    assert curve_column_order(["q", "p"], {"p": 22, "q": 6}) == ["q", "p"]
    # Twelve columns at 5 .. 15 and 16: position 16 is bucket 0 of 16, so it comes first. A 13th entry
    # (more than 3/4 of 16) doubles the table to 32 buckets, where 16 is bucket 16, after 5 .. 15.
    pos = {**{f"c{i}": 4 + i for i in range(1, 12)}, "c0": 16, "c12": 17}
    middle = [f"c{i}" for i in range(1, 12)]
    assert curve_column_order([*middle, "c0"], pos) == ["c0", *middle]
    assert curve_column_order([*middle, "c0", "c12"], pos) == [*middle, "c0", "c12"]


def test_curve_keys_take_the_hashmap_order() -> None:
    rows = pa.table({"a": pa.array([1], pa.int32()), "b": pa.array([-1], pa.int32())})
    # sort.columns "b,a", but a sits at position 5 and b at 6: a's bits come first.
    key = curve_keys(rows, ["b", "a"], ZORDER, row_positions(rows.column_names, META_COLUMNS))
    assert hexes(key) == ["0000000000000000" + "9555" + "5555" + "5555" + "5557"]


def test_columns_without_a_curve_mapping_are_named() -> None:
    schema = pa.schema(
        [
            ("ok", pa.int64()),
            ("naive", pa.timestamp("us")),
            ("tags", pa.list_(pa.string())),
        ]
    )
    problems = curve_problems(schema, ["ok", "naive", "tags", "gone"])
    assert len(problems) == 3
    assert "TIMESTAMP_NTZ" in problems[0]
    assert "tags" in problems[1]
    assert "gone is not a column" in problems[2]
    with pytest.raises(UnsupportedTable, match="naive"):
        zorder_bytes(pa.array([1], pa.timestamp("us")), "naive")


# -- the order of rows -------------------------------------------------------------------------------------


def test_rows_are_ordered_by_their_keys_as_unsigned_bytes_stably() -> None:
    rng = np.random.default_rng(3)
    rows = pa.table(
        {
            "x": pa.array(rng.integers(-50, 50, 500), pa.int64()),
            "y": pa.array([None if i % 17 == 0 else float(v) for i, v in enumerate(rng.normal(size=500))]),
            "s": pa.array([f"k{v:03d}" for v in rng.integers(0, 30, 500)]),
        }
    )
    positions = row_positions(rows.column_names, META_COLUMNS)
    for strategy in (ZORDER, HILBERT):
        order = sort_indices(rows, ["y", "x", "s"], strategy, positions).to_numpy()
        keys = [bytes(k) for k in curve_keys(rows, ["y", "x", "s"], strategy, positions)]
        assert [keys[i] for i in order] == sorted(keys), strategy  # Python compares bytes unsigned
        ties = [i for i in range(len(order) - 1) if keys[order[i]] == keys[order[i + 1]]]
        assert all(order[i] < order[i + 1] for i in ties), strategy  # stable
    # One sort column on a curve: Hudi range-partitions by it (nulls first), no curve.
    one = sort_indices(rows, ["y"], HILBERT, positions)
    ys = rows.column("y").take(one).to_pylist()
    n_null = ys.count(None)
    assert ys[:n_null] == [None] * n_null
    assert ys[n_null:] == sorted(ys[n_null:])
    # Linear: nulls last, as before.
    lin = rows.column("y").take(sort_indices(rows, ["y"], LINEAR, positions)).to_pylist()
    assert lin[-n_null:] == [None] * n_null


# -- clustering along a curve ------------------------------------------------------------------------------

COLUMNS = ("begin_lat", "begin_lon")
GENERATED = [
    pytest.param(6, "MERGE_ON_READ", 2, ZORDER, id="v6-mor-zorder"),
    pytest.param(6, "COPY_ON_WRITE", 0, HILBERT, id="v6-cow-hilbert"),
    pytest.param(8, "COPY_ON_WRITE", 2, ZORDER, id="v8-cow-zorder"),
    pytest.param(8, "MERGE_ON_READ", 0, HILBERT, id="v8-mor-hilbert"),
    pytest.param(9, "MERGE_ON_READ", 2, HILBERT, id="v9-mor-hilbert"),
    pytest.param(9, "COPY_ON_WRITE", 0, ZORDER, id="v9-cow-zorder"),
]


def _generated(root: Path, version: int, table_type: str, partitions: int) -> None:
    generate_table(
        str(root),
        GenerateSpec(
            table_type=table_type,  # type: ignore[arg-type]
            table_version=version,
            rows=400,
            commits=4,
            update_fraction=0.3,
            delete_fraction=0.1,
            partitions=partitions,
            seed=21,
        ),
    )


def _assert_curve_ordered(
    root: Path, paths: list[str], columns: tuple[str, ...], strategy: LayoutStrategy
) -> None:
    """Each file's rows ascend along the curve, and the files of a partition hold consecutive stretches of
    it."""
    by_partition: dict[str, list[tuple[bytes, bytes]]] = {}
    for path in paths:
        written = pq.read_table(root / path)
        keys = [
            bytes(k)
            for k in curve_keys(written, columns, strategy, row_positions(written.column_names, META_COLUMNS))
        ]
        assert keys == sorted(keys), f"{path}: rows are not in {strategy.value} order"
        by_partition.setdefault(path.rpartition("/")[0], []).append((keys[0], keys[-1]))
    for partition, spans in by_partition.items():
        spans.sort()
        for (_, last), (first, _) in itertools.pairwise(spans):
            assert last <= first, f"{partition}: files overlap on the {strategy.value} curve"


@pytest.mark.parametrize(("version", "table_type", "partitions", "strategy"), GENERATED)
def test_clustering_along_a_curve_keeps_every_read_and_orders_every_file(
    tmp_path: Path, version: int, table_type: str, partitions: int, strategy: LayoutStrategy
) -> None:
    root = tmp_path / "t"
    _generated(root, version, table_type, partitions)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture(root)
    table = Table.open(str(root))
    per_partition = sum(s.base_file_size for s in table.file_slices()) // max(partitions, 1)
    config = ClusteringConfig(
        sort_columns=COLUMNS,
        layout=LayoutConfig(strategy),
        target_file_max_bytes=per_partition // 3 + 1,
        update_strategy=UpdateStrategy.ALLOW,  # no writer beside: every candidate
    )
    scheduled = schedule_clustering(storage, lock, config=config, respect_trigger=False)
    assert scheduled.instant is not None, scheduled.reason
    assert scheduled.plan is not None
    assert scheduled.plan.strategy is not None
    assert scheduled.plan.strategy.strategy_params == {
        SORT_COLUMNS: ",".join(COLUMNS),
        LAYOUT_OPTIMIZE_STRATEGY: strategy.value,
        CURVE_BUILD_METHOD: "direct",
    }
    # The requested file holds the same parameters (Hudi's Avro plan, read back).
    assert clustering_plan_of(Table.load(storage), scheduled.instant.time) == scheduled.plan
    result = cluster_in_process(storage, lock)
    # hudi-rs's snapshot and ours unchanged (rows by key, all columns but _hoodie_file_name), time travel too.
    md = check_after(
        root, before, scheduled.instant.time, scheduled.plan, f"v{version} {table_type} {strategy.value}"
    )
    assert len(md.write_stats) > len(scheduled.plan.input_groups)  # groups were split across files
    _assert_curve_ordered(root, [s.path or "" for s in md.write_stats], COLUMNS, strategy)
    assert result.records_written == sum(s.num_writes or 0 for s in md.write_stats)


def test_a_plan_naming_no_layout_takes_the_executors(tmp_path: Path) -> None:
    """Hudi's planners write only sort.columns; its executors order by their own configured layout, and so
    does hoodied's with ``layout`` (the daemon passes the table's settings)."""
    root = tmp_path / "t"
    _generated(root, 8, "COPY_ON_WRITE", 0)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    before = capture(root, hudi_rs=False)
    scheduled = schedule_clustering(
        storage,
        lock,
        config=ClusteringConfig(sort_columns=COLUMNS, update_strategy=UpdateStrategy.ALLOW),
        respect_trigger=False,
    )
    assert scheduled.plan is not None
    assert scheduled.instant is not None
    assert scheduled.plan.strategy is not None
    assert scheduled.plan.strategy.strategy_params == {SORT_COLUMNS: ",".join(COLUMNS)}
    prepared = prepare_clustering(storage, lock, layout=LayoutConfig(HILBERT))
    assert {t.layout for t in prepared.tasks} == {HILBERT}
    results = [run_clustering_task(t, f"{t.index}-0-{t.index}") for t in prepared.tasks]
    commit_clustering(storage, lock, prepared, results)
    md = check_after(root, before, scheduled.instant.time, scheduled.plan, "executor's layout")
    _assert_curve_ordered(root, [s.path or "" for s in md.write_stats], COLUMNS, HILBERT)


def test_a_plan_asking_for_sampled_curves_is_refused_before_it_starts(tmp_path: Path) -> None:
    root = tmp_path / "t"
    _generated(root, 9, "MERGE_ON_READ", 0)
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    table = Table.load(storage)
    version = table.config.table_version
    generator = InstantTimeGenerator()
    with held(lock):
        instant_time = generator.next(storage, table.config)
        config = ClusteringConfig(sort_columns=COLUMNS, update_strategy=UpdateStrategy.ALLOW)
        planned = plan_clustering(Table.load(storage), instant_time, config)
        assert planned.plan is not None
        params = {
            SORT_COLUMNS: ",".join(COLUMNS),
            LAYOUT_OPTIMIZE_STRATEGY: "HILBERT",
            CURVE_BUILD_METHOD: "SAMPLE",
        }
        plan = dataclasses.replace(
            planned.plan, strategy=ClusteringStrategy(EXECUTION_STRATEGY_CLASS, params)
        )
        content = RequestedReplaceMetadata(
            operation_type=OPERATION_TYPE,
            clustering_plan=plan,
            extra_metadata={},
            version=plan_versions(version).requested_replace,
        )
        TimelineWriter(storage, table.config, lock).request(requested_action(version), instant_time, content)
    with pytest.raises(UnsupportedTable, match=f"clustering {instant_time}: .*sample.*direct mapping only"):
        prepare_clustering(storage, lock)
    instant = Table.load(storage).timeline.get(instant_time)
    assert instant is not None
    assert instant.state is State.REQUESTED  # never started
