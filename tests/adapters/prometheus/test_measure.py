"""The measurement against a real Prometheus holding generated dcgm-exporter and cAdvisor data.

Every expected value comes from what the generator wrote (``metricgen.PodTruth``). Tolerances:
GPU mean/max utilization 1e-6 % (avg_over_time over exactly the written samples), framebuffer and
memory peaks exact (integers), CPU seconds and mean 1e-6 relative (the counters' last values), CPU
p95 2 % (Prometheus takes it over back-to-back 60 s rate windows, the truth over single scrape
intervals; the generated CPU load changes slowly enough for both to agree).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.errors import PrometheusUnavailable
from inno_notify.adapters.prometheus.measure import MeterConfig, PodMeasurement, UsageMeter
from inno_notify.adapters.prometheus.queries import LabelConfig
from inno_notify.domain.accounting import compute_usage
from inno_notify.domain.model import (
    ContainerRecord,
    JobRecord,
    JobStatus,
    MissingReason,
    PodRecord,
    TerminatedState,
    Usage,
)
from tests.adapters.prometheus import scenario
from tests.adapters.prometheus.conftest import Loaded
from tests.adapters.prometheus.metricgen import PodTrace, PodTruth, window
from tests.adapters.prometheus.promserver import PrometheusServer
from tests.waiting import eventually

# The `exported_tsdb` fixture: the scenario, its truth by pod uid, the TSDB directory.
ExportedTsdb = tuple[scenario.Cluster, dict[str, PodTruth], Path]

pytestmark = pytest.mark.prometheus

MIB = 1024 * 1024


def dt(t: float) -> datetime:
    return datetime.fromtimestamp(t, UTC)


def record(p: PodTrace) -> PodRecord:
    finished = TerminatedState(exit_code=0, finished_at=dt(p.end))
    return PodRecord(
        cluster="c",
        uid=p.uid,
        namespace=p.namespace,
        name=p.name,
        job_uid="job",
        phase="Succeeded",
        created_at=dt(p.start),
        scheduled_at=dt(p.start),
        gpu_equivalents=float(len(p.gpus)),
        containers=tuple(ContainerRecord(name=c.name, terminated=finished) for c in p.containers),
    )


def job_usage(pods: Sequence[PodTrace], measured: dict[str, PodMeasurement], now: datetime) -> Usage:
    job = JobRecord(
        cluster="c", uid="job", namespace=pods[0].namespace, name="job", status=JobStatus.SUCCEEDED
    )
    return compute_usage(
        job,
        [record(p) for p in pods],
        [g for p in pods for g in measured[p.uid].gpus],
        [measured[p.uid].pod for p in pods],
        idle_util_percent=5,
        now=now,
    )


@pytest.fixture
async def meter(cluster_prometheus: Loaded) -> AsyncIterator[UsageMeter]:
    client = PrometheusClient(ClientConfig(url=cluster_prometheus.server.url, timeout_seconds=30))
    yield UsageMeter(client, MeterConfig(scrape_interval_seconds=scenario.SCRAPE))
    client.close()


@pytest.fixture
async def measured(cluster_prometheus: Loaded, meter: UsageMeter) -> dict[str, PodMeasurement]:
    return await meter.measure_pods([window(p) for p in cluster_prometheus.cluster.round])


def _truth_key(gpu_name: str, uuid: str | None) -> str:
    return f"{uuid}/{gpu_name.rsplit('/mig', 1)[1]}" if "/mig" in gpu_name else str(uuid)


def check_against_truth(m: PodMeasurement, truth: PodTruth) -> None:
    assert {_truth_key(g.gpu, g.uuid) for g in m.gpus} == set(truth.gpus)
    for g in m.gpus:
        t = truth.gpus[_truth_key(g.gpu, g.uuid)]
        assert g.samples == len(t.util)
        assert g.util_mean_percent == pytest.approx(t.util_mean, abs=1e-6)
        assert g.util_max_percent == pytest.approx(max(t.util), abs=1e-6)
        assert g.fb_used_peak_bytes == int(max(t.fb_used_mib)) * MIB
        assert g.fb_total_bytes == int(t.fb_total_mib or 0) * MIB
    assert m.pod.samples == truth.samples
    assert m.pod.memory_peak_bytes == truth.memory_peak
    seconds = truth.cpu_total_seconds
    mean = None if seconds is None else seconds / m.window.held_seconds
    assert m.pod.cpu_cores_mean == pytest.approx(mean, rel=1e-6)
    assert m.pod.cpu_cores_p95 == pytest.approx(truth.cpu_p95(), rel=0.02)
    if truth.throttled_seconds:
        assert m.pod.cpu_throttled_seconds == pytest.approx(sum(truth.throttled_seconds.values()), rel=1e-6)
    else:  # cAdvisor reported no throttling counter: not measured, so not 0
        assert m.pod.cpu_throttled_seconds is None


MEASURED_PODS = [
    "train-4gpu-7xk2p",
    "mem-spike-q9z8w",
    "mig-job-p2m4c",
    "slice-a-1b2c3",
    "slice-b-4d5e6",
    "asr-retry-0-aaaaa",
    "asr-retry-1-bbbbb",
]


@pytest.mark.parametrize("name", MEASURED_PODS)
async def test_every_figure_matches_the_generator(
    name: str, cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name(name)
    check_against_truth(measured[pod.uid], cluster_prometheus.truth[pod.uid])


async def test_four_gpus_two_idle(cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]) -> None:
    pod = cluster_prometheus.cluster.by_name("train-4gpu-7xk2p")
    truth = cluster_prometheus.truth[pod.uid]
    usage = job_usage([pod], measured, now=dt(cluster_prometheus.cluster.end))
    minutes = (pod.end - pod.start) / 60
    assert usage.gpu_minutes == pytest.approx(4 * minutes)
    assert usage.gpus_idle == 2
    assert usage.idle_gpu_minutes == pytest.approx(2 * minutes)
    utils = [g.util_mean for g in truth.gpus.values()]
    assert usage.used_gpu_minutes == pytest.approx(minutes * sum(u or 0 for u in utils) / 100, rel=1e-6)
    # Two containers plus the pod cgroup series: the peak is the containers' sum, not double it.
    assert usage.memory_peak_bytes == truth.memory_peak
    # GR_ENGINE_ACTIVE was written next to a GPU_UTIL that reads higher: the former was used.
    assert all(g.util_max_percent is not None and g.util_max_percent <= 90.0 for g in measured[pod.uid].gpus)


async def test_memory_spike_of_20_seconds_is_the_peak(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name("mem-spike-q9z8w")
    # 30 GiB in "main" plus 1 GiB in "side" at the same instant.
    assert (
        measured[pod.uid].pod.memory_peak_bytes
        == cluster_prometheus.truth[pod.uid].memory_peak
        == 31 * 1024**3
    )


async def test_job_shorter_than_a_scrape(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name("too-short-4hj2k")
    m = measured[pod.uid]
    assert m.gpus == () and m.pod.memory_peak_bytes is None and m.pod.samples == 0
    usage = job_usage([pod], measured, now=dt(cluster_prometheus.cluster.end))
    assert usage.gpu_minutes == pytest.approx(7 / 60)
    for figure in ("used_gpu_minutes", "gpu_memory_peak_bytes", "memory_peak_bytes"):
        assert getattr(usage, figure) is None
        assert usage.reason_for(figure) is MissingReason.SHORTER_THAN_SCRAPE


async def test_mig_instance_uses_gr_engine_active(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name("mig-job-p2m4c")
    (gpu,) = measured[pod.uid].gpus
    assert gpu.mig_profile == "3g.40gb"
    assert gpu.gpu.endswith("/mig1")
    assert gpu.util_mean_percent == pytest.approx(30.0)


async def test_time_sliced_gpu_is_marked_shared(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    a = cluster_prometheus.cluster.by_name("slice-a-1b2c3")
    b = cluster_prometheus.cluster.by_name("slice-b-4d5e6")
    assert all(g.shared for p in (a, b) for g in measured[p.uid].gpus)
    usage = job_usage([a], measured, now=dt(cluster_prometheus.cluster.end))
    assert usage.used_gpu_minutes is None
    assert usage.reason_for("used_gpu_minutes") is MissingReason.SHARED_GPU
    # Retries on one GPU one after the other are not sharing.
    retry = cluster_prometheus.cluster.by_name("asr-retry-1-bbbbb")
    assert not any(g.shared for g in measured[retry.uid].gpus)


@pytest.mark.parametrize(
    ("names", "model"),
    [
        (["train-4gpu-7xk2p"], "NVIDIA A100-SXM4-80GB"),
        # A MIG instance is named by its GPU's model; time-sliced pods by the GPU they share.
        (["mig-job-p2m4c"], "NVIDIA A100-SXM4-80GB"),
        (["slice-a-1b2c3"], "NVIDIA A100-SXM4-80GB"),
        (["asr-retry-0-aaaaa", "asr-retry-1-bbbbb"], None),  # the generator's, checked below
    ],
)
async def test_gpu_model_is_read_from_the_series_already_asked_for(
    names: list[str], model: str | None, cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pods = [cluster_prometheus.cluster.by_name(name) for name in names]
    for pod in pods:
        written = {use.gpu.uuid: use.gpu.model for use in pod.gpus}
        gpus = measured[pod.uid].gpus
        assert gpus and all(g.model == written[g.uuid or ""] for g in gpus)
    usage = job_usage(pods, measured, now=dt(cluster_prometheus.cluster.end))
    expected = model or pods[0].gpus[0].gpu.model
    assert usage.gpu_model == expected and usage.reason_for("gpu_model") is None


async def test_no_gpu_series_no_model(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name("too-short-4hj2k")
    usage = job_usage([pod], measured, now=dt(cluster_prometheus.cluster.end))
    assert usage.gpu_model is None
    assert usage.reason_for("gpu_model") is MissingReason.SHORTER_THAN_SCRAPE


async def test_reused_pod_name_is_not_mixed(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    pod = cluster_prometheus.cluster.by_name("notebook-alice")
    m = measured[pod.uid]
    truth = cluster_prometheus.truth[pod.uid]
    # cAdvisor's cgroup path carries the UID: this pod's own series are still measured exactly ...
    assert m.pod.memory_peak_bytes == truth.memory_peak == 3 * 1024**3
    assert truth.cpu_total_seconds is not None
    assert m.pod.cpu_cores_mean == pytest.approx(truth.cpu_total_seconds / m.window.held_seconds, rel=1e-6)
    # ... while figures grouped by name alone (dcgm-exporter has no UID; the CPU p95 subquery) are
    # not stated rather than mixed with the earlier pod's 95 % and 60000 MiB.
    assert m.pod.cpu_cores_p95 is None
    (gpu,) = m.gpus
    assert gpu.util_mean_percent is None and gpu.fb_used_peak_bytes is None
    usage = job_usage([pod], measured, now=dt(cluster_prometheus.cluster.end))
    assert usage.used_gpu_minutes is None and usage.reason_for("used_gpu_minutes") is MissingReason.NO_SAMPLES


async def test_queries_do_not_grow_with_the_round(cluster_prometheus: Loaded) -> None:
    round_pods = cluster_prometheus.cluster.round
    counts = []
    kinds = []
    for pods in (round_pods[:1], round_pods):
        client = PrometheusClient(ClientConfig(url=cluster_prometheus.server.url))
        # The figures' queries alone; the usage series add range queries per step class (test_series).
        meter = UsageMeter(client, MeterConfig(series_points=0))
        await meter.measure_pods([window(p) for p in pods])
        counts.append(client.queries_sent)
        kinds.append(dict(meter.last_queries_by_kind))
        client.close()
    # 2 spelling probes + one query each for GR_ENGINE_ACTIVE, GPU_UTIL, FB, memory, CPU, and the
    # summed memory and CPU step (the first pod has two containers, as do others in the round); then
    # the node agent's probe (agent_series; no agent here, so nothing more of it).
    assert counts == [10, 10]
    expected = {
        "probe": 2,
        "prof": 1,
        "util": 1,
        "fb": 1,
        "mem": 1,
        "cpu": 1,
        "mem_sum": 1,
        "cpu_sum": 1,
        "agent_probe": 1,
    }
    assert kinds == [expected, expected]


async def test_queries_in_short_urls_give_the_same_figures(
    cluster_prometheus: Loaded, measured: dict[str, PodMeasurement]
) -> None:
    # For a proxy that refuses POST: GET, the pod regex cut to fit 1,500-byte URLs.
    client = PrometheusClient(ClientConfig(url=cluster_prometheus.server.url, form_body=False))
    meter = UsageMeter(client, MeterConfig(scrape_interval_seconds=scenario.SCRAPE, max_url_bytes=1500))
    result = await meter.measure_pods([window(p) for p in cluster_prometheus.cluster.round])
    client.close()
    assert meter.last_queries_by_kind["util"] > 1  # the URLs did force several chunks
    assert result == measured
    for name in MEASURED_PODS:
        pod = cluster_prometheus.cluster.by_name(name)
        check_against_truth(result[pod.uid], cluster_prometheus.truth[pod.uid])


async def test_exported_label_spelling(exported_tsdb: ExportedTsdb) -> None:
    cluster, truth, tsdb = exported_tsdb
    with PrometheusServer(tsdb) as server:
        client = PrometheusClient(ClientConfig(url=server.url))
        result = await UsageMeter(client).measure_pods([window(p) for p in cluster.round])
        client.close()
    for pod in cluster.round:
        check_against_truth(result[pod.uid], truth[pod.uid])
        assert len(result[pod.uid].gpus) == 1


async def test_prometheus_stopped_in_the_middle_of_a_round(exported_tsdb: ExportedTsdb) -> None:
    cluster, truth, tsdb = exported_tsdb
    targets = [window(p) for p in cluster.round]
    labels = LabelConfig(pod=("exported_pod",), namespace=("exported_namespace",))
    # One worker and one bucket per pod: the round is a queue of queries the stop lands in.
    config = MeterConfig(scrape_interval_seconds=scenario.SCRAPE, bucket_gap_seconds=1, labels=labels)
    server = PrometheusServer(tsdb)
    server.start()
    try:
        client = PrometheusClient(ClientConfig(url=server.url, max_workers=1, timeout_seconds=5))
        task = asyncio.create_task(UsageMeter(client, config).measure_pods(targets))
        # The worker thread answers while the loop waits; stop Prometheus after the first answers.
        await eventually(lambda: client.answers_received >= 2, poll=0.001, what="two answers received")
        assert not task.done()
        server.stop()
        with pytest.raises(PrometheusUnavailable):
            await task
        # Nothing came back half-measured; once Prometheus is back, the same round succeeds.
        server.start()
        result = await UsageMeter(client, config).measure_pods(targets)
        for pod in cluster.round:
            check_against_truth(result[pod.uid], truth[pod.uid])
        client.close()
    finally:
        server.stop()
