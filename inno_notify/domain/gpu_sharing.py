"""Whether a pod asked for a time-sliced GPU, read from the resource name the device plugin offers.

NVIDIA's device plugin advertises time-sliced (and MPS-shared) GPUs as ``<resource>.shared`` when
``renameByDefault`` is on: ``nvidia.com/gpu.shared``, ``nvidia.com/mig-1g.10gb.shared``. A pod that
requests one shares its GPU by construction, whether or not the other tenants happened to be
measured in the same usage round, so its GPU figures from dcgm-exporter are the whole GPU's.
"""

from __future__ import annotations

from inno_notify.domain.model import PodRecord

SHARED_SUFFIX = ".shared"
NVIDIA_PREFIX = "nvidia.com/"


def is_shared_gpu_resource(name: str) -> bool:
    return name.startswith(NVIDIA_PREFIX) and name.endswith(SHARED_SUFFIX)


def requests_shared_gpu(pod: PodRecord) -> bool:
    """Whether any container of the pod asks for a shared GPU resource (limits or requests)."""
    return any(
        amount and is_shared_gpu_resource(name)
        for container in pod.containers
        for amounts in (container.limits, container.requests)
        for name, amount in amounts.items()
    )
