"""A small renderer of exactly the kustomize features ``deploy/`` uses, so that the manifests can be
rendered and checked on a machine without kustomize or kubectl (``kubectl kustomize`` is a cross-check where
it exists).

Supported, with kustomize's semantics as of v5:

- ``resources``: YAML files (several documents each) and directories holding a ``kustomization.yaml``,
  built first with their own settings;
- ``configMapGenerator``: ``files`` (``path`` or ``key=path``) and ``literals`` (``key=value``), ``behavior``
  ``create`` / ``merge`` / ``replace``; the name gets the content-hash suffix kustomize computes, and
  references to it are rewritten (pod volumes, ``envFrom``, ``valueFrom.configMapKeyRef``);
- ``patches`` given by ``path``: strategic merge patches, their target found by the patch's kind and name
  (maps merge; the lists of a pod spec merge by their keys, ``containers`` by name and so on, the patch's
  elements first as kustomize orders them; other lists are replaced; ``null`` deletes a key);
- ``namespace``: set on every namespaced object; a RoleBinding's ServiceAccount subject that names one of the
  rendered ServiceAccounts follows that account's namespace, as kustomize's name references do;
- ``labels`` with ``pairs`` and ``includeTemplates`` (pod templates and a StatefulSet's volume claim
  templates); ``includeSelectors: true`` is refused;
- ``images``: ``name`` with ``newName``, ``newTag`` and ``digest``, in every ``containers`` and
  ``initContainers`` list.

Any other key of a kustomization is an error: a manifest that starts using a feature must teach it here first.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")

SUPPORTED_KEYS = frozenset(
    {"apiVersion", "kind", "namespace", "resources", "configMapGenerator", "patches", "labels", "images"}
)

#: Kinds that have no namespace (the ones a manifest here could plausibly hold).
CLUSTER_SCOPED = frozenset(
    {
        "Namespace",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "PersistentVolume",
        "StorageClass",
        "PriorityClass",
        "ValidatingWebhookConfiguration",
        "MutatingWebhookConfiguration",
    }
)

#: Kinds with a pod template at spec.template (labels' includeTemplates).
POD_TEMPLATE_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})

#: Strategic merge keys of the lists a pod spec patch touches (by the list's field name).
MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
    "imagePullSecrets": "name",
}


class KustomizeError(Exception):
    """A kustomization this renderer cannot render (or that kustomize itself would refuse)."""


@dataclass
class Resource:
    """One rendered object, with the name it was declared under (references use that name)."""

    obj: dict[str, Any]
    original_name: str
    needs_hash: bool = False

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])


def render(directory: str | Path) -> list[dict[str, Any]]:
    """The objects ``kubectl kustomize DIRECTORY`` would print (in declaration order, not kustomize's)."""
    resources = _build(Path(directory))
    _apply_hash_suffixes(resources)
    _fix_references(resources)
    return [r.obj for r in resources]


def config_map_hash(data: Mapping[str, str], binary_data: Mapping[str, str] | None = None) -> str:
    """kustomize's content hash of a generated ConfigMap: the SHA-256 of Go's JSON encoding of
    ``{"data": ..., "kind": "ConfigMap", "name": ""}`` (the name lookup in kustomize's hasher finds nothing,
    so the name is always empty), its first ten hex digits with 0, 1, 3, a, e spelled g, h, k, m, t."""
    encoded: dict[str, Any] = {"kind": "ConfigMap", "name": "", "data": dict(data)}
    if binary_data:
        encoded["binaryData"] = dict(binary_data)
    text = json.dumps(encoded, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    for char, escape in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026")):
        text = text.replace(char, escape)  # Go escapes HTML characters
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]
    return digest.translate(str.maketrans("013ae", "ghkmt"))


# -- building one kustomization ------------------------------------------------------------------------------


def _kustomization(directory: Path) -> dict[str, Any]:
    for name in KUSTOMIZATION_FILES:
        path = directory / name
        if path.is_file():
            loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            if not isinstance(loaded, dict):
                raise KustomizeError(f"{path}: not a mapping")
            unknown = sorted(set(loaded) - SUPPORTED_KEYS)
            if unknown:
                raise KustomizeError(f"{path}: unsupported kustomization keys {unknown}")
            return loaded
    raise KustomizeError(f"{directory}: no kustomization.yaml")


def _build(directory: Path) -> list[Resource]:
    kustomization = _kustomization(directory)
    resources: list[Resource] = []
    for entry in kustomization.get("resources") or []:
        path = (directory / entry).resolve()
        if path.is_dir():
            resources.extend(_build(path))
        elif path.is_file():
            resources.extend(_load_file(path))
        else:
            raise KustomizeError(f"{directory}: resource {entry} does not exist")
    _check_unique(resources, directory)
    for generator in kustomization.get("configMapGenerator") or []:
        _generate_config_map(directory, generator, resources)
    for patch in kustomization.get("patches") or []:
        _apply_patch(directory, patch, resources)
    if "namespace" in kustomization:
        for r in resources:
            if r.kind not in CLUSTER_SCOPED:
                r.obj["metadata"]["namespace"] = kustomization["namespace"]
    for entry in kustomization.get("labels") or []:
        _add_labels(entry, resources)
    for image in kustomization.get("images") or []:
        for r in resources:
            _set_images(r.obj, image)
    return resources


def _load_file(path: Path) -> list[Resource]:
    out = []
    for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
        if doc is None:
            continue
        if not isinstance(doc, dict) or "kind" not in doc or "metadata" not in doc:
            raise KustomizeError(f"{path}: a document without kind or metadata")
        out.append(Resource(doc, str(doc["metadata"]["name"])))
    return out


def _check_unique(resources: list[Resource], directory: Path) -> None:
    seen: set[tuple[str, str]] = set()
    for r in resources:
        key = (r.kind, r.original_name)
        if key in seen:
            raise KustomizeError(f"{directory}: {r.kind} {r.original_name} is declared twice")
        seen.add(key)


def _generate_config_map(directory: Path, generator: Mapping[str, Any], resources: list[Resource]) -> None:
    unknown = sorted(set(generator) - {"name", "behavior", "files", "literals"})
    if unknown:
        raise KustomizeError(f"{directory}: unsupported configMapGenerator keys {unknown}")
    name = str(generator["name"])
    data: dict[str, str] = {}
    for item in generator.get("files") or []:
        key, _, source = str(item).rpartition("=")
        path = directory / source
        data[key or path.name] = path.read_text(encoding="utf-8")
    for item in generator.get("literals") or []:
        key, sep, value = str(item).partition("=")
        if not sep:
            raise KustomizeError(f"{directory}: literal {item!r} is not key=value")
        data[key] = value
    behavior = generator.get("behavior", "create")
    existing = [r for r in resources if r.kind == "ConfigMap" and r.original_name == name]
    if behavior == "create":
        if existing:
            raise KustomizeError(f"{directory}: ConfigMap {name} exists; use behavior merge or replace")
        obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
        resources.append(Resource(obj, name, needs_hash=True))
    elif behavior in ("merge", "replace"):
        if not existing:
            raise KustomizeError(f"{directory}: no ConfigMap {name} to {behavior}")
        target = existing[0].obj
        target["data"] = {**target.get("data", {}), **data} if behavior == "merge" else data
    else:
        raise KustomizeError(f"{directory}: unknown configMapGenerator behavior {behavior!r}")


def _apply_patch(directory: Path, entry: Mapping[str, Any], resources: list[Resource]) -> None:
    if set(entry) != {"path"}:
        raise KustomizeError(f"{directory}: only patches given by path are supported, not {sorted(entry)}")
    patch = yaml.safe_load((directory / entry["path"]).read_text(encoding="utf-8"))
    kind, name = patch.get("kind"), patch.get("metadata", {}).get("name")
    targets = [r for r in resources if r.kind == kind and name in (r.original_name, r.name)]
    if len(targets) != 1:
        raise KustomizeError(f"{directory}: patch {entry['path']} matches {len(targets)} objects")
    body = {k: v for k, v in patch.items() if k not in ("apiVersion", "kind")}
    body["metadata"] = {k: v for k, v in patch.get("metadata", {}).items() if k != "name"}
    targets[0].obj = strategic_merge(targets[0].obj, body)


def strategic_merge(target: Any, patch: Any, field: str = "") -> Any:
    """``patch`` merged into ``target`` as a strategic merge patch (the subset described above)."""
    if isinstance(target, dict) and isinstance(patch, dict):
        out = dict(target)
        for key, value in patch.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = strategic_merge(out[key], value, key)
            else:
                out[key] = copy.deepcopy(value)
        return out
    if isinstance(target, list) and isinstance(patch, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        by_key = {item[key]: item for item in target}
        patched = [strategic_merge(by_key[p[key]], p) if p[key] in by_key else p for p in patch]
        keys = {p[key] for p in patch}
        return patched + [item for item in target if item[key] not in keys]
    return copy.deepcopy(patch)


def _add_labels(entry: Mapping[str, Any], resources: list[Resource]) -> None:
    unknown = sorted(set(entry) - {"pairs", "includeSelectors", "includeTemplates"})
    if unknown:
        raise KustomizeError(f"unsupported labels keys {unknown}")
    if entry.get("includeSelectors"):
        raise KustomizeError("labels with includeSelectors: true are not supported")
    pairs = {str(k): str(v) for k, v in entry["pairs"].items()}
    for r in resources:
        r.obj["metadata"].setdefault("labels", {}).update(pairs)
        if entry.get("includeTemplates") and r.kind in POD_TEMPLATE_KINDS:
            spec = r.obj["spec"]
            spec["template"].setdefault("metadata", {}).setdefault("labels", {}).update(pairs)
            for claim in spec.get("volumeClaimTemplates") or []:
                claim.setdefault("metadata", {}).setdefault("labels", {}).update(pairs)


def _split_image(image: str) -> tuple[str, str]:
    """``name`` and the rest (``:tag``, ``@digest`` or both) of an image reference."""
    at = image.find("@")
    head, digest = (image[:at], image[at:]) if at >= 0 else (image, "")
    colon = head.rfind(":")
    if colon > head.rfind("/"):
        return head[:colon], head[colon:] + digest
    return head, digest


def _set_images(node: Any, image: Mapping[str, Any]) -> None:
    unknown = sorted(set(image) - {"name", "newName", "newTag", "digest"})
    if unknown:
        raise KustomizeError(f"unsupported images keys {unknown}")
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for container in value:
                    name, rest = _split_image(str(container.get("image", "")))
                    if name != image["name"]:
                        continue
                    if "digest" in image:
                        rest = f"@{image['digest']}"
                    elif "newTag" in image:
                        rest = f":{image['newTag']}"
                    container["image"] = f"{image.get('newName', name)}{rest}"
            else:
                _set_images(value, image)
    elif isinstance(node, list):
        for item in node:
            _set_images(item, image)


# -- names and references ------------------------------------------------------------------------------------


def _apply_hash_suffixes(resources: list[Resource]) -> None:
    for r in resources:
        if r.needs_hash:
            suffix = config_map_hash(r.obj.get("data") or {}, r.obj.get("binaryData"))
            r.obj["metadata"]["name"] = f"{r.original_name}-{suffix}"


def _pod_specs(obj: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    if obj["kind"] in POD_TEMPLATE_KINDS:
        yield obj["spec"]["template"]["spec"]
    elif obj["kind"] == "Pod":
        yield obj["spec"]


def _fix_references(resources: list[Resource]) -> None:
    config_maps = {r.original_name: r.name for r in resources if r.kind == "ConfigMap"}
    accounts = {r.original_name: r.obj["metadata"] for r in resources if r.kind == "ServiceAccount"}
    for r in resources:
        for spec in _pod_specs(r.obj):
            for volume in spec.get("volumes") or []:
                ref = volume.get("configMap")
                if ref and ref.get("name") in config_maps:
                    ref["name"] = config_maps[ref["name"]]
                for source in (volume.get("projected") or {}).get("sources") or []:
                    ref = source.get("configMap")
                    if ref and ref.get("name") in config_maps:
                        ref["name"] = config_maps[ref["name"]]
            for container in (spec.get("containers") or []) + (spec.get("initContainers") or []):
                for env_from in container.get("envFrom") or []:
                    ref = env_from.get("configMapRef")
                    if ref and ref.get("name") in config_maps:
                        ref["name"] = config_maps[ref["name"]]
                for env in container.get("env") or []:
                    ref = (env.get("valueFrom") or {}).get("configMapKeyRef")
                    if ref and ref.get("name") in config_maps:
                        ref["name"] = config_maps[ref["name"]]
        if r.kind in ("RoleBinding", "ClusterRoleBinding"):
            for subject in r.obj.get("subjects") or []:
                account = accounts.get(subject.get("name"))
                if subject.get("kind") == "ServiceAccount" and account is not None:
                    subject["name"] = account["name"]
                    if "namespace" in account:
                        subject["namespace"] = account["namespace"]
