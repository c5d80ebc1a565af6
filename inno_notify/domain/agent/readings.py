"""What one NVML sample of a node says, and what it could not say (gaps, each with a reason).

The NVML adapter fills these from the driver; a figure the driver refused is ``None`` and the
refusal is a ``Gap`` naming the figure, the GPU and the reason. A gap is never turned into a 0: the
agent leaves the series out of that sample, and counts the gap by reason.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class GapReason(enum.StrEnum):
    """Why a figure is missing from a sample. The first group are NVML's own answers."""

    NOT_SUPPORTED = "not_supported"  # the device or driver cannot report this (e.g. utilization on MIG)
    NO_PERMISSION = "no_permission"
    GPU_LOST = "gpu_lost"  # fell off the bus; NVML needs a reset before it answers again
    DRIVER_NOT_LOADED = "driver_not_loaded"  # kernel module absent, or being reloaded
    LIBRARY_NOT_FOUND = "library_not_found"  # libnvidia-ml.so.1 is not visible to the agent
    UNINITIALIZED = "uninitialized"  # NVML lost its state (after a driver reload)
    VERSION_MISMATCH = "version_mismatch"  # user-space library and kernel module differ (driver upgrade)
    RESET_REQUIRED = "reset_required"
    GPU_NOT_FOUND = "gpu_not_found"
    TIMEOUT = "timeout"
    NOT_FOUND = "not_found"
    FUNCTION_NOT_FOUND = "function_not_found"  # the driver is older than the call
    UNKNOWN = "unknown"  # NVML_ERROR_UNKNOWN, or an error code we do not know
    UNEXPECTED = "unexpected"  # the binding raised something that is not an NVMLError
    # Figures the agent itself could not attribute or read.
    MEMORY_NOT_REPORTED = "memory_not_reported"  # a process's usedGpuMemory was not available
    POD_LOOKUP_FAILED = "pod_lookup_failed"  # the kubelet or the API server did not answer

    @property
    def is_error(self) -> bool:
        """Whether it counts as an error: a capability the hardware lacks is a gap, not an error."""
        return self not in _NOT_ERRORS


_NOT_ERRORS = frozenset({GapReason.NOT_SUPPORTED, GapReason.MEMORY_NOT_REPORTED})


@dataclass(frozen=True, slots=True)
class Gap:
    """A figure missing from this sample: ``figure`` is what is missing (``nvml``, ``device``,
    ``utilization``, ``memory``, ``processes``, ``process_utilization``, ``pods``), ``gpu_uuid`` the
    GPU it concerns ("" for the whole node, ``index N`` before the UUID was read)."""

    figure: str
    reason: GapReason
    gpu_uuid: str = ""


@dataclass(frozen=True, slots=True)
class ProcessReading:
    """One compute process on a GPU (or MIG instance): host PID, used memory, SM utilization.

    ``sm_util_percent`` is the mean of the samples NVML returned since the previous reading, 0 for a
    process NVML returned none for (it reports only processes with non-zero utilization), and None
    where the device cannot report per-process utilization at all.
    """

    pid: int
    memory_bytes: int | None
    sm_util_percent: float | None


@dataclass(frozen=True, slots=True)
class DeviceReading:
    """One GPU, or one MIG instance of a GPU (then ``gpu_uuid`` is the parent's, as dcgm-exporter's
    ``UUID`` label is, and ``mig_profile`` names the slice, e.g. ``"1g.10gb"``)."""

    gpu_uuid: str
    index: int
    model: str | None = None
    mig_profile: str | None = None
    gpu_instance_id: int | None = None
    util_percent: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    # None: the process list could not be read (a gap says why); () is "no process".
    processes: tuple[ProcessReading, ...] | None = None


@dataclass(frozen=True, slots=True)
class NodeReading:
    """One sample of every GPU NVML could read, and the gaps; ``nvml_up`` is False when NVML could
    not even be initialized (then there are no devices)."""

    devices: tuple[DeviceReading, ...] = ()
    gaps: tuple[Gap, ...] = ()
    nvml_up: bool = True

    @property
    def pids(self) -> frozenset[int]:
        return frozenset(p.pid for d in self.devices for p in d.processes or ())
