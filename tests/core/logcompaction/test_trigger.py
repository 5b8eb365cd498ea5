"""Log compaction's settings (Hudi's keys, bad values named) and its trigger: a write completed since the
latest compaction or log compaction."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie import Table
from hoodie.errors import InvalidWriteConfig
from hoodie.lock import FileSystemLock
from hoodie.logcompaction.execute import log_compact_in_process
from hoodie.logcompaction.plan import schedule_log_compaction
from hoodie.logcompaction.trigger import (
    BLOCKS_THRESHOLD_DEFAULT,
    LOG_FILE_MAX_SIZE_DEFAULT,
    LogCompactionConfig,
    evaluate_trigger,
)
from hoodie.storage import Storage
from hoodie.testing.table_writer import TableWriter

#: ``many_logs(version, log_format, partitions=2)``: a fresh copy of a generated table (see conftest).
TableFactory = Callable[..., Path]


def test_settings_take_hudis_keys_and_defaults() -> None:
    default = LogCompactionConfig.from_config({})
    assert default == LogCompactionConfig()
    assert (default.enabled, default.inline, default.blocks_threshold) == (
        False,
        False,
        BLOCKS_THRESHOLD_DEFAULT,
    )
    assert (default.block_format, default.compression, default.max_log_file_bytes) == (
        "avro",
        "gzip",
        LOG_FILE_MAX_SIZE_DEFAULT,
    )
    given = LogCompactionConfig.from_config(
        {
            "hoodie.log.compaction.enable": "true",
            "hoodie.log.compaction.inline": "TRUE",
            "hoodie.log.compaction.blocks.threshold": " 3 ",
            "hoodie.logfile.data.block.format": "PARQUET",
            "hoodie.parquet.compression.codec": "zstd",
            "hoodie.logfile.max.size": "1048576",
        }
    )
    assert given == LogCompactionConfig(True, True, 3, "parquet", "zstd", 1048576)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hoodie.log.compaction.blocks.threshold", "0"),
        ("hoodie.log.compaction.blocks.threshold", "five"),
        ("hoodie.log.compaction.enable", "yes"),
        ("hoodie.log.compaction.inline", "1"),
        ("hoodie.logfile.data.block.format", "hfile"),
        ("hoodie.logfile.max.size", "-1"),
    ],
)
def test_a_bad_setting_is_refused_by_name(key: str, value: str) -> None:
    with pytest.raises(InvalidWriteConfig, match=key.replace(".", r"\.")):
        LogCompactionConfig.from_config({key: value})


def test_the_trigger_waits_for_a_write_since_the_latest_log_compaction(many_logs: TableFactory) -> None:
    root = many_logs(8, "parquet")
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    decision = evaluate_trigger(Table.open(str(root)).timeline)
    assert decision.fire
    assert decision.writes == len(Table.open(str(root)).timeline.completed_writes())
    scheduled = schedule_log_compaction(storage, lock, respect_trigger=True)
    assert scheduled.instant is not None
    T = scheduled.instant.time
    # Pending or completed, the log compaction resets the count; its own deltacommit is no write.
    assert not evaluate_trigger(Table.open(str(root)).timeline).fire
    log_compact_in_process(storage, lock)
    quiet = schedule_log_compaction(storage, lock, respect_trigger=True)
    assert quiet.instant is None
    assert quiet.reason == f"no deltacommit completed since (log) compaction {T}"
    rows = Table.open(str(root)).read().slice(0, 5)
    TableWriter.open(str(root), lock=lock).upsert(
        rows.drop_columns([c for c in rows.column_names if c.startswith("_hoodie")])
    )
    again = evaluate_trigger(Table.open(str(root)).timeline)
    assert again.fire
    assert again.writes == 1
