"""Archival planning (``hoodie/archival/plan.py``): which instants Hudi's rules let archival take, on
timelines built from file names only, in both timeline layouts. Each boundary rule is tested alone, with
the others out of the way (a MERGE_ON_READ table's compaction rule is held back by giving its trigger a
time-only strategy)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest

from hoodie.archival.plan import (
    ArchivalConfig,
    ArchivalInputs,
    ArchivalPlan,
    MetadataTableState,
    plan_archival,
)
from hoodie.clean.plan import CleanConfig, CleanPolicy
from hoodie.compaction.trigger import TriggerConfig, TriggerStrategy
from hoodie.config import TableConfig
from hoodie.errors import InvalidWriteConfig
from hoodie.new_table import new_table_properties
from hoodie.storage import Storage
from hoodie.table import Table
from hoodie.timeline.metadata import ActionInstant, CleanerPlan
from hoodie.timeline.timeline import Timeline

NO_TRIGGER = TriggerConfig(strategy=TriggerStrategy.TIME_ELAPSED)
KEEP_FILES = CleanConfig(policy=CleanPolicy.KEEP_LATEST_FILE_VERSIONS)
SMALL = ArchivalConfig(min_commits=4, max_commits=6)
NO_MDT = MetadataTableState(present=False)


def t(i: int) -> str:
    """The i-th instant time (one a minute)."""
    return f"2024010110{i // 60:02d}{i % 60:02d}000"


def done(i: int, action: str, layout: int) -> str:
    """The completed file of instant ``i``; v8+ names carry a completion time one second later."""
    if layout >= 2:
        return f"{t(i)}_{t(i)[:-3]}999.{action}"
    return f"{t(i)}.{action}"


def view(tmp_path: Path, names: Iterable[str], *, layout: int, mor: bool = False) -> Table:
    version = 8 if layout >= 2 else 6
    kind = "MERGE_ON_READ" if mor else "COPY_ON_WRITE"
    config = TableConfig(new_table_properties("t", kind, version, ["id"]))
    timeline = Timeline.from_file_names(names, layout_version=layout, folder=config.timeline_path)
    return Table(Storage.for_uri(str(tmp_path)), config, timeline)


def plan(
    table: Table,
    config: ArchivalConfig = SMALL,
    *,
    clean: CleanConfig = KEEP_FILES,
    trigger: TriggerConfig = NO_TRIGGER,
    clean_plan: CleanerPlan | None = None,
    mdt: MetadataTableState = NO_MDT,
    data: Timeline | None = None,
) -> ArchivalPlan:
    return plan_archival(ArchivalInputs(table, clean_plan, mdt, data), config, clean, trigger)


def times(p: ArchivalPlan) -> list[str]:
    return [i.time for i in p.instants]


def commits(n: int, layout: int, action: str = "commit") -> list[str]:
    return [done(i, action, layout) for i in range(n)]


LAYOUTS = pytest.mark.parametrize("layout", [1, 2])


@LAYOUTS
def test_nothing_goes_until_more_than_the_maximum_are_active(tmp_path: Path, layout: int) -> None:
    assert plan(view(tmp_path, commits(6, layout), layout=layout)).instants == ()
    seven = plan(view(tmp_path, commits(7, layout), layout=layout))
    assert times(seven) == [t(0), t(1), t(2)]  # down to the minimum of 4
    assert "7 commit(s) active" in seven.reason


@LAYOUTS
def test_the_earliest_pending_write_keeps_the_commit_before_it(tmp_path: Path, layout: int) -> None:
    names = [*commits(10, layout), f"{t(2)}.commit.requested"]
    names.remove(done(2, "commit", layout))
    p = plan(view(tmp_path, names, layout=layout))
    assert times(p) == [t(0)]  # t(1) is the latest completed commit before the pending t(2): it stays


@LAYOUTS
def test_an_instant_removed_while_late_files_may_land_keeps_the_commit_before_it(
    tmp_path: Path, layout: int
) -> None:
    """A takeover removed t(2) while voiding an attempt whose held PUT may still land a file named t(2)
    (hoodie.write.late_files): archiving t(1) would put t(2) before the timeline's start, where readers
    take it for an archived commit, so t(1) stays, as before a pending write."""
    names = commits(10, layout)
    names.remove(done(2, "commit", layout))
    table = view(tmp_path, names, layout=layout)
    assert times(plan(table)) == [t(0), t(1), t(3), t(4), t(5)]
    held = plan_archival(ArchivalInputs(table, None, NO_MDT, None, (t(2),)), SMALL, KEEP_FILES, NO_TRIGGER)
    assert times(held) == [t(0)]


@LAYOUTS
def test_a_pending_instant_with_no_commit_before_it_holds_everything(tmp_path: Path, layout: int) -> None:
    names = [*commits(10, layout), f"{t(0)}.commit.requested"]
    names.remove(done(0, "commit", layout))
    assert plan(view(tmp_path, names, layout=layout)).instants == ()


def test_the_next_compactions_deltacommits_stay(tmp_path: Path) -> None:
    names = [done(0, "commit", 2)] + [done(i, "deltacommit", 2) for i in range(1, 12)]
    table = view(tmp_path, names, layout=2, mor=True)
    counted = TriggerConfig(strategy=TriggerStrategy.NUM_COMMITS, max_delta_commits=5)
    # 11 deltacommits since the compaction at t(0): the last 5 the next compaction counts stay, so the
    # 7th of them (t(7)) is the first kept; the minimum (4 commits) would have let t(0)..t(7) go.
    assert times(plan(table, trigger=counted)) == [t(i) for i in range(7)]
    few = TriggerConfig(strategy=TriggerStrategy.NUM_COMMITS, max_delta_commits=50)
    assert plan(table, trigger=few).instants == ()  # fewer than 50 since the compaction: it holds t(0) on


@LAYOUTS
def test_replacecommits_stay_until_a_clean_passed_them(tmp_path: Path, layout: int) -> None:
    names = commits(10, layout)
    names[3] = done(3, "replacecommit", layout)
    assert times(plan(view(tmp_path, names, layout=layout))) == [t(0), t(1), t(2)]
    names.append(done(9, "clean", layout).replace(t(9), "20240101105900000", 1))
    retained = CleanerPlan(
        policy="KEEP_LATEST_COMMITS", earliest_instant_to_retain=ActionInstant(t(5), "commit", "COMPLETED")
    )
    cleaned = plan(view(tmp_path, names, layout=layout), clean_plan=retained)
    assert t(3) in times(cleaned)  # the clean retained from t(5) on: the replaced groups are gone
    early = CleanerPlan(
        policy="KEEP_LATEST_COMMITS", earliest_instant_to_retain=ActionInstant(t(2), "commit", "COMPLETED")
    )
    assert times(plan(view(tmp_path, names, layout=layout), clean_plan=early)) == [t(0), t(1), t(2)]


def test_the_metadata_table_holds_archival_at_its_latest_compaction(tmp_path: Path) -> None:
    table = view(tmp_path, commits(10, 2), layout=2)
    assert plan(table, mdt=MetadataTableState(present=True)).instants == ()
    assert "no compaction yet" in plan(table, mdt=MetadataTableState(present=True)).reason
    # Compacted after t(2) completed (t(2) ...999) but before t(3) did: t(3) is the first to stay.
    held = plan(table, mdt=MetadataTableState(present=True, latest_compaction=f"{t(2)[:-3]}999"))
    assert times(held) == [t(0), t(1), t(2)]


@LAYOUTS
def test_savepoints_hold_archival_unless_beyond_savepoint(tmp_path: Path, layout: int) -> None:
    # A savepoint takes the time of the commit it holds.
    names = [*commits(10, layout), f"{t(2)}.savepoint" if layout == 1 else f"{t(2)}_{t(2)[:-3]}998.savepoint"]
    table = view(tmp_path, names, layout=layout)
    assert times(plan(table)) == [t(0), t(1)]
    beyond = ArchivalConfig(min_commits=4, max_commits=6, beyond_savepoint=True)
    # Hudi limits to (active commits - minimum) = 6 after skipping the savepointed one: t(6) goes too.
    assert times(plan(table, beyond)) == [t(0), t(1), t(3), t(4), t(5), t(6)]


def test_cleans_and_rollbacks_before_the_newest_archived_commit_go_with_it(tmp_path: Path) -> None:
    rollback, clean, late_clean = "20240101100000500", "20240101100001500", "20240101100008500"
    names = [*commits(10, 2), f"{rollback}_{rollback}.rollback", f"{clean}_{clean}.clean"]
    names.append(f"{late_clean}_{late_clean}.clean")
    p = plan(view(tmp_path, names, layout=2))
    # Commits t(0)..t(5) go (10 active, 4 kept); the rollback and the clean before t(5) go with them, the
    # clean after it stays.
    assert times(p) == [t(0), rollback, t(1), clean, t(2), t(3), t(4), t(5)]


def test_the_cleaners_retention_raises_the_bounds(tmp_path: Path) -> None:
    table = view(tmp_path, commits(12, 2), layout=2)
    retain = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=6)
    p = plan(table, clean=retain)
    # The cleaner keeps t(6)..t(11): 5 commits after its earliest retained one + 2 = 7 to keep, 9 at most.
    assert (p.min_commits, p.max_commits) == (7, 9)
    assert times(p) == [t(0), t(1), t(2), t(3), t(4)]


def test_a_metadata_table_keeps_what_its_data_table_has_not_passed(tmp_path: Path) -> None:
    mdt = view(tmp_path, [done(i, "deltacommit", 2) for i in range(10)], layout=2, mor=True)
    data = Timeline.from_file_names(
        [done(3, "commit", 2), f"{t(5)}.commit.requested"], layout_version=2, folder=".hoodie/timeline"
    )
    assert times(plan(mdt, data=data)) == [t(0), t(1), t(2)]


def test_settings_are_checked_as_hudi_checks_them() -> None:
    assert ArchivalConfig.from_config({}) == ArchivalConfig()
    with pytest.raises(InvalidWriteConfig, match=r"hoodie.keep.max.commits=5 must be greater"):
        ArchivalConfig.from_config({"hoodie.keep.min.commits": "20", "hoodie.keep.max.commits": "5"})
    with pytest.raises(InvalidWriteConfig, match=r"hoodie.clean.commits.retained=10"):
        ArchivalConfig.from_config({"hoodie.keep.min.commits": "8", "hoodie.keep.max.commits": "12"})
    ok = ArchivalConfig.from_config(
        {"hoodie.keep.min.commits": "4", "hoodie.keep.max.commits": "6", "hoodie.clean.commits.retained": "3"}
    )
    assert (ok.min_commits, ok.max_commits) == (4, 6)


@LAYOUTS
def test_a_metadata_tables_initial_instant_is_no_calendar_time_and_plans_anyway(
    tmp_path: Path, layout: int
) -> None:
    """A metadata table starts with ``00000000000000000`` (v8+; ``...010`` on v6), below every calendar
    time: the retention is counted from its newest calendar commit (before, archival failed with
    ``InvalidInstant`` while it was the newest, right after the metadata table was created)."""
    v8 = "00000000000000000_00000000000000001.deltacommit"
    init = v8 if layout >= 2 else "00000000000000010.deltacommit"
    clean = CleanConfig(policy=CleanPolicy.KEEP_LATEST_COMMITS, commits_retained=2)
    alone = plan(view(tmp_path, [init], layout=layout, mor=True), clean=clean)
    assert alone.instants == ()
    assert "1 commit(s) active" in alone.reason
    names = [init, *commits(9, layout, "deltacommit")]
    assert times(plan(view(tmp_path, names, layout=layout, mor=True), clean=clean))[:1] == [init[:17]]
