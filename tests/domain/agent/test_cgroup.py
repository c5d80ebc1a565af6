"""Host PID -> pod: /proc/PID/cgroup lines as kubelets with each cgroup driver and runtime write them."""

from __future__ import annotations

import pytest

from inno_notify.domain.agent.cgroup import MAX_LINES, CgroupRef, parse_cgroup

UID = "7c4b3bde-1f0e-4a8e-9d4e-2c8a1e6f9b10"
UID_ = UID.replace("-", "_")
CID = "3f9a2c1d4e5b6a7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f7"
STATIC_UID = "6b7fd0f7a1b0c5d7c8e1f2a3b4c5d6e7"  # a static pod's UID is its config hash: 32 hex

IN_CONTAINER = CgroupRef(UID, CID)
POD_ONLY = CgroupRef(UID, None)

# A cgroup v1 file: one line per hierarchy, as on an Ubuntu 20.04 node with the cgroupfs driver.
V1_CGROUPFS_DOCKER = (
    "\n".join(
        f"{n}:{ctl}:/kubepods/besteffort/pod{UID}/{CID}"
        for n, ctl in [
            (12, "hugetlb"),
            (11, "memory"),
            (10, "cpu,cpuacct"),
            (9, "devices"),
            (8, "pids"),
            (7, "blkio"),
            (6, "net_cls,net_prio"),
            (5, "freezer"),
            (4, "perf_event"),
            (3, "cpuset"),
            (2, "rdma"),
            (1, "name=systemd"),
        ]
    )
    + "\n0::/system.slice/containerd.service\n"
)

# v1 with the systemd driver and dockershim/cri-dockerd.
V1_SYSTEMD_DOCKER = (
    f"11:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/docker-{CID}.scope\n"
    f"10:cpu,cpuacct:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/docker-{CID}.scope\n"
    f"1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/docker-{CID}.scope\n"
)

# Hybrid: the named systemd hierarchy stops at the pod, the memory controller names the container.
V1_HYBRID_PARTIAL = (
    f"1:name=systemd:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice\n"
    f"4:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{CID}.scope\n"
    "0::/\n"
)

CASES = [
    pytest.param(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
        IN_CONTAINER,
        id="v2 systemd containerd burstable",
    ),
    pytest.param(
        f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/crio-{CID}.scope\n",
        IN_CONTAINER,
        id="v2 systemd cri-o besteffort",
    ),
    pytest.param(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-{CID}.scope/container\n",
        IN_CONTAINER,
        id="v2 systemd cri-o with crun's container level",
    ),
    pytest.param(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/crio-conmon-{CID}.scope\n",
        POD_ONLY,
        id="v2 cri-o conmon is the pod's, not a container's",
    ),
    pytest.param(
        f"0::/kubepods.slice/kubepods-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
        IN_CONTAINER,
        id="v2 systemd guaranteed pod (no QoS level)",
    ),
    pytest.param(f"0::/kubepods/burstable/pod{UID}/{CID}\n", IN_CONTAINER, id="v2 cgroupfs containerd"),
    pytest.param(f"0::/kubepods/pod{UID}/{CID}\n", IN_CONTAINER, id="v2 cgroupfs guaranteed"),
    pytest.param(
        f"0::/../../kubepods-besteffort-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
        IN_CONTAINER,
        id="v2 seen from another cgroup namespace (relative path)",
    ),
    pytest.param(
        f"0::/../../../burstable/pod{UID}/{CID}\n",
        IN_CONTAINER,
        id="v2 cgroupfs seen from another cgroup namespace",
    ),
    pytest.param(
        "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/"
        f"kubelet-kubepods-besteffort-pod{UID_}.slice/cri-containerd-{CID}.scope\n",
        IN_CONTAINER,
        id="v2 kind node (kubelet cgroup root)",
    ),
    pytest.param(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{STATIC_UID}.slice/cri-containerd-{CID}.scope\n",
        CgroupRef(STATIC_UID, CID),
        id="v2 static pod with a 32-hex UID",
    ),
    pytest.param(V1_CGROUPFS_DOCKER, IN_CONTAINER, id="v1 cgroupfs docker, every hierarchy"),
    pytest.param(V1_SYSTEMD_DOCKER, IN_CONTAINER, id="v1 systemd docker"),
    pytest.param(V1_HYBRID_PARTIAL, IN_CONTAINER, id="v1 hybrid: the line naming the container wins"),
    pytest.param(
        f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice\n",
        POD_ONLY,
        id="v2 process in the pod cgroup itself",
    ),
    pytest.param(
        f"0::/kubepods/burstable/pod{UID}/not-a-container-id\n",
        POD_ONLY,
        id="unknown level below the pod",
    ),
    # Not in a pod.
    pytest.param("0::/system.slice/sshd.service\n", None, id="host service"),
    pytest.param("0::/user.slice/user-1000.slice/session-3.scope\n", None, id="login session"),
    pytest.param("0::/init.scope\n", None, id="init"),
    pytest.param(f"0::/system.slice/docker-{CID}.scope\n", None, id="plain docker container, no pod"),
    pytest.param("12:memory:/\n1:name=systemd:/\n0::/\n", None, id="root cgroup v1"),
    # Hostile or broken.
    pytest.param("", None, id="empty (process exited while reading)"),
    pytest.param("not a cgroup line\n", None, id="garbage"),
    pytest.param("0::/kubepods/burstable/pod1234/abc\n", None, id="UID too short"),
    pytest.param(f"0::/kubepods/burstable/pod{UID}x/{CID}\n", None, id="UID with a stray character"),
    pytest.param(f"0::/kubepods/burstable/pod{'g' * 36}/{CID}\n", None, id="UID not hex"),
    pytest.param("0::/kubepods/\x00pod\x00/\n", None, id="NUL bytes"),
    pytest.param("0::/" + "a/" * 50_000 + "\n", None, id="one huge line"),
    pytest.param("0::/\n" * (MAX_LINES + 10) + f"0::/kubepods/pod{UID}/{CID}\n", None, id="too many lines"),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_parse_cgroup(text: str, expected: CgroupRef | None) -> None:
    assert parse_cgroup(text) == expected


def test_upper_case_uid_is_normalized() -> None:
    line = f"0::/kubepods/burstable/pod{UID.upper()}/{CID}\n"
    assert parse_cgroup(line) == IN_CONTAINER
