"""Fixtures of the deployment tests."""

from __future__ import annotations

import shutil

import pytest


@pytest.fixture(scope="session")
def promtool() -> str:
    """Prometheus's promtool; skips where it is absent (.ci/run installs it)."""
    path = shutil.which("promtool")
    if path is None:
        pytest.skip("promtool not found (.ci/run installs Debian's prometheus package)")
    return path
