"""Time-slicing told by the device plugin's resource name."""

from __future__ import annotations

import pytest

from inno_notify.domain.gpu_sharing import requests_shared_gpu
from inno_notify.domain.model import ContainerRecord, PodRecord

SHARED = "nvidia.com/gpu.shared"


def pod(*containers: ContainerRecord) -> PodRecord:
    return PodRecord("c", "u", "ns", "p", None, "Running", None, containers=containers)


@pytest.mark.parametrize(
    ("containers", "shared"),
    [
        ([ContainerRecord("main", limits={"nvidia.com/gpu.shared": 1})], True),
        ([ContainerRecord("main", limits={"nvidia.com/mig-1g.10gb.shared": 1})], True),
        ([ContainerRecord("main", requests={"nvidia.com/gpu.shared": 1})], True),
        (
            [
                ContainerRecord("a", limits={"cpu": 1}),
                ContainerRecord("b", limits={"nvidia.com/gpu.shared": 2}),
            ],
            True,
        ),
        ([ContainerRecord("main", limits={"nvidia.com/gpu": 1})], False),
        ([ContainerRecord("main", limits={"nvidia.com/gpu.shared": 0})], False),
        ([ContainerRecord("main", limits={"example.com/thing.shared": 1})], False),
        ([], False),
    ],
    ids=["shared", "mig-shared", "request-only", "second-container", "whole", "zero", "other-vendor", "none"],
)
def test_requests_shared_gpu(containers: list[ContainerRecord], shared: bool) -> None:
    assert requests_shared_gpu(pod(*containers)) is shared
