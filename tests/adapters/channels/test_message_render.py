"""Workflow summaries, "model is serving" notices and pipeline messages on every channel: the figures
as views spell them, links only where they are web URLs, and values from cluster objects or a
pipeline's POST escaped like a summary's. In Slack, none of them can mention anyone (posted by the
real slack-sdk client to the fake Web API, every text checked); in Telegram and e-mail HTML they
cannot add markup."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.channels.base import (
    MailMessage,
    MattermostMessage,
    Recipient,
    SlackMessage,
    TelegramMessage,
    WebhookMessage,
)
from inno_notify.adapters.channels.message_views import ServingView, WorkflowView
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.domain.messages import MESSAGE_KEY, PipelineMessage, encode_pipeline
from inno_notify.domain.model import Channel, JobStatus, Link, NotificationKind
from inno_notify.domain.serving import ServingNotice, TrainedBy
from inno_notify.domain.workflows import StepFigures, WorkflowKind, WorkflowSummary
from tests.adapters.channels.conftest import SLACK_TOKEN, sample_job, sample_usage
from tests.adapters.channels.fake_slack import FakeSlack
from tests.adapters.channels.test_slack_mentions import (
    MENTIONS,
    SLACK_SYNTAX,
    WORD_MENTION,
    strings,
    text_objects,
)

T0 = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
RENDERER = Renderer(dashboard_url="https://gpu.example.org")


def workflow(text: str = "") -> WorkflowSummary:
    def step(name: str, phase: str, minutes: float) -> StepFigures:
        return StepFigures(
            name=f"{name}{text}", phase=phase, started_at=T0, finished_at=T0 + timedelta(minutes=minutes)
        )

    return WorkflowSummary(
        cluster="lab",
        uid="wf-1",
        kind=WorkflowKind.ARGO,
        namespace=f"face-research{text}",
        name=f"train-pipeline{text}",
        status=JobStatus.FAILED,
        reason=f"child failed{text}",
        started_at=T0,
        finished_at=T0 + timedelta(hours=1, minutes=2),
        steps=(
            replace(step("prepare", "Succeeded", 5), exit_code=0),
            replace(
                step("train", "Succeeded", 40),
                exit_code=0,
                gpus=2.0,
                gpu_minutes=80.0,
                used_gpu_minutes=35.5,
                advice=(f"1 of 2 GPUs stayed idle: request 1.{text}",),
            ),
            replace(
                step("evaluate", "Failed", 8), attempts=2, exit_code=2, message=f"Error (exit code 2){text}"
            ),
        ),
        more_steps=2,
        gpu_minutes=80.0,
        used_gpu_minutes=35.5,
        links=(Link(f"MLflow run{text}", "https://mlflow.example.org/#/runs/ab12"),),
    )


def notice(text: str = "") -> ServingNotice:
    return ServingNotice(
        cluster="lab",
        uid="isvc-1",
        namespace=f"face-research{text}",
        name=f"resnet-serve{text}",
        revision=f"resnet-serve-predictor-00002{text}",
        url="https://resnet-serve.example.org",
        model_format=f"pytorch{text}",
        storage_uri="s3://models/resnet/v2",
        gpus=1.0,
        min_replicas=1,
        max_replicas=3,
        trained_by=TrainedBy("job", "face-research", f"train-resnet-7{text}", "succeeded", T0, 240.0),
    )


def pipeline(text: str = "") -> PipelineMessage:
    return PipelineMessage(
        key="k-1",
        title=f"Training finished, model in prod{text}",
        text=f"accuracy 0.93\nlatency p95 41 ms{text}",
        links=(Link(f"Model card{text}", "https://models.example.org/resnet?v=2&x=1"),),
        sender=f"airflow-nightly{text}",
    )


def test_workflow_view_spells_each_step() -> None:
    view = WorkflowView.of(workflow())
    assert (view.kind, view.ref, view.status_text, view.duration) == (
        "Argo workflow",
        "face-research/train-pipeline",
        "failed (child failed)",
        "1 h 2 min",
    )
    assert view.steps_text == "5 steps: 2 succeeded, 1 failed, 2 not listed"
    assert view.gpu_minutes == "36 / 80 GPU-min"
    train, evaluate = view.steps[1], view.steps[2]
    assert (train.gpus, train.gpu_minutes, train.duration) == ("2 GPUs", "36 / 80 GPU-min", "40 min")
    assert (evaluate.attempts, evaluate.exit_text, evaluate.gpu_minutes, evaluate.failed) == (
        "2 attempts",
        "2",
        "",
        True,
    )
    summary = workflow()
    steps = tuple(
        replace(s, gpu_minutes=None, used_gpu_minutes=None, missing="not measured") if s.gpus else s
        for s in summary.steps
    )
    unmeasured = WorkflowView.of(
        replace(summary, steps=steps, gpu_minutes=None, used_gpu_minutes=None, unmeasured_gpu_steps=1)
    )
    assert unmeasured.steps[1].gpu_minutes == "n/a (not measured)"
    assert unmeasured.gpu_minutes == "n/a (not measured)"


def test_serving_view() -> None:
    view = ServingView.of(notice())
    assert (view.ref, view.model, view.resources, view.trained_by) == (
        "face-research/resnet-serve",
        "pytorch, s3://models/resnet/v2",
        "1 GPU per replica, 1–3 replicas",
        "job face-research/train-resnet-7 (succeeded, 240 GPU-min held)",
    )


@pytest.mark.parametrize("channel", list(Channel))
def test_every_kind_renders_on_every_channel(channel: Channel) -> None:
    rendered = [
        RENDERER.render_workflow(channel, workflow()),
        RENDERER.render_serving(channel, notice()),
        RENDERER.render_payload(
            channel, NotificationKind.PIPELINE_EVENT, {MESSAGE_KEY: encode_pipeline(pipeline())}
        ),
    ]
    for message, must in zip(
        rendered,
        (
            [
                "train-pipeline",
                "evaluate",
                "2 attempts",
                "36 / 80",
                "request 1",
                "https://mlflow.example.org/#/runs/ab12",
            ],
            [
                "resnet-serve-predictor-00002",
                "https://resnet-serve.example.org",
                "1 GPU per replica",
                "train-resnet-7",
            ],
            ["Training finished, model in prod", "accuracy 0.93", "https://models.example.org/resnet?v=2"],
        ),
        strict=True,
    ):
        if isinstance(message, TelegramMessage):
            body = message.html
        elif isinstance(message, SlackMessage):
            body = message.text + " ".join(str(b) for b in message.blocks)
        elif isinstance(message, MattermostMessage | WebhookMessage):
            body = shown(message)
        else:
            assert isinstance(message, MailMessage)
            body = message.subject + message.text + message.html
        for piece in must:
            assert piece in body.replace("&amp;", "&"), (channel, piece)


def shown(message: MattermostMessage | WebhookMessage) -> str:
    """What a Mattermost reader sees (Markdown's backslash escapes gone), or the webhook's title,
    text and links."""
    if isinstance(message, MattermostMessage):
        return re.sub(r"\\(.)", r"\1", message.markdown)
    return " ".join([message.title, message.text, *(f"{link.title} {link.url}" for link in message.links)])


def test_a_payload_that_is_not_one_raises_value_error() -> None:
    with pytest.raises(ValueError):
        RENDERER.render_payload(Channel.EMAIL, NotificationKind.WORKFLOW_SUMMARY, {"message": {"name": 3}})
    with pytest.raises(ValueError):
        RENDERER.render_payload(Channel.EMAIL, NotificationKind.JOB_SUMMARY, {})


HTML_INJECTION = '<script>alert(1)</script><a href="https://evil.example">x</a><b>&'


@pytest.mark.parametrize("channel", [Channel.TELEGRAM, Channel.EMAIL])
def test_values_cannot_add_markup_in_html(channel: Channel) -> None:
    for message in (
        RENDERER.render_workflow(channel, workflow(HTML_INJECTION)),
        RENDERER.render_serving(channel, notice(HTML_INJECTION)),
        RENDERER.render_pipeline(channel, pipeline(HTML_INJECTION)),
    ):
        html = message.html if isinstance(message, TelegramMessage | MailMessage) else ""
        assert "<script>" not in html and 'href="https://evil.example"' not in html
        assert "&lt;script&gt;" in html


@pytest.fixture
async def sender(slack_api: tuple[FakeSlack, str]) -> AsyncIterator[SlackSender]:
    sender = SlackSender(SLACK_TOKEN, slack_api[1], timeout=5.0)
    yield sender
    await sender.aclose()


async def test_workflow_serving_and_pipeline_messages_cannot_mention_anyone_in_slack(
    slack_api: tuple[FakeSlack, str], sender: SlackSender
) -> None:
    fake, _ = slack_api
    hostile = f" {MENTIONS}"
    messages = [
        RENDERER.render_workflow(Channel.SLACK, workflow(hostile)),
        RENDERER.render_serving(Channel.SLACK, notice(hostile)),
        RENDERER.render_pipeline(Channel.SLACK, pipeline(hostile)),
    ]
    for message in messages:
        await sender.send(Recipient(slack_user_id="U0BOB"), message)
        await sender.send(Recipient(slack_channel="#face-gpu"), message)
    assert len(fake.posted()) == 6
    received = [c.params for c in fake.calls]
    objects = [o for params in received for o in text_objects(params)]
    assert objects and all(o.get("verbatim") is True for o in objects)
    texts = [s for params in received for s in strings(params)]
    assert sum("subteam^S0TEAM" in s for s in texts) >= 6  # the values arrived, escaped
    for text in texts:
        assert not SLACK_SYNTAX.search(text), text[:300]
        assert not WORD_MENTION.search(text), text[:300]


@pytest.mark.parametrize("channel", list(Channel))
def test_a_job_summary_shows_its_mlflow_link(channel: Channel) -> None:
    job = replace(sample_job(), links=(Link("MLflow run", "https://mlflow.example.org/#/runs/ab12"),))
    message = RENDERER.render_summary(channel, SummaryView.from_records(job, sample_usage(), []))
    if isinstance(message, TelegramMessage):
        body = message.html
    elif isinstance(message, SlackMessage):
        body = " ".join(str(b) for b in message.blocks)
    elif isinstance(message, MattermostMessage | WebhookMessage):
        body = shown(message)
    else:
        assert isinstance(message, MailMessage)
        body = message.text + message.html
    assert "https://mlflow.example.org/#/runs/ab12" in body and "MLflow run" in body
