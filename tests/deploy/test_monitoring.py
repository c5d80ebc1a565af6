"""Alert rules and the Grafana dashboard: promtool checks and unit-tests the rules, every PromQL
expression parses, and every inno_notify_* series they name is one the service exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

from inno_notify.telemetry import Telemetry

from .support import DEPLOY, ROOT

RULES = DEPLOY / "prometheus" / "rules.yaml"
DASHBOARD = DEPLOY / "grafana" / "inno-notify.json"
# Named by CONTRACT.md §5, defined by the hardening and HA work: the rules and panels may name them
# before the service exports them (a rule over an absent series stays quiet).
CONTRACT_METRICS = {"inno_notify_rejected_objects_total", "inno_notify_leader"}
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$job": ".+", "$namespace": ".+"}


def _promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: `make system-deps` installs Debian's prometheus", pytrace=False)
    return path


def exported_series() -> set[str]:
    """Every series name the service's registry can export (counters with _total, histograms with
    _bucket, _sum and _count), plus the contract's names."""
    names = set(CONTRACT_METRICS)
    for family in Telemetry.create(CollectorRegistry()).registry.collect():
        suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}.get(
            family.type, ("",)
        )
        names |= {family.name + suffix for suffix in suffixes}
    return names


def series_named(expr: str) -> set[str]:
    return set(re.findall(r"\binno_notify_[a-z_]+\b", expr))


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def dashboard_exprs() -> list[tuple[str, str]]:
    return [
        (panel["title"], target["expr"])
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
    ]


def test_promtool_checks_the_rules() -> None:
    result = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_promtool_unit_tests_of_the_alerts_pass() -> None:
    result = subprocess.run(
        [_promtool(), "test", "rules", "rules.test.yaml"], cwd=RULES.parent, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_tested_and_has_a_runbook_section() -> None:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    alerts = [rule for group in groups for rule in group["rules"]]
    tests = (RULES.parent / "rules.test.yaml").read_text(encoding="utf-8")
    operations = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    headings = {line.lstrip("#").strip().lower() for line in operations.splitlines() if line.startswith("#")}
    for rule in alerts:
        assert f"alertname: {rule['alert']}" in tests, f"{rule['alert']} has no promtool test"
        page, _, anchor = rule["annotations"]["runbook"].partition("#")
        assert page == "docs/operations.md" and anchor == rule["alert"].lower()
        assert anchor in headings, f"docs/operations.md has no section {rule['alert']}"
        assert series_named(rule["expr"]) <= exported_series(), rule["alert"]


def test_dashboard_names_only_exported_series_and_covers_them() -> None:
    exported = exported_series()
    named: set[str] = set()
    for title, expr in dashboard_exprs():
        assert series_named(expr) <= exported, f"panel {title!r}: {series_named(expr) - exported}"
        named |= series_named(expr)
    families = {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in named}
    for family in {re.sub(r"_(total|bucket|sum|count)$", "", name) for name in exported}:
        assert family in families, f"no panel shows {family}"


def test_dashboard_queries_parse_as_promql(tmp_path: Path) -> None:
    rules = []
    for i, (_, expr) in enumerate(dashboard_exprs()):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        assert "$" not in expr, f"unknown dashboard variable in {expr}"
        rules.append({"record": f"dashboard:query_{i}", "expr": expr})
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    result = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_dashboard_is_importable() -> None:
    board = dashboard()
    assert board["uid"] == "inno-notify" and board["schemaVersion"] >= 36
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    variables = {v["name"] for v in board["templating"]["list"]}
    assert {"datasource", "job", "namespace"} <= variables
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["targets"] and panel["description"], panel["title"]
