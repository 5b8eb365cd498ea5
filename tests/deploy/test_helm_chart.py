"""The Helm chart (deploy/helm/hoodied) deploys what the kustomize base does: rendered offline by
``helm_render.py`` with its default values and with ``ci/all-values.yaml`` (every switch on), its objects are
valid Kubernetes objects, its Deployment runs the daemon as the base's does, its configuration is one the
daemon accepts (the base's, with the default values), its values match their schema and its alerting rules
are the rules file's. Where ``helm`` is installed, ``helm lint`` and ``helm template`` cross-check it."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import textwrap
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from deploy_tree import DEPLOY, REPO_ROOT, RULES, find, rendered
from helm_render import HelmRenderError, coalesce, load_chart, render, render_objects, value_references
from test_manifests import CRD_KINDS, KUBERNETES_VERSION

from hoodied.config import DaemonConfig

CHART = DEPLOY / "helm" / "hoodied"
ALL_VALUES = CHART / "ci" / "all-values.yaml"
CHART_RULES = CHART / "files" / "hoodied-rules.yaml"
HELM_README = DEPLOY / "helm" / "README.md"
#: What the chart renders with its default values, and with every switch on.
CASES = ("defaults", "all")
#: Where the admin token's Secret is mounted, and the file hoodied.yaml names.
ADMIN_DIR = "/etc/hoodied/admin"
ADMIN_SECTION = "admin:\n  token_file: /etc/hoodied/admin/token"
#: The chart's own kinds, and those of the Prometheus Operator it adds when asked.
CHART_KINDS = {"ServiceAccount", "ConfigMap", "Service", "Deployment", "PodDisruptionBudget"}
NETWORK_KINDS = {"NetworkPolicy"}
OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}

Obj = dict[str, Any]


def _yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _values(case: str) -> dict[str, Any]:
    loaded: dict[str, Any] = _yaml(ALL_VALUES) if case == "all" else {}
    return loaded


@cache
def _objects(case: str, release: str = "hoodied") -> tuple[Obj, ...]:
    """The chart's objects, rendered once per session (callers must not change them)."""
    return tuple(render_objects(CHART, _values(case), release=release))


def _kinds(objects: tuple[Obj, ...]) -> set[str]:
    return {o["kind"] for o in objects}


def _pod_spec(deployment: Obj) -> Obj:
    spec: Obj = deployment["spec"]["template"]["spec"]
    return spec


def _container(deployment: Obj) -> Obj:
    (container,) = _pod_spec(deployment)["containers"]
    assert container["name"] == "hoodied"
    result: Obj = container
    return result


def _config_text(objects: tuple[Obj, ...]) -> str:
    text: str = find(objects, "ConfigMap", "hoodied-config")["data"]["hoodied.yaml"]
    return text


def _parse_config(text: str) -> DaemonConfig:
    """The daemon's reading of a rendered hoodied.yaml (without ``admin`` while the daemon lacks it)."""
    if "admin" not in DaemonConfig.__dataclass_fields__:
        raw = yaml.safe_load(text)
        raw.pop("admin", None)
        text = yaml.safe_dump(raw)
    return DaemonConfig.parse(text, source="hoodied.yaml")


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# -- the renderer --------------------------------------------------------------------------------------------


def _chart(tmp_path: Path, template: str, values: str = "", helpers: str = "") -> Path:
    (tmp_path / "templates").mkdir()
    (tmp_path / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: '4.5'\n")
    (tmp_path / "values.yaml").write_text(textwrap.dedent(values))
    (tmp_path / "templates" / "t.yaml").write_text(textwrap.dedent(template))
    if helpers:
        (tmp_path / "templates" / "_helpers.tpl").write_text(textwrap.dedent(helpers))
    return tmp_path


def test_the_renderer_trims_branches_and_pipes_as_go_does(tmp_path: Path) -> None:
    chart = _chart(
        tmp_path,
        """\
        {{- /* a comment */ -}}
        name: {{ include "demo.name" . }}
        a:
          {{- if .Values.off }}
          off: yes
          {{- else if not .Values.enabled }}
          enabled: no
          {{- else }}
          enabled: {{ .Values.enabled | quote }}
          {{- end }}
        {{- with .Values.map }}
        map:
          {{- toYaml . | nindent 2 }}
        {{- end }}
        {{- with .Values.empty }}
        empty: {{ . }}
        {{- end }}
        tag: {{ .Values.tag | default .Chart.AppVersion }}
        n: {{ .Values.n }} {{ .Values.missing }}|
        """,
        """\
        enabled: true
        tag: ""
        n: 0.5
        map: {b: [1, "2"], a: 'x "y"'}
        empty: {}
        """,
        """\
        {{- define "demo.name" -}}
        {{ printf "%s-%s-%d" .Release.Name .Chart.Name 7 | trunc 13 | trimSuffix "-" | replace "-" "_" }}
        {{- end -}}
        """,
    )
    assert render(chart, release="release")["templates/t.yaml"] == textwrap.dedent(
        """\
        name: release_demo
        a:
          enabled: "true"
        map:
          a: x "y"
          b:
          - 1
          - '2'
        tag: 4.5
        n: 0.5 |
        """
    )


def test_quote_escapes_as_go_does(tmp_path: Path) -> None:
    chart = _chart(tmp_path, "v: {{ .Values.s | quote }}\n", 's: "a\\"b\\\\c\\nd\\u0001é"\n')
    text = render(chart)["templates/t.yaml"]
    assert text == 'v: "a\\"b\\\\c\\nd\\x01é"\n'
    assert yaml.safe_load(text) == {"v": 'a"b\\c\nd\x01é'}


@pytest.mark.parametrize(
    ("template", "error"),
    [
        ("{{ range .Values.list }}x{{ end }}", "'range' is not supported"),
        ('{{ upper "a" }}', "'upper' is not a function"),
        ("{{ $x := 1 }}", "unsupported syntax"),
        ('{{ (include "x" .) }}', "unsupported syntax"),
        ("{{ .Values.missing.key }}", "nil pointer evaluating .Values.missing.key"),
        ("{{ .Chart.Nmae }}", ".Chart has no field Nmae"),
        ("{{ .Values.big }}", "exponent form"),
        ("{{ .Values.list }}", "printing a list"),
        ('{{ .Files.Get "nothing.txt" }}', "no such file"),
        ('{{ required "set it" .Values.blank }}', "required: set it"),
        ("{{ if .Values.big }}", "a block has no end"),
        ("{{ with .Values.big }}a{{ else }}b{{ end }}", "with needs a plain end"),
    ],
)
def test_the_renderer_refuses_what_it_does_not_know(tmp_path: Path, template: str, error: str) -> None:
    chart = _chart(tmp_path, template, "list: [1]\nbig: 1000000\nblank: ''\n")
    with pytest.raises(HelmRenderError, match=re.escape(error)):
        render(chart)


def test_values_files_coalesce_as_helm_merges_them() -> None:
    defaults = {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 1}
    assert coalesce(defaults, {"a": {"c": [3], "d": None}, "f": None, "g": 2}) == {
        "a": {"b": 1, "c": [3]},
        "g": 2,
    }
    assert defaults == {"a": {"b": 1, "c": [1, 2], "d": {"e": 1}}, "f": 1}


# -- every object --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES)
def test_every_document_is_a_named_object(case: str) -> None:
    objects = _objects(case)
    assert objects
    for obj in objects:
        assert {"apiVersion", "kind", "metadata"} <= set(obj), obj
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", obj["metadata"]["name"]), obj["metadata"]
        assert obj["metadata"]["namespace"] == "default"
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    keys = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys)), keys


@pytest.mark.parametrize(
    ("case", "kinds"), [("defaults", CHART_KINDS), ("all", CHART_KINDS | OPERATOR_KINDS | NETWORK_KINDS)]
)
def test_the_switches_add_the_operators_objects(case: str, kinds: set[str]) -> None:
    assert _kinds(_objects(case)) == kinds
    assert "PodDisruptionBudget" not in _kinds(
        tuple(render_objects(CHART, {"podDisruptionBudget": {"enabled": False}}))
    )


@pytest.mark.parametrize("case", CASES)
def test_every_object_is_valid_against_the_kubernetes_schemas(case: str) -> None:
    for obj in _objects(case):
        if obj["kind"] in CRD_KINDS:
            continue  # no schema: their structure is checked below
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {where}: {e.message}")


# -- the Deployment ------------------------------------------------------------------------------------------

#: Container fields the chart takes over from the kustomize base unchanged (with its default values).
SAME_CONTAINER_FIELDS = (
    "image",
    "imagePullPolicy",
    "args",
    "env",
    "ports",
    "startupProbe",
    "livenessProbe",
    "readinessProbe",
    "resources",
    "securityContext",
    "volumeMounts",
)


def test_the_deployment_runs_the_daemon_as_the_kustomize_base_does() -> None:
    base_objects, chart_objects = rendered("base"), _objects("defaults")
    base, chart = find(base_objects, "Deployment", "hoodied"), find(chart_objects, "Deployment", "hoodied")
    base_container, chart_container = _container(base), _container(chart)
    for key in SAME_CONTAINER_FIELDS:
        assert chart_container.get(key) == base_container.get(key), key
    assert "command" not in chart_container, "the image's entrypoint (tini, then hoodied) runs the arguments"
    assert set(chart_container) == set(base_container)
    base_pod, chart_pod = _pod_spec(base), _pod_spec(chart)
    for key in ("securityContext", "terminationGracePeriodSeconds"):
        assert chart_pod[key] == base_pod[key], key
    # the volumes, each pointing at the chart's own ConfigMap
    base_config = find(base_objects, "ConfigMap", "hoodied-config")["metadata"]["name"]
    chart_config = find(chart_objects, "ConfigMap", "hoodied-config")["metadata"]["name"]
    volumes = json.loads(json.dumps(base_pod["volumes"]).replace(base_config, chart_config))
    assert chart_pod["volumes"] == volumes
    assert chart_pod["serviceAccountName"] == find(chart_objects, "ServiceAccount")["metadata"]["name"]
    for key in ("replicas", "revisionHistoryLimit", "strategy"):
        assert chart["spec"][key] == base["spec"][key], key
    # the same soft anti-affinity, on the chart's pod labels (which add the release)
    pod_labels = chart["spec"]["template"]["metadata"]["labels"]
    assert _matches(chart["spec"]["selector"]["matchLabels"], pod_labels)
    assert _matches(base["spec"]["selector"]["matchLabels"], pod_labels)
    (base_term,) = base_pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    (chart_term,) = chart_pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    selector = chart_term["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert selector == chart["spec"]["selector"]["matchLabels"]
    assert chart_term["podAffinityTerm"]["topologyKey"] == base_term["podAffinityTerm"]["topologyKey"]
    assert chart_term["weight"] == base_term["weight"]


def test_each_replica_is_named_after_its_pod() -> None:
    for case in CASES:
        env = _container(find(_objects(case), "Deployment", "hoodied"))["env"]
        assert env[0] == {
            "name": "HOODIED_REPLICA",
            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
        }
        assert "replica" not in yaml.safe_load(_config_text(_objects(case)))


def test_the_values_reach_the_deployment() -> None:
    values = _values("all")
    base = _container(find(rendered("base"), "Deployment", "hoodied"))
    deployment = find(_objects("all"), "Deployment", "hoodied")
    container, pod = _container(deployment), _pod_spec(deployment)
    assert deployment["spec"]["replicas"] == values["replicaCount"]
    assert container["image"] == f"{values['image']['repository']}:{values['image']['tag']}"
    assert container["imagePullPolicy"] == values["image"]["pullPolicy"]
    assert container["env"] == base["env"] + values["extraEnv"]
    assert container["resources"] == values["resources"]
    for key in ("nodeSelector", "tolerations", "affinity"):
        assert pod[key] == values[key], key
    assert find(_objects("all"), "PodDisruptionBudget")["spec"]["maxUnavailable"] == "50%"


def test_pods_roll_when_the_configuration_changes() -> None:
    checksums = set()
    for case in CASES:
        objects = _objects(case)
        annotations = find(objects, "Deployment", "hoodied")["spec"]["template"]["metadata"]["annotations"]
        text = _config_text(objects)
        assert annotations["checksum/config"] == hashlib.sha256(text.removesuffix("\n").encode()).hexdigest()
        checksums.add(annotations["checksum/config"])
    assert len(checksums) == 2


# -- the configuration ---------------------------------------------------------------------------------------


def test_the_default_configuration_is_the_kustomize_bases() -> None:
    base = yaml.safe_load(find(rendered("base"), "ConfigMap", "hoodied-config")["data"]["hoodied.yaml"])
    assert yaml.safe_load(_config_text(_objects("defaults"))) == base


@pytest.mark.parametrize("case", CASES)
def test_the_configuration_is_one_the_daemon_accepts(case: str) -> None:
    config = _parse_config(_config_text(_objects(case)))
    assert config.zookeeper is not None
    assert config.metrics.host == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in _container(find(_objects(case), "Deployment"))["ports"]}
    assert ports["metrics"] == config.metrics.port
    grace = _pod_spec(find(_objects(case), "Deployment"))["terminationGracePeriodSeconds"]
    assert grace == config.jobs.shutdown_grace + 30
    assert not config.warnings


def test_the_values_reach_the_configuration() -> None:
    values = _values("all")
    text = _config_text(_objects("all"))
    raw = yaml.safe_load(text)
    assert raw["tables"] == values["tables"]
    assert "discover" not in raw
    assert raw["defaults"] == coalesce(load_chart(CHART).values["defaults"], values["defaults"])
    assert raw["spark"]["conf"] == values["spark"]["conf"]
    config = _parse_config(text)
    assert config.poll_interval == 60
    assert config.zookeeper is not None
    assert (config.zookeeper.connect, config.zookeeper.base_path, config.zookeeper.lock_base_path) == (
        values["zookeeper"]["connect"],
        values["zookeeper"]["basePath"],
        values["zookeeper"]["lockBasePath"],
    )
    assert (config.zookeeper.session_timeout, config.zookeeper.connection_timeout) == (40, 20)
    assert (config.spark.master, config.spark.max_concurrent_jobs) == ("local[4]", 3)
    assert [t.path for t in config.tables] == ["s3://lake/hudi/orders", "s3://lake/hudi/customers"]


def test_zookeeper_is_required() -> None:
    with pytest.raises(HelmRenderError, match=r"zookeeper\.connect"):
        render(CHART, {"zookeeper": {"connect": ""}})


def test_the_admin_token_is_mounted_only_when_a_secret_is_named() -> None:
    # off: no volume, no mount, no admin section
    deployment = find(_objects("defaults"), "Deployment")
    assert [v["name"] for v in _pod_spec(deployment)["volumes"]] == ["config", "tmp"]
    assert [m["mountPath"] for m in _container(deployment)["volumeMounts"]] == ["/etc/hoodied", "/tmp"]
    assert "admin" not in yaml.safe_load(_config_text(_objects("defaults")))
    # on: the Secret's key as the file the configuration names, read-only
    admin = _values("all")["admin"]
    deployment = find(_objects("all"), "Deployment")
    (volume,) = [v for v in _pod_spec(deployment)["volumes"] if v["name"] == "admin-token"]
    assert volume["secret"]["secretName"] == admin["existingSecret"]
    assert volume["secret"]["items"] == [{"key": admin["key"], "path": "token"}]
    (mount,) = [m for m in _container(deployment)["volumeMounts"] if m["name"] == "admin-token"]
    assert mount == {"name": "admin-token", "mountPath": ADMIN_DIR, "readOnly": True}
    text = _config_text(_objects("all"))
    assert text.endswith(f"\n{ADMIN_SECTION}\n")
    assert yaml.safe_load(text)["admin"] == {"token_file": f"{ADMIN_DIR}/token"}
    if "admin" in DaemonConfig.__dataclass_fields__:
        assert _parse_config(text).admin.token_file == f"{ADMIN_DIR}/token"


# -- Prometheus ----------------------------------------------------------------------------------------------


def test_the_service_monitor_scrapes_the_service_as_job_hoodied() -> None:
    objects = _objects("all", release="lake")
    monitor, service = find(objects, "ServiceMonitor"), find(objects, "Service")
    assert _matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    assert _matches(
        service["spec"]["selector"], find(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    )
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["path"], endpoint["interval"], endpoint["scrapeTimeout"]) == ("/metrics", "15s", "5s")
    # the rules and the dashboard select job="hoodied": the job is the Service's label, not its name
    assert service["metadata"]["name"] == "lake-hoodied"
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == "hoodied"
    assert 'job="hoodied"' in RULES.read_text(encoding="utf-8")
    for obj in (monitor, find(objects, "PrometheusRule")):
        assert obj["metadata"]["labels"]["release"] == "prometheus"


def test_the_prometheus_rule_holds_the_rules_files_groups() -> None:
    groups = _yaml(RULES)["groups"]
    assert _yaml(CHART_RULES)["groups"] == groups, f"{CHART_RULES} is not a copy of {RULES}'s groups"
    rule = find(_objects("all"), "PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert rule["spec"] == {"groups": groups}


# -- values --------------------------------------------------------------------------------------------------


def _schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    return loaded


@pytest.mark.parametrize("case", CASES)
def test_the_values_match_their_schema(case: str) -> None:
    schema = _schema()
    jsonschema.Draft7Validator.check_schema(schema)
    jsonschema.validate(coalesce(load_chart(CHART).values, _values(case)), schema)


@pytest.mark.parametrize(
    "override",
    [
        {"replicaCount": "three"},
        {"image": {"pullPolicy": "Sometimes"}},
        {"pollInterval": "30 seconds"},
        {"zookeeper": {"sessionTimout": "30s"}},
        {"spark": {"maxConcurrentJobs": 0}},
        {"tables": [{"name": "orders"}]},
        {"admin": {"existingSecret": "a secret"}},
        {"serviceMonitor": {"enabled": "yes"}},
        {"podDisruptionBudget": {"maxUnavailable": "half"}},
        {"replicas": 3},
    ],
)
def test_the_schema_refuses_bad_values(override: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(coalesce(load_chart(CHART).values, override), _schema())


def test_every_value_the_templates_name_exists_and_every_value_is_read() -> None:
    values = load_chart(CHART).values
    references = value_references(CHART)
    for path in sorted(references):
        node: Any = values
        for i, key in enumerate(path):
            assert isinstance(node, dict), f".Values.{'.'.join(path[:i])} is not a mapping in values.yaml"
            assert key in node, f".Values.{'.'.join(path)}: {key} is not in values.yaml"
            node = node[key]
    assert {path[0] for path in references} == set(values)
    assert set(_schema()["properties"]) == set(values) | {"global"}


# -- the chart as a whole ------------------------------------------------------------------------------------


def test_the_chart_deploys_the_projects_version() -> None:
    chart = _yaml(CHART / "Chart.yaml")
    version = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert chart["apiVersion"] == "v2"
    assert chart["appVersion"] == version
    image = _container(find(_objects("defaults"), "Deployment"))["image"]
    assert (
        image == _container(find(rendered("base"), "Deployment", "hoodied"))["image"] == f"hoodied:{version}"
    )


@pytest.mark.parametrize(
    ("release", "name"), [("hoodied", "hoodied"), ("hoodied-prod", "hoodied-prod"), ("lake", "lake-hoodied")]
)
def test_object_names_follow_the_release(release: str, name: str) -> None:
    objects = _objects("defaults", release=release)
    assert {o["metadata"]["name"] for o in objects} == {name, f"{name}-config"}
    pod = _pod_spec(find(objects, "Deployment"))
    assert pod["serviceAccountName"] == name
    assert {"name": "config", "configMap": {"name": f"{name}-config"}} in pod["volumes"]
    assert (
        find(objects, "Deployment")["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"]
        == release
    )


def test_the_notes_say_how_to_reach_a_replica() -> None:
    notes = render(CHART, release="lake", namespace="data")["templates/NOTES.txt"]
    assert "kubectl -n data port-forward service/lake-hoodied 9464:metrics" in notes
    assert "admin.existingSecret" in notes
    all_notes = render(CHART, _values("all"))["templates/NOTES.txt"]
    assert "No ServiceMonitor" not in all_notes
    assert "No admin token" not in all_notes


def test_the_readme_installs_the_chart_and_makes_the_secret() -> None:
    readme = HELM_README.read_text(encoding="utf-8")
    assert "helm install hoodied deploy/helm/hoodied" in readme
    admin = load_chart(CHART).values["admin"]
    m = re.search(r"kubectl -n \S+ create secret generic (\S+) --from-file=([\w.-]+)=", readme)
    assert m, "the README makes the admin token's Secret with kubectl"
    assert f"--set admin.existingSecret={m.group(1)}" in readme
    assert m.group(2) == admin["key"]
    for key in load_chart(CHART).values:
        assert f"`{key}" in readme, f"the README's values table lacks {key}"


# -- helm itself, where it is installed ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def helm() -> str:
    path = shutil.which("helm")
    if path is None:
        pytest.skip(
            "helm is not on PATH (not packaged in Debian bookworm, PyPI or npm; .ci/install does not "
            "fetch it): no helm lint / helm template cross-check; helm_render.py renders for the other tests"
        )
    return path


def _run(*args: str) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("case", CASES)
def test_helm_lint_accepts_the_chart(helm: str, case: str) -> None:
    _run(helm, "lint", "--strict", str(CHART), *(["-f", str(ALL_VALUES)] if case == "all" else []))


@pytest.mark.parametrize("case", CASES)
def test_helm_template_renders_the_same_objects(helm: str, case: str) -> None:
    out = _run(helm, "template", "hoodied", str(CHART), *(["-f", str(ALL_VALUES)] if case == "all" else []))
    theirs = {(o["kind"], o["metadata"]["name"]): o for o in yaml.safe_load_all(out) if o}
    ours = {(o["kind"], o["metadata"]["name"]): o for o in _objects(case)}
    assert sorted(theirs) == sorted(ours)
    for key, obj in ours.items():
        assert obj == theirs[key], key


def test_the_identity_annotations_pod_metadata_and_network_policy_reach_their_objects() -> None:
    """(issue 35) A ServiceAccount annotated for a cloud identity (IRSA, GKE and AKS Workload Identity), more
    pod annotations and labels beside the chart's (the selector unchanged), and a NetworkPolicy admitting
    only the named peers to the metrics port."""
    by_kind = {o["kind"]: o for o in _objects("all")}
    account = by_kind["ServiceAccount"]["metadata"]
    assert account["annotations"] == {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/hoodied"}
    deployment = by_kind["Deployment"]
    pod = deployment["spec"]["template"]["metadata"]
    assert pod["labels"]["azure.workload.identity/use"] == "true"
    assert pod["labels"]["app.kubernetes.io/name"] == "hoodied"
    assert "azure.workload.identity/use" not in deployment["spec"]["selector"]["matchLabels"]
    assert pod["annotations"]["example.com/team"] == "data-platform"
    assert "checksum/config" in pod["annotations"]
    policy = by_kind["NetworkPolicy"]["spec"]
    assert policy["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    (rule,) = policy["ingress"]
    assert rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    container = _pod_spec(deployment)["containers"][0]
    assert any(p["name"] == "metrics" for p in container["ports"])
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    defaults = {o["kind"]: o for o in _objects("defaults")}
    assert "annotations" not in defaults["ServiceAccount"]["metadata"]
    assert set(defaults["Deployment"]["spec"]["template"]["metadata"]["annotations"]) == {"checksum/config"}
