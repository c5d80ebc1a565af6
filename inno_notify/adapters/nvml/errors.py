"""NVML's error codes sorted into what the agent does about them.

The binding raises ``NVMLError`` subclasses (``NVMLError_NotSupported``, ``NVMLError_GpuIsLost``…)
whose ``value`` is the C library's return code; the codes are NVML's ABI (``nvml.h``), stable across
driver versions, so they are matched by number. Three outcomes:

- a figure the device cannot give (not supported, no permission, an older driver without the
  call): that figure is a gap, the rest of the device is still read;
- the device is gone for now (lost, reset required, not found): the whole device is a gap;
- NVML itself lost its footing (uninitialized, driver not loaded, library/kernel version
  mismatch after a driver upgrade, unknown): the device is a gap and NVML is shut down and
  initialized again on the next sample, which is how the agent survives a driver reload.
"""

from __future__ import annotations

from typing import Any

from inno_notify.domain.agent import GapReason

# nvml.h return codes.
NVML_ERROR_NOT_FOUND = 6
_BY_CODE: dict[int, GapReason] = {
    1: GapReason.UNINITIALIZED,
    3: GapReason.NOT_SUPPORTED,
    4: GapReason.NO_PERMISSION,
    6: GapReason.NOT_FOUND,
    9: GapReason.DRIVER_NOT_LOADED,
    10: GapReason.TIMEOUT,
    12: GapReason.LIBRARY_NOT_FOUND,
    13: GapReason.FUNCTION_NOT_FOUND,
    15: GapReason.GPU_LOST,
    16: GapReason.RESET_REQUIRED,
    18: GapReason.VERSION_MISMATCH,
    28: GapReason.GPU_NOT_FOUND,
    999: GapReason.UNKNOWN,
}

# NVML itself lost its footing (module docstring): shut down and initialized again.
_NVML_LOST = frozenset(
    {
        GapReason.UNINITIALIZED,
        GapReason.DRIVER_NOT_LOADED,
        GapReason.LIBRARY_NOT_FOUND,
        GapReason.VERSION_MISMATCH,
        GapReason.UNKNOWN,
    }
)
# The device cannot be read at all this time: it is gone for now, or NVML is.
DEVICE_FATAL = frozenset({GapReason.GPU_LOST, GapReason.RESET_REQUIRED, GapReason.GPU_NOT_FOUND}) | _NVML_LOST
# NVML should be shut down and initialized again before the next sample: when it lost its footing,
# when a GPU was lost or not found (not when one only needs a reset), and after an unexpected error.
NEEDS_REINIT = _NVML_LOST | {GapReason.GPU_LOST, GapReason.GPU_NOT_FOUND, GapReason.UNEXPECTED}


def error_code(exc: BaseException, nvml: Any) -> int | None:
    """NVML's return code of an error the binding raised; None for any other exception."""
    if isinstance(exc, nvml.NVMLError):
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None
    return None


def classify(exc: BaseException, nvml: Any) -> GapReason:
    """The gap reason of an exception raised by an NVML call."""
    if not isinstance(exc, nvml.NVMLError):
        return GapReason.UNEXPECTED
    code = error_code(exc, nvml)
    return _BY_CODE.get(code, GapReason.UNKNOWN) if code is not None else GapReason.UNKNOWN
