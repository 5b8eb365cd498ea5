"""A real Prometheus scrapes a running ``hoodied run`` (embedded, Spark local) that compacts a table, as the
ServiceMonitor has it scrape a pod: its API then serves the daemon's job metrics, every dashboard and alert
query evaluates, the alerting rules load, and the daemon still exits 0 on SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from deploy_tree import RULES, dashboard_queries, rule_expressions

from hoodied.spark import java_available
from support.server_process import free_port

pytestmark = [pytest.mark.spark, pytest.mark.slow]

PROMETHEUS = Path("/usr/bin/prometheus")
#: From the daemon's start to its first compaction reaching Prometheus (Spark's start is most of it).
METRICS_DEADLINE = 240.0
#: SIGTERM to exit: nothing runs any more, so well within jobs.shutdown_grace.
EXIT_DEADLINE = 120.0


def _hoodied(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hoodied.cli", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@contextlib.contextmanager
def _process_group(
    args: list[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """``args`` running in a process group of its own (a JVM and Python workers die with it), logging to
    ``log``; whatever of the group is left at the end is killed."""
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        yield proc
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def _tail(log: Path, lines: int = 40) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


class PrometheusApi:
    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}/api/v1"
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.base}/{path}?{urllib.parse.urlencode(params)}"
        try:
            with self._opener.open(url, timeout=10) as response:
                body = json.loads(response.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read())
        assert body["status"] == "success", f"{path} {params}: {body}"
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.get("query", query=expr)
        result: list[dict[str, Any]] = data["result"] if data["resultType"] == "vector" else []
        return result


def test_prometheus_scrapes_the_daemon_and_serves_its_job_metrics(tmp_path: Path) -> None:
    if not java_available():
        pytest.skip("Spark needs a Java runtime; .ci/run installs openjdk-17-jre-headless")
    assert PROMETHEUS.exists(), f"{PROMETHEUS} not found: .ci/run installs Debian's prometheus package"

    table = tmp_path / "trips"
    _hoodied("generate", str(table), "--table-type", "mor", "--table-version", "8", "--rows", "200")
    assert "scheduled compaction" in _hoodied("compact", str(table), "--mode", "schedule")

    metrics_port, prometheus_port = free_port(), free_port()
    config = tmp_path / "hoodied.yaml"
    config.write_text(
        textwrap.dedent(
            f"""\
            replica: scraped
            poll_interval: 1s
            spark:
              master: local[1]
              conf: {{spark.driver.memory: 768m}}
            metrics: {{host: 127.0.0.1, port: {metrics_port}}}
            tables:
              - path: {table}
            """
        )
    )
    # scraped as the ServiceMonitor's targets are: job="hoodied", the alerting rules loaded
    prometheus_config = tmp_path / "prometheus.yml"
    prometheus_config.write_text(
        textwrap.dedent(
            f"""\
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files:
              - {RULES}
            scrape_configs:
              - job_name: hoodied
                static_configs:
                  - targets: ["127.0.0.1:{metrics_port}"]
            """
        )
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOODIE_FAILPOINT")}
    daemon_log, prometheus_log = tmp_path / "hoodied.log", tmp_path / "prometheus.log"
    api = PrometheusApi(prometheus_port)
    with (
        _process_group(
            [sys.executable, "-m", "hoodied.cli", "run", "--config", str(config)], daemon_log, env
        ) as daemon,
        _process_group(
            [
                str(PROMETHEUS),
                f"--config.file={prometheus_config}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prometheus_port}",
            ],
            prometheus_log,
        ) as prometheus,
    ):
        succeeded: list[dict[str, Any]] = []
        deadline = time.monotonic() + METRICS_DEADLINE
        while not succeeded:
            assert daemon.poll() is None, f"hoodied exited with {daemon.returncode}:\n{_tail(daemon_log)}"
            assert prometheus.poll() is None, f"prometheus exited:\n{_tail(prometheus_log)}"
            assert time.monotonic() < deadline, (
                f"no hoodied_jobs_succeeded_total in Prometheus after {METRICS_DEADLINE:.0f} s\n"
                f"hoodied:\n{_tail(daemon_log)}\nprometheus:\n{_tail(prometheus_log)}"
            )
            time.sleep(1.0)
            with contextlib.suppress(OSError):
                succeeded = api.query('hoodied_jobs_succeeded_total{job="hoodied"} > 0')

        (sample,) = succeeded
        assert sample["metric"]["table"] == "trips"
        assert sample["metric"]["action"] == "compaction"
        assert float(sample["value"][1]) == 1.0
        # the failures an alert counts exist at 0 before any failure (increase() sees the first one)
        failed = api.query('hoodied_jobs_failed_total{job="hoodied", table="trips", action="compaction"}')
        assert {(f["metric"]["kind"], f["value"][1]) for f in failed} >= {("failed", "0")}
        (up,) = api.query('up{job="hoodied"}')
        assert up["value"][1] == "1"
        assert api.query('hoodied_info{job="hoodied", replica="scraped"}')
        assert api.query('hoodied_zookeeper_state{job="hoodied", hoodied_zookeeper_state="EMBEDDED"} == 1')

        # every query of the dashboard and of the alerts evaluates against the daemon's real series
        for _, expr in [*dashboard_queries(), *rule_expressions().items()]:
            api.get("query", query=expr)
        # Prometheus loaded the alerting rules, and on a healthy daemon none is pending or firing (the rules
        # are evaluated every second: give them a few evaluations after the first successful poll)
        active: dict[str, str] = {}
        for _ in range(10):
            groups = api.get("rules", type="alert")["groups"]
            loaded = {r["name"]: r["state"] for g in groups for r in g["rules"]}
            assert set(loaded) == set(rule_expressions())
            active = {name: state for name, state in loaded.items() if state != "inactive"}
            if not active:
                break
            time.sleep(1.0)
        assert not active, active

        daemon.send_signal(signal.SIGTERM)
        try:
            status = daemon.wait(timeout=EXIT_DEADLINE)
        except subprocess.TimeoutExpired:
            pytest.fail(f"hoodied did not exit {EXIT_DEADLINE:.0f} s after SIGTERM:\n{_tail(daemon_log)}")
        assert status == 0, _tail(daemon_log)
