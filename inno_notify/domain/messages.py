"""The messages that carry their whole content in the outbox row: workflow summaries, "model is
serving" notices, pipeline messages; and their one JSON encoding.

A job summary is rendered from the job's stored figures at send time; these three are not tied to
one job row, so what they say is fixed when they are planned and travels in the row's payload
under :data:`MESSAGE_KEY`, next to the recipient's addresses that routing puts there. Each shape
has one encoder and one decoder here; the decoder checks every field it reads (a row written by an
older version, or edited by hand, raises :class:`ValueError` instead of rendering half a message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from inno_notify.domain.message_json import (
    MESSAGE_KEY,
    Json,
    iso,
    read_field,
    read_integer,
    read_message,
    read_number,
    read_objects,
    read_required_text,
    read_text,
    read_time,
)
from inno_notify.domain.model import JobStatus, Link
from inno_notify.domain.serving import ServingNotice, TrainedBy
from inno_notify.domain.workflows import StepFigures, WorkflowKind, WorkflowSummary

__all__ = [
    "MESSAGE_KEY",
    "PipelineMessage",
    "decode_pipeline",
    "decode_serving",
    "decode_workflow",
    "encode_pipeline",
    "encode_serving",
    "encode_workflow",
]


@dataclass(frozen=True, slots=True)
class PipelineMessage:
    """A message a pipeline posted (POST /api/v1/events): who posted it (the token's name), under
    which key, and what it says. Rendered and escaped like a summary."""

    key: str
    title: str
    text: str | None = None
    links: tuple[Link, ...] = ()
    sender: str | None = None
    created_at: datetime | None = None


# --- links ---------------------------------------------------------------------------------------


def _encode_links(links: Sequence[Link]) -> list[Json]:
    return [{"title": link.title, "url": link.url} for link in links]


def _decode_links(data: Mapping[str, Any]) -> tuple[Link, ...]:
    items = read_objects(data, "links")
    return tuple(Link(read_required_text(item, "title"), read_required_text(item, "url")) for item in items)


# --- workflow summaries ---------------------------------------------------------------------------


def encode_workflow(summary: WorkflowSummary) -> Json:
    return {
        "cluster": summary.cluster,
        "uid": summary.uid,
        "kind": summary.kind.value,
        "namespace": summary.namespace,
        "name": summary.name,
        "status": summary.status.value,
        "run_id": summary.run_id,
        "reason": summary.reason,
        "started_at": iso(summary.started_at),
        "finished_at": iso(summary.finished_at),
        "steps": [
            {
                "name": step.name,
                "phase": step.phase,
                "attempts": step.attempts,
                "attempts_dropped": step.attempts_dropped,
                "started_at": iso(step.started_at),
                "finished_at": iso(step.finished_at),
                "exit_code": step.exit_code,
                "message": step.message,
                "gpus": step.gpus,
                "gpu_minutes": step.gpu_minutes,
                "used_gpu_minutes": step.used_gpu_minutes,
                "missing": step.missing,
                "advice": list(step.advice),
            }
            for step in summary.steps
        ],
        "more_steps": summary.more_steps,
        "gpu_minutes": summary.gpu_minutes,
        "used_gpu_minutes": summary.used_gpu_minutes,
        "unmeasured_gpu_steps": summary.unmeasured_gpu_steps,
        "links": _encode_links(summary.links),
    }


def _step(data: Mapping[str, Any]) -> StepFigures:
    advice = data.get("advice") or []
    if not isinstance(advice, list) or not all(isinstance(a, str) for a in advice):
        raise ValueError("advice: expected a list of strings")
    return StepFigures(
        name=read_required_text(data, "name"),
        phase=read_required_text(data, "phase"),
        attempts=read_integer(data, "attempts") or 1,
        attempts_dropped=read_integer(data, "attempts_dropped") or 0,
        started_at=read_time(data, "started_at"),
        finished_at=read_time(data, "finished_at"),
        exit_code=read_integer(data, "exit_code"),
        message=read_text(data, "message"),
        gpus=read_number(data, "gpus") or 0.0,
        gpu_minutes=read_number(data, "gpu_minutes"),
        used_gpu_minutes=read_number(data, "used_gpu_minutes"),
        missing=read_text(data, "missing"),
        advice=tuple(advice),
    )


def decode_workflow(payload: Mapping[str, Any]) -> WorkflowSummary:
    data = read_message(payload)
    return WorkflowSummary(
        cluster=read_required_text(data, "cluster"),
        uid=read_required_text(data, "uid"),
        kind=WorkflowKind(read_required_text(data, "kind")),
        namespace=read_required_text(data, "namespace"),
        name=read_required_text(data, "name"),
        status=JobStatus(read_required_text(data, "status")),
        run_id=read_text(data, "run_id"),
        reason=read_text(data, "reason"),
        started_at=read_time(data, "started_at"),
        finished_at=read_time(data, "finished_at"),
        steps=tuple(_step(step) for step in read_objects(data, "steps")),
        more_steps=read_integer(data, "more_steps") or 0,
        gpu_minutes=read_number(data, "gpu_minutes"),
        used_gpu_minutes=read_number(data, "used_gpu_minutes"),
        unmeasured_gpu_steps=read_integer(data, "unmeasured_gpu_steps") or 0,
        links=_decode_links(data),
    )


# --- "model is serving" ---------------------------------------------------------------------------


def encode_serving(notice: ServingNotice) -> Json:
    trained = notice.trained_by
    return {
        "cluster": notice.cluster,
        "uid": notice.uid,
        "namespace": notice.namespace,
        "name": notice.name,
        "revision": notice.revision,
        "url": notice.url,
        "mode": notice.mode,
        "model_format": notice.model_format,
        "storage_uri": notice.storage_uri,
        "gpus": notice.gpus,
        "min_replicas": notice.min_replicas,
        "max_replicas": notice.max_replicas,
        "ready_at": iso(notice.ready_at),
        "trained_by": None
        if trained is None
        else {
            "kind": trained.kind,
            "namespace": trained.namespace,
            "name": trained.name,
            "status": trained.status,
            "finished_at": iso(trained.finished_at),
            "gpu_minutes": trained.gpu_minutes,
        },
        "links": _encode_links(notice.links),
    }


def decode_serving(payload: Mapping[str, Any]) -> ServingNotice:
    data = read_message(payload)
    trained_data = read_field(data, "trained_by", Mapping)
    trained = None
    if trained_data is not None:
        trained = TrainedBy(
            kind=read_required_text(trained_data, "kind"),
            namespace=read_required_text(trained_data, "namespace"),
            name=read_required_text(trained_data, "name"),
            status=read_text(trained_data, "status"),
            finished_at=read_time(trained_data, "finished_at"),
            gpu_minutes=read_number(trained_data, "gpu_minutes"),
        )
    return ServingNotice(
        cluster=read_required_text(data, "cluster"),
        uid=read_required_text(data, "uid"),
        namespace=read_required_text(data, "namespace"),
        name=read_required_text(data, "name"),
        revision=read_required_text(data, "revision"),
        url=read_text(data, "url"),
        mode=read_text(data, "mode"),
        model_format=read_text(data, "model_format"),
        storage_uri=read_text(data, "storage_uri"),
        gpus=read_number(data, "gpus") or 0.0,
        min_replicas=read_integer(data, "min_replicas"),
        max_replicas=read_integer(data, "max_replicas"),
        ready_at=read_time(data, "ready_at"),
        trained_by=trained,
        links=_decode_links(data),
    )


# --- pipeline messages ------------------------------------------------------------------------------


def encode_pipeline(message: PipelineMessage) -> Json:
    return {
        "key": message.key,
        "title": message.title,
        "text": message.text,
        "links": _encode_links(message.links),
        "sender": message.sender,
        "created_at": iso(message.created_at),
    }


def decode_pipeline(payload: Mapping[str, Any]) -> PipelineMessage:
    data = read_message(payload)
    return PipelineMessage(
        key=read_required_text(data, "key"),
        title=read_required_text(data, "title"),
        text=read_text(data, "text"),
        links=_decode_links(data),
        sender=read_text(data, "sender"),
        created_at=read_time(data, "created_at"),
    )
