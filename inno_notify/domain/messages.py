"""The messages that carry their whole content in the outbox row: workflow summaries, "model is
serving" notices, pipeline messages; and their one JSON encoding.

A job summary is rendered from the job's stored figures at send time; these three are not tied to
one job row, so what they say is fixed when they are planned and travels in the row's payload
under :data:`MESSAGE_KEY` (the recipient's address is the row's own, Notification.address). Each is a
plain dataclass written and read by domain.message_json, whose decoder checks every field it reads
(a row written by an older version, or edited by hand, raises :class:`ValueError` instead of
rendering half a message).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from inno_notify.domain.message_json import MESSAGE_KEY, Json, decode, encode, read_message
from inno_notify.domain.model import Link
from inno_notify.domain.serving import ServingNotice
from inno_notify.domain.workflows import WorkflowSummary

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


# Each message is a plain dataclass, written and read whole (message_json.encode, decode).


def encode_workflow(summary: WorkflowSummary) -> Json:
    return _encode(summary)


def decode_workflow(payload: Mapping[str, Any]) -> WorkflowSummary:
    return decode(WorkflowSummary, read_message(payload))


def encode_serving(notice: ServingNotice) -> Json:
    return _encode(notice)


def decode_serving(payload: Mapping[str, Any]) -> ServingNotice:
    return decode(ServingNotice, read_message(payload))


def encode_pipeline(message: PipelineMessage) -> Json:
    return _encode(message)


def decode_pipeline(payload: Mapping[str, Any]) -> PipelineMessage:
    return decode(PipelineMessage, read_message(payload))


def _encode(message: WorkflowSummary | ServingNotice | PipelineMessage) -> Json:
    encoded: Json = encode(message)
    return encoded
