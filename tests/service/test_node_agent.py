"""The agent's loop end to end on a fake pynvml and a fake /proc: what /metrics shows, sample by sample.

Correct series where NVML answers; where it does not (usedGpuMemory not available, NotSupported, a
lost GPU, a driver reload) the series is absent, the gap is counted with its reason, and the loop
goes on.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

from inno_notify.adapters.nvml import NvmlSampler, read_cgroups
from inno_notify.domain.agent import NodeReading, PodIdentity, parse_pod_identity
from inno_notify.service.agent_metrics import AgentMetrics
from inno_notify.service.agent_pods import PodLookup
from inno_notify.service.node_agent import NodeAgent
from tests.adapters.nvml.fake_nvml import NVML_ERROR_NOT_SUPPORTED, FakeNvml, FakeProcess
from tests.service.agent_support import (
    A100,
    GIB,
    GPU0,
    NODE,
    POD_A,
    POD_B,
    POD_M,
    T0_US,
    CountingMetrics,
    labels,
    node_gpus,
    node_proc,
    process_labels,
    scrape,
    series,
)


class StaticPods:
    def __init__(self, *objects: dict[str, Any]) -> None:
        self.pods: dict[str, PodIdentity] = {}
        for obj in objects:
            identity = parse_pod_identity(obj)
            assert identity is not None
            self.pods[identity.uid] = identity
        self.error: str | None = None

    @property
    def size(self) -> int:
        return len(self.pods)

    async def resolve(self, uids: Collection[str]) -> PodLookup:
        if self.error is not None:
            return PodLookup(None, self.error)
        return PodLookup({u: self.pods[u] for u in uids if u in self.pods})


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def make_agent(
    tmp_path: Path, nvml: FakeNvml, pods: StaticPods | None
) -> tuple[NodeAgent, AgentMetrics, Clock]:
    node_proc(tmp_path / "proc")
    metrics = AgentMetrics(NODE)
    clock = Clock()
    sampler = NvmlSampler(nvml, clock_us=lambda: T0_US)
    agent = NodeAgent(
        sampler,
        lambda pids: read_cgroups(tmp_path / "proc", pids),
        pods,
        metrics,
        interval_seconds=15,
        wall_clock=lambda: 1_767_000_000.0,
        monotonic=clock,
    )
    return agent, metrics, clock


async def test_processes_of_several_pods_and_mig_instances(tmp_path: Path) -> None:
    agent, metrics, _ = make_agent(tmp_path, FakeNvml(node_gpus()), StaticPods(POD_A, POD_B, POD_M))
    await agent.sample_once()
    scraped = scrape(metrics.render())
    assert series(scraped, "inno_notify_gpu_process_memory_bytes") == {
        process_labels("face", "train-a", "trainer"): 5 * GIB,  # two processes of one container
        process_labels("speech", "eval-b", "main"): 8 * GIB,
        process_labels("vision", "mig-job", "worker", A100, "3g.40gb", "1"): 9 * GIB,
    }
    # Per-process utilization: measured on the whole GPU, not supported on the MIG instance.
    assert series(scraped, "inno_notify_gpu_process_sm_util_percent") == {
        process_labels("face", "train-a", "trainer"): 30.0,
        process_labels("speech", "eval-b", "main"): 55.0,
    }
    device = series(scraped, "inno_notify_gpu_memory_used_bytes")
    assert device == {
        labels(gpu_uuid=GPU0, gpu_index="0", mig_profile="", gpu_instance=""): 14 * GIB,
        labels(gpu_uuid=A100, gpu_index="1", mig_profile="3g.40gb", gpu_instance="1"): 9 * GIB,
        labels(gpu_uuid=A100, gpu_index="1", mig_profile="1g.10gb", gpu_instance="9"): 0,
    }
    assert series(scraped, "inno_notify_gpu_utilization_percent") == {
        labels(gpu_uuid=GPU0, gpu_index="0", mig_profile="", gpu_instance=""): 90.0
    }
    assert series(scraped, "inno_notify_gpu_unattributed_memory_bytes") == {
        labels(gpu_uuid=GPU0, mig_profile="", reason="not_in_pod"): 1 * GIB
    }
    assert series(scraped, "inno_notify_gpu_info") == {
        labels(gpu_uuid=GPU0, gpu_index="0", model="NVIDIA A100-SXM4-80GB", node=NODE): 1,
        labels(gpu_uuid=A100, gpu_index="1", model="NVIDIA A100-SXM4-80GB", node=NODE): 1,
    }
    # MIG instances report no utilization: gaps by reason, not errors.
    assert series(scraped, "inno_notify_agent_gaps") == {
        labels(figure="utilization", reason="not_supported", gpu_uuid=A100): 2,
        labels(figure="process_utilization", reason="not_supported", gpu_uuid=A100): 2,
    }
    assert series(scraped, "inno_notify_agent_errors_total") == {}
    assert scraped[("inno_notify_agent_nvml_up", frozenset())] == 1
    assert scraped[("inno_notify_agent_pods_known", frozenset())] == 3


async def test_used_memory_not_reported_leaves_the_series_out(tmp_path: Path) -> None:
    gpus = node_gpus()
    gpus[0].processes[1] = FakeProcess(102, None)  # second process of train-a
    agent, metrics, _ = make_agent(tmp_path, FakeNvml(gpus), StaticPods(POD_A, POD_B, POD_M))
    await agent.sample_once()
    scraped = scrape(metrics.render())
    memory = series(scraped, "inno_notify_gpu_process_memory_bytes")
    assert process_labels("face", "train-a", "trainer") not in memory  # 4 GiB + unknown is unknown
    assert memory[process_labels("speech", "eval-b", "main")] == 8 * GIB
    assert series(scraped, "inno_notify_gpu_process_sm_util_percent")[
        process_labels("face", "train-a", "trainer")
    ] == pytest.approx(30.0)
    gaps = series(scraped, "inno_notify_agent_gaps")
    assert gaps[labels(figure="process_memory", reason="memory_not_reported", gpu_uuid=GPU0)] == 1


async def test_not_supported_per_process_utilization(tmp_path: Path) -> None:
    nvml = FakeNvml(node_gpus())
    nvml.fail(GPU0, "nvmlDeviceGetProcessUtilization", NVML_ERROR_NOT_SUPPORTED)
    agent, metrics, _ = make_agent(tmp_path, nvml, StaticPods(POD_A, POD_B, POD_M))
    await agent.sample_once()
    scraped = scrape(metrics.render())
    assert series(scraped, "inno_notify_gpu_process_sm_util_percent") == {}
    assert len(series(scraped, "inno_notify_gpu_process_memory_bytes")) == 3
    assert series(scraped, "inno_notify_agent_errors_total") == {}  # a capability, not an error


async def test_lost_gpu_then_driver_reload(tmp_path: Path) -> None:
    nvml = FakeNvml(node_gpus())
    agent, metrics, _ = make_agent(tmp_path, nvml, StaticPods(POD_A, POD_B, POD_M))
    await agent.sample_once()

    nvml.lose(GPU0)
    await agent.sample_once()
    scraped = scrape(metrics.render())
    memory = series(scraped, "inno_notify_gpu_process_memory_bytes")
    assert list(memory) == [process_labels("vision", "mig-job", "worker", A100, "3g.40gb", "1")]
    assert all(dict(key)["gpu_uuid"] == A100 for key in series(scraped, "inno_notify_gpu_memory_used_bytes"))
    gaps = series(scraped, "inno_notify_agent_gaps")
    assert gaps[labels(figure="device", reason="gpu_lost", gpu_uuid="index 0")] == 1
    assert series(scraped, "inno_notify_agent_errors_total") == {labels(reason="gpu_lost"): 1}

    nvml.gpus[0].lost = False  # reset by the operator: NVML, started again, sees it again
    await agent.sample_once()
    assert len(series(scrape(metrics.render()), "inno_notify_gpu_process_memory_bytes")) == 3

    # The driver is reloaded: NVML loses its state, the module is away for one sample, then back.
    nvml.unload_driver()
    await agent.sample_once()
    await agent.sample_once()
    scraped = scrape(metrics.render())
    assert scraped[("inno_notify_agent_nvml_up", frozenset())] == 0
    assert series(scraped, "inno_notify_gpu_process_memory_bytes") == {}
    assert series(scraped, "inno_notify_agent_gaps") == {
        labels(figure="nvml", reason="driver_not_loaded", gpu_uuid=""): 1
    }

    nvml.load_driver()
    await agent.sample_once()
    scraped = scrape(metrics.render())
    assert scraped[("inno_notify_agent_nvml_up", frozenset())] == 1
    assert len(series(scraped, "inno_notify_gpu_process_memory_bytes")) == 3
    assert scraped[("inno_notify_agent_nvml_inits_total", frozenset())] == 3  # start, after GPU lost, reload
    assert scraped[("inno_notify_agent_samples_total", frozenset())] == 6
    assert series(scraped, "inno_notify_agent_errors_total") == {
        labels(reason="gpu_lost"): 1,
        labels(reason="uninitialized"): 1,
        labels(reason="driver_not_loaded"): 1,
    }


async def test_pod_lookup_failure_is_a_gap_and_the_processes_are_kept(tmp_path: Path) -> None:
    pods = StaticPods(POD_A, POD_B, POD_M)
    pods.error = "connection refused"
    agent, metrics, _ = make_agent(tmp_path, FakeNvml(node_gpus()), pods)
    await agent.sample_once()
    scraped = scrape(metrics.render())
    assert series(scraped, "inno_notify_gpu_process_memory_bytes") == {}
    assert series(scraped, "inno_notify_gpu_unattributed_memory_bytes") == {
        labels(gpu_uuid=GPU0, mig_profile="", reason="not_in_pod"): 1 * GIB,
        labels(gpu_uuid=GPU0, mig_profile="", reason="pod_lookup_failed"): 13 * GIB,
        labels(gpu_uuid=A100, mig_profile="3g.40gb", reason="pod_lookup_failed"): 9 * GIB,
    }
    assert series(scraped, "inno_notify_agent_errors_total") == {labels(reason="pod_lookup_failed"): 1}


async def test_without_pod_names_everything_is_unattributed(tmp_path: Path) -> None:
    agent, metrics, _ = make_agent(tmp_path, FakeNvml(node_gpus()), None)
    await agent.sample_once()
    scraped = scrape(metrics.render())
    assert series(scraped, "inno_notify_gpu_process_memory_bytes") == {}
    reasons = {dict(k)["reason"] for k in series(scraped, "inno_notify_gpu_unattributed_processes")}
    assert reasons == {"not_in_pod", "pod_unknown"}


async def test_health_turns_false_when_samples_stop(tmp_path: Path) -> None:
    agent, _, clock = make_agent(tmp_path, FakeNvml(node_gpus()), StaticPods())
    assert agent.healthy()[0]  # starting up
    await agent.sample_once()
    clock.now += agent.stale_after_seconds - 1
    assert agent.healthy() == (True, "ok")
    clock.now += 2
    ok, detail = agent.healthy()
    assert not ok and "no sample completed" in detail


async def test_run_samples_until_stopped_even_when_a_sample_fails(tmp_path: Path) -> None:
    class Flaky(FakeNvml):
        def nvmlDeviceGetCount(self) -> int:
            if self.calls.count("nvmlDeviceGetCount") == 1:
                self.calls.append("nvmlDeviceGetCount")
                raise KeyError("a bug in a binding")  # not an NVMLError: a gap all the same
            return super().nvmlDeviceGetCount()

    nvml = Flaky(node_gpus())
    node_proc(tmp_path / "proc")
    metrics = CountingMetrics(NODE, wanted=3)
    agent = NodeAgent(
        NvmlSampler(nvml),
        lambda pids: read_cgroups(tmp_path / "proc", pids),
        StaticPods(POD_A, POD_B, POD_M),
        metrics,
        interval_seconds=0.01,
    )
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    await asyncio.wait_for(metrics.reached.wait(), 10)
    stop.set()
    await asyncio.wait_for(task, 5)
    scraped = scrape(metrics.render())
    assert scraped[("inno_notify_agent_nvml_up", frozenset())] == 1
    assert series(scraped, "inno_notify_agent_errors_total")[labels(reason="unexpected")] == 1


async def test_stop_does_not_wait_for_a_hung_nvml_call() -> None:
    entered, release = threading.Event(), threading.Event()

    class Hanging:
        inits = 1

        def sample(self) -> NodeReading:
            entered.set()
            release.wait(30)  # a call into a GPU that fell off the bus
            return NodeReading()

        def close(self) -> None:
            pass

    agent = NodeAgent(Hanging(), lambda pids: {}, None, AgentMetrics(NODE), interval_seconds=0.01)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    assert await asyncio.to_thread(entered.wait, 5)
    stop.set()
    await asyncio.wait_for(task, 5)  # returns although the sample never did
    assert agent.samples == 0
    release.set()
