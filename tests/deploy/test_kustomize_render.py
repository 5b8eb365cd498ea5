"""``kustomize.py`` renders deploy/'s kustomizations as kustomize does: its pieces against values kustomize
itself produced, each kustomization as a whole, and (where kubectl happens to exist) against
``kubectl kustomize`` object for object."""

from __future__ import annotations

import shutil
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml
from deploy_tree import (
    DEPLOY,
    HOODIED_KUSTOMIZATIONS,
    KUSTOMIZATIONS,
    SPARK_K8S_KUSTOMIZATIONS,
    find,
    rendered,
)
from kustomize import KustomizeError, config_map_hash, render, strategic_merge

NAMESPACES = {
    "base": "hoodied",
    "overlays/dev": "hoodied-dev",
    "overlays/spark-k8s": "hoodied",
    "overlays/production": "hoodied",
}


def _key(obj: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = obj["metadata"]
    return obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"]


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        # kustomize v5.5 (kubectl 1.27 to 1.33) names these generated ConfigMaps x-<hash>
        ({"FOO": "Bar"}, "42cfbf598f"),
        ({"a": "b"}, "4h2mbtbbt6"),
    ],
)
def test_config_map_hash_is_kustomizes(data: dict[str, str], expected: str) -> None:
    assert config_map_hash(data) == expected


def test_strategic_merge_merges_pod_lists_by_key_patch_elements_first() -> None:
    target = {
        "containers": [
            {"name": "c1", "image": "x", "env": [{"name": n, "value": "1"} for n in "ABCD"]},
            {"name": "c2", "image": "y", "args": ["a", "b"]},
        ]
    }
    patch = {
        "containers": [
            {"name": "c2", "image": "z", "args": ["c"]},
            {"name": "c1", "env": [{"name": n, "value": "2"} for n in "CEA"]},
            {"name": "c3", "image": "w"},
        ]
    }
    # what kubectl kustomize makes of the same patch
    assert strategic_merge(target, patch) == {
        "containers": [
            {"name": "c2", "image": "z", "args": ["c"]},
            {
                "name": "c1",
                "image": "x",
                "env": [{"name": n, "value": v} for n, v in zip("CEABD", "22211", strict=True)],
            },
            {"name": "c3", "image": "w"},
        ]
    }
    assert strategic_merge({"a": {"b": 1, "c": 2}}, {"a": {"c": None, "d": 3}}) == {"a": {"b": 1, "d": 3}}


def _kustomization(tmp_path: Path, body: str, resources: str) -> Path:
    (tmp_path / "kustomization.yaml").write_text(textwrap.dedent(body))
    (tmp_path / "resources.yaml").write_text(textwrap.dedent(resources))
    return tmp_path


def test_images_are_renamed_and_retagged(tmp_path: Path) -> None:
    directory = _kustomization(
        tmp_path,
        """\
        resources: [resources.yaml]
        images:
          - {name: hoodied, newName: registry.example.com:5000/data/hoodied, newTag: "0.2.0"}
          - {name: zookeeper, digest: "sha256:0123"}
        """,
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: p}
        spec:
          initContainers: [{name: i, image: "zookeeper:3.9.3"}]
          containers: [{name: a, image: "hoodied:0.1.0"}, {name: b, image: "hoodied-other:1"}]
        """,
    )
    (pod,) = render(directory)
    assert [c["image"] for c in pod["spec"]["containers"]] == [
        "registry.example.com:5000/data/hoodied:0.2.0",
        "hoodied-other:1",
    ]
    assert pod["spec"]["initContainers"][0]["image"] == "zookeeper@sha256:0123"


def test_a_feature_it_does_not_know_is_refused(tmp_path: Path) -> None:
    directory = _kustomization(
        tmp_path,
        """\
        resources: [resources.yaml]
        commonLabels: {a: b}
        """,
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    )
    with pytest.raises(KustomizeError, match="commonLabels"):
        render(directory)


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_each_kustomization_renders_unique_objects(kustomization: str) -> None:
    objects = rendered(kustomization)
    keys = [_key(o) for o in objects]
    assert len(keys) == len(set(keys)), keys
    for obj in objects:
        assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "hoodied", _key(obj)


@pytest.mark.parametrize("kustomization", HOODIED_KUSTOMIZATIONS)
def test_the_config_map_gets_a_content_hash_and_the_deployment_follows_it(kustomization: str) -> None:
    objects = rendered(kustomization)
    config_map = find(objects, "ConfigMap", "hoodied-config")
    name = config_map["metadata"]["name"]
    assert name == f"hoodied-config-{config_map_hash(config_map['data'])}"
    deployment = find(objects, "Deployment", "hoodied")
    volumes = deployment["spec"]["template"]["spec"]["volumes"]
    assert {"name": "config", "configMap": {"name": name}} in volumes
    for obj in objects:
        if obj["kind"] == "Namespace":  # cluster-scoped: the overlay's own namespace
            assert obj["metadata"]["name"] == NAMESPACES[kustomization]
        else:
            assert obj["metadata"]["namespace"] == NAMESPACES[kustomization], _key(obj)


@pytest.mark.parametrize("kustomization", SPARK_K8S_KUSTOMIZATIONS)
def test_the_role_binding_names_the_account_in_its_namespace(kustomization: str) -> None:
    binding = find(rendered(kustomization), "RoleBinding", "hoodied")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "hoodied", "namespace": NAMESPACES[kustomization]}
    ]


def test_overlays_replace_the_configuration_file() -> None:
    base = find(rendered("base"), "ConfigMap", "hoodied-config")
    names = {base["metadata"]["name"]}
    for overlay in ("dev", "spark-k8s", "production"):
        config_map = find(rendered(f"overlays/{overlay}"), "ConfigMap", "hoodied-config")
        source = DEPLOY / "overlays" / overlay / "hoodied.yaml"
        assert config_map["data"] == {"hoodied.yaml": source.read_text(encoding="utf-8")}
        names.add(config_map["metadata"]["name"])
    assert len(names) == 4, names


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_kubectl_kustomize_renders_the_same_objects(kustomization: str) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the offline renderer is the only one here (cross-check only)")
    out = subprocess.run(
        [kubectl, "kustomize", str(DEPLOY / kustomization)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    theirs = {_key(o): o for o in yaml.safe_load_all(out) if o}
    ours = {_key(o): o for o in rendered(kustomization)}
    assert sorted(ours) == sorted(theirs)
    for key, obj in ours.items():
        assert obj == theirs[key], key
