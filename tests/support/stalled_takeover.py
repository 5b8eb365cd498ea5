"""Two executors of one instant, the first one stalled (issue 33): its store holds every request of its
process from a chosen write on (:mod:`support.stall`), past its heartbeat and table lock; a second executor
takes the instant over; then the first wakes. :func:`stalled_then_taken_over` returns how each ended, for
the tests to judge (tests/core/write/test_decision.py, tests/core/ttl/test_ttl.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from hoodie.errors import CommitConflict, LostRace
from hoodie.lock import FileSystemLock
from hoodie.storage import Storage
from hoodie.table_service import TableService
from hoodie.write.late_files import LateFiles
from hoodied.errors import ForeignInstant
from hoodied.jobs import JobRun, run_service_job
from support.stall import stalling_storage

#: A short heartbeat (1 s, expired after 2 s without a beat) and table lock (3 s), so a stall outlives both.
HEARTBEAT = {
    "hoodie.client.heartbeat.interval_in_ms": "1000",
    "hoodie.client.heartbeat.tolerable.misses": "2",
}
LOCK_EXPIRY = 3.0

Outcome = JobRun | BaseException

#: Where the first executor stalls: the PUT of its completed file (``{completed}``: its extension), of its
#: metadata table's deltacommit (its first file, or its completed file), of a base file it writes, or of its
#: decision (:mod:`hoodie.write.decision`).
TRIGGERS = {
    "completed-file": r"/{T}(_\d+)?\.{completed}$",
    "metadata-table": r"metadata/\.hoodie/(timeline/)?{T}\.deltacommit\.requested$",
    "metadata-completed": r"metadata/\.hoodie/(timeline/)?{T}(_\d+)?\.deltacommit$",
    "base-file": r"_\d+-\d+-\d+_{T}\.parquet$",
    "decision": r"decisions/{T}/\d+\.json$",
}


def trigger(stall_at: str, instant: str, completed: str) -> str:
    """The :data:`TRIGGERS` pattern ``stall_at`` for ``instant``, completed as ``completed``."""
    return TRIGGERS[stall_at].replace("{T}", instant).replace("{completed}", completed)


def completed_files(root: Path, instant: str, suffix: str = ".commit") -> list[str]:
    """The completed timeline files of ``instant`` (``suffix``: the completed action's extension)."""
    timeline = root / ".hoodie" / "timeline"
    folder = timeline if timeline.is_dir() else root / ".hoodie"
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(instant) and p.name.endswith(suffix))


def run_instant(
    storage: Storage,
    instant: str,
    replica: str,
    service: TableService,
    settings: Mapping[str, str],
    late_files: list[LateFiles] | None = None,
) -> JobRun:
    """Run ``service``'s ``instant`` as hoodied's job does (its claim, lease and fence), on the driver;
    ``late_files`` collects where attempts it took over from may land files."""
    lock = FileSystemLock(storage, expire_seconds=LOCK_EXPIRY, acquire_timeout=120)
    return run_service_job(
        None,
        service,
        storage,
        lock,
        instant,
        settings={**HEARTBEAT, **settings},
        replica=replica,
        foreign_after=0.0,
        late_files=late_files.append if late_files is not None else None,
    )


def take_over(
    root: Path,
    instant: str,
    service: TableService,
    settings: Mapping[str, str],
    late_files: list[LateFiles] | None = None,
) -> Outcome:
    """The second executor: retries while the stalled run's lease is fresh, then runs the instant."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return run_instant(Storage.for_uri(str(root)), instant, "b", service, settings, late_files)
        except ForeignInstant:
            assert time.monotonic() < deadline, "the stalled run's lease never expired"
            time.sleep(0.3)
        except (LostRace, CommitConflict) as e:
            return e


def stalled_then_taken_over(
    root: Path,
    instant: str,
    trigger: str,
    service: TableService,
    settings: Mapping[str, str] | None = None,
    *,
    meanwhile: Callable[[], None] | None = None,
    then_die: bool = False,
    late_files: list[LateFiles] | None = None,
) -> tuple[Outcome, Outcome]:
    """The first executor stalls at the first request whose path matches ``trigger``; once it is stalled,
    ``meanwhile`` runs (a writer's commit, say), the second executor takes the instant over, then the first
    is released (``then_die``: its held request lands and it sends no other, as a process killed while its
    request was held in the network; ``late_files`` collects the second's
    :class:`~hoodie.write.late_files.LateFiles`). Returns (first's outcome, second's)."""
    wanted = dict(settings or {})
    stalled, backend = stalling_storage(str(root), trigger)
    first: dict[str, Outcome] = {}

    def run_first() -> None:
        try:
            first["run"] = run_instant(stalled, instant, "a", service, wanted)
        except BaseException as e:  # what the woken run ends with is the test's to judge
            first["run"] = e

    thread = threading.Thread(target=run_first, name="stalled-executor", daemon=True)
    thread.start()
    assert backend.stalled(120), f"the first run never reached {trigger}: {first}"
    if meanwhile is not None:
        meanwhile()
    second = take_over(root, instant, service, wanted, late_files)
    backend.release(then_die=then_die)
    thread.join(120)
    assert not thread.is_alive(), "the woken run did not finish"
    return first["run"], second


def assert_the_right_run_won(stall_at: str, first: Outcome, second: Outcome) -> None:
    """Stalled after its decision, the first run won: the takeover rolled its decision forward and lost the
    race. Stalled at its decision, the takeover won: it voided the first, whose decision then failed."""
    if stall_at != "decision":
        assert isinstance(second, LostRace), second
        assert "decided to complete" in str(second), second
        assert isinstance(first, JobRun), first
    else:
        assert isinstance(second, JobRun), second
        assert isinstance(first, LostRace), first
        assert "voided" in str(first), first


__all__ = [
    "HEARTBEAT",
    "LOCK_EXPIRY",
    "TRIGGERS",
    "Outcome",
    "assert_the_right_run_won",
    "completed_files",
    "run_instant",
    "stalled_then_taken_over",
    "take_over",
    "trigger",
]
