"""hoodied: the table-services daemon for Apache Hudi, built on :mod:`hoodie`."""

from __future__ import annotations

import importlib.metadata


def package_version() -> str:
    """The installed hoodied's version (``unknown`` when run from a source tree that was not installed)."""
    try:
        return importlib.metadata.version("hoodied")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


__all__ = ["package_version"]
