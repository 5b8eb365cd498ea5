"""How often one table is polled: an interval of its own that grows while the table stays quiet
(:class:`PollIntervals`).

The rule:

- A table starts at the daemon's ``poll_interval`` (the *base*).
- After a poll that found it *quiet*, its interval doubles (:data:`GROWTH`), up to its ``poll_interval_max``
  (the *ceiling*). Quiet: its timeline listing is the one seen last time, no table-service instant is
  pending on it, no job of ours runs on it nor ended since its last poll, its control document did not
  change, and the poll scheduled nothing on it.
- Anything else brings it back to the base at once: a changed listing (a new instant, a scheduled one), a
  pending instant (claims, the runner's jobs and takeovers move without the timeline, so such a table stays
  at the base as long as the instant is pending), a job of ours on it ending, an operator's command for it,
  a poll that failed.

Why doubling: after a quiet time Q the interval is about Q plus one base, so a change is seen at most about
as late as the table had been quiet before it (plus one base): a table written every minute or two stays
near the base, one idle for hours costs a listing per ceiling. It is the growth of the daemon's other
back-offs (``jobs.backoff``). Why 10 x ``poll_interval`` as the default ceiling (5 minutes at the default
30 s): an operator who polls more often to see changes sooner wants quiet tables seen sooner too, and a fixed
default could fall below a long ``poll_interval``. A ceiling equal to the base turns the rule off.

A table is due when :meth:`PollIntervals.wait` has passed since the start of its last poll: at the base,
at every poll; above it, the interval less two things. Half a base, because polls come one base apart and a
poll that starts a moment early must not put a table off by a whole poll. And a jitter of up to
:data:`JITTER` of the part above the base: thousands of tables that fell quiet together would otherwise all
fall due in the same poll, and keep doing so. Each wait draws its jitter anew from the table's key and the
number of its polls, so that tables in step drift apart as with random draws, while a test (and a restart)
sees the same sequence. The jitter only shortens, so no table waits longer than its ceiling.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

#: Factor by which a quiet table's interval grows after each quiet poll.
GROWTH: Final = 2.0
#: Largest fraction of the interval above the base that a table's jitter takes off its wait.
JITTER: Final = 0.2
#: The default ceiling, as a multiple of the base ``poll_interval``.
CEILING_FACTOR: Final = 10.0


def jitter(key: str, turn: int) -> float:
    """A fraction in ``[0, JITTER)`` drawn from the table's ``key`` and ``turn`` (the number of its polls):
    a different one at each poll, the same sequence at every start."""
    digest = hashlib.sha256(f"{key}/{turn}".encode()).digest()
    return JITTER * int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class PollIntervals:
    """The polling intervals of one table: from ``base`` (the daemon's ``poll_interval``) up to ``ceiling``
    (its ``poll_interval_max``), seconds (see the module docstring)."""

    base: float
    ceiling: float

    def after(self, interval: float | None, *, quiet: bool) -> float:
        """The table's interval after a poll that found it ``quiet`` or not (``interval``: its interval
        before, None before its first poll)."""
        if not quiet or interval is None:
            return self.base
        return min(self.ceiling, max(self.base, interval * GROWTH))

    def wait(self, interval: float, key: str, turn: int) -> float:
        """Seconds from the start of a poll of the table until it is due again: none at the base (every
        poll), else ``interval`` less half a base and less a jitter of the part above the base (drawn from
        the table's ``key`` and ``turn``, the number of its polls)."""
        if interval <= self.base:
            return 0.0
        return self.base / 2 + (interval - self.base) * (1.0 - jitter(key, turn))


__all__ = ["CEILING_FACTOR", "GROWTH", "JITTER", "PollIntervals", "jitter"]
