"""The demo's table: its folder (made by an earlier demo, or refused), settings and daemon configuration."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from hoodie.testing.generate import GenerateSpec, generate_table
from hoodied.config import DaemonConfig
from hoodied.errors import ServiceError

if TYPE_CHECKING:
    pass

#: Relative to the table's base path: the demo's configuration, whose presence marks a table the demo made.

MARKER = ".hoodie/.aux/hoodied/demo.yaml"
_MARKER_HEAD = "# hoodied demo:"

DEFAULT_PATH = "./hoodied-demo"
DEFAULT_PORT = 9464
TABLE_NAME = "trips"
SERVICES = ("compaction", "clustering", "clean")  # what the demo schedules

#: The table services' settings: small triggers, so that a couple of minutes show each service at work.
HOODIE_SETTINGS = {
    "hoodie.compact.inline.max.delta.commits": "3",
    "hoodie.clustering.async.max.commits": "4",
    "hoodie.clean.commits.retained": "2",
    "hoodie.clean.max.commits": "1",
    # The demo's writer leaves partitions under pending clustering out of its updates by itself, so hoodied
    # may plan every file group (with Hudi's default, reject, it would leave the groups of the writer's last
    # commits alone: with random updates, every group).
    "hoodie.clustering.updates.strategy": "org.apache.hudi.client.clustering.update.strategy."
    "SparkAllowUpdateStrategy",
}


class DemoError(ServiceError):
    """The demo cannot run as asked (a folder it may not wipe, a port in use...)."""


@dataclass(frozen=True)
class DemoOptions:
    path: str = DEFAULT_PATH
    duration: float = 120.0  # seconds, from the start
    port: int = DEFAULT_PORT  # 0: a free port
    interval: float = 2.0  # seconds between the writer's batches
    batch_rows: int = 300  # rows per batch
    update_fraction: float = 2 / 3  # of a batch: updates of existing trips; the rest are new trips
    partitions: int = 4
    initial_rows: int = 1000  # rows of each set-up commit (3 commits)
    drain_timeout: float = 30.0  # seconds to finish pending table services once the writer stopped
    seed: int = 7


# -- the table ---------------------------------------------------------------------------------------------


def check_path(path: Path) -> bool:
    """Whether ``path`` holds an earlier demo's table (to be wiped); False when it is absent or empty.
    Anything else is refused (:class:`DemoError`)."""
    if not path.exists() and not path.is_symlink():
        return False
    if not path.is_dir() or path.is_symlink():
        raise DemoError(f"{path} exists and is not a folder; choose another --path")
    if not any(path.iterdir()):
        return False
    if not is_demo_table(path):
        raise DemoError(
            f"{path} exists and is not a table an earlier hoodied demo made (no {MARKER}); refusing to "
            "delete it: choose another --path"
        )
    return True


def clear_previous(path: Path) -> None:
    """Make ``path`` ready for a new demo table: absent or empty is fine; an earlier demo's table is deleted;
    anything else is refused (:class:`DemoError`) and left alone."""
    if check_path(path):
        shutil.rmtree(path)


def is_demo_table(path: Path) -> bool:
    marker = path / MARKER
    try:
        with marker.open(encoding="utf-8") as f:
            return f.readline().startswith(_MARKER_HEAD)
    except OSError:
        return False


def daemon_config_text(path: Path, port: int) -> str:
    """The daemon's configuration for the demo, as the YAML a ``hoodied run --config`` file would hold."""
    raw: dict[str, Any] = {
        "replica": "demo",
        "poll_interval": "2s",
        "poll_jitter": 0,
        "reschedule_interval": "10s",
        "spark": {
            "master": "local[2]",
            "max_concurrent_jobs": 2,
            "conf": {"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
        },
        "metrics": {"host": "127.0.0.1", "port": port},
        "logging": {"level": "WARNING"},
        "jobs": {
            "max_attempts": 3,
            "backoff": "2s",
            "backoff_max": "10s",
            "takeover_grace": "10s",
            "shutdown_grace": "60s",
            "lock_timeout": "30s",
        },
        "tables": [
            {
                "path": str(path),
                "name": TABLE_NAME,
                "schedule": list(SERVICES),
                "hoodie": dict(HOODIE_SETTINGS),
            }
        ],
    }
    head = (
        f"{_MARKER_HEAD} the configuration the demo ran the daemon with (this file marks the table as the "
        "demo's).\n# Run the same daemon again: hoodied run --config <this file>\n"
    )
    return head + yaml.safe_dump(raw, sort_keys=False)


def daemon_config(path: Path, port: int) -> DaemonConfig:

    return DaemonConfig.parse(daemon_config_text(path, port), source="hoodied demo")


@dataclass(frozen=True)
class Setup:
    commits: int
    keys: int
    partitions: int


def create_table(path: Path, options: DemoOptions) -> Setup:
    """The demo table: MERGE_ON_READ, version 8, three commits of generated trips (inserts, then upserts)."""
    path.mkdir(parents=True, exist_ok=True)
    marker = path / MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    # The marker goes first: a set-up that dies half-way still leaves a folder the next demo may wipe.
    marker.write_text(daemon_config_text(path, options.port), encoding="utf-8")
    spec = GenerateSpec(
        table_type="MERGE_ON_READ",
        table_version=8,
        rows=options.initial_rows,
        commits=3,
        update_fraction=0.2,
        delete_fraction=0.0,
        partitions=options.partitions,
        seed=options.seed,
        name=TABLE_NAME,
    )
    results = generate_table(str(path), spec)
    inserts = sum(s.num_inserts or 0 for r in results for s in r.metadata.write_stats)
    return Setup(commits=len(results), keys=inserts, partitions=options.partitions)
