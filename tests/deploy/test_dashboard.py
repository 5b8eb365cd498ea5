"""The Grafana dashboard: its data source and template variables, the panels the issue asks for laid out on
the grid, and queries that parse (promtool) and select only metrics the daemon exports."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml
from deploy_tree import (
    OTHER_METRICS,
    TARGET_LABELS,
    dashboard,
    dashboard_panels,
    dashboard_queries,
    exported_labels,
    metric_names,
    selector_labels,
)

from hoodied.metrics import SAMPLE_NAMES

DATASOURCE = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}

#: Panel titles the issue asks for.
PANELS = {
    "Pending instants by table and action",
    "Oldest pending instant age",
    "Job rate: started, succeeded, failed by kind",
    "Job duration p50 / p95",
    "Records written",
    "Bytes written",
    "Files deleted",
    "Claims held",
    "Table lock wait p95",
    "ZooKeeper connected",
    "Spark up by replica",
    "Poll duration p95",
    "Time since the last successful poll",
    "Replicas up",
}


def test_the_dashboard_uses_a_prometheus_data_source_variable() -> None:
    board = dashboard()
    assert 36 <= board["schemaVersion"] <= 41
    assert board["uid"] == "hoodied"
    variables = {v["name"]: v for v in board["templating"]["list"]}
    source = variables["DS_PROMETHEUS"]
    assert source["type"] == "datasource"
    assert source["query"] == "prometheus"
    job = variables["job"]  # the scrape job's name is the user's (issue 35): every query follows it
    assert job["type"] == "query"
    assert job["datasource"] == DATASOURCE
    assert job["definition"] == "label_values(hoodied_info, job)"
    assert job["current"]["value"] == "hoodied"
    for panel in dashboard_panels():
        for target in panel["targets"]:
            assert 'job=~"$job"' in target["expr"], (panel["title"], target["expr"])
    for name in ("table", "action"):
        variable = variables[name]
        assert 'job=~"$job"' in variable["definition"]
        assert variable["type"] == "query"
        assert variable["datasource"] == DATASOURCE
        assert variable["definition"].startswith("label_values(")
        assert variable["definition"].endswith(f", {name})")
        assert variable["query"]["query"] == variable["definition"]
        assert variable["includeAll"] is True
        assert variable["allValue"] == ".*"
    for panel in dashboard_panels():
        assert panel["datasource"] == DATASOURCE, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]


def test_the_dashboard_has_the_panels_asked_for_on_a_clean_grid() -> None:
    panels = dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    titles = [p["title"] for p in panels]
    assert len(titles) == len(set(titles)), titles
    assert set(titles) >= PANELS, PANELS - set(titles)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        x, y, w, h = (panel["gridPos"][k] for k in ("x", "y", "w", "h"))
        assert x >= 0, panel["title"]
        assert x + w <= 24, panel["title"]
        mine = {(col, row) for col in range(x, x + w) for row in range(y, y + h)}
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine
    for panel in dashboard_panels():
        assert panel["type"] in ("timeseries", "stat"), panel["title"]
        assert panel["targets"], panel["title"]
        assert panel.get("description"), panel["title"]


def test_the_dashboard_selects_only_exported_metrics() -> None:
    allowed = SAMPLE_NAMES | OTHER_METRICS
    for where, expr in dashboard_queries():
        names = metric_names(expr)
        assert names, where
        assert names <= allowed, f"{where}: {sorted(names - allowed)} not exported by hoodied"
    exported = exported_labels()
    for where, expr in dashboard_queries():
        for name, labels in selector_labels(expr):
            known = exported.get(name, frozenset()) | TARGET_LABELS
            assert labels <= known, f"{where}: {name} has no label {sorted(labels - known)}"
    quantiles = [e for _, e in dashboard_queries() if "histogram_quantile" in e]
    assert quantiles
    for expr in quantiles:
        assert "_bucket{" in expr, expr
        assert re.search(r"sum by \(le\b", expr), expr


def test_the_dashboard_queries_parse(promtool: str, tmp_path: Path) -> None:
    # promtool parses rule expressions: make each query a recording rule
    rules = [
        {"record": f"dashboard:query_{i}", "expr": expr} for i, (_, expr) in enumerate(dashboard_queries())
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    done = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
