"""hoodied's alerting rules: the PrometheusRule's spec is the standalone rules file, promtool accepts it and
its unit tests pass (each alert firing in one case and quiet in another), and every metric the rules or their
tests name is one the daemon exports."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_tree import (
    HOODIED_KUSTOMIZATIONS,
    OTHER_METRICS,
    RULES,
    RULES_TESTS,
    TARGET_LABELS,
    exported_labels,
    find,
    metric_names,
    rendered,
    rule_expressions,
    selector_labels,
)

from hoodied.metrics import SAMPLE_NAMES

#: The alerts the deployment promises (the issue names them).
ALERTS = frozenset(
    {
        "HoodiedCompactionLag",
        "HoodiedJobsFailing",
        "HoodiedInstantGivenUp",
        "HoodiedCorruptData",
        "HoodiedNoReplicaReady",
        "HoodiedZooKeeperDisconnected",
        "HoodiedPendingInstantTooOld",
        "HoodiedPollStalled",
        "HoodiedCompactionNeverScheduled",
        "HoodiedLogBacklogGrowing",
        "HoodiedTimelineGrowing",
        "HoodiedMetadataTableLagging",
        "HoodiedCleanNotRunning",
        "HoodiedServiceStale",
        "HoodiedTablePausedTooLong",
    }
)


def _promtool(promtool: str, *args: str, cwd: Path) -> str:
    done = subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    return output


def _rule_spec(tmp_path: Path) -> Path:
    """The PrometheusRule's spec (as the base renders it) in a rules file named as the unit tests expect."""
    spec = find(rendered("base"), "PrometheusRule", "hoodied")["spec"]
    path = tmp_path / RULES.name
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_the_prometheus_rule_is_the_rules_file(kustomization: str) -> None:
    rule = find(rendered(kustomization), "PrometheusRule", "hoodied")
    assert rule["spec"] == yaml.safe_load(RULES.read_text(encoding="utf-8"))


def test_every_promised_alert_is_there_with_severity_and_annotations() -> None:
    rules: dict[str, Any] = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    alerts = {r["alert"]: r for g in rules["groups"] for r in g["rules"]}
    assert set(alerts) == ALERTS
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in ("warning", "critical"), name
        assert rule["for"], name
        assert rule["annotations"]["summary"].strip(), name
        assert rule["annotations"]["description"].strip(), name


def test_promtool_accepts_the_rules(promtool: str, tmp_path: Path) -> None:
    output = _promtool(promtool, "check", "rules", str(_rule_spec(tmp_path)), cwd=tmp_path)
    assert f"SUCCESS: {len(ALERTS)} rules found" in output, output


def test_the_rules_pass_their_unit_tests(promtool: str, tmp_path: Path) -> None:
    _rule_spec(tmp_path)
    shutil.copy(RULES_TESTS, tmp_path / RULES_TESTS.name)
    output = _promtool(promtool, "test", "rules", RULES_TESTS.name, cwd=tmp_path)
    assert "SUCCESS" in output, output


def test_the_unit_tests_see_each_alert_fire_and_stay_quiet() -> None:
    tests = yaml.safe_load(RULES_TESTS.read_text(encoding="utf-8"))
    assert tests["rule_files"] == [RULES.name]
    firing: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check["exp_alerts"] else quiet).add(check["alertname"])
    assert firing == ALERTS
    assert quiet == ALERTS


def test_the_rules_and_their_tests_name_only_exported_metrics() -> None:
    allowed = SAMPLE_NAMES | OTHER_METRICS
    for alert, expr in rule_expressions().items():
        names = metric_names(expr)
        assert names, alert
        assert names <= allowed, f"{alert}: {sorted(names - allowed)} not exported by hoodied"
    tests = yaml.safe_load(RULES_TESTS.read_text(encoding="utf-8"))
    for case in tests["tests"]:
        for series in case["input_series"]:
            names = metric_names(series["series"])
            assert names <= allowed, f"{case['name']}: {sorted(names - allowed)}"


def test_the_rules_and_their_tests_match_only_exported_labels() -> None:
    exported = exported_labels()
    assert set(exported) >= SAMPLE_NAMES
    tests = yaml.safe_load(RULES_TESTS.read_text(encoding="utf-8"))
    series = [s["series"] for case in tests["tests"] for s in case["input_series"]]
    for expr in [*rule_expressions().values(), *series]:
        for name, labels in selector_labels(expr):
            known = exported.get(name, frozenset()) | TARGET_LABELS
            assert labels <= known, f"{name}: no label {sorted(labels - known)} ({expr})"
