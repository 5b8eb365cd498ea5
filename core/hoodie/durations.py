"""Durations written as text: seconds (``90``, ``1.5``) or a number with a unit (``500ms``, ``30s``, ``5m``,
``1h``). One grammar for the daemon's configuration file and the storage options, so a value valid in one
is valid in the other."""

from __future__ import annotations

import re

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


def duration_seconds(text: str) -> float | None:
    """The seconds ``text`` states, or None when it is not a duration (the caller says where it stood)."""
    m = _DURATION.match(text)
    return None if m is None else float(m.group(1)) * _UNITS[m.group(2)]


__all__ = ["duration_seconds"]
