"""The rule of a table's poll interval (``hoodied.poll_interval``): doubling while quiet up to the ceiling,
the base after any change, a wait that keeps a table at the base in every poll and spreads the others (the
poller's use of it: ``test_poller.py``)."""

from __future__ import annotations

import pytest

from hoodied.poll_interval import JITTER, PollIntervals, jitter

RULE = PollIntervals(base=30.0, ceiling=300.0)


def test_a_quiet_table_doubles_up_to_the_ceiling_and_any_change_is_the_base() -> None:
    interval = RULE.after(None, quiet=True)  # a first poll: the base, whatever it found
    seen = [interval]
    for _ in range(6):
        interval = RULE.after(interval, quiet=True)
        seen.append(interval)
    assert seen == [30.0, 60.0, 120.0, 240.0, 300.0, 300.0, 300.0]
    assert RULE.after(300.0, quiet=False) == 30.0
    assert RULE.after(60.0, quiet=False) == 30.0


def test_a_ceiling_equal_to_the_base_keeps_every_table_at_every_poll() -> None:
    off = PollIntervals(base=30.0, ceiling=30.0)
    assert off.after(30.0, quiet=True) == 30.0
    assert off.wait(30.0, "orders-0123456789ab", 7) == 0.0


def test_a_table_at_the_base_is_due_at_every_poll() -> None:
    assert all(RULE.wait(30.0, "orders-0123456789ab", turn) == 0.0 for turn in range(100))


@pytest.mark.parametrize("interval", [60.0, 120.0, 300.0])
def test_the_wait_is_the_interval_less_half_a_base_and_the_tables_jitter(interval: float) -> None:
    keys = [f"t{i:04d}-0123456789ab" for i in range(200)]
    waits = [RULE.wait(interval, key, 3) for key in keys]
    assert all(interval - 15.0 - JITTER * (interval - 30.0) < w <= interval - 15.0 for w in waits)
    assert waits == [RULE.wait(interval, key, 3) for key in keys]  # the same at every call (and start)
    assert len(set(waits)) == len(keys)  # tables that fell quiet together do not fall due together
    turns = [RULE.wait(interval, keys[0], turn) for turn in range(200)]
    assert len(set(turns)) == len(turns)  # nor stay in step: each wait of a table draws anew


def test_the_jitter_spreads_over_its_range() -> None:
    values = [jitter(f"table-{i}", i % 7) for i in range(1000)]
    assert all(0.0 <= v < JITTER for v in values)
    assert min(values) < 0.1 * JITTER
    assert max(values) > 0.9 * JITTER
