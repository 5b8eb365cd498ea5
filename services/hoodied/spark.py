"""The Spark session hoodied runs table-service jobs in.

Defaults: ``local[*]`` inside the process, the Spark UI off, the driver bound to 127.0.0.1 when the master is
local, and Python workers running this interpreter (so they import the same ``hoodie``). Any ``spark.*``
setting given by the user wins over these defaults. On a cluster (``spark://``, ``k8s://``, ``yarn``) the
executors run ``spark.pyspark.python`` or else ``PYSPARK_PYTHON`` (Spark's default ``python3`` when both are
unset: the driver's interpreter path means nothing on another host) and get hoodied's code shipped with the
session unless ``ship_code`` says otherwise (:mod:`hoodied.executor_code`).

Spark's JVM logs through ``log4j2.properties`` of this package (unless the user's
``spark.driver.extraJavaOptions`` names a log4j configuration of its own): warnings and errors, and not a
failed task's Python traceback, which Spark's executor and scheduler loggers print in dozens of lines per
task, twice; hoodied reports each failure itself, as the one line that says what went wrong
(:func:`hoodied.jobs.task_error`), with the table, action and instant.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import hoodie
import hoodied
from hoodied.errors import ServiceError
from hoodied.executor_code import code_stamp, ship_code, should_ship

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

logger = logging.getLogger(__name__)

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

#: hoodied's log4j 2 configuration of Spark's JVM (see the module doc).
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: The executors' Python (Spark's key; PySpark itself reads only ``PYSPARK_PYTHON``, which it becomes).
EXECUTOR_PYTHON = "spark.pyspark.python"


@dataclass(frozen=True)
class SparkConfig:
    """Where and how Spark jobs run."""

    master: str = DEFAULT_MASTER
    app_name: str = "hoodied"
    conf: Mapping[str, str] = field(default_factory=dict)
    #: Whether the session ships hoodied's code to its executors (:func:`~hoodied.executor_code.should_ship`).
    ship_code: str = "auto"

    def settings(self) -> dict[str, str]:
        """Every ``spark.*`` setting the session is built with (defaults, then the user's)."""
        out = dict(DEFAULTS)
        if self.master.startswith("local"):
            out.update(LOCAL_DEFAULTS)
        out.update(self.conf)
        options = out.get(DRIVER_JAVA_OPTIONS, "")
        if "log4j2.configurationFile" not in options and "log4j.configurationFile" not in options:
            ours = f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"
            out[DRIVER_JAVA_OPTIONS] = f"{ours} {options}".strip()
        return out


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return bool(shutil.which("java") or (home and os.path.exists(os.path.join(home, "bin", "java"))))


def _workers_import_our_code() -> None:
    """Put the folders this process imports ``hoodie`` and ``hoodied`` from first on the Python workers'
    path (local mode, before the JVM starts: it hands its ``PYTHONPATH`` to them). Without it a worker imports
    whatever is installed, which need not be the driver's checkout; the tasks' code check would refuse it."""
    roots = [os.path.dirname(os.path.dirname(m.__file__ or "")) for m in (hoodie, hoodied)]
    current = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys([*roots, *current]))


def spark_session(config: SparkConfig | None = None) -> SparkSession:
    """Start (or join) the process's Spark session."""
    config = config or SparkConfig()
    if not java_available():
        raise ServiceError("Spark needs a Java runtime (17 or later): install openjdk-17-jre-headless")
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = config.settings()
    executor_python = settings.get(EXECUTOR_PYTHON)
    if executor_python:  # PySpark takes the executors' Python from the environment only
        os.environ["PYSPARK_PYTHON"] = executor_python
    if config.master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        _workers_import_our_code()
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "hostname resolves to a loopback" warning
    try:
        from pyspark.sql import SparkSession
    except ImportError as e:  # pragma: no cover - pyspark is a dependency
        raise ServiceError(f"pyspark is not installed: {e}") from e
    builder = SparkSession.builder.master(config.master).appName(config.app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    if should_ship(config.ship_code, config.master):
        path = ship_code(session.sparkContext)
        logger.info("Spark jobs ship %s to the executors (%s)", code_stamp(), path)
    return session


__all__ = ["DEFAULT_MASTER", "SparkConfig", "java_available", "spark_session"]
