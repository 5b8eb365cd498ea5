"""How a benchmark says whether it met a target: one line per target, in one shape, so that ``make bench``
(``benchmarks/run_all.py``) can gather them from every benchmark's output into one table.

    TARGET <name> | <measured> | <comparison> <limit> | met|MISSED

A benchmark prints the figures behind a ratio beside it as it likes; the ``TARGET`` line is the verdict.
"""

from __future__ import annotations

import math
import re

PREFIX = "TARGET "
LINE = re.compile(
    r"^TARGET (?P<name>[^|]+?) \| (?P<measured>[^|]+?) \| (?P<limit>[^|]+?) \| (?P<verdict>met|MISSED)$"
)


def check(name: str, measured: float | None, limit: float, *, unit: str = "x", strict: bool = False) -> bool:
    """Print the ``TARGET`` line of ``measured`` against ``limit`` (at most ``limit``, or below it when
    ``strict``) and return whether it is met. A measurement that could not be taken (``None``, NaN) misses:
    a target is never met by default."""
    ok = (
        measured is not None
        and not math.isnan(measured)
        and (measured < limit if strict else measured <= limit)
    )
    shown = "n/a" if measured is None or math.isnan(measured) else f"{measured:.3g}{unit}"
    print(
        f"{PREFIX}{name} | {shown} | {'<' if strict else '<='} {limit:g}{unit} | {'met' if ok else 'MISSED'}"
    )
    return ok


def parse(output: str) -> list[dict[str, str]]:
    """The ``TARGET`` lines of a benchmark's output, as name, measured, limit and verdict."""
    return [m.groupdict() for line in output.splitlines() if (m := LINE.match(line.strip()))]


__all__ = ["LINE", "PREFIX", "check", "parse"]
