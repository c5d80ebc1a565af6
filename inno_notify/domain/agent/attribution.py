"""One NVML sample joined with the processes' cgroups and the node's pods: a series per container and GPU.

This is what the agent exposes as ``inno_notify_gpu_process_memory_bytes`` and
``inno_notify_gpu_process_sm_util_percent``. Several processes of one container on one GPU or MIG
instance (a data loader with its own CUDA context) add up into one series; a
figure that any of them could not report makes the sum unknown, so it is None (the series is left
out of the sample and a gap counted), never a partial sum. Processes that belong to no pod, to a pod
the node's list does not know (yet), or that exited between NVML's answer and the /proc read are
kept apart, per GPU and reason, so that no GPU memory goes unaccounted for silently.
"""

from __future__ import annotations

import enum
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from inno_notify.domain.agent.cgroup import CgroupRef
from inno_notify.domain.agent.pods import PodIdentity
from inno_notify.domain.agent.readings import DeviceReading, Gap, GapReason, NodeReading, ProcessReading


class UnattributedReason(enum.StrEnum):
    NOT_IN_POD = "not_in_pod"  # a host process (or one outside the kubelet's cgroups)
    POD_UNKNOWN = "pod_unknown"  # a pod UID the node's pod list does not have (yet)
    PROCESS_GONE = "process_gone"  # exited before its cgroup could be read
    POD_LOOKUP_FAILED = "pod_lookup_failed"  # the pod list could not be read this time


@dataclass(frozen=True, slots=True, order=True)
class SeriesKey:
    """The labels of one process series; ``mig_profile`` and ``gpu_instance`` (the MIG GPU instance
    ID, as dcgm-exporter's ``GPU_I_ID``) are "" on a whole GPU, ``container`` "" when the pod's status
    does not list the process's container ID (yet)."""

    namespace: str
    pod: str
    container: str
    gpu_uuid: str
    mig_profile: str
    gpu_instance: str = ""


@dataclass(frozen=True, slots=True)
class ProcessSeries:
    key: SeriesKey
    memory_bytes: int | None
    sm_util_percent: float | None
    processes: int


@dataclass(frozen=True, slots=True)
class Unattributed:
    gpu_uuid: str
    mig_profile: str
    reason: UnattributedReason
    memory_bytes: int | None
    processes: int


@dataclass(frozen=True, slots=True)
class Attribution:
    series: tuple[ProcessSeries, ...] = ()
    unattributed: tuple[Unattributed, ...] = ()
    gaps: tuple[Gap, ...] = ()


class _Sum:
    """A running sum that turns unknown for good once one part is unknown."""

    __slots__ = ("known", "memory", "processes", "sm", "sm_known")

    def __init__(self) -> None:
        self.memory = 0
        self.known = True
        self.sm = 0.0
        self.sm_known = True
        self.processes = 0

    def add(self, process: ProcessReading) -> None:
        self.processes += 1
        if process.memory_bytes is None:
            self.known = False
        else:
            self.memory += process.memory_bytes
        if process.sm_util_percent is None:
            self.sm_known = False
        else:
            self.sm += process.sm_util_percent


def attribute(
    reading: NodeReading,
    cgroups: Mapping[int, CgroupRef | None],
    pods: Mapping[str, PodIdentity] | None,
) -> Attribution:
    """Series per (namespace, pod, container, GPU, MIG profile) from one sample.

    ``cgroups`` maps each PID that could be read to its pod (None: not in a pod); a PID missing from
    it had exited. ``pods`` is the node's pods by UID, or None when the list could not be read.
    """
    sums: dict[SeriesKey, _Sum] = defaultdict(_Sum)
    lost: dict[tuple[str, str, UnattributedReason], _Sum] = defaultdict(_Sum)
    for device in reading.devices:
        profile = device.mig_profile or ""
        for process in device.processes or ():
            key_or_reason = _place(device, process.pid, cgroups, pods)
            if isinstance(key_or_reason, SeriesKey):
                sums[key_or_reason].add(process)
            else:
                lost[(device.gpu_uuid, profile, key_or_reason)].add(process)

    gaps = list(reading.gaps)
    unreported = sorted({key.gpu_uuid for key, total in sums.items() if not total.known})
    gaps.extend(Gap("process_memory", GapReason.MEMORY_NOT_REPORTED, uuid) for uuid in unreported)
    series = tuple(
        ProcessSeries(
            key=key,
            memory_bytes=total.memory if total.known else None,
            sm_util_percent=total.sm if total.sm_known else None,
            processes=total.processes,
        )
        for key, total in sorted(sums.items())
    )
    unattributed = tuple(
        Unattributed(
            gpu_uuid=uuid,
            mig_profile=profile,
            reason=reason,
            memory_bytes=total.memory if total.known else None,
            processes=total.processes,
        )
        for (uuid, profile, reason), total in sorted(lost.items())
    )
    return Attribution(series=series, unattributed=unattributed, gaps=tuple(gaps))


def _place(
    device: DeviceReading,
    pid: int,
    cgroups: Mapping[int, CgroupRef | None],
    pods: Mapping[str, PodIdentity] | None,
) -> SeriesKey | UnattributedReason:
    if pid not in cgroups:
        return UnattributedReason.PROCESS_GONE
    ref = cgroups[pid]
    if ref is None:
        return UnattributedReason.NOT_IN_POD
    if pods is None:
        return UnattributedReason.POD_LOOKUP_FAILED
    pod = pods.get(ref.pod_uid)
    if pod is None:
        return UnattributedReason.POD_UNKNOWN
    container = pod.containers.get(ref.container_id, "") if ref.container_id else ""
    return SeriesKey(
        namespace=pod.namespace,
        pod=pod.name,
        container=container,
        gpu_uuid=device.gpu_uuid,
        mig_profile=device.mig_profile or "",
        gpu_instance="" if device.gpu_instance_id is None else str(device.gpu_instance_id),
    )
