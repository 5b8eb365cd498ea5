"""Bloom filters: Hudi's byte-exact vectors, every footer filter of the fixture tables, and the hashes.

The vectors (``fixtures/vectors/bloom``) are Hudi's own test resources: the last line of each ``.bf.data``
file is the Base64 filter Hadoop built after adding *all* 10 000 keys of ``all_10000.keys.data`` (Hudi's
``TestBloomFilter.testDeserialize`` adds the whole key list; the fixtures README says "the first N", but the
``N`` of the file name is the filter's number of entries: the dynamic vectors' headers count 10 000 adds).
"""

from __future__ import annotations

import base64
import random
import string
import struct
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hoodie.bloom import (
    DYNAMIC_V0,
    FOOTER_KEY,
    FOOTER_TYPE_CODE_KEY,
    JENKINS_HASH,
    MURMUR_HASH,
    OLD_FOOTER_KEY,
    SIMPLE,
    DynamicBloomFilter,
    SimpleBloomFilter,
    bloom_filter_size,
    deserialize_bloom_filter,
    hash_positions,
    hash_positions_many,
    jenkins_hash,
    murmur_hash,
    new_bloom_filter,
    read_bloom_filter,
)
from hoodie.errors import CorruptBloomFilter
from hoodie.file_group.base_file import BaseFile

if TYPE_CHECKING:
    from support.fixture_tables import FixtureCache, FixtureTable

VECTORS = [
    "dynamic_1000_000001_jenkins_5000",
    "dynamic_1000_000001_murmur_5000",
    "dynamic_200_000001_murmur_1000",
    "simple_10000_000001_murmur",
    "simple_1000_000001_murmur",
    "simple_200_000001_murmur",
    "simple_5000_000001_jenkins",
    "simple_5000_000001_murmur",
]


def last_line(path: Path) -> str:
    return path.read_text(encoding="utf-8").strip().splitlines()[-1].strip()


@pytest.fixture(scope="module")
def vector_keys(fixtures_path: Path) -> list[str]:
    keys = last_line(fixtures_path / "vectors" / "bloom" / "all_10000.keys.data").split(",")
    assert len(keys) == 10000
    return keys


def vector_filter(name: str) -> SimpleBloomFilter | DynamicBloomFilter:
    """An empty filter of the kind the vector's name describes: ``type_N_fpp_hash[_max]``."""
    kind, entries, fpp_digits, hash_name, *rest = name.split("_")
    fpp = float("0." + fpp_digits)
    hash_type = {"murmur": MURMUR_HASH, "jenkins": JENKINS_HASH}[hash_name]
    if kind == "simple":
        return SimpleBloomFilter.for_entries(int(entries), fpp, hash_type)
    return DynamicBloomFilter.for_entries(int(entries), fpp, int(rest[0]), hash_type)


# -- vectors -----------------------------------------------------------------------------------------------


@pytest.mark.fixtures
@pytest.mark.parametrize("name", VECTORS)
def test_vector_is_reproduced_byte_for_byte(name: str, fixtures_path: Path, vector_keys: list[str]) -> None:
    expected = last_line(fixtures_path / "vectors" / "bloom" / f"{name}.bf.data")
    built = vector_filter(name)
    built.add_keys(vector_keys)
    assert built.serialize() == expected


@pytest.mark.fixtures
@pytest.mark.parametrize("name", VECTORS)
def test_vector_round_trips_and_holds_its_keys(
    name: str, fixtures_path: Path, vector_keys: list[str]
) -> None:
    text = last_line(fixtures_path / "vectors" / "bloom" / f"{name}.bf.data")
    type_code = DYNAMIC_V0 if name.startswith("dynamic") else None
    parsed = deserialize_bloom_filter(text, type_code)
    assert parsed.type_code == (DYNAMIC_V0 if type_code else SIMPLE)
    assert parsed.serialize() == text
    assert parsed.might_contain_many(vector_keys).all()
    assert all(parsed.might_contain(k) for k in vector_keys[::97])


@pytest.mark.fixtures
def test_dynamic_vector_header_counts_every_key(fixtures_path: Path) -> None:
    raw = base64.b64decode(
        last_line(fixtures_path / "vectors" / "bloom" / "dynamic_1000_000001_murmur_5000.bf.data")
    )
    version, hashes, hash_type, bits, nr, count, rows = struct.unpack_from(">iibiiii", raw)
    # 5 rows of 1000, then 5000 more keys round-robin: 1000 + 5000 counted in the last "current" row.
    assert (version, hashes, hash_type, bits, nr, count, rows) == (-1, 20, 1, 28756, 1000, 6000, 5)


# -- sizing and construction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entries", "fpp", "bits", "hashes"),
    [(60000, 1e-9, 2587966, 30), (5000, 1e-6, 143776, 20), (1000, 1e-6, 28756, 20), (200, 1e-6, 5752, 20)],
)
def test_sizing_matches_hudi(entries: int, fpp: float, bits: int, hashes: int) -> None:
    assert bloom_filter_size(entries, fpp) == (bits, hashes)


def test_new_bloom_filter_defaults_are_hudis() -> None:
    bf = new_bloom_filter()
    assert isinstance(bf, DynamicBloomFilter)
    assert (bf.type_code, bf.vector_size, bf.num_hashes, bf.hash_type) == (
        DYNAMIC_V0,
        2587966,
        30,
        MURMUR_HASH,
    )
    assert (bf.entries_per_row, bf.max_entries) == (60000, 100000)
    assert new_bloom_filter("simple", 1000, 1e-6).type_code == SIMPLE


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"type_code": "BLOOMY"}, "BLOOMY"),
        ({"num_entries": 0}, "positive number of entries"),
        ({"fpp": 1.0}, "strictly between 0 and 1"),
        ({"fpp": 0.0}, "strictly between 0 and 1"),
    ],
)
def test_new_bloom_filter_refuses_bad_arguments(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        new_bloom_filter(**kwargs)  # type: ignore[arg-type]


# -- behaviour ---------------------------------------------------------------------------------------------


def uuids(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [str(uuid.UUID(int=rng.getrandbits(128), version=4)) for _ in range(n)]


@pytest.mark.parametrize("type_code", [SIMPLE, DYNAMIC_V0])
def test_round_trip_of_a_new_filter(type_code: str) -> None:
    keys = uuids(3000, 1)
    bf = new_bloom_filter(type_code, num_entries=1000, fpp=1e-4, max_entries=2500)
    bf.add_keys(keys)
    text = bf.serialize()
    again = deserialize_bloom_filter(text, type_code)
    assert again.serialize() == text
    probe = uuids(2000, 2) + keys[:500]
    assert (again.might_contain_many(probe) == bf.might_contain_many(probe)).all()


@pytest.mark.parametrize("type_code", [SIMPLE, DYNAMIC_V0])
def test_every_added_key_tests_positive(type_code: str) -> None:
    keys = [*uuids(20000, 3), "a", "ab", "abc", "é", "日本語キー", "🙂🙂🙂", "x" * 257]
    bf = new_bloom_filter(type_code, num_entries=5000, fpp=1e-6, max_entries=12000)
    bf.add_keys(pa.chunked_array([keys[:7000], keys[7000:]]))
    assert bf.might_contain_many(keys).all()
    assert all(bf.might_contain(k) for k in keys[-7:])


def test_false_positive_rate_is_near_fpp() -> None:
    fpp = 0.01
    bf = new_bloom_filter(SIMPLE, num_entries=10000, fpp=fpp)
    bf.add_keys(uuids(10000, 4))
    rate = float(bf.might_contain_many(uuids(100000, 5)).mean())
    assert fpp / 2 < rate < fpp * 2


def test_dynamic_false_positive_rate_is_near_fpp_per_row() -> None:
    fpp = 0.01
    bf = new_bloom_filter(DYNAMIC_V0, num_entries=5000, fpp=fpp, max_entries=10000)
    bf.add_keys(uuids(10000, 6))  # two full rows: either may answer
    rate = float(bf.might_contain_many(uuids(100000, 7)).mean())
    expected = 1 - (1 - fpp) ** 2
    assert expected / 2 < rate < expected * 2


def test_dynamic_rows_fill_then_go_round_robin() -> None:
    keys = [f"key-{i}" for i in range(11)]
    one_by_one = DynamicBloomFilter.for_entries(2, 0.01, max_entries=6)
    for key in keys:
        one_by_one.add(key)
    batched = DynamicBloomFilter.for_entries(2, 0.01, max_entries=6)
    batched.add_keys(keys[:3])
    batched.add_keys(keys[3:])
    # rows 0, 1, 2 take two keys each; the bound (3 * 2 >= 6) sends key 6 to row 0, then 0, 1, 2, 0.
    assert len(one_by_one.rows) == 3
    assert one_by_one.current_count == 2 + 5
    assert batched.serialize() == one_by_one.serialize()
    single_rows = [DynamicBloomFilter.for_entries(2, 0.01, max_entries=2) for _ in range(3)]
    for row, row_keys in zip(
        single_rows,
        [keys[0:2] + keys[6:8] + [keys[10]], [*keys[2:4], keys[8]], [*keys[4:6], keys[9]]],
        strict=True,
    ):
        for key in row_keys:
            row.add(key)
    assert [bits.tobytes() for bits in one_by_one.rows] == [r.rows[0].tobytes() for r in single_rows]


def test_deserialized_dynamic_filter_has_no_bound_as_in_hudi() -> None:
    bf = DynamicBloomFilter.for_entries(2, 0.01, max_entries=100)
    bf.add_keys(["a", "b"])
    parsed = deserialize_bloom_filter(bf.serialize(), DYNAMIC_V0)
    assert isinstance(parsed, DynamicBloomFilter)
    assert parsed.max_entries == 0
    parsed.add_keys(["c", "d"])  # Hudi's no-argument filter (maxNr 0) never adds a row
    assert len(parsed.rows) == 1
    assert parsed.might_contain_many(["a", "b", "c", "d"]).all()


# -- hashes ------------------------------------------------------------------------------------------------


def random_keys(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    keys = []
    for i in range(n):
        length = 1 + i % 41
        if i % 3 == 0:
            keys.append(bytes(rng.getrandbits(8) for _ in range(length)))  # high bytes: sign extension
        else:
            keys.append("".join(rng.choice(string.printable) for _ in range(length)).encode())
    return keys


@pytest.mark.parametrize("hash_type", [MURMUR_HASH, JENKINS_HASH])
def test_vectorised_and_scalar_hashing_agree(hash_type: int) -> None:
    keys = random_keys(600, 8)
    many = hash_positions_many(pa.array(keys, pa.binary()), 7, 1_000_003, hash_type)
    assert many.shape == (7, len(keys))
    for i, key in enumerate(keys):
        assert many[:, i].tolist() == hash_positions(key, 7, 1_000_003, hash_type)


@pytest.mark.parametrize("hash_type", [MURMUR_HASH, JENKINS_HASH])
def test_vectorised_hashing_spans_chunks_and_slices(hash_type: int) -> None:
    keys = [f"k{i}" for i in range(70000)]  # more than one chunk, lengths 2..6
    arr = pa.array(keys).slice(5, 69990)
    many = hash_positions_many(arr, 3, 9973, hash_type)
    for i in (0, 1, 65535, 65536, 69989):
        assert many[:, i].tolist() == hash_positions(keys[5 + i].encode(), 3, 9973, hash_type)


def test_scalar_hashes_are_java_ints() -> None:
    # 2^31 and beyond never come back: Java's int is signed, and abs(h % v) is what picks a bit.
    values = [
        f(key, seed) for f in (murmur_hash, jenkins_hash) for key in random_keys(50, 9) for seed in (0, -1, 7)
    ]
    assert all(-(2**31) <= v < 2**31 for v in values)
    assert any(v < 0 for v in values)
    assert murmur_hash(b"", 0) == murmur_hash(b"", 0)


def test_keys_must_be_non_empty_and_not_null() -> None:
    bf = new_bloom_filter(SIMPLE, 100, 0.01)
    with pytest.raises(ValueError, match="empty"):
        bf.add_keys(["a", ""])
    with pytest.raises(ValueError, match="null"):
        bf.add_keys(pa.array(["a", None]))
    with pytest.raises(TypeError, match="strings"):
        bf.add_keys(pa.array([1, 2]))


# -- serialized form and footers ---------------------------------------------------------------------------


def test_serialized_layout_is_hadoops() -> None:
    bf = SimpleBloomFilter(vector_size=11, num_hashes=2)
    bf.bits[[0, 9, 10]] = True
    raw = base64.b64decode(bf.serialize())
    assert raw == struct.pack(">iibi", -1, 2, 1, 11) + bytes([0x01, 0x06])


def test_hadoop_unversioned_header_means_jenkins() -> None:
    raw = struct.pack(">ii", 3, 16) + bytes(2)
    bf = deserialize_bloom_filter(base64.b64encode(raw).decode())
    assert (bf.num_hashes, bf.hash_type, bf.vector_size) == (3, JENKINS_HASH, 16)


@pytest.mark.parametrize(
    ("text", "type_code", "message"),
    [
        ("not base64!", None, "not Base64"),
        (base64.b64encode(struct.pack(">iibi", -1, 2, 1, 64)).decode(), None, "needs 8 bytes"),
        (base64.b64encode(struct.pack(">iibi", -1, 2, 1, 8) + bytes(2)).decode(), None, "1 bytes follow"),
        (base64.b64encode(struct.pack(">iibi", -2, 2, 1, 8) + bytes(1)).decode(), None, "version -2"),
        (base64.b64encode(struct.pack(">iibi", -1, 2, 5, 8) + bytes(1)).decode(), None, "hash type 5"),
        (base64.b64encode(struct.pack(">iibi", -1, 2, 1, 8) + bytes(1)).decode(), "DYNAMIC_V1", "DYNAMIC_V1"),
        (base64.b64encode(struct.pack(">iibiiii", -1, 2, 1, 8, 1, 0, 0)).decode(), DYNAMIC_V0, "0 rows"),
        (
            base64.b64encode(
                struct.pack(">iibiiii", -1, 2, 1, 8, 1, 0, 1) + struct.pack(">iibi", -1, 3, 1, 8) + bytes(1)
            ).decode(),
            DYNAMIC_V0,
            "row 0",
        ),
    ],
)
def test_corrupt_filters_are_refused(text: str, type_code: str | None, message: str) -> None:
    with pytest.raises(CorruptBloomFilter, match=message):
        deserialize_bloom_filter(text, type_code)


def test_read_bloom_filter_from_footer_keys() -> None:
    simple = new_bloom_filter(SIMPLE, 100, 0.01)
    simple.add_keys(["k"])
    dynamic = new_bloom_filter(DYNAMIC_V0, 100, 0.01)
    dynamic.add_keys(["k"])
    assert read_bloom_filter(None) is None
    assert read_bloom_filter({b"parquet.avro.schema": b"{}"}) is None
    from_simple = read_bloom_filter({FOOTER_KEY: simple.serialize().encode()})
    assert from_simple is not None
    assert from_simple.type_code == SIMPLE
    assert from_simple.might_contain("k")
    from_old = read_bloom_filter({OLD_FOOTER_KEY: simple.serialize().encode()})
    assert from_old is not None
    assert from_old.might_contain("k")
    footer = {FOOTER_KEY: dynamic.serialize().encode(), FOOTER_TYPE_CODE_KEY: b"DYNAMIC_V0"}
    from_dynamic = read_bloom_filter(footer)
    assert from_dynamic is not None
    assert from_dynamic.type_code == DYNAMIC_V0
    assert from_dynamic.serialize() == dynamic.serialize()


# -- every footer of every fixture table -------------------------------------------------------------------


def base_files(root: Path) -> list[Path]:
    return sorted(
        p
        for p in root.rglob("*.parquet")
        if ".hoodie" not in p.relative_to(root).parts
        and "__MACOSX" not in p.relative_to(root).parts
        and BaseFile.try_parse(p.name) is not None
    )


@pytest.mark.fixtures
def test_fixture_footer_filters_hold_their_files_keys(
    fixture_table: FixtureTable, fixture_cache: FixtureCache
) -> None:
    if fixture_table.base_format != "PARQUET":
        pytest.skip(
            f"base file format {fixture_table.base_format}: refused as unsupported, no parquet footers"
        )
    root = fixture_cache.root(fixture_table)
    files = base_files(root)
    checked = 0
    for path in files:
        parquet = pq.ParquetFile(path)
        footer = parquet.metadata.metadata or {}
        bloom = read_bloom_filter(footer)
        if not fixture_table.populates_meta_fields:
            # Hudi writes neither a filter nor a key range into files without meta fields.
            assert bloom is None, path
            assert b"hoodie_min_record_key" not in footer, path
            continue
        assert bloom is not None, f"{path} has no bloom filter"
        keys = parquet.read(columns=["_hoodie_record_key"]).column(0)
        assert bloom.might_contain_many(keys).all(), f"{path}: a record key tests negative"
        if len(keys):
            lo, hi = footer[b"hoodie_min_record_key"].decode(), footer[b"hoodie_max_record_key"].decode()
            assert (lo, hi) == (min(keys.to_pylist()), max(keys.to_pylist())), path
        assert bloom.serialize() == footer.get(FOOTER_KEY, footer.get(OLD_FOOTER_KEY, b"")).decode()
        checked += 1
    assert checked == (len(files) if fixture_table.populates_meta_fields else 0)
