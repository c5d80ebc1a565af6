"""One sample -> one series per container and GPU: sums per container, unknown stays unknown, nothing lost."""

from __future__ import annotations

from inno_notify.domain.agent import (
    CgroupRef,
    DeviceReading,
    Gap,
    GapReason,
    NodeReading,
    PodIdentity,
    ProcessReading,
    SeriesKey,
    attribute,
)
from inno_notify.domain.agent.attribution import ProcessSeries, Unattributed, UnattributedReason

GIB = 1024**3
GPU = "GPU-11111111-2222-3333-4444-555555555555"
A100 = "GPU-aaaaaaaa-2222-3333-4444-555555555555"
UID_A, UID_B, UID_C = (f"{n}0000000-0000-4000-8000-00000000000{n}" for n in (1, 2, 3))
CID_A, CID_A2, CID_B = "a" * 64, "d" * 64, "b" * 64

PODS = {
    UID_A: PodIdentity(UID_A, "face", "train-a", {CID_A: "trainer", CID_A2: "loader"}),
    UID_B: PodIdentity(UID_B, "speech", "eval-b", {CID_B: "main"}),
}


def proc(pid: int, gib: float | None, sm: float | None = 10.0) -> ProcessReading:
    return ProcessReading(pid, None if gib is None else int(gib * GIB), sm)


def key(ns: str, pod: str, container: str, gpu: str = GPU, mig: str = "", instance: str = "") -> SeriesKey:
    return SeriesKey(ns, pod, container, gpu, mig, instance)


def test_processes_of_different_pods_on_one_time_sliced_gpu() -> None:
    reading = NodeReading(
        devices=(
            DeviceReading(
                GPU,
                0,
                processes=(proc(101, 4, 30.0), proc(102, 1, 5.0), proc(103, 2, 0.0), proc(201, 6, 40.0)),
            ),
        )
    )
    cgroups = {
        101: CgroupRef(UID_A, CID_A),
        102: CgroupRef(UID_A, CID_A),  # a second process of the same container
        103: CgroupRef(UID_A, CID_A2),
        201: CgroupRef(UID_B, CID_B),
    }
    result = attribute(reading, cgroups, PODS)
    assert result.series == (
        ProcessSeries(key("face", "train-a", "loader"), 2 * GIB, 0.0, 1),
        ProcessSeries(key("face", "train-a", "trainer"), 5 * GIB, 35.0, 2),
        ProcessSeries(key("speech", "eval-b", "main"), 6 * GIB, 40.0, 1),
    )
    assert result.unattributed == ()
    assert result.gaps == ()


def test_unknown_memory_makes_the_sum_unknown_and_is_a_gap() -> None:
    reading = NodeReading(devices=(DeviceReading(GPU, 0, processes=(proc(101, 4), proc(102, None))),))
    cgroups = {101: CgroupRef(UID_A, CID_A), 102: CgroupRef(UID_A, CID_A)}
    result = attribute(reading, cgroups, PODS)
    assert result.series == (ProcessSeries(key("face", "train-a", "trainer"), None, 20.0, 2),)
    assert result.gaps == (Gap("process_memory", GapReason.MEMORY_NOT_REPORTED, GPU),)


def test_no_per_process_utilization_stays_none() -> None:
    reading = NodeReading(
        devices=(DeviceReading(GPU, 0, processes=(proc(101, 4, None),)),),
        gaps=(Gap("process_utilization", GapReason.NOT_SUPPORTED, GPU),),
    )
    result = attribute(reading, {101: CgroupRef(UID_A, CID_A)}, PODS)
    assert result.series[0].sm_util_percent is None
    assert result.gaps == reading.gaps


def mig(profile: str, instance: int, processes: tuple[ProcessReading, ...]) -> DeviceReading:
    return DeviceReading(A100, 1, mig_profile=profile, gpu_instance_id=instance, processes=processes)


def test_mig_instances_are_their_own_series_under_the_parent_uuid() -> None:
    reading = NodeReading(
        devices=(
            mig("3g.40gb", 1, (proc(101, 10, None),)),
            mig("1g.10gb", 9, (proc(201, 3, None),)),
            mig("1g.10gb", 10, (proc(202, 2, None),)),
        )
    )
    cgroups = {101: CgroupRef(UID_A, CID_A), 201: CgroupRef(UID_B, CID_B), 202: CgroupRef(UID_B, CID_B)}
    result = attribute(reading, cgroups, PODS)
    assert result.series == (
        ProcessSeries(key("face", "train-a", "trainer", A100, "3g.40gb", "1"), 10 * GIB, None, 1),
        # Two instances of one profile are two series, told apart by the instance, as in dcgm-exporter.
        ProcessSeries(key("speech", "eval-b", "main", A100, "1g.10gb", "10"), 2 * GIB, None, 1),
        ProcessSeries(key("speech", "eval-b", "main", A100, "1g.10gb", "9"), 3 * GIB, None, 1),
    )


SAMPLE = [(101, 1), (300, 2), (301, 1), (400, 3), (500, 4), (501, 1)]


def test_processes_outside_known_pods_are_kept_apart_by_reason() -> None:
    reading = NodeReading(
        devices=(
            DeviceReading(
                GPU,
                0,
                processes=tuple(proc(pid, gib) for pid, gib in SAMPLE),
            ),
        )
    )
    cgroups: dict[int, CgroupRef | None] = {
        101: CgroupRef(UID_A, "f" * 64),  # container not (yet) in the pod's status
        300: None,  # a host process
        301: None,
        400: CgroupRef(UID_C, CID_B),  # a pod the node list does not know yet
        # 500 and 501 exited before /proc was read
    }
    result = attribute(reading, cgroups, PODS)
    assert result.series == (ProcessSeries(key("face", "train-a", ""), 1 * GIB, 10.0, 1),)
    assert result.unattributed == (
        Unattributed(GPU, "", UnattributedReason.NOT_IN_POD, 3 * GIB, 2),
        Unattributed(GPU, "", UnattributedReason.POD_UNKNOWN, 3 * GIB, 1),
        Unattributed(GPU, "", UnattributedReason.PROCESS_GONE, 5 * GIB, 2),
    )


def test_pod_list_unavailable_attributes_nothing_to_pods() -> None:
    reading = NodeReading(devices=(DeviceReading(GPU, 0, processes=(proc(101, 1), proc(300, 2))),))
    result = attribute(reading, {101: CgroupRef(UID_A, CID_A), 300: None}, None)
    assert result.series == ()
    assert [u.reason for u in result.unattributed] == [
        UnattributedReason.NOT_IN_POD,
        UnattributedReason.POD_LOOKUP_FAILED,
    ]


def test_unreadable_process_list_and_lost_node() -> None:
    assert attribute(NodeReading(devices=(DeviceReading(GPU, 0, processes=None),)), {}, PODS) == (
        attribute(NodeReading(), {}, PODS)
    )
    down = NodeReading(gaps=(Gap("nvml", GapReason.DRIVER_NOT_LOADED),), nvml_up=False)
    assert attribute(down, {}, PODS).gaps == down.gaps
