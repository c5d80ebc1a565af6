"""Helpers for the node agent's tests: read the exposition back, build a node of fake GPUs and processes."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from inno_notify.service.agent_metrics import AgentMetrics, Snapshot
from tests.adapters.nvml.fake_nvml import FakeGpu, FakeMig, FakeProcess
from tests.adapters.nvml.fake_proc import FakeProc, cgroupfs_v1_lines, systemd_line

GIB = 1024**3
T0_US = 1_767_000_000_000_000
NODE = "gpu-node-1"
GPU0 = "GPU-00000000-1111-2222-3333-444444444444"
A100 = "GPU-aaaaaaaa-1111-2222-3333-444444444444"
UID_A = "7c4b3bde-1f0e-4a8e-9d4e-2c8a1e6f9b10"
UID_B = "0a1b2c3d-4e5f-4a8e-9d4e-2c8a1e6f9b10"
UID_M = "5e5e5e5e-4e5f-4a8e-9d4e-2c8a1e6f9b10"
CID_A, CID_B, CID_M = "a" * 64, "b" * 64, "e" * 64

Labels = frozenset[tuple[str, str]]


def scrape(text: str | bytes) -> dict[tuple[str, Labels], float]:
    """The exposition as {(sample name, labels): value}."""
    if isinstance(text, bytes):
        text = text.decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def series(scraped: Mapping[tuple[str, Labels], float], name: str) -> dict[Labels, float]:
    return {labels: value for (sample, labels), value in scraped.items() if sample == name}


def labels(**values: str) -> Labels:
    return frozenset(values.items())


def process_labels(
    namespace: str, pod: str, container: str, gpu: str = GPU0, mig: str = "", instance: str = ""
) -> Labels:
    return labels(
        namespace=namespace,
        pod=pod,
        container=container,
        gpu_uuid=gpu,
        mig_profile=mig,
        gpu_instance=instance,
    )


def pod_object(
    uid: str, namespace: str, name: str, containers: Mapping[str, str], node: str = NODE
) -> dict[str, Any]:
    return {
        "metadata": {"uid": uid, "namespace": namespace, "name": name},
        "spec": {"nodeName": node, "containers": [{"name": c} for c in containers.values()]},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": name, "containerID": f"containerd://{cid}"} for cid, name in containers.items()
            ],
        },
    }


POD_A = pod_object(UID_A, "face", "train-a", {CID_A: "trainer"})
POD_B = pod_object(UID_B, "speech", "eval-b", {CID_B: "main"})
POD_M = pod_object(UID_M, "vision", "mig-job", {CID_M: "worker"})


def node_gpus() -> list[FakeGpu]:
    """A time-sliced GPU with two pods' processes and a host process; an A100 with two MIG instances."""
    return [
        FakeGpu(
            GPU0,
            util=90,
            used_bytes=14 * GIB,
            processes=[
                FakeProcess(101, 4 * GIB),
                FakeProcess(102, 1 * GIB),
                FakeProcess(201, 8 * GIB),
                FakeProcess(300, 1 * GIB),
            ],
            samples=[(101, T0_US - 5_000_000, 30), (201, T0_US - 5_000_000, 55)],
        ),
        FakeGpu(
            A100,
            mig=[
                FakeMig(1, 3, memory_mb=40192, used_bytes=9 * GIB, processes=[FakeProcess(401, 9 * GIB)]),
                FakeMig(9, 1, memory_mb=9728, used_bytes=0),
            ],
        ),
    ]


def node_proc(root: Path) -> FakeProc:
    proc = FakeProc(root)
    proc.add(101, systemd_line(UID_A, CID_A))
    proc.add(102, systemd_line(UID_A, CID_A))
    proc.add(201, cgroupfs_v1_lines(UID_B, CID_B))
    proc.host_process(300)
    proc.add(401, systemd_line(UID_M, CID_M, qos="besteffort"))
    return proc


class CountingMetrics(AgentMetrics):
    """Metrics that say when they have published ``wanted`` samples (and, if given, a sample that
    satisfies ``until``), so that tests wait on an event instead of sleeping."""

    def __init__(self, node: str, wanted: int = 1, until: Callable[[Snapshot], bool] | None = None) -> None:
        super().__init__(node)
        self.wanted = wanted
        self.until = until
        self.reached = asyncio.Event()

    def publish(self, snapshot: Snapshot, *, inits: int) -> None:
        super().publish(snapshot, inits=inits)
        if self.samples >= self.wanted and (self.until is None or self.until(snapshot)):
            self.reached.set()

    async def wait(self) -> None:
        await asyncio.wait_for(self.reached.wait(), 20)
        self.reached.clear()
