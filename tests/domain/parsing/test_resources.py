"""The pod's effective request and GPU-equivalents, as the scheduler and CONTRACT.md §4 count them."""

from __future__ import annotations

from typing import Any

import pytest

from inno_notify.domain.parsing.config import ParseConfig
from inno_notify.domain.parsing.resources import pod_effective, requested_for_pod


def ctr(
    name: str, requests: dict[str, str], limits: dict[str, str] | None = None, **extra: Any
) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": requests}
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "busybox", "resources": resources, **extra}


SIDECAR = ctr("proxy", {"cpu": "500m", "memory": "256Mi"}, restartPolicy="Always")
INIT = ctr("fetch", {"cpu": "3", "memory": "1Gi"})
APP = ctr("app", {"cpu": "1", "memory": "2Gi"})
APP2 = ctr("exporter", {"cpu": "250m", "memory": "128Mi"})

# pod spec -> effective (cpu cores, memory bytes) requests, worked out by hand
EFFECTIVE = [
    pytest.param({"containers": [APP, APP2]}, (1.25, 2 * 2**30 + 128 * 2**20), id="sum of app containers"),
    pytest.param(
        {"containers": [APP], "initContainers": [INIT]},
        (3.0, 2 * 2**30),
        id="init bigger in cpu, app in memory",
    ),
    pytest.param(
        {"containers": [APP], "initContainers": [SIDECAR, INIT]},
        (3.5, 2 * 2**30 + 256 * 2**20),
        id="sidecar before init runs beside it and beside the app",
    ),
    pytest.param(
        {"containers": [APP], "initContainers": [INIT, SIDECAR]},
        (3.0, 2 * 2**30 + 256 * 2**20),
        id="sidecar after init only adds to the app",
    ),
    pytest.param(
        {"containers": [ctr("only-limits", {}, {"cpu": "2", "memory": "4Gi"})]},
        (2.0, 4 * 2**30),
        id="request defaults to limit",
    ),
    pytest.param(
        {"containers": [APP, APP2], "resources": {"requests": {"cpu": "4"}}},
        (4.0, 2 * 2**30 + 128 * 2**20),
        id="pod-level resources replace the container sum",
    ),
]


@pytest.mark.parametrize(("spec", "expected"), EFFECTIVE)
def test_effective_requests(spec: dict[str, Any], expected: tuple[float, int]) -> None:
    requests, _ = pod_effective(spec)
    assert requests["cpu"] == pytest.approx(expected[0])
    assert requests["memory"] == expected[1]


GPUS = ParseConfig(
    gpu_resources={"nvidia.com/gpu": 1.0, "nvidia.com/mig-1g.10gb": 1 / 7, "nvidia.com/gpu.shared": 0.25}
)

# limits of one container -> GPU-equivalents of the pod
GPU_EQUIVALENTS = [
    ({"nvidia.com/gpu": "4"}, 4.0),
    ({"nvidia.com/mig-1g.10gb": "1"}, 1 / 7),
    ({"nvidia.com/mig-1g.10gb": "2", "nvidia.com/gpu": "1"}, 1 + 2 / 7),
    ({"nvidia.com/gpu.shared": "1"}, 0.25),
    ({"amd.com/gpu": "1"}, 0.0),  # not configured: not counted
    ({"cpu": "8"}, 0.0),
]


@pytest.mark.parametrize(("limits", "gpus"), GPU_EQUIVALENTS)
def test_gpu_equivalents_from_limits(limits: dict[str, str], gpus: float) -> None:
    requested = requested_for_pod({"containers": [ctr("main", limits, limits)]}, GPUS)
    assert requested.gpus == pytest.approx(gpus)


def test_unset_figures_are_none_not_zero() -> None:
    requested = requested_for_pod(
        {"containers": [{"name": "main", "image": "busybox", "resources": {}}]}, GPUS
    )
    assert (requested.cpu_cores, requested.memory_bytes, requested.cpu_limit_cores) == (None, None, None)
    assert requested.gpus == 0.0
    assert requested.extended == {}


def test_extended_resources_exclude_native_ones() -> None:
    spec = {
        "containers": [
            ctr(
                "main",
                {"cpu": "1", "ephemeral-storage": "3Gi", "hugepages-2Mi": "1Gi", "example.com/fpga": "1"},
                {"example.com/fpga": "1", "nvidia.com/gpu": "2"},
            )
        ]
    }
    assert requested_for_pod(spec, GPUS).extended == {"example.com/fpga": 1.0, "nvidia.com/gpu": 2.0}
