"""Queries of :class:`hoodie.Table` that must refuse rather than answer wrongly: a time travel to an instant
whose files the cleaner removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoodie import Table
from hoodie.clean.execute import clean_in_process
from hoodie.clean.plan import CleanConfig, CleanPolicy, schedule_clean
from hoodie.errors import TimeTravelRefused
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.testing.generate import GenerateSpec, generate_table


def _cleaned(tmp_path: Path, version: int, config: CleanConfig) -> tuple[Path, list[str]]:
    root = tmp_path / "t"
    results = generate_table(
        str(root),
        GenerateSpec(
            table_type="COPY_ON_WRITE", table_version=version, rows=100, commits=4, partitions=1, seed=8
        ),
    )
    storage = Storage.for_uri(str(root))
    lock = FileSystemLock(storage)
    assert schedule_clean(storage, lock, config=config).instant is not None
    clean_in_process(storage, lock)
    return root, [r.instant_time for r in results]


@pytest.mark.parametrize("version", [6, 8])
def test_time_travel_before_the_earliest_retained_commit_is_refused(tmp_path: Path, version: int) -> None:
    """Before: the read of the first commit returned 0 rows without a word (its files were cleaned)."""
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=1)
    root, commits = _cleaned(tmp_path, version, config)
    table = Table.open(str(root))
    earliest = table.earliest_time_travel()
    assert earliest is not None
    assert commits[0] < earliest <= commits[-1]
    with pytest.raises(TimeTravelRefused, match=f"earliest instant that can be read is {earliest}"):
        table.read(as_of=commits[0])
    assert table.read(as_of=earliest).num_rows > 0
    assert table.read(as_of=commits[-1]).num_rows == table.read().num_rows


def test_a_clean_by_file_versions_bounds_time_travel_by_the_active_timeline(tmp_path: Path) -> None:
    """A clean keeping file versions records no earliest commit: the first write on the active timeline is
    then the bound, as in Hudi."""
    config = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS, file_versions_retained=1)
    root, commits = _cleaned(tmp_path, 8, config)
    table = Table.open(str(root))
    assert table.earliest_time_travel() == commits[0]
    with pytest.raises(TimeTravelRefused):
        table.read(as_of="20000101000000000")


def test_without_a_clean_every_instant_can_be_read(tmp_path: Path) -> None:
    root = tmp_path / "t"
    generate_table(str(root), GenerateSpec(table_type="COPY_ON_WRITE", rows=50, commits=2, partitions=1))
    table = Table.open(str(root))
    assert table.earliest_time_travel() is None
    assert table.read(as_of="20000101000000000").num_rows == 0
