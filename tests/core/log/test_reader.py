from __future__ import annotations

import json
import logging
import struct
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from hoodie.errors import CorruptLogBlock, UnsupportedTable
from hoodie.log.block import BlockType, LogBlock, iter_blocks
from hoodie.log.log_file import LogFile
from hoodie.log.reader import CorruptBlock, LogBatch, LogScan, scan_log_files
from hoodie.storage import Storage
from hoodie.timeline.instant import Instant

LOG = ".f-0_20240101000000000.log.1_0-1-1"
LOG2 = ".f-0_20240101000000000.log.2_0-1-1"


def everything(_: str) -> bool:
    return True


def write_logs(root: Path, files: Mapping[str, bytes]) -> Storage:
    for name, data in files.items():
        (root / name).write_bytes(data)
    return Storage.for_uri(str(root))


def keys(batch: LogBatch) -> list[Any]:
    return batch.table.column("_hoodie_record_key").to_pylist()


def summary(scan: LogScan) -> list[tuple[str, str, list[Any]]]:
    return [(b.instant_time, b.kind, keys(b)) for b in scan.batches]


@pytest.fixture
def rows(log_writer: Any, simple_schema: dict[str, Any]) -> Callable[..., bytes]:
    """A data block of instant ``t`` with one row per key (extra header entries by key number)."""

    def make(t: str, *row_keys: str, header: Mapping[int, str] | None = None) -> bytes:
        records = [{"_hoodie_record_key": k, "value": i} for i, k in enumerate(row_keys)]
        return bytes(log_writer.data_block(t, simple_schema, records, header))

    return make


@pytest.fixture
def deletes(log_writer: Any) -> Callable[..., bytes]:
    def make(t: str, *row_keys: str) -> bytes:
        from hoodie.log.block import DELETE_RECORD_LIST_SCHEMAS

        records = [{"recordKey": k, "partitionPath": "", "orderingVal": None} for k in row_keys]
        content = log_writer.delete_content(DELETE_RECORD_LIST_SCHEMAS["hudi-1.1"], records)
        return bytes(log_writer.block(BlockType.DELETE, {0: t}, content))

    return make


# -- the rules -----------------------------------------------------------------------------------------------


def test_batches_come_in_file_then_block_order_with_their_origin(
    tmp_path: Path, rows: Callable[..., bytes], deletes: Callable[..., bytes]
) -> None:
    first = rows("1", "a", "b")
    storage = write_logs(tmp_path, {LOG: first + deletes("1", "a"), LOG2: rows("2", "c")})
    scan = scan_log_files(storage, [LOG, LOG2], include_instant=everything)
    assert summary(scan) == [("1", "data", ["a", "b"]), ("1", "delete", ["a"]), ("2", "data", ["c"])]
    assert [(b.log_file, b.block_offset) for b in scan.batches] == [(LOG, 0), (LOG, len(first)), (LOG2, 0)]
    assert scan.corrupt_blocks == []
    assert [b.instant_time for b in scan.data_batches] == ["1", "2"]
    assert [b.instant_time for b in scan.delete_batches] == ["1"]


def test_include_instant_decides_which_data_and_delete_blocks_count(
    tmp_path: Path, rows: Callable[..., bytes], deletes: Callable[..., bytes]
) -> None:
    storage = write_logs(
        tmp_path, {LOG: rows("1", "a") + rows("2", "b") + deletes("3", "a") + deletes("4", "b")}
    )
    scan = scan_log_files(storage, [LOG], include_instant=lambda t: t in {"1", "3"})
    assert summary(scan) == [("1", "data", ["a"]), ("3", "delete", ["a"])]


def test_rollback_voids_the_earlier_blocks_of_its_target_only(
    tmp_path: Path, rows: Callable[..., bytes], deletes: Callable[..., bytes], log_writer: Any
) -> None:
    data = (
        rows("1", "a")
        + rows("2", "b")
        + deletes("1", "b")
        + rows("1", "c")  # a retried task wrote a second block of instant 1
        + log_writer.rollback_block("9", "1")
        + rows("1", "d")  # written after the rollback: not voided by it
        + rows("3", "e")
    )
    storage = write_logs(tmp_path, {LOG: data})
    scan = scan_log_files(storage, [LOG], include_instant=everything)
    assert summary(scan) == [("2", "data", ["b"]), ("1", "data", ["d"]), ("3", "data", ["e"])]


def test_rollback_applies_across_files_whatever_its_own_instant(
    tmp_path: Path, rows: Callable[..., bytes], log_writer: Any
) -> None:
    storage = write_logs(
        tmp_path, {LOG: rows("1", "a") + rows("2", "b"), LOG2: log_writer.rollback_block("9", "2")}
    )
    scan = scan_log_files(storage, [LOG, LOG2], include_instant=lambda t: t in {"1", "2"})
    assert summary(scan) == [("1", "data", ["a"])]


def test_rollback_targeting_nothing_changes_nothing(
    tmp_path: Path, rows: Callable[..., bytes], log_writer: Any
) -> None:
    storage = write_logs(tmp_path, {LOG: log_writer.rollback_block("9", "1") + rows("1", "a")})
    assert summary(scan_log_files(storage, [LOG], include_instant=everything)) == [("1", "data", ["a"])]


COMPACTED = 4  # HeaderKey.COMPACTED_BLOCK_TIMES


def test_log_compaction_replaces_its_instants_at_the_place_of_the_last(
    tmp_path: Path, rows: Callable[..., bytes]
) -> None:
    data = (
        rows("1", "a")
        + rows("2", "b")
        + rows("3", "b")  # written after the log compaction was planned: must still win over it
        + rows("4", "a", "b", header={COMPACTED: "1,2"})
    )
    storage = write_logs(tmp_path, {LOG: data})
    scan = scan_log_files(storage, [LOG], include_instant=everything)
    assert summary(scan) == [("4", "data", ["a", "b"]), ("3", "data", ["b"])]


def test_nested_log_compactions(tmp_path: Path, rows: Callable[..., bytes]) -> None:
    data = (
        rows("1", "a")
        + rows("2", "b")
        + rows("3", "a", "b", header={COMPACTED: "1,2"})
        + rows("4", "c")
        + rows("5", "a", "b", "c", header={COMPACTED: "3,4"})
        + rows("6", "d")
    )
    storage = write_logs(tmp_path, {LOG: data})
    scan = scan_log_files(storage, [LOG], include_instant=everything)
    assert summary(scan) == [("5", "data", ["a", "b", "c"]), ("6", "data", ["d"])]


def test_a_rolled_back_or_uncommitted_log_compaction_replaces_nothing(
    tmp_path: Path, rows: Callable[..., bytes], log_writer: Any
) -> None:
    compaction = rows("1", "a") + rows("2", "b") + rows("3", "a", "b", header={COMPACTED: "1,2"})
    storage = write_logs(tmp_path, {LOG: compaction + log_writer.rollback_block("9", "3")})
    expected = [("1", "data", ["a"]), ("2", "data", ["b"])]
    assert summary(scan_log_files(storage, [LOG], include_instant=everything)) == expected
    storage = write_logs(tmp_path, {LOG: compaction})
    assert summary(scan_log_files(storage, [LOG], include_instant=lambda t: t != "3")) == expected


def test_cdc_blocks_are_skipped_and_hfile_blocks_refused(
    tmp_path: Path, rows: Callable[..., bytes], log_writer: Any, simple_schema: dict[str, Any]
) -> None:
    content = log_writer.avro_content(simple_schema, [{"_hoodie_record_key": "x", "value": 1}])
    cdc = log_writer.block(BlockType.CDC_DATA, {0: "1", 2: json.dumps(simple_schema)}, content)
    storage = write_logs(tmp_path, {LOG: rows("1", "a") + cdc})
    assert summary(scan_log_files(storage, [LOG], include_instant=everything)) == [("1", "data", ["a"])]
    hfile = log_writer.block(BlockType.HFILE_DATA, {0: "1"}, b"HFILE-ish")
    storage = write_logs(tmp_path, {LOG: rows("1", "a") + hfile})
    with pytest.raises(UnsupportedTable, match=rf"{LOG}: HFILE_DATA block at offset \d+: .*metadata table"):
        scan_log_files(storage, [LOG], include_instant=everything)


def test_corrupt_blocks_are_skipped_recorded_and_logged(
    tmp_path: Path, rows: Callable[..., bytes], caplog: pytest.LogCaptureFixture
) -> None:
    first, torn = rows("1", "a"), rows("2", "b")
    storage = write_logs(tmp_path, {LOG: first + b"\x00garbage" + rows("3", "c") + torn[:-5]})
    with caplog.at_level(logging.WARNING, logger="hoodie.log.reader"):
        scan = scan_log_files(storage, [LOG], include_instant=everything)
    assert summary(scan) == [("1", "data", ["a"]), ("3", "data", ["c"])]
    second = len(first) + 8 + len(rows("3", "c"))
    assert [(c.log_file, c.offset, c.length) for c in scan.corrupt_blocks] == [
        (LOG, len(first), 8),
        (LOG, second, len(torn) - 5),
    ]
    assert all(isinstance(c, CorruptBlock) and c.reason for c in scan.corrupt_blocks)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert f"{LOG} at offset {len(first)}" in warnings[0]


def test_content_that_does_not_decode_raises_naming_file_and_offset(
    tmp_path: Path, rows: Callable[..., bytes], log_writer: Any, simple_schema: dict[str, Any]
) -> None:
    good = rows("1", "a")
    bad = log_writer.block(
        BlockType.AVRO_DATA, {0: "2", 2: json.dumps(simple_schema)}, b"\x00\x00\x00\x03junk"
    )
    storage = write_logs(tmp_path, {LOG: good + bad})
    expected = rf"^{LOG} \(instant 2\): AVRO_DATA block at offset {len(good)}: "
    with pytest.raises(CorruptLogBlock, match=expected):
        scan_log_files(storage, [LOG], include_instant=everything)


def test_only_surviving_blocks_are_decoded(
    tmp_path: Path, rows: Callable[..., bytes], log_writer: Any, simple_schema: dict[str, Any]
) -> None:
    """Undecodable blocks that a rollback voids, or of rejected instants, never raise: decoding comes last."""
    header = {0: "2", 2: json.dumps(simple_schema)}
    junk_2 = log_writer.block(BlockType.AVRO_DATA, header, b"junk")
    junk_3 = log_writer.block(BlockType.AVRO_DATA, {**header, 0: "3"}, b"junk")
    data = rows("1", "a") + junk_2 + log_writer.rollback_block("9", "2") + junk_3
    storage = write_logs(tmp_path, {LOG: data})
    scan = scan_log_files(storage, [LOG], include_instant=lambda t: t != "3")
    assert summary(scan) == [("1", "data", ["a"])]


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({1: "1", 3: "0"}, "no INSTANT_TIME header"),
        ({0: "9", 1: "1", 3: "1"}, "unknown command block type '1'"),
        ({0: "9", 3: "0"}, "rollback command without TARGET_INSTANT_TIME"),
    ],
)
def test_malformed_blocks_with_good_framing_raise(
    tmp_path: Path, log_writer: Any, header: dict[int, str], message: str
) -> None:
    storage = write_logs(tmp_path, {LOG: log_writer.block(BlockType.COMMAND, header)})
    with pytest.raises(CorruptLogBlock, match=rf"{LOG}: COMMAND block at offset 0: ?.*{message}"):
        scan_log_files(storage, [LOG], include_instant=everything)


# -- real files ----------------------------------------------------------------------------------------------

VECTOR_INSTANTS = {"20250316025828811", "20250618054714114", "20250113230424191"}


def test_the_vectors_scan_to_their_rows(tmp_path: Path, vectors: Any) -> None:
    files = {
        p.name: p.read_bytes() for p in (vectors.avro, vectors.delete, vectors.parquet, vectors.rollback)
    }
    storage = write_logs(tmp_path, files)
    scan = scan_log_files(storage, list(files), include_instant=VECTOR_INSTANTS.__contains__)
    assert [(b.log_file, b.kind, b.table.num_rows) for b in scan.batches] == [
        (vectors.avro.name, "data", 1),
        (vectors.delete.name, "delete", 3),
        (vectors.parquet.name, "data", 1),
    ]
    assert keys(scan.batches[1])[2] == keys(scan.batches[0])[0] == keys(scan.batches[2])[0]


def completed_writes(base: Path) -> set[str]:
    """Completed write instants on a table's timeline (layout 1 or 2), read from the file names."""
    timeline = base / ".hoodie" / "timeline"
    folder = timeline if timeline.is_dir() else base / ".hoodie"
    instants = (Instant.try_parse(p.name) for p in folder.iterdir())
    return {
        i.time for i in instants if i is not None and i.is_completed and i.action in ("deltacommit", "commit")
    }


def file_slices(base: Path) -> dict[tuple[str, str], list[str]]:
    """Log files (relative paths, in log order) per (partition, file id) of a table's data."""
    groups: dict[tuple[str, str], list[LogFile]] = {}
    for path in base.rglob(".*.log.*"):
        rel = path.relative_to(base)
        parsed = LogFile.try_parse(path.name)
        if parsed is None or ".hoodie" in rel.parts:
            continue
        groups.setdefault((str(rel.parent), parsed.file_id), []).append(parsed)
    return {
        (part, fid): [str(Path(part) / f.file_name) for f in sorted(logs, key=lambda f: f.sort_key)]
        for (part, fid), logs in groups.items()
    }


@pytest.mark.fixtures
def test_the_rolled_back_deltacommit_of_a_real_table_is_voided(unzip_table: Callable[[str], Path]) -> None:
    base = unzip_table("hudi-rs/sample_table_mor_parquet_v6_nonpartitioned_rollback.zip")
    [(_, logs)] = file_slices(base).items()
    assert [Path(p).name.split(".log.")[1] for p in logs] == ["1_0-33-43", "2_1-0-1", "3_0-13-9"]
    storage = Storage.for_uri(str(base))
    committed = completed_writes(base)
    assert committed == {"20250126040823628", "20250126060846931"}
    for include in (committed.__contains__, everything):  # the command block voids it either way
        scan = scan_log_files(storage, logs, include_instant=include)
        assert [(b.instant_time, b.kind, Path(b.log_file).name) for b in scan.batches] == [
            ("20250126060846931", "data", Path(logs[2]).name)
        ]
        assert scan.batches[0].table.num_rows > 0
        assert scan.corrupt_blocks == []


@pytest.mark.fixtures
@pytest.mark.parametrize(
    "zip_name",
    [
        "apache-hudi/trips_logical_types_json_mor_read_v8.zip",
        "apache-hudi/trips_logical_types_json_mor_read_v6_parquet_log.zip",
        "hudi-rs/quickstart_trips_table_mor_avro_v6_trips_8i3d.zip",
        "hudi-rs/quickstart_trips_table_mor_avro_v8_trips_8i3u1d.zip",
    ],
)
def test_real_tables_scan_every_committed_block(unzip_table: Callable[[str], Path], zip_name: str) -> None:
    base = unzip_table(zip_name)
    storage = Storage.for_uri(str(base))
    committed = completed_writes(base)
    for logs in file_slices(base).values():
        scan = scan_log_files(storage, logs, include_instant=committed.__contains__)
        blocks = [b for p in logs for b in iter_blocks(storage.read(p))]
        expected = [
            b for b in blocks if b.block_type is not BlockType.COMMAND and b.instant_time in committed
        ]
        assert [(b.instant_time, b.block_offset) for b in scan.batches] == [
            (b.instant_time, b.offset) for b in expected
        ]
        assert all(b.table.num_rows > 0 for b in scan.batches)
        assert scan.corrupt_blocks == []


# -- damaged real files --------------------------------------------------------------------------------------


@pytest.fixture
def real_log(vectors: Any) -> bytes:
    """Four real blocks as one log file: AVRO_DATA, DELETE, PARQUET_DATA, rollback COMMAND."""
    return b"".join(p.read_bytes() for p in (vectors.avro, vectors.delete, vectors.parquet, vectors.rollback))


def _undetectable_spans(block: LogBlock, data: bytes) -> list[range]:
    """Byte ranges of a block where damage can leave everything checking out: header keys (an unknown key is
    legal, newer writers add keys, so a damaged one is dropped like theirs), header values and content."""
    spans, p = [], block.offset + 22
    (count,) = struct.unpack_from(">i", data, p)
    p += 4
    for _ in range(count):
        _, length = struct.unpack_from(">ii", data, p)
        spans += [range(p, p + 4), range(p + 8, p + 8 + length)]
        p += 8 + length
    spans.append(range(p + 8, p + 8 + len(block.content)))
    return spans


def _batches_by_offset(scan: LogScan) -> dict[int, LogBatch]:
    return {b.block_offset: b for b in scan.batches}


@pytest.mark.slow
def test_a_log_truncated_anywhere_keeps_exactly_the_intact_blocks(tmp_path: Path, real_log: bytes) -> None:
    """Torn writes: cut at every offset (inside the Parquet file every 7th; the block test cuts at all)."""
    storage = Storage.for_uri(str(tmp_path))
    originals = list(iter_blocks(real_log))
    write_logs(tmp_path, {LOG: real_log})
    full = _batches_by_offset(scan_log_files(storage, [LOG], include_instant=VECTOR_INSTANTS.__contains__))
    assert sorted(full) == [b.offset for b in originals[:3]]
    parquet = next(b for b in originals if b.block_type is BlockType.PARQUET_DATA)
    parquet_file = _undetectable_spans(parquet, real_log)[-1]
    for cut in (c for c in range(len(real_log) + 1) if c not in parquet_file or c % 7 == 0):
        (tmp_path / LOG).write_bytes(real_log[:cut])
        scan = scan_log_files(storage, [LOG], include_instant=VECTOR_INSTANTS.__contains__)
        intact = [b.offset for b in originals[:3] if b.end <= cut]
        got = _batches_by_offset(scan)
        assert sorted(got) == intact, cut
        for offset in intact:
            assert got[offset].table.equals(full[offset].table)
        torn = cut not in {0, *(b.end for b in originals)}
        assert len(scan.corrupt_blocks) == (1 if torn else 0), cut


@pytest.mark.slow
@pytest.mark.parametrize("mask", [0xFF, 0x01])
def test_a_flipped_byte_never_crashes_nor_leaks_rows_of_its_block(
    tmp_path: Path, real_log: bytes, mask: int
) -> None:
    """Every byte flipped in turn (inside the Parquet file every 7th; its framing is in the block test too).

    The scan either raises a CorruptLogBlock or UnsupportedTable naming the file and the damaged block's
    offset, or returns every other block's rows unchanged and nothing of the damaged block, except when the
    flip hit a header key or value or the content and still decoded: the format has no checksum, such damage
    cannot be seen (counted, not failed)."""
    storage = Storage.for_uri(str(tmp_path))
    originals = list(iter_blocks(real_log))
    write_logs(tmp_path, {LOG: real_log})
    full = _batches_by_offset(scan_log_files(storage, [LOG], include_instant=VECTOR_INSTANTS.__contains__))
    outcomes = {"raised": 0, "dropped": 0, "undetectable": 0}
    parquet = next(b for b in originals if b.block_type is BlockType.PARQUET_DATA)
    parquet_file = _undetectable_spans(parquet, real_log)[-1]
    positions = [p for p in range(len(real_log)) if p not in parquet_file or p % 7 == 0]
    for pos in positions:
        damaged = bytearray(real_log)
        damaged[pos] ^= mask
        (tmp_path / LOG).write_bytes(bytes(damaged))
        hit = next(b for b in originals if b.offset <= pos < b.end)
        try:
            scan = scan_log_files(storage, [LOG], include_instant=VECTOR_INSTANTS.__contains__)
        except (CorruptLogBlock, UnsupportedTable) as e:
            error = str(e)
        else:
            error = None
        if error is not None:
            assert error.startswith(f"{LOG}"), (pos, error)
            assert f"block at offset {hit.offset}:" in error, (pos, error)
            outcomes["raised"] += 1
            continue
        got = _batches_by_offset(scan)
        for offset, batch in full.items():
            if offset != hit.offset:
                assert got[offset].table.equals(batch.table), (pos, offset)
        if hit.offset not in got or hit.block_type is BlockType.COMMAND:
            outcomes["dropped"] += 1
            continue
        assert any(pos in span for span in _undetectable_spans(hit, real_log)), (
            pos,
            "damaged framing leaked rows",
        )
        outcomes["undetectable"] += 1
    assert outcomes["raised"] > 0
    assert outcomes["dropped"] > 0
