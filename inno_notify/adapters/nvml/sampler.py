"""One NVML sample of the node: every GPU and MIG instance, its compute processes, and the gaps.

The ``pynvml`` module (from NVIDIA's ``nvidia-ml-py``) is passed in, never imported here, so that
tests hand over a fake with the same function names and signatures. Calls are synchronous ctypes
calls into ``libnvidia-ml.so.1`` and a lost GPU can make one take seconds: the agent runs
``sample()`` in a worker thread.

What is read, per device (``nvmlDeviceGetHandleByIndex``):

- whole GPUs: ``nvmlDeviceGetUtilizationRates`` (.gpu), ``nvmlDeviceGetMemoryInfo`` (.used/.total),
  ``nvmlDeviceGetComputeRunningProcesses`` (pid, usedGpuMemory: None where the driver cannot say),
  ``nvmlDeviceGetProcessUtilization(handle, lastSeenTimeStamp)`` (smUtil per process);
- GPUs in MIG mode (``nvmlDeviceGetMigMode``): each instance from ``nvmlDeviceGetMaxMigDeviceCount``
  and ``nvmlDeviceGetMigDeviceHandleByIndex`` (NotFound: an empty slot), read like a GPU (NVML
  answers NotSupported for utilization there: a gap), under its parent's UUID with its profile name.

Per-process utilization: NVML returns "one sample per process that had non-zero utilization" since
the timestamp given, and NotFound when there is none. A running process without a sample therefore
had 0 % (measured, not assumed); where the call itself is refused the figure is None and a gap.
Errors never escape ``sample()``: each becomes a gap with its reason (``errors``), and the errors
that mean NVML lost its state (a driver reload) shut it down so that the next sample initializes it
afresh.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from inno_notify.adapters.nvml.errors import (
    DEVICE_FATAL,
    NEEDS_REINIT,
    NVML_ERROR_NOT_FOUND,
    classify,
    error_code,
)
from inno_notify.domain.agent import DeviceReading, Gap, GapReason, NodeReading, ProcessReading

log = logging.getLogger(__name__)

NVML_DEVICE_MIG_ENABLE = 1
# "NVIDIA A100-SXM4-40GB MIG 3g.20gb": the profile at the end of a MIG device's name.
_MIG_NAME = re.compile(r"\bMIG\s+(\S+)\s*$")


class _DeviceGone(Exception):
    def __init__(self, reason: GapReason, where: str) -> None:
        super().__init__(f"{where}: {reason}")
        self.reason = reason
        self.where = where


def _wall_clock_us() -> int:
    return time.time_ns() // 1000


class NvmlSampler:
    """Reads every GPU through the injected ``pynvml`` module; ``sample()`` never raises.

    ``clock_us`` gives NVML's timestamp unit (wall-clock microseconds); ``first_window_seconds`` is
    how far back the first per-process utilization query of a device looks.
    """

    def __init__(
        self,
        nvml: Any,
        *,
        clock_us: Callable[[], int] = _wall_clock_us,
        first_window_seconds: float = 15.0,
    ) -> None:
        self._nvml = nvml
        self._clock_us = clock_us
        self._first_window_us = int(first_window_seconds * 1_000_000)
        self._initialized = False
        # Per device (or MIG instance): the newest per-process utilization sample seen.
        self._last_seen: dict[str, int] = {}
        # Successful nvmlInit calls: more than one means NVML was initialized again (driver reload).
        self.inits = 0

    @property
    def initialized(self) -> bool:
        return self._initialized

    def sample(self) -> NodeReading:
        nvml = self._nvml
        if not self._initialized:
            try:
                nvml.nvmlInit()
            except Exception as exc:
                return NodeReading(gaps=(Gap("nvml", self._reason(exc)),), nvml_up=False)
            self._initialized = True
            self.inits += 1
            self._last_seen.clear()
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:
            reason = self._reason(exc)
            self._reset()
            return NodeReading(gaps=(Gap("nvml", reason),), nvml_up=False)
        gaps: list[Gap] = []
        devices: list[DeviceReading] = []
        for index in range(count):
            try:
                devices.extend(self._device(index, gaps))
            except _DeviceGone as gone:
                gaps.append(Gap("device", gone.reason, gone.where))
        if any(gap.reason in NEEDS_REINIT for gap in gaps):
            self._reset()
        return NodeReading(devices=tuple(devices), gaps=tuple(gaps), nvml_up=True)

    def close(self) -> None:
        """Shuts NVML down (on SIGTERM); errors are of no interest any more."""
        if self._initialized:
            self._reset()

    # -- one device -------------------------------------------------------------------------

    def _device(self, index: int, gaps: list[Gap]) -> list[DeviceReading]:
        nvml = self._nvml
        where = f"index {index}"
        handle = self._required(where, nvml.nvmlDeviceGetHandleByIndex, index)
        uuid = str(self._required(where, nvml.nvmlDeviceGetUUID, handle))
        model = self._figure(gaps, "model", uuid, nvml.nvmlDeviceGetName, handle)
        model = str(model) if model is not None else None
        if self._mig_enabled(handle, uuid, gaps):
            return self._mig_instances(handle, uuid, index, model, gaps)
        return [self._read(handle, uuid, index, model, None, None, uuid, gaps)]

    def _mig_enabled(self, handle: Any, uuid: str, gaps: list[Gap]) -> bool:
        try:
            current = self._nvml.nvmlDeviceGetMigMode(handle)[0]
        except Exception as exc:
            reason = self._survivable(exc, uuid)
            if reason not in (GapReason.NOT_SUPPORTED, GapReason.FUNCTION_NOT_FOUND):
                gaps.append(Gap("mig", reason, uuid))
            return False  # a GPU without MIG support answers NotSupported
        return bool(current == NVML_DEVICE_MIG_ENABLE)

    def _mig_instances(
        self, handle: Any, uuid: str, index: int, model: str | None, gaps: list[Gap]
    ) -> list[DeviceReading]:
        nvml = self._nvml
        slots = self._figure(gaps, "mig", uuid, nvml.nvmlDeviceGetMaxMigDeviceCount, handle)
        readings = []
        for slot in range(int(slots or 0)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            except Exception as exc:
                if error_code(exc, nvml) == NVML_ERROR_NOT_FOUND:
                    continue  # no instance in this slot
                reason = self._survivable(exc, uuid)
                gaps.append(Gap("mig", reason, uuid))
                continue
            instance = self._figure(gaps, "mig", uuid, nvml.nvmlDeviceGetGpuInstanceId, mig)
            instance = int(instance) if instance is not None else None
            profile = self._mig_profile(mig, uuid, gaps)
            key = f"{uuid}/gi{instance if instance is not None else f'slot{slot}'}"
            readings.append(self._read(mig, uuid, index, model, profile, instance, key, gaps))
        return readings

    def _mig_profile(self, mig: Any, uuid: str, gaps: list[Gap]) -> str | None:
        """``<slices>g.<GiB>gb`` as the device plugin and dcgm-exporter name it (``<c>c.`` in front
        when the compute instance has fewer slices than its GPU instance); else from the name."""
        nvml = self._nvml
        try:
            attributes = nvml.nvmlDeviceGetAttributes(mig)
            slices = int(attributes.gpuInstanceSliceCount)
            compute = int(attributes.computeInstanceSliceCount)
            gib = math.ceil(int(attributes.memorySizeMB) / 1024)
            if slices > 0 and gib > 0:
                prefix = f"{compute}c." if 0 < compute < slices else ""
                return f"{prefix}{slices}g.{gib}gb"
        except Exception as exc:
            self._survivable(exc, uuid)  # else the profile is read from the device's name
        name = self._figure(gaps, "mig_profile", uuid, nvml.nvmlDeviceGetName, mig)
        match = _MIG_NAME.search(str(name)) if name is not None else None
        return match.group(1) if match else None

    def _read(
        self,
        handle: Any,
        uuid: str,
        index: int,
        model: str | None,
        profile: str | None,
        instance: int | None,
        key: str,
        gaps: list[Gap],
    ) -> DeviceReading:
        nvml = self._nvml
        rates = self._figure(gaps, "utilization", uuid, nvml.nvmlDeviceGetUtilizationRates, handle)
        memory = self._figure(gaps, "memory", uuid, nvml.nvmlDeviceGetMemoryInfo, handle)
        return DeviceReading(
            gpu_uuid=uuid,
            index=index,
            model=model,
            mig_profile=profile,
            gpu_instance_id=instance,
            util_percent=_percent(getattr(rates, "gpu", None)) if rates is not None else None,
            memory_used_bytes=_bytes(getattr(memory, "used", None)) if memory is not None else None,
            memory_total_bytes=_bytes(getattr(memory, "total", None)) if memory is not None else None,
            processes=self._processes(handle, uuid, key, gaps),
        )

    def _processes(
        self, handle: Any, uuid: str, key: str, gaps: list[Gap]
    ) -> tuple[ProcessReading, ...] | None:
        listing = self._nvml.nvmlDeviceGetComputeRunningProcesses
        infos = self._figure(gaps, "processes", uuid, listing, handle)
        if infos is None:
            return None
        sm = self._process_util(handle, uuid, key, gaps)
        readings = []
        for info in infos:
            pid = getattr(info, "pid", None)
            if not isinstance(pid, int) or pid <= 0:
                continue
            readings.append(
                ProcessReading(
                    pid=pid,
                    memory_bytes=_bytes(getattr(info, "usedGpuMemory", None)),
                    sm_util_percent=None if sm is None else sm.get(pid, 0.0),
                )
            )
        return tuple(readings)

    def _process_util(self, handle: Any, uuid: str, key: str, gaps: list[Gap]) -> dict[int, float] | None:
        """Mean SM utilization per PID over the samples since the last call; None when refused."""
        nvml = self._nvml
        now = self._clock_us()
        since = self._last_seen.get(key, now - self._first_window_us)
        try:
            samples = nvml.nvmlDeviceGetProcessUtilization(handle, since)
        except Exception as exc:
            if error_code(exc, nvml) == NVML_ERROR_NOT_FOUND:
                # No process had non-zero utilization since `since`: every one of them had 0 %.
                self._last_seen[key] = now
                return {}
            reason = self._survivable(exc, uuid)
            gaps.append(Gap("process_utilization", reason, uuid))
            return None
        per_pid: dict[int, list[float]] = defaultdict(list)
        newest = since
        for sample in samples:
            stamp, pid, util = (getattr(sample, name, None) for name in ("timeStamp", "pid", "smUtil"))
            if not isinstance(stamp, int) or not isinstance(pid, int) or stamp <= since:
                continue
            value = _percent(util)
            if value is None:
                continue
            per_pid[pid].append(value)
            newest = max(newest, stamp)
        self._last_seen[key] = newest if newest > since else now
        return {pid: sum(values) / len(values) for pid, values in per_pid.items()}

    # -- calls and their failures -----------------------------------------------------------

    def _required(self, where: str, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except Exception as exc:
            raise _DeviceGone(self._reason(exc), where) from exc

    def _figure(self, gaps: list[Gap], figure: str, uuid: str, call: Callable[..., Any], *args: Any) -> Any:
        """The call's answer, or None and a gap; an error that means the device is gone propagates."""
        try:
            return call(*args)
        except Exception as exc:
            reason = self._survivable(exc, uuid)
            gaps.append(Gap(figure, reason, uuid))
            return None

    def _survivable(self, exc: Exception, uuid: str) -> GapReason:
        """Why a call on device `uuid` failed; _DeviceGone when the reason means the device is gone."""
        reason = self._reason(exc)
        if reason in DEVICE_FATAL:
            raise _DeviceGone(reason, uuid) from exc
        return reason

    def _reason(self, exc: Exception) -> GapReason:
        reason = classify(exc, self._nvml)
        if reason is GapReason.UNEXPECTED:
            log.debug("NVML call raised %s", type(exc).__name__, exc_info=exc)
        return reason

    def _reset(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except Exception as exc:  # already gone with the driver: nothing to release
            log.debug("nvmlShutdown: %s", exc)
        self._initialized = False


def _percent(value: Any) -> float | None:
    """A utilization figure NVML reports as an unsigned int; out of range is no measurement."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0 <= value <= 100 else None


def _bytes(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value
