"""The order test files are handed out to xdist workers (tests/conftest.py)."""

from __future__ import annotations

#: The test files that take longest on two cores (``--durations``, 2026-11-28), longest first. They run first:
#: xdist's loadfile scheduling otherwise hands out files with many tests first, so these files of few, long
#: tests came last and one of them ran alone at the end while the other worker idled (`make test` passes
#: ``--no-loadscope-reorder`` so that the order below is the order files are handed out). A stale list only
#: costs balance.
LONGEST_FILES = (
    "services/test_spark_cluster.py",
    "services/test_daemon_replicas.py",
    "services/test_compact_spark.py",
    "services/test_object_storage.py",
    "services/test_chaos.py",
    "services/test_control_plane.py",
    "services/test_demo.py",
    "services/test_supervisor.py",
    "core/archival/test_archival.py",
    "core/storage/test_object_store.py",
    "services/test_cluster_spark.py",
    "services/test_control.py",
    "core/test_service_sweep.py",
    "deploy/test_prometheus_scrape.py",
)

__all__ = ["LONGEST_FILES"]
