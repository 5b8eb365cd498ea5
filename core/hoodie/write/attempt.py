"""Attempts: one run of one instant, and the write tokens that tell its files from every other run's.

Hudi names a data file after its writer's token, ``<task partition>-<stage id>-<task attempt id>``
(``FSUtils.makeWriteToken``), so that a retried or speculative task attempt writes a file of its own. Two
runs of the same instant by two processes (a takeover after a pause, a one-off command beside the daemon)
each count their Spark stages and task attempts from 0: their tokens, and so their file names, would be the
same, and a late PUT of the older run could overwrite a file the newer one committed. So every run of an
instant draws an :class:`Attempt` number, random in ``[1, 2**31)``, and writes it where Hudi writes the
stage id: ``<task partition>-<attempt number>-<task attempt id>``. The token keeps Hudi's grammar (three
groups of digits: its log-file pattern requires it), the file names stay Hudi's, and a file's attempt is
read back from its name (:func:`attempt_of_file`), so a run can delete the files it wrote and nobody
else's.
"""

from __future__ import annotations

import posixpath
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from hoodie.file_group.base_file import BaseFile
from hoodie.log.log_file import LogFile

#: Attempt numbers are drawn from ``[1, ATTEMPT_NUMBERS)``: a Java int, as Hudi's stage ids are.
ATTEMPT_NUMBERS = 2**31


@dataclass(frozen=True)
class Attempt:
    """One run of an instant, numbered at random (see the module doc)."""

    number: int

    @classmethod
    def new(cls) -> Attempt:
        return cls(1 + secrets.randbelow(ATTEMPT_NUMBERS - 1))

    @property
    def id(self) -> str:
        """The attempt as text (start records and leases name it)."""
        return str(self.number)

    def write_token(self, task_index: int, task_attempt: int = 0) -> str:
        """The write token of task ``task_index``'s attempt ``task_attempt`` (Spark's task attempt id) in this
        run."""
        return f"{task_index}-{self.number}-{task_attempt}"

    def wrote(self, path: str) -> bool:
        """Whether the data file at ``path`` was written by this attempt (its token names it)."""
        return attempt_of_file(posixpath.basename(path)) == self.number


def _nothing_superseded() -> frozenset[int]:
    return frozenset()


@dataclass(frozen=True)
class AttemptFence:
    """The fence of one attempt of an instant, callable as a plain fence: ``check`` raises when the attempt
    no longer holds the instant (its claim or lease lost). It also says which attempt it fences (``attempt``:
    its completion is decided under that number, :mod:`hoodie.write.decision`) and which earlier attempts
    it took the instant over from (``superseded``, read when needed: a takeover voids them before it rolls
    anything back, so none of them completes after it)."""

    check: Callable[[], None]
    attempt: int
    superseded: Callable[[], frozenset[int]] = field(default=_nothing_superseded)

    def __call__(self) -> None:
        self.check()


def attempt_of_token(token: str | None) -> int | None:
    """The attempt number in a write token (its middle group), or ``None`` for a token of another form."""
    if token is None:
        return None
    parts = token.split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[1])


def attempt_of_file(name: str) -> int | None:
    """The attempt number in a base or log file's name, ``None`` when the name carries no token."""
    base = BaseFile.try_parse(name)
    if base is not None:
        return attempt_of_token(base.write_token)
    log = LogFile.try_parse(name)
    if log is not None:
        return attempt_of_token(log.write_token)
    return None


__all__ = ["ATTEMPT_NUMBERS", "Attempt", "AttemptFence", "attempt_of_file", "attempt_of_token"]
