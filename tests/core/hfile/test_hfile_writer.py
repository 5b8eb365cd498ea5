"""The HFile v3 writer: round trips through our reader, the layout at byte level, and files written with a
fixture's settings against the fixture HBase wrote."""

from __future__ import annotations

import struct

import pytest

from hoodie.errors import InvalidWriteConfig
from hoodie.hfile import Compression, HFileReader, HFileWriter
from hoodie.hfile.block import (
    DATA_MAGIC,
    FILE_INFO_BLOCK_MAGIC,
    HEADER_SIZE,
    LEAF_INDEX_MAGIC,
    ROOT_INDEX_MAGIC,
    KeyType,
    read_vlong,
)
from hoodie.hfile.checksum import ChecksumType
from hoodie.hfile.trailer import TRAILER_MAGIC, TRAILER_SIZE
from hoodie.hfile.writer import LATEST_TIMESTAMP, vlong
from support.shared import fixtures_dir, missing_message

HFILE_DIR = fixtures_dir() / "vectors" / "hfile"
MISSING = missing_message(HFILE_DIR)


def cells(count: int, width: int = 0) -> list[tuple[bytes, bytes]]:
    pad = b"a" * width
    return [(b"hudi-key-%s%09d" % (pad, i), b"hudi-value-%09d" % i) for i in range(count)]


def write(entries: list[tuple[bytes, bytes]], **options: object) -> bytes:
    writer = HFileWriter(**options)  # type: ignore[arg-type]
    writer.extend(entries)
    return writer.finish()


@pytest.mark.parametrize("compression", [Compression.GZ, Compression.NONE])
@pytest.mark.parametrize("count", [0, 1, 2, 5000])
def test_round_trip(compression: Compression, count: int) -> None:
    entries = cells(count)
    reader = HFileReader(write(entries, compression=compression, block_size=4096))
    assert reader.num_entries == count
    assert list(reader) == entries
    assert reader.first_key == (entries[0][0] if entries else None)
    assert reader.last_key == (entries[-1][0] if entries else None)
    for key, value in entries[::97]:
        assert reader.get(key) == value
        assert reader.get(key + b"!") is None
    assert [k for k, _ in reader.seek_prefix(b"hudi-key-00000001")] == [
        k for k, _ in entries if k.startswith(b"hudi-key-00000001")
    ]


def test_cells_are_written_as_hudi_writes_them() -> None:
    reader = HFileReader(write([(b"k1", b"v1"), (b"k1", b"v1b"), (b"k2", b"")]))
    cells_read = list(reader.cells())
    assert [(c.row, c.value) for c in cells_read] == [(b"k1", b"v1"), (b"k1", b"v1b"), (b"k2", b"")]
    assert {(c.family, c.qualifier, c.timestamp, c.type, c.tags, c.mvcc) for c in cells_read} == {
        (b"", b"", LATEST_TIMESTAMP, KeyType.PUT, b"", 0)
    }
    assert reader.get(b"k1") == b"v1"  # non-unique keys keep their order; get answers the first


@pytest.mark.parametrize(("tags", "mvcc"), [(True, True), (True, False), (False, False)])
def test_tags_and_memstore_timestamps_are_optional(tags: bool, mvcc: bool) -> None:
    entries = cells(3000)
    data = write(entries, block_size=4096, compression=Compression.NONE, include_tags=tags, include_mvcc=mvcc)
    reader = HFileReader(data)
    assert (reader.includes_tags, reader.includes_mvcc) == (tags, mvcc)
    assert (b"hfile.MAX_TAGS_LEN" in reader.file_info) == tags
    assert list(reader) == entries
    assert reader.get(entries[1234][0]) == entries[1234][1]
    assert {(c.tags, c.mvcc) for c in reader.cells()} == {(b"", 0)}


@pytest.mark.parametrize("compression", [Compression.GZ, Compression.NONE])
def test_large_keys_and_small_index_blocks_make_a_deep_index(compression: Compression) -> None:
    entries = cells(8000, width=300)
    data = write(entries, compression=compression, block_size=1024, max_index_size=1024)
    reader = HFileReader(data)
    assert reader.trailer.num_data_index_levels >= 3
    assert list(reader) == entries
    for key, value in entries[::53]:
        assert reader.get(key) == value
    assert reader.get(b"hudi-key-") is None
    assert reader.get(b"zzz") is None


def test_single_level_index_while_the_root_is_small() -> None:
    reader = HFileReader(write(cells(20_000), block_size=1024))
    assert reader.trailer.num_data_index_levels == 1
    assert reader.trailer.data_index_count > 100


def test_file_info_and_meta_blocks() -> None:
    writer = HFileWriter(file_info={b"minRecordKey": b"a", b"maxRecordKey": b"b"}, create_time_ms=1234)
    writer.add_meta_block(b"bloomFilter", b"bloom-bytes")
    writer.extend([(b"a", b"1"), (b"b", b"2")])
    reader = HFileReader(writer.finish())
    info = reader.file_info
    assert info[b"minRecordKey"] == b"a"
    assert info[b"maxRecordKey"] == b"b"
    assert info[b"hfile.LASTKEY"] == b"\x00\x01b\x00" + struct.pack(">q", LATEST_TIMESTAMP) + b"\x04"
    assert struct.unpack(">i", info[b"hfile.AVG_KEY_LEN"]) == (13,)  # 2 + 1 + 1 + 8 + 1
    assert struct.unpack(">i", info[b"hfile.AVG_VALUE_LEN"]) == (1,)
    assert struct.unpack(">i", info[b"KEY_VALUE_VERSION"]) == (1,)
    assert struct.unpack(">q", info[b"MAX_MEMSTORE_TS_KEY"]) == (0,)
    assert struct.unpack(">q", info[b"hfile.CREATE_TIME_TS"]) == (1234,)
    assert reader.meta_block(b"bloomFilter") == b"bloom-bytes"
    assert reader.meta_block(b"other") is None


def test_trailer_offsets_point_at_their_blocks() -> None:
    data = write(cells(3000, width=100), block_size=1024, max_index_size=2048)
    size = len(data)
    assert data[size - TRAILER_SIZE : size - TRAILER_SIZE + 8] == TRAILER_MAGIC
    assert data[-4:] == struct.pack(">i", 3 << 24 | 3)
    trailer = HFileReader(data).trailer
    assert data[trailer.first_data_block_offset :][:8] == DATA_MAGIC
    assert data[trailer.last_data_block_offset :][:8] == DATA_MAGIC
    assert data[trailer.load_on_open_offset :][:8] == ROOT_INDEX_MAGIC
    assert data[trailer.file_info_offset :][:8] == FILE_INFO_BLOCK_MAGIC
    assert LEAF_INDEX_MAGIC in data[: trailer.load_on_open_offset]
    # Blocks tile the body: each header's on-disk size leads to the next block, ending at the trailer.
    offset, magics = 0, []
    while offset < size - TRAILER_SIZE:
        magic, on_disk, _, _, checksum, per_checksum, with_header = struct.unpack_from(
            ">8siiqBii", data, offset
        )
        assert (checksum, per_checksum) == (ChecksumType.CRC32C, 16384)
        assert on_disk == with_header - HEADER_SIZE + 4 * -(-with_header // per_checksum)
        magics.append(magic)
        offset += HEADER_SIZE + on_disk
    assert offset == size - TRAILER_SIZE
    assert magics[0] == DATA_MAGIC
    assert magics.count(DATA_MAGIC) > 100
    assert magics[-3:] == [ROOT_INDEX_MAGIC, ROOT_INDEX_MAGIC, FILE_INFO_BLOCK_MAGIC]


def test_keys_out_of_order_and_bad_settings_are_refused() -> None:
    writer = HFileWriter()
    writer.append(b"b", b"")
    with pytest.raises(InvalidWriteConfig, match="out of order"):
        writer.append(b"a", b"")
    with pytest.raises(InvalidWriteConfig):
        HFileWriter(block_size=0)
    with pytest.raises(InvalidWriteConfig, match="SNAPPY"):
        HFileWriter(compression=Compression.SNAPPY)
    writer.finish()
    with pytest.raises(InvalidWriteConfig, match="finished"):
        writer.append(b"c", b"")


@pytest.mark.parametrize("value", [0, 1, -1, 127, -112, -113, 128, 255, 256, 1 << 40, -(1 << 40)])
def test_vlong_round_trip(value: int) -> None:
    encoded = vlong(value)
    assert read_vlong(encoded, 0) == (value, len(encoded))


@pytest.mark.skipif(not HFILE_DIR.is_dir(), reason=MISSING)
@pytest.mark.parametrize(
    ("name", "compression", "block_size"),
    [
        ("hudi_1_0_hbase_2_4_9_16KB_GZ_20000.hfile", Compression.GZ, 16 * 1024),
        ("hudi_1_0_hbase_2_4_9_64KB_NONE_5000.hfile", Compression.NONE, 64 * 1024),
        ("hudi_1_0_hbase_2_4_9_512KB_GZ_20000.hfile", Compression.GZ, 512 * 1024),
        ("hudi_1_0_hbase_2_4_9_16KB_NONE_5000.hfile", Compression.NONE, 16 * 1024),
    ],
)
def test_same_settings_reproduce_the_data_section_hbase_wrote(
    name: str, compression: Compression, block_size: int
) -> None:
    original = (HFILE_DIR / name).read_bytes()
    fixture = HFileReader(original)
    ours_bytes = write(list(fixture), compression=compression, block_size=block_size)
    ours = HFileReader(ours_bytes)
    assert ours.trailer.entry_count == fixture.trailer.entry_count
    assert ours.trailer.data_index_count == fixture.trailer.data_index_count
    assert ours.trailer.last_data_block_offset == fixture.trailer.last_data_block_offset
    assert [e.offset for e in ours._data_root] == [e.offset for e in fixture._data_root]
    for key in (b"hfile.AVG_KEY_LEN", b"hfile.AVG_VALUE_LEN", b"hfile.LASTKEY", b"KEY_VALUE_VERSION"):
        assert ours.file_info.get(key) == fixture.file_info.get(key)
    # Data blocks (headers, gzip streams, CRC32C checksums) come out byte for byte as HBase 2.4.9 wrote them.
    end = (
        fixture.trailer.last_data_block_offset
        + fixture.read_block(fixture.trailer.last_data_block_offset).on_disk_size
    )
    assert ours_bytes[:end] == original[:end]
