"""KServe: a model that starts serving, and when that is news to its owner.

An InferenceService is news when it becomes Ready with a revision we have not announced: the first
one after it was created, and each new one after a rollout (Knative mode: the predictor's
``latestReadyRevision`` moves; Standard mode has no revisions, so the generation the controller
last observed stands for one). It is announced once per revision: what was announced is stored,
and the outbox row's key holds the revision, so a restart, a relist or a flapping Ready condition
repeats nothing. A service that was already Ready before the catch-up window when we first see it
(the first start of inno-notify on an old cluster) is recorded without a message.

Pure: records in, decisions out; time is passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime

from inno_notify.domain.model import Link, NotifyMode

__all__ = [
    "TRAINED_BY_KEY",
    "ServedModel",
    "ServingNotice",
    "ServingRecord",
    "TrainedBy",
    "announce",
    "trained_by_ref",
]

TRAINED_BY_KEY = "inno-notify/trained-by"


@dataclass(frozen=True, slots=True, kw_only=True)
class ServedModel:
    """A served model, where it answers and what it runs on: what an InferenceService's record and
    the message announcing it both carry (the message copies it from the record, ServingNotice.of)."""

    cluster: str
    uid: str
    namespace: str
    name: str
    ready_at: datetime | None = None
    url: str | None = None
    mode: str | None = None
    model_format: str | None = None
    storage_uri: str | None = None
    # GPU-equivalents one predictor replica asks for (CONTRACT.md §4 rules, limits first).
    gpus: float = 0.0
    min_replicas: int | None = None
    max_replicas: int | None = None
    links: tuple[Link, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingRecord(ServedModel):
    """An InferenceService as far as its announcement needs it."""

    ready: bool = False
    revision: str | None = None
    owner: str | None = None
    team: str | None = None
    notify: NotifyMode = NotifyMode.ALWAYS
    channels: tuple[str, ...] | None = None
    # The `inno-notify/trained-by` annotation as written (see trained_by_ref).
    trained_by: str | None = None


def announce(record: ServingRecord, announced: str | None, known: bool, horizon: datetime) -> bool | None:
    """Whether the record is news: True (announce its revision), False (record it silently: it was
    ready before `horizon` when first seen), None (nothing to record: not ready, or announced).

    `announced` is the revision last recorded for it, `known` whether it was seen before at all.
    """
    if not record.ready or record.revision is None or record.revision == announced:
        return None
    # First seen, already serving before the window: an old model, not news.
    old = announced is None and not known and (record.ready_at is None or record.ready_at < horizon)
    return not old


@dataclass(frozen=True, slots=True)
class TrainedBy:
    """What produced the model, when an annotation names it and we know it: a job or a workflow."""

    kind: str  # "job" | "workflow"
    namespace: str
    name: str
    status: str | None = None
    finished_at: datetime | None = None
    gpu_minutes: float | None = None


def trained_by_ref(value: str | None) -> tuple[str | None, str] | None:
    """`job/<name>`, `workflow/<name>` or a bare `<name>` (a job, else a workflow) → (kind or None,
    name); None for anything else."""
    if not value:
        return None
    kind, sep, name = value.partition("/")
    if not sep:
        kind, name = "", value
    if kind not in ("", "job", "workflow") or not name or "/" in name or len(name) > 253:
        return None
    return (kind or None, name)


@dataclass(frozen=True, slots=True, kw_only=True)
class ServingNotice(ServedModel):
    """The "model is serving" message: the model, where it answers, what it runs on, and what
    trained it."""

    revision: str
    trained_by: TrainedBy | None = None

    @classmethod
    def of(cls, record: ServingRecord, trained_by: TrainedBy | None) -> ServingNotice:
        model = {f.name: getattr(record, f.name) for f in fields(ServedModel)}
        return cls(**model, revision=record.revision or "", trained_by=trained_by)
