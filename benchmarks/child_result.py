"""How a benchmark runs a measured variant in a fresh interpreter and gets its result back: the child
prints one ``BENCH_RESULT <json>`` line (:func:`print_result`), the parent runs it and reads that line
(:func:`run_variant`). A fresh process per run keeps one variant's memory and warm caches out of another's
figures."""

from __future__ import annotations

import json
import statistics
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

RESULT_PREFIX = "BENCH_RESULT "
CHILD_TIMEOUT_SECONDS = 3600

Result = dict[str, Any]


def print_result(result: Result) -> None:
    """The child's side: print its result where :func:`run_variant` finds it."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def run_variant(cmd: Sequence[str], env: Mapping[str, str] | None = None) -> Result:
    """Run ``cmd``: the result it printed last, or ``{"error": ...}`` with its exit code and error line."""
    proc = subprocess.run(
        list(cmd),
        capture_output=True,
        text=True,
        env=dict(env) if env else None,
        timeout=CHILD_TIMEOUT_SECONDS,
    )
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            result: Result = json.loads(line[len(RESULT_PREFIX) :])
            return result
    tail = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
    return {"error": f"exit code {proc.returncode}: {tail}"}


def median(results: Sequence[Result], key: str) -> float | None:
    """The median of ``seconds[key]`` over the runs that did not fail, or ``None`` when all failed."""
    values = [r["seconds"][key] for r in results if "error" not in r]
    return statistics.median(values) if values else None


__all__ = ["CHILD_TIMEOUT_SECONDS", "RESULT_PREFIX", "Result", "median", "print_result", "run_variant"]
