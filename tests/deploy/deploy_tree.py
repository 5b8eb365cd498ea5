"""The ``deploy/`` folder for the deployment tests: its kustomizations, rendered offline (``kustomize.py``)
once per session, and a look-up of rendered objects."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from kustomize import render

REPO_ROOT = Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
RULES = DEPLOY / "prometheus" / "hoodied-rules.yaml"
RULES_TESTS = DEPLOY / "prometheus" / "hoodied-rules.test.yaml"
DASHBOARD = DEPLOY / "grafana" / "hoodied-dashboard.json"

#: Every kustomization in deploy/, by its path relative to deploy/.
KUSTOMIZATIONS = ("base", "overlays/dev", "overlays/spark-k8s", "overlays/production", "examples/zookeeper")
#: The ones that deploy hoodied (the ZooKeeper example does not).
HOODIED_KUSTOMIZATIONS = ("base", "overlays/dev", "overlays/spark-k8s", "overlays/production")
#: The ones whose Spark drivers run executor pods (spark.master k8s://...); the others run Spark in the pod.
SPARK_K8S_KUSTOMIZATIONS = ("overlays/spark-k8s", "overlays/production")


@cache
def rendered(kustomization: str) -> tuple[dict[str, Any], ...]:
    """The objects of ``deploy/<kustomization>``, rendered once per session (callers must not change them)."""
    return tuple(render(DEPLOY / kustomization))


def find(objects: tuple[dict[str, Any], ...], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of ``kind`` in ``objects`` (named ``name``, or ``name`` and a hash suffix, if given)."""
    found = [
        o
        for o in objects
        if o["kind"] == kind
        and (name is None or re.fullmatch(rf"{re.escape(name)}(-[0-9a-z]{{10}})?", o["metadata"]["name"]))
    ]
    assert len(found) == 1, (
        f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    )
    return found[0]


# -- PromQL in the rules and the dashboard ----------------------------------------------------------------

#: Metric names a query may select besides hoodied's own (Prometheus's per-target ``up``).
OTHER_METRICS = frozenset({"up"})
_HOODIED_NAME = re.compile(r"hoodied_[a-z_]+")
_SELECTOR_NAME = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{")
#: Grafana's variables, as a query is sent with every table and action selected.
GRAFANA_VARIABLES = {"$__rate_interval": "2m", "$job": "hoodied", "$table": ".*", "$action": ".*"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: every ``hoodied_*`` name, and any name before a ``{``."""
    return set(_HOODIED_NAME.findall(expr)) | set(_SELECTOR_NAME.findall(expr))


def rule_expressions() -> dict[str, str]:
    """Alert name -> expression, of the standalone rules file."""
    rules = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return {r["alert"]: r["expr"] for g in rules["groups"] for r in g["rules"]}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def dashboard_panels() -> list[dict[str, Any]]:
    """Every panel but rows (nested ones included)."""
    out = []
    for panel in dashboard()["panels"]:
        if panel["type"] == "row":
            out.extend(panel.get("panels", []))
        else:
            out.append(panel)
    return out


def dashboard_queries() -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target and template variable query, Grafana's variables filled in."""
    out = [(f"{p['title']} / {t['refId']}", t["expr"]) for p in dashboard_panels() for t in p["targets"]]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            m = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["definition"])
            assert m, variable["definition"]
            out.append((f"variable {variable['name']}", m.group(1)))
    filled = []
    for where, expr in out:
        for name, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(name, value)
        filled.append((where, expr))
    return filled


#: Labels Prometheus adds to every series of a target (static configs, and the Prometheus Operator's).
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod", "service", "endpoint", "container"})
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")


def selector_labels(expr: str) -> list[tuple[str, set[str]]]:
    """(metric name, label names its matchers use) of every ``name{...}`` selector of an expression."""
    return [(name, set(_MATCHER.findall(body))) for name, body in _SELECTOR.findall(expr)]


@cache
def exported_labels() -> dict[str, frozenset[str]]:
    """Sample name -> its label names, as a daemon's /metrics has them once every kind of series exists."""
    from prometheus_client.parser import text_string_to_metric_families

    from hoodied.metrics import Metrics
    from support.metric_samples import touch_everything

    m = Metrics(version="test", replica="test")
    touch_everything(m)
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return {name: frozenset(names) for name, names in labels.items()}
