"""The payloads of workflow summaries, serving notices and pipeline messages: what is encoded comes
back equal, and a payload that is not one raises ValueError (the dispatcher fails such a row)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from inno_notify.domain.messages import (
    MESSAGE_KEY,
    PipelineMessage,
    decode_pipeline,
    decode_serving,
    decode_workflow,
    encode_pipeline,
    encode_serving,
    encode_workflow,
)
from inno_notify.domain.model import JobStatus, Link
from inno_notify.domain.serving import ServingNotice, TrainedBy
from inno_notify.domain.workflows import StepFigures, WorkflowKind, WorkflowSummary

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)

SUMMARY = WorkflowSummary(
    cluster="c",
    uid="wf",
    kind=WorkflowKind.ARGO,
    namespace="ns",
    name="pipeline",
    status=JobStatus.FAILED,
    reason="child failed",
    started_at=T0,
    finished_at=T0,
    steps=(
        StepFigures("train", "Succeeded", 2, T0, T0, 0, None, 2.0, 80.0, 35.5, None, ("request 1 GPU",)),
        StepFigures("eval", "Failed", 1, None, None, 1, "Error", 0.0),
    ),
    more_steps=3,
    gpu_minutes=80.0,
    used_gpu_minutes=35.5,
    links=(Link("MLflow run", "https://ml.example/#/runs/1"),),
)
NOTICE = ServingNotice(
    cluster="c",
    uid="u",
    namespace="ns",
    name="m",
    revision="m-predictor-00002",
    url="https://m.example",
    gpus=1.0,
    min_replicas=1,
    ready_at=T0,
    trained_by=TrainedBy("job", "ns", "train-7", "succeeded", T0, 240.0),
)
EVENT = PipelineMessage("k-1", "Model in prod", "all good", (Link("Card", "https://x.example"),), "ci", T0)


def test_round_trips() -> None:
    assert decode_workflow({MESSAGE_KEY: encode_workflow(SUMMARY)}) == SUMMARY
    assert decode_serving({MESSAGE_KEY: encode_serving(NOTICE)}) == NOTICE
    assert decode_pipeline({MESSAGE_KEY: encode_pipeline(EVENT)}) == EVENT


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {MESSAGE_KEY: "text"},
        {MESSAGE_KEY: {"title": 5, "key": "k"}},
        {MESSAGE_KEY: {"key": "k"}},
        {MESSAGE_KEY: {"key": "k", "title": "t", "links": [{"title": "x"}]}},
        {MESSAGE_KEY: {"key": "k", "title": "t", "created_at": "yesterday"}},
        {MESSAGE_KEY: {"key": "k", "title": "t", "created_at": "2026-11-30T10:00:00"}},
    ],
)
def test_a_payload_that_is_not_a_message_raises_value_error(payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        decode_pipeline(payload)
