"""Errors of the daemon (the format library's are in :mod:`hoodie.errors`)."""

from __future__ import annotations

from hoodie.errors import HoodieError


class ServiceError(HoodieError):
    """A table service cannot run as configured (no Java for Spark, a bad setting...)."""


class ClaimHeld(HoodieError):
    """Another runner holds the claim on this instant."""


class ClaimLost(HoodieError):
    """Our claim on an instant was lost (taken over, session expired): the job must not commit."""


class JobFailed(HoodieError):
    """A table-service job definitely failed; its instant was rolled back and stays requested."""


__all__ = ["ClaimHeld", "ClaimLost", "JobFailed", "ServiceError"]
