"""What v6 JSON commit metadata takes from Java, byte for byte: ``String.hashCode`` and ``java.util.HashMap``
iteration order (the key order of new maps), and Jackson's ``DefaultPrettyPrinter`` with its string
escapes and ``Double.toString`` numbers.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, TypeVar

__all__ = [
    "jackson_pretty",
    "java_hash_map_order",
    "keep_order",
]

_T = TypeVar("_T")


def _java_string_hash(s: str) -> int:
    h = 0
    encoded = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(encoded), 2):
        h = (31 * h + ((encoded[i] << 8) | encoded[i + 1])) & 0xFFFFFFFF
    return h


def java_hash_map_order(m: Mapping[str, _T]) -> dict[str, _T]:
    """``m`` in the iteration order of a java.util.HashMap filled in ``m``'s order (default capacity 16,
    doubled past a 0.75 load): by bucket index, insertion order within a bucket."""
    capacity = 16
    while len(m) > capacity * 0.75:
        capacity *= 2

    def bucket(key: str) -> int:
        h = _java_string_hash(key)
        return (h ^ (h >> 16)) & (capacity - 1)

    return {k: m[k] for k in sorted(m, key=bucket)}


def keep_order(m: Mapping[str, _T]) -> dict[str, _T]:
    return dict(m)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JSON_ESCAPE_RE = re.compile(r'["\\\x00-\x1f]')


def _jackson_string(s: str) -> str:
    """A JSON string as Jackson writes it: short escapes, other control characters as \\u00XX (upper-case
    hex), everything else (non-ASCII included) as is."""
    return '"' + _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES.get(m[0], f"\\u{ord(m[0]):04X}"), s) + '"'


def _java_double(x: float) -> str:
    """Java's ``Double.toString``: plain for 1e-3 <= |x| < 1e7, else ``d.dddE±n``; shortest digits."""
    if math.isnan(x) or math.isinf(x):
        return '"NaN"' if math.isnan(x) else ('"Infinity"' if x > 0 else '"-Infinity"')
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    digits, exponent = _shortest_digits(abs(x))
    if 1e-3 <= abs(x) < 1e7:
        point = exponent + 1
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}E{exponent}"


def _shortest_digits(x: float) -> tuple[str, int]:
    """The shortest decimal digits of a positive float and the exponent of the first digit."""
    mantissa, _, exp = f"{x:.17e}".partition("e")
    for precision in range(1, 18):
        candidate = f"{x:.{precision - 1}e}"
        if float(candidate) == x:
            mantissa, _, exp = candidate.partition("e")
            break
    return mantissa.replace(".", "").rstrip("0") or "0", int(exp)


def jackson_pretty(value: Any, level: int = 0) -> str:
    """Jackson ``writerWithDefaultPrettyPrinter()``: objects one entry a line, indented two spaces a level,
    ``"key" : value``; arrays on one line, ``[ a, b ]``; empty ones ``{ }`` and ``[ ]``; no final newline."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _java_double(value)
    if isinstance(value, str):
        return _jackson_string(value)
    if isinstance(value, Mapping):
        if not value:
            return "{ }"
        inner = "  " * (level + 1)
        entries = ",".join(
            f"\n{inner}{_jackson_string(k)} : {jackson_pretty(v, level + 1)}" for k, v in value.items()
        )
        return "{" + entries + "\n" + "  " * level + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[ ]"
        return "[ " + ", ".join(jackson_pretty(v, level) for v in value) + " ]"
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")
