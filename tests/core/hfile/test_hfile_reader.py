"""The HFile v3 reader against the HFiles of ``../shared/fixtures/vectors/hfile`` (HBase 1.2.3 / 2.4.9 /
2.4.13 and Hudi's own writer), plus damaged copies of them."""

from __future__ import annotations

import itertools
import re
import struct
from pathlib import Path

import pytest

from hoodie.errors import CorruptHFile, HoodieError, UnsupportedHFile
from hoodie.hfile import HFileReader
from hoodie.hfile.trailer import TRAILER_SIZE
from hoodie.storage import Storage
from support.shared import fixtures_dir, missing_message

HFILE_DIR = fixtures_dir() / "vectors" / "hfile"
FILES = sorted(p.name for p in HFILE_DIR.glob("*.hfile")) if HFILE_DIR.is_dir() else []
MISSING = missing_message(HFILE_DIR)
requires_vectors = pytest.mark.skipif(not FILES, reason=MISSING)
all_files = pytest.mark.parametrize(
    "name", FILES or [pytest.param("-", marks=pytest.mark.skip(reason=MISSING))]
)


def expected_entries(name: str) -> int | None:
    """The entry count a file's name gives (``..._<codec>_<entries>[_...]``), ``0`` for ``no_entry``."""
    if "no_entry" in name:
        return 0
    match = re.search(r"_(?:GZ|NONE)_(\d+)(?:_(\d+))?", name)
    if not match:
        return None
    if match.group(2) and "non_unique" in name:  # 200 keys, each with 20 more values
        return int(match.group(1)) * (int(match.group(2)) + 1)
    return int(match.group(1))


def read_everything(data: bytes) -> None:
    reader = HFileReader(data)
    list(reader)
    for meta in reader.meta_index:
        reader.meta_block(meta)


def load(name: str) -> bytes:
    return (HFILE_DIR / name).read_bytes()


@all_files
def test_reads_every_entry_in_order(name: str) -> None:
    reader = HFileReader(load(name), name=name)
    entries = list(reader)
    assert len(entries) == reader.num_entries
    expected = expected_entries(name)
    if expected is not None:
        assert reader.num_entries == expected
    keys = [k for k, _ in entries]
    if "non_unique" in name:
        assert all(a <= b for a, b in itertools.pairwise(keys))
        assert len(set(keys)) < len(keys)
    else:
        assert all(a < b for a, b in itertools.pairwise(keys))
    if keys:
        assert reader.first_key == keys[0]
        assert reader.last_key == keys[-1]
    else:
        assert reader.first_key is None
        assert reader.last_key is None
    assert list(reader.keys()) == keys


@all_files
def test_file_info(name: str) -> None:
    reader = HFileReader(load(name), name=name)
    info = reader.file_info
    assert all(isinstance(k, bytes) and isinstance(v, bytes) for k, v in info.items())
    assert b"hfile.AVG_KEY_LEN" in info
    assert b"hfile.AVG_VALUE_LEN" in info
    assert struct.unpack(">i", info[b"KEY_VALUE_VERSION"])[0] in (0, 1)
    if "hudi_0_" in name and ("simple" in name or "complex" in name):
        assert info[b"minRecordKey"] == b"key00"
        assert info[b"maxRecordKey"] == b"key49"
        assert b"schema" in info
        assert reader.meta_block(b"bloomFilter")


@all_files
def test_get_finds_every_key_and_misses_absent_ones(name: str) -> None:
    reader = HFileReader(load(name), name=name)
    entries = list(reader)
    sample = entries if len(entries) <= 500 else entries[:: len(entries) // 300] + entries[-3:]
    firsts: dict[bytes, bytes] = {}
    for key, value in entries:
        firsts.setdefault(key, value)
    for key, _ in sample:
        assert reader.get(key) == firsts[key], key
    for key, _ in sample[:50]:
        assert reader.get(key + b"\x00") is None
        assert reader.get(key[:-1]) is None or key[:-1] in firsts
    assert reader.get(b"") is None
    assert reader.get(b"\xff" * 8) is None


@all_files
def test_seek_prefix(name: str) -> None:
    reader = HFileReader(load(name), name=name)
    entries = list(reader)
    prefixes = {b"", b"hudi-key-0000001", b"hudi-key-", b"key1", b"part=2020/03/1", b"row", b"zzz", b"\x00"}
    prefixes.update(k[: len(k) // 2] for k, _ in entries[:: max(1, len(entries) // 5)])
    for prefix in prefixes:
        assert list(reader.seek_prefix(prefix)) == [(k, v) for k, v in entries if k.startswith(prefix)]


@requires_vectors
def test_hudi_generated_values() -> None:
    """Hudi's test files: ``hudi-key-<9 digits>[...]`` keys with ``hudi-value-<same digits>`` values."""
    for name in FILES:
        if not name.startswith("hudi_1_0") or "no_entry" in name:
            continue
        entries = list(HFileReader(load(name), name=name))
        for i, (key, value) in enumerate(entries[:: max(1, len(entries) // 100)]):
            digits = re.search(rb"-(\d{9})", key)
            assert key.startswith(b"hudi-key-"), key
            assert digits, key
            assert value.startswith(b"hudi-value-" + digits.group(1)), (i, key, value)
        if "non_unique" not in name:
            assert [int(re.findall(rb"\d{9}", k)[0]) for k, _ in entries] == list(range(len(entries)))


@requires_vectors
def test_cells_parse_keyvalue_parts() -> None:
    reader = HFileReader(load("hbase-generated.hfile"))
    cells = list(reader.cells())
    assert [c.row for c in cells] == [b"row1", b"row2", b"row3", b"row4", b"row5"]
    assert all(c.type == 4 for c in cells)  # Put
    assert [c.value for c in cells] == [b"value1", b"value2", b"value3", b"value4", b"value5"]


@requires_vectors
def test_open_from_storage(tmp_path: Path) -> None:
    name = "hudi_1_0_hbase_2_4_13_1KB_GZ_10000_large_keys_deep_index.hfile"
    (tmp_path / "f.hfile").write_bytes(load(name))
    with HFileReader.open(Storage.for_uri(str(tmp_path)), "f.hfile") as reader:
        assert reader.trailer.num_data_index_levels == 3
        keys = list(reader.keys())
        assert len(keys) == 10_000
        assert reader.get(keys[7777]) == b"hudi-value-000007777"
        assert reader.get(keys[12]) == b"hudi-value-000000012"
    (tmp_path / "short.hfile").write_bytes(load(name)[:5000])
    with pytest.raises(CorruptHFile):
        HFileReader.open(Storage.for_uri(str(tmp_path)), "short.hfile")


@requires_vectors
@pytest.mark.parametrize(
    "name", ["hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile", "hudi_1_0_hbase_2_4_9_64KB_NONE_5000.hfile"]
)
def test_truncated_files_raise(name: str) -> None:
    data = load(name)
    for size in (0, 3, 100, TRAILER_SIZE - 1, len(data) // 2, len(data) - 1, len(data) - TRAILER_SIZE):
        with pytest.raises(CorruptHFile):
            list(HFileReader(data[:size]))


@requires_vectors
@pytest.mark.parametrize(
    "name",
    [
        "hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile",
        "hudi_1_0_hbase_2_4_9_64KB_NONE_5000.hfile",
        pytest.param(
            "hudi_1_0_hbase_2_4_13_1KB_GZ_50000_large_keys_deep_index.hfile", marks=pytest.mark.slow
        ),
    ],
)
def test_flipped_byte_in_a_checksummed_block_raises(name: str) -> None:
    data = load(name)
    body_end = len(data) - TRAILER_SIZE
    for position in range(37, body_end, max(1, body_end // 40)):
        damaged = bytearray(data)
        damaged[position] ^= 0x5A
        with pytest.raises(HoodieError):
            read_everything(bytes(damaged))  # every block is checksummed: a flip anywhere must be caught


@requires_vectors
def test_other_major_version_is_refused() -> None:
    data = bytearray(load("hbase-generated.hfile"))
    data[-4:] = struct.pack(">i", 2)
    with pytest.raises(UnsupportedHFile, match="major version 2"):
        HFileReader(bytes(data))
    data[-4:] = struct.pack(">i", 0x12345)
    with pytest.raises(CorruptHFile, match="no HFile version"):
        HFileReader(bytes(data))


def test_not_an_hfile() -> None:
    with pytest.raises(CorruptHFile):
        HFileReader(b"PAR1" + bytes(5000) + b"PAR1")
