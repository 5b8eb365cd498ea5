"""Log compaction planning: the plan is Hudi's (``HoodieLogCompactionPlanGenerator``), slices are eligible by
log files or valid blocks against the threshold (counted independently here, from whole files), held file
groups and pending writes are respected, and the header-only block reader sees what the full one sees."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow.compute as pc
import pytest

from hoodie import Table
from hoodie.compaction.plan import schedule_compaction
from hoodie.errors import UnsupportedTable
from hoodie.lock import FileSystemLock
from hoodie.log.block import BlockType, HeaderKey, LogBlock, iter_blocks
from hoodie.logcompaction.execute import prepare_log_compaction
from hoodie.logcompaction.plan import (
    EXECUTION_HELPER,
    block_headers,
    plan_log_compaction,
    schedule_log_compaction,
    valid_blocks_of,
)
from hoodie.logcompaction.trigger import LogCompactionConfig
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table
from hoodie.testing.table_writer import TableWriter
from hoodie.timeline.instant import DELTA_COMMIT, LOG_COMPACTION, State
from hoodie.timeline.metadata import decode_compaction_plan, encode_compaction_plan
from hoodie.timeline.writer import TimelineWriter

#: ``many_logs(version, log_format, partitions=2)``: a fresh copy of a generated table (see conftest).
TableFactory = Callable[..., Path]


def _open(root: Path) -> tuple[Storage, FileSystemLock]:
    storage = Storage.for_uri(str(root))
    return storage, FileSystemLock(storage)


def _expected_slices(table: Table, threshold: int) -> set[tuple[str, str]]:
    """Slices with ``threshold`` or more log files or valid blocks, counted from whole files (every block
    of a fresh generated table is valid: no rollback, no earlier log compaction)."""
    out = set()
    for gid, group in table.file_groups().items():
        latest = group.latest
        if latest is None or not latest.log_files:
            continue
        blocks = [
            b
            for path in latest.log_file_paths
            for b in iter_blocks(table.storage.read(path))
            if b.block_type in (BlockType.AVRO_DATA, BlockType.PARQUET_DATA, BlockType.DELETE)
        ]
        if len(latest.log_files) >= threshold or len(blocks) >= threshold:
            out.add((gid.partition_path, gid.file_id))
    return out


@pytest.mark.parametrize(("version", "log_format"), [(6, "avro"), (8, "parquet"), (9, "avro")])
def test_the_plan_is_the_one_hudi_writes(many_logs: TableFactory, version: int, log_format: str) -> None:
    root = many_logs(version, log_format)
    storage, lock = _open(root)
    table = Table.open(str(root))
    expected = _expected_slices(table, 5)
    assert expected, "the generated table has no slice with 5 log files or blocks"
    scheduled = schedule_log_compaction(storage, lock)
    assert scheduled.instant is not None, scheduled.reason
    T = scheduled.instant.time
    timeline = Table.open(str(root)).timeline
    requested = timeline.file_of(T, State.REQUESTED)
    assert requested.endswith(f"/{T}.logcompaction.requested")
    raw = (root / requested).read_bytes()
    plan = decode_compaction_plan(raw)
    assert plan == scheduled.plan
    assert encode_compaction_plan(plan, table_version=version) == raw
    assert plan.version == 2
    assert plan.strategy is not None
    assert plan.strategy.compactor_class_name == EXECUTION_HELPER
    assert plan.strategy.strategy_params == {}
    assert plan.preserve_hoodie_metadata is True
    assert plan.missing_schedule_partitions == ()
    assert plan.extra_metadata == {}
    assert {(op.partition_path, op.file_id) for op in plan.operations} == expected
    groups = table.file_groups()
    for op in plan.operations:
        latest = next(g.latest for gid, g in groups.items() if gid.file_id == op.file_id)
        assert latest is not None
        assert op.base_instant_time == latest.base_instant
        assert op.data_file_path == (latest.base_file.file_name if latest.base_file else None)
        assert op.delta_file_paths == tuple(
            lf.file_name for lf in latest.log_files
        )  # every one, in log order
        assert op.metrics["TOTAL_LOG_FILES"] == len(latest.log_files)
    prepared = prepare_log_compaction(storage, lock)
    assert prepared.instant.time == T
    assert (root / Table.open(str(root)).timeline.file_of(T, State.INFLIGHT)).read_bytes() == b""


def test_slices_below_the_threshold_wait(many_logs: TableFactory) -> None:
    root = many_logs(8, "parquet")
    storage, lock = _open(root)
    table = Table.open(str(root))
    for threshold in (3, 5, 8):
        config = LogCompactionConfig(blocks_threshold=threshold)
        result = plan_log_compaction(table, "29990101000000000", config)
        expected = _expected_slices(table, threshold)
        planned = {(op.partition_path, op.file_id) for op in result.plan.operations} if result.plan else set()
        assert planned == expected, f"threshold {threshold}: {result.reason}"
    result = plan_log_compaction(table, "29990101000000000", LogCompactionConfig(blocks_threshold=100))
    assert result.plan is None
    assert "no file slice with 100 or more log files or valid log blocks" in result.reason
    settings = LogCompactionConfig.from_config({"hoodie.log.compaction.blocks.threshold": "100"})
    assert schedule_log_compaction(storage, lock, config=settings).instant is None
    assert not Table.open(str(root)).timeline.pending_log_compactions()


def test_file_groups_held_by_pending_services_are_left_alone(many_logs: TableFactory) -> None:
    root = many_logs(8, "parquet")
    storage, lock = _open(root)
    first = schedule_log_compaction(storage, lock)
    assert first.plan is not None
    # A second plan finds every eligible group held by the first.
    second = schedule_log_compaction(storage, lock)
    assert second.instant is None
    assert f"{len(first.plan.operations)} file group(s) held" in second.reason
    # Compaction leaves them alone too, and a log compaction then has nothing left.
    compaction = schedule_compaction(storage, lock)
    assert compaction.plan is not None
    held = {(op.partition_path, op.file_id) for op in first.plan.operations}
    assert not held & {(op.partition_path, op.file_id) for op in compaction.plan.operations}
    assert (
        schedule_log_compaction(storage, lock, config=LogCompactionConfig(blocks_threshold=1)).instant is None
    )


def test_a_version_6_plan_waits_for_an_earlier_pending_write(many_logs: TableFactory) -> None:
    root = many_logs(6, "avro")
    storage, lock = _open(root)
    table = Table.open(str(root))
    writer = TimelineWriter(storage, table.config, lock)
    pending = writer.request(DELTA_COMMIT, writer.next_instant_time())
    result = schedule_log_compaction(storage, lock)
    assert result.instant is None
    assert f"write {pending} is still pending" in result.reason
    writer.delete_pending(pending)  # rolled back (it wrote nothing)
    assert schedule_log_compaction(storage, lock).instant is not None


def test_version_8_plans_leave_out_log_files_a_pending_write_could_precede(many_logs: TableFactory) -> None:
    root = many_logs(8, "parquet")
    storage, lock = _open(root)
    table = Table.open(str(root))
    writer = TimelineWriter(storage, table.config, lock)
    pending = writer.request(DELTA_COMMIT, writer.next_instant_time())
    # Two writes complete after it, updating records of every file group.
    for bump in (1, 2):
        rows = Table.open(str(root)).read()
        rows = rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie")])
        rows = rows.set_column(rows.column_names.index("ts"), "ts", pc.add(rows.column("ts"), bump))
        TableWriter.open(str(root), lock=lock).upsert(rows.slice(0, 40))
    view = Table.open(str(root))
    later = {
        (gid.file_id, lf.file_name)
        for gid, g in view.file_groups().items()
        if g.latest is not None
        for lf in g.latest.log_files
        if lf.instant > pending.time
    }
    assert later
    result = plan_log_compaction(view, "29990101000000000", LogCompactionConfig(blocks_threshold=1))
    assert result.plan is not None
    for op in result.plan.operations:
        assert all(name.split("_")[1].split(".")[0] < pending.time for name in op.delta_file_paths), op
    assert not {(op.file_id, n) for op in result.plan.operations for n in op.delta_file_paths} & later
    writer.delete_pending(pending)
    result = plan_log_compaction(
        Table.open(str(root)), "29990101000000000", LogCompactionConfig(blocks_threshold=1)
    )
    assert result.plan is not None
    assert {(op.file_id, n) for op in result.plan.operations for n in op.delta_file_paths} >= later


def test_plans_are_refused_on_copy_on_write_tables(tmp_path: Path) -> None:
    generate_table(str(tmp_path / "t"), GenerateSpec(table_type="COPY_ON_WRITE", rows=20, commits=1))
    storage, lock = _open(tmp_path / "t")
    with pytest.raises(UnsupportedTable, match="only MERGE_ON_READ tables log-compact"):
        schedule_log_compaction(storage, lock)


# -- valid blocks --------------------------------------------------------------------------------------------


def _block(kind: BlockType, instant: str, **header: str) -> LogBlock:
    keys = {HeaderKey.INSTANT_TIME: instant}
    keys.update({HeaderKey[k]: v for k, v in header.items()})
    return LogBlock(kind, keys, {}, b"", 0, 0)


def test_valid_blocks_follow_rollbacks_and_earlier_log_compactions() -> None:
    data, delete, command = BlockType.AVRO_DATA, BlockType.DELETE, BlockType.COMMAND
    files = [
        ("f1", [_block(data, "001"), _block(delete, "001")]),
        ("f2", [_block(data, "002")]),
        (
            "f3",
            [_block(data, "003"), _block(command, "004", TARGET_INSTANT_TIME="003", COMMAND_BLOCK_TYPE="0")],
        ),
        ("f4", [_block(data, "005")]),
        ("f5", [_block(data, "009")]),  # not committed
        (
            "f6",
            [
                _block(data, "010", COMPACTED_BLOCK_TIMES="002,001"),
                _block(delete, "010", COMPACTED_BLOCK_TIMES="002,001"),
            ],
        ),
        ("f7", [_block(BlockType.CORRUPT, "x")]),
    ]
    committed = {"001", "002", "003", "005", "010", "020", "030"}
    found = valid_blocks_of(files, committed.__contains__)
    assert (found.blocks, found.files) == (3, 2)  # 005, and the two blocks of 010 (replacing 001 and 002)
    # A later log compaction of 010 and 005: its one block stands for all.
    files.append(("f8", [_block(data, "020", COMPACTED_BLOCK_TIMES="005,010")]))
    assert valid_blocks_of(files, committed.__contains__) == type(found)(1, 1)
    # A compacted block none of whose instants is present is never applied, so never counted.
    assert (
        valid_blocks_of(
            [("g", [_block(data, "030", COMPACTED_BLOCK_TIMES="007")])], committed.__contains__
        ).blocks
        == 0
    )


def test_block_headers_match_the_full_reader(many_logs: TableFactory, tmp_path: Path) -> None:
    root = many_logs(8, "parquet")
    storage = Storage.for_uri(str(root))
    paths = [p for s in Table.open(str(root)).file_slices() for p in s.log_file_paths]
    assert paths

    def shape(blocks: list[LogBlock]) -> list[tuple[object, ...]]:
        return [(b.block_type, dict(b.header), b.offset, b.length) for b in blocks]

    for path in paths:
        assert shape(block_headers(storage, path)) == shape(list(iter_blocks(storage.read(path)))), path
    # A torn tail: the file is framed by the full reader, the damage marked CORRUPT.
    data = storage.read(paths[0])
    storage.create("torn.log", data + data[: len(data) // 2])
    torn = block_headers(storage, "torn.log")
    assert shape(torn) == shape(list(iter_blocks(data + data[: len(data) // 2])))
    assert torn[-1].block_type is BlockType.CORRUPT
    assert all(b.content == b"" for b in torn)


def test_a_requested_log_compaction_is_pending(many_logs: TableFactory) -> None:
    root = many_logs(8, "parquet")
    storage, lock = _open(root)
    scheduled = schedule_log_compaction(storage, lock)
    assert scheduled.instant is not None
    pending = Table.open(str(root)).timeline.pending_log_compactions()
    assert [(i.time, i.action) for i in pending] == [(scheduled.instant.time, LOG_COMPACTION)]
