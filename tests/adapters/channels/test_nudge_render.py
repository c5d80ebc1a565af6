"""Idle nudges rendered on every channel, with the injection checks the summaries get: cluster
values (pod, namespace, workspace and user names, models, nodes) stay inert in Telegram HTML,
e-mail HTML, Slack mrkdwn and plain text."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.adapters.channels.base import TELEGRAM_MAX_CHARS, MailMessage, SlackMessage, TelegramMessage
from inno_notify.adapters.channels.markup import ZWSP
from inno_notify.adapters.channels.nudge_views import NudgeView
from inno_notify.adapters.channels.render import Renderer
from inno_notify.domain.live import IdleFinding, IdleGpu, finding_to_payload
from inno_notify.domain.model import Channel
from tests.adapters.channels.test_render import (
    Parsed,
    assert_inert_html,
    balanced,
    for_any_payload,
    inert_mrkdwn,
)

NOW = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
TELEGRAM_TAGS = {"b", "i"}


def finding(**changes: object) -> IdleFinding:
    base = IdleFinding(
        cluster="lab",
        namespace="face-research",
        pod="train-llama-7x9-abcde",
        pod_uid="p1",
        node="gpu-node-3",
        workload_kind="job",
        workload_name="train-llama-7x9",
        workload_uid="j1",
        owner="alice@example.com",
        team="face",
        gpus_held=4,
        gpu_equivalents=4.0,
        idle=(
            IdleGpu(
                "2", NOW - timedelta(hours=3), "GPU-2", "NVIDIA A100-SXM4-80GB", None, "gpu-node-3", 11776.0
            ),
            IdleGpu(
                "3", NOW - timedelta(hours=3), "GPU-3", "NVIDIA A100-SXM4-80GB", None, "gpu-node-3", 300.0
            ),
        ),
        idle_since=NOW - timedelta(hours=3),
        since_at_least=False,
        idle_gpu_equivalents=2.0,
        idle_gpu_hours=6.0,
        memory_held_mib=12076.0,
        observed_at=NOW,
        window_minutes=60.0,
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def view(**changes: object) -> NudgeView:
    return NudgeView.from_payload({"nudge": finding_to_payload(finding(**changes))})


RENDERER = Renderer()


def test_telegram_nudge_says_what_idles_since_when_and_how_to_release_it() -> None:
    message = RENDERER.render_nudge(Channel.TELEGRAM, view())
    assert isinstance(message, TelegramMessage)
    parsed = Parsed(message.html)
    for text in (
        "train-llama-7x9: 2 of 4 GPUs idle for 3 h",
        "Job train-llama-7x9 (pod train-llama-7x9-abcde)",
        "face-research/train-llama-7x9-abcde on gpu-node-3",
        "Idle since Mon 30 Nov 07:00 UTC",
        "6 GPU-h held idle so far",
        "GPU 2 · NVIDIA A100-SXM4-80GB on gpu-node-3",
        "11.5 GiB in use",
        "GPU memory is allocated (11.8 GiB) but compute is idle",
        "kubectl delete job train-llama-7x9 -n face-research",
        "It uses 2 of its 4 GPUs: request 2 next time",
        "never stops or changes your workload",
    ):
        assert text in parsed.visible, text
    assert {name for _, name, _ in parsed.tags} <= TELEGRAM_TAGS
    assert balanced(parsed.tags)


@pytest.mark.parametrize(
    ("changes", "headline", "release"),
    [
        (
            {
                "workload_kind": "workspace",
                "platform": "coder",
                "platform_user": "bob",
                "workspace_name": "dev",
            },
            "workspace dev: 2 of 4 GPUs idle for 3 h",
            "coder stop bob/dev",
        ),
        (
            {
                "workload_kind": "workspace",
                "platform": "jupyterhub",
                "platform_user": "alice",
                "gpus_held": 2,
            },
            "JupyterHub server of alice: all 2 GPUs idle for 3 h",
            "File → Hub Control Panel → Stop My Server",
        ),
        (
            {"workload_kind": "workspace", "platform": "workspace", "gpus_held": 2},
            "train-llama-7x9-abcde: all 2 GPUs idle for 3 h",
            "Stop the workspace while you do not use it",
        ),
        (
            {"workload_kind": "pod", "gpus_held": 2, "memory_held_mib": None, "since_at_least": True},
            "train-llama-7x9-abcde: all 2 GPUs idle for more than 3 h",
            "kubectl delete pod train-llama-7x9-abcde -n face-research",
        ),
    ],
)
def test_each_kind_of_workload_gets_its_own_way_out(
    changes: dict[str, object], headline: str, release: str
) -> None:
    message = RENDERER.render_nudge(Channel.EMAIL, view(**changes))
    assert isinstance(message, MailMessage)
    assert message.subject == f"[inno-notify] {headline}"
    assert release in message.text
    assert release in Parsed(message.html).visible
    assert ("GPU memory is allocated" in message.text) is (changes.get("memory_held_mib", 1) is not None)
    if changes.get("since_at_least"):
        assert "at least since" in message.text


def test_slack_nudge_is_verbatim_blocks_with_a_fallback() -> None:
    message = RENDERER.render_nudge(Channel.SLACK, view())
    assert isinstance(message, SlackMessage)
    assert message.text == ":zzz: *train-llama-7x9: 2 of 4 GPUs idle for 3 h*"
    assert all(b["text"]["verbatim"] is True for b in message.blocks if b["type"] == "section")
    body = "\n".join(b["text"]["text"] for b in message.blocks)
    assert "*To release them*" in body and "kubectl delete job" in body


def test_times_show_in_the_configured_zone() -> None:
    message = RENDERER.render_nudge(Channel.EMAIL, view(timezone="Europe/Berlin"))
    assert isinstance(message, MailMessage) and "Mon 30 Nov 08:00 CET" in message.text


def test_a_long_nudge_fits_telegram() -> None:
    many = tuple(IdleGpu(str(i), NOW - timedelta(hours=3), model="x" * 120, host="h" * 60) for i in range(64))
    message = RENDERER.render_nudge(Channel.TELEGRAM, view(idle=many, gpus_held=64))
    assert isinstance(message, TelegramMessage) and len(message.html) <= TELEGRAM_MAX_CHARS
    assert balanced(Parsed(message.html).tags)


# --- injection ------------------------------------------------------------------------------------


def injected(payload: str) -> NudgeView:
    gpu = IdleGpu(payload, NOW - timedelta(hours=3), payload, payload, payload, payload, 300.0)
    return view(
        namespace=payload,
        pod=payload,
        node=payload,
        workload_kind="workspace",
        workload_name=payload,
        platform="coder",
        platform_user=payload,
        workspace_name=payload,
        cluster=payload,
        idle=(gpu,),
        gpus_held=1,
    )


def nudge(channel: Channel, payload: str) -> object:
    return RENDERER.render_nudge(channel, injected(payload))


@for_any_payload
def test_cluster_values_are_inert_in_html(payload: str) -> None:
    assert_inert_html(nudge, payload, f"{payload}/{payload}", f"coder stop {payload}/{payload}")


@for_any_payload
def test_cluster_values_are_inert_in_slack_mrkdwn(payload: str) -> None:
    text = inert_mrkdwn(nudge, payload)[0]
    assert not re.search(f"(?<![\\w.+-])@(?!{ZWSP})", text)


@for_any_payload
def test_cluster_values_are_literal_in_the_plain_text_mail(payload: str) -> None:
    message = RENDERER.render_nudge(Channel.EMAIL, injected(payload))
    assert isinstance(message, MailMessage)
    assert f"Pod: {payload}/{payload} on {payload} · cluster {payload}\n" in message.text
    assert f"coder stop {payload}/{payload}" in message.text
    assert "\n" not in message.subject and "\r" not in message.subject
