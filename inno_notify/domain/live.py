"""Live nudges, decided: which running GPU pods idle, since when, what it cost so far, and when to nudge.

The live check (service/live_check.py) hands over, per running GPU pod, what Prometheus saw of each of
its GPUs over the last ``window`` (the sliding window of ``live.idle_minutes``): the highest
utilization, how many samples there were, the least GPU memory in use, and, for a GPU that stayed
idle, when it was last busy. What is left here is pure:

- A GPU is idle when its utilization stayed below the threshold (``rightsizing.idle_gpu_util_percent``)
  for the whole window: every sample below it, and samples covering at least ``min_coverage`` of
  the window (a GPU whose metrics only just appeared is not "idle for an hour"). A pod held for less
  than the window is never idle yet. A GPU without samples is unknown, never idle.
- It has been idle since its last busy sample within the lookback, or since the pod got its GPUs;
  where neither is within the lookback, "at least since" the lookback's start.
- The GPU-hours held idle so far are, over the idle GPUs, the GPU-equivalents each holds (the pod's
  GPU-equivalents shared by its GPUs: a MIG slice counts its share) × the time since it idles.
- "GPU memory is allocated but compute is idle" when an idle GPU kept at least ``memory_held_mib``
  of framebuffer in use all the window: a process (a notebook kernel, a stuck training loop) still
  holds the GPU, which a CUDA context alone (a few hundred MiB) does not reach.
- At most one nudge per pod per ``repeat_hours``: the time of the last nudge is read from the outbox,
  so a restart does not nudge again. A time-bucketed dedup key keeps two writers at the same moment
  from enqueuing the same nudge twice. Within ``quiet_hours`` no nudge is planned; the first check
  after them nudges with the figures of that moment.

A person gets one nudge per round, on each of their channels, listing all their idle pods (the
ones with most idle GPU-hours first, at most ``NUDGE_PODS_LISTED``, and how many more): anyone can
name a colleague in ``inno-notify/owner`` on many pods, and that must not become many messages.
The findings travel in the outbox row's payload (``findings_to_payload``; a row written before the
grouping carries one finding under ``nudge``), so that the dispatcher renders it without reading
anything else; what the weekly digest adds up of it is a ``NudgeEntry``
(``nudge_entry``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from inno_notify.domain.digest import NudgeEntry
from inno_notify.domain.model import JobRecord, NotificationKind, PodRecord, WorkloadKind
from inno_notify.domain.parsing.workspace import workspace_identity

__all__ = [
    "DEFAULT_MEMORY_HELD_MIB",
    "GpuWindow",
    "IdleFinding",
    "IdleGpu",
    "IdlePolicy",
    "QuietHours",
    "find_idle",
    "finding_from_payload",
    "finding_to_payload",
    "findings_from_payload",
    "findings_to_payload",
    "held_from",
    "in_quiet_hours",
    "nudge_dedup_key",
    "nudge_due",
    "nudge_entry",
    "parse_quiet_hours",
]

DEFAULT_MEMORY_HELD_MIB = 1024.0
DEFAULT_MIN_COVERAGE = 0.5
PAYLOAD_KEY = "nudge"
# A round's nudge to one person: the findings listed, and how many more idle pods were left out.
LIST_KEY = "nudges"
MORE_KEY = "nudges_more"
NUDGE_PODS_LISTED = 20
_CLOCK = re.compile(r"([01][0-9]|2[0-3]):([0-5][0-9])")


@dataclass(frozen=True, slots=True)
class GpuWindow:
    """What Prometheus saw of one GPU (or MIG instance) of a running pod over the window.

    ``util_max_percent`` is the highest utilization (GR_ENGINE_ACTIVE × 100 where the GPU reports
    it, else GPU_UTIL); ``fb_held_mib`` the least framebuffer in use; ``busy_at`` the last time
    within the lookback the GPU was at or above the threshold (None: never, or not asked).
    """

    gpu: str
    uuid: str | None = None
    model: str | None = None
    mig_profile: str | None = None
    host: str | None = None
    util_max_percent: float | None = None
    samples: int = 0
    fb_held_mib: float | None = None
    busy_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    window_seconds: float
    idle_util_percent: float
    scrape_seconds: float = 15.0
    min_coverage: float = DEFAULT_MIN_COVERAGE
    memory_held_mib: float = DEFAULT_MEMORY_HELD_MIB

    def idle(self, gpu: GpuWindow) -> bool:
        """Idle the whole window: every sample below the threshold, and enough of them."""
        if gpu.util_max_percent is None or not math.isfinite(gpu.util_max_percent):
            return False
        expected = self.window_seconds / max(self.scrape_seconds, 1e-9)
        enough = gpu.samples >= max(2.0, self.min_coverage * expected)
        return enough and gpu.util_max_percent < self.idle_util_percent


@dataclass(frozen=True, slots=True)
class IdleGpu:
    gpu: str
    since: datetime
    uuid: str | None = None
    model: str | None = None
    mig_profile: str | None = None
    host: str | None = None
    fb_held_mib: float | None = None


@dataclass(frozen=True, slots=True)
class IdleFinding:
    """A running pod with GPUs that idled the whole window: what a nudge says about it."""

    cluster: str
    namespace: str
    pod: str
    pod_uid: str
    node: str | None
    workload_kind: str
    workload_name: str
    workload_uid: str
    owner: str | None
    team: str | None
    gpus_held: int
    gpu_equivalents: float
    idle: tuple[IdleGpu, ...]
    # Since when every idle GPU has idled (the latest of their `since`), and whether that is only
    # a lower bound (no busy sample within the lookback, and the pod is older than it).
    idle_since: datetime
    since_at_least: bool
    idle_gpu_equivalents: float
    idle_gpu_hours: float
    # Framebuffer kept in use on the idle GPUs (MiB) when it shows a process holding them, else None.
    memory_held_mib: float | None
    observed_at: datetime
    window_minutes: float
    # The workspace platform (coder, jupyterhub, workspace) and its names; None for jobs and pods.
    platform: str | None = None
    platform_user: str | None = None
    workspace_name: str | None = None
    timezone: str = "UTC"

    @property
    def memory_held(self) -> bool:
        return self.memory_held_mib is not None


def held_from(pod: PodRecord) -> datetime | None:
    """When the pod got its GPUs (CONTRACT.md §4): scheduled, else started."""
    return pod.scheduled_at or pod.started_at


def find_idle(
    workload: JobRecord,
    pod: PodRecord,
    gpus: Sequence[GpuWindow],
    now: datetime,
    policy: IdlePolicy,
    lookback_start: datetime,
    *,
    timezone: str = "UTC",
) -> IdleFinding | None:
    """The finding for a pod whose GPUs (some or all) idled the whole window ending at `now`, else None."""
    start = held_from(pod)
    window_start = now - timedelta(seconds=policy.window_seconds)
    if start is None or start > window_start or not gpus:
        return None
    idle_windows = [g for g in gpus if policy.idle(g)]
    if not idle_windows:
        return None
    per_gpu = pod.gpu_equivalents / len(gpus) if pod.gpu_equivalents > 0 else 1.0
    at_least = False
    idle: list[IdleGpu] = []
    for g in sorted(idle_windows, key=lambda g: (g.host or "", g.gpu, g.uuid or "", g.mig_profile or "")):
        since = max(g.busy_at, start) if g.busy_at is not None else max(start, lookback_start)
        at_least = at_least or (g.busy_at is None and start < lookback_start)
        # A busy sample from just before the window can be seen up to a lookback delta into it.
        since = min(since, window_start)
        held = g.fb_held_mib if g.fb_held_mib is not None and g.fb_held_mib >= 0 else None
        idle.append(IdleGpu(g.gpu, since, g.uuid, g.model, g.mig_profile, g.host, held))
    hours = sum((now - g.since).total_seconds() for g in idle) / 3600 * per_gpu
    held_mib = [g.fb_held_mib for g in idle if g.fb_held_mib is not None]
    memory = sum(held_mib) if any(m >= policy.memory_held_mib for m in held_mib) else None
    identity = workspace_identity(workload.labels) if workload.kind is WorkloadKind.WORKSPACE else None
    return IdleFinding(
        cluster=pod.cluster,
        namespace=pod.namespace,
        pod=pod.name,
        pod_uid=pod.uid,
        node=pod.node,
        workload_kind=workload.kind.value,
        workload_name=workload.name,
        workload_uid=workload.uid,
        owner=workload.owner,
        team=workload.team,
        gpus_held=len(gpus),
        gpu_equivalents=pod.gpu_equivalents,
        idle=tuple(idle),
        idle_since=max(g.since for g in idle),
        since_at_least=at_least,
        idle_gpu_equivalents=per_gpu * len(idle),
        idle_gpu_hours=hours,
        memory_held_mib=memory,
        observed_at=now,
        window_minutes=policy.window_seconds / 60,
        platform=identity.platform if identity else None,
        platform_user=identity.user if identity else None,
        workspace_name=identity.name if identity else None,
        timezone=timezone,
    )


# --- when to nudge --------------------------------------------------------------------------------


def nudge_due(last_nudged_at: datetime | None, now: datetime, repeat_hours: float) -> bool:
    """True unless the pod was nudged less than `repeat_hours` ago."""
    return last_nudged_at is None or now - last_nudged_at >= timedelta(hours=repeat_hours)


def nudge_dedup_key(
    cluster: str, pod_uid: str, now: datetime, repeat_hours: float, channel: str, recipient: str
) -> str:
    """One row per pod, period of `repeat_hours`, channel and recipient: writers racing at the same
    moment write one row (the spacing itself is kept by `nudge_due`)."""
    bucket = math.floor(now.timestamp() / (repeat_hours * 3600))
    return f"{cluster}/{pod_uid}/{NotificationKind.IDLE_NUDGE.value}/{bucket}/{channel}/{recipient}"


@dataclass(frozen=True, slots=True)
class QuietHours:
    """A daily period without nudges, in a zone; `start` after `end` spans midnight."""

    start: time
    end: time
    timezone: str = "UTC"


def parse_quiet_hours(text: str, timezone: str = "UTC") -> QuietHours:
    """ "22:00-07:00" → QuietHours; raises ValueError for anything else (or an empty period)."""
    first, sep, second = text.strip().partition("-")
    a, b = _CLOCK.fullmatch(first.strip()), _CLOCK.fullmatch(second.strip())
    if not sep or a is None or b is None:
        raise ValueError(f"quiet hours must look like 22:00-07:00, got {text!r}")
    start, end = time(int(a[1]), int(a[2])), time(int(b[1]), int(b[2]))
    if start == end:
        raise ValueError(f"quiet hours {text!r} are empty")
    ZoneInfo(timezone)  # raises for an unknown zone
    return QuietHours(start, end, timezone)


def in_quiet_hours(now: datetime, quiet: QuietHours | None) -> bool:
    if quiet is None:
        return False
    local = now.astimezone(ZoneInfo(quiet.timezone)).time().replace(tzinfo=None)
    if quiet.start < quiet.end:
        return quiet.start <= local < quiet.end
    return local >= quiet.start or local < quiet.end


def nudge_entry(finding: IdleFinding) -> NudgeEntry:
    """What the team's digest keeps of a nudge (domain.digest.nudged_pod_rows adds them up)."""
    return NudgeEntry(
        cluster=finding.cluster,
        pod_uid=finding.pod_uid,
        namespace=finding.namespace,
        pod=finding.pod,
        kind=finding.workload_kind,
        owner=finding.owner,
        observed_at=_epoch(finding.observed_at),
        idle_since=_epoch(finding.idle_since),
        idle_gpu_equivalents=finding.idle_gpu_equivalents,
    )


# --- the payload of a nudge's outbox row ----------------------------------------------------------


def _epoch(moment: datetime) -> float:
    return round(moment.timestamp(), 3)


def finding_to_payload(finding: IdleFinding) -> dict[str, Any]:
    """The finding as JSON (times as Unix seconds, which the digest's SQL adds up)."""
    return {
        "cluster": finding.cluster,
        "namespace": finding.namespace,
        "pod": finding.pod,
        "pod_uid": finding.pod_uid,
        "node": finding.node,
        "workload_kind": finding.workload_kind,
        "workload_name": finding.workload_name,
        "workload_uid": finding.workload_uid,
        "owner": finding.owner,
        "team": finding.team,
        "gpus_held": finding.gpus_held,
        "gpu_equivalents": finding.gpu_equivalents,
        "idle": [
            {
                "gpu": g.gpu,
                "since": _epoch(g.since),
                "uuid": g.uuid,
                "model": g.model,
                "mig_profile": g.mig_profile,
                "host": g.host,
                "fb_held_mib": g.fb_held_mib,
            }
            for g in finding.idle
        ],
        "idle_since": _epoch(finding.idle_since),
        "since_at_least": finding.since_at_least,
        "idle_gpu_equivalents": finding.idle_gpu_equivalents,
        "idle_gpu_hours": finding.idle_gpu_hours,
        "memory_held_mib": finding.memory_held_mib,
        "observed_at": _epoch(finding.observed_at),
        "window_minutes": finding.window_minutes,
        "platform": finding.platform,
        "platform_user": finding.platform_user,
        "workspace_name": finding.workspace_name,
        "timezone": finding.timezone,
    }


def _text(data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ValueError(f"nudge payload: {key} is not text")
    return value


def _number(data: Mapping[str, Any], key: str, *, optional: bool = False) -> Any:
    value = data.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"nudge payload: {key} is not a number")
    return float(value)


def _moment(data: Mapping[str, Any], key: str) -> datetime:
    try:
        return datetime.fromtimestamp(_number(data, key), tz=UTC)
    except (OverflowError, OSError) as exc:
        raise ValueError(f"nudge payload: {key} is not a time") from exc


def findings_to_payload(findings: Sequence[IdleFinding]) -> dict[str, Any]:
    """One person's findings of a round: the most idle GPU-hours first, NUDGE_PODS_LISTED listed."""
    ranked = sorted(findings, key=lambda f: (-f.idle_gpu_hours, f.namespace, f.pod, f.pod_uid))
    listed = ranked[:NUDGE_PODS_LISTED]
    return {LIST_KEY: [finding_to_payload(f) for f in listed], MORE_KEY: len(ranked) - len(listed)}


def findings_from_payload(payload: Mapping[str, Any]) -> tuple[tuple[IdleFinding, ...], int]:
    """(the findings listed, how many more there were) of a nudge row, grouped or of one pod;
    raises ValueError when the payload lacks a part."""
    listed = payload.get(LIST_KEY)
    if listed is None:
        return (finding_from_payload(payload),), 0
    if not isinstance(listed, list) or not listed:
        raise ValueError("nudge payload: no finding listed")
    more = payload.get(MORE_KEY, 0)
    if isinstance(more, bool) or not isinstance(more, int) or more < 0:
        raise ValueError("nudge payload: nudges_more is not a count")
    return tuple(finding_from_payload({PAYLOAD_KEY: item}) for item in listed), more


def finding_from_payload(payload: Mapping[str, Any]) -> IdleFinding:
    """The finding an outbox row carries; raises ValueError when the payload lacks a part."""
    data = payload.get(PAYLOAD_KEY)
    if not isinstance(data, Mapping):
        raise ValueError("nudge payload: no nudge")
    entries = data.get("idle")
    if not isinstance(entries, list) or not entries or not all(isinstance(e, Mapping) for e in entries):
        raise ValueError("nudge payload: no idle GPU")
    idle = tuple(
        IdleGpu(
            gpu=_text(e, "gpu"),
            since=_moment(e, "since"),
            uuid=_text(e, "uuid", optional=True),
            model=_text(e, "model", optional=True),
            mig_profile=_text(e, "mig_profile", optional=True),
            host=_text(e, "host", optional=True),
            fb_held_mib=_number(e, "fb_held_mib", optional=True),
        )
        for e in entries
    )
    timezone = _text(data, "timezone")
    try:
        ZoneInfo(timezone)
    except (ValueError, KeyError) as exc:
        raise ValueError(f"nudge payload: unknown time zone {timezone!r}") from exc
    return IdleFinding(
        cluster=_text(data, "cluster"),
        namespace=_text(data, "namespace"),
        pod=_text(data, "pod"),
        pod_uid=_text(data, "pod_uid"),
        node=_text(data, "node", optional=True),
        workload_kind=_text(data, "workload_kind"),
        workload_name=_text(data, "workload_name"),
        workload_uid=_text(data, "workload_uid"),
        owner=_text(data, "owner", optional=True),
        team=_text(data, "team", optional=True),
        gpus_held=int(_number(data, "gpus_held")),
        gpu_equivalents=_number(data, "gpu_equivalents"),
        idle=idle,
        idle_since=_moment(data, "idle_since"),
        since_at_least=bool(data.get("since_at_least")),
        idle_gpu_equivalents=_number(data, "idle_gpu_equivalents"),
        idle_gpu_hours=_number(data, "idle_gpu_hours"),
        memory_held_mib=_number(data, "memory_held_mib", optional=True),
        observed_at=_moment(data, "observed_at"),
        window_minutes=_number(data, "window_minutes"),
        platform=_text(data, "platform", optional=True),
        platform_user=_text(data, "platform_user", optional=True),
        workspace_name=_text(data, "workspace_name", optional=True),
        timezone=timezone,
    )
