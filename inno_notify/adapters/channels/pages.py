"""The job page: one run of a job as the link in its summary opens it, as HTML for phone and laptop.

Everything the summary says, and what it could not fit: the figures (with the reason where one is
missing), the chart as inline SVG (job_chart), each recommendation with its evidence (the figures
and the window it was computed from), the Kueue facts, the exit code with its termination
message, the pods and nodes, and the links to the job's logs and Grafana. Like the messages, the
template gets plain strings (views.SummaryView and the rows below) and escapes them itself
(autoescape); a configured template directory may override `web/job.html.j2`.

The team page is the digest page (digest_views.DigestRenderer.html_page); both share the
page's look (`web/_page_style.html.j2`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import jinja2
from markupsafe import Markup

from inno_notify.adapters.channels import figures
from inno_notify.adapters.channels.job_chart import NARROW_WIDTH, ChartJob, job_alt_text, render_job_svg
from inno_notify.adapters.channels.message_views import WorkflowView
from inno_notify.adapters.channels.render import Renderer, Templates, template_errors
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.domain.model import (
    JobRecord,
    PodRecord,
    Recommendation,
    TerminatedState,
    Usage,
    UsageSeries,
)
from inno_notify.domain.workflows import WorkflowSummary

JOB_PAGE = "web/job.html.j2"
WORKFLOW_PAGE = "web/workflow.html.j2"
# A termination message is written by the job's own code: shown, but not at any length.
MAX_MESSAGE_CHARS = 4000

# Evidence keys the right-sizing rules write, as a reader says them; others are shown as they are.
_EVIDENCE_LABELS: dict[str, str] = {
    "samples": "samples per series",
    "span_minutes": "measured over",
    "pods": "pods",
    "gpus": "GPUs",
    "idle_gpus": "idle GPUs",
    "util_mean_max_percent": "highest mean utilization of those GPUs",
    "gpu_memory_peak_bytes": "peak GPU memory",
    "memory_peak_bytes": "peak RAM",
    "cpu_cores_p95": "CPU p95",
    "oom_kills": "OOM kills",
    "slices_freed": "MIG slices freed",
    "runs": "runs considered",
    "window_start": "from",
    "window_end": "until",
}


@dataclass(frozen=True, slots=True)
class Fact:
    label: str
    value: str


@dataclass(frozen=True, slots=True)
class AdviceView:
    severity: str
    message: str
    field_path: str | None
    evidence: tuple[Fact, ...]


@dataclass(frozen=True, slots=True)
class PodView:
    name: str
    node: str
    phase: str
    started: str
    finished: str


@dataclass(frozen=True, slots=True)
class JobPageView:
    """One job run as its page shows it; every value a string, escaped by the template."""

    job: SummaryView
    owner: str
    team: str
    figures: tuple[Fact, ...]
    missing: tuple[str, ...]
    advice: tuple[AdviceView, ...]
    kueue: tuple[Fact, ...]
    termination_message: str | None
    pods: tuple[PodView, ...]
    chart_svg: str | None
    chart_alt: str
    log_url: str | None
    grafana_url: str | None


def job_page_view(
    job: JobRecord,
    usage: Usage | None,
    recommendations: Sequence[Recommendation],
    pods: Sequence[PodRecord],
    series: UsageSeries | None,
    renderer: Renderer,
    *,
    idle_percent: float = 5.0,
) -> JobPageView:
    summary = SummaryView.from_records(job, usage, recommendations, top=len(recommendations), series=series)
    chart = ChartJob(f"{job.namespace}/{job.name}", series, job.started_at) if series is not None else None
    svg = None
    if chart is not None:
        # Two layouts of one chart; the page's CSS shows the narrow one on a phone.
        wide = render_job_svg(chart, idle_percent=idle_percent, css_class="wide")
        narrow = render_job_svg(chart, idle_percent=idle_percent, width=NARROW_WIDTH, css_class="narrow")
        svg = None if wide is None or narrow is None else wide + narrow
    cpu = usage.cpu_cores_p95 if usage is not None else None
    rows = (
        Fact("Status", summary.status_text),
        Fact("Exit code", summary.exit_text),
        Fact("Runtime", summary.runtime),
        Fact("Queue wait", summary.queue_wait),
        *((Fact("GPUs", summary.gpu_model),) if summary.gpu_model else ()),
        Fact("GPU (used / held)", summary.gpu_minutes),
        Fact("GPU utilization", summary.gpu_util),
        Fact("Peak RAM", summary.peak_memory),
        Fact("Peak GPU memory", summary.peak_gpu_memory),
        Fact("CPU p95", figures.not_available(None) if cpu is None else f"{figures.number(cpu)} cores"),
        Fact("Started", _time(job.started_at)),
        Fact("Finished", _time(job.finished_at)),
    )
    ranked = sorted(
        recommendations,
        key=lambda r: (r.waste_gpu_minutes, r.waste_gib_hours, r.waste_core_hours),
        reverse=True,
    )
    return JobPageView(
        job=summary,
        owner=job.owner or "unknown",
        team=job.team or "none",
        figures=rows,
        missing=tuple(
            f"{m.figure.replace('_', ' ')}: {figures.not_available(m.reason)}"
            for m in (usage.missing if usage else ())
        ),
        advice=tuple(
            AdviceView(r.severity.value, r.message, r.field_path, _evidence(r.evidence)) for r in ranked
        ),
        kueue=_kueue(job),
        termination_message=_termination_message(job, pods),
        pods=tuple(
            PodView(
                p.name,
                p.node or "",
                p.phase,
                _time(p.scheduled_at or p.started_at),
                _time(p.finished_at or p.deleted_at),
            )
            for p in pods
        ),
        chart_svg=svg,
        chart_alt=job_alt_text(chart, idle_percent=idle_percent)
        if svg is not None and chart is not None
        else "",
        log_url=renderer.log_url(summary),
        grafana_url=renderer.grafana_url(summary),
    )


def _time(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


_EVIDENCE_ORDER = {key: i for i, key in enumerate(_EVIDENCE_LABELS)}


def _evidence(evidence: Mapping[str, float | int | str]) -> tuple[Fact, ...]:
    # In a fixed order: Postgres' JSONB does not keep the order the keys were written in.
    keys = sorted(evidence, key=lambda k: (_EVIDENCE_ORDER.get(k, len(_EVIDENCE_ORDER)), k))
    return tuple(
        Fact(_EVIDENCE_LABELS.get(key, key.replace("_", " ")), _evidence_value(key, evidence[key]))
        for key in keys
    )


def _evidence_value(key: str, value: float | int | str) -> str:
    if isinstance(value, str):
        if key.startswith("window_"):
            try:
                return _time(datetime.fromisoformat(value))
            except ValueError:
                return value
        return value
    if isinstance(value, bool):
        return str(value).lower()
    if key.endswith("_bytes"):
        return figures.size(value)
    if key == "span_minutes":
        return figures.duration(value * 60)
    if key.endswith("_percent"):
        return f"{figures.number(value)} %"
    return figures.number(value) if isinstance(value, float) else str(value)


def _kueue(job: JobRecord) -> tuple[Fact, ...]:
    k = job.kueue
    if k is None:
        return ()
    facts = [
        Fact("LocalQueue", k.local_queue or ""),
        Fact("ClusterQueue", k.cluster_queue or ""),
        Fact("Workload", k.workload_name or ""),
        Fact("Quota reserved", _time(k.quota_reserved_at)),
        Fact("Admitted", _time(k.admitted_at)),
        Fact("Evictions", str(k.evictions)),
        Fact("Preemptions", str(k.preemptions)),
    ]
    if k.last_eviction_reason:
        facts.append(Fact("Last eviction", k.last_eviction_reason))
    return tuple(f for f in facts if f.value)


def _termination_message(job: JobRecord, pods: Sequence[PodRecord]) -> str | None:
    """The message of the container exit that decided the job (its exit code and reason), the
    latest one if several match."""
    if job.exit_code is None:
        return None
    found: list[tuple[datetime, TerminatedState]] = []
    for pod in pods:
        for container in pod.containers:
            if container.init or container.sidecar:
                continue
            for state in (container.terminated, container.last_terminated):
                if state is not None and state.exit_code == job.exit_code and state.reason == job.exit_reason:
                    found.append(
                        (state.finished_at or pod.finished_at or datetime.min.replace(tzinfo=UTC), state)
                    )
    messages = [(t, s.message) for t, s in found if s.message]
    if not messages:
        return None
    message = max(messages, key=lambda m: m[0])[1] or ""
    return message if len(message) <= MAX_MESSAGE_CHARS else message[:MAX_MESSAGE_CHARS] + " … (cut)"


def _compiled(templates: Templates, name: str) -> jinja2.Template:
    with template_errors(name):
        return templates.get(name)


class JobPageRenderer:
    """Renders the job and workflow pages; build one at startup and share it (it compiles its
    templates once)."""

    def __init__(
        self, renderer: Renderer, template_dir: Path | None = None, *, idle_percent: float = 5.0
    ) -> None:
        self._renderer = renderer
        self._idle = idle_percent
        templates = Templates(template_dir)
        self._template = _compiled(templates, JOB_PAGE)
        self._workflow_template = _compiled(templates, WORKFLOW_PAGE)

    def workflow_html(self, summary: WorkflowSummary) -> str:
        """A workflow run's page: what its summary says, with more of its steps listed."""
        with template_errors(WORKFLOW_PAGE):
            return self._workflow_template.render(workflow=WorkflowView.of(summary), uid=summary.uid)

    def html(
        self,
        job: JobRecord,
        usage: Usage | None,
        recommendations: Sequence[Recommendation],
        pods: Sequence[PodRecord],
        series: UsageSeries | None,
    ) -> str:
        view = job_page_view(
            job, usage, recommendations, pods, series, self._renderer, idle_percent=self._idle
        )
        with template_errors(JOB_PAGE):
            return self._template.render(page=view, chart_svg=Markup(view.chart_svg or ""))
