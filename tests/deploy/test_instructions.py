"""The Docker and Kubernetes instructions work as written (checked offline: no Docker engine or cluster
here): one image name and tag everywhere, a ``docker run`` that reaches its metrics port and mounts its
table, overlays that create their namespace, and the one prerequisite named."""

from __future__ import annotations

import re
import shlex
import tomllib

import pytest
import yaml
from deploy_tree import HOODIED_KUSTOMIZATIONS, REPO_ROOT, find, rendered

from hoodied.config import DaemonConfig

VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGE = f"hoodied:{VERSION}"
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
DOCKERFILE = (REPO_ROOT / "Dockerfile").read_text(encoding="utf-8")
_IMAGE_REF = re.compile(r"(?:[\w.:-]+/)*hoodied:[\w.-]+")


def _docker_commands(text: str, verb: str) -> list[list[str]]:
    """The ``docker <verb>`` commands of a text (continuation lines joined, comment markers dropped)."""
    lines = [line.strip().lstrip("#").strip() for line in text.splitlines()]
    joined = " ".join(line[:-1] if line.endswith("\\") else line + "\n" for line in lines)
    return [shlex.split(m) for m in re.findall(rf"docker {verb} [^\n]+", joined)]


def test_one_image_name_and_tag_everywhere() -> None:
    refs = set(_IMAGE_REF.findall(README)) | set(_IMAGE_REF.findall(DOCKERFILE))
    for kustomization in HOODIED_KUSTOMIZATIONS:
        deployment = find(rendered(kustomization), "Deployment", "hoodied")
        refs.update(c["image"] for c in deployment["spec"]["template"]["spec"]["containers"])
    for overlay in ("spark-k8s", "production"):
        config = yaml.safe_load((REPO_ROOT / f"deploy/overlays/{overlay}/hoodied.yaml").read_text())
        refs.add(config["spark"]["conf"]["spark.kubernetes.container.image"])
    assert refs == {IMAGE}


@pytest.mark.parametrize("text", [README, DOCKERFILE], ids=["README", "Dockerfile"])
def test_the_docker_run_example_reaches_its_metrics_and_mounts_its_tables(text: str) -> None:
    (build,) = _docker_commands(text, "build")
    assert build[build.index("-t") + 1] == IMAGE
    (run,) = _docker_commands(text, "run")
    assert run[-1] == IMAGE
    mounts = [run[i + 1].split(":") for i, arg in enumerate(run) if arg == "-v"]
    published = [run[i + 1] for i, arg in enumerate(run) if arg == "-p"]
    config_source = next(src for src, dst, *_ in mounts if dst == "/etc/hoodied/hoodied.yaml")
    config = DaemonConfig.load(REPO_ROOT / config_source.replace("$PWD/", ""))
    assert config.metrics.host == "0.0.0.0", "inside a container only 0.0.0.0 is reachable through -p"
    assert f"{config.metrics.port}:{config.metrics.port}" in published
    for table in config.tables:
        assert any(table.path.startswith(dst.rstrip("/") + "/") for _, dst, *_ in mounts), table.path


@pytest.mark.parametrize("kustomization", ["overlays/dev", "overlays/spark-k8s", "overlays/production"])
def test_an_overlay_creates_its_namespace(kustomization: str) -> None:
    objects = rendered(kustomization)
    deployment = find(objects, "Deployment", "hoodied")
    namespace = find(objects, "Namespace")
    assert namespace["metadata"]["name"] == deployment["metadata"]["namespace"]


def test_the_readme_names_the_one_prerequisite_of_the_manifests() -> None:
    kinds = {o["kind"] for k in HOODIED_KUSTOMIZATIONS for o in rendered(k) if "coreos" in o["apiVersion"]}
    assert kinds == {"ServiceMonitor", "PrometheusRule"}
    assert "Prometheus Operator's CRDs" in README
    assert all(kind in README for kind in kinds)
