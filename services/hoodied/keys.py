"""Which ``hoodie.*`` keys hoodied reads, and what to say of the others.

A setting given to the daemon (``defaults.hoodie``, ``tables[].hoodie``) or to a one-off command (``--conf``)
that hoodied never reads changes nothing, which is easy to miss: ``hoodie.clean.comits.retained: 30`` leaves
the retention at its default. So every key is checked once, where it is given:

- a key hoodied reads (:func:`known_keys`: every ``hoodie.*`` key the format library names) is fine;
- a key within two edits of one hoodied reads, and not a key of Hudi's own, is a misspelling: an error that
  names the key meant ("did you mean hoodie.clean.commits.retained?");
- a key of Hudi's that hoodied does not read (a writer's, a query engine's: ``hudi_keys.txt``) is a warning;
- any other key is a warning too: hoodied does not read it.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import hoodie

#: Keys whose meaning hoodied reads from the table's or the writers' configuration without naming them as
#: constants of its own (Hudi's lock settings, which hoodied passes on).
_READ_AS_PREFIX = ("hoodie.write.lock.",)

#: At most this many single-character edits make a near miss of a known key.
MAX_EDITS = 2


@dataclass(frozen=True)
class KeyReport:
    """What to say of the keys of one configuration: errors (misspellings) and warnings (keys not read)."""

    errors: tuple[str, ...]
    warnings: tuple[str, ...]


@cache
def known_keys() -> frozenset[str]:
    """Every ``hoodie.*`` key hoodied reads: the string constants (and tuples of them: aliases) at the top
    level of every module of the format library."""
    found: set[str] = set()
    for info in pkgutil.walk_packages(hoodie.__path__, prefix="hoodie."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            for item in value if isinstance(value, tuple | frozenset | set) else (value,):
                if isinstance(item, str) and item.startswith("hoodie.") and " " not in item:
                    found.add(item)
    return frozenset(found)


@cache
def hudi_keys() -> frozenset[str]:
    """The keys Apache Hudi names (``hudi_keys.txt``)."""
    text = Path(__file__).with_name("hudi_keys.txt").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


def check_keys(keys: Iterable[str], where: str) -> KeyReport:
    """The report of the module doc for ``keys`` given at ``where`` (a config path or ``--conf``)."""
    known = known_keys()
    hudi = hudi_keys()
    errors: list[str] = []
    warnings: list[str] = []
    for key in sorted(set(keys)):
        if key in known or key.startswith(_READ_AS_PREFIX):
            continue
        if key not in hudi:
            meant = _nearest(key, known)
            if meant is not None:
                errors.append(f"{where}: {key} is not a setting hoodied knows; did you mean {meant}?")
                continue
            warnings.append(f"{where}: {key} is not a Hudi setting hoodied reads; it has no effect")
        else:
            warnings.append(f"{where}: {key} is a Hudi setting hoodied does not read (it has no effect here)")
    return KeyReport(tuple(errors), tuple(warnings))


def _nearest(key: str, known: Iterable[str]) -> str | None:
    best: tuple[int, str] | None = None
    for candidate in known:
        if abs(len(candidate) - len(key)) > MAX_EDITS:
            continue
        d = _edits(key, candidate, MAX_EDITS)
        if d <= MAX_EDITS and (best is None or (d, candidate) < best):
            best = (d, candidate)
    return best[1] if best else None


def _edits(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` once it is over ``limit``."""
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        if min(current) > limit:
            return limit + 1
        previous = current
    return previous[-1]


__all__ = ["MAX_EDITS", "KeyReport", "check_keys", "hudi_keys", "known_keys"]
