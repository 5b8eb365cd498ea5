"""Fixtures of the service tests: one real Spark session (local mode) for the whole test session, and the
clusters of replica processes a test starts (killed when it ends)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hoodied.spark import SparkConfig, java_available, spark_session
from support.replicas import Cluster
from support.zk_server import ZooKeeperServer


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """Spark in local mode with two cores, stopped at the end of the session."""
    if not java_available():
        pytest.skip("Spark needs a Java runtime; .ci/run installs openjdk-17-jre-headless")
    session = spark_session(SparkConfig(master="local[2]", app_name="hoodied-tests"))
    yield session
    session.stop()


@pytest.fixture
def cluster_factory(tmp_path: Path, zookeeper_server: ZooKeeperServer) -> Iterator[list[Cluster]]:
    made: list[Cluster] = []
    yield made
    for c in made:
        c.close()
