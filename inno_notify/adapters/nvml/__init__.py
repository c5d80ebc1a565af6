"""NVML, through NVIDIA's ``pynvml`` module (the ``nvidia-ml-py`` distribution), and the host's /proc.

``NvmlSampler(pynvml).sample()`` reads every GPU and MIG instance of the node into a
``domain.agent.NodeReading`` (figures, processes, and gaps with their reasons); ``read_cgroups``
maps the PIDs it names to pods through ``/proc/PID/cgroup``. The module is injected: import
``pynvml`` where the agent is composed, never here, so that tests can pass a fake.
"""

from inno_notify.adapters.nvml.errors import classify
from inno_notify.adapters.nvml.procfs import read_cgroups
from inno_notify.adapters.nvml.sampler import NvmlSampler

__all__ = ["NvmlSampler", "classify", "read_cgroups"]
