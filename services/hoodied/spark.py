"""The Spark session hoodied runs table-service jobs in.

Defaults: ``local[*]`` inside the process, the Spark UI off, the driver bound to 127.0.0.1 when the master is
local, and Python workers running this interpreter (so they import the same ``hoodie``). Any ``spark.*``
setting given by the user wins over these defaults.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from hoodied.errors import ServiceError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
LOCAL_DEFAULTS: Mapping[str, str] = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
DEFAULTS: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.python.worker.reuse": "true",
    # A failed task is retried once, as a new attempt with its own write token.
    "spark.task.maxFailures": "2",
}


@dataclass(frozen=True)
class SparkConfig:
    """Where and how Spark jobs run."""

    master: str = DEFAULT_MASTER
    app_name: str = "hoodied"
    conf: Mapping[str, str] = field(default_factory=dict)

    def settings(self) -> dict[str, str]:
        """Every ``spark.*`` setting the session is built with (defaults, then the user's)."""
        out = dict(DEFAULTS)
        if self.master.startswith("local"):
            out.update(LOCAL_DEFAULTS)
        out.update(self.conf)
        return out


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and os.path.exists(os.path.join(home, "bin", "java"))))


def spark_session(config: SparkConfig | None = None) -> SparkSession:
    """Start (or join) the process's Spark session."""
    config = config or SparkConfig()
    if not java_available():
        raise ServiceError("Spark needs a Java runtime (17 or later): install openjdk-17-jre-headless")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - pyspark is a dependency
        raise ServiceError(f"pyspark is not installed: {e}") from e
    builder = SparkSession.builder.master(config.master).appName(config.app_name)
    for key, value in config.settings().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session


__all__ = ["DEFAULT_MASTER", "SparkConfig", "java_available", "spark_session"]
