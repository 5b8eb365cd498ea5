"""Durations written as text: seconds (``90``, ``1.5``) or a number with a unit (``500ms``, ``30s``, ``5m``,
``1h``). One grammar for the daemon's configuration file and the storage options, so a value valid in one
is valid in the other.

A duration is a finite number of seconds no longer than :data:`MAX_SECONDS`: every duration ends up in a
wait (a poll interval, a back-off, a lock's timeout), and a wait on NaN seconds returns at once while one on
infinite or overflowing seconds raises ``OverflowError`` in the thread that waits, long after start-up. So
such values are refused where they are read (:func:`duration_problem`), naming the key; "forever" is spelt
``never``, and only where a key allows it.
"""

from __future__ import annotations

import math
import re
import threading
from typing import Final

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}

#: The longest duration, in seconds: the longest wait the platform's threads accept
#: (``threading.TIMEOUT_MAX``, about 292 years on 64-bit Linux).
MAX_SECONDS: Final = threading.TIMEOUT_MAX


def duration_seconds(text: str) -> float | None:
    """The seconds ``text`` states, or None when it is not a duration (the caller says where it stood). The
    number may still be one :func:`duration_problem` refuses (a hundred digits)."""
    m = _DURATION.match(text)
    return None if m is None else float(m.group(1)) * _UNITS[m.group(2)]


def duration_problem(seconds: float) -> str | None:
    """Why ``seconds`` cannot be a duration (not a number, infinite, longer than :data:`MAX_SECONDS`), or
    None when it can. Negative values are the caller's to refuse or allow."""
    if math.isnan(seconds):
        return "is not a number"
    if not abs(seconds) <= MAX_SECONDS:  # a number written with hundreds of digits is infinite as a float
        return f"is infinite or longer than the longest wait ({MAX_SECONDS:.0f} s)"
    return None


__all__ = ["MAX_SECONDS", "duration_problem", "duration_seconds"]
