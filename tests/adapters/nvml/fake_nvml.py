"""A stand-in for the ``pynvml`` module over a scripted node: no GPU, no libnvidia-ml.so.

It has the functions the agent calls, with pynvml's names and signatures (a test holds them to the
real module's), and answers with what the real binding returns: pynvml's own ctypes structures
(``c_nvmlUtilization_t``, ``c_nvmlMemory_t``, ``c_nvmlProcessUtilizationSample_t``,
``c_nvmlDeviceAttributes``), ``nvmlFriendlyObject`` process entries with ``usedGpuMemory`` None where
the driver reports "not available", and pynvml's own exception classes
(``NVMLError_NotSupported``, ``NVMLError_GpuIsLost``…) built from the return codes NVML's C API gives.
Importing pynvml loads no library, so its structures and errors are usable without a driver.

The script: ``FakeGpu`` per device (MIG instances as ``FakeMig``), ``fail`` to make one call of one
device return an error code, ``lose`` a GPU, ``unload_driver``/``load_driver`` for a driver reload.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pynvml as real

NVMLError = real.NVMLError
NVML_ERROR_UNINITIALIZED = real.NVML_ERROR_UNINITIALIZED
NVML_ERROR_NOT_SUPPORTED = real.NVML_ERROR_NOT_SUPPORTED
NVML_ERROR_NOT_FOUND = real.NVML_ERROR_NOT_FOUND
NVML_ERROR_DRIVER_NOT_LOADED = real.NVML_ERROR_DRIVER_NOT_LOADED
NVML_ERROR_GPU_IS_LOST = real.NVML_ERROR_GPU_IS_LOST
NVML_ERROR_NO_PERMISSION = real.NVML_ERROR_NO_PERMISSION
NVML_ERROR_UNKNOWN = real.NVML_ERROR_UNKNOWN
NVML_DEVICE_MIG_ENABLE = real.NVML_DEVICE_MIG_ENABLE
NVML_DEVICE_MIG_DISABLE = real.NVML_DEVICE_MIG_DISABLE

MIB = 1024 * 1024


@dataclass
class FakeProcess:
    pid: int
    used_bytes: int | None  # None: the driver reports NVML_VALUE_NOT_AVAILABLE


@dataclass
class FakeMig:
    """One MIG instance: its GPU instance id, what nvmlDeviceGetAttributes says, its memory, processes."""

    instance_id: int
    slices: int
    memory_mb: int
    used_bytes: int
    processes: list[FakeProcess] = field(default_factory=list)
    compute_slices: int | None = None  # None: the whole GPU instance
    name: str = "NVIDIA A100-SXM4-80GB MIG"


@dataclass
class FakeGpu:
    uuid: str
    name: str = "NVIDIA A100-SXM4-80GB"
    util: int = 0
    used_bytes: int = 0
    total_bytes: int = 81920 * MIB
    processes: list[FakeProcess] = field(default_factory=list)
    # (pid, timestamp in µs, smUtil) as the driver buffers them.
    samples: list[tuple[int, int, int]] = field(default_factory=list)
    # None: MIG not supported; a list of slots (None: empty slot) when MIG is enabled.
    mig: list[FakeMig | None] | None = None
    mig_capable: bool = False
    lost: bool = False
    # function name -> NVML return code it answers for this device.
    failures: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class _Handle:
    gpu: FakeGpu
    mig: FakeMig | None
    generation: int


def _error(code: int) -> Exception:
    error: Exception = real.NVMLError(code)  # pynvml turns the code into its NVMLError_* subclass
    return error


class FakeNvml:
    """Module-like: ``FakeNvml(gpus).nvmlDeviceGetCount()`` and so on, as ``pynvml.nvml…``."""

    NVMLError = real.NVMLError

    def __init__(self, gpus: list[FakeGpu]) -> None:
        self.gpus = gpus
        self.driver_loaded = True
        self.initialized = False
        self.generation = 0
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: list[str] = []
        # Called as each NVML function is entered (tests use it to change the node mid-sample).
        self.on_call: Callable[[str], None] | None = None

    # -- the script -------------------------------------------------------------------------

    def fail(self, uuid: str, function: str, code: int) -> None:
        self._gpu(uuid).failures[function] = code

    def lose(self, uuid: str) -> None:
        self._gpu(uuid).lost = True

    def unload_driver(self) -> None:
        """The kernel module goes away: NVML's state with it."""
        self.driver_loaded = False
        self.initialized = False

    def load_driver(self) -> None:
        self.driver_loaded = True
        self.generation += 1

    def _gpu(self, uuid: str) -> FakeGpu:
        return next(g for g in self.gpus if g.uuid == uuid)

    def _enter(self, name: str) -> None:
        self.calls.append(name)
        if self.on_call is not None:
            self.on_call(name)

    def _ready(self) -> None:
        if not self.initialized:
            raise _error(NVML_ERROR_UNINITIALIZED)

    def _device(self, name: str, handle: _Handle) -> _Handle:
        self._enter(name)
        self._ready()
        if handle.generation != self.generation:
            raise _error(NVML_ERROR_UNINITIALIZED)
        if handle.gpu.lost:
            raise _error(NVML_ERROR_GPU_IS_LOST)
        code = handle.gpu.failures.get(name)
        if code is not None:
            raise _error(code)
        return handle

    # -- pynvml's functions -----------------------------------------------------------------

    def nvmlInit(self) -> None:
        self._enter("nvmlInit")
        if not self.driver_loaded:
            raise _error(NVML_ERROR_DRIVER_NOT_LOADED)
        self.initialized = True
        self.init_calls += 1

    def nvmlShutdown(self) -> None:
        self._enter("nvmlShutdown")
        self._ready()
        self.initialized = False
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        self._ready()
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> _Handle:
        self._enter("nvmlDeviceGetHandleByIndex")
        self._ready()
        gpu = self.gpus[index]
        code = gpu.failures.get("nvmlDeviceGetHandleByIndex")
        if code is not None:
            raise _error(code)
        return _Handle(gpu, None, self.generation)

    def nvmlDeviceGetUUID(self, handle: _Handle) -> str:
        self._device("nvmlDeviceGetUUID", handle)
        if handle.mig is None:
            return handle.gpu.uuid
        return f"MIG-{handle.gpu.uuid[4:]}-{handle.mig.instance_id}"

    def nvmlDeviceGetName(self, handle: _Handle) -> str:
        self._device("nvmlDeviceGetName", handle)
        if handle.mig is None:
            return handle.gpu.name
        return f"{handle.mig.name} {handle.mig.slices}g.{round(handle.mig.memory_mb / 1024)}gb"

    def nvmlDeviceGetMigMode(self, device: _Handle) -> list[int]:
        self._device("nvmlDeviceGetMigMode", device)
        if not device.gpu.mig_capable and device.gpu.mig is None:
            raise _error(NVML_ERROR_NOT_SUPPORTED)
        mode = NVML_DEVICE_MIG_ENABLE if device.gpu.mig is not None else NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: _Handle) -> int:
        self._device("nvmlDeviceGetMaxMigDeviceCount", device)
        return len(device.gpu.mig or [])

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: _Handle, index: int) -> _Handle:
        self._device("nvmlDeviceGetMigDeviceHandleByIndex", device)
        slots = device.gpu.mig or []
        if index >= len(slots) or slots[index] is None:
            raise _error(NVML_ERROR_NOT_FOUND)
        return _Handle(device.gpu, slots[index], self.generation)

    def nvmlDeviceGetGpuInstanceId(self, device: _Handle) -> int:
        self._device("nvmlDeviceGetGpuInstanceId", device)
        if device.mig is None:
            raise _error(real.NVML_ERROR_INVALID_ARGUMENT)
        return device.mig.instance_id

    def nvmlDeviceGetAttributes(self, device: _Handle) -> Any:
        self._device("nvmlDeviceGetAttributes", device)
        mig = device.mig
        if mig is None:
            return real.c_nvmlDeviceAttributes(gpuInstanceSliceCount=7, computeInstanceSliceCount=7)
        compute = mig.compute_slices if mig.compute_slices is not None else mig.slices
        return real.c_nvmlDeviceAttributes(
            gpuInstanceSliceCount=mig.slices, computeInstanceSliceCount=compute, memorySizeMB=mig.memory_mb
        )

    def nvmlDeviceGetUtilizationRates(self, handle: _Handle) -> Any:
        self._device("nvmlDeviceGetUtilizationRates", handle)
        if handle.mig is not None:
            raise _error(NVML_ERROR_NOT_SUPPORTED)  # as on real MIG instances
        return real.c_nvmlUtilization_t(gpu=handle.gpu.util, memory=0)

    def nvmlDeviceGetMemoryInfo(self, handle: _Handle, version: int | None = None) -> Any:
        self._device("nvmlDeviceGetMemoryInfo", handle)
        if handle.mig is not None:
            total, used = handle.mig.memory_mb * MIB, handle.mig.used_bytes
        else:
            total, used = handle.gpu.total_bytes, handle.gpu.used_bytes
        return real.c_nvmlMemory_t(total=total, free=total - used, used=used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: _Handle) -> list[Any]:
        self._device("nvmlDeviceGetComputeRunningProcesses", handle)
        processes = handle.mig.processes if handle.mig is not None else handle.gpu.processes
        instance = handle.mig.instance_id if handle.mig is not None else 0xFFFFFFFF
        return [
            real.nvmlFriendlyObject(
                {
                    "pid": p.pid,
                    "usedGpuMemory": p.used_bytes,
                    "gpuInstanceId": instance,
                    "computeInstanceId": 0 if handle.mig is not None else 0xFFFFFFFF,
                }
            )
            for p in processes
        ]

    def nvmlDeviceGetProcessUtilization(self, handle: _Handle, timeStamp: int) -> list[Any]:
        self._device("nvmlDeviceGetProcessUtilization", handle)
        if handle.mig is not None:
            raise _error(NVML_ERROR_NOT_SUPPORTED)
        found = [
            real.c_nvmlProcessUtilizationSample_t(pid=pid, timeStamp=stamp, smUtil=sm)
            for pid, stamp, sm in handle.gpu.samples
            if stamp > timeStamp
        ]
        if not found:
            raise _error(NVML_ERROR_NOT_FOUND)
        return found


# The functions above, for the test that holds their signatures to pynvml's.
FUNCTIONS = sorted(name for name in vars(FakeNvml) if name.startswith("nvml"))
