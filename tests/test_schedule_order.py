"""The suite's scheduling list names files that exist (tests/conftest.py: a renamed file would silently drop
back to xdist's order), and the longest of them is collected first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support.schedule import LONGEST_FILES

TESTS_DIR = Path(__file__).resolve().parent


def test_every_longest_file_exists() -> None:
    missing = [name for name in LONGEST_FILES if not (TESTS_DIR / name).is_file()]
    assert not missing, f"tests/conftest.py LONGEST_FILES names files that are gone: {missing}"


def test_the_longest_file_is_collected_first() -> None:
    collected = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:benchmark",
            "tests/core/test_avro.py",
            f"tests/{LONGEST_FILES[1]}",
        ],
        cwd=TESTS_DIR.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    first = collected.stdout.splitlines()[0]
    assert first.startswith(f"tests/{LONGEST_FILES[1]}::"), collected.stdout[:2000]
