"""Fixtures for the log compaction tests: generated MERGE_ON_READ tables with many log blocks per slice
(updates and deletes in every commit), each generated once per session and copied for every test that
changes it."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from hoodie.testing.generate import GenerateSpec, generate_table

#: Commits per generated table: the first inserts, the others update 40% and delete 5% of the live rows, so
#: the busiest slices collect a log file per commit.
COMMITS = 7

TableFactory = Callable[..., Path]


@pytest.fixture(scope="session")
def _generated(tmp_path_factory: pytest.TempPathFactory) -> Callable[[int, str, int], Path]:
    cache: dict[tuple[int, str, int], Path] = {}

    def make(version: int, log_format: str, partitions: int) -> Path:
        key = (version, log_format, partitions)
        if key not in cache:
            root = tmp_path_factory.mktemp(f"lc-v{version}-{log_format}-{partitions}") / "t"
            spec = GenerateSpec(
                table_version=version,
                rows=120,
                commits=COMMITS,
                update_fraction=0.4,
                delete_fraction=0.05,
                partitions=partitions,
                log_format=log_format,  # type: ignore[arg-type]
                seed=17,
            )
            generate_table(str(root), spec)
            cache[key] = root
        return cache[key]

    return make


@pytest.fixture
def many_logs(tmp_path: Path, _generated: Callable[[int, str, int], Path]) -> TableFactory:
    """A fresh copy (in this test's tmp_path) of a generated table: ``many_logs(version, log_format,
    partitions=2)``."""

    def copy(version: int, log_format: str = "avro", partitions: int = 2) -> Path:
        target = tmp_path / f"v{version}-{log_format}-{partitions}"
        shutil.copytree(_generated(version, log_format, partitions), target)
        return target

    return copy
