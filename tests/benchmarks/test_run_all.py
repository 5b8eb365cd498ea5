"""``benchmarks/run_all.py`` (``make bench``): its summary of the benchmarks' ``TARGET`` lines, read from
canned output, and one quick run of a fast benchmark end to end."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import run_all  # noqa: E402
import targets  # noqa: E402

CANNED = """\
compaction of one file slice: 1000000 rows
  compaction / (a) pyarrow floor           1.20
TARGET compaction / pyarrow floor | 1.2x | <= 1.5x | met
TARGET peak memory / Arrow size | 4.1x | <= 3x | MISSED
  TARGET requests per poll | 1.5 | < 2 | met
not a TARGET line | 1 | <= 2 | met
TARGET malformed | 1 | met
"""


def test_parse_reads_the_target_lines_only() -> None:
    found = targets.parse(CANNED)
    assert [t["name"] for t in found] == [
        "compaction / pyarrow floor",
        "peak memory / Arrow size",
        "requests per poll",
    ]
    assert found[1] == {
        "name": "peak memory / Arrow size",
        "measured": "4.1x",
        "limit": "<= 3x",
        "verdict": "MISSED",
    }


def test_check_prints_a_line_parse_reads_back(capsys: pytest.CaptureFixture[str]) -> None:
    assert targets.check("a / b", 0.5, 1.0)
    assert not targets.check("c / d", 1.0, 1.0, unit="", strict=True)
    assert not targets.check("e / f", None, 1.0)
    found = targets.parse(capsys.readouterr().out)
    assert [(t["name"], t["measured"], t["limit"], t["verdict"]) for t in found] == [
        ("a / b", "0.5x", "<= 1x", "met"),
        ("c / d", "1", "< 1", "MISSED"),
        ("e / f", "n/a", "<= 1x", "MISSED"),
    ]


def test_summary_tables_every_target_and_names_the_failures() -> None:
    outcomes = [
        run_all.Outcome("bench_compaction", 300.0, 0, targets.parse(CANNED)),
        run_all.Outcome("bench_layout", 60.0, 0, []),
        run_all.Outcome("bench_crashing", 5.0, 1, []),
        run_all.Outcome("bench_hanging", 3600.0, None, []),
    ]
    text = run_all.summary(outcomes)
    lines = text.splitlines()
    row = next(line for line in lines if "peak memory / Arrow size" in line)
    cells = [c.strip() for c in re.split(r"\s{2,}", row.strip())]
    assert cells == ["bench_compaction", "peak memory / Arrow size", "4.1x", "<= 3x", "MISSED"]
    assert "2 met, 1 missed" in text
    assert "ran without a target: bench_layout" in text
    assert "FAILED to run: bench_crashing (exit code 1" in text
    assert "FAILED to run: bench_hanging (killed after the timeout" in text
    assert [o.failed for o in outcomes] == [False, False, True, True]


def test_only_takes_names_with_or_without_prefix_and_refuses_unknown_ones() -> None:
    available = ["bench_archival", "bench_compaction", "bench_layout"]
    assert run_all.select(available, None) == available
    assert run_all.select(available, "layout, bench_archival.py,layout") == ["bench_layout", "bench_archival"]
    with pytest.raises(ValueError, match="no benchmark 'nope'"):
        run_all.select(available, "nope")


def test_every_benchmark_of_the_table_exists() -> None:
    """A benchmark renamed or removed leaves no stale row in the arguments table (rows for benchmarks
    still being written are allowed: they run when they land)."""
    pending = {"bench_clean"}
    assert set(run_all.ARGUMENTS) - pending <= set(run_all.discover())
    assert set(run_all.discover()) <= set(run_all.ARGUMENTS), "give each benchmark its arguments"


def test_a_quick_run_end_to_end() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "run_all.py"), "--quick", "--only", "archival"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "=== bench_archival --commits 200" in proc.stdout
    assert "after/before" in proc.stdout  # its output streamed through
    assert "ran without a target: bench_archival" in proc.stdout
    assert "FAILED" not in proc.stdout
