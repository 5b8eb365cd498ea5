"""Where the tests find ``../shared`` (real Hudi tables, byte-level vectors, Hudi's schemas), and the one
message every test that needs it skips with when it is absent.

``../shared`` is the folder beside this checkout that every developer and CI run has; ``HOODIE_FIXTURES``
may point at its ``fixtures`` folder instead (its parent is then taken as ``shared``).
"""

from __future__ import annotations

import os
from pathlib import Path

FIXTURES_ENV = "HOODIE_FIXTURES"
REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_dir() -> Path:
    """``$HOODIE_FIXTURES/..``, else ``<repo>/../shared``."""
    env = os.environ.get(FIXTURES_ENV)
    return Path(env).resolve().parent if env else (REPO_ROOT.parent / "shared").resolve()


def fixtures_dir() -> Path:
    """``$HOODIE_FIXTURES``, else ``<repo>/../shared/fixtures``."""
    env = os.environ.get(FIXTURES_ENV)
    return Path(env).resolve() if env else shared_dir() / "fixtures"


def spec_dir() -> Path:
    """Hudi's spec and Avro schemas: ``<shared>/hudi-spec``."""
    return shared_dir() / "hudi-spec"


def missing_message(path: Path) -> str:
    """Why a test needing ``path`` below ``../shared`` skips, and how to provide it."""
    return (
        f"needs ../shared, not found here ({path} is missing): put the project's shared/ folder (Hudi "
        f"fixtures and spec) beside this checkout as ../shared, or set {FIXTURES_ENV} to its fixtures folder"
    )


def missing(path: Path) -> str | None:
    """:func:`missing_message` for ``path`` when it does not exist, else ``None``."""
    return None if path.exists() else missing_message(path)


__all__ = [
    "FIXTURES_ENV",
    "REPO_ROOT",
    "fixtures_dir",
    "missing",
    "missing_message",
    "shared_dir",
    "spec_dir",
]
