"""End to end: the node agent's series backfilled into a real Prometheus, beside dcgm-exporter's and
cAdvisor's, and the usage collector on a real store measuring jobs that ended in different rounds.

GPU ``U`` on gpu-node-0 is time-sliced: job A (whole ``nvidia.com/gpu``, counted 1.0) holds it for an
hour; job B (``nvidia.com/gpu.shared``, counted 0.5) joins after 20 minutes and runs an hour after
A ended. dcgm-exporter labels the GPU with A while A lives (with the whole GPU's figures, A's and
B's together), then with B. The agent on gpu-node-0 reports each pod's own processes, except for
five minutes when it was down. A is measured in the first round while B still runs; B in the second.
Job C has GPU ``V`` of the same node to itself (dcgm-exporter's figures stay); job D shares GPU ``W``
of gpu-node-1, which has no agent (its figures cannot be stated). Every expected value comes from
what the generators wrote.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from inno_notify.adapters.db.repository import Store, SummaryState
from inno_notify.adapters.prometheus.agent_series import SHARING_AGENT, SHARING_RESOURCE
from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.measure import MeterConfig, UsageMeter
from inno_notify.domain.model import GPU_SOURCE_AGENT, GPU_SOURCE_DCGM, JobRecord, MissingReason, Notification
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.rightsizing import RightsizingPolicy
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.usage import CollectorOptions, UsageCollector
from inno_notify.sim.objects import (
    JobSpec,
    job_failed,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from tests import stored
from tests.adapters.prometheus import agentgen, metricgen
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, backfill

pytestmark = pytest.mark.prometheus

GIB = 1024**3
MIB = 1024**2
SCRAPE = 15.0
T0 = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
START = T0.timestamp()
GPU_RESOURCES = {"nvidia.com/gpu": 1.0, "nvidia.com/gpu.shared": 0.5}


@dataclass(frozen=True)
class Job:
    name: str
    namespace: str
    uid: str
    pod_uid: str
    resource: str
    scheduled: float  # seconds after T0
    finished: float
    exit_code: int = 0

    @property
    def pod(self) -> str:
        return f"{self.name}-x7k2p"

    @property
    def held(self) -> tuple[float, float]:
        return START + self.scheduled, START + self.finished


def uid(n: int) -> str:
    return f"{n:08x}-0000-4000-8000-{n:012x}"


A = Job("train-a", "face", uid(1), uid(11), "nvidia.com/gpu", 30, 3600)
B = Job("eval-b", "speech", uid(2), uid(12), "nvidia.com/gpu.shared", 1230, 7200)
C = Job("solo-c", "vision", uid(3), uid(13), "nvidia.com/gpu", 630, 3000)
D = Job("shared-d", "nlp", uid(4), uid(14), "nvidia.com/gpu.shared", 30, 3600, exit_code=1)

U = metricgen.Gpu("gpu-node-0", 0, "GPU-0000000u-shared")
V = metricgen.Gpu("gpu-node-0", 1, "GPU-0000000v-alone")
W = metricgen.Gpu("gpu-node-1", 0, "GPU-0000000w-no-agent")
OUTAGE = (START + 2400, START + 2700)  # the agent on gpu-node-0 restarting


def a_sm(t: float) -> float:
    return 30 + 10 * math.sin((t - START) / 600)


def b_sm(t: float) -> float:
    return 45 + 5 * math.cos((t - START) / 900)


def a_mem(t: float) -> float:
    return 3 * GIB + 2 * GIB * (t - START) / 3600


def b_mem(t: float) -> float:
    return 6 * GIB + GIB * (t - START) / 7200


def running(job: Job, t: float) -> bool:
    return START + job.scheduled + 60 <= t < START + job.finished - 30


@dataclass
class Loaded:
    server: PrometheusServer
    dcgm: dict[str, metricgen.PodTruth]
    agent: agentgen.AgentTruth


def _container(gib: float) -> metricgen.Container:
    return metricgen.Container("main", lambda t: gib * GIB, lambda t: 2.0)


@pytest.fixture(scope="module", params=["honor_labels", "exported"])
def loaded(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Loaded]:
    """The data set, with the agent's workload labels as they arrive with and without honor_labels."""
    if not HAVE_PROMETHEUS:
        pytest.skip("prometheus/promtool not installed")
    tmp = tmp_path_factory.mktemp("prom-agent")
    om = tmp / "data.om"

    def whole_gpu(t: float) -> float:  # what dcgm-exporter reports on the time-sliced GPU
        return (a_sm(t) if running(A, t) else 0) + (b_sm(t) if running(B, t) else 0)

    def fb(t: float) -> float:
        return ((a_mem(t) if running(A, t) else 0) + (b_mem(t) if running(B, t) else 0)) / MIB

    traces = [
        metricgen.PodTrace(
            A.namespace, A.pod, A.pod_uid, *A.held, [metricgen.GpuUse(U, whole_gpu, fb)], [_container(20)]
        ),
        # B's containers for its whole life; dcgm-exporter's labels on U only once A is gone.
        metricgen.PodTrace(B.namespace, B.pod, B.pod_uid, *B.held, [], [_container(12)]),
        metricgen.PodTrace(
            B.namespace, B.pod, B.pod_uid, START + A.finished, START + B.finished,
            [metricgen.GpuUse(U, whole_gpu, fb)], [], pod_cgroup_series=False,
        ),
        metricgen.PodTrace(
            C.namespace, C.pod, C.pod_uid, *C.held, [metricgen.GpuUse(V, lambda t: 65.0, lambda t: 18000.0)],
            [_container(30)],
        ),
        metricgen.PodTrace(
            D.namespace, D.pod, D.pod_uid, *D.held, [metricgen.GpuUse(W, lambda t: 40.0, lambda t: 5000.0)],
            [_container(8)],
        ),
    ]  # fmt: skip
    dcgm, _ = metricgen.generate(om, [U, V, W], traces, start=START - 600, end=START + 7800, scrape=SCRAPE)
    gpu_u, gpu_v = agentgen.AgentGpu("gpu-node-0", 0, U.uuid), agentgen.AgentGpu("gpu-node-0", 1, V.uuid)
    first = START + 60

    def proc(
        job: Job, gpu: agentgen.AgentGpu, memory: agentgen.Signal, sm: agentgen.Signal
    ) -> agentgen.AgentProcess:
        return agentgen.AgentProcess(
            job.namespace,
            job.pod,
            "main",
            gpu,
            START + job.scheduled + 60,
            START + job.finished - 30,
            memory,
            sm,
        )

    agent = agentgen.append(
        om,
        [gpu_u, gpu_v],
        [
            proc(A, gpu_u, a_mem, a_sm),
            proc(B, gpu_u, b_mem, b_sm),
            proc(C, gpu_v, lambda t: 17 * GIB, lambda t: 62.5),
        ],
        start=START - 600,
        end=START + 7800,
        scrape=SCRAPE,
        outages=[OUTAGE],
        exported=request.param == "exported",
    )
    assert first < OUTAGE[0]
    backfill(om, tmp / "tsdb")
    with PrometheusServer(tmp / "tsdb") as server:
        yield Loaded(server, dcgm, agent)


def events(job: Job) -> list[tuple[str, str, dict[str, Any]]]:
    """The watch events of the job from creation to its end (sim objects, real shapes)."""
    created = T0 + timedelta(seconds=job.scheduled - 25)
    spec = JobSpec(
        name=job.name,
        namespace=job.namespace,
        owner="alice@example.com",
        gpu_resource=job.resource,
        uid=job.uid,
    )
    obj = job_object(spec, created)
    pod = pod_object(obj, "x7k2p", created + timedelta(seconds=5), uid=job.pod_uid)
    scheduled = T0 + timedelta(seconds=job.scheduled)
    run = pod_running(pod, "gpu-node-0", scheduled, scheduled + timedelta(seconds=30))
    end = T0 + timedelta(seconds=job.finished)
    done = pod_terminated(run, end, job.exit_code)
    started = job_started(obj, created + timedelta(seconds=1))
    final = job_succeeded(started, end) if job.exit_code == 0 else job_failed(started, end)
    return [
        ("Job", "ADDED", obj),
        ("Pod", "ADDED", pod),
        ("Job", "MODIFIED", started),
        ("Pod", "MODIFIED", run),
        ("Pod", "MODIFIED", done),
        ("Job", "MODIFIED", final),
    ]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def no_notifications(job: JobRecord, now: datetime) -> list[Notification]:
    return []


async def test_time_sliced_gpu_attributed_to_each_pod_across_rounds(loaded: Loaded, store: Store) -> None:
    ingest_clock = Clock(T0 + timedelta(hours=3))
    config = ParseConfig(cluster="test", gpu_resources=GPU_RESOURCES)
    ingestor = Ingestor(store, config, IngestOptions(catch_up_seconds=86400), ingest_clock, T0)
    for job in (A, B, C, D):
        await ingestor.apply(events(job))

    client = PrometheusClient(ClientConfig(url=loaded.server.url))
    meter = UsageMeter(client, MeterConfig(scrape_interval_seconds=SCRAPE))
    clock = Clock(T0 + timedelta(seconds=3600 + 150))
    options = CollectorOptions(scrape_interval_seconds=SCRAPE)
    collector = UsageCollector(store, meter, RightsizingPolicy(), no_notifications, options, clock)
    try:
        # Round 1: A, C and D have ended; B still runs on A's GPU.
        assert await collector.run_once(clock.now) == 3
        assert await stored.summary_state(store, "test", B.uid) is SummaryState.AWAITING_USAGE
        assert meter.last_queries_by_kind["agent"] == 1 and meter.last_queries_by_kind["agent_window"] == 1
        # Round 2, an hour later: B.
        clock.now = T0 + timedelta(seconds=7200 + 150)
        assert await collector.run_once(clock.now) == 1
    finally:
        client.close()

    # A: the agent saw B's processes on A's GPU while A held it. Its own share, not the whole GPU.
    usage = await store.usage.get_usage("test", A.uid)
    assert usage is not None
    (row,) = usage.gpus
    start, end = A.held
    samples = loaded.agent.device_samples(U.uuid, start, end)
    share = loaded.agent.share(A.namespace, A.pod, U.uuid)
    assert (row.source, row.shared, row.sharing, row.uuid) == (GPU_SOURCE_AGENT, True, SHARING_AGENT, U.uuid)
    assert row.samples == samples < (end - start) / SCRAPE  # the outage is not counted as idle time
    assert row.util_mean_percent == pytest.approx(share.mean_over(samples), abs=1e-6)
    assert row.fb_used_peak_bytes == usage.gpu_memory_peak_bytes == share.memory_peak
    assert row.fb_total_bytes == 80 * GIB
    minutes = (end - start) / 60
    assert usage.gpu_minutes == pytest.approx(minutes)
    assert usage.used_gpu_minutes == pytest.approx(minutes * share.mean_over(samples) / 100, rel=1e-9)
    assert usage.gpu_util_mean_percent == pytest.approx(share.mean_over(samples), abs=1e-6)
    whole_gpu_peak = max(loaded.dcgm[A.pod_uid].gpus[U.uuid].fb_used_mib) * MIB
    assert share.memory_peak < whole_gpu_peak  # what dcgm-exporter said was A's, with B's inside
    assert usage.missing == ()

    # B: asked for nvidia.com/gpu.shared (counted 0.5 GPU); its own share again.
    usage = await store.usage.get_usage("test", B.uid)
    assert usage is not None
    (row,) = usage.gpus
    start, end = B.held
    samples = loaded.agent.device_samples(U.uuid, start, end)
    share = loaded.agent.share(B.namespace, B.pod, U.uuid)
    assert (row.source, row.shared, row.sharing) == (GPU_SOURCE_AGENT, True, SHARING_RESOURCE)
    assert row.util_mean_percent == pytest.approx(share.mean_over(samples), abs=1e-6)
    assert usage.gpu_memory_peak_bytes == share.memory_peak
    minutes = (end - start) / 60
    assert usage.gpu_minutes == pytest.approx(0.5 * minutes)
    # Its share of the whole GPU (about 45 %) is about 90 % of the half GPU it is counted for.
    assert usage.used_gpu_minutes == pytest.approx(minutes * share.mean_over(samples) / 100, rel=1e-9)
    assert usage.gpu_util_mean_percent == pytest.approx(2 * share.mean_over(samples), abs=1e-6)

    # C had its GPU alone: dcgm-exporter's figures, untouched.
    usage = await store.usage.get_usage("test", C.uid)
    assert usage is not None
    (row,) = usage.gpus
    assert (row.source, row.shared, row.sharing) == (GPU_SOURCE_DCGM, False, None)
    assert row.util_mean_percent == pytest.approx(loaded.dcgm[C.pod_uid].gpus[V.uuid].util_mean, abs=1e-6)

    # D shared a GPU on a node without the agent: the whole GPU's figures are not D's, so none.
    usage = await store.usage.get_usage("test", D.uid)
    assert usage is not None
    (row,) = usage.gpus
    assert (row.source, row.shared, row.sharing) == (GPU_SOURCE_DCGM, True, SHARING_RESOURCE)
    assert usage.used_gpu_minutes is None and usage.gpu_memory_peak_bytes is None
    assert usage.reason_for("gpu_memory_peak_bytes") is MissingReason.SHARED_GPU
