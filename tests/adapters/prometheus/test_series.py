"""Usage series against a real Prometheus holding generated data: what a job's chart draws.

Every expected point comes from the samples the generator wrote (``metricgen``): per step ``(t −
step, t]``, the mean utilization, the peak GPU memory and the sum over containers of each one's
peak RAM. Raw points must match to 1e-6; the job's series (rounded to 0.1 % and whole bytes, as
stored and drawn) within that rounding.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import replace

import pytest
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from inno_notify.adapters.prometheus import queries as q
from inno_notify.adapters.prometheus import series as series_module
from inno_notify.adapters.prometheus.batching import PodWindow
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.measure import MeterConfig, PodMeasurement, UsageMeter
from inno_notify.adapters.prometheus.series import DEFAULT_MAX_STEPS_PER_QUERY, SeriesSampler
from inno_notify.domain.series import MAX_POINTS, PodPoints, grid_time, job_series
from tests.adapters.prometheus import scenario
from tests.adapters.prometheus.conftest import Loaded
from tests.adapters.prometheus.metricgen import PodTruth, window
from tests.adapters.prometheus.test_measure import dt

pytestmark = pytest.mark.prometheus

MIB = 1024 * 1024


@pytest.fixture
async def meter(cluster_prometheus: Loaded) -> AsyncIterator[UsageMeter]:
    client = PrometheusClient(ClientConfig(url=cluster_prometheus.server.url, timeout_seconds=30))
    yield UsageMeter(client, MeterConfig(scrape_interval_seconds=scenario.SCRAPE))
    client.close()


@pytest.fixture
async def measured(cluster_prometheus: Loaded, meter: UsageMeter) -> dict[str, PodMeasurement]:
    return await meter.measure_pods([window(p) for p in cluster_prometheus.cluster.round])


def per_step(
    samples: dict[float, float], step: int, combine: Callable[[list[float]], float]
) -> dict[int, float]:
    buckets: dict[int, list[float]] = defaultdict(list)
    for t, value in samples.items():
        buckets[grid_time(t, step)].append(value)
    return {t: combine(values) for t, values in buckets.items()}


def mean(values: Iterable[float]) -> float:
    values = list(values)
    return sum(values) / len(values)


def expected_points(truth: PodTruth, step: int, gpu_names: dict[str, str]) -> PodPoints:
    """What the series must say, from the generator's samples; GPUs renamed from the generator's
    key (UUID[/instance]) to the measurement's name."""
    memory: dict[int, float] = defaultdict(float)
    for samples in truth.container_memory.values():
        for t, peak in per_step(samples, step, max).items():
            memory[t] += peak
    return PodPoints(
        pod_uid="",
        pod_name="",
        step_seconds=step,
        gpu_util={gpu_names[k]: per_step(g.util_at, step, mean) for k, g in truth.gpus.items() if g.util_at},
        gpu_memory={
            gpu_names[k]: {t: v * MIB for t, v in per_step(g.fb_used_mib_at, step, max).items()}
            for k, g in truth.gpus.items()
        },
        memory=dict(memory),
    )


def gpu_names(m: PodMeasurement) -> dict[str, str]:
    return {
        (f"{g.uuid}/{g.gpu.rsplit('/mig', 1)[1]}" if "/mig" in g.gpu else str(g.uuid)): g.gpu for g in m.gpus
    }


SERIES_PODS = [
    "train-4gpu-7xk2p",  # two idle GPUs of four, two containers
    "mem-spike-q9z8w",  # a 20 s RAM spike between scrapes of a 15 s grid
    "mig-job-p2m4c",  # GR_ENGINE_ACTIVE only
    "slice-a-1b2c3",  # a time-sliced GPU: the whole GPU's values
    "asr-retry-1-bbbbb",
    "notebook-alice",  # an earlier pod of the same name lies inside the query's range
]


@pytest.mark.parametrize("name", SERIES_PODS)
async def test_series_match_the_generated_samples(
    cluster_prometheus: Loaded, meter: UsageMeter, measured: dict[str, PodMeasurement], name: str
) -> None:
    pod = cluster_prometheus.cluster.by_name(name)
    m = measured[pod.uid]
    truth = cluster_prometheus.truth[pod.uid]
    assert m.points is not None
    step = meter.series_steps([m.window])[pod.uid]
    assert (pod.end - pod.start) / step <= MAX_POINTS
    want = expected_points(truth, step, gpu_names(m) or {k: k for k in truth.gpus})
    got = m.points
    assert got.step_seconds == step
    assert set(got.gpu_util) == set(want.gpu_util) and set(got.gpu_memory) == set(want.gpu_memory)
    for gpu, points in want.gpu_util.items():
        assert got.gpu_util[gpu].keys() == points.keys()
        for t, value in points.items():
            assert got.gpu_util[gpu][t] == pytest.approx(value, abs=1e-6), (gpu, t)
    assert got.gpu_memory == want.gpu_memory
    assert got.memory == want.memory

    # What the chart draws: the job's series, rounded to 0.1 % and whole bytes.
    series = job_series([got], gpus=m.gpus)
    assert series.step_seconds == step and series.points <= MAX_POINTS + 1
    assert series.start is not None
    first = int(series.start.timestamp())
    for line in series.gpu_util:
        for i, drawn in enumerate(line.values):
            truth_value = want.gpu_util[line.label].get(first + i * step)
            if truth_value is None:
                assert drawn is None
            else:
                assert drawn == pytest.approx(truth_value, abs=0.05 + 1e-9)
    (ram,) = series.memory
    assert {first + i * step: v for i, v in enumerate(ram.values) if v is not None} == want.memory


async def test_idle_gpus_are_flat_at_zero(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name("train-4gpu-7xk2p")
    m = measured[pod.uid]
    assert m.points is not None
    series = job_series([m.points], gpus=m.gpus)
    peaks = {line.label: max(v for v in line.values if v is not None) for line in series.gpu_util}
    # gpu 3 never works, gpu 2 works one second a minute: both stay within a few percent of zero.
    assert peaks["gpu-node-0/3"] == 0.0
    assert peaks["gpu-node-0/2"] < 5.0
    assert peaks["gpu-node-0/0"] > 50 and peaks["gpu-node-0/1"] > 50


async def test_the_time_sliced_gpu_is_marked_shared(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name("slice-b-4d5e6")
    m = measured[pod.uid]
    assert m.points is not None
    series = job_series([m.points], gpus=m.gpus)
    assert [line.shared for line in series.gpu_util] == [True]


async def test_a_jobs_pods_share_one_step_and_a_gpu_used_again_is_one_line(
    cluster_prometheus: Loaded, meter: UsageMeter
) -> None:
    retries = [cluster_prometheus.cluster.by_name(n) for n in ("asr-retry-0-aaaaa", "asr-retry-1-bbbbb")]
    windows = [replace(window(p), job_uid="asr-job") for p in retries]
    measured = await meter.measure_pods(windows)
    points = [measured[p.uid].points for p in retries]
    known = [p for p in points if p is not None]
    assert len(known) == len(retries), points
    assert {p.step_seconds for p in known} == {meter.series_steps(windows)[retries[0].uid]}
    series = job_series(known)
    (gpu,) = series.gpu_util
    assert gpu.label == "gpu-node-0/4"
    values = [v for v in gpu.values if v is not None]
    # 90 % while the first pod ran, 40 % while the retry did (an A100: GR_ENGINE_ACTIVE).
    assert max(values) == pytest.approx(90.0, abs=0.05)
    assert min(values) == pytest.approx(40.0, abs=0.05)
    assert [line.label for line in series.memory] == [p.name for p in retries]


async def test_one_range_query_per_metric_serves_every_step_class(cluster_prometheus: Loaded) -> None:
    pods = [window(p) for p in cluster_prometheus.cluster.round]
    client = PrometheusClient(ClientConfig(url=cluster_prometheus.server.url))
    meter = UsageMeter(client, MeterConfig(scrape_interval_seconds=scenario.SCRAPE))
    try:
        await meter.measure_pods(pods)
        classes = len(set(meter.series_steps(pods).values()))
        series = {k: n for k, n in meter.last_queries_by_kind.items() if k.startswith("series_")}
        assert classes > 2
        assert series == {"series_prof": 1, "series_util": 1, "series_fb": 1, "series_mem": 1}
    finally:
        client.close()


def _jobs(cluster: scenario.Cluster) -> dict[str, list[PodWindow]]:
    """The round's pods as jobs: one per pod, except a job whose two attempts ran one after the other
    on one GPU, and a job with a pod on each node (a whole GPU, a T4, a MIG instance); plus a pod
    Prometheus has no series of."""
    together = {
        "asr-job": ["asr-retry-0-aaaaa", "asr-retry-1-bbbbb"],
        "spread-job": ["train-4gpu-7xk2p", "mem-spike-q9z8w", "mig-job-p2m4c"],
    }
    job_of = {name: job for job, names in together.items() for name in names}
    jobs: dict[str, list[PodWindow]] = defaultdict(list)
    for p in cluster.round:
        job = job_of.get(p.name, f"job-{p.name}")
        jobs[job].append(replace(window(p), job_uid=job))
    ghost = cluster.round[0]
    jobs["ghost-job"] = [
        PodWindow(
            "nowhere", "never-scraped-0", "uid-ghost", dt(ghost.start), dt(ghost.end), job_uid="ghost-job"
        )
    ]
    return jobs


@pytest.mark.parametrize(
    "config",
    [
        MeterConfig(scrape_interval_seconds=scenario.SCRAPE),
        # Queries cut into chunks: the branches of one query hold parts of the classes.
        MeterConfig(scrape_interval_seconds=scenario.SCRAPE, max_body_bytes=900),
    ],
    ids=["one-query-per-metric", "small-chunks"],
)
async def test_a_round_gives_each_job_the_series_it_gets_measured_alone(
    cluster_prometheus: Loaded, config: MeterConfig
) -> None:
    """The round's points, several step classes in one query, are exactly those of each job measured
    on its own (one class, its own range): MIG, time-sliced GPUs, a reused pod name, a job on three
    nodes and a pod without series included."""
    jobs = _jobs(cluster_prometheus.cluster)
    client = PrometheusClient(ClientConfig(url=cluster_prometheus.server.url, timeout_seconds=30))
    try:
        round_meter = UsageMeter(client, config)
        everyone = [w for pods in jobs.values() for w in pods]
        batched = await round_meter.measure_pods(everyone)
        assert len(set(round_meter.series_steps(everyone).values())) > 2
        # Four range queries (prof, util, fb, mem), some of them cut into chunks by the small budget.
        chunks = sum(n for kind, n in round_meter.last_queries_by_kind.items() if kind.startswith("series_"))
        assert chunks > 4 if config.max_body_bytes < 2000 else chunks == 4
        alone_meter = UsageMeter(client, config)
        for job, pods in jobs.items():
            alone = await alone_meter.measure_pods(pods)
            for pod in pods:
                got, want = batched[pod.uid].points, alone[pod.uid].points
                assert got is not None and want is not None, (job, pod.pod)
                assert got == want, (job, pod.pod)
        spread = [batched[w.uid].points for w in jobs["spread-job"]]
        assert len({p.step_seconds for p in spread if p is not None}) == 1
        names = {name for p in spread if p is not None for name in p.gpu_util}
        assert names == {
            "gpu-node-0/0",
            "gpu-node-0/1",
            "gpu-node-0/2",
            "gpu-node-0/3",
            "gpu-node-1/0",
            "gpu-node-2/0/mig1",
        }
        ghost = batched["uid-ghost"].points
        assert ghost is not None and not (ghost.gpu_util or ghost.gpu_memory or ghost.memory)
    finally:
        client.close()


async def test_spans_cut_where_a_query_would_take_too_many_steps_change_no_point(
    cluster_prometheus: Loaded,
) -> None:
    pods = [window(p) for p in cluster_prometheus.cluster.round]
    dcgm = q.DcgmSelector("pod", "namespace", ("Hostname", "hostname"))
    client = PrometheusClient(ClientConfig(url=cluster_prometheus.server.url, timeout_seconds=30))
    try:

        def sampler(max_steps: int) -> SeriesSampler:
            return SeriesSampler(
                client,
                scrape_interval_seconds=scenario.SCRAPE,
                budget_bytes=lambda: 64_000,
                cadvisor=q.CadvisorSelector(),
                max_steps_per_query=max_steps,
            )

        whole, cut = sampler(DEFAULT_MAX_STEPS_PER_QUERY), sampler(240)
        assert await cut.sample(pods, dcgm) == await whole.sample(pods, dcgm)
        assert whole.last_queries_by_kind["series_fb"] == 1
        assert cut.last_queries_by_kind["series_fb"] > 1
    finally:
        client.close()


async def test_figures_stand_when_the_series_cannot_be_had(cluster_prometheus: Loaded) -> None:
    """A Prometheus (behind a proxy) that answers instant queries but fails every range query."""
    upstream = cluster_prometheus.server.url

    async def forward(request: web.Request) -> web.Response:
        if request.path.endswith("/query_range"):
            return web.Response(status=503, text="range queries are down")
        async with (
            ClientSession() as http,
            http.request(
                request.method, upstream + request.path_qs, data=await request.read(), headers=request.headers
            ) as answer,
        ):
            return web.Response(
                status=answer.status, body=await answer.read(), content_type="application/json"
            )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    client = PrometheusClient(ClientConfig(url=str(server.make_url("")).rstrip("/")))
    try:
        pod = cluster_prometheus.cluster.by_name("train-4gpu-7xk2p")
        meter = UsageMeter(client, MeterConfig(scrape_interval_seconds=scenario.SCRAPE))
        measured = (await meter.measure_pods([window(pod)]))[pod.uid]
        assert measured.points is None
        assert measured.pod.memory_peak_bytes == cluster_prometheus.truth[pod.uid].memory_peak
        assert len(measured.gpus) == 4
    finally:
        client.close()
        await server.close()


_GPU: tuple[str, ...] = ("ns", "pod", "0")


@pytest.mark.parametrize(
    ("util_rows", "prof_rows", "want"),
    [
        ([{60: 10.0, 120: 20.0}], [], {60: 10.0, 120: 20.0}),
        ([], [{60: 90.0}], {60: 90.0}),
        # GR_ENGINE_ACTIVE stands for the GPU where it has a point, GPU_UTIL elsewhere.
        ([{60: 10.0, 120: 20.0}], [{120: 80.0, 180: 70.0}], {60: 10.0, 120: 80.0, 180: 70.0}),
        # A NaN GR_ENGINE_ACTIVE point hides GPU_UTIL at its time and is no point itself ...
        ([{60: 10.0, 120: 20.0}], [{120: math.nan}], {60: 10.0}),
        # ... and two GR_ENGINE_ACTIVE rows average where they have finite points.
        ([{60: 10.0}], [{60: 80.0}, {60: 60.0}, {60: math.nan}], {60: 70.0}),
    ],
    ids=["util-only", "prof-only", "prof-where-present", "nan-prof-hides-util", "prof-rows-averaged"],
)
def test_gr_engine_active_is_preferred_per_gpu_and_time(
    util_rows: list[dict[int, float]], prof_rows: list[dict[int, float]], want: dict[int, float]
) -> None:
    util = {_GPU: series_module._Gpu("gpu-0", list(util_rows))} if util_rows else {}
    prof = {_GPU: series_module._Gpu("gpu-0", list(prof_rows))} if prof_rows else {}
    assert series_module._by_gpu(util, series_module._mean, preferred=prof) == {"gpu-0": want}
