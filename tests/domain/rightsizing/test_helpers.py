"""The pieces under the rules: family keys and history, percentile, MIG tables, rounding, policy."""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import timedelta
from fractions import Fraction
from pathlib import Path

import pytest

from inno_notify.domain.model import Severity
from inno_notify.domain.rightsizing import RightsizingPolicy, family_of
from inno_notify.domain.rightsizing.family import p95, recent_runs
from inno_notify.domain.rightsizing.mig import MIG_PROFILES, MigProfile, mig_family, smallest_fitting
from inno_notify.domain.rightsizing.quantities import (
    GIB,
    duration,
    quantity_bytes,
    round_cores_up,
    round_memory_up,
    severity_for,
)

from .builders import GB, T0, run


@pytest.mark.parametrize(
    ("name", "labels", "generate_name", "family"),
    [
        ("train-resnet-7", {}, None, "train-resnet"),
        ("nightly-eval-29707813", {}, None, "nightly-eval"),
        ("sweep-lr-x7k2p", {}, "sweep-lr-", "sweep-lr"),
        ("train-model", {}, None, "train-model"),  # "model" has vowels: not a generated suffix
        ("exp-2026-11-30", {}, None, "exp"),
        ("anything", {"inno-notify/family": "resnet50"}, None, "resnet50"),
        ("12345", {}, "fallback-", "12345"),
        ("", {}, "fallback-", "fallback"),
    ],
)
def test_family_of(name: str, labels: dict[str, str], generate_name: str | None, family: str) -> None:
    assert family_of(name, labels, generate_name) == family


def test_recent_runs_keeps_window_order_and_one_per_uid() -> None:
    now = T0
    runs = [
        run(1, days_ago=2),
        run(2, days_ago=31),  # outside 30 days
        run(3, days_ago=-1),  # finishes after now
        run(4, days_ago=5),
        run(4, days_ago=1),  # same uid again: the newest counts once
    ]
    kept = recent_runs(runs, now, timedelta(days=30), max_runs=2)
    assert [r.job_uid for r in kept] == ["old-4", "old-1"]
    assert kept[0].finished_at == T0 - timedelta(days=1) + timedelta(hours=4)


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ([7.0], 7.0),
        ([1.0, 3.0], 2.9),  # 1 + 0.95 × 2
        ([10.0, 10.0, 11.0, 10.0, 40.0], 34.2),  # sorted 10,10,10,11,40; 11 + 0.8 × 29
        ([float(i) for i in range(1, 21)], 19.05),  # 19 + 0.05 × 1
    ],
)
def test_p95_interpolates(values: list[float], expected: float) -> None:
    assert p95(values) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("model", "total", "family"),
    [
        ("NVIDIA A100-SXM4-40GB", None, "A100-40GB"),
        ("NVIDIA A100-SXM4-80GB", None, "A100-80GB"),
        ("NVIDIA A100 80GB PCIe", None, "A100-80GB"),
        ("NVIDIA A100-PCIE", 81920 * 1024**2, "A100-80GB"),
        ("NVIDIA A100-PCIE", 40960 * 1024**2, "A100-40GB"),
        ("NVIDIA A100-PCIE", None, None),
        ("NVIDIA H100 80GB HBM3", None, "H100-80GB"),
        ("NVIDIA H100 NVL", None, None),
        ("NVIDIA H200", None, "H200-141GB"),
        ("Tesla T4", None, None),
        (None, None, None),
    ],
)
def test_mig_family(model: str | None, total: int | None, family: str | None) -> None:
    assert mig_family(model, total) == family


@pytest.mark.parametrize(
    ("family", "needed", "profile"),
    [
        ("A100-40GB", 5 * GB, "1g.5gb"),
        ("A100-40GB", 5 * GB + 1, "1g.10gb"),
        ("A100-40GB", 11 * GB, "3g.20gb"),
        ("A100-80GB", 15 * GB, "1g.20gb"),
        ("H100-80GB", 41 * GB, "7g.80gb"),
        ("H200-141GB", 19 * GB, "1g.35gb"),
        ("H200-141GB", 142 * GB, None),
    ],
)
def test_smallest_fitting(family: str, needed: int, profile: str | None) -> None:
    found = smallest_fitting(family, needed)
    assert (found.name if found else None) == profile


def test_profile_tables_are_ordered_and_end_with_the_whole_gpu() -> None:
    for profiles in MIG_PROFILES.values():
        assert len(profiles) == 6
        assert list(profiles) == sorted(profiles)
        assert profiles[-1].slices == 7
    assert MigProfile.parse("mig-3g.40gb") == MigProfile(3, 40 * GB, "3g.40gb")
    assert MigProfile.parse("whole") is None


@pytest.mark.parametrize(
    ("needed", "rounded"),
    [
        (Fraction(1), GIB),
        (Fraction(12 * GIB), 12 * GIB),
        (Fraction(12 * GIB) + 1, 13 * GIB),
        (Fraction(100 * GIB), 100 * GIB),
        (Fraction(100 * GIB) + 1, 110 * GIB),
        (Fraction(108 * GIB), 110 * GIB),
    ],
)
def test_round_memory_up(needed: Fraction, rounded: int) -> None:
    assert round_memory_up(needed) == rounded


@pytest.mark.parametrize(
    ("needed", "rounded"),
    [(Fraction("2.4"), 2.4), (Fraction("2.88"), 2.9), (Fraction("0.01"), 0.1), (Fraction(3), 3.0)],
)
def test_round_cores_up(needed: Fraction, rounded: float) -> None:
    assert round_cores_up(needed) == rounded


@pytest.mark.parametrize(
    ("amount", "text"),
    [(64 * GIB, "64Gi"), (512 * 1024**2, "512Mi"), (int(15.5 * GIB), "15.5Gi")],
)
def test_quantity_bytes(amount: int, text: str) -> None:
    assert quantity_bytes(amount) == text


@pytest.mark.parametrize(("minutes", "text"), [(58, "58 min"), (125, "2 h 5 min"), (180, "3 h")])
def test_duration(minutes: float, text: str) -> None:
    assert duration(minutes) == text


@pytest.mark.parametrize(
    ("waste", "severity"),
    [(0.0, None), (29.9, None), (30.0, Severity.INFO), (120.0, Severity.WARNING), (480.0, Severity.CRITICAL)],
)
def test_severity_from_waste(waste: float, severity: Severity | None) -> None:
    assert severity_for(waste, 30.0, 120.0, 480.0) == severity


def test_policy_defaults_match_the_contract() -> None:
    policy = RightsizingPolicy()
    assert (policy.idle_gpu_util_percent, policy.headroom, policy.min_memory_waste_gib) == (5.0, 1.2, 8.0)
    assert policy.family_min_runs == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"headroom": 0.9},
        {"min_samples": -1},
        {"family_min_runs": 1},
        {"family_max_runs": 2},
        {"time_slicing_max_memory_fraction": 0.0},
        {"warning_gpu_minutes": 1000.0},
    ],
)
def test_policy_rejects_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="rightsizing"):
        RightsizingPolicy(**bad)  # type: ignore[arg-type]


def _labels(line: str) -> dict[str, str]:
    return dict(re.findall(r'(\w+)="([^"]*)"', line))


def test_real_dcgm_captures_map_to_our_tables(captures: Path) -> None:
    """Model names and MIG profiles exactly as dcgm-exporter printed them on real hosts."""
    seen: dict[str, set[str]] = {}
    for path in sorted((captures / "metrics").glob("dcgm-exporter-*.prom")):
        for line in path.read_text().splitlines():
            if line.startswith("#") or "modelName=" not in line:
                continue
            labels = _labels(line)
            profiles = seen.setdefault(labels["modelName"], set())
            if labels.get("GPU_I_PROFILE"):
                profiles.add(labels["GPU_I_PROFILE"])
    assert seen["NVIDIA A100 80GB PCIe"] == {"3g.40gb", "4g.40gb"}
    families = {model: mig_family(model) for model in seen}
    assert families["NVIDIA A100 80GB PCIe"] == "A100-80GB"
    # GPUs without MIG (T4, A10G, TITAN V) get time-slicing advice instead.
    assert families["Tesla T4"] is None and families["NVIDIA A10G"] is None
    table = {p.name for p in MIG_PROFILES["A100-80GB"]}
    assert seen["NVIDIA A100 80GB PCIe"] <= table


def test_every_threshold_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "rightsizing.md").read_text()
    for item in fields(RightsizingPolicy):
        assert f"`{item.name}`" in doc, item.name
