"""The Kustomize trees as `kubectl apply -k` renders them: valid against the Kubernetes schemas,
least-privilege RBAC, Pod Security "restricted", no secret inlined, probes on the probe port, and
a configuration our own loader accepts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from inno_notify.runtime import election_enabled

from .support import (
    DEPLOY,
    EXPECTED_CLUSTER_RULES,
    KUBERNETES_VERSIONS,
    OVERLAYS,
    TREES,
    assert_valid_against_schema,
    containers,
    flat_rules,
    one,
    pod_spec,
    render,
    settings_of,
    venv_tool,
)

# Volume types the "restricted" Pod Security Standard allows.
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
    "secret",
}  # fmt: skip


@pytest.mark.parametrize("tree", TREES)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_is_valid_against_the_kubernetes_schema(tree: str, version: str) -> None:
    assert_valid_against_schema(render(tree), version, tree)


def test_the_base_names_no_namespace() -> None:
    for obj in render("base"):
        assert "namespace" not in obj["metadata"], f"{obj['kind']} {obj['metadata']['name']}"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_rbac_reads_jobs_pods_events_and_queues_and_nothing_else(overlay: str) -> None:
    objects = render(overlay)
    cluster_roles = [o for o in objects if o["kind"] == "ClusterRole"]
    roles = [o for o in objects if o["kind"] == "Role"]
    assert [r["metadata"]["name"] for r in cluster_roles] == ["inno-notify"]
    assert flat_rules(cluster_roles[0]) == {k: sorted(v) for k, v in EXPECTED_CLUSTER_RULES.items()}
    # Leader election runs in the database (docs/ha.md): no Lease, nor any other write, is granted.
    assert roles == []
    for role in cluster_roles + roles:
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], f"wildcard in {role['metadata']['name']}: {rule}"
            assert "secrets" not in rule["resources"]
    namespace = one(objects, "Namespace")["metadata"]["name"]
    for binding in [o for o in objects if o["kind"] in ("ClusterRoleBinding", "RoleBinding")]:
        subject = {"kind": "ServiceAccount", "name": "inno-notify", "namespace": namespace}
        assert binding["subjects"] == [subject]
    assert pod_spec(objects)["serviceAccountName"] == "inno-notify"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_pods_meet_the_restricted_pod_security_standard(overlay: str) -> None:
    objects = render(overlay)
    namespace = one(objects, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    spec = pod_spec(objects)
    pod_context = spec["securityContext"]
    assert pod_context["runAsNonRoot"] is True and pod_context["runAsUser"] != 0
    assert pod_context["seccompProfile"] == {"type": "RuntimeDefault"}
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        assert not spec.get(host)
    for volume in spec["volumes"]:
        kinds = set(volume) - {"name"}
        assert kinds <= RESTRICTED_VOLUMES, volume
    for container in containers(objects):
        context = container["securityContext"]
        assert context["allowPrivilegeEscalation"] is False, container["name"]
        assert context["readOnlyRootFilesystem"] is True, container["name"]
        assert context["runAsNonRoot"] is True, container["name"]
        assert context["capabilities"]["drop"] == ["ALL"] and "add" not in context["capabilities"]
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        assert not context.get("privileged")
        # The one writable path on a read-only root: /tmp, an emptyDir.
        mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
        tmp_volume = next(v for v in spec["volumes"] if v["name"] == mounts["/tmp"]["name"])
        assert "emptyDir" in tmp_volume
        for resource in ("cpu", "memory"):
            assert resource in container["resources"]["requests"], container["name"]
            assert resource in container["resources"]["limits"], container["name"]


def _walk(value: Any, path: str = "") -> list[tuple[str, Any]]:
    if isinstance(value, dict):
        return [item for key, child in value.items() for item in _walk(child, f"{path}.{key}")]
    if isinstance(value, list):
        return [item for i, child in enumerate(value) for item in _walk(child, f"{path}[{i}]")]
    return [(path, value)]


@pytest.mark.parametrize("tree", TREES)
def test_no_secret_value_is_inlined(tree: str) -> None:
    objects = render(tree)
    assert not [o for o in objects if o["kind"] == "Secret"], "the operator creates Secrets; none ships"
    for container in containers(objects):
        for env in container.get("env", []):
            assert "valueFrom" not in env or "secretKeyRef" not in env["valueFrom"], env
            if any(word in env["name"] for word in ("TOKEN", "PASSWORD", "SECRET")):
                assert env["name"].endswith("_FILE"), f"{env['name']} must name a file, not hold the value"
            if env["name"] == "INNO_NOTIFY_DATABASE_URL":
                assert ":" not in env["value"].partition("://")[2].partition("@")[0], "a password in the URL"
    config = yaml.safe_load(one(objects, "ConfigMap")["data"]["config.yaml"])
    for path, value in _walk(config):
        key = path.rsplit(".", 1)[-1]
        if key in ("token", "password", "sha256") or (key == "database_url" and "@" in str(value)):
            assert value is None, f"config.yaml{path} holds a secret"


@pytest.mark.parametrize("tree", TREES)
def test_probes_point_at_the_probe_port_of_the_configuration(tree: str, tmp_path: Path) -> None:
    objects = render(tree)
    spec = pod_spec(objects)
    service = spec["containers"][0]
    assert service["args"] == ["serve"]
    probe_port = next(p for p in service["ports"] if p["name"] == "probes")
    settings = settings_of(objects, service, tmp_path)
    assert int(settings.probes.listen.rpartition(":")[2]) == probe_port["containerPort"]
    assert settings.probes.listen.startswith("0.0.0.0:"), "kubelet reaches the pod IP, not loopback"
    expected = {"livenessProbe": "/healthz", "readinessProbe": "/readyz", "startupProbe": "/healthz"}
    for probe, path in expected.items():
        assert service[probe]["httpGet"] == {"path": path, "port": "probes"}, probe
    ports = {p["name"]: p for p in one(objects, "Service")["spec"]["ports"]}
    assert ports["probes"]["targetPort"] == "probes"


@pytest.mark.parametrize("tree", TREES)
def test_e_mail_is_limited_to_named_domains(tree: str, tmp_path: Path) -> None:
    """Issue 29: the example ships a non-empty `notify.allowed_email_domains`, so a deployment made
    from it is no mail relay to any address (pipeline messages, owners' summaries)."""
    objects = render(tree)
    settings = settings_of(objects, pod_spec(objects)["containers"][0], tmp_path)
    assert settings.notify.allowed_email_domains
    assert settings.api.events.per_recipient_per_hour <= 10


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_migration_runs_first_with_the_same_configuration(overlay: str, tmp_path: Path) -> None:
    objects = render(overlay)
    spec = pod_spec(objects)
    (migrate,) = spec["initContainers"]
    service = spec["containers"][0]
    assert migrate["args"] == ["migrate"]
    for field in ("image", "env", "volumeMounts", "securityContext"):
        assert migrate[field] == service[field], field
    settings = settings_of(objects, service, tmp_path)
    assert settings.log_format == "json"
    if overlay == "overlays/single":
        data_mount = next(m["mountPath"] for m in service["volumeMounts"] if m["name"] == "data")
        assert settings.database_url == f"sqlite+aiosqlite:///{data_mount}/inno-notify.db"
        claim = next(v for v in spec["volumes"] if v["name"] == "data")["persistentVolumeClaim"]["claimName"]
        assert one(objects, "PersistentVolumeClaim", claim)
    else:
        assert settings.database_url == "postgresql+asyncpg://inno:pw@postgres/inno"
        assert election_enabled(settings), "production replicas elect their leader"
    # The replica's name in the lease: the pod's own.
    pod_name = next(e for e in service["env"] if e["name"] == "POD_NAME")
    assert pod_name["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}


def test_single_runs_one_instance_at_a_time() -> None:
    deployment = one(render("overlays/single"), "Deployment")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_production_spreads_two_replicas_and_keeps_one_through_a_drain() -> None:
    objects = render("overlays/production")
    deployment = one(objects, "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    budget = one(objects, "PodDisruptionBudget")["spec"]
    assert budget["minAvailable"] == 1 and "maxUnavailable" not in budget
    assert budget["selector"]["matchLabels"].items() <= labels.items()
    (term,) = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"].items() <= labels.items()
    secrets = next(v for v in pod_spec(objects)["volumes"] if v["name"] == "secrets")["secret"]
    assert secrets["optional"] is False, "production needs its database URL"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_and_network_policy_select_the_pods(overlay: str) -> None:
    objects = render(overlay)
    labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert one(objects, "Service")["spec"]["selector"].items() <= labels.items()
    policy = one(objects, "NetworkPolicy")["spec"]
    assert policy["podSelector"]["matchLabels"].items() <= labels.items()
    assert {"port": "probes", "protocol": "TCP"} in policy["ingress"][0]["ports"]


def test_the_monitoring_component_scrapes_the_probe_port_and_carries_the_alert_rules() -> None:
    objects = render("overlays/production")
    service = one(objects, "Service")
    monitor = one(objects, "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"] == [{"port": "probes", "path": "/metrics", "interval": "30s"}]
    assert "probes" in {p["name"] for p in service["spec"]["ports"]}
    rule = one(objects, "PrometheusRule")
    rules = yaml.safe_load((DEPLOY / "prometheus" / "rules.yaml").read_text(encoding="utf-8"))
    assert rule["spec"] == rules, "run `make manifests`"
    check = subprocess.run(
        [sys.executable, str(DEPLOY / "prometheus" / "prometheusrule.py"), "--check"], capture_output=True
    )
    assert check.returncode == 0, "components/monitoring/prometheusrule.yaml is stale: run `make manifests`"


def test_yaml_under_deploy_is_clean() -> None:
    result = subprocess.run(
        [str(venv_tool("yamllint")), "--strict", "-c", str(DEPLOY / ".yamllint.yaml"), str(DEPLOY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
