"""Writes the PrometheusRule of deploy/kustomize/components/monitoring from rules.yaml.

rules.yaml is the one definition of the alerts (promtool checks and unit-tests it); the Prometheus
Operator wants the same groups inside a PrometheusRule object. `make manifests` runs this, and a
test fails when the two differ.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
RULES = HERE / "rules.yaml"
TARGET = HERE.parent / "kustomize" / "components" / "monitoring" / "prometheusrule.yaml"

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


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(0 if TARGET.read_text(encoding="utf-8") == render() else 1)
    TARGET.write_text(render(), encoding="utf-8")
