"""Properties that must hold for any input, not just the hand-picked ones: decreases stay between
the observed peak × headroom and the current request, every OOM kill is followed by an
increase, and a missing figure never turns into advice."""

from __future__ import annotations

from datetime import timedelta
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from inno_notify.domain.model import JobStatus
from inno_notify.domain.model import RecommendationKind as K
from inno_notify.domain.rightsizing import RightsizingPolicy, recommend

from .builders import GIB, T0, build, run

NOW = T0 + timedelta(days=1)
MIB = 1024**2

headrooms = st.decimals(min_value="1.0", max_value="2.0", places=2).map(float)
minutes = st.floats(min_value=1, max_value=20_000, allow_nan=False)
byte_amounts = st.integers(min_value=MIB, max_value=2048 * GIB)
core_amounts = st.decimals(min_value="0.1", max_value="256", places=3).map(float)


def exact(value: float) -> Fraction:
    return Fraction(repr(value))


@settings(max_examples=300, deadline=None)
@given(
    request=byte_amounts,
    peaks=st.lists(st.integers(min_value=0, max_value=2048 * GIB), min_size=1, max_size=4),
    family=st.lists(st.integers(min_value=0, max_value=2048 * GIB), max_size=12),
    held=minutes,
    headroom=headrooms,
    as_limit=st.booleans(),
)
def test_memory_decrease_stays_between_peak_and_request(
    request: int, peaks: list[int], family: list[int], held: float, headroom: float, as_limit: bool
) -> None:
    built = build(
        pods=len(peaks),
        mem_request=None if as_limit else request,
        mem_limit=request if as_limit else None,
        mem_peak=peaks,
        minutes=held,
    )
    policy = RightsizingPolicy(headroom=headroom)
    history = [run(i, mem_peak=p) for i, p in enumerate(family)]
    for rec in recommend(*built, history, policy, NOW):
        assert rec.kind is K.MEMORY
        assert isinstance(rec.suggested, int)
        assert Fraction(rec.suggested) >= Fraction(max(peaks)) * exact(headroom)
        assert rec.suggested <= request
        assert request - rec.suggested >= policy.min_memory_waste_gib * GIB
        assert rec.waste_gib_hours >= policy.min_waste_gib_hours


@settings(max_examples=300, deadline=None)
@given(
    request=core_amounts,
    p95s=st.lists(core_amounts, min_size=1, max_size=4),
    family=st.lists(core_amounts, max_size=12),
    held=minutes,
    headroom=headrooms,
)
def test_cpu_decrease_stays_between_p95_and_request(
    request: float, p95s: list[float], family: list[float], held: float, headroom: float
) -> None:
    built = build(pods=len(p95s), cpu_request=request, cpu_p95=p95s, minutes=held)
    policy = RightsizingPolicy(headroom=headroom)
    history = [run(i, cpu_p95=c) for i, c in enumerate(family)]
    for rec in recommend(*built, history, policy, NOW):
        assert rec.kind is K.CPU
        assert isinstance(rec.suggested, float)
        assert exact(rec.suggested) >= exact(max(p95s)) * exact(headroom)
        assert rec.suggested <= request
        assert rec.waste_core_hours >= policy.min_waste_core_hours


@settings(max_examples=300, deadline=None)
@given(
    limit=byte_amounts,
    peak=st.none() | byte_amounts,
    request=st.none() | byte_amounts,
    restarted=st.booleans(),
    failed=st.booleans(),
    past_oom=st.none() | byte_amounts,
)
def test_every_oom_is_followed_by_an_increase(
    limit: int, peak: int | None, request: int | None, restarted: bool, failed: bool, past_oom: int | None
) -> None:
    built = build(
        oom_limit=limit,
        mem_peak=peak,
        mem_request=request,
        oom_restarted=restarted,
        status=JobStatus.FAILED if failed else JobStatus.SUCCEEDED,
    )
    history = [run(1, oom_limit=past_oom)] if past_oom is not None else []
    recs = recommend(*built, history, RightsizingPolicy(), NOW)
    increases = [r for r in recs if r.kind is K.MEMORY_INCREASE]
    assert len(increases) == 1
    assert not [r for r in recs if r.kind is K.MEMORY]
    suggested = increases[0].suggested
    assert isinstance(suggested, int)
    assert suggested > limit
    assert Fraction(suggested) >= Fraction(limit) * Fraction(3, 2)
    if peak is not None:
        assert Fraction(suggested) >= Fraction(peak) * Fraction(5, 4)
    if past_oom is not None:
        assert Fraction(suggested) >= Fraction(past_oom) * Fraction(3, 2)


maybe_util = st.none() | st.floats(min_value=0, max_value=100, allow_nan=False)


@settings(max_examples=400, deadline=None)
@given(
    gpus=st.integers(min_value=1, max_value=8),
    utils=st.lists(maybe_util, min_size=8, max_size=8),
    fb_peak=st.none() | st.integers(min_value=0, max_value=80 * GIB),
    mem_peaks=st.lists(st.none() | byte_amounts, min_size=2, max_size=2),
    cpu_p95s=st.lists(st.none() | core_amounts, min_size=2, max_size=2),
    samples=st.integers(min_value=0, max_value=200),
    held=minutes,
)
def test_missing_figures_never_yield_advice(
    gpus: int,
    utils: list[float | None],
    fb_peak: int | None,
    mem_peaks: list[int | None],
    cpu_p95s: list[float | None],
    samples: int,
    held: float,
) -> None:
    built = build(
        pods=2,
        gpus=gpus,
        util=utils[:gpus],
        fb_peak=fb_peak,
        mem_request=1024 * GIB,
        mem_peak=mem_peaks,
        cpu_request=256,
        cpu_p95=cpu_p95s,
        samples=samples,
        minutes=held,
    )
    policy = RightsizingPolicy()
    kinds = {r.kind for r in recommend(*built, [], policy, NOW)}
    too_few = samples < policy.min_samples
    if too_few or None in utils[:gpus]:
        assert not kinds & {K.GPU_COUNT, K.IDLE_GPU, K.GPU_MEMORY}
    if fb_peak is None:
        assert K.GPU_MEMORY not in kinds
    if too_few or None in mem_peaks:
        assert K.MEMORY not in kinds
    if too_few or None in cpu_p95s:
        assert K.CPU not in kinds
    assert K.MEMORY_INCREASE not in kinds


@settings(max_examples=100, deadline=None)
@given(
    gpus=st.integers(min_value=0, max_value=8),
    mem_request=st.none() | byte_amounts,
    cpu_request=st.none() | core_amounts,
    held=minutes,
    family=st.lists(byte_amounts, max_size=10),
)
def test_no_usage_at_all_yields_nothing(
    gpus: int, mem_request: int | None, cpu_request: float | None, held: float, family: list[int]
) -> None:
    built = build(gpus=gpus, mem_request=mem_request, cpu_request=cpu_request, minutes=held)
    history = [run(i, mem_peak=p, cpu_p95=1.0, gpus_busy=0, fb_peak=p) for i, p in enumerate(family)]
    assert recommend(*built, history, RightsizingPolicy(), NOW) == []
