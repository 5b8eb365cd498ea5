"""The compaction trigger (``hoodie.compact.inline.trigger.strategy`` and its bounds): configuration, and
when it fires on a timeline, in both timeline layouts.

Timelines are built from file names only (:meth:`Timeline.from_file_names`); ``now`` is passed in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable

import pytest

from hoodie.compaction.trigger import (
    TriggerConfig,
    TriggerDecision,
    TriggerStrategy,
    evaluate_trigger,
)
from hoodie.errors import InvalidWriteConfig
from hoodie.timeline.timeline import Timeline

TRIGGER = "hoodie.compact.inline.trigger.strategy"
MAX_COMMITS = "hoodie.compact.inline.max.delta.commits"
MAX_SECONDS = "hoodie.compact.inline.max.delta.seconds"

LAYOUTS = pytest.mark.parametrize("layout", [1, 2])


# -- builders ------------------------------------------------------------------------------------------------


def at(hour: int = 0, minute: int = 0, second: int = 0, ms: int = 0) -> str:
    """An instant time on 2024-01-01."""
    return f"20240101{hour:02d}{minute:02d}{second:02d}{ms:03d}"


def moment(time: str) -> dt.datetime:
    """The naive datetime of a 17-digit instant time (computed here, independently of the code under test)."""
    return dt.datetime(
        int(time[0:4]),
        int(time[4:6]),
        int(time[6:8]),
        int(time[8:10]),
        int(time[10:12]),
        int(time[12:14]),
        int(time[14:17] or "0") * 1000,
    )


def completed(time: str, action: str, layout: int) -> str:
    """The completed file: ``<time>.<action>`` (layout 1) or ``<time>_<completion>.<action>`` (layout 2)."""
    if layout == 1:
        return f"{time}.{action}"
    done = moment(time) + dt.timedelta(seconds=1, milliseconds=500)
    return f"{time}_{done:%Y%m%d%H%M%S}{done.microsecond // 1000:03d}.{action}"


def inflight_delta(time: str) -> list[str]:
    return [f"{time}.deltacommit.requested", f"{time}.deltacommit.inflight"]


def delta(time: str, layout: int) -> list[str]:
    return [*inflight_delta(time), completed(time, "deltacommit", layout)]


def compaction_done(time: str, layout: int) -> list[str]:
    return [f"{time}.compaction.requested", f"{time}.compaction.inflight", completed(time, "commit", layout)]


def compaction_requested(time: str) -> list[str]:
    return [f"{time}.compaction.requested"]


def compaction_inflight(time: str) -> list[str]:
    return [f"{time}.compaction.requested", f"{time}.compaction.inflight"]


def plain_commit(time: str, layout: int) -> list[str]:
    return [f"{time}.commit.requested", f"{time}.inflight", completed(time, "commit", layout)]


def timeline(layout: int, *groups: Iterable[str]) -> Timeline:
    names = [name for group in groups for name in group]
    folder = ".hoodie" if layout == 1 else ".hoodie/timeline"
    return Timeline.from_file_names(names, layout_version=layout, folder=folder)


def decide(
    tl: Timeline,
    now: str | dt.datetime,
    *,
    strategy: TriggerStrategy = TriggerStrategy.NUM_COMMITS,
    max_delta_commits: int = 5,
    max_delta_seconds: int = 3600,
) -> TriggerDecision:
    when = moment(now) if isinstance(now, str) else now
    return evaluate_trigger(tl, TriggerConfig(strategy, max_delta_commits, max_delta_seconds), when)


# -- TriggerConfig.from_config -------------------------------------------------------------------------------


def test_from_empty_config_takes_hudis_defaults() -> None:
    config = TriggerConfig.from_config({})
    assert config == TriggerConfig()
    assert config.strategy is TriggerStrategy.NUM_COMMITS
    assert config.max_delta_commits == 5
    assert config.max_delta_seconds == 3600


def test_from_config_reads_every_key() -> None:
    config = TriggerConfig.from_config(
        {TRIGGER: "NUM_AND_TIME", MAX_COMMITS: "12", MAX_SECONDS: "600", "hoodie.other": "x"}
    )
    assert config == TriggerConfig(TriggerStrategy.NUM_AND_TIME, 12, 600)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("NUM_COMMITS", TriggerStrategy.NUM_COMMITS),
        ("TIME_ELAPSED", TriggerStrategy.TIME_ELAPSED),
        ("NUM_AND_TIME", TriggerStrategy.NUM_AND_TIME),
        ("NUM_OR_TIME", TriggerStrategy.NUM_OR_TIME),
        ("num_or_time", TriggerStrategy.NUM_OR_TIME),
        ("Time_Elapsed", TriggerStrategy.TIME_ELAPSED),
        ("  num_and_time\n", TriggerStrategy.NUM_AND_TIME),
        ("", TriggerStrategy.NUM_COMMITS),
    ],
)
def test_from_config_strategy(raw: str, expected: TriggerStrategy) -> None:
    assert TriggerConfig.from_config({TRIGGER: raw}).strategy is expected


@pytest.mark.parametrize("raw", ["NUM", "NUM-COMMITS", "NUMCOMMITS", "TIME", "NUM_XOR_TIME", "   x  "])
def test_from_config_refuses_unknown_strategies_naming_key_and_value(raw: str) -> None:
    with pytest.raises(InvalidWriteConfig) as excinfo:
        TriggerConfig.from_config({TRIGGER: raw})
    message = str(excinfo.value)
    assert TRIGGER in message
    assert repr(raw) in message


@pytest.mark.parametrize(
    ("key", "raw", "attribute", "expected"),
    [
        (MAX_COMMITS, "1", "max_delta_commits", 1),
        (MAX_COMMITS, "0", "max_delta_commits", 0),
        (MAX_COMMITS, " 7 ", "max_delta_commits", 7),
        (MAX_COMMITS, "", "max_delta_commits", 5),
        (MAX_COMMITS, "  ", "max_delta_commits", 5),
        (MAX_SECONDS, "60", "max_delta_seconds", 60),
        (MAX_SECONDS, "0", "max_delta_seconds", 0),
        (MAX_SECONDS, "86400", "max_delta_seconds", 86400),
        (MAX_SECONDS, "", "max_delta_seconds", 3600),
    ],
)
def test_from_config_bounds(key: str, raw: str, attribute: str, expected: int) -> None:
    assert getattr(TriggerConfig.from_config({key: raw}), attribute) == expected


@pytest.mark.parametrize("key", [MAX_COMMITS, MAX_SECONDS])
@pytest.mark.parametrize("raw", ["abc", "1.5", "-1", "5s", "1e2", "-0x1"])
def test_from_config_refuses_bad_bounds_naming_key_and_value(key: str, raw: str) -> None:
    with pytest.raises(InvalidWriteConfig) as excinfo:
        TriggerConfig.from_config({key: raw})
    message = str(excinfo.value)
    assert key in message
    assert repr(raw) in message


# -- no deltacommit: never fires -----------------------------------------------------------------------------


def _no_delta_timelines(layout: int) -> dict[str, Timeline]:
    return {
        "empty": timeline(layout),
        "inflight deltacommits only": timeline(
            layout, inflight_delta(at(0, 1)), [f"{at(0, 2)}.deltacommit.requested"]
        ),
        "completed compaction only": timeline(layout, compaction_done(at(0, 1), layout)),
        "deltas before a completed compaction": timeline(
            layout, delta(at(0, 1), layout), delta(at(0, 2), layout), compaction_done(at(0, 3), layout)
        ),
        "deltas before a pending compaction": timeline(
            layout, delta(at(0, 1), layout), compaction_requested(at(0, 3)), inflight_delta(at(0, 4))
        ),
        "plain commits only": timeline(layout, plain_commit(at(0, 1), layout)),
    }


@LAYOUTS
@pytest.mark.parametrize("strategy", list(TriggerStrategy))
def test_no_deltacommit_since_the_last_compaction_never_fires(layout: int, strategy: TriggerStrategy) -> None:
    for name, tl in _no_delta_timelines(layout).items():
        # bounds of 0 would fire on anything: the trigger must not fire without a deltacommit.
        decision = decide(tl, at(23), strategy=strategy, max_delta_commits=0, max_delta_seconds=0)
        assert (decision.fire, decision.delta_commits, decision.elapsed_seconds) == (False, 0, 0.0), name
        assert decision.reason == "no deltacommit completed since the last compaction", name


# -- NUM_COMMITS ---------------------------------------------------------------------------------------------


@LAYOUTS
@pytest.mark.parametrize(("count", "fires"), [(1, False), (4, False), (5, True), (6, True), (9, True)])
def test_num_commits_without_compaction_counts_every_completed_deltacommit(
    layout: int, count: int, fires: bool
) -> None:
    tl = timeline(layout, *(delta(at(0, m), layout) for m in range(count)), inflight_delta(at(0, 30)))
    decision = decide(tl, at(2))
    assert decision.fire is fires
    assert decision.delta_commits == count
    assert decision.elapsed_seconds == 7200.0  # from the first deltacommit, 00:00
    verdict = "fires" if fires else "does not fire"
    assert decision.reason.startswith(f"trigger NUM_COMMITS {verdict}: {count} deltacommit(s) (bound 5)")


@LAYOUTS
@pytest.mark.parametrize(("bound", "fires"), [(0, True), (1, True), (2, True), (3, False)])
def test_num_commits_bound(layout: int, bound: int, fires: bool) -> None:
    tl = timeline(layout, delta(at(0, 1), layout), delta(at(0, 2), layout))
    decision = decide(tl, at(0, 3), max_delta_commits=bound)
    assert (decision.fire, decision.delta_commits) == (fires, 2)


@LAYOUTS
def test_counts_only_completed_deltacommits_after_a_completed_compaction(layout: int) -> None:
    tl = timeline(
        layout,
        delta(at(0, 1), layout),
        delta(at(0, 2), layout),
        compaction_done(at(0, 3), layout),
        delta(at(0, 4), layout),
        delta(at(0, 5), layout),
        inflight_delta(at(0, 6)),
        [f"{at(0, 7)}.deltacommit.requested"],
    )
    decision = decide(tl, at(1, 3), max_delta_commits=2)
    assert decision.fire is True
    assert decision.delta_commits == 2
    assert decision.elapsed_seconds == 3600.0  # from the compaction's instant time, 00:03
    assert f"since compaction {at(0, 3)}" in decision.reason
    assert decide(tl, at(1, 3), max_delta_commits=3).fire is False


@LAYOUTS
@pytest.mark.parametrize(
    "pending", [compaction_requested, compaction_inflight], ids=["requested", "inflight"]
)
def test_a_pending_compaction_counts_as_the_last_compaction(
    layout: int, pending: Callable[[str], list[str]]
) -> None:
    tl = timeline(
        layout,
        delta(at(0, 1), layout),
        delta(at(0, 2), layout),
        delta(at(0, 3), layout),
        pending(at(0, 10)),
        delta(at(0, 11), layout),
        inflight_delta(at(0, 12)),
    )
    decision = decide(tl, at(0, 40), strategy=TriggerStrategy.NUM_OR_TIME, max_delta_commits=2)
    assert decision.fire is False
    assert decision.delta_commits == 1
    assert decision.elapsed_seconds == 1800.0  # from the pending compaction, 00:10
    assert f"since compaction {at(0, 10)}" in decision.reason


@LAYOUTS
def test_the_latest_compaction_counts_completed_or_pending(layout: int) -> None:
    pending_last = timeline(
        layout,
        compaction_done(at(0, 1), layout),
        delta(at(0, 2), layout),
        delta(at(0, 3), layout),
        compaction_inflight(at(0, 4)),
        delta(at(0, 5), layout),
    )
    decision = decide(pending_last, at(0, 14))
    assert (decision.delta_commits, decision.elapsed_seconds) == (1, 600.0)

    completed_last = timeline(
        layout,
        compaction_requested(at(0, 1)),
        delta(at(0, 2), layout),
        compaction_done(at(0, 3), layout),
        delta(at(0, 4), layout),
        delta(at(0, 5), layout),
    )
    decision = decide(completed_last, at(0, 13))
    assert (decision.delta_commits, decision.elapsed_seconds) == (2, 600.0)


def _not_compactions(time: str, layout: int) -> dict[str, list[str]]:
    return {
        "commit": plain_commit(time, layout),
        "pending commit": [f"{time}.commit.requested", f"{time}.inflight"],
        "replacecommit": [
            f"{time}.replacecommit.requested",
            f"{time}.replacecommit.inflight",
            completed(time, "replacecommit", layout),
        ],
        "clean": [f"{time}.clean.requested", f"{time}.clean.inflight", completed(time, "clean", layout)],
        "rollback": [
            f"{time}.rollback.requested",
            f"{time}.rollback.inflight",
            completed(time, "rollback", layout),
        ],
        "pending logcompaction": [f"{time}.logcompaction.requested", f"{time}.logcompaction.inflight"],
    }


@LAYOUTS
@pytest.mark.parametrize(
    "kind", ["commit", "pending commit", "replacecommit", "clean", "rollback", "pending logcompaction"]
)
def test_other_actions_are_not_compactions(layout: int, kind: str) -> None:
    tl = timeline(
        layout, delta(at(0, 1), layout), _not_compactions(at(0, 2), layout)[kind], delta(at(0, 3), layout)
    )
    decision = decide(tl, at(1, 1), strategy=TriggerStrategy.NUM_AND_TIME, max_delta_commits=2)
    assert decision.fire is True
    assert decision.delta_commits == 2
    assert decision.elapsed_seconds == 3600.0  # from the first deltacommit, 00:01
    assert f"since {at(0, 1)}" in decision.reason
    assert "since compaction" not in decision.reason


# -- TIME_ELAPSED --------------------------------------------------------------------------------------------


@LAYOUTS
@pytest.mark.parametrize(
    ("seconds", "fires"), [(0, False), (1, False), (3599, False), (3600, True), (3601, True)]
)
def test_time_elapsed_since_the_last_compaction(layout: int, seconds: int, fires: bool) -> None:
    tl = timeline(layout, compaction_done(at(5), layout), delta(at(5, 30), layout))
    now = moment(at(5)) + dt.timedelta(seconds=seconds)
    decision = decide(tl, now, strategy=TriggerStrategy.TIME_ELAPSED)
    assert decision.fire is fires
    assert decision.elapsed_seconds == float(seconds)
    assert decision.delta_commits == 1


@LAYOUTS
def test_time_elapsed_without_compaction_counts_from_the_first_deltacommit(layout: int) -> None:
    tl = timeline(layout, delta(at(1), layout), delta(at(1, 30), layout), delta(at(1, 59), layout))
    decision = decide(tl, at(2), strategy=TriggerStrategy.TIME_ELAPSED)
    assert decision.fire is True
    assert decision.elapsed_seconds == 3600.0
    assert decision.delta_commits == 3


def test_time_elapsed_is_measured_from_the_instant_time_not_the_completion_time() -> None:
    # layout 2: the compaction was requested at 00:00 and completed at 00:30.
    names = [f"{at(0)}.compaction.requested", f"{at(0)}.compaction.inflight", f"{at(0)}_{at(0, 30)}.commit"]
    tl = timeline(2, names, delta(at(0, 40), 2))
    decision = decide(tl, at(1), strategy=TriggerStrategy.TIME_ELAPSED)
    assert decision.elapsed_seconds == 3600.0
    assert decision.fire is True


@pytest.mark.parametrize(
    ("now_ms", "elapsed", "fires"), [(249, 0.999, False), (250, 1.0, True), (251, 1.001, True)]
)
def test_time_elapsed_has_millisecond_precision(now_ms: int, elapsed: float, fires: bool) -> None:
    tl = timeline(1, compaction_done(at(0, 0, 0, 250), 1), delta(at(0, 0, 0, 500), 1))
    now = moment(at(0, 0, 1, now_ms))
    decision = decide(tl, now, strategy=TriggerStrategy.TIME_ELAPSED, max_delta_seconds=1)
    assert decision.elapsed_seconds == pytest.approx(elapsed, abs=1e-9)
    assert decision.fire is fires


@pytest.mark.parametrize("strategy", [TriggerStrategy.TIME_ELAPSED, TriggerStrategy.NUM_AND_TIME])
def test_now_before_the_last_compaction_is_no_time_elapsed(strategy: TriggerStrategy) -> None:
    tl = timeline(1, compaction_done(at(5), 1), delta(at(5, 1), 1))
    decision = decide(tl, at(4), strategy=strategy, max_delta_commits=1, max_delta_seconds=1)
    assert decision.elapsed_seconds == 0.0
    assert decision.fire is False
    # NUM_COMMITS does not look at the time.
    assert decide(tl, at(4), max_delta_commits=1).fire is True


def test_legacy_14_digit_instant_times() -> None:
    tl = Timeline.from_file_names(
        [
            "20240101000000.compaction.requested",
            "20240101000000.compaction.inflight",
            "20240101000000.commit",
            "20240101000000500.deltacommit",  # same second as the compaction, but after it
            "20240101000100.deltacommit",
        ],
        layout_version=1,
        folder=".hoodie",
    )
    decision = decide(tl, at(1), strategy=TriggerStrategy.NUM_AND_TIME, max_delta_commits=2)
    assert decision.delta_commits == 2
    assert decision.elapsed_seconds == 3600.0
    assert decision.fire is True
    assert "since compaction 20240101000000" in decision.reason


# -- combined strategies -------------------------------------------------------------------------------------

# (deltacommits since the compaction, seconds since it) -> whether (num, time) bounds are met with 5 / 3600.
SCENARIOS = {"both": (5, 3600), "num only": (5, 3599), "time only": (4, 3600), "neither": (4, 3599)}
EXPECTED = {
    TriggerStrategy.NUM_COMMITS: {"both": True, "num only": True, "time only": False, "neither": False},
    TriggerStrategy.TIME_ELAPSED: {"both": True, "num only": False, "time only": True, "neither": False},
    TriggerStrategy.NUM_AND_TIME: {"both": True, "num only": False, "time only": False, "neither": False},
    TriggerStrategy.NUM_OR_TIME: {"both": True, "num only": True, "time only": True, "neither": False},
}


@LAYOUTS
@pytest.mark.parametrize("strategy", list(TriggerStrategy))
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_every_strategy_on_every_scenario(layout: int, strategy: TriggerStrategy, scenario: str) -> None:
    count, seconds = SCENARIOS[scenario]
    tl = timeline(
        layout,
        delta(at(0, 0, 30), layout),  # before the compaction: not counted
        compaction_done(at(1), layout),
        *(delta(at(1, m + 1), layout) for m in range(count)),
        inflight_delta(at(1, 50)),
    )
    now = moment(at(1)) + dt.timedelta(seconds=seconds)
    decision = evaluate_trigger(tl, TriggerConfig.from_config({TRIGGER: strategy.value}), now)
    assert decision.fire is EXPECTED[strategy][scenario]
    assert decision.delta_commits == count
    assert decision.elapsed_seconds == float(seconds)
    verdict = "fires" if decision.fire else "does not fire"
    assert decision.reason.startswith(f"trigger {strategy.value} {verdict}: ")
    assert decision.reason.endswith(f"since compaction {at(1)}")


# -- now must be naive ---------------------------------------------------------------------------------------

AWARE = [
    dt.datetime(2024, 1, 1, 2, tzinfo=dt.UTC),
    dt.datetime(2024, 1, 1, 2, tzinfo=dt.timezone(dt.timedelta(hours=2))),
]


@pytest.mark.parametrize("now", AWARE, ids=["utc", "plus2"])
@pytest.mark.parametrize("strategy", list(TriggerStrategy))
def test_an_aware_now_is_refused(now: dt.datetime, strategy: TriggerStrategy) -> None:
    tl = timeline(1, delta(at(0, 1), 1))
    with pytest.raises(ValueError, match="naive"):
        evaluate_trigger(tl, TriggerConfig(strategy=strategy), now)


@pytest.mark.parametrize("now", AWARE, ids=["utc", "plus2"])
def test_an_aware_now_is_refused_even_without_deltacommits(now: dt.datetime) -> None:
    with pytest.raises(ValueError, match="naive"):
        evaluate_trigger(timeline(1), TriggerConfig(), now)
