"""Writes the PrometheusRule of deploy/kustomize/components/monitoring, and the Helm chart's copy of
the rules, from rules.yaml.

rules.yaml is the one definition of the alerts (promtool checks and unit-tests it); the Prometheus
Operator wants the same groups inside a PrometheusRule object, and a Helm chart can read no file
outside its own directory. `make manifests` runs this, and `--check` (run by a test) fails when a
copy differs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "rules.yaml"
TARGET = HERE.parent / "kustomize" / "components" / "monitoring" / "prometheusrule.yaml"
CHART_RULES = HERE.parent / "helm" / "inno-notify" / "files" / "prometheus-rules.yaml"

HEADER = "# Generated from deploy/prometheus/rules.yaml by deploy/prometheus/prometheusrule.py: edit that.\n"


def render() -> str:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "inno-notify", "labels": {"app.kubernetes.io/name": "inno-notify"}},
        "spec": {"groups": groups},
    }
    return HEADER + yaml.safe_dump(rule, sort_keys=False, width=1000, allow_unicode=True)


def render_chart_rules() -> str:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return HEADER + yaml.safe_dump({"groups": groups}, sort_keys=False, width=1000, allow_unicode=True)


def outputs() -> dict[Path, str]:
    return {TARGET: render(), CHART_RULES: render_chart_rules()}


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        stale = [path for path, text in outputs().items() if path.read_text(encoding="utf-8") != text]
        sys.exit(1 if stale else 0)
    for path, text in outputs().items():
        path.write_text(text, encoding="utf-8")
