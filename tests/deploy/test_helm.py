"""The Helm chart deploy/helm/inno-notify as the pinned `helm` renders it with each values example:
`helm lint --strict`, every object valid against the Kubernetes schemas of each supported version,
the same Deployment security context, probes and RBAC rules as the Kustomize overlays, a
configuration our own loader accepts, and the pages' Ingress and NOTES."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from inno_notify.settings import Settings

from .support import (
    CHART,
    CHART_EXAMPLES,
    DEPLOY,
    EXPECTED_CLUSTER_RULES,
    KUBERNETES_VERSIONS,
    KUSTOMIZE,
    NAMESPACE,
    RELEASE,
    assert_valid_against_schema,
    flat_rules,
    helm_render,
    helm_text,
    kustomize_text,
    one,
    pod_spec,
    render,
    run_renderer,
    settings_of,
    venv_tool,
)

EXAMPLES = sorted(p.name for p in CHART_EXAMPLES.glob("*.yaml"))
# Each values example beside the Kustomize tree it stands for (components relative to KUSTOMIZE).
SAME_AS_KUSTOMIZE = {
    "single.yaml": ("overlays/single", ()),
    "production.yaml": ("overlays/production", ()),
    "agent.yaml": ("overlays/single", ("components/nvml-agent", "components/nvml-agent/mig")),
    "agent-kubelet.yaml": ("overlays/single", ("components/nvml-agent", "components/nvml-agent/kubelet")),
}
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")


def example(name: str) -> str:
    return str(CHART_EXAMPLES / name)


def test_there_are_examples_of_every_installation() -> None:
    assert {"single.yaml", "production.yaml", "pages.yaml", "agent.yaml", "agent-kubelet.yaml"} <= set(
        EXAMPLES
    )


@pytest.mark.parametrize("values", [None, *EXAMPLES])
def test_helm_lint_strict(values: str | None) -> None:
    args = ["lint", "--strict", str(CHART)] + (["--values", example(values)] if values else [])
    result = run_renderer("helm", *args)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 chart(s) failed" in result.stdout


@pytest.mark.parametrize("values", EXAMPLES)
@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_every_object_of_every_example_is_valid_against_the_kubernetes_schema(
    values: str, version: str
) -> None:
    assert_valid_against_schema(helm_render(example(values)), version, values)


def test_kubernetes_validate_cli_strict_passes_with_only_the_prometheus_operator_warnings(
    tmp_path: Path,
) -> None:
    """The command operators run, `helm template … | kubernetes-validate --strict`, on every example
    (the oldest and newest supported versions, all examples in one run each: the test above covers
    every version in process with the same library)."""
    cli = Path(sys.executable).parent / "kubernetes-validate"
    files = []
    for values in EXAMPLES:
        files.append(tmp_path / values)
        files[-1].write_text(yaml.safe_dump_all(helm_render(example(values))))
    for version in (KUBERNETES_VERSIONS[0], KUBERNETES_VERSIONS[-1]):
        result = subprocess.run(
            [str(cli), "--strict", "--quiet", "-k", version, *map(str, files)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert result.returncode == 0, f"{version}: {result.stdout}{result.stderr}"
        for line in (result.stdout + result.stderr).splitlines():
            assert line.startswith("WARN") and "monitoring.coreos.com/v1" in line, line


def _security_probes_rbac(objects: list[dict[str, Any]], workload: str) -> dict[str, Any]:
    """What must not differ between the installers: pod and container security contexts, probes,
    the service account's ClusterRole rules."""
    kind, name = (
        ("Deployment", "inno-notify") if workload == "service" else ("DaemonSet", "inno-notify-agent")
    )
    obj = one(objects, kind, name)
    spec = obj["spec"]["template"]["spec"]
    role = one(objects, "ClusterRole", spec["serviceAccountName"])
    return {
        "pod": spec["securityContext"],
        "hostPID": spec.get("hostPID", False),
        "containers": {
            c["name"]: {
                "securityContext": c["securityContext"],
                **{p: c.get(p) for p in PROBES},
                "args": c["args"],
            }
            for c in [*spec.get("initContainers", []), *spec["containers"]]
        },
        "rules": flat_rules(role),
    }


def _kustomize(tree: str, components: tuple[str, ...], tmp_path: Path) -> list[dict[str, Any]]:
    if not components:
        return render(tree)
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # kustomize refuses absolute paths: name them relative to the overlay.
                "resources": [os.path.relpath(KUSTOMIZE / tree, overlay)],
                "components": [os.path.relpath(KUSTOMIZE / c, overlay) for c in components],
            }
        )
    )
    return [d for d in yaml.safe_load_all(kustomize_text(overlay)) if d]


@pytest.mark.parametrize("values", sorted(SAME_AS_KUSTOMIZE))
def test_chart_and_kustomize_render_the_same_security_context_probes_and_rbac(
    values: str, tmp_path: Path
) -> None:
    tree, components = SAME_AS_KUSTOMIZE[values]
    chart = helm_render(example(values))
    kustomize = _kustomize(tree, components, tmp_path)
    workloads = ["service", "agent"] if components else ["service"]
    for workload in workloads:
        assert _security_probes_rbac(chart, workload) == _security_probes_rbac(kustomize, workload), workload
    for objects in (chart, kustomize):
        assert flat_rules(one(objects, "ClusterRole", "inno-notify")) == {
            k: sorted(v) for k, v in EXPECTED_CLUSTER_RULES.items()
        }


def _kinds(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Each object's kind and name, sorted; the ConfigMap under one name (Kustomize's name carries
    its content's hash, the chart rolls pods with a checksum)."""
    named = [(o["kind"], o["metadata"]["name"].removesuffix("-data")) for o in objects]
    return sorted((kind, "inno-notify-config" if kind == "ConfigMap" else name) for kind, name in named)


@pytest.mark.parametrize("values", ["single.yaml", "production.yaml"])
def test_the_same_objects_as_the_overlay(values: str) -> None:
    tree = SAME_AS_KUSTOMIZE[values][0]
    kustomize = [o for o in render(tree) if o["kind"] != "Namespace"]
    chart = helm_render(example(values))
    assert _kinds(chart) == _kinds(kustomize)
    deployment = one(chart, "Deployment")["spec"]
    assert deployment["replicas"] == one(kustomize, "Deployment")["spec"]["replicas"]
    assert deployment["strategy"] == one(kustomize, "Deployment")["spec"]["strategy"]
    assert (
        one(chart, "PodDisruptionBudget")["spec"].keys()
        == one(kustomize, "PodDisruptionBudget")["spec"].keys()
    )
    for field in ("egress", "ingress", "policyTypes"):
        assert one(chart, "NetworkPolicy")["spec"][field] == one(kustomize, "NetworkPolicy")["spec"][field]


@pytest.mark.parametrize("values", EXAMPLES)
def test_each_example_is_a_configuration_the_service_loads(values: str, tmp_path: Path) -> None:
    objects = helm_render(example(values))
    service = pod_spec(objects)["containers"][0]
    settings = settings_of(objects, service, tmp_path)
    assert settings.log_format == "json"
    assert settings.probes.listen == "0.0.0.0:8081"
    if one(objects, "Deployment")["spec"]["replicas"] > 1:
        assert settings.database_url.startswith("postgresql+asyncpg://")
        assert (
            next(v for v in pod_spec(objects)["volumes"] if v["name"] == "secrets")["secret"]["optional"]
            is False
        )
    else:
        assert settings.database_url == "sqlite+aiosqlite:////var/lib/inno-notify/inno-notify.db"
        claim = next(v for v in pod_spec(objects)["volumes"] if v["name"] == "data")["persistentVolumeClaim"]
        assert one(objects, "PersistentVolumeClaim", claim["claimName"])
    # The binding names the release's namespace.
    binding = one(objects, "ClusterRoleBinding", "inno-notify")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "inno-notify", "namespace": NAMESPACE}]


def test_the_pages_example_exposes_the_pages_at_the_public_url(tmp_path: Path) -> None:
    objects = helm_render(example("pages.yaml"))
    settings = settings_of(objects, pod_spec(objects)["containers"][0], tmp_path)
    assert settings.public_url == "https://inno-notify.example.org"
    assert settings.links.key is not None, "links are signed"
    assert settings.api.listen == "0.0.0.0:8080" and settings.api.tokens
    ingress = one(objects, "Ingress")["spec"]
    (rule,) = ingress["rules"]
    assert rule["host"] == "inno-notify.example.org"
    assert {p["path"] for p in rule["http"]["paths"]} == {"/jobs", "/workflows", "/teams"}
    for path in rule["http"]["paths"]:
        assert path["backend"]["service"] == {"name": "inno-notify", "port": {"name": "api"}}
    assert ingress["tls"][0]["hosts"] == ["inno-notify.example.org"]


@pytest.mark.parametrize(
    ("sets", "error"),
    [
        (("ingress.enabled=true",), "config.links.public_url"),
        (("ingress.enabled=true", "config.links.public_url=https://x.example.org"), "config.api.listen"),
        (("replicas=2",), "database.type: postgres"),
        (("config.no_such_key=1",), "no_such_key"),
        (("agent.pods=everything",), "agent"),
    ],
)
def test_bad_values_are_refused_with_a_message(sets: tuple[str, ...], error: str) -> None:
    args = ["template", RELEASE, str(CHART)]
    for pair in sets:
        args += ["--set", pair]
    result = run_renderer("helm", *args)
    assert result.returncode != 0
    assert error in result.stderr, result.stderr


def test_the_schema_allows_exactly_the_configuration_keys() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text(encoding="utf-8"))
    allowed = set(schema["properties"]["config"]["propertyNames"]["enum"])
    # The database comes from `database` (the environment), so its URL keys are not config keys here.
    assert allowed == set(Settings.model_fields) - {"database_url", "database_url_file"}
    defaults = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    assert set(defaults["config"]) <= allowed


def test_the_prometheus_rule_carries_the_alert_rules() -> None:
    rule = one(helm_render(example("production.yaml")), "PrometheusRule")
    rules = yaml.safe_load((DEPLOY / "prometheus" / "rules.yaml").read_text(encoding="utf-8"))
    assert rule["spec"] == rules, "run `make manifests`"


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (
            "pages.yaml",
            ["/readyz", "https://inno-notify.example.org/jobs/", "routes /jobs, /workflows, /teams"],
        ),
        ("single.yaml", ["/readyz", "They are off", "config.links.public_url", "config.links.secret_file"]),
        ("production.yaml", ["/readyz", "key database-url"]),
    ],
)
def test_notes_say_how_to_reach_the_pages_and_check_readiness(values: str, says: list[str]) -> None:
    result = run_renderer(
        "helm", "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client",
        "--values", example(values),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    notes = result.stdout.partition("NOTES:")[2]
    for text in says:
        assert text in notes, f"{text!r} not in NOTES:\n{notes}"


def test_the_agent_rbac_of_the_chart_reads_pods_and_nothing_else() -> None:
    api = one(helm_render(example("agent.yaml")), "ClusterRole", "inno-notify-agent")
    kubelet = one(helm_render(example("agent-kubelet.yaml")), "ClusterRole", "inno-notify-agent")
    assert flat_rules(api) == {("", "pods"): ["list", "watch"]}
    assert flat_rules(kubelet) == {("", "nodes/pods"): ["get"]}
    assert "agent" not in {o["metadata"]["name"] for o in helm_render(example("single.yaml"))}


# checkov's findings that are operator choices, not defects: the image is named by tag unless
# image.digest is set; IfNotPresent is right for a pinned tag; the service needs its token.
CHECKOV_ACCEPTED = {"CKV_K8S_43", "CKV_K8S_15", "CKV_K8S_38"}


def test_checkov_finds_nothing_but_the_operator_choices(tmp_path: Path) -> None:
    rendered = tmp_path / "production.yaml"
    rendered.write_text(helm_text(example("production.yaml")))
    result = subprocess.run(
        [str(venv_tool("checkov")), "-f", str(rendered), "--framework", "kubernetes", "--quiet", "--compact",
         "-o", "json", "--skip-download"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    report = json.loads(result.stdout)
    report = report[0] if isinstance(report, list) else report
    failed = {(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]}
    assert {check for check, _ in failed} <= CHECKOV_ACCEPTED, sorted(failed)
    assert report["summary"]["passed"] >= 100 and report["summary"]["parsing_errors"] == 0
