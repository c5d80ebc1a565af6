"""The nvml-agent Kustomize component as `kubectl kustomize` renders it into an overlay: the host access it
takes and no more, read-only RBAC, probes on the port the agent listens on, and an environment our own
settings loader accepts."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from inno_notify.agent import check_agent_settings
from inno_notify.settings import load_settings

COMPONENT = Path(__file__).resolve().parent.parent / "deploy" / "kustomize" / "components" / "nvml-agent"
KUBECTL = shutil.which("kubectl")
pytestmark = pytest.mark.skipif(
    KUBECTL is None, reason="kubectl (with its bundled kustomize) is not installed"
)


def render(tmp_path: Path, *extra: str) -> list[dict[str, Any]]:
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    # kustomize refuses absolute paths to components: name them relative to the overlay.
    components = [os.path.relpath(COMPONENT / part, overlay) for part in ("", *extra)]
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "namespace": "gpu-agents",
                "components": components,
            }
        )
    )
    assert KUBECTL is not None
    out = subprocess.run([KUBECTL, "kustomize", str(overlay)], check=True, capture_output=True, text=True)
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


def test_daemonset_takes_host_pids_and_nothing_more(tmp_path: Path) -> None:
    objects = render(tmp_path)
    assert sorted(o["kind"] for o in objects) == [
        "ClusterRole",
        "ClusterRoleBinding",
        "DaemonSet",
        "Service",
        "ServiceAccount",
    ]
    spec = one(objects, "DaemonSet")["spec"]["template"]["spec"]
    assert spec["hostPID"] is True
    assert spec["runtimeClassName"] == "nvidia"
    for forbidden in ("hostNetwork", "hostIPC", "volumes"):
        assert forbidden not in spec, forbidden
    assert spec["securityContext"]["runAsNonRoot"] is True
    (container,) = spec["containers"]
    assert container["args"] == ["agent"]
    security = container["securityContext"]
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert "privileged" not in security
    # It asks for no GPU: it must not hold one that a job could use.
    assert not any("nvidia.com" in key for key in container["resources"].get("limits", {}))
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]


def test_rbac_lists_and_watches_pods_only(tmp_path: Path) -> None:
    objects = render(tmp_path)
    assert one(objects, "ClusterRole")["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]}
    ]
    binding = one(objects, "ClusterRoleBinding")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "inno-notify-agent", "namespace": "gpu-agents"}
    ]
    daemonset = one(objects, "DaemonSet")
    assert daemonset["spec"]["template"]["spec"]["serviceAccountName"] == "inno-notify-agent"


def test_probes_and_service_on_the_port_the_agent_listens_on(tmp_path: Path) -> None:
    objects = render(tmp_path)
    container = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    listen = env["INNO_NOTIFY_AGENT__LISTEN"]["value"]
    port = int(listen.rpartition(":")[2])
    assert container["ports"] == [{"name": "metrics", "containerPort": port, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    service = one(objects, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "metrics"
    # The service's own Service/ServiceMonitor select app.kubernetes.io/name=inno-notify: not these pods.
    labels = one(objects, "DaemonSet")["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "inno-notify-agent"


def test_the_pod_environment_is_a_valid_agent_configuration(tmp_path: Path) -> None:
    container = one(render(tmp_path), "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    env = {"INNO_NOTIFY_AGENT__NODE_NAME": "gpu-node-1"}  # what the downward API fills in
    for entry in container["env"]:
        if entry["name"].startswith("INNO_NOTIFY_") and "value" in entry:
            env[entry["name"]] = entry["value"]
    settings = load_settings(None, env)
    check_agent_settings(settings.agent)
    assert settings.agent.node_name == "gpu-node-1" and settings.agent.pods == "api"


def test_mig_and_servicemonitor_add_ons(tmp_path: Path) -> None:
    objects = render(tmp_path, "mig", "servicemonitor")
    container = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"} in container["env"]
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    monitor = one(objects, "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["honorLabels"] is True
