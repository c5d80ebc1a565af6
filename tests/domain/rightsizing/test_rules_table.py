"""Hand-computed cases for every rule: each row states the inputs, and the advice worked out by
hand from the formulas in docs/rightsizing.md (the arithmetic is in the row's comment)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

import pytest

from inno_notify.domain.model import (
    JobRecord,
    JobStatus,
    PodRecord,
    Usage,
)
from inno_notify.domain.model import (
    RecommendationKind as K,
)
from inno_notify.domain.model import (
    Severity as S,
)
from inno_notify.domain.rightsizing import FamilyRun, RightsizingPolicy, recommend

from .builders import A100_40, GB, GIB, H200, T0, T4, build, run

NOW = T0 + timedelta(hours=12)
GPU_KINDS = {K.GPU_COUNT, K.IDLE_GPU, K.GPU_MEMORY}


@dataclass(frozen=True)
class Expect:
    kind: K
    severity: S
    current: float | str | None
    suggested: float | str
    waste: float = 0.0
    text: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    name: str
    built: tuple[JobRecord, Usage, list[PodRecord]]
    expect: tuple[Expect, ...]
    history: Sequence[FamilyRun] = ()
    kinds: frozenset[K] = field(default_factory=lambda: frozenset(K))


def waste_of(kind: K, gpu: float, gib: float, core: float) -> float:
    if kind in GPU_KINDS:
        return gpu
    if kind in (K.MEMORY, K.MEMORY_INCREASE):
        return gib
    return core


CASES = [
    # --- idle_gpu / gpu_count -------------------------------------------------------------
    Case(
        "two of four idle: 2 GPUs × 58 min = 116 GPU-min (info, below 120)",
        build(gpus=4, util=[80, 75, 0, 0], minutes=58),
        (
            Expect(
                K.GPU_COUNT,
                S.INFO,
                4,
                2,
                116.0,
                ('resources.limits["nvidia.com/gpu"]: 4 → 2', "mean util 0 % on GPUs 2 and 3 over 58 min"),
            ),
        ),
    ),
    Case(
        "all four idle: 4 × 60 = 240 GPU-min, critical whatever the amount",
        build(gpus=4, util=[0, 0.5, 1, 0], minutes=60),
        (Expect(K.IDLE_GPU, S.CRITICAL, 4, 0, 240.0, ("never used its GPUs", "4 → 0")),),
    ),
    Case(
        "one of two idle for 5 h: 300 GPU-min, warning",
        build(gpus=2, util=[90, 2], minutes=300),
        (Expect(K.GPU_COUNT, S.WARNING, 2, 1, 300.0, ("mean util at most 2 % on GPU 1 over 5 h",)),),
    ),
    Case(
        "tiny job: one idle GPU for 20 min = 20 GPU-min, below the 30 of materiality",
        build(gpus=2, util=[90, 0], minutes=20),
        (),
    ),
    Case(
        "multi-pod: busy at most 2 of 4, idle 2 + 3 GPUs × 100 min = 500 GPU-min, critical",
        build(pods=2, gpus=4, util=[[50, 50, 0, 0], [50, 0, 0, 0]], minutes=100),
        (Expect(K.GPU_COUNT, S.CRITICAL, 4, 2, 500.0, ("on 5 of 8 GPUs in 2 pods", "4 → 2")),),
    ),
    Case(
        "multi-pod: one pod used all four, so the template cannot shrink",
        build(pods=2, gpus=4, util=[[50, 50, 0, 0], [50, 50, 50, 50]], minutes=100),
        (),
    ),
    Case("one GPU's utilization missing", build(gpus=4, util=[80, None, 0, 0]), ()),
    Case(
        "no GPU figures at all (Prometheus down)",
        build(gpus=4, util=[], missing=("gpu_util_mean_percent",)),
        (),
    ),
    Case(
        "time-sliced GPU figures are shared, not the pod's own", build(gpus=2, util=[0, 0], shared=True), ()
    ),
    Case("5 samples are too few (min 10)", build(gpus=2, util=[0, 0], samples=5), ()),
    Case(
        "second pod held GPUs but was never measured",
        build(pods=2, gpus=2, util=[0, 0], gpu_pods=1, minutes=120),
        (),
    ),
    Case(
        "family busy [1 now, 1, 1, 3]: p95 = 1 + 0.85 × 2 = 2.7 → 3 GPUs; waste 3 × 60 = 180",
        build(gpus=4, util=[80, 0, 0, 0]),
        (Expect(K.GPU_COUNT, S.WARNING, 4, 3, 180.0, ("based on your last 4 runs",)),),
        history=(run(1, gpus_busy=1), run(2, gpus_busy=1), run(3, gpus_busy=3)),
    ),
    # --- gpu_memory -----------------------------------------------------------------------
    Case(
        "A100 80GB at 10 %, peak 6 GiB × 1.2 = 7.73e9 ≤ 1g.10gb; 120 × 6/7 = 102.86 GPU-min",
        build(gpus=1, util=[10], fb_peak=6 * GIB, minutes=120),
        (
            Expect(
                K.GPU_MEMORY,
                S.INFO,
                "7g.80gb",
                "1g.10gb",
                102.86,
                ('resources.limits["nvidia.com/mig-1g.10gb"]: 1',),
            ),
        ),
    ),
    Case(
        "H200 at 8 %, peak 20 GiB × 1.2 = 25.8e9 > 18e9 → 1g.35gb; 600 × 6/7 = 514.29, critical",
        build(gpus=1, util=[8], fb_peak=20 * GIB, model=H200, fb_total=141 * GB, minutes=600),
        (Expect(K.GPU_MEMORY, S.CRITICAL, "7g.141gb", "1g.35gb", 514.29),),
    ),
    Case(
        "A100 40GB, peak 12 GiB × 1.2 = 15.5e9 → 3g.20gb; 60 × 4/7 = 34.29",
        build(gpus=1, util=[12], fb_peak=12 * GIB, model=A100_40, fb_total=40 * GIB, minutes=60),
        (Expect(K.GPU_MEMORY, S.INFO, "7g.40gb", "3g.20gb", 34.29),),
    ),
    Case(
        "MIG job on 3g.40gb, peak 4 GiB × 1.2 = 5.2e9 → 1g.10gb; 240 × 2/3 = 160, warning",
        build(mig="3g.40gb", util=[10], fb_peak=4 * GIB, minutes=240),
        (
            Expect(
                K.GPU_MEMORY,
                S.WARNING,
                "3g.40gb",
                "1g.10gb",
                160.0,
                ('replace resources.limits["nvidia.com/mig-3g.40gb"]: 1',),
            ),
        ),
    ),
    Case("40 % utilization needs its compute", build(gpus=1, util=[40], fb_peak=4 * GIB, minutes=240), ()),
    Case(
        "two GPUs per pod, both lightly used: neither idle nor a single-GPU job",
        build(gpus=2, util=[10, 10], fb_peak=4 * GIB, minutes=240),
        (),
    ),
    Case(
        "T4 without MIG, peak 3 GiB × 1.2 = 3.6 ≤ 8 GiB: time-slicing; 120 × 0.9 = 108",
        build(gpus=1, util=[10], fb_peak=3 * GIB, model=T4, fb_total=16 * GIB, minutes=120),
        (Expect(K.GPU_MEMORY, S.INFO, "whole GPU", "time-slicing", 108.0),),
    ),
    Case(
        "peak 60 GiB × 1.2 = 77.3e9 fits only 7g.80gb: nothing smaller",
        build(gpus=1, util=[10], fb_peak=60 * GIB, minutes=240),
        (),
    ),
    Case("GPU memory peak missing", build(gpus=1, util=[10], fb_peak=None, minutes=240), ()),
    # --- memory ---------------------------------------------------------------------------
    Case(
        "64 GiB asked, peak 10 GiB → 12 GiB; (64 − 10) × 2 h = 108 GiB-h, warning",
        build(mem_request=64 * GIB, mem_peak=10 * GIB, minutes=120),
        (
            Expect(
                K.MEMORY,
                S.WARNING,
                64 * GIB,
                12 * GIB,
                108.0,
                ('resources.requests["memory"]: 64Gi → 12Gi', "Peak memory 10.0 GiB"),
            ),
        ),
    ),
    Case(
        "above 100 GiB: peak 90 × 1.2 = 108 → 110 GiB; (512 − 90) × 1 h = 422",
        build(mem_request=512 * GIB, mem_peak=90 * GIB, minutes=60),
        (Expect(K.MEMORY, S.WARNING, 512 * GIB, 110 * GIB, 422.0),),
    ),
    Case(
        "limit without request: the limit is what to lower",
        build(mem_limit=64 * GIB, mem_peak=10 * GIB, minutes=120),
        (Expect(K.MEMORY, S.WARNING, 64 * GIB, 12 * GIB, 108.0, ('resources.limits["memory"]: 64Gi',)),),
    ),
    Case("zero request", build(mem_request=0, mem_peak=10 * GIB, minutes=120), ()),
    Case("neither request nor limit", build(mem_peak=10 * GIB, minutes=600), ()),
    Case("20 GiB < 2 × 11 GiB (peak 9 × 1.2 = 10.8 → 11)", build(mem_request=20 * GIB, mem_peak=9 * GIB), ()),
    Case(
        "9 GiB asked, peak 1 → 2 GiB: only 7 GiB unused, below 8",
        build(mem_request=9 * GIB, mem_peak=1 * GIB, minutes=6000),
        (),
    ),
    Case(
        "tiny job: 54 GiB unused × 5 min = 4.5 GiB-h, below 8",
        build(mem_request=64 * GIB, mem_peak=10 * GIB, minutes=5),
        (),
    ),
    Case(
        "memory peak missing with a reason",
        build(mem_request=64 * GIB, mem_peak=None, cpu_p95=1.0, missing=("memory_peak_bytes",)),
        (),
    ),
    Case(
        "3 pods peaks 4/6/5 GiB → 7.2 → 8 GiB; (28 + 26 + 27) × 1 h = 81",
        build(pods=3, mem_request=32 * GIB, mem_peak=[4 * GIB, 6 * GIB, 5 * GIB]),
        (Expect(K.MEMORY, S.WARNING, 32 * GIB, 8 * GIB, 81.0, ("requested per pod (3 pods)",)),),
    ),
    Case(
        "3 pods, one pod's peak missing",
        build(pods=3, mem_request=32 * GIB, mem_peak=[4 * GIB, None, 5 * GIB], cpu_p95=[1.0, 1.0, None]),
        (),
    ),
    Case(
        "family of 11, outlier 40 GiB: sorted 9×10, 12, 40; p95 = 12 + 0.5 × 28 = 26 → 31.2 → 32 GiB",
        build(mem_request=64 * GIB, mem_peak=10 * GIB, minutes=120),
        (Expect(K.MEMORY, S.WARNING, 64 * GIB, 32 * GIB, 108.0, ("based on your last 11 runs",)),),
        history=(
            *(run(i, mem_peak=10 * GIB) for i in range(8)),
            run(8, mem_peak=12 * GIB),
            run(9, mem_peak=40 * GIB),
        ),
    ),
    Case(
        "family of 5 with the same outlier: p95 = 11 + 0.8 × 29 = 34.2 → 42 GiB, 64 < 84: no advice",
        build(mem_request=64 * GIB, mem_peak=10 * GIB, minutes=120),
        (),
        history=(
            run(1, mem_peak=10 * GIB),
            run(2, mem_peak=11 * GIB),
            run(3, mem_peak=10 * GIB),
            run(4, mem_peak=40 * GIB),
        ),
    ),
    Case(
        "family too small (2 runs) or too old (40 days): this run alone",
        build(mem_request=64 * GIB, mem_peak=10 * GIB, minutes=120),
        (Expect(K.MEMORY, S.WARNING, 64 * GIB, 12 * GIB, 108.0),),
        history=(
            run(1, mem_peak=30 * GIB),
            run(2, days_ago=40, mem_peak=30 * GIB),
            run(3, days_ago=41, mem_peak=30 * GIB),
        ),
    ),
    Case(
        "family was OOM-killed at 16 GiB: never below 16 × 1.5 = 24 GiB",
        build(mem_request=64 * GIB, mem_peak=10 * GIB, minutes=120),
        (Expect(K.MEMORY, S.WARNING, 64 * GIB, 24 * GIB, 108.0),),
        history=(run(1, oom_limit=16 * GIB),),
    ),
    # --- memory_increase ------------------------------------------------------------------
    Case(
        "OOM at 16 GiB, peak 16 GiB: max(24, 20) = 24 GiB, job failed: critical",
        build(oom_limit=16 * GIB, mem_peak=16 * GIB, status=JobStatus.FAILED),
        (
            Expect(
                K.MEMORY_INCREASE,
                S.CRITICAL,
                16 * GIB,
                24 * GIB,
                0.0,
                (
                    'Container "main" was OOMKilled at its 16Gi memory limit',
                    'resources.limits["memory"]: 16Gi → 24Gi',
                ),
            ),
        ),
    ),
    Case(
        "OOM with no peak: 8 GiB × 1.5 = 12 GiB",
        build(oom_limit=8 * GIB, status=JobStatus.FAILED),
        (Expect(K.MEMORY_INCREASE, S.CRITICAL, 8 * GIB, 12 * GIB),),
    ),
    Case(
        "OOM then restarted and succeeded; peak 14 × 1.25 = 17.5 beats 10 × 1.5 = 15 → 18 GiB, warning",
        build(oom_limit=10 * GIB, mem_peak=14 * GIB, oom_restarted=True),
        (Expect(K.MEMORY_INCREASE, S.WARNING, 10 * GIB, 18 * GIB),),
    ),
    Case(
        "OOM with no limit and no peak: nothing to scale",
        build(oom=True, status=JobStatus.FAILED),
        (),
    ),
    Case(
        "OOM at 16 GiB after the family died at 32 GiB: max(24, 18.75, 48) = 48 GiB",
        build(oom_limit=16 * GIB, mem_peak=15 * GIB, status=JobStatus.FAILED),
        (Expect(K.MEMORY_INCREASE, S.CRITICAL, 16 * GIB, 48 * GIB),),
        history=(run(1, oom_limit=32 * GIB),),
    ),
    Case(
        "OOM at a 64 GiB limit with a 64 GiB request: raise to 96, never lower",
        build(mem_request=64 * GIB, oom_limit=64 * GIB, mem_peak=10 * GIB, status=JobStatus.FAILED),
        (Expect(K.MEMORY_INCREASE, S.CRITICAL, 64 * GIB, 96 * GIB),),
    ),
    # --- cpu ------------------------------------------------------------------------------
    Case(
        "16 cores asked, p95 2.4 × 1.2 = 2.88 → 2.9; (16 − 2.4) × 2 h = 27.2 core-h, warning",
        build(cpu_request=16, cpu_p95=2.4, minutes=120),
        (Expect(K.CPU, S.WARNING, 16, 2.9, 27.2, ('resources.requests["cpu"]: 16 → 2.9',)),),
    ),
    Case(
        "tiny job: 13.6 cores × 5 min = 1.13 core-h, below 2",
        build(cpu_request=16, cpu_p95=2.4, minutes=5),
        (),
    ),
    Case(
        "cpu limit only, p95 1 → 1.2; 7 × 1 h = 7 core-h, info",
        build(cpu_limit=8, cpu_p95=1.0),
        (Expect(K.CPU, S.INFO, 8, 1.2, 7.0, ('resources.limits["cpu"]: 8 → 1.2',)),),
    ),
    Case("cpu p95 missing", build(cpu_request=16, cpu_p95=None, mem_peak=GIB), ()),
    Case(
        "p95 2.0 × 1.2 is 2.4 exactly, not 2.5; (8 − 2) × 1 h = 6",
        build(cpu_request=8, cpu_p95=2.0),
        (Expect(K.CPU, S.INFO, 8, 2.4, 6.0),),
    ),
    Case(
        "8 cores, p95 2.5 → 3: 8 ≥ 6 but 5 unused ≥ 2 … and 5.5 core-h",
        build(cpu_request=8, cpu_p95=2.5),
        (Expect(K.CPU, S.INFO, 8, 3.0, 5.5),),
    ),
    Case(
        "4 cores, p95 1.5 → 1.8: 4 ≥ 3.6 but 2.2 unused ≥ 2; 2.5 core-h",
        build(cpu_request=4, cpu_p95=1.5),
        (Expect(K.CPU, S.INFO, 4, 1.8, 2.5),),
    ),
    Case(
        "3 cores, p95 1 → 1.2: only 1.8 unused, below 2", build(cpu_request=3, cpu_p95=1.0, minutes=600), ()
    ),
    # --- several rules, ordered by severity then waste ---------------------------------------
    Case(
        "idle GPUs, over-asked memory and CPU together: GPU first",
        build(
            gpus=4,
            util=[80, 75, 0, 0],
            mem_request=256 * GIB,
            mem_peak=20 * GIB,
            cpu_request=32,
            cpu_p95=4.0,
            minutes=600,
        ),
        (
            # 2 × 600 = 1200 GPU-min; (256 − 20) × 10 = 2360 GiB-h; (32 − 4) × 10 = 280 core-h.
            Expect(K.GPU_COUNT, S.CRITICAL, 4, 2, 1200.0),
            Expect(K.MEMORY, S.CRITICAL, 256 * GIB, 24 * GIB, 2360.0),
            Expect(K.CPU, S.CRITICAL, 32, 4.8, 280.0),
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_rule_table(case: Case) -> None:
    job, usage, pods = case.built
    recs = recommend(job, usage, pods, case.history, RightsizingPolicy(), NOW)
    got = [(r.kind, r.severity, r.current, r.suggested) for r in recs]
    assert got == [(e.kind, e.severity, e.current, e.suggested) for e in case.expect]
    for rec, exp in zip(recs, case.expect, strict=True):
        waste = waste_of(rec.kind, rec.waste_gpu_minutes, rec.waste_gib_hours, rec.waste_core_hours)
        assert waste == pytest.approx(exp.waste, abs=0.01)
        for text in exp.text:
            assert text in rec.message, rec.message
        assert rec.field_path is not None and rec.field_path in rec.message
        samples = rec.evidence["samples"]
        assert isinstance(samples, int) and "runs" in rec.evidence
        if rec.kind is not K.MEMORY_INCREASE:
            # A decrease always shows the samples and the time span it stands on.
            assert samples >= RightsizingPolicy().min_samples and "span_minutes" in rec.evidence


def test_table_has_enough_hand_computed_cases() -> None:
    assert len(CASES) >= 25
