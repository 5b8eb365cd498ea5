"""When to schedule a compaction: Hudi's ``hoodie.compact.inline.trigger.strategy`` and its bounds.

The trigger looks at the deltacommits that completed after the latest compaction (completed or pending; with
none, after the first deltacommit) and at the time since that compaction was requested:

- ``NUM_COMMITS`` (default): at least ``hoodie.compact.inline.max.delta.commits`` (5) deltacommits;
- ``TIME_ELAPSED``: at least ``hoodie.compact.inline.max.delta.seconds`` (3600) seconds;
- ``NUM_AND_TIME``: both; ``NUM_OR_TIME``: either.

:func:`evaluate_trigger` is a pure function of the timeline and ``now`` (tests pass the time in).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from hoodie.errors import InvalidWriteConfig
from hoodie.timeline.instant import COMPACTION, DELTA_COMMIT, State
from hoodie.timeline.instant_time import parse_instant_time
from hoodie.timeline.timeline import Timeline

TRIGGER_STRATEGY = "hoodie.compact.inline.trigger.strategy"
MAX_DELTA_COMMITS = "hoodie.compact.inline.max.delta.commits"
MAX_DELTA_COMMITS_DEFAULT = 5
MAX_DELTA_SECONDS = "hoodie.compact.inline.max.delta.seconds"
MAX_DELTA_SECONDS_DEFAULT = 60 * 60


class TriggerStrategy(StrEnum):
    NUM_COMMITS = "NUM_COMMITS"
    TIME_ELAPSED = "TIME_ELAPSED"
    NUM_AND_TIME = "NUM_AND_TIME"
    NUM_OR_TIME = "NUM_OR_TIME"


@dataclass(frozen=True)
class TriggerConfig:
    strategy: TriggerStrategy = TriggerStrategy.NUM_COMMITS
    max_delta_commits: int = MAX_DELTA_COMMITS_DEFAULT
    max_delta_seconds: int = MAX_DELTA_SECONDS_DEFAULT

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> TriggerConfig:
        raw = config.get(TRIGGER_STRATEGY)
        strategy = TriggerStrategy.NUM_COMMITS
        if raw:
            try:
                strategy = TriggerStrategy(raw.strip().upper())
            except ValueError:
                known = ", ".join(s.value for s in TriggerStrategy)
                raise InvalidWriteConfig(f"{TRIGGER_STRATEGY}={raw!r}: not a trigger ({known})") from None
        return cls(
            strategy=strategy,
            max_delta_commits=_positive(config, MAX_DELTA_COMMITS, MAX_DELTA_COMMITS_DEFAULT),
            max_delta_seconds=_positive(config, MAX_DELTA_SECONDS, MAX_DELTA_SECONDS_DEFAULT),
        )


@dataclass(frozen=True)
class TriggerDecision:
    """Whether the trigger fires, with the numbers it looked at and a sentence saying why."""

    fire: bool
    delta_commits: int
    elapsed_seconds: float
    reason: str


def evaluate_trigger(timeline: Timeline, config: TriggerConfig, now: dt.datetime) -> TriggerDecision:
    """Evaluate the trigger on ``timeline`` at ``now`` (naive, in the timeline's timezone)."""
    if now.tzinfo is not None:
        raise ValueError(
            "now must be a naive datetime in the table's timeline timezone, as instant times are"
        )
    last_compaction = None
    for instant in timeline:
        if instant.action == COMPACTION or (
            instant.state is State.COMPLETED and timeline.was_compaction(instant.time)
        ):
            last_compaction = instant.time
    deltas = [
        i.time
        for i in timeline.completed()
        if i.action == DELTA_COMMIT and (last_compaction is None or i.time > last_compaction)
    ]
    if not deltas:
        return TriggerDecision(False, 0, 0.0, "no deltacommit completed since the last compaction")
    since = last_compaction or deltas[0]
    start = parse_instant_time(since)
    if now.tzinfo is not None:
        raise ValueError(
            "now must be a naive datetime in the table's timeline timezone, as instant times are"
        )
    elapsed = max(0.0, (now - start).total_seconds())
    by_num = len(deltas) >= config.max_delta_commits
    by_time = elapsed >= config.max_delta_seconds
    fire = {
        TriggerStrategy.NUM_COMMITS: by_num,
        TriggerStrategy.TIME_ELAPSED: by_time,
        TriggerStrategy.NUM_AND_TIME: by_num and by_time,
        TriggerStrategy.NUM_OR_TIME: by_num or by_time,
    }[config.strategy]
    what = (
        f"{len(deltas)} deltacommit(s) (bound {config.max_delta_commits}) and {elapsed:.0f} s "
        f"(bound {config.max_delta_seconds} s) since {'compaction ' + since if last_compaction else since}"
    )
    verdict = "fires" if fire else "does not fire"
    return TriggerDecision(fire, len(deltas), elapsed, f"trigger {config.strategy.value} {verdict}: {what}")


def _positive(config: Mapping[str, str], key: str, default: int) -> int:
    raw = config.get(key)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise InvalidWriteConfig(f"{key}={raw!r}: not an integer") from None
    if value < 0:
        raise InvalidWriteConfig(f"{key}={raw!r}: must not be negative")
    return value


__all__ = ["TriggerConfig", "TriggerDecision", "TriggerStrategy", "evaluate_trigger"]
