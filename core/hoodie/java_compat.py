"""What hoodie takes from Java, byte for byte, to read and write files the way Hudi does:

- ``String.hashCode`` (:func:`java_string_hash`) and the iteration orders built on it: ``java.util.HashMap``
  (the key order of v6 JSON commit metadata) and ``java.util.Properties``, a ``ConcurrentHashMap`` (the key
  order of ``hoodie.properties``);
- the ``.properties`` grammar: reading it (comments, separators, escapes, continuations) and
  ``Properties.store``'s output (escapes, the two date comment lines);
- Jackson's ``DefaultPrettyPrinter`` with its string escapes and ``Double.toString`` numbers (v6 JSON commit
  metadata).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

__all__ = [
    "jackson_pretty",
    "java_hash_map_order",
    "java_properties_order",
    "java_string_hash",
    "keep_order",
    "parse_properties",
    "store_properties",
]

_T = TypeVar("_T")


def java_string_hash(s: str) -> int:
    """``String.hashCode``: over the UTF-16 code units, ``h = 31 h + unit`` modulo 2**32 (unsigned here)."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h


def _utf16_units(s: str) -> list[int]:
    data = s.encode("utf-16-be", errors="surrogatepass")
    return [int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2)]


def java_hash_map_order(m: Mapping[str, _T]) -> dict[str, _T]:
    """``m`` in the iteration order of a java.util.HashMap filled in ``m``'s order (default capacity 16,
    doubled past a 0.75 load): by bucket index, insertion order within a bucket."""
    capacity = 16
    while len(m) > capacity * 0.75:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key)
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


# -- java.util.Properties ---------------------------------------------------------------------------------


def parse_properties(text: str) -> dict[str, str]:
    """Parse the Java ``.properties`` grammar into an ordered dict (later keys win, as in Java)."""
    props: dict[str, str] = {}
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if not pending and (not line or line[0] in "#!"):
            continue
        # A line ending in an odd number of backslashes continues on the next line.
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        logical.append(pending + line)
        pending = ""
    if pending:
        logical.append(pending)
    for line in logical:
        key, value = _split_key_value(line)
        props[_unescape(key)] = _unescape(value)
    return props


def _split_key_value(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in " \t\f":
            j += 1
    return key, line[j:]


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u" and i + 6 <= len(s):
            try:
                out.append(chr(int(s[i + 2 : i + 6], 16)))
                i += 6
                continue
            except ValueError:
                pass
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    text = "".join(out)
    if any("\ud800" <= c <= "\udfff" for c in text):
        # Java writes characters beyond the BMP as two \\u escapes (a UTF-16 surrogate pair): join them.
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    return text


def _spread(h: int) -> int:
    return (h ^ (h >> 16)) & 0x7FFFFFFF


def java_properties_order(keys: Iterable[str]) -> list[str]:
    """The order in which ``java.util.Properties.store`` (Java 9+) writes keys put in this order.

    ``Properties`` keeps its entries in a ``ConcurrentHashMap`` created for 8 entries (a table of 16 bins)
    and writes them in iteration order: bin by bin (bin = spread hash & (n - 1)), in insertion order within a
    bin; at 3/4 full the table doubles and each bin splits as ``ConcurrentHashMap.transfer`` does (the
    entries before the bin's last run of equal split bits come out reversed). Every Hudi 1.x fixture written
    by Java 9+ has its keys in exactly this order. Bins that would reach 8 entries (never seen with the few
    dozen keys of a table config) are not modelled.
    """
    n = 16
    table: list[list[tuple[int, str]]] = [[] for _ in range(n)]
    count = 0
    size_ctl = n - (n >> 2)
    for key in keys:
        h = _spread(java_string_hash(key))
        bin_ = table[h & (n - 1)]
        if any(k == key for _, k in bin_):
            continue
        bin_.append((h, key))
        count += 1
        if count >= size_ctl:
            grown: list[list[tuple[int, str]]] = [[] for _ in range(2 * n)]
            for i, entries in enumerate(table):
                if not entries:
                    continue
                bits = [eh & n for eh, _ in entries]
                last_run = len(entries) - 1
                while last_run > 0 and bits[last_run - 1] == bits[-1]:
                    last_run -= 1
                low: list[tuple[int, str]] = []
                high: list[tuple[int, str]] = []
                (high if bits[-1] else low).extend(entries[last_run:])
                for j in range(last_run):
                    (high if bits[j] else low).insert(0, entries[j])
                grown[i], grown[i + n] = low, high
            table, n = grown, 2 * n
            size_ctl = n - (n >> 2)
    return [key for entries in table for _, key in entries]


def _java_escape(s: str, *, is_key: bool) -> str:
    """``Properties.saveConvert``: keys escape every space, values a leading one; ``= : # !`` and control
    characters are escaped; anything outside printable ASCII becomes ``\\uXXXX`` (UTF-16 units)."""
    out: list[str] = []
    for i, unit in enumerate(_utf16_units(s)):
        c = chr(unit)
        if 61 < unit < 127:
            out.append("\\\\" if c == "\\" else c)
        elif c == " ":
            out.append("\\ " if i == 0 or is_key else " ")
        elif c in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[c])
        elif c in "=:#!":
            out.append("\\" + c)
        elif unit < 0x20 or unit > 0x7E:
            out.append(f"\\u{unit:04X}")
        else:
            out.append(c)
    return "".join(out)


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def _java_instant_text(moment: dt.datetime) -> str:
    """``java.time.Instant.toString()`` (ISO-8601, fraction in groups of three digits, ``Z``)."""
    u = moment.astimezone(dt.UTC)
    fraction = ""
    if u.microsecond:
        fraction = f".{u.microsecond // 1000:03d}" if u.microsecond % 1000 == 0 else f".{u.microsecond:06d}"
    return u.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _java_date_text(moment: dt.datetime) -> str:
    """``java.util.Date.toString()`` in UTC: ``EEE MMM dd HH:mm:ss zzz yyyy``."""
    u = moment.astimezone(dt.UTC)
    return f"{_DAYS[u.weekday()]} {_MONTHS[u.month - 1]} {u.day:02d} {u:%H:%M:%S} UTC {u.year}"


def store_properties(props: Mapping[str, str], header: str, moment: dt.datetime) -> str:
    """What ``java.util.Properties.store`` (Java 9+) writes: ``#<header> <ISO instant>`` and ``#<date>``
    (here always in UTC), then every key in :func:`java_properties_order` with Java's escapes,
    ``\\n``-terminated."""
    lines = [f"#{header} {_java_instant_text(moment)}", f"#{_java_date_text(moment)}"]
    for key in java_properties_order(props):
        lines.append(f"{_java_escape(key, is_key=True)}={_java_escape(props[key], is_key=False)}")
    return "\n".join(lines) + "\n"
