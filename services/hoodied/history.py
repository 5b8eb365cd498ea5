"""A table's durable history of what hoodied did to it: every job's record and every operator command, kept in
the table itself under ``.hoodie/.aux/hoodied/history/`` so that any replica, ``hoodied history`` and the API
see the same story whichever replica ran what.

One small JSON file per record, named ``<finished ms, 13 digits>-<kind>-<service>-<instant>-<replica>.json``:
an object store cannot append, and one file per record never races another replica's write. Names sort by
time, so the newest records are the last names of one listing. The folder is bounded: when it holds more
than ``keep`` + :data:`PRUNE_SLACK` records, the oldest beyond ``keep`` are deleted (a rotation in batches,
so that not every append pays for a delete). Writing a record is best effort: a storage error is logged and
the job's outcome stands.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Final

from hoodie.storage import Storage

logger = logging.getLogger(__name__)

HISTORY_FOLDER: Final = ".hoodie/.aux/hoodied/history"
#: Records kept per table by default.
DEFAULT_KEEP: Final = 500
#: Records over ``keep`` tolerated before a prune.
PRUNE_SLACK: Final = 50
JOB: Final = "job"
CONTROL: Final = "control"


@dataclass(frozen=True)
class HistoryRecord:
    """One job (``kind="job"``: ``outcome`` is the runner's kind: done, failed, cancelled...) or one
    operator command (``kind="control"``: ``outcome`` is the command; ``replica`` who applied it, ``by``
    who gave it)."""

    table: str
    service: str
    instant: str
    replica: str
    started_at: float
    finished_at: float
    outcome: str
    ok: bool
    kind: str = JOB
    rows: int = 0
    bytes: int = 0
    files: int = 0
    error: str | None = None
    by: str | None = None
    reason: str | None = None
    extra: Mapping[str, object] = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return max(0.0, self.finished_at - self.started_at)

    def to_json(self) -> dict[str, object]:
        out = asdict(self)
        out["extra"] = dict(self.extra)
        out["seconds"] = round(self.seconds, 3)
        return out

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> HistoryRecord:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in raw.items() if k in known}
        return cls(**values)  # type: ignore[arg-type]

    def file_name(self) -> str:
        parts = [
            f"{int(self.finished_at * 1000):013d}",
            self.kind,
            self.service,
            self.instant or "-",
            self.replica,
        ]
        return "-".join(_safe(p) for p in parts) + ".json"


def _safe(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9._]", "_", part) or "_"


def append(storage: Storage, record: HistoryRecord, *, keep: int = DEFAULT_KEEP) -> None:
    """Add ``record`` to the table's history, then rotate it when over ``keep`` + :data:`PRUNE_SLACK`."""
    try:
        storage.create(
            f"{HISTORY_FOLDER}/{record.file_name()}",
            json.dumps(record.to_json(), sort_keys=True, default=str).encode("utf-8"),
            overwrite=True,
        )
        names = _names(storage)
        if len(names) > keep + PRUNE_SLACK:
            for name in names[: len(names) - keep]:
                storage.delete(f"{HISTORY_FOLDER}/{name}")
    except Exception as e:  # the history is informational; what it records stands
        logger.warning(
            "could not record %s %s %s in the history: %s", record.kind, record.service, record.instant, e
        )


def _names(storage: Storage) -> list[str]:
    try:
        files = storage.list(HISTORY_FOLDER)
    except FileNotFoundError:
        return []
    return sorted(f.name for f in files if not f.is_dir and f.name.endswith(".json"))


def read_history(storage: Storage, *, limit: int = 50, service: str | None = None) -> list[HistoryRecord]:
    """The table's most recent records, newest first (at most ``limit``; only ``service``'s when given).
    Damaged records are skipped."""
    names = _names(storage)
    if service is not None:
        names = [n for n in names if n.split("-")[2:3] == [_safe(service)]]
    out: list[HistoryRecord] = []
    for name in reversed(names[-limit:] if limit > 0 else names):
        try:
            raw = json.loads(storage.read(f"{HISTORY_FOLDER}/{name}"))
            out.append(HistoryRecord.from_json(raw))
        except (FileNotFoundError, ValueError, TypeError) as e:
            logger.debug("skipping history record %s: %s", name, e)
    return out


def control_record(
    table: str, replica: str, command: str, *, by: str, reason: str, service: str = "", instant: str = ""
) -> HistoryRecord:
    """The record of an operator command (or of what the daemon did for one: ``drained``, ``triggered``)."""
    now = time.time()
    return HistoryRecord(
        table=table,
        service=service or "table",
        instant=instant,
        replica=replica,
        started_at=now,
        finished_at=now,
        outcome=command,
        ok=True,
        kind=CONTROL,
        by=by,
        reason=reason,
    )


__all__ = [
    "CONTROL",
    "DEFAULT_KEEP",
    "HISTORY_FOLDER",
    "JOB",
    "PRUNE_SLACK",
    "HistoryRecord",
    "append",
    "control_record",
    "read_history",
]
