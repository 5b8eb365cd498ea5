"""Spark on Kubernetes as the spark-k8s and production overlays render it: the driver in the hoodied pod
(client mode) runs its executors as pods. The rendered configuration and manifests agree with each other
(namespace, image, accounts, ports, the driver's pod name and IP from the downward API), the Role grants what
Spark's driver calls, and Spark's own executor-pod builder, given the settings the daemon's session gets,
makes a valid pod that connects back to the driver, runs our image's entrypoint and is owned by the driver's
pod."""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from typing import Any

import kubernetes_validate
import pytest
import yaml
from deploy_tree import REPO_ROOT, SPARK_K8S_KUSTOMIZATIONS, find, rendered

from hoodied.config import DaemonConfig
from hoodied.daemon import spark_config
from hoodied.spark import java_available

Obj = dict[str, Any]

#: A Kubernetes release whose schemas kubernetes-validate ships (as in test_manifests.py).
KUBERNETES_VERSION = "1.33"
IMAGE = "hoodied:0.1.0"
#: What the downward API gives a replica's pod: its name and IP (made up).
POD_NAME = "hoodied-7c9f8d6b5-x2x4q"
POD_IP = "10.42.0.9"
#: The API calls of Spark's driver in client mode, in its own namespace (resource -> verbs).
DRIVER_CALLS = {
    "pods": {"get", "list", "watch", "create", "patch", "delete", "deletecollection"},
    "configmaps": {"get", "create", "delete", "deletecollection"},
    "services": {"list", "delete", "deletecollection"},
    "persistentvolumeclaims": {"list"},
}


def _container(objects: tuple[Obj, ...]) -> Obj:
    (container,) = find(objects, "Deployment", "hoodied")["spec"]["template"]["spec"]["containers"]
    assert isinstance(container, dict)
    return container


def _config(objects: tuple[Obj, ...]) -> DaemonConfig:
    text = find(objects, "ConfigMap", "hoodied-config")["data"]["hoodied.yaml"]
    return DaemonConfig.parse(text, source="hoodied.yaml")


def _env(container: Obj) -> dict[str, Obj]:
    return {e["name"]: e for e in container["env"]}


def _submit_conf(container: Obj) -> dict[str, str]:
    """The ``--conf`` settings of PYSPARK_SUBMIT_ARGS, as the kubelet expands them in a pod."""
    value = _env(container)["PYSPARK_SUBMIT_ARGS"]["value"]
    args = shlex.split(value.replace("$(HOODIED_REPLICA)", POD_NAME).replace("$(POD_IP)", POD_IP))
    assert args[-1] == "pyspark-shell", args
    pairs = args[:-1]
    assert pairs[::2] == ["--conf"] * (len(pairs) // 2), args
    return dict(p.split("=", 1) for p in pairs[1::2])


def _memory_mib(quantity: str) -> int:
    """A JVM size (2g, 512m) or a Kubernetes memory quantity (6Gi, 6144Mi) in MiB."""
    m = re.fullmatch(r"(\d+)([mg]|Mi|Gi)", quantity)
    assert m, quantity
    return int(m.group(1)) * (1024 if m.group(2) in ("g", "Gi") else 1)


@pytest.mark.parametrize("kustomization", SPARK_K8S_KUSTOMIZATIONS)
def test_the_configuration_and_the_manifests_agree(kustomization: str) -> None:
    objects = rendered(kustomization)
    config = _config(objects)
    conf = config.spark.conf
    deployment = find(objects, "Deployment", "hoodied")
    pod = deployment["spec"]["template"]["spec"]
    container = _container(objects)
    assert config.spark.master == "k8s://https://kubernetes.default.svc:443"
    assert conf["spark.kubernetes.namespace"] == deployment["metadata"]["namespace"]
    # the executors run the Deployment's image: the same Python and hoodie as the driver
    assert conf["spark.kubernetes.container.image"] == container["image"] == IMAGE
    # the driver's account is its pod's; the executors' exists, has no token and is bound to nothing
    driver_account = conf["spark.kubernetes.authenticate.driver.serviceAccountName"]
    assert driver_account == pod["serviceAccountName"]
    find(objects, "ServiceAccount", driver_account)
    executor_account = find(
        objects, "ServiceAccount", conf["spark.kubernetes.authenticate.executor.serviceAccountName"]
    )
    assert executor_account["automountServiceAccountToken"] is False
    bound = [s["name"] for o in objects if o["kind"].endswith("RoleBinding") for s in o["subjects"]]
    assert executor_account["metadata"]["name"] not in bound
    # the driver's pod name (executors' owner) and IP come from the downward API, per pod
    env = _env(container)
    assert env["HOODIED_REPLICA"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    assert _submit_conf(container) == {
        "spark.kubernetes.driver.pod.name": POD_NAME,
        "spark.driver.host": POD_IP,
    }
    # executors connect to the pod's IP on the declared ports; since Spark 4.1 they connect to the bind
    # address, which must therefore stay the driver host's (its default)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["spark-driver"] == int(conf["spark.driver.port"])
    assert ports["spark-blockmgr"] == int(conf["spark.blockManager.port"])
    assert "spark.driver.bindAddress" not in conf
    # the executors' Python workers run the image's interpreter (pyspark sends PYSPARK_PYTHON with tasks)
    assert env["PYSPARK_PYTHON"]["value"] == "/usr/local/bin/python3"
    assert (REPO_ROOT / "Dockerfile").read_text().count("\nFROM python:3.11-slim") == 1
    # pod names are Spark's, unique per driver start (a fixed prefix would collide between replicas)
    assert "spark.kubernetes.executor.podNamePrefix" not in conf
    # Python's memory is in the overhead, not under pyspark.memory's address-space limit
    assert "spark.executor.pyspark.memory" not in conf
    assert _memory_mib(conf["spark.executor.memoryOverhead"]) >= _memory_mib(conf["spark.executor.memory"])
    assert int(conf["spark.executor.instances"]) >= 1
    assert int(conf["spark.executor.cores"]) >= 1


@pytest.mark.parametrize("kustomization", SPARK_K8S_KUSTOMIZATIONS)
def test_the_role_grants_what_the_driver_calls_and_no_more(kustomization: str) -> None:
    objects = rendered(kustomization)
    account = _config(objects).spark.conf["spark.kubernetes.authenticate.driver.serviceAccountName"]
    namespace = find(objects, "Deployment", "hoodied")["metadata"]["namespace"]
    assert not [o for o in objects if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    (binding,) = [
        o
        for o in objects
        if o["kind"] == "RoleBinding"
        and {"kind": "ServiceAccount", "name": account, "namespace": namespace} in o["subjects"]
    ]
    assert binding["roleRef"]["kind"] == "Role"
    role = find(objects, "Role", binding["roleRef"]["name"])
    assert role["metadata"]["namespace"] == namespace
    granted: dict[str, set[str]] = {}
    for rule in role["rules"]:
        assert rule["apiGroups"] == [""], rule
        assert set(rule) == {"apiGroups", "resources", "verbs"}, "no resourceNames: pod names are Spark's"
        for resource in rule["resources"]:
            granted.setdefault(resource, set()).update(rule["verbs"])
    assert set(granted) == set(DRIVER_CALLS)
    for resource, calls in DRIVER_CALLS.items():
        assert calls <= granted[resource], (resource, calls - granted[resource])
    assert {"create", "delete", "watch"} <= granted["pods"]
    assert "*" not in {v for verbs in granted.values() for v in verbs}


# -- the executor pod, as Spark builds it ------------------------------------------------------------------


@pytest.fixture(scope="module")
def jvm() -> Iterator[Any]:
    """A JVM with pyspark's jars (no SparkContext: Spark's pod builder needs none)."""
    if not java_available():
        pytest.skip("no Java runtime: Spark's executor-pod builder runs in the JVM (.ci/run installs it)")
    from pyspark.java_gateway import launch_gateway

    gateway = launch_gateway()
    try:
        yield gateway.jvm
    finally:
        gateway.shutdown()
        # the JVM exits when its standard input closes (pyspark's launch_gateway)
        gateway.proc.stdin.close()
        gateway.proc.wait(timeout=60)


def _scala_object(package: Any, name: str) -> Any:
    return getattr(getattr(package, f"{name}$"), "MODULE$")


def _executor_pod(jvm: Any, settings: dict[str, str], app_name: str) -> Obj:
    """The pod Spark's driver would create for executor 1 of an application with ``settings``, whose
    driver runs in the pod ``POD_NAME`` (Spark's KubernetesExecutorBuilder, as ExecutorPodsAllocator calls
    it; the executor name prefix set as KubernetesClusterManager sets it in client mode)."""
    conf = jvm.org.apache.spark.SparkConf(False)
    for key, value in settings.items():
        conf.set(key, value)
    conf.set("spark.app.name", app_name)
    k8s = jvm.org.apache.spark.deploy.k8s
    kubernetes_conf = _scala_object(k8s, "KubernetesConf")
    if not conf.contains("spark.kubernetes.executor.podNamePrefix"):
        conf.set("spark.kubernetes.executor.podNamePrefix", kubernetes_conf.getResourceNamePrefix(app_name))
    model = jvm.io.fabric8.kubernetes.api.model
    driver = (
        model.PodBuilder().withNewMetadata().withName(POD_NAME).withUid("driver-uid").endMetadata().build()
    )
    executor_conf = kubernetes_conf.createExecutorConf(
        conf, "1", "spark-application-1", jvm.scala.Some(driver), 0
    )
    profile = _scala_object(jvm.org.apache.spark.resource, "ResourceProfile").getOrCreateDefaultProfile(conf)
    secret_file = _scala_object(jvm.org.apache.spark.internal.config, "package").AUTH_SECRET_FILE_EXECUTOR()
    security = jvm.org.apache.spark.SecurityManager(conf, _scala_object(jvm.scala, "None"), secret_file)
    spec = jvm.org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBuilder().buildFromFeatures(
        executor_conf, security, None, profile
    )
    spark_pod = spec.pod()
    pod = (
        model.PodBuilder(spark_pod.pod())
        .editSpec()
        .addToContainers(0, spark_pod.container())
        .endSpec()
        .build()
    )
    loaded: Obj = yaml.safe_load(jvm.io.fabric8.kubernetes.client.utils.Serialization.asYaml(pod))
    return loaded


@pytest.mark.spark
@pytest.mark.parametrize("kustomization", SPARK_K8S_KUSTOMIZATIONS)
def test_spark_builds_a_valid_executor_pod_that_reaches_its_driver(
    jvm: Any, kustomization: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    objects = rendered(kustomization)
    monkeypatch.setenv("HOODIED_REPLICA", POD_NAME)  # what the downward API sets
    config = _config(objects)
    container = _container(objects)
    session = spark_config(config)
    # PYSPARK_SUBMIT_ARGS reach the driver JVM first; the session's own settings are applied over them
    settings = {**_submit_conf(container), **session.settings(), "spark.master": session.master}
    pod = _executor_pod(jvm, settings, app_name=session.app_name)
    pod.setdefault("metadata", {})["namespace"] = config.spark.conf["spark.kubernetes.namespace"]
    kubernetes_validate.validate(pod, KUBERNETES_VERSION, strict=True)

    conf = config.spark.conf
    spec = pod["spec"]
    (executor,) = spec["containers"]
    # our image, started with the argument our entrypoint turns into Spark's executor backend
    assert executor["image"] == container["image"]
    assert executor["args"] == ["executor"]
    assert "command" not in executor
    env = {e["name"]: e.get("value") for e in executor["env"]}
    assert env["SPARK_DRIVER_URL"] == f"spark://CoarseGrainedScheduler@{POD_IP}:{conf['spark.driver.port']}"
    assert f"-Dspark.blockManager.port={conf['spark.blockManager.port']}" in env.values()
    # owned by the driver's pod: deleted with it
    assert pod["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "controller": True, "name": POD_NAME, "uid": "driver-uid"}
    ]
    # named after the replica, and unique to this start of its driver
    assert re.fullmatch(rf"hoodied-{POD_NAME}-[0-9a-f]{{16}}-exec-1", pod["metadata"]["name"])
    assert spec["serviceAccountName"] == conf["spark.kubernetes.authenticate.executor.serviceAccountName"]
    labels = pod["metadata"]["labels"]
    assert labels["spark-role"] == "executor"
    assert labels["app.kubernetes.io/component"] == "executor"
    # sized as the configuration says: heap plus overhead, cores as CPU request
    resources = executor["resources"]
    memory = _memory_mib(conf["spark.executor.memory"]) + _memory_mib(conf["spark.executor.memoryOverhead"])
    assert (
        _memory_mib(resources["requests"]["memory"]) == _memory_mib(resources["limits"]["memory"]) == memory
    )
    assert resources["requests"]["cpu"] == conf["spark.executor.cores"]
