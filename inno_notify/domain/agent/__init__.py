"""The node agent's pure logic: which pod a host process belongs to, and what it used of which GPU.

`cgroup` reads a process's cgroup lines into a pod UID and container ID, `pods` reads a pod object
into the names the metrics carry, `readings` holds what NVML said about the node's GPUs (and what it
could not say), and `attribution` joins the three into one series per container and GPU. The
adapters read NVML and /proc; the service runs the loop; nothing here does I/O.
"""

from inno_notify.domain.agent.attribution import (
    Attribution,
    ProcessSeries,
    SeriesKey,
    Unattributed,
    attribute,
)
from inno_notify.domain.agent.cgroup import CgroupRef, parse_cgroup
from inno_notify.domain.agent.pods import PodIdentity, parse_pod_identity
from inno_notify.domain.agent.readings import DeviceReading, Gap, GapReason, NodeReading, ProcessReading

__all__ = [
    "Attribution",
    "CgroupRef",
    "DeviceReading",
    "Gap",
    "GapReason",
    "NodeReading",
    "PodIdentity",
    "ProcessReading",
    "ProcessSeries",
    "SeriesKey",
    "Unattributed",
    "attribute",
    "parse_cgroup",
    "parse_pod_identity",
]
