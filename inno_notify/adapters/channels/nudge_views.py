"""The view model of an idle nudge: a running pod's idle GPUs spelt for humans, and how to release them.

Like the summary's view (views.py), templates get plain strings and never compute; the strings
carry cluster values (pod, namespace, workspace and user names) unescaped, and each channel's
template environment escapes them. The release steps are written here once for every channel,
per kind of workload: a Job, a bare pod, a Coder workspace, a JupyterHub server, another workspace.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from inno_notify.adapters.channels import figures
from inno_notify.domain.live import IdleFinding, IdleGpu, finding_from_payload, findings_from_payload
from inno_notify.domain.parsing.workspace import CODER, JUPYTERHUB

MIB = 1024 * 1024
_PLATFORM_NAMES = {CODER: "Coder workspace", JUPYTERHUB: "JupyterHub server"}


@dataclass(frozen=True, slots=True)
class IdleGpuView:
    # "GPU 3 · NVIDIA A100-SXM4-80GB" or "MIG 3g.40gb on GPU 0 · NVIDIA A100-SXM4-80GB"
    label: str
    host: str
    since: str
    # "11.5 GiB in use" or ""
    memory: str


@dataclass(frozen=True, slots=True)
class NudgeView:
    """One idle pod as a nudge shows it."""

    cluster: str
    namespace: str
    pod: str
    node: str
    # "train-llama: 4 of 4 GPUs idle for 3 h 10 min" — the first line and the e-mail subject.
    headline: str
    # "Job train-llama (pod train-llama-x7k2p)", "Coder workspace alice/dev (pod coder-…)".
    workload: str
    idle_count: str
    idle_for: str
    idle_since: str
    idle_gpu_hours: str
    window: str
    gpus: tuple[IdleGpuView, ...]
    memory_note: str | None
    release: tuple[str, ...]

    @property
    def pod_ref(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> NudgeView:
        """The view of an outbox row's payload; raises ValueError when it lacks a part."""
        return cls.from_finding(finding_from_payload(payload))

    @classmethod
    def from_finding(cls, finding: IdleFinding) -> NudgeView:
        f = finding
        zone = ZoneInfo(f.timezone)
        held = f.gpus_held
        idle = len(f.idle)
        count = (
            f"all {held} GPUs"
            if idle == held and held > 1
            else f"{idle} of {held} GPU{'s' if held > 1 else ''}"
        )
        if held == 1 and idle == 1:
            count = "its GPU"
        idle_for = figures.duration((f.observed_at - f.idle_since).total_seconds())
        if f.since_at_least:
            idle_for = f"more than {idle_for}"
        since = _moment(f.idle_since, zone)
        memory_note = None
        if f.memory_held_mib is not None:
            memory_note = (
                f"GPU memory is allocated ({figures.size(f.memory_held_mib * MIB)}) but compute is idle: "
                "a process still holds the GPU (an idle notebook kernel, a stuck loop, a server waiting "
                "for requests)."
            )
        name = _short_name(f)
        return cls(
            cluster=f.cluster,
            namespace=f.namespace,
            pod=f.pod,
            node=f.node or "",
            headline=f"{name}: {count} idle for {idle_for}",
            workload=_workload(f),
            idle_count=count,
            idle_for=idle_for,
            idle_since=f"at least since {since}" if f.since_at_least else since,
            idle_gpu_hours=f"{figures.number(f.idle_gpu_hours)} GPU-h",
            window=figures.duration(f.window_minutes * 60),
            gpus=tuple(_gpu(g, zone) for g in f.idle),
            memory_note=memory_note,
            release=_release(f),
        )


@dataclass(frozen=True, slots=True)
class NudgeListView:
    """A round's nudge to one person: each idle pod's view, and how many more were not listed."""

    items: tuple[NudgeView, ...]
    more: int = 0

    @property
    def headline(self) -> str:
        """The one pod's headline, else how many pods idle (the e-mail subject, the first line)."""
        pods = len(self.items) + self.more
        if pods == 1:
            return self.items[0].headline
        return f"{pods} of your pods hold idle GPUs"

    @property
    def many(self) -> bool:
        return len(self.items) > 1 or self.more > 0

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any]) -> NudgeListView:
        """The view of a nudge row's payload, grouped or of one pod; ValueError when it lacks a part."""
        findings, more = findings_from_payload(payload)
        return cls(tuple(NudgeView.from_finding(f) for f in findings), more)


def _moment(moment: datetime, zone: ZoneInfo) -> str:
    local = moment.astimezone(zone)
    return f"{local:%a %d %b %H:%M} {local.tzname() or zone.key}"


def _gpu(g: IdleGpu, zone: ZoneInfo) -> IdleGpuView:
    label = f"MIG {g.mig_profile} on GPU {g.gpu}" if g.mig_profile else f"GPU {g.gpu}"
    if g.model:
        label += f" · {g.model}"
    memory = f"{figures.size(g.fb_held_mib * MIB)} in use" if g.fb_held_mib else ""
    return IdleGpuView(label, g.host or "", _moment(g.since, zone), memory)


def _short_name(f: IdleFinding) -> str:
    if f.platform == CODER and f.workspace_name:
        return f"workspace {f.workspace_name}"
    if f.platform == JUPYTERHUB:
        user = f.platform_user or f.owner
        server = f"JupyterHub server {f.workspace_name}" if f.workspace_name else "JupyterHub server"
        return f"{server} of {user}" if user else server
    if f.workload_kind == "job":
        return f.workload_name
    return f.pod


def _workload(f: IdleFinding) -> str:
    if f.workload_kind == "job":
        return f"Job {f.workload_name} (pod {f.pod})"
    if f.workload_kind == "workspace":
        kind = _PLATFORM_NAMES.get(f.platform or "", "Workspace")
        owner = f.platform_user or f.owner
        name = f.workspace_name or ""
        if f.platform == JUPYTERHUB:
            label = f"{kind} of {owner}" if owner else kind
            if name:
                label += f" ({name})"
        else:
            label = f"{kind} {owner}/{name}" if owner and name else f"{kind} {name or f.pod}"
        return f"{label} (pod {f.pod})"
    return f"Pod {f.pod}"


def _release(f: IdleFinding) -> tuple[str, ...]:
    ns, pod = f.namespace, f.pod
    steps: list[str] = []
    if f.workload_kind == "job":
        steps.append(
            f"If it is stuck or no longer needed, delete it: kubectl delete job {f.workload_name} -n {ns}"
        )
    elif f.platform == CODER:
        target = f"{f.platform_user}/{f.workspace_name}" if f.platform_user and f.workspace_name else pod
        steps.append(
            f"Stop the workspace while you do not use it: coder stop {target}"
            " (or Stop in the Coder dashboard)"
        )
    elif f.platform == JUPYTERHUB:
        where = f"server {f.workspace_name!r}" if f.workspace_name else "your server"
        steps.append(f"Stop {where} while you do not use it: File → Hub Control Panel → Stop My Server")
    elif f.workload_kind == "workspace":
        steps.append(f"Stop the workspace while you do not use it (its pod: {pod} in {ns})")
    else:
        steps.append(f"If it is stuck or no longer needed, delete it: kubectl delete pod {pod} -n {ns}")
    if len(f.idle) < f.gpus_held:
        steps.append(
            f"It uses {f.gpus_held - len(f.idle)} of its {f.gpus_held} GPUs: request "
            f"{f.gpus_held - len(f.idle)} next time and leave the rest to others"
        )
    else:
        steps.append("If it needs the GPU only now and then, request fewer GPUs (or a MIG slice) next time")
    return tuple(steps)
