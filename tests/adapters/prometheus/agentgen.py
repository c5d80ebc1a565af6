"""Generated series of the node agent (``inno-notify agent``) and the ground truth they imply.

The exposition follows ``inno_notify.service.agent_metrics``: per container and GPU
``inno_notify_gpu_process_memory_bytes`` and ``inno_notify_gpu_process_sm_util_percent`` while the
container has a process on the GPU, and per GPU ``inno_notify_gpu_memory_total_bytes`` and
``inno_notify_gpu_info`` on every sample the agent took. ``outages`` are spans in which the agent
took none (restarted, driver reloading): no series at all, not zeros. ``append`` adds the families
to an OpenMetrics file that ``metricgen`` wrote, before its ``# EOF``. The agent's scrapes fall
``OFFSET`` seconds after dcgm-exporter's, as two targets' do: never on a pod's start or end, so the
samples inside a pod's time are the same whether a Prometheus range includes its left end (2.x) or
not (3.x).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tests.adapters.prometheus.metricgen import scrape_times

Signal = Callable[[float], float]
OFFSET = 7.0


def agent_times(start: float, end: float, scrape: float) -> list[float]:
    return [t + OFFSET for t in scrape_times(start - OFFSET, end - OFFSET, scrape)]


@dataclass(frozen=True)
class AgentGpu:
    node: str
    index: int
    uuid: str
    total_bytes: int = 80 * 1024**3
    model: str = "NVIDIA A100-SXM4-80GB"


@dataclass(frozen=True)
class AgentProcess:
    """One container's processes on one GPU, from ``start`` to ``end``."""

    namespace: str
    pod: str
    container: str
    gpu: AgentGpu
    start: float
    end: float
    memory_bytes: Signal
    sm_percent: Signal


@dataclass
class ShareTruth:
    """What the agent wrote for one pod on one GPU; ``mean_over`` divides by the agent's samples."""

    memory: list[int] = field(default_factory=list)
    sm: list[float] = field(default_factory=list)

    @property
    def memory_peak(self) -> int:
        return max(self.memory)

    def mean_over(self, device_samples: int) -> float:
        return sum(self.sm) / device_samples


@dataclass
class AgentTruth:
    shares: dict[tuple[str, str, str], ShareTruth] = field(default_factory=lambda: defaultdict(ShareTruth))
    device_times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def share(self, namespace: str, pod: str, uuid: str) -> ShareTruth:
        return self.shares[(namespace, pod, uuid)]

    def device_samples(self, uuid: str, start: float, end: float) -> int:
        """The agent's samples of the GPU within a pod's held time [start, end]."""
        return sum(1 for t in self.device_times[uuid] if start <= t <= end)


def _up(t: float, outages: Sequence[tuple[float, float]]) -> bool:
    return not any(a <= t < b for a, b in outages)


def append(
    openmetrics: Path,
    gpus: Sequence[AgentGpu],
    processes: Sequence[AgentProcess],
    *,
    start: float,
    end: float,
    scrape: float,
    outages: Sequence[tuple[float, float]] = (),
    exported: bool = False,
) -> AgentTruth:
    truth = AgentTruth()
    families: dict[str, list[str]] = defaultdict(list)
    for gpu in gpus:
        device = f'gpu_uuid="{gpu.uuid}",gpu_index="{gpu.index}"'
        for t in agent_times(start, end, scrape):
            if not _up(t, outages):
                continue
            truth.device_times[gpu.uuid].append(t)
            families["inno_notify_gpu_memory_total_bytes"].append(f"{{{device}}} {gpu.total_bytes} {t:.3f}")
            info = f'gpu_uuid="{gpu.uuid}",gpu_index="{gpu.index}",model="{gpu.model}",node="{gpu.node}"'
            families["inno_notify_gpu_info"].append(f"{{{info}}} 1 {t:.3f}")
    for proc in processes:
        workload = f'namespace="{proc.namespace}",pod="{proc.pod}",container="{proc.container}"'
        if exported:
            # Scraped without honor_labels: the target's own labels win, the agent's become exported_*.
            workload = (
                f'exported_namespace="{proc.namespace}",exported_pod="{proc.pod}",'
                f'exported_container="{proc.container}",namespace="inno-notify",'
                f'pod="inno-notify-agent-{proc.gpu.node}",container="agent"'
            )
        labels = f'{workload},gpu_uuid="{proc.gpu.uuid}"'
        share = truth.share(proc.namespace, proc.pod, proc.gpu.uuid)
        for t in agent_times(proc.start, proc.end, scrape):
            if not _up(t, outages):
                continue
            memory = int(proc.memory_bytes(t))
            sm = round(proc.sm_percent(t), 3)
            families["inno_notify_gpu_process_memory_bytes"].append(f"{{{labels}}} {memory} {t:.3f}")
            families["inno_notify_gpu_process_sm_util_percent"].append(f"{{{labels}}} {sm} {t:.3f}")
            share.memory.append(memory)
            share.sm.append(sm)
    text = openmetrics.read_text()
    assert text.endswith("# EOF\n")
    with openmetrics.open("w") as out:
        out.write(text[: -len("# EOF\n")])
        for name, lines in sorted(families.items()):
            out.writelines(f"{name}{line}\n" for line in lines)
        out.write("# EOF\n")
    return truth
