"""The control plane: what operators tell every replica about a table, without a restart.

One :class:`TableControl` document per table, shared by all replicas: in ZooKeeper at
``<base_path>/control/<table key>`` (:class:`ZooKeeperControlStore`), or in embedded mode in a file per table
under ``admin.state_dir`` (:class:`FileControlStore`). Every replica reads the documents at the start of each
poll (one listing when no table has one), so a command reaches all of them within one poll.

Commands (:data:`COMMANDS`; ``hoodied ctl`` and ``POST /api/v1/tables/<table>/<command>``):

- ``pause``: no new claim on the table (nor scheduling); running jobs finish.
- ``drain``: the same, reported as ``draining`` until no job of the table runs on any replica, then
  ``paused`` (the first replica to see no claim left writes it).
- ``resume``: claims and scheduling again.
- ``trigger --service S``: schedule S at the next poll even though its trigger does not fire (it is planned
  when there is anything to plan); consumed by the replica that schedules it.
- ``cancel --service S --instant T``: the replica running T cancels its Spark job group; T stays on the
  timeline, retryable, and no replica claims it again until ``retry``.
- ``retry --service S [--instant T]``: forget the back-off of a given-up (or cancelled) instant, every
  instant of S without ``--instant``.

Every command records who (``by``), why (``reason``) and when; a document update is a compare-and-set (the
ZooKeeper node's version, a lock file in embedded mode), so two operators never lose each other's command.
Notes of one-shot commands are dropped once stale (:data:`RETRY_TTL`, :data:`TRIGGER_TTL`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol

from hoodied.coordination import claim_name
from hoodied.errors import ServiceError

if TYPE_CHECKING:
    from hoodied.zookeeper import ZooKeeper

logger = logging.getLogger(__name__)

ACTIVE: Final = "active"
PAUSED: Final = "paused"
DRAINING: Final = "draining"
STATES: Final = (ACTIVE, PAUSED, DRAINING)

COMMANDS: Final = ("pause", "resume", "drain", "trigger", "cancel", "retry")
#: Commands that name a service, and those that also need an instant.
NEEDS_SERVICE: Final = frozenset({"trigger", "cancel", "retry"})
NEEDS_INSTANT: Final = frozenset({"cancel"})

#: Seconds a retry note is kept: every replica polls within it and applies it once.
RETRY_TTL: Final = 3600.0
#: Seconds an unconsumed trigger is kept (its service is not run on the table, or the table stays paused).
TRIGGER_TTL: Final = 24 * 3600.0
#: The key of a retry note covering every instant of a service.
ALL_INSTANTS: Final = "*"

ZOOKEEPER_FOLDER: Final = "control"


class ControlError(ServiceError):
    """A command that cannot be applied (unknown command, missing service or instant), or a store that cannot
    be read or written."""


class NotPending(ControlError):
    """A command names an instant that is not pending on the table (the API answers 409)."""


@dataclass(frozen=True)
class Note:
    """Who asked for something, why and when (Unix seconds)."""

    by: str
    reason: str
    at: float

    def to_json(self) -> dict[str, object]:
        return {"by": self.by, "reason": self.reason, "at": self.at}

    @classmethod
    def from_json(cls, raw: object) -> Note:
        if not isinstance(raw, Mapping):
            raise ValueError(f"not a note: {raw!r}")
        return cls(str(raw.get("by", "")), str(raw.get("reason", "")), float(raw.get("at", 0.0)))


@dataclass(frozen=True)
class TableControl:
    """The operators' word on one table (see the module docstring)."""

    state: str = ACTIVE
    note: Note | None = None  # who set the state
    triggers: Mapping[str, Note] = field(default_factory=dict)  # service -> request
    cancelled: Mapping[str, Note] = field(default_factory=dict)  # <service>-<instant> -> request
    retries: Mapping[str, Note] = field(default_factory=dict)  # <service>-<instant or *> -> request

    @property
    def claims_allowed(self) -> bool:
        return self.state == ACTIVE

    @property
    def is_default(self) -> bool:
        return self == TableControl()

    def is_cancelled(self, service: str, instant: str) -> Note | None:
        return self.cancelled.get(claim_name(service, instant))

    def retry_note(self, service: str, instant: str) -> Note | None:
        """The newest retry covering ``service``'s ``instant``."""
        notes = [self.retries.get(claim_name(service, instant)), self.retries.get(claim_name(service, "*"))]
        found = [n for n in notes if n is not None]
        return max(found, key=lambda n: n.at) if found else None

    def to_json(self) -> dict[str, object]:
        return {
            "state": self.state,
            "note": self.note.to_json() if self.note else None,
            "triggers": {k: v.to_json() for k, v in self.triggers.items()},
            "cancelled": {k: v.to_json() for k, v in self.cancelled.items()},
            "retries": {k: v.to_json() for k, v in self.retries.items()},
        }

    def encode(self) -> bytes:
        return json.dumps(self.to_json(), sort_keys=True).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> TableControl:
        """The document in ``data``; a damaged one reads as the default (and is logged), so that a bad write
        by hand cannot stop the daemon, and the next command rewrites it."""
        if not data:
            return cls()
        try:
            raw = json.loads(data)
            state = str(raw.get("state", ACTIVE))
            if state not in STATES:
                raise ValueError(f"unknown state {state!r}")
            note = raw.get("note")
            return cls(
                state=state,
                note=Note.from_json(note) if note else None,
                triggers={str(k): Note.from_json(v) for k, v in (raw.get("triggers") or {}).items()},
                cancelled={str(k): Note.from_json(v) for k, v in (raw.get("cancelled") or {}).items()},
                retries={str(k): Note.from_json(v) for k, v in (raw.get("retries") or {}).items()},
            )
        except (ValueError, TypeError, AttributeError) as e:
            logger.error("a control document is damaged (%s); read as active with no command", e)
            return cls()


#: Unicode categories a command's field may not hold: control characters (``\n``, ``\r``, ``\x1b``...),
#: invisible format characters (bidirectional overrides reorder a line as shown), line and paragraph
#: separators. Fields are logged and written to the table's history as given: none may start a forged line.
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


def check_one_line(name: str, value: str | None) -> None:
    """Raise :class:`ControlError` unless ``value`` is one line of plain text (see
    :data:`FORBIDDEN_CATEGORIES`), naming the field and the character."""
    bad = next((c for c in value or "" if unicodedata.category(c) in FORBIDDEN_CATEGORIES), None)
    if bad is not None:
        raise ControlError(
            f"{name} must be one line of text: it holds the control character U+{ord(bad):04X}"
        )


@dataclass(frozen=True)
class Command:
    """One operator command on one table."""

    command: str
    by: str
    reason: str = ""
    service: str | None = None
    instant: str | None = None
    at: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        if self.command not in COMMANDS:
            raise ControlError(f"unknown command {self.command!r} (one of {', '.join(COMMANDS)})")
        if self.command in NEEDS_SERVICE and not self.service:
            raise ControlError(f"{self.command} needs a service")
        if self.command in NEEDS_INSTANT and not self.instant:
            raise ControlError(f"{self.command} needs an instant")
        if not self.by.strip():
            raise ControlError("a command needs to say who gives it")
        for name in ("by", "reason", "service", "instant"):
            check_one_line(name, getattr(self, name))

    @property
    def note(self) -> Note:
        return Note(self.by, self.reason, self.at)

    def describe(self) -> str:
        what = " ".join(x for x in (self.command, self.service, self.instant) if x)
        return f"{what} by {self.by}" + (f" ({self.reason})" if self.reason else "")


#: The command that puts a table in each state.
_STATE_COMMANDS: Final = {ACTIVE: "resume", PAUSED: "pause", DRAINING: "drain"}


def commands_between(before: TableControl, after: TableControl) -> list[tuple[str, str, Note]]:
    """The commands that turned ``before`` into ``after`` (command, what it names: ``table``, a service or
    ``<service>-<instant>``, and its note), read off the two documents, so that a replica reports commands
    whoever issued them (``hoodied ctl``, the API of any replica). A state set again by a new note counts;
    triggers consumed, notes dropped and a drain that finished (``draining`` to ``paused``, the daemon's own
    step) do not."""
    out: list[tuple[str, str, Note]] = []
    drained = before.state == DRAINING and after.state == PAUSED
    if after.note is not None and (after.state, after.note) != (before.state, before.note) and not drained:
        out.append((_STATE_COMMANDS[after.state], "table", after.note))
    for command, notes, earlier in (
        ("trigger", after.triggers, before.triggers),
        ("cancel", after.cancelled, before.cancelled),
        ("retry", after.retries, before.retries),
    ):
        out += [(command, key, note) for key, note in sorted(notes.items()) if earlier.get(key) != note]
    return out


def apply_command(control: TableControl, command: Command) -> TableControl:
    """``control`` after ``command`` (stale one-shot notes dropped)."""
    control = prune(control, command.at)
    note = command.note
    c = command.command
    if c == "pause":
        return replace(control, state=PAUSED, note=note)
    if c == "drain":
        return control if control.state == PAUSED else replace(control, state=DRAINING, note=note)
    if c == "resume":
        return replace(control, state=ACTIVE, note=note)
    assert command.service is not None
    if c == "trigger":
        return replace(control, triggers={**control.triggers, command.service: note})
    key = claim_name(command.service, command.instant or ALL_INSTANTS)
    if c == "cancel":
        return replace(control, cancelled={**control.cancelled, key: note})
    # retry: forgets the back-off, and lifts a cancel of the same instant(s)
    cancelled = {
        k: v
        for k, v in control.cancelled.items()
        if not (k == key or (command.instant is None and k.startswith(f"{command.service}-")))
    }
    return replace(control, retries={**control.retries, key: note}, cancelled=cancelled)


def prune(control: TableControl, now: float) -> TableControl:
    """Drop retry and trigger notes older than their time to live."""
    retries = {k: v for k, v in control.retries.items() if now - v.at < RETRY_TTL}
    triggers = {k: v for k, v in control.triggers.items() if now - v.at < TRIGGER_TTL}
    if len(retries) == len(control.retries) and len(triggers) == len(control.triggers):
        return control
    return replace(control, retries=retries, triggers=triggers)


class ControlStore(Protocol):
    """Where the control documents live, shared by the replicas."""

    def read_all(self) -> dict[str, TableControl]:
        """Every table's document, by table key (tables without one are left out)."""

    def update(self, key: str, change: Callable[[TableControl], TableControl]) -> TableControl:
        """Apply ``change`` to table ``key``'s document atomically (compare-and-set, retried); returns the
        document written."""


#: Times a compare-and-set is retried before giving up.
_CAS_ATTEMPTS = 20


class ZooKeeperControlStore:
    """The documents as persistent nodes ``<base_path>/control/<table key>`` (several replicas)."""

    def __init__(self, zookeeper: ZooKeeper) -> None:
        self.zookeeper = zookeeper

    def read_all(self) -> dict[str, TableControl]:
        out: dict[str, TableControl] = {}
        for key in self.zookeeper.documents(ZOOKEEPER_FOLDER):
            found = self.zookeeper.read_document(ZOOKEEPER_FOLDER, key)
            if found is not None:
                out[key] = TableControl.decode(found[0])
        return out

    def update(self, key: str, change: Callable[[TableControl], TableControl]) -> TableControl:
        for _ in range(_CAS_ATTEMPTS):
            found = self.zookeeper.read_document(ZOOKEEPER_FOLDER, key)
            current = TableControl.decode(found[0]) if found else TableControl()
            new = change(current)
            if new == current and found is not None:
                return current
            if self.zookeeper.write_document(
                ZOOKEEPER_FOLDER, key, new.encode(), None if found is None else found[1]
            ):
                return new
        raise ControlError(f"the control document of {key} keeps changing; try again")


class FileControlStore:
    """The documents as files ``<state_dir>/<table key>.json`` (embedded mode: one replica and the CLI on one
    machine); updates hold an exclusive ``flock`` on ``<state_dir>/.lock`` and replace the file atomically."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)

    def read_all(self) -> dict[str, TableControl]:
        out: dict[str, TableControl] = {}
        try:
            names = sorted(os.listdir(self.folder))
        except FileNotFoundError:
            return out
        except OSError as e:
            raise ControlError(f"cannot list the control folder {self.folder}: {e}") from e
        for name in names:
            if name.endswith(".json") and not name.startswith("."):
                with contextlib.suppress(FileNotFoundError):
                    out[name[: -len(".json")]] = TableControl.decode((self.folder / name).read_bytes())
        return out

    def update(self, key: str, change: Callable[[TableControl], TableControl]) -> TableControl:
        if "/" in key or key.startswith("."):
            raise ControlError(f"{key!r} is not a table key")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            with open(self.folder / ".lock", "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                path = self.folder / f"{key}.json"
                try:
                    current = TableControl.decode(path.read_bytes())
                except FileNotFoundError:
                    current = TableControl()
                new = change(current)
                if new != current:
                    tmp = self.folder / f".{key}.{os.getpid()}.tmp"
                    tmp.write_bytes(new.encode())
                    os.replace(tmp, path)
                return new
        except OSError as e:
            raise ControlError(f"cannot update the control document {self.folder}/{key}.json: {e}") from e


def default_state_dir() -> str:
    """``$XDG_STATE_HOME/hoodied``, else ``~/.local/state/hoodied``."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "hoodied")


def read_token(path: str | None) -> str | None:
    """The admin token in ``path`` (a mounted Kubernetes secret), stripped; None without a path. Read at
    each check, so a rotated secret takes effect without a restart."""
    if not path:
        return None
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        logger.error("cannot read the admin token file %s: %s; mutating calls are refused", path, e)
        return None
    return token or None


__all__ = [
    "ACTIVE",
    "ALL_INSTANTS",
    "COMMANDS",
    "DRAINING",
    "NEEDS_INSTANT",
    "NEEDS_SERVICE",
    "PAUSED",
    "STATES",
    "Command",
    "ControlError",
    "ControlStore",
    "FileControlStore",
    "NotPending",
    "Note",
    "TableControl",
    "ZooKeeperControlStore",
    "apply_command",
    "commands_between",
    "default_state_dir",
    "prune",
    "read_token",
]
