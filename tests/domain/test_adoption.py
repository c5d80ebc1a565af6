"""Advice adoption (domain.adoption): table tests on hand-computed figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.adoption import (
    AdoptionTally,
    AdviceCheck,
    Outcome,
    judge,
    judge_one,
    run_outcome,
    tally,
)
from inno_notify.domain.model import (
    JobRecord,
    Recommendation,
    RecommendationKind,
    Requested,
    Severity,
    Unit,
)

GIB = 1024**3
T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
CPU_PATH = 'resources.requests["cpu"]'
MEM_PATH = 'resources.requests["memory"]'
LIMIT_MEM = 'resources.limits["memory"]'
GPU_PATH = 'resources.limits["nvidia.com/gpu"]'
MIG_1G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"


def cpu(current: float, suggested: float, p95: float) -> Recommendation:
    return Recommendation(
        RecommendationKind.CPU,
        Severity.WARNING,
        current,
        suggested,
        Unit.CORES,
        "cpu",
        field_path=CPU_PATH,
        evidence={"cpu_cores_p95": p95},
    )


def memory(current_gib: int, suggested_gib: int, peak_gib: int) -> Recommendation:
    return Recommendation(
        RecommendationKind.MEMORY,
        Severity.WARNING,
        current_gib * GIB,
        suggested_gib * GIB,
        Unit.BYTES,
        "memory",
        field_path=MEM_PATH,
        evidence={"memory_peak_bytes": peak_gib * GIB},
    )


def gpus(current: int, suggested: int) -> Recommendation:
    kind = RecommendationKind.IDLE_GPU if suggested == 0 else RecommendationKind.GPU_COUNT
    return Recommendation(kind, Severity.CRITICAL, current, suggested, Unit.GPUS, "gpu", field_path=GPU_PATH)


def more_memory(limit_gib: int, suggested_gib: int) -> Recommendation:
    return Recommendation(
        RecommendationKind.MEMORY_INCREASE,
        Severity.CRITICAL,
        limit_gib * GIB,
        suggested_gib * GIB,
        Unit.BYTES,
        "oom",
        field_path=LIMIT_MEM,
    )


def mig(current: str, suggested: str) -> Recommendation:
    return Recommendation(
        RecommendationKind.GPU_MEMORY,
        Severity.WARNING,
        current,
        suggested,
        Unit.MIG_PROFILE,
        "mig",
        field_path=GPU_PATH,
    )


def run(
    uid: str = "new",
    *,
    cpu_cores: float | None = 32.0,
    memory_gib: int | None = 256,
    limit_gib: int | None = None,
    gpu: int = 4,
    extended: dict[str, float] | None = None,
    hours: float | None = 10.0,
    parallelism: int = 1,
    exit_reason: str | None = None,
    family: str | None = "train",
) -> JobRecord:
    ext = extended if extended is not None else ({"nvidia.com/gpu": gpu} if gpu else {})
    return JobRecord(
        cluster="c",
        uid=uid,
        namespace="ns",
        name=f"train-{uid}",
        owner="alice@example.com",
        team="face",
        family=family,
        created_at=T0,
        started_at=T0,
        finished_at=None if hours is None else T0 + timedelta(hours=hours),
        exit_reason=exit_reason,
        requested=Requested(
            gpus=float(sum(v for k, v in ext.items() if k == "nvidia.com/gpu")),
            cpu_cores=cpu_cores,
            memory_bytes=None if memory_gib is None else memory_gib * GIB,
            memory_limit_bytes=None if limit_gib is None else limit_gib * GIB,
            extended=ext,
            parallelism=parallelism,
        ),
    )


# One piece of advice at a time: (advice, the new run, the expected outcome).
ONE = [
    # cpu 32 → 8 (p95 6): 8 followed; 6.5 is below the advice but above usage: followed.
    ("cpu to the suggestion", cpu(32, 8, 6), run(cpu_cores=8), Outcome.FOLLOWED),
    ("cpu between usage and suggestion", cpu(32, 8, 6), run(cpu_cores=6.5), Outcome.FOLLOWED),
    ("cpu halfway", cpu(32, 8, 6), run(cpu_cores=16), Outcome.PARTLY),
    ("cpu unchanged", cpu(32, 8, 6), run(cpu_cores=32), Outcome.IGNORED),
    ("cpu raised", cpu(32, 8, 6), run(cpu_cores=48), Outcome.IGNORED),
    ("cpu below the p95", cpu(32, 8, 6), run(cpu_cores=4), Outcome.OVER_CORRECTED),
    ("cpu request dropped", cpu(32, 8, 6), run(cpu_cores=None), Outcome.UNKNOWN),
    # memory 256 GiB → 48 GiB (peak 40 GiB)
    ("memory followed", memory(256, 48, 40), run(memory_gib=48), Outcome.FOLLOWED),
    ("memory partly", memory(256, 48, 40), run(memory_gib=128), Outcome.PARTLY),
    ("memory ignored", memory(256, 48, 40), run(memory_gib=256), Outcome.IGNORED),
    ("memory below the peak", memory(256, 48, 40), run(memory_gib=32), Outcome.OVER_CORRECTED),
    (
        "memory followed but OOM-killed",
        memory(256, 48, 40),
        run(memory_gib=48, exit_reason="OOMKilled"),
        Outcome.OVER_CORRECTED,
    ),
    # 4 GPUs → 2 busy; → 0 idle
    ("gpus followed", gpus(4, 2), run(gpu=2), Outcome.FOLLOWED),
    ("gpus partly", gpus(4, 2), run(gpu=3), Outcome.PARTLY),
    ("gpus ignored", gpus(4, 2), run(gpu=4), Outcome.IGNORED),
    ("gpus below the busy ones", gpus(4, 2), run(gpu=1), Outcome.OVER_CORRECTED),
    ("idle gpus dropped", gpus(1, 0), run(gpu=0), Outcome.FOLLOWED),
    # OOM at 32 GiB → limit 48 GiB
    ("increase followed", more_memory(32, 48), run(limit_gib=64), Outcome.FOLLOWED),
    ("increase partly", more_memory(32, 48), run(limit_gib=40), Outcome.PARTLY),
    ("increase ignored", more_memory(32, 48), run(limit_gib=32), Outcome.IGNORED),
    # a whole GPU → a 1g.10gb MIG slice
    ("mig followed", mig("7g.80gb", "1g.10gb"), run(extended={MIG_1G: 1}), Outcome.FOLLOWED),
    ("mig partly", mig("7g.80gb", "1g.10gb"), run(extended={MIG_3G: 1}), Outcome.PARTLY),
    ("mig ignored", mig("whole GPU", "time-slicing"), run(gpu=1), Outcome.IGNORED),
]


@pytest.mark.parametrize(("advice", "new", "expected"), [row[1:] for row in ONE], ids=[r[0] for r in ONE])
def test_one_piece_of_advice(advice: Recommendation, new: JobRecord, expected: Outcome) -> None:
    assert judge_one(advice, new).outcome is expected


def _check(outcome: Outcome) -> AdviceCheck:
    return AdviceCheck(RecommendationKind.CPU, CPU_PATH, 32, 8, 8, outcome)


FO, PA, IG, UN = Outcome.FOLLOWED, Outcome.PARTLY, Outcome.IGNORED, Outcome.UNKNOWN
OC = Outcome.OVER_CORRECTED
RUNS = [
    ((), Outcome.NO_PRIOR_ADVICE),
    ((FO,), FO),
    ((FO, FO), FO),
    ((FO, UN), FO),
    ((IG, IG), IG),
    ((FO, IG), PA),
    ((PA,), PA),
    ((FO, OC), OC),
    ((IG, OC), OC),
    ((UN, UN), UN),
]


@pytest.mark.parametrize(("outcomes", "expected"), RUNS)
def test_a_run_outcome_from_its_checks(outcomes: tuple[Outcome, ...], expected: Outcome) -> None:
    assert run_outcome([_check(o) for o in outcomes]) is expected


def test_followed_advice_frees_the_request_delta_times_the_new_runtime() -> None:
    previous = run("old", gpu=4, memory_gib=256, cpu_cores=32)
    # Two pods for 10 h: GPUs 4 → 2 per pod = 2 × 2 pods × 10 h = 40 GPU-h;
    # memory 256 → 48 GiB = 208 GiB × 2 × 10 h = 4160 GiB-h; CPU is not counted in either.
    new = run("new", gpu=2, memory_gib=48, cpu_cores=8, parallelism=2)
    adoption = judge(new, previous, [gpus(4, 2), memory(256, 48, 40), cpu(32, 8, 6)], T0)
    assert adoption is not None
    assert adoption.outcome is Outcome.FOLLOWED
    assert adoption.previous_uid == "old"
    assert adoption.gpu_hours_freed == pytest.approx(40.0)
    assert adoption.memory_gib_hours_freed == pytest.approx(4160.0)


def test_partly_followed_advice_frees_what_moved_and_ignored_advice_frees_nothing() -> None:
    previous = run("old", gpu=4, memory_gib=256)
    # GPUs 4 → 3 for 5 h: 5 GPU-h; memory ignored: 0.
    partly = judge(run(gpu=3, memory_gib=256, hours=5), previous, [gpus(4, 2), memory(256, 48, 40)], T0)
    assert partly is not None and partly.outcome is Outcome.PARTLY
    assert (partly.gpu_hours_freed, partly.memory_gib_hours_freed) == pytest.approx((5.0, 0.0))
    ignored = judge(run(gpu=4), previous, [gpus(4, 2)], T0)
    assert ignored is not None and ignored.outcome is Outcome.IGNORED
    assert (ignored.gpu_hours_freed, ignored.memory_gib_hours_freed) == (0.0, 0.0)


def test_over_corrected_advice_is_not_credited() -> None:
    adoption = judge(run(gpu=1), run("old", gpu=4), [gpus(4, 2)], T0)
    assert adoption is not None and adoption.outcome is Outcome.OVER_CORRECTED
    assert adoption.gpu_hours_freed == 0.0


def test_unknown_runtime_leaves_the_freed_figures_null() -> None:
    adoption = judge(run(gpu=2, hours=None), run("old", gpu=4), [gpus(4, 2)], T0)
    assert adoption is not None and adoption.outcome is Outcome.FOLLOWED
    assert (adoption.gpu_hours_freed, adoption.memory_gib_hours_freed) == (None, None)


def test_no_prior_advice() -> None:
    no_previous = judge(run(), None, [], T0)
    assert no_previous is not None and no_previous.outcome is Outcome.NO_PRIOR_ADVICE
    assert no_previous.previous_uid is None
    no_advice = judge(run(), run("old"), [], T0)
    assert no_advice is not None and no_advice.outcome is Outcome.NO_PRIOR_ADVICE
    assert no_advice.previous_uid == "old" and no_advice.gpu_hours_freed == 0.0


def test_a_job_without_a_family_is_not_judged() -> None:
    assert judge(run(family=None), run("old"), [gpus(4, 2)], T0) is None


def test_tally_sums_the_outcome_rows() -> None:
    rows = [
        (Outcome.FOLLOWED, 5, 12.0, 100.0),
        (Outcome.PARTLY, 1, 2.0, None),
        (Outcome.IGNORED, 2, 0.0, 0.0),
        (Outcome.NO_PRIOR_ADVICE, 3, 0.0, 0.0),
    ]
    assert tally(rows) == AdoptionTally(
        runs=11,
        advised=8,
        followed=5,
        partly=1,
        ignored=2,
        over_corrected=0,
        gpu_hours_freed=14.0,
        memory_gib_hours_freed=100.0,
    )
    assert tally([]) == AdoptionTally()
