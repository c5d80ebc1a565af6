"""A fake /proc tree: ``<root>/<pid>/cgroup`` files with the lines a kubelet's cgroups give."""

from __future__ import annotations

from pathlib import Path


def systemd_line(pod_uid: str, container_id: str, qos: str = "burstable") -> str:
    """cgroup v2, systemd driver, containerd: the default of current kubeadm clusters."""
    slice_uid = pod_uid.replace("-", "_")
    return (
        f"0::/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{slice_uid}.slice/"
        f"cri-containerd-{container_id}.scope\n"
    )


def cgroupfs_v1_lines(pod_uid: str, container_id: str) -> str:
    """cgroup v1, cgroupfs driver: one line per hierarchy."""
    return "".join(
        f"{n}:{controller}:/kubepods/besteffort/pod{pod_uid}/{container_id}\n"
        for n, controller in [(11, "memory"), (4, "cpu,cpuacct"), (1, "name=systemd")]
    )


class FakeProc:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def add(self, pid: int, cgroup: str) -> None:
        directory = self.root / str(pid)
        directory.mkdir(exist_ok=True)
        (directory / "cgroup").write_text(cgroup)

    def host_process(self, pid: int) -> None:
        self.add(pid, "0::/system.slice/nvidia-persistenced.service\n")

    def remove(self, pid: int) -> None:
        (self.root / str(pid) / "cgroup").unlink()
        (self.root / str(pid)).rmdir()
