"""A sweep's advice once per family (domain.rightsizing.sweeps), on hand-computed figures."""

from __future__ import annotations

from inno_notify.domain.model import Recommendation, RecommendationKind, Severity, Unit
from inno_notify.domain.rightsizing.sweeps import SweepRun, advice_per_family

GIB = 1024**3
CPU = 'resources.requests["cpu"]'
LIMIT = 'resources.limits["memory"]'
GPU = 'resources.limits["nvidia.com/gpu"]'


def cpu(suggested: float, waste: float = 10.0, severity: Severity = Severity.INFO) -> Recommendation:
    return Recommendation(
        RecommendationKind.CPU, severity, 32, suggested, Unit.CORES, f"cpu {suggested}",
        waste_core_hours=waste, field_path=CPU,
    )  # fmt: skip


def oom(limit_gib: int, suggested_gib: int) -> Recommendation:
    return Recommendation(
        RecommendationKind.MEMORY_INCREASE, Severity.CRITICAL, limit_gib * GIB, suggested_gib * GIB,
        Unit.BYTES, f"oom {limit_gib}", field_path=LIMIT,
    )  # fmt: skip


def mig(suggested: str) -> Recommendation:
    return Recommendation(
        RecommendationKind.GPU_MEMORY, Severity.WARNING, "7g.80gb", suggested, Unit.MIG_PROFILE,
        f"mig {suggested}", waste_gpu_minutes=60.0, field_path=GPU,
    )  # fmt: skip


def test_seven_runs_of_a_sweep_get_one_cpu_advice_at_the_familys_p95() -> None:
    # Sorted suggestions 6.0 6.5 6.8 7.0 7.2 7.4 8.0: p95 at rank 0.95 × 6 = 5.7, 7.4 + 0.7 × 0.6 =
    # 7.82 cores, rounded up to a tenth: 7.9. Two runs were also OOM-killed (limits 32 and 40 GiB,
    # suggestions 48 and 64 GiB): the largest is kept.
    suggestions = [6.0, 6.5, 7.2, 7.0, 8.0, 6.8, 7.4]
    runs = [SweepRun(f"sweep-lr-{i}", "sweep-lr", [cpu(s)]) for i, s in enumerate(suggestions)]
    runs[0] = SweepRun("sweep-lr-0", "sweep-lr", [cpu(6.0), oom(32, 48)])
    runs[1] = SweepRun("sweep-lr-1", "sweep-lr", [cpu(6.5, severity=Severity.WARNING), oom(40, 64)])

    advice = advice_per_family(runs)

    assert [a.recommendation.message for a in advice] == [
        'For 2 of the 7 runs of sweep-lr: set resources.limits["memory"]: 40Gi → 64Gi.',
        'For the 7 runs of sweep-lr: set resources.requests["cpu"]: 32 → 7.9.',
    ]
    cpu_advice = advice[1]
    assert (cpu_advice.runs, cpu_advice.advised) == (7, 7)
    assert cpu_advice.recommendation.suggested == 7.9
    assert cpu_advice.recommendation.severity is Severity.WARNING  # the worst of the runs'
    assert cpu_advice.recommendation.waste_core_hours == 70.0


def test_runs_without_a_family_or_alone_keep_their_own_advice() -> None:
    runs = [
        SweepRun("a", None, [cpu(8.0)]),
        SweepRun("b", None, [cpu(8.0)]),  # word for word the same: stated once
        SweepRun("c", "solo", [cpu(4.0)]),
    ]
    assert [a.recommendation.message for a in advice_per_family(runs)] == ["cpu 8.0", "cpu 4.0"]


def test_a_mig_suggestion_the_runs_agree_on_is_stated_once_else_each() -> None:
    agree = [SweepRun(f"r{i}", "infer", [mig("1g.10gb")]) for i in range(3)]
    assert [a.recommendation.message for a in advice_per_family(agree)] == [
        'For the 3 runs of infer: set resources.limits["nvidia.com/gpu"]: 7g.80gb → 1g.10gb.'
    ]
    disagree = [SweepRun("r0", "infer", [mig("1g.10gb")]), SweepRun("r1", "infer", [mig("2g.20gb")])]
    assert [a.recommendation.message for a in advice_per_family(disagree)] == ["mig 1g.10gb", "mig 2g.20gb"]
