"""The host's /proc, read for the PIDs NVML reports: which cgroup (so which pod) each one runs in.

NVML names processes by host PID, so the agent runs with ``hostPID: true`` and reads
``<proc_root>/<pid>/cgroup`` (world-readable, no capability needed). ``proc_root`` is a setting so
that tests point it at a fake tree. A process can exit between NVML's answer and this read: it is
then missing from the result, which the attribution counts as ``process_gone``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from inno_notify.domain.agent import CgroupRef, parse_cgroup

log = logging.getLogger(__name__)

# A cgroup file is a few hundred bytes; a larger one is not what we are looking for.
MAX_CGROUP_BYTES = 64 * 1024


def read_cgroups(proc_root: Path, pids: Iterable[int]) -> dict[int, CgroupRef | None]:
    """For each PID still running, its pod (None: not in a pod); exited PIDs are left out."""
    found: dict[int, CgroupRef | None] = {}
    for pid in sorted(set(pids)):
        try:
            with (proc_root / str(pid) / "cgroup").open("rb") as handle:
                raw = handle.read(MAX_CGROUP_BYTES)
        except (FileNotFoundError, ProcessLookupError, NotADirectoryError):
            continue
        except OSError as exc:
            log.debug("cannot read the cgroup of pid %d: %s", pid, exc)
            continue
        found[pid] = parse_cgroup(raw.decode("utf-8", "replace"))
    return found
