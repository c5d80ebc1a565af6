"""NvmlSampler over a fake pynvml: figures where NVML answers, a gap with its reason where it does not."""

from __future__ import annotations

import inspect

import pynvml
import pytest

from inno_notify.adapters.nvml import NvmlSampler
from inno_notify.domain.agent import DeviceReading, Gap, GapReason, ProcessReading
from tests.adapters.nvml.fake_nvml import (
    FUNCTIONS,
    MIB,
    NVML_ERROR_NO_PERMISSION,
    NVML_ERROR_NOT_SUPPORTED,
    FakeGpu,
    FakeMig,
    FakeNvml,
    FakeProcess,
)

GIB = 1024**3
T0 = 1_767_000_000_000_000  # µs, NVML's timestamp unit
GPU0 = "GPU-00000000-1111-2222-3333-444444444444"
GPU1 = "GPU-11111111-1111-2222-3333-444444444444"
A100 = "GPU-aaaaaaaa-1111-2222-3333-444444444444"


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        return self.now


def time_sliced_gpu() -> FakeGpu:
    return FakeGpu(
        GPU0,
        util=83,
        used_bytes=13 * GIB,
        processes=[FakeProcess(101, 4 * GIB), FakeProcess(102, 1 * GIB), FakeProcess(201, 8 * GIB)],
        samples=[(101, T0 - 9_000_000, 30), (101, T0 - 4_000_000, 50), (201, T0 - 2_000_000, 45)],
    )


@pytest.mark.parametrize("name", FUNCTIONS)
def test_fake_has_pynvmls_signatures(name: str) -> None:
    fake = FakeNvml([])
    real = inspect.signature(getattr(pynvml, name))
    assert list(inspect.signature(getattr(fake, name)).parameters) == list(real.parameters)


def test_processes_of_several_pods_on_one_gpu() -> None:
    clock = Clock()
    sampler = NvmlSampler(FakeNvml([time_sliced_gpu()]), clock_us=clock)
    reading = sampler.sample()
    assert reading.nvml_up and reading.gaps == ()
    assert reading.devices == (
        DeviceReading(
            gpu_uuid=GPU0,
            index=0,
            model="NVIDIA A100-SXM4-80GB",
            util_percent=83.0,
            memory_used_bytes=13 * GIB,
            memory_total_bytes=81920 * MIB,
            processes=(
                ProcessReading(101, 4 * GIB, 40.0),  # mean of its two samples
                ProcessReading(102, 1 * GIB, 0.0),  # running, no sample: NVML saw no utilization
                ProcessReading(201, 8 * GIB, 45.0),
            ),
        ),
    )


def test_utilization_samples_are_read_once() -> None:
    gpu = time_sliced_gpu()
    clock = Clock()
    sampler = NvmlSampler(FakeNvml([gpu]), clock_us=clock)
    sampler.sample()
    clock.now += 15_000_000
    gpu.samples.append((201, T0 + 5_000_000, 10))
    processes = sampler.sample().devices[0].processes
    assert processes is not None
    assert [p.sm_util_percent for p in processes] == [0.0, 0.0, 10.0]
    clock.now += 15_000_000
    # Nothing new since: NVML answers NotFound, which means no process used the GPU.
    processes = sampler.sample().devices[0].processes
    assert processes is not None and [p.sm_util_percent for p in processes] == [0.0, 0.0, 0.0]


def test_used_memory_not_available_is_none() -> None:
    gpu = FakeGpu(GPU0, processes=[FakeProcess(101, None), FakeProcess(102, 2 * GIB)])
    processes = NvmlSampler(FakeNvml([gpu]), clock_us=Clock()).sample().devices[0].processes
    assert processes == (ProcessReading(101, None, 0.0), ProcessReading(102, 2 * GIB, 0.0))


def test_mig_instances_under_the_parent_uuid_with_profile_names() -> None:
    a100 = FakeGpu(
        A100,
        mig=[
            FakeMig(1, slices=3, memory_mb=40192, used_bytes=9 * GIB, processes=[FakeProcess(301, 9 * GIB)]),
            None,  # an empty slot: NotFound
            FakeMig(9, slices=1, memory_mb=9728, used_bytes=GIB, processes=[FakeProcess(401, GIB)]),
            FakeMig(13, slices=3, memory_mb=40192, used_bytes=0, compute_slices=1),
        ],
    )
    reading = NvmlSampler(FakeNvml([a100]), clock_us=Clock()).sample()
    assert [(d.gpu_uuid, d.mig_profile, d.gpu_instance_id) for d in reading.devices] == [
        (A100, "3g.40gb", 1),
        (A100, "1g.10gb", 9),
        (A100, "1c.3g.40gb", 13),
    ]
    first = reading.devices[0]
    assert first.memory_used_bytes == 9 * GIB and first.memory_total_bytes == 40192 * MIB
    # Utilization and per-process utilization are not supported on MIG instances: gaps, not zeros.
    assert first.util_percent is None
    assert first.processes == (ProcessReading(301, 9 * GIB, None),)
    assert set(reading.gaps) == {
        Gap("utilization", GapReason.NOT_SUPPORTED, A100),
        Gap("process_utilization", GapReason.NOT_SUPPORTED, A100),
    }


def test_mig_profile_from_the_name_when_attributes_are_refused() -> None:
    a100 = FakeGpu(A100, mig=[FakeMig(2, slices=2, memory_mb=20096, used_bytes=0)])
    nvml = FakeNvml([a100])
    nvml.fail(A100, "nvmlDeviceGetAttributes", NVML_ERROR_NOT_SUPPORTED)
    assert NvmlSampler(nvml, clock_us=Clock()).sample().devices[0].mig_profile == "2g.20gb"


def test_mig_capable_gpu_with_mig_off_is_a_whole_gpu() -> None:
    gpu = FakeGpu(GPU0, util=7, mig_capable=True)
    reading = NvmlSampler(FakeNvml([gpu]), clock_us=Clock()).sample()
    assert reading.devices[0].mig_profile is None and reading.devices[0].util_percent == 7.0


def test_not_supported_is_a_gap_for_that_figure_only() -> None:
    nvml = FakeNvml([time_sliced_gpu()])
    nvml.fail(GPU0, "nvmlDeviceGetUtilizationRates", NVML_ERROR_NOT_SUPPORTED)
    nvml.fail(GPU0, "nvmlDeviceGetProcessUtilization", NVML_ERROR_NOT_SUPPORTED)
    sampler = NvmlSampler(nvml, clock_us=Clock())
    reading = sampler.sample()
    device = reading.devices[0]
    assert device.util_percent is None and device.memory_used_bytes == 13 * GIB
    assert device.processes is not None
    assert [(p.memory_bytes, p.sm_util_percent) for p in device.processes] == [
        (4 * GIB, None),
        (1 * GIB, None),
        (8 * GIB, None),
    ]
    assert reading.gaps == (
        Gap("utilization", GapReason.NOT_SUPPORTED, GPU0),
        Gap("process_utilization", GapReason.NOT_SUPPORTED, GPU0),
    )
    assert sampler.inits == 1 and nvml.shutdown_calls == 0  # no reason to start NVML again


def test_no_permission_on_the_process_list() -> None:
    nvml = FakeNvml([time_sliced_gpu()])
    nvml.fail(GPU0, "nvmlDeviceGetComputeRunningProcesses", NVML_ERROR_NO_PERMISSION)
    reading = NvmlSampler(nvml, clock_us=Clock()).sample()
    assert reading.devices[0].processes is None
    assert reading.gaps == (Gap("processes", GapReason.NO_PERMISSION, GPU0),)


def test_lost_gpu_is_a_device_gap_and_the_others_are_read() -> None:
    nvml = FakeNvml([time_sliced_gpu(), FakeGpu(GPU1, util=12)])
    nvml.lose(GPU0)
    sampler = NvmlSampler(nvml, clock_us=Clock())
    reading = sampler.sample()
    assert [d.gpu_uuid for d in reading.devices] == [GPU1]
    assert reading.gaps == (Gap("device", GapReason.GPU_LOST, "index 0"),)
    # NVML is started again for the next sample, in case the GPU comes back after a reset.
    assert not sampler.initialized
    nvml.gpus[0].lost = False
    reading = sampler.sample()
    assert [d.gpu_uuid for d in reading.devices] == [GPU0, GPU1] and reading.gaps == ()
    assert sampler.inits == 2


def test_gpu_lost_between_calls() -> None:
    nvml = FakeNvml([time_sliced_gpu()])

    def falls_off_the_bus(name: str) -> None:
        if name == "nvmlDeviceGetComputeRunningProcesses":
            nvml.lose(GPU0)

    nvml.on_call = falls_off_the_bus
    reading = NvmlSampler(nvml, clock_us=Clock()).sample()
    assert reading.devices == ()
    assert reading.gaps == (Gap("device", GapReason.GPU_LOST, GPU0),)


def test_driver_reload() -> None:
    nvml = FakeNvml([time_sliced_gpu()])
    clock = Clock()
    sampler = NvmlSampler(nvml, clock_us=clock)
    assert sampler.sample().devices

    nvml.unload_driver()
    reading = sampler.sample()  # NVML's state went with the module
    assert (reading.nvml_up, reading.devices) == (False, ())
    assert reading.gaps == (Gap("nvml", GapReason.UNINITIALIZED),)
    reading = sampler.sample()  # and the module is not back yet
    assert reading.gaps == (Gap("nvml", GapReason.DRIVER_NOT_LOADED),)

    nvml.load_driver()
    clock.now += 60_000_000
    reading = sampler.sample()
    assert reading.nvml_up and reading.gaps == ()
    assert [d.gpu_uuid for d in reading.devices] == [GPU0]
    assert sampler.inits == 2


def test_library_not_found() -> None:
    class NoLibrary(FakeNvml):
        def nvmlInit(self) -> None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)

    reading = NvmlSampler(NoLibrary([]), clock_us=Clock()).sample()
    assert reading == type(reading)(gaps=(Gap("nvml", GapReason.LIBRARY_NOT_FOUND),), nvml_up=False)


def test_an_exception_that_is_not_nvmls_is_a_gap_too() -> None:
    class Broken(FakeNvml):
        def nvmlDeviceGetMemoryInfo(self, handle: object, version: int | None = None) -> object:
            raise OSError("ctypes went wrong")

    sampler = NvmlSampler(Broken([time_sliced_gpu()]), clock_us=Clock())
    reading = sampler.sample()
    assert reading.devices[0].memory_used_bytes is None
    assert reading.gaps == (Gap("memory", GapReason.UNEXPECTED, GPU0),)
    assert not sampler.initialized  # something unexplained: start NVML afresh next time


def test_unknown_error_code_is_unknown() -> None:
    nvml = FakeNvml([time_sliced_gpu()])
    nvml.fail(GPU0, "nvmlDeviceGetUtilizationRates", 12345)
    reading = NvmlSampler(nvml, clock_us=Clock()).sample()
    assert reading.gaps == (Gap("device", GapReason.UNKNOWN, GPU0),)


def test_close_shuts_nvml_down_once() -> None:
    nvml = FakeNvml([time_sliced_gpu()])
    sampler = NvmlSampler(nvml, clock_us=Clock())
    sampler.sample()
    sampler.close()
    sampler.close()
    assert nvml.shutdown_calls == 1
