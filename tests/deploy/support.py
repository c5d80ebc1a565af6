"""Shared helpers of the deployment tests: where things are, and rendering the Kustomize trees.

The manifests are rendered by `kubectl kustomize` (the kustomize built into kubectl; the Makefile's
`system-deps` installs Debian's kubernetes-client where no kubectl exists). Components need
kustomize v4 or newer: with an older one (Debian bookworm's kubectl 1.20 bundles kustomize v2)
the rendering tests skip and say so, rather than check a different rendering than users get.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUSTOMIZE = DEPLOY / "kustomize"
OVERLAYS = ("overlays/single", "overlays/production")
# Every tree a user can apply or build on; the base alone is rendered and validated too.
TREES = ("base", *OVERLAYS)
MIN_KUSTOMIZE = (4, 0)


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
def _kubectl() -> tuple[str | None, str]:
    """(path to kubectl, why not) — the reason is set when no usable kubectl exists."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None, "kubectl not found (make system-deps installs Debian's kubernetes-client)"
    out = subprocess.run(
        [kubectl, "version", "--client", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    try:
        version = json.loads(out.stdout).get("kustomizeVersion", "")
    except json.JSONDecodeError:
        version = ""
    match = re.match(r"v?(\d+)\.(\d+)", version)
    if match is None or (int(match[1]), int(match[2])) < MIN_KUSTOMIZE:
        return None, (
            f"{kubectl} bundles kustomize {version or 'of unknown version'}; components need "
            f"v{MIN_KUSTOMIZE[0]} or newer (kubectl 1.21+)"
        )
    return kubectl, ""


@functools.cache
def render_text(tree: str) -> str:
    kubectl, why_not = _kubectl()
    if kubectl is None:
        pytest.skip(why_not)
    result = subprocess.run(
        [kubectl, "kustomize", str(KUSTOMIZE / tree)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"kubectl kustomize {tree} failed:\n{result.stderr}"
    return result.stdout


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
