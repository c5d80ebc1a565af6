"""The view models of workflow summaries, "model is serving" notices and pipeline messages.

Like views.py for a job: every figure already spelt for humans ("35.5 / 80 GPU-min", "2 attempts",
"n/a (not measured)"), so user-overridable templates need no arithmetic. Strings are NOT escaped
here; each channel's template environment escapes them. Titles, texts, step names and messages
come from cluster objects or a pipeline's POST: hostile, and printed only through that escaping.
"""

from __future__ import annotations

from dataclasses import dataclass

from inno_notify.adapters.channels import figures
from inno_notify.domain.messages import PipelineMessage
from inno_notify.domain.model import JobStatus, Link
from inno_notify.domain.serving import ServingNotice
from inno_notify.domain.workflows import StepFigures, WorkflowKind, WorkflowSummary

__all__ = ["PipelineView", "ServingView", "StepView", "WorkflowView"]

_KIND_LABEL = {WorkflowKind.ARGO: "Argo workflow", WorkflowKind.AIRFLOW: "Airflow DAG run"}


def _gpu_figure(held: float | None, used: float | None, missing: str | None) -> str:
    if held is None:
        return figures.not_available(missing)
    return figures.used_of_held(used, held, missing)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _attempts(step: StepFigures) -> str:
    if step.attempts <= 1:
        return ""
    if not step.attempts_dropped:
        return _plural(step.attempts, "attempt")
    kept = step.attempts - step.attempts_dropped
    return f"{step.attempts} attempts ({kept} kept, the first and the last; {step.attempts_dropped} not)"


@dataclass(frozen=True, slots=True)
class StepView:
    name: str
    phase: str
    failed: bool
    attempts: str  # "" for one attempt, "2 attempts" otherwise
    duration: str
    gpus: str  # "2 GPUs", "no GPU"
    gpu_minutes: str  # "35.5 / 80 GPU-min (used / held)", "" for a step without GPUs
    exit_text: str
    message: str | None

    @classmethod
    def of(cls, step: StepFigures) -> StepView:
        duration = step.duration_seconds
        gpu = step.gpus > 0
        return cls(
            name=step.name,
            phase=step.phase,
            failed=step.failed,
            attempts=_attempts(step),
            duration=figures.duration(duration) if duration is not None else figures.not_available(None),
            gpus=figures.gpus(step.gpus) if gpu else "no GPU",
            gpu_minutes=_gpu_figure(step.gpu_minutes, step.used_gpu_minutes, step.missing) if gpu else "",
            exit_text=str(step.exit_code) if step.exit_code is not None else "n/a",
            message=step.message,
        )


@dataclass(frozen=True, slots=True)
class AdviceView:
    step: str
    message: str


@dataclass(frozen=True, slots=True)
class WorkflowView:
    """One finished workflow as a message shows it."""

    kind: str  # "Argo workflow" | "Airflow DAG run"
    cluster: str
    namespace: str
    name: str
    run_id: str | None
    ref: str  # "face-research/train-pipeline-x7k2p", with " · <run id>" for a DAG run
    status_text: str
    failed: bool
    duration: str
    steps: tuple[StepView, ...]
    more_steps: int
    steps_text: str  # "4 steps: 3 succeeded, 1 failed"
    gpu_minutes: str  # totals over the GPU steps, "n/a (…)" or "no GPU step"
    advice: tuple[AdviceView, ...]
    links: tuple[Link, ...]

    @classmethod
    def of(cls, summary: WorkflowSummary) -> WorkflowView:
        status = summary.status.value
        status_text = f"{status} ({summary.reason})" if summary.reason else status
        ref = f"{summary.namespace}/{summary.name}"
        if summary.run_id:
            ref += f" · {summary.run_id}"
        total = len(summary.steps) + summary.more_steps
        succeeded = sum(1 for s in summary.steps if s.phase == "Succeeded")
        failed = sum(1 for s in summary.steps if s.failed)
        counts = [f"{succeeded} succeeded"] + ([f"{failed} failed"] if failed else [])
        if summary.more_steps:
            counts.append(f"{summary.more_steps} not listed")
        if any(s.gpus > 0 for s in summary.steps) or summary.unmeasured_gpu_steps:
            gpu = _gpu_figure(summary.gpu_minutes, summary.used_gpu_minutes, None)
            if summary.unmeasured_gpu_steps and summary.gpu_minutes is not None:
                gpu += f" ({_plural(summary.unmeasured_gpu_steps, 'GPU step')} not measured)"
        else:
            gpu = "no GPU step"
        duration = summary.duration_seconds
        return cls(
            kind=_KIND_LABEL[summary.kind],
            cluster=summary.cluster,
            namespace=summary.namespace,
            name=summary.name,
            run_id=summary.run_id,
            ref=ref,
            status_text=status_text,
            failed=summary.status in (JobStatus.FAILED, JobStatus.DELETED),
            duration=figures.duration(duration) if duration is not None else figures.not_available(None),
            steps=tuple(StepView.of(step) for step in summary.steps),
            more_steps=summary.more_steps,
            steps_text=f"{_plural(total, 'step')}: {', '.join(counts)}",
            gpu_minutes=gpu,
            advice=tuple(AdviceView(step.name, text) for step in summary.steps for text in step.advice),
            links=summary.links,
        )


@dataclass(frozen=True, slots=True)
class ServingView:
    """A model that started serving, as a message shows it."""

    cluster: str
    namespace: str
    name: str
    ref: str
    revision: str
    url: str | None
    model: str  # "huggingface, s3://models/llama-chat/v3" or "n/a"
    resources: str  # "2 GPUs per replica, 1–2 replicas"
    mode: str | None
    trained_by: str | None  # "job face-research/train-resnet-7 (succeeded, 240 GPU-min held)"
    links: tuple[Link, ...]

    @classmethod
    def of(cls, notice: ServingNotice) -> ServingView:
        model = ", ".join(p for p in (notice.model_format, notice.storage_uri) if p) or "n/a"
        gpus = f"{figures.gpus(notice.gpus)} per replica" if notice.gpus > 0 else "no GPU"
        low, high = notice.min_replicas, notice.max_replicas
        if low is not None and high is not None and high != low:
            replicas = f", {low}–{high} replicas"
        elif low is not None or high is not None:
            replicas = f", {_plural(low if low is not None else high or 0, 'replica')}"
        else:
            replicas = ""
        trained = notice.trained_by
        trained_text = None
        if trained is not None:
            details = [trained.status] if trained.status else []
            if trained.gpu_minutes is not None:
                details.append(f"{figures.gpu_minutes(trained.gpu_minutes)} GPU-min held")
            trained_text = f"{trained.kind} {trained.namespace}/{trained.name}"
            if details:
                trained_text += f" ({', '.join(details)})"
        return cls(
            cluster=notice.cluster,
            namespace=notice.namespace,
            name=notice.name,
            ref=f"{notice.namespace}/{notice.name}",
            revision=notice.revision,
            url=notice.url,
            model=model,
            resources=gpus + replicas,
            mode=notice.mode,
            trained_by=trained_text,
            links=notice.links,
        )


@dataclass(frozen=True, slots=True)
class PipelineView:
    """A message a pipeline posted."""

    title: str
    text: str | None
    links: tuple[Link, ...]
    sender: str | None

    @classmethod
    def of(cls, message: PipelineMessage) -> PipelineView:
        return cls(title=message.title, text=message.text, links=message.links, sender=message.sender)
