"""Damaged committed log data stops a rewrite (:mod:`hoodie.log.integrity`); a torn tail no completed commit
wrote is still skipped, and readers keep skipping what they cannot frame."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from hoodie import Table
from hoodie.compaction.execute import compact_in_process
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import CorruptLogBlock
from hoodie.lock import FileSystemLock
from hoodie.log.block import HeaderKey, iter_blocks
from hoodie.log.integrity import LogIntegrity
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.timeline.instant import State
from hoodie.timeline.timeline import Timeline


def _table(tmp_path: Path, version: int, log_format: str = "avro") -> tuple[Path, Storage, FileSystemLock]:
    root = tmp_path / "t"
    generate_table(
        str(root),
        GenerateSpec(
            table_version=version,
            rows=400,
            commits=3,
            partitions=2,
            seed=7,
            log_format=log_format,  # type: ignore[arg-type]
        ),
    )
    storage = Storage.for_uri(str(root))
    return root, storage, FileSystemLock(storage)


def _log_files(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob(".*.log.*") if ".hoodie" not in p.relative_to(root).parts and p.is_file()
    )


def _flip(path: Path, offset: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= mask
    path.write_bytes(bytes(data))


def _rows(table: Table) -> pa.Table:
    result = table.read()
    return result.sort_by([("_hoodie_record_key", "ascending")]).drop_columns(["_hoodie_file_name"])


@pytest.mark.parametrize("version", [6, 8, 9])
@pytest.mark.parametrize("log_format", ["avro", "parquet"])
def test_a_damaged_block_length_inside_a_completed_commit_stops_compaction(
    tmp_path: Path, version: int, log_format: str
) -> None:
    """The issue's case: one bit of the first log file's block length (byte 12) flipped. Compaction used to
    skip the block as a torn write and commit without its updates; now it refuses, naming the file, the
    offset and the instant that wrote the bytes, and nothing is committed."""
    root, storage, lock = _table(tmp_path, version, log_format)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    log = _log_files(root)[0]
    rel = str(log.relative_to(root))
    _flip(log, 12)
    with pytest.raises(CorruptLogBlock) as raised:
        compact_in_process(storage, lock, scheduled.instant.time)
    message = str(raised.value)
    assert message.startswith(rel), message
    assert "offset 0" in message
    assert re.search(r"completed instant \d{17}", message), message
    timeline = Table.open(str(root)).timeline
    assert timeline.get(scheduled.instant.time).state is not State.COMPLETED  # type: ignore[union-attr]


@pytest.mark.parametrize("version", [6, 8])
def test_a_torn_tail_no_commit_wrote_is_still_skipped(tmp_path: Path, version: int) -> None:
    """Bytes after every committed range (a writer that died mid-append) are a torn tail: compaction skips
    them as Hudi does and keeps every committed record."""
    root, storage, lock = _table(tmp_path, version)
    before = _rows(Table.open(str(root)))
    log = _log_files(root)[-1]
    first = next(iter_blocks(log.read_bytes()))
    # A torn copy of the file's first block appended: the magic and half of it, as a crash leaves it.
    with log.open("ab") as f:
        f.write(log.read_bytes()[first.offset : first.offset + first.length // 2])
    assert _rows(Table.open(str(root))).equals(before)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    result = compact_in_process(storage, lock, scheduled.instant.time)
    assert sum(s.total_corrupt_log_block or 0 for s in result.metadata.write_stats) == 1
    assert _rows(Table.open(str(root))).equals(before)


@pytest.mark.parametrize("version", [6, 8])
def test_a_damaged_instant_header_stops_compaction(tmp_path: Path, version: int) -> None:
    """A flipped digit of a block's INSTANT_TIME keeps the framing intact but makes the block look like an
    uncommitted instant's, which a scan ignores: inside a committed range that is damage, and refused."""
    root, storage, lock = _table(tmp_path, version)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    log = _log_files(root)[0]
    data = log.read_bytes()
    block = next(iter_blocks(data))
    instant = block.header[HeaderKey.INSTANT_TIME].encode()
    at = data.index(instant, block.offset)
    _flip(log, at + len(instant) - 1, 0x02)  # the last digit, still a digit
    with pytest.raises(CorruptLogBlock, match="its header is damaged"):
        compact_in_process(storage, lock, scheduled.instant.time)


def test_a_damaged_record_key_stops_compaction(tmp_path: Path) -> None:
    """A record whose stored key no longer matches its key field decodes fine; the meta fields tell."""
    root, storage, lock = _table(tmp_path, 8)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    table = Table.open(str(root))
    # A key of the first log's first block, found in its bytes: flip one of its characters.
    log = _log_files(root)[0]
    rel = str(log.relative_to(root))
    scan_rows = table.merge_file_slice(
        next(s for s in table.file_slices() if rel in s.log_file_paths), strict=True
    )
    assert scan_rows.table is not None
    data = log.read_bytes()
    key = next(k for k in scan_rows.log_keys.to_pylist() if data.find(k.encode()) >= 0)
    at = data.index(key.encode())
    _flip(log, at + 3, 0x01)
    with pytest.raises(CorruptLogBlock, match="_hoodie_record_key") as raised:
        compact_in_process(storage, lock, scheduled.instant.time)
    assert str(raised.value).startswith(rel)


def test_readers_skip_damage_and_say_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Reads keep Hudi's behaviour: the damaged block is skipped with a warning naming file and offset."""
    root, _, _ = _table(tmp_path, 8)
    log = _log_files(root)[0]
    _flip(log, 12)
    with caplog.at_level("WARNING"):
        Table.open(str(root)).read()
    assert any("corrupt log block" in r.getMessage() and log.name in r.getMessage() for r in caplog.records)


def test_damage_before_the_active_ranges_of_an_archived_slice_is_refused(tmp_path: Path) -> None:
    """v6: a log file whose slice began before the active timeline may hold blocks of archived instants;
    damage ahead of every active range cannot be told from a torn tail, so it is refused, while damage after
    an active range is a torn tail either way."""
    root, _, _ = _table(tmp_path, 6)
    table = Table.open(str(root))
    writes = table.timeline.completed_writes()
    second, third = writes[1].time, writes[2].time
    by_writer = {
        str(p.relative_to(root)): table.log_integrity.ranges_of(str(p.relative_to(root)))
        for p in _log_files(root)
    }
    of_second = next(path for path, ranges in by_writer.items() if ranges[0].instant_time == second)
    of_third = next(path for path, ranges in by_writer.items() if ranges[0].instant_time == third)
    # As if the first two commits had been archived: the active timeline starts at the third.
    kept = tuple(i for i in table.timeline.instants if i.time >= third)
    files = {t: f for t, f in table.timeline.files.items() if t >= third}
    archived = LogIntegrity(
        table.config,
        Timeline(kept, table.timeline.layout_version, table.timeline.folder, files),
        table.commit_metadata,
    )
    assert archived.ranges_of(of_second) == []
    with pytest.raises(CorruptLogBlock, match="archived"):
        archived.check_corrupt(of_second, 0, 10, "test")
    with pytest.raises(CorruptLogBlock, match=f"completed instant {third}"):
        archived.check_corrupt(of_third, 0, 10, "test")
    end = archived.ranges_of(of_third)[-1].end
    assert end is not None
    archived.check_corrupt(of_third, end, 10, "test")  # after the last committed byte: a torn tail


@pytest.mark.parametrize("field", ["rider", "_hoodie_partition_path"])
def test_a_damaged_schema_header_stops_compaction(tmp_path: Path, field: str) -> None:
    """A field name of a block's SCHEMA header flipped to upper case still parses, and the column would read
    as nulls; it no longer matches the writer schema the commit recorded, so it is refused."""
    root, storage, lock = _table(tmp_path, 8)
    scheduled = schedule_compaction(storage, lock)
    assert scheduled.instant is not None
    log = _log_files(root)[0]
    data = log.read_bytes()
    at = data.index(f'"name":"{field}"'.encode()) + len('"name":"') + len(field) - 1
    _flip(log, at, 0x20)  # the name's last letter in upper case
    with pytest.raises(CorruptLogBlock, match="SCHEMA header does not match the writer schema"):
        compact_in_process(storage, lock, scheduled.instant.time)
