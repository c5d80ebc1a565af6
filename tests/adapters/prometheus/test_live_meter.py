"""The live meter against a real Prometheus filled by promtool: every rule of "idle the whole window"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.live_meter import LiveConfig, LiveMeter, LiveTarget
from inno_notify.domain.live import GpuWindow, IdlePolicy, find_idle
from inno_notify.domain.model import JobRecord, JobStatus, PodRecord, WorkloadKind
from tests.adapters.prometheus import live_scenario as scenario
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer

NOW = datetime.fromtimestamp(scenario.NOW, tz=UTC)
WINDOW = 3600.0
THRESHOLD = 5.0
POLICY = IdlePolicy(window_seconds=WINDOW, idle_util_percent=THRESHOLD, scrape_seconds=scenario.SCRAPE)


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    if not HAVE_PROMETHEUS:
        pytest.skip("prometheus/promtool not installed")
    with scenario.serve(tmp_path_factory.mktemp("live")) as server:
        yield server


def targets() -> list[LiveTarget]:
    return [
        LiveTarget(p.namespace, p.name, p.uid, datetime.fromtimestamp(p.trace.start, tz=UTC))
        for p in scenario.pods()
    ]


def records(pod: scenario.LivePod) -> tuple[JobRecord, PodRecord]:
    start = datetime.fromtimestamp(pod.trace.start, tz=UTC)
    job = JobRecord("c", pod.uid, pod.namespace, pod.name, kind=WorkloadKind.POD, status=JobStatus.RUNNING)
    record = PodRecord(
        "c",
        pod.uid,
        pod.namespace,
        pod.name,
        pod.uid,
        "Running",
        start,
        scheduled_at=start,
        gpu_equivalents=float(len(pod.trace.gpus)),
    )
    return job, record


async def observe(
    server: PrometheusServer, *, listed: bool = False
) -> tuple[dict[str, tuple[GpuWindow, ...]], int]:
    meter = LiveMeter(
        PrometheusClient(ClientConfig(url=server.url)), LiveConfig(scrape_interval_seconds=scenario.SCRAPE)
    )
    try:
        seen = await meter.observe(targets(), NOW, WINDOW, THRESHOLD, listed=listed)
        return seen, meter.last_queries
    finally:
        meter.client.close()


@pytest.mark.parametrize("pod", scenario.pods(), ids=lambda p: p.name)
async def test_each_pod_is_judged_by_its_whole_window(
    prometheus: PrometheusServer, pod: scenario.LivePod
) -> None:
    seen, _ = await observe(prometheus)
    gpus = seen.get(pod.uid, ())
    below = pod.idle_gpus or pod.name == "young"  # below the threshold right now
    if below:
        assert len(gpus) == len(pod.trace.gpus), "every GPU the pod holds is found, under either spelling"
    else:
        assert gpus == (), "a pod whose GPUs are all busy has nothing to report"
    job, record = records(pod)
    finding = find_idle(job, record, gpus, NOW, POLICY, NOW - timedelta(days=7))
    if pod.idle_gpus == 0:
        assert finding is None
        return
    assert finding is not None
    assert len(finding.idle) == pod.idle_gpus
    assert finding.gpus_held == len(pod.trace.gpus)
    assert pod.idle_since is not None
    # The last busy sample is found to the subquery's minute; a pod idle from the start idles
    # since it got its GPUs, exactly.
    assert abs(finding.idle_since.timestamp() - pod.idle_since) <= 60
    assert not finding.since_at_least
    expected_hours = pod.idle_gpus * (scenario.NOW - pod.idle_since) / 3600
    assert finding.idle_gpu_hours == pytest.approx(expected_hours, abs=pod.idle_gpus * 60 / 3600)
    assert finding.memory_held is pod.memory_held


async def test_one_round_is_four_queries_and_listing_the_pods_agrees(prometheus: PrometheusServer) -> None:
    batched, queries = await observe(prometheus)
    # The window over every GPU series; the detail of the pods with a GPU below the threshold, in
    # two parts asked together; the coarse tiles that held a last busy sample, read again at the
    # minute.
    assert queries == 4
    listed, listed_queries = await observe(prometheus, listed=True)
    assert listed_queries == 4
    assert listed == batched


async def test_the_query_count_does_not_grow_with_the_pods(prometheus: PrometheusServer) -> None:
    """Pods whose series are not in Prometheus (the scenario's pods a hundred times over under other
    names, and other ages) cost no query: the window lists no pod, and the rest only idle ones."""
    meter = LiveMeter(
        PrometheusClient(ClientConfig(url=prometheus.url)),
        LiveConfig(scrape_interval_seconds=scenario.SCRAPE),
    )
    ghosts = [
        LiveTarget(t.namespace, f"{t.pod}-{n}", f"{t.uid}-{n}", t.held_from - timedelta(days=n % 5))
        for n in range(100)
        for t in targets()
    ]
    try:
        seen = await meter.observe([*targets(), *ghosts], NOW, WINDOW, THRESHOLD)
    finally:
        meter.client.close()
    assert meter.last_queries == 4
    assert set(seen) == {p.uid for p in scenario.pods() if p.idle_gpus or p.name == "young"}


async def test_the_mig_slice_is_judged_by_gr_engine_active(prometheus: PrometheusServer) -> None:
    seen, _ = await observe(prometheus)
    mig = next(p for p in scenario.pods() if p.name == "mig-idle")
    (gpu,) = seen[mig.uid]
    assert gpu.mig_profile == "3g.40gb"
    assert gpu.util_max_percent == 0.0
    # Ranges are closed at both ends before Prometheus 3, left-open since: 240 or 241 samples.
    assert WINDOW / scenario.SCRAPE <= gpu.samples <= WINDOW / scenario.SCRAPE + 1


async def test_a_reused_pod_name_does_not_lend_its_busy_past(prometheus: PrometheusServer) -> None:
    """JupyterHub names every server of a user `jupyter-<user>`: the earlier pod of that name was
    busy on the same GPU until just before this one started, which is no busy time of this pod."""
    seen, _ = await observe(prometheus)
    pod = next(p for p in scenario.pods() if p.name == "jupyter-j51000101")
    (gpu,) = seen[pod.uid]
    assert gpu.busy_at is not None and gpu.busy_at.timestamp() < pod.trace.start
    job, record = records(pod)
    finding = find_idle(job, record, seen[pod.uid], NOW, POLICY, NOW - timedelta(days=7))
    assert finding is not None and finding.idle_since.timestamp() == pod.trace.start


async def test_older_than_the_lookback_reads_at_least(prometheus: PrometheusServer) -> None:
    meter = LiveMeter(
        PrometheusClient(ClientConfig(url=prometheus.url)),
        LiveConfig(scrape_interval_seconds=scenario.SCRAPE, lookback_seconds=2 * 3600),
    )
    pod = next(p for p in scenario.pods() if p.name == "idle-from-start")
    try:
        seen = await meter.observe(targets(), NOW, WINDOW, THRESHOLD)
    finally:
        meter.client.close()
    job, record = records(pod)
    finding = find_idle(job, record, seen[pod.uid], NOW, POLICY, NOW - timedelta(hours=2))
    assert finding is not None
    assert finding.since_at_least and finding.idle_since == NOW - timedelta(hours=2)


async def test_a_namespace_filter_keeps_other_namespaces_out(prometheus: PrometheusServer) -> None:
    meter = LiveMeter(
        PrometheusClient(ClientConfig(url=prometheus.url)),
        LiveConfig(scrape_interval_seconds=scenario.SCRAPE, namespaces=("jhub",)),
    )
    try:
        seen = await meter.observe(targets(), NOW, WINDOW, THRESHOLD)
    finally:
        meter.client.close()
    assert set(seen) == {p.uid for p in scenario.pods() if p.namespace == "jhub"}


async def test_no_targets_no_query(prometheus: PrometheusServer) -> None:
    meter = LiveMeter(PrometheusClient(ClientConfig(url=prometheus.url)))
    try:
        assert await meter.observe([], NOW, WINDOW, THRESHOLD) == {}
        assert meter.last_queries == 0
    finally:
        meter.client.close()


def test_policy_needs_the_window_covered() -> None:
    """Samples over less than half the window (metrics that only just appeared) are not "idle for
    the window"; a utilization at the threshold is not below it."""
    enough = int(WINDOW / scenario.SCRAPE / 2)
    gpu = GpuWindow("0", util_max_percent=0.0, samples=enough)
    assert POLICY.idle(gpu)
    assert not POLICY.idle(replace(gpu, samples=enough - 1))
    assert not POLICY.idle(replace(gpu, util_max_percent=THRESHOLD))
    assert not POLICY.idle(replace(gpu, util_max_percent=None))


async def test_a_tight_body_budget_splits_the_detail_and_agrees(prometheus: PrometheusServer) -> None:
    """Past the body budget (thousands of idle pods in production) the detail is cut in halves:
    more queries, the same answer."""
    batched, _ = await observe(prometheus)
    meter = LiveMeter(
        PrometheusClient(ClientConfig(url=prometheus.url)),
        LiveConfig(scrape_interval_seconds=scenario.SCRAPE, max_body_bytes=3000),
    )
    try:
        split = await meter.observe(targets(), NOW, WINDOW, THRESHOLD)
    finally:
        meter.client.close()
    assert meter.last_queries > 4
    assert split == batched
