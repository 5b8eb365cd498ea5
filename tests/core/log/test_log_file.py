from __future__ import annotations

import random
import zipfile
from pathlib import Path

import pytest

from hoodie.errors import InvalidFileName
from hoodie.log.log_file import LogFile


@pytest.mark.parametrize(
    ("name", "file_id", "instant", "version", "token", "is_cdc", "extension"),
    [
        (
            ".ff32ab89-5ad0-4968-83b4-89a34c95d32f-0_20250316025816068.log.1_0-54-122",
            "ff32ab89-5ad0-4968-83b4-89a34c95d32f-0",
            "20250316025816068",
            1,
            "0-54-122",
            False,
            "log",
        ),
        (
            ".files-0000-0_20250521133216762001.log.12_2-190-401",
            "files-0000-0",
            "20250521133216762001",
            12,
            "2-190-401",
            False,
            "log",
        ),
        (".abc-0_20240101000000000.log.3", "abc-0", "20240101000000000", 3, None, False, "log"),
        (".abc-0_20240101000000000.log.1_1-0-1.cdc", "abc-0", "20240101000000000", 1, "1-0-1", True, "log"),
        (".commits_.archive.7_1-0-1", "commits", "", 7, "1-0-1", False, "archive"),
        (".a_b_c_20240101000000000.log.2_0-1-2", "a_b_c", "20240101000000000", 2, "0-1-2", False, "log"),
    ],
)
def test_parse_fields_and_print_back(
    name: str, file_id: str, instant: str, version: int, token: str | None, is_cdc: bool, extension: str
) -> None:
    parsed = LogFile.parse(name)
    assert parsed == LogFile(file_id, instant, version, token, is_cdc, extension)
    assert parsed.file_name == name
    assert str(parsed) == name


@pytest.mark.parametrize(
    "name",
    [
        "ff32ab89-0_20250316025816068.log.1_0-54-122",  # no leading dot
        "036ded81-0_1-1112-3191_20251220210129235.parquet",  # a base file
        "..ff32ab89-0_20250316025816068.log.1_0-54-122.crc",  # Hadoop checksum side file
        ".ff32ab89-0_20250316025816068.log.1_0-54-122.tmp",
        ".ff32ab89-0_20250316025816068.log._0-54-122",  # no version
        ".ff32ab89-0_20250316025816068.log.1_0-54",  # short write token
        ".ff32ab89-0_20250316025816068.log.01_0-54-122",  # would not print back the same
        ".ff32ab89-0_20250316025816068.data.1_0-54-122",
        ".ff32ab89-0.log.1_0-54-122",  # no instant separator
        ".ff32ab89-0_20250316025816068.log.1_0-54-122xcdc",
        "",
        ".",
    ],
)
def test_invalid_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidFileName):
        LogFile.parse(name)
    assert LogFile.try_parse(name) is None


def test_cdc_requires_a_write_token() -> None:
    with pytest.raises(InvalidFileName):
        LogFile("f-0", "20240101000000000", 1, None, True)


def test_sort_key_follows_hudis_log_file_comparator() -> None:
    names = [
        ".f-0_20240101000000000.log.1",  # no write token sorts first
        ".f-0_20240101000000000.log.1_0-1-2",
        ".f-0_20240101000000000.log.1_0-1-2.cdc",  # the same token: data before CDC
        ".f-0_20240101000000000.log.1_0-10-2",  # tokens compare as strings
        ".f-0_20240101000000000.log.1_0-9-2",
        ".f-0_20240101000000000.log.2_0-1-1",  # then version, numerically
        ".f-0_20240101000000000.log.10_0-1-1",
        ".f-0_20240102000000000.log.1_0-1-1",  # instant first of all
    ]
    shuffled = names[:]
    random.Random(7).shuffle(shuffled)
    ordered = sorted((LogFile.parse(n) for n in shuffled), key=lambda f: f.sort_key)
    assert [f.file_name for f in ordered] == names


def test_every_log_file_of_the_fixture_tables_parses_and_prints_back(fixtures_root: Path) -> None:
    """Every log file name in every fixture zip (data and metadata tables) round-trips; .crc files do not."""
    seen = 0
    for archive in sorted((fixtures_root / "tables").rglob("*.zip")):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if info.is_dir() or "__MACOSX" in info.filename:
                    continue
                name = info.filename.rsplit("/", 1)[-1]
                if ".log." not in name:
                    continue
                if name.endswith(".crc"):
                    assert LogFile.try_parse(name) is None, name
                    continue
                parsed = LogFile.parse(name)
                assert parsed.file_name == name
                assert parsed.version >= 1
                assert parsed.write_token is not None
                seen += 1
    assert seen > 100
