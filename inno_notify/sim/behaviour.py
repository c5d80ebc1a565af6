"""How a simulated pod really runs on its GPUs: the truth behind the simulated metrics.

Its own module because the workload generator, the pipelines and the training runs all describe
pods with it, and the generator builds pipelines and training runs: one shape, no import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class Behaviour:
    """How the job really runs: the truth behind the traces."""

    gpu_util_percent: tuple[float, ...]  # mean utilization per GPU (0 = never used)
    gpu_memory_gib: tuple[float, ...]  # peak framebuffer per GPU
    memory_peak_bytes: int  # peak working set of the pod
    cpu_cores: float  # typical CPU use
    memory_spike_seconds: float = 0.0  # a short spike to the peak (the rest of the time ~60 %)
