"""The rendered manifests are valid Kubernetes objects (strict schemas of a recent Kubernetes, offline), the
Prometheus Operator's objects have the structure its CRDs require, and the pieces agree with each other and
with the daemon: the configuration parses, the grace period covers the drain, probes and ports are the
daemon's. Spark on Kubernetes has its own module, test_spark_kubernetes.py."""

from __future__ import annotations

import copy
import re
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_tree import HOODIED_KUSTOMIZATIONS, KUSTOMIZATIONS, find, rendered

from hoodied.config import DaemonConfig

#: A recent Kubernetes release whose schemas kubernetes-validate ships.
KUBERNETES_VERSION = "1.33"
#: Kinds of CRDs kubernetes-validate has no schema for; checked below instead.
CRD_KINDS = frozenset({"ServiceMonitor", "PrometheusRule"})
#: The margin on top of jobs.shutdown_grace for releasing claims and stopping Spark after a SIGTERM.
GRACE_MARGIN = 30

Obj = dict[str, Any]


def _pod_spec(obj: Obj) -> Obj:
    spec: Obj = obj["spec"]["template"]["spec"]
    return spec


def _container(deployment: Obj) -> Obj:
    containers = _pod_spec(deployment)["containers"]
    assert [c["name"] for c in containers] == ["hoodied"]
    container: Obj = containers[0]
    return container


def _daemon_config(objects: tuple[Obj, ...]) -> tuple[DaemonConfig, Obj]:
    text = find(objects, "ConfigMap", "hoodied-config")["data"]["hoodied.yaml"]
    return DaemonConfig.parse(text, source="hoodied.yaml"), yaml.safe_load(text)


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _memory_bytes(quantity: str) -> float:
    """A Kubernetes memory quantity (6Gi, 512Mi) or a JVM size (3g, 768m) in bytes."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGT]i?|[kmgt])?", quantity)
    assert m, quantity
    unit = (m.group(2) or "").lower().rstrip("i")
    return float(m.group(1)) * 1024 ** " kmgt".index(unit or " ")


# -- schemas -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_every_object_is_valid_against_the_kubernetes_schemas(kustomization: str) -> None:
    unchecked = []
    for obj in rendered(kustomization):
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            unchecked.append(obj["kind"])
        except kubernetes_validate.ValidationError as e:
            where = ".".join(str(p) for p in e.path)
            pytest.fail(f"{obj['kind']} {obj['metadata']['name']}: {where}: {e.message}")
    assert set(unchecked) <= CRD_KINDS, unchecked


def test_strict_validation_rejects_an_unknown_field() -> None:
    deployment = copy.deepcopy(find(rendered("base"), "Deployment", "hoodied"))
    _container(deployment)["livenesProbe"] = _container(deployment).pop("livenessProbe")
    with pytest.raises(kubernetes_validate.ValidationError, match="livenesProbe"):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_the_service_monitor_scrapes_the_metrics_service(kustomization: str) -> None:
    objects = rendered(kustomization)
    monitor = find(objects, "ServiceMonitor", "hoodied")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(monitor["spec"]) <= {"selector", "endpoints", "namespaceSelector", "jobLabel"}
    selector = monitor["spec"]["selector"]
    assert set(selector) == {"matchLabels"}
    services = [
        o
        for o in objects
        if o["kind"] == "Service" and _matches(selector["matchLabels"], o["metadata"].get("labels", {}))
    ]
    assert [s["metadata"]["name"] for s in services] == ["hoodied"]
    service = services[0]
    assert service["metadata"]["namespace"] == monitor["metadata"]["namespace"]
    assert service["spec"].get("clusterIP") != "None", "a plain (not headless) Service"
    port_names = {p["name"] for p in service["spec"]["ports"]}
    endpoints = monitor["spec"]["endpoints"]
    assert endpoints
    for endpoint in endpoints:
        assert endpoint["port"] in port_names
        assert endpoint.get("path", "/metrics") == "/metrics"
        assert re.fullmatch(r"\d+[smh]", endpoint["interval"])
    # the Service selects the daemon's pods, on the container port named metrics
    deployment = find(objects, "Deployment", "hoodied")
    assert _matches(service["spec"]["selector"], deployment["spec"]["template"]["metadata"]["labels"])
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    # alerts and dashboards select job="hoodied": the ServiceMonitor's default job label is the Service's name
    assert "jobLabel" not in monitor["spec"]
    assert service["metadata"]["name"] == "hoodied"


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_the_prometheus_rule_has_the_structure_of_the_crd(kustomization: str) -> None:
    rule = find(rendered(kustomization), "PrometheusRule", "hoodied")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule["spec"]) == {"groups"}
    names = [g["name"] for g in rule["spec"]["groups"]]
    assert len(names) == len(set(names))
    assert all(names)
    for group in rule["spec"]["groups"]:
        assert set(group) <= {"name", "interval", "rules"}
        for r in group["rules"]:
            assert set(r) <= {"alert", "record", "expr", "for", "labels", "annotations"}, r
            assert ("alert" in r) != ("record" in r)
            assert isinstance(r["expr"], str)
            assert r["expr"].strip()
            if "alert" in r:
                assert re.fullmatch(r"(\d+[smhd])+", r["for"]), r
                assert r["labels"]["severity"] in ("warning", "critical"), r
                assert set(r["annotations"]) >= {"summary", "description"}, r
                assert all(isinstance(v, str) for v in {**r["labels"], **r["annotations"]}.values())


# -- the daemon in its pod -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_the_configuration_is_one_the_daemon_accepts(kustomization: str) -> None:
    objects = rendered(kustomization)
    config, raw = _daemon_config(objects)
    deployment = find(objects, "Deployment", "hoodied")
    # every pod reads the same file: the replica's name must come from its pod, not from the file
    assert "replica" not in raw
    assert {
        "name": "HOODIED_REPLICA",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    } in _container(deployment)["env"]
    # several replicas share the work only through ZooKeeper
    assert config.zookeeper is not None
    assert config.metrics.host == "0.0.0.0"
    container = _container(deployment)
    # the image's entrypoint (tini, then hoodied) runs the arguments
    assert "command" not in container
    assert container["args"] == ["run", "--config", "/etc/hoodied/hoodied.yaml"]
    assert {"name": "config", "mountPath": "/etc/hoodied", "readOnly": True} in container["volumeMounts"]


def test_each_replica_is_named_after_its_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    text = find(rendered("overlays/production"), "ConfigMap", "hoodied-config")["data"]["hoodied.yaml"]
    monkeypatch.setenv("HOODIED_REPLICA", "hoodied-7c9f8d6b5-x2x4q")  # what the downward API sets
    assert DaemonConfig.parse(text).replica == "hoodied-7c9f8d6b5-x2x4q"


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_the_grace_period_covers_the_drain(kustomization: str) -> None:
    objects = rendered(kustomization)
    config, _ = _daemon_config(objects)
    grace = _pod_spec(find(objects, "Deployment", "hoodied"))["terminationGracePeriodSeconds"]
    assert grace == config.jobs.shutdown_grace + GRACE_MARGIN == 150


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_probes_and_ports_are_the_daemons(kustomization: str) -> None:
    objects = rendered(kustomization)
    config, _ = _daemon_config(objects)
    container = _container(find(objects, "Deployment", "hoodied"))
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == config.metrics.port == 9464
    for probe, path in (
        ("startupProbe", "/healthz"),
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
    ):
        assert container[probe]["httpGet"] == {"path": path, "port": "metrics"}, probe
    # the liveness window of /healthz is at least 60 s; failing the probe takes about as long
    live = container["livenessProbe"]
    assert live["periodSeconds"] * live["failureThreshold"] >= 60


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_the_pod_runs_unprivileged_on_a_read_only_root(kustomization: str) -> None:
    deployment = find(rendered(kustomization), "Deployment", "hoodied")
    pod = _pod_spec(deployment)
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    container = _container(deployment)
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
    assert {"name": "tmp", "emptyDir": {"sizeLimit": "20Gi"}} in pod["volumes"]
    assert {"name": "HOME", "value": "/tmp"} in container["env"]


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_resources_hold_the_spark_driver(kustomization: str) -> None:
    objects = rendered(kustomization)
    config, _ = _daemon_config(objects)
    resources = _container(find(objects, "Deployment", "hoodied"))["resources"]
    limit = _memory_bytes(resources["limits"]["memory"])
    assert resources["requests"]["memory"] == resources["limits"]["memory"]
    heap = _memory_bytes(config.spark.conf["spark.driver.memory"])
    assert heap <= limit / 2, "the JVM heap leaves room for Python workers and off-heap memory"
    if kustomization == "base":
        assert resources["requests"] == {"cpu": "2", "memory": "6Gi"}


@pytest.mark.parametrize(
    ("kustomization", "replicas"),
    [("base", 3), ("overlays/dev", 1), ("overlays/spark-k8s", 3), ("overlays/production", 3)],
)
def test_replicas_spread_over_nodes_and_survive_drains(kustomization: str, replicas: int) -> None:
    objects = rendered(kustomization)
    deployment = find(objects, "Deployment", "hoodied")
    assert deployment["spec"]["replicas"] == replicas
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert _matches(deployment["spec"]["selector"]["matchLabels"], pod_labels)
    anti_affinity = _pod_spec(deployment)["affinity"]["podAntiAffinity"]
    (term,) = anti_affinity["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert _matches(term["podAffinityTerm"]["labelSelector"]["matchLabels"], pod_labels)
    budget = find(objects, "PodDisruptionBudget", "hoodied")
    assert _matches(budget["spec"]["selector"]["matchLabels"], pod_labels)
    assert budget["spec"] == {**budget["spec"], "maxUnavailable": 1}, "one replica may always be drained"


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_environment_references_name_earlier_variables(kustomization: str) -> None:
    for obj in rendered(kustomization):
        if obj["kind"] not in ("Deployment", "StatefulSet"):
            continue
        for container in _pod_spec(obj)["containers"]:
            defined: set[str] = set()
            for env in container.get("env", []):
                # $$ is an escaped $, not a reference
                for name in re.findall(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", env.get("value", "")):
                    assert name in defined, (
                        f"{container['name']}: {env['name']} uses $({name}) before it is set"
                    )
                defined.add(env["name"])


# -- Spark in the pod (Spark on Kubernetes: test_spark_kubernetes.py) --------------------------------------


@pytest.mark.parametrize("kustomization", ["base", "overlays/dev"])
def test_spark_runs_in_the_pod_elsewhere_with_no_rights_in_the_api(kustomization: str) -> None:
    objects = rendered(kustomization)
    config, _ = _daemon_config(objects)
    assert config.spark.master.startswith("local[")
    # a local Spark never calls the API: the account is bound to nothing
    assert not [o["kind"] for o in objects if o["kind"] in ("Role", "RoleBinding", "ClusterRoleBinding")]


# -- ZooKeeper -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("kustomization", "servers"), [("examples/zookeeper", 3), ("overlays/dev", 1)])
def test_the_zookeeper_ensemble_names_each_of_its_servers(kustomization: str, servers: int) -> None:
    objects = rendered(kustomization)
    stateful_set = find(objects, "StatefulSet", "zookeeper")
    assert stateful_set["spec"]["replicas"] == servers
    headless = find(objects, "Service", stateful_set["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is True
    (container,) = _pod_spec(stateful_set)["containers"]
    assert container["image"].startswith("zookeeper:")
    env = {e["name"]: e["value"] for e in container["env"]}
    expected = [
        f"server.{i + 1}=zookeeper-{i}.{headless['metadata']['name']}:2888:3888;2181" for i in range(servers)
    ]
    assert env["ZOO_SERVERS"].split() == expected
    # myid is the ordinal + 1, computed by the shell ($$ escapes the kubelet's $(...) expansion)
    assert "ZOO_MY_ID=$$(( ${HOSTNAME##*-} + 1 ))" in container["command"][-1]
    client = find(objects, "Service", "zookeeper")
    assert client["spec"]["ports"] == [{"name": "client", "port": 2181, "targetPort": "client"}]
    assert _matches(client["spec"]["selector"], stateful_set["spec"]["template"]["metadata"]["labels"])
    budget = find(objects, "PodDisruptionBudget", "zookeeper")
    assert budget["spec"]["maxUnavailable"] == 1


def test_dev_connects_to_the_zookeeper_it_deploys() -> None:
    objects = rendered("overlays/dev")
    config, _ = _daemon_config(objects)
    assert config.zookeeper is not None
    host, port = config.zookeeper.connect.split(",")[0].split(":")
    service = find(objects, "Service", host)
    assert int(port) in [p["port"] for p in service["spec"]["ports"]]
