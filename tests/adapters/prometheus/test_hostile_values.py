"""An exporter's nonsense in one pod's series stays that pod's: values past what a float of bytes
holds are not measurements, and the round's other pods are measured as usual.

A label is text whatever it holds: a GPU model with NUL, control characters and 10 KB comes back
as one capped line.

A glitching dcgm-exporter reporting 10^305 MiB of framebuffer used turned into an OverflowError
(float infinity to integer) while the round was assembled, and the whole round failed with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from inno_notify.adapters.prometheus.client import ClientConfig, PrometheusClient
from inno_notify.adapters.prometheus.measure import MeterConfig, UsageMeter
from inno_notify.domain.parsing.storable import NAME_MAX_BYTES, TRUNCATION_MARK
from tests.adapters.prometheus import metricgen, scenario
from tests.adapters.prometheus.metricgen import Container, Gpu, GpuUse, PodTrace, PodTruth, window
from tests.adapters.prometheus.promserver import HAVE_PROMETHEUS, PrometheusServer, backfill
from tests.adapters.prometheus.test_measure import check_against_truth

pytestmark = pytest.mark.prometheus

HOUR = 3600.0
HUGE_MIB = 10**305  # times 2**20 bytes: past the largest float
# NUL, control characters and 10 KB in dcgm-exporter's modelName (promtool takes them as written).
HOSTILE_MODEL = "NVIDIA\x00 A100\x01\x1b[31m\t" + "X" * 10_000


def _pods() -> tuple[list[Gpu], list[PodTrace]]:
    gpus = [
        Gpu("gpu-node-1", 0, "GPU-0100-a100"),
        Gpu("gpu-node-1", 1, "GPU-0101-a100", fb_total_mib=2 * HUGE_MIB),  # the glitching one
        Gpu("gpu-node-1", 2, "GPU-0102-a100"),
        Gpu("gpu-node-1", 3, "GPU-0103-a100", model=HOSTILE_MODEL),  # a relabelling gone wrong
    ]
    pods = [
        PodTrace(
            "research",
            f"train-{k}-ab{k:03d}",
            scenario.uid(500 + k),
            scenario.START + 600,
            scenario.START + 2 * HOUR,
            gpus=[GpuUse(gpus[k], scenario.const(40.0 + k), scenario.const(HUGE_MIB if k == 1 else 2000.0))],
            containers=[Container("main", scenario.const((k + 1) * scenario.GIB), scenario.const(1.0))],
        )
        for k in range(4)
    ]
    return gpus, pods


@pytest.fixture(scope="module")
def hostile(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[PrometheusServer, list[PodTrace], dict[str, PodTruth]]]:
    if not HAVE_PROMETHEUS:
        pytest.skip("prometheus/promtool not installed")
    tmp: Path = tmp_path_factory.mktemp("prom-hostile")
    gpus, pods = _pods()
    truth, _ = metricgen.generate(
        tmp / "data.om",
        gpus,
        pods,
        start=scenario.START,
        end=scenario.START + 3 * HOUR,
        scrape=scenario.SCRAPE,
    )
    backfill(tmp / "data.om", tmp / "tsdb")
    with PrometheusServer(tmp / "tsdb") as server:
        yield server, pods, truth


async def test_a_pods_nonsense_values_are_not_measured_and_the_others_are(
    hostile: tuple[PrometheusServer, list[PodTrace], dict[str, PodTruth]],
) -> None:
    server, pods, truth = hostile
    client = PrometheusClient(ClientConfig(url=server.url, timeout_seconds=30))
    try:
        meter = UsageMeter(client, MeterConfig(scrape_interval_seconds=scenario.SCRAPE))
        windows = [window(p) for p in pods]
        measured = await meter.measure_pods(windows)
    finally:
        client.close()
    assert set(measured) == {p.uid for p in pods}
    for pod in (pods[0], pods[2]):
        check_against_truth(measured[pod.uid], truth[pod.uid])
    (gpu,) = measured[pods[1].uid].gpus
    assert (gpu.fb_used_peak_bytes, gpu.fb_total_bytes) == (None, None)
    assert gpu.util_mean_percent == pytest.approx(41.0, abs=1e-6)  # what is a measurement still is
    assert measured[pods[1].uid].pod.memory_peak_bytes == 2 * scenario.GIB
    # Its usage series: the memory points past a float are left out, the utilization stays.
    points = measured[pods[1].uid].points
    assert points is not None
    assert points.gpu_memory == {}
    (util,) = points.gpu_util.values()
    assert util and set(util.values()) == {41.0}
    other = measured[pods[0].uid].points
    assert other is not None and set(next(iter(other.gpu_memory.values())).values()) == {2000.0 * 2**20}


async def test_a_hostile_gpu_model_is_one_capped_line(
    hostile: tuple[PrometheusServer, list[PodTrace], dict[str, PodTruth]],
) -> None:
    server, pods, truth = hostile
    client = PrometheusClient(ClientConfig(url=server.url, timeout_seconds=30))
    try:
        meter = UsageMeter(client, MeterConfig(scrape_interval_seconds=scenario.SCRAPE))
        pod = pods[3]
        measured = await meter.measure_pods([window(pod)])
    finally:
        client.close()
    (gpu,) = measured[pod.uid].gpus
    assert gpu.model is not None and gpu.model.startswith("NVIDIA A100 [31m XXX")
    assert gpu.model.endswith(TRUNCATION_MARK) and len(gpu.model.encode()) == NAME_MAX_BYTES
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in gpu.model)
    check_against_truth(measured[pod.uid], truth[pod.uid])  # its figures are measured as usual
