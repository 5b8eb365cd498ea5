"""Errors of the daemon (the format library's are in :mod:`hoodie.errors`)."""

from __future__ import annotations

from hoodie.errors import CorruptBaseFile, CorruptLogBlock, HoodieError


class ServiceError(HoodieError):
    """A table service cannot run as configured (no Java for Spark, a bad setting...)."""


class ClaimHeld(HoodieError):
    """Another runner holds the claim on this instant."""


class ClaimLost(HoodieError):
    """Our claim on an instant was lost (taken over, session expired): the job must not commit."""


class JobFailed(HoodieError):
    """A table-service job definitely failed; its instant was rolled back and stays requested."""


class JobCancelled(JobFailed):
    """An operator cancelled the job (``hoodied ctl cancel``) before it committed: its work is dropped and its
    instant rolled back to requested, as for a failed job."""


class ForeignInstant(HoodieError):
    """An inflight instant that hoodied did not start, whose owner is not provably gone
    (:mod:`hoodied.ownership`): it is left alone."""


class CorruptData(JobFailed):
    """A job stopped because committed data it must rewrite is damaged (a task raised
    :class:`~hoodie.errors.CorruptLogBlock` or :class:`~hoodie.errors.CorruptBaseFile`). Retrying cannot help:
    the instant is given up at once and the table needs a repair (the message names the file)."""


#: The errors that mean committed data is damaged (retrying cannot help): the format library's, and ours for
#: a Spark job whose task raised one of them.
CORRUPT_DATA_ERRORS: tuple[type[HoodieError], ...] = (CorruptLogBlock, CorruptBaseFile, CorruptData)


__all__ = [
    "CORRUPT_DATA_ERRORS",
    "ClaimHeld",
    "ClaimLost",
    "CorruptData",
    "ForeignInstant",
    "JobCancelled",
    "JobFailed",
    "ServiceError",
]
