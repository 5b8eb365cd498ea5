"""Re-reading the configuration file of a running replica: on SIGHUP, and when the file changes (a mounted
Kubernetes ConfigMap is swapped in place), without a restart and without dropping a claim.

What can change live is what the daemon watches: the ``tables`` entries (added, removed, their settings
changed, the ``defaults`` they carry included) and the ``discover`` roots. The poller takes the new set at its
next poll (:meth:`hoodied.poller.Poller.reconfigure`): a new table is polled then, a removed one is no longer
polled (a job of it that runs goes on to its end, its claim kept), a table whose settings changed polls and
schedules by the new ones from then on. Everything else (ZooKeeper, Spark, the metrics server, intervals,
jobs) is bound at start-up: a change there is applied to nothing and named in the log as needing a restart.

A new file that cannot be read or is not a valid configuration changes nothing: the old one stays in force,
and the error is logged, shown in ``/status`` (``config``) and counted (``hoodied_config_reloads_total``
with ``outcome="refused"``; ``hoodied_config_reload_ok`` is 0 until a good one is read).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from hoodied.config import ConfigError, DaemonConfig

logger = logging.getLogger(__name__)

#: The fields of :class:`~hoodied.config.DaemonConfig` a running replica takes from a new file.
LIVE_FIELDS = ("tables", "discover")
#: Fields that say where the file came from and what it held: never a change to apply.
_NOT_SETTINGS = ("source", "warnings")


@dataclass(frozen=True)
class ReloadResult:
    """What one re-read did: ``config`` is the configuration now in force (the old one when refused)."""

    config: DaemonConfig
    changed: bool  # the live fields differ from the old configuration's
    restart_needed: tuple[str, ...] = ()  # other fields that differ, applied to nothing
    error: str | None = None  # why the new file was refused


def merge(current: DaemonConfig, new: DaemonConfig) -> ReloadResult:
    """``current`` with ``new``'s :data:`LIVE_FIELDS`, and the names of the other fields that differ."""
    others = [
        f.name
        for f in dataclasses.fields(DaemonConfig)
        if f.name not in LIVE_FIELDS
        and f.name not in _NOT_SETTINGS
        and getattr(current, f.name) != getattr(new, f.name)
    ]
    changed = any(getattr(current, name) != getattr(new, name) for name in LIVE_FIELDS)
    applied = replace(current, **{name: getattr(new, name) for name in LIVE_FIELDS}, warnings=new.warnings)
    return ReloadResult(applied, changed, tuple(others))


@dataclass
class ConfigFile:
    """The configuration file of a running replica: whether it should be read again (asked for by SIGHUP,
    :meth:`request`, or its bytes changed since the last read), and reading it (:meth:`reload`)."""

    path: str
    _digest: str = ""
    _requested: threading.Event = field(default_factory=threading.Event)
    _stat: tuple[int, int, int] | None = None
    #: The last refusal (None once a good file was read), for ``/status``.
    error: str | None = None

    def __post_init__(self) -> None:
        self._stat = self._stat_now()
        try:
            self._digest = hashlib.sha256(Path(self.path).read_bytes()).hexdigest()
        except OSError:
            self._digest = ""

    def request(self) -> None:
        """Ask for a re-read at the next check (SIGHUP; thread-safe)."""
        self._requested.set()

    def due(self) -> bool:
        """Whether to read the file again: asked for, or its inode, size or modification time changed (a stat,
        so checking at every poll costs nothing)."""
        return self._requested.is_set() or self._stat_now() != self._stat

    def reload(self, current: DaemonConfig) -> ReloadResult:
        """Read the file again and merge it into ``current`` (:func:`merge`); the same bytes change nothing,
        a file that is not a valid configuration is refused (``error``) and ``current`` stays."""
        self._requested.clear()
        self._stat = self._stat_now()
        try:
            data = Path(self.path).read_bytes()
        except OSError as e:
            return self._refuse(current, f"cannot read the configuration {self.path}: {e.strerror or e}")
        digest = hashlib.sha256(data).hexdigest()
        if digest == self._digest and self.error is None:
            return ReloadResult(current, False)
        try:
            new = DaemonConfig.parse(data.decode("utf-8"), source=self.path)
        except (ConfigError, UnicodeDecodeError) as e:
            return self._refuse(current, str(e))
        self._digest, self.error = digest, None
        return merge(current, new)

    def _refuse(self, current: DaemonConfig, error: str) -> ReloadResult:
        self.error = error
        return ReloadResult(current, False, (), error)

    def _stat_now(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.path)  # follows a ConfigMap's symlinks to the file in force
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)


__all__ = ["LIVE_FIELDS", "ConfigFile", "ReloadResult", "merge"]
