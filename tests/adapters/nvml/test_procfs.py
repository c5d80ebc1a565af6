"""PIDs -> pods through a fake /proc tree: running pods, host processes, processes that exited."""

from __future__ import annotations

from pathlib import Path

from inno_notify.adapters.nvml import read_cgroups
from inno_notify.domain.agent import CgroupRef
from tests.adapters.nvml.fake_proc import FakeProc, cgroupfs_v1_lines, systemd_line

UID_A = "7c4b3bde-1f0e-4a8e-9d4e-2c8a1e6f9b10"
UID_B = "0a1b2c3d-4e5f-4a8e-9d4e-2c8a1e6f9b10"
CID_A, CID_B = "a" * 64, "b" * 64


def test_read_cgroups(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path / "proc")
    proc.add(101, systemd_line(UID_A, CID_A))
    proc.add(201, cgroupfs_v1_lines(UID_B, CID_B))
    proc.host_process(300)
    (tmp_path / "proc" / "400").mkdir()  # exited while we looked: the directory without its files
    (tmp_path / "proc" / "500").write_text("")  # not even a directory
    assert read_cgroups(tmp_path / "proc", [101, 201, 300, 400, 500, 600, 101]) == {
        101: CgroupRef(UID_A, CID_A),
        201: CgroupRef(UID_B, CID_B),
        300: None,
    }


def test_a_huge_cgroup_file_is_read_only_in_part(tmp_path: Path) -> None:
    proc = FakeProc(tmp_path)
    proc.add(7, "0::/" + "x" * 1_000_000 + "\n" + systemd_line(UID_A, CID_A))
    assert read_cgroups(tmp_path, [7]) == {7: None}
