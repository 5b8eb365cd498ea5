"""Instant times that increase strictly across every process writing a table.

Hudi takes instant times (and, in table versions 8+, completion times) under the table lock and, holding it,
sleeps the maximum expected clock skew between writers before letting go (``SkewAdjustingTimeGenerator``,
"TrueTime" semantics): whoever takes the lock next reads a clock that has passed every time handed out
before, even on another host whose clock is behind by up to the skew. We do the same, and on top re-read
the timeline under the lock and move past the greatest time on it (requested and completion times), so a
writer with a bad clock or another time zone can never make us go backwards.

Times are ``yyyyMMddHHmmssSSS`` in the table's timeline time zone: ``hoodie.table.timeline.timezone`` when
the table sets it (``UTC`` or ``LOCAL``), else the generator's own (Hudi's writers use their JVM's zone when
the key is absent, which we cannot know; the default here, UTC, is right for writers running in UTC, as
containers do). Tables created by :func:`hoodie.config.create_table_properties` set the key explicitly.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable

from hoodie.config import TIMELINE_TIMEZONE, TableConfig
from hoodie.errors import InvalidInstant
from hoodie.lock import DEFAULT_ACQUIRE_TIMEOUT_SECONDS, LockProvider
from hoodie.storage import Storage
from hoodie.timeline.timeline import Timeline

TIMEZONES = ("UTC", "LOCAL")
DEFAULT_MAX_CLOCK_SKEW_MS = 200

_FORMAT = "%Y%m%d%H%M%S"


def format_instant_time(moment: dt.datetime) -> str:
    """``yyyyMMddHHmmssSSS`` of a (naive or aware) datetime, in its own zone."""
    return moment.strftime(_FORMAT) + f"{moment.microsecond // 1000:03d}"


def parse_instant_time(t: str) -> dt.datetime:
    """The naive datetime of a 17-digit (or legacy 14-digit) instant time."""
    digits = t + "000" if len(t) == 14 else t
    if len(digits) != 17 or not digits.isdigit():
        raise InvalidInstant(f"{t!r} is not an instant time (yyyyMMddHHmmss[SSS])")
    try:
        base = dt.datetime.strptime(digits[:14], _FORMAT)
    except ValueError as e:
        raise InvalidInstant(f"{t!r} is not a calendar time: {e}") from None
    return base.replace(microsecond=int(digits[14:]) * 1000)


def _normalized(t: str) -> str:
    """17-digit form for comparisons: a 14-digit time is the start of its second."""
    return t + "000" if len(t) == 14 else t


def latest_time_on_timeline(timeline: Timeline) -> str | None:
    """The greatest requested or completion time of any instant on the timeline, in 17 digits."""
    best: str | None = None
    for entries in timeline.files.values():
        for instant, _ in entries:
            for t in (instant.time, instant.completion_time):
                if t is not None and (best is None or _normalized(t) > best):
                    best = _normalized(t)
    return best


class InstantTimeGenerator:
    """Hands out instant times (and completion times) under the table lock.

    ``timeline_timezone`` (``UTC`` or ``LOCAL``) is used for tables that do not set
    ``hoodie.table.timeline.timezone``; ``max_clock_skew_ms`` is how long the lock is held after reading the
    clock. ``clock`` returns the current UTC time (tests may pass a fake one).
    """

    def __init__(
        self,
        timeline_timezone: str = "UTC",
        max_clock_skew_ms: int = DEFAULT_MAX_CLOCK_SKEW_MS,
        *,
        lock_timeout: float = DEFAULT_ACQUIRE_TIMEOUT_SECONDS,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        zone = timeline_timezone.strip().upper()
        if zone not in TIMEZONES:
            raise ValueError(f"timeline time zone {timeline_timezone!r} is not UTC or LOCAL")
        if max_clock_skew_ms < 0:
            raise ValueError(f"max_clock_skew_ms={max_clock_skew_ms} is negative")
        self.timeline_timezone = zone
        self.max_clock_skew_ms = max_clock_skew_ms
        self._lock_timeout = lock_timeout
        self._clock = clock or (lambda: dt.datetime.now(dt.UTC))
        self._last: dict[str, str] = {}  # per table (base path): the last time handed out

    def next(self, storage: Storage, config: TableConfig, lock: LockProvider | None = None) -> str:
        """A new instant time, greater than every time on the table's timeline and every time this generator
        handed out for the table.

        Takes ``lock`` for the duration unless it is already held (the caller's critical section); with
        ``lock=None`` the caller must hold the table lock itself (or be the table's only writer).
        """
        if lock is None or lock.is_held:
            return self._generate(storage, config)
        lock.acquire(self._lock_timeout)
        try:
            return self._generate(storage, config)
        finally:
            lock.release()

    def provisional(self, config: TableConfig, timeline: Timeline) -> str:
        """The time :meth:`next` would hand out now, read without the lock and without the skew wait, and
        not handed out: for planning ahead of the lock. A plan found empty at this time needs no instant at
        all; a plan that is not empty is made again under the lock at the time :meth:`next` gives."""
        candidate = format_instant_time(self._now(self.zone_of(config)))
        floor = latest_time_on_timeline(timeline)
        if floor is not None and candidate <= floor:
            candidate = format_instant_time(parse_instant_time(floor) + dt.timedelta(milliseconds=1))
        return candidate

    def completion_time(self, storage: Storage, config: TableConfig, lock: LockProvider | None = None) -> str:
        """A completion time for a v8+ instant completing now: same rules as :meth:`next` (Hudi takes both
        from one generator), so it is greater than every requested and completion time on the timeline."""
        return self.next(storage, config, lock)

    def now_in_zone(self, config: TableConfig) -> dt.datetime:
        """The current time as a naive datetime in the table's timeline zone (as instant times read)."""
        return self._now(self.zone_of(config)).replace(tzinfo=None)

    # -- internals ---------------------------------------------------------------------------------------

    def zone_of(self, config: TableConfig) -> str:
        """The time zone instant times of this table are written in."""
        explicit = config.props.get(TIMELINE_TIMEZONE)
        if explicit is None or not explicit.strip():
            return self.timeline_timezone
        zone = explicit.strip().upper()
        if zone not in TIMEZONES:
            raise ValueError(f"{TIMELINE_TIMEZONE}={explicit!r} is not UTC or LOCAL")
        return zone

    def _now(self, zone: str) -> dt.datetime:
        now = self._clock()
        if now.tzinfo is None:
            now = now.replace(tzinfo=dt.UTC)
        return now.astimezone(dt.UTC) if zone == "UTC" else now.astimezone()

    def _generate(self, storage: Storage, config: TableConfig) -> str:
        candidate = format_instant_time(self._now(self.zone_of(config)))
        floor = latest_time_on_timeline(Timeline.load(storage, config))
        table = storage.full_path("")
        last = self._last.get(table)
        if last is not None and (floor is None or last > floor):
            floor = last
        if floor is not None and candidate <= floor:
            candidate = format_instant_time(parse_instant_time(floor) + dt.timedelta(milliseconds=1))
        # TrueTime: keep the lock until every writer's clock (within the skew) has passed the time handed out.
        if self.max_clock_skew_ms:
            time.sleep(self.max_clock_skew_ms / 1000)
        self._last[table] = candidate
        return candidate
