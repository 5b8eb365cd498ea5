"""The daemon's poll schedule (``hoodied.daemon.start_polling``)."""

from __future__ import annotations

import datetime as dt

from hoodied.daemon import start_polling


def test_the_polls_of_a_replica_stay_one_interval_apart() -> None:
    """The jitter offsets a replica's first poll only (drawn once, within jitter x interval); the polls then
    follow each other exactly one interval apart, so that an instant waits at most one interval."""
    for _ in range(20):
        before = dt.datetime.now(dt.UTC)
        scheduler = start_polling(lambda: None, 60.0, 0.2)
        try:
            job = scheduler.get_job("poll")
            first = job.next_run_time
            assert before <= first <= dt.datetime.now(dt.UTC) + dt.timedelta(seconds=12)
            assert job.trigger.jitter is None
            second = job.trigger.get_next_fire_time(first, first)
            assert second - first == dt.timedelta(seconds=60)
            assert job.trigger.get_next_fire_time(second, second) - second == dt.timedelta(seconds=60)
        finally:
            scheduler.shutdown(wait=False)
