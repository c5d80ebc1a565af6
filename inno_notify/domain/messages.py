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

MESSAGE_KEY = "message"
Json = dict[str, Any]


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


# --- reading checked values ---------------------------------------------------------------------


def _field(
    data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], *, optional: bool = True
) -> Any:
    value = data.get(name)
    if value is None:
        if optional:
            return None
        raise ValueError(f"{name}: missing")
    if isinstance(value, bool) and kind is not bool:
        raise ValueError(f"{name}: expected {kind}, got bool")
    if not isinstance(value, kind):
        raise ValueError(f"{name}: expected {kind}, got {type(value).__name__}")
    return value


def _text(data: Mapping[str, Any], name: str) -> str | None:
    value: str | None = _field(data, name, str)
    return value


def _required_text(data: Mapping[str, Any], name: str) -> str:
    value: str = _field(data, name, str, optional=False)
    return value


def _number(data: Mapping[str, Any], name: str) -> float | None:
    value = _field(data, name, (int, float))
    return None if value is None else float(value)


def _integer(data: Mapping[str, Any], name: str) -> int | None:
    value: int | None = _field(data, name, int)
    return value


def _time(data: Mapping[str, Any], name: str) -> datetime | None:
    value = _text(data, name)
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"{name}: a time without zone")
    return parsed


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _objects(data: Mapping[str, Any], name: str) -> list[Mapping[str, Any]]:
    value = data.get(name)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, Mapping) for item in value):
        raise ValueError(f"{name}: expected a list of objects")
    return value


def _encode_links(links: Sequence[Link]) -> list[Json]:
    return [{"title": link.title, "url": link.url} for link in links]


def _decode_links(data: Mapping[str, Any]) -> tuple[Link, ...]:
    items = _objects(data, "links")
    return tuple(Link(_required_text(item, "title"), _required_text(item, "url")) for item in items)


def _message(payload: Mapping[str, Any]) -> Mapping[str, Any]:
    message = payload.get(MESSAGE_KEY)
    if not isinstance(message, Mapping):
        raise ValueError(f"the payload has no {MESSAGE_KEY!r} object")
    return message


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
        "started_at": _iso(summary.started_at),
        "finished_at": _iso(summary.finished_at),
        "steps": [
            {
                "name": step.name,
                "phase": step.phase,
                "attempts": step.attempts,
                "attempts_dropped": step.attempts_dropped,
                "started_at": _iso(step.started_at),
                "finished_at": _iso(step.finished_at),
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
        name=_required_text(data, "name"),
        phase=_required_text(data, "phase"),
        attempts=_integer(data, "attempts") or 1,
        attempts_dropped=_integer(data, "attempts_dropped") or 0,
        started_at=_time(data, "started_at"),
        finished_at=_time(data, "finished_at"),
        exit_code=_integer(data, "exit_code"),
        message=_text(data, "message"),
        gpus=_number(data, "gpus") or 0.0,
        gpu_minutes=_number(data, "gpu_minutes"),
        used_gpu_minutes=_number(data, "used_gpu_minutes"),
        missing=_text(data, "missing"),
        advice=tuple(advice),
    )


def decode_workflow(payload: Mapping[str, Any]) -> WorkflowSummary:
    data = _message(payload)
    return WorkflowSummary(
        cluster=_required_text(data, "cluster"),
        uid=_required_text(data, "uid"),
        kind=WorkflowKind(_required_text(data, "kind")),
        namespace=_required_text(data, "namespace"),
        name=_required_text(data, "name"),
        status=JobStatus(_required_text(data, "status")),
        run_id=_text(data, "run_id"),
        reason=_text(data, "reason"),
        started_at=_time(data, "started_at"),
        finished_at=_time(data, "finished_at"),
        steps=tuple(_step(step) for step in _objects(data, "steps")),
        more_steps=_integer(data, "more_steps") or 0,
        gpu_minutes=_number(data, "gpu_minutes"),
        used_gpu_minutes=_number(data, "used_gpu_minutes"),
        unmeasured_gpu_steps=_integer(data, "unmeasured_gpu_steps") or 0,
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
        "ready_at": _iso(notice.ready_at),
        "trained_by": None
        if trained is None
        else {
            "kind": trained.kind,
            "namespace": trained.namespace,
            "name": trained.name,
            "status": trained.status,
            "finished_at": _iso(trained.finished_at),
            "gpu_minutes": trained.gpu_minutes,
        },
        "links": _encode_links(notice.links),
    }


def decode_serving(payload: Mapping[str, Any]) -> ServingNotice:
    data = _message(payload)
    trained_data = _field(data, "trained_by", Mapping)
    trained = None
    if trained_data is not None:
        trained = TrainedBy(
            kind=_required_text(trained_data, "kind"),
            namespace=_required_text(trained_data, "namespace"),
            name=_required_text(trained_data, "name"),
            status=_text(trained_data, "status"),
            finished_at=_time(trained_data, "finished_at"),
            gpu_minutes=_number(trained_data, "gpu_minutes"),
        )
    return ServingNotice(
        cluster=_required_text(data, "cluster"),
        uid=_required_text(data, "uid"),
        namespace=_required_text(data, "namespace"),
        name=_required_text(data, "name"),
        revision=_required_text(data, "revision"),
        url=_text(data, "url"),
        mode=_text(data, "mode"),
        model_format=_text(data, "model_format"),
        storage_uri=_text(data, "storage_uri"),
        gpus=_number(data, "gpus") or 0.0,
        min_replicas=_integer(data, "min_replicas"),
        max_replicas=_integer(data, "max_replicas"),
        ready_at=_time(data, "ready_at"),
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
        "created_at": _iso(message.created_at),
    }


def decode_pipeline(payload: Mapping[str, Any]) -> PipelineMessage:
    data = _message(payload)
    return PipelineMessage(
        key=_required_text(data, "key"),
        title=_required_text(data, "title"),
        text=_text(data, "text"),
        links=_decode_links(data),
        sender=_text(data, "sender"),
        created_at=_time(data, "created_at"),
    )
