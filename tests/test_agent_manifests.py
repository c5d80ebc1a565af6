"""The nvml-agent Kustomize component as the pinned `kubectl kustomize` renders it into an overlay: the host
access it takes and no more, RBAC that reads pods and nothing else (its own node's: the field selector is
the agent's, tests/test_agent.py), probes on the port the agent listens on, and an environment our own
settings loader accepts. The kubelet variant (Kubernetes 1.33+) is granted nodes/pods only."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from inno_notify.agent import check_agent_settings
from inno_notify.settings import load_settings
from tests.deploy.support import KUSTOMIZE, kustomize_text

COMPONENT = KUSTOMIZE / "components" / "nvml-agent"


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
    return [doc for doc in yaml.safe_load_all(kustomize_text(overlay)) if doc]


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
    # No get (a pod of another node by name), no Secrets, no nodes/proxy, no write.
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


def test_the_kubelet_variant_reads_its_node_from_the_kubelet_with_nodes_pods_only(tmp_path: Path) -> None:
    objects = render(tmp_path, "kubelet")
    # Kubernetes 1.33+ authorizes the kubelet's /pods as nodes/pods: no pod list through the API
    # server, and no nodes/proxy (which would also allow exec and attach through the kubelet).
    assert one(objects, "ClusterRole")["rules"] == [
        {"apiGroups": [""], "resources": ["nodes/pods"], "verbs": ["get"]}
    ]
    container = one(objects, "DaemonSet")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.hostIP"}}
    # $(NODE_IP) is expanded by the kubelet only when NODE_IP comes first.
    assert [e["name"] for e in container["env"]].index("NODE_IP") == 0
    settings_env = {"INNO_NOTIFY_AGENT__NODE_NAME": "gpu-node-1"}
    for name, entry in env.items():
        if name.startswith("INNO_NOTIFY_") and "value" in entry:
            settings_env[name] = entry["value"].replace("$(NODE_IP)", "10.0.0.7")
    settings = load_settings(None, settings_env)
    check_agent_settings(settings.agent)
    assert settings.agent.pods == "kubelet"
    assert settings.agent.kubelet_url == "https://10.0.0.7:10250"
