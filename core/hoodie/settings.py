"""Reading service and write settings (``hoodie.*`` keys given as strings): one function per kind of value,
each returning the default for an absent or blank key and raising
:class:`~hoodie.errors.InvalidWriteConfig` naming the key and the value for anything else it cannot take."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from hoodie.errors import InvalidWriteConfig


def setting(config: Mapping[str, str], key: str, aliases: Sequence[str] = ()) -> str | None:
    """The stripped value of ``key`` (else of the first alias set, e.g. a Hudi 0.x name), or ``None``."""
    for k in (key, *aliases):
        raw = config.get(k)
        if raw is not None and str(raw).strip() != "":
            return str(raw).strip()
    return None


def int_setting(
    config: Mapping[str, str],
    key: str,
    default: int,
    *,
    minimum: int = 0,
    bits: int = 64,
    aliases: Sequence[str] = (),
) -> int:
    """An integer of at least ``minimum`` that fits a Java ``int`` (``bits=32``) or ``long``."""
    raw = setting(config, key, aliases)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise InvalidWriteConfig(f"{key}={raw!r}: not an integer") from None
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise InvalidWriteConfig(f"{key}={raw!r}: out of range for a {bits}-bit integer")
    if value < minimum:
        need = "must be positive (at least 1)" if minimum == 1 else f"must be at least {minimum}"
        raise InvalidWriteConfig(f"{key}={raw!r}: {need}")
    return value


def bool_setting(config: Mapping[str, str], key: str, default: bool) -> bool:
    raw = setting(config, key)
    if raw is None:
        return default
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise InvalidWriteConfig(f"{key}={raw!r}: not true or false (expected true or false)")


def probability_setting(config: Mapping[str, str], key: str, default: float) -> float:
    """A ``double`` strictly between 0 and 1."""
    raw = setting(config, key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidWriteConfig(f"{key}={raw!r}: not a number") from None
    if not math.isfinite(value):
        raise InvalidWriteConfig(f"{key}={raw!r}: not a finite number")
    if not 0.0 < value < 1.0:
        raise InvalidWriteConfig(f"{key}={raw!r}: must lie strictly between 0 and 1")
    return value


__all__ = ["bool_setting", "int_setting", "probability_setting", "setting"]
