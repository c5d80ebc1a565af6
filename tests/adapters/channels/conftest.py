"""Fixtures for the channel tests: the fake Bot API, Web API and SMTP servers, and sample jobs."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator

import pytest

from inno_notify.domain.model import (
    JobRecord,
    MissingFigure,
    MissingReason,
    Recommendation,
    RecommendationKind,
    Requested,
    Severity,
    Unit,
    Usage,
)
from tests.adapters.channels import fake_slack, fake_smtp, fake_telegram
from tests.pages import sample

TELEGRAM_TOKEN = "123456:AAE-secret-telegram-token"
SLACK_TOKEN = "xoxb-secret-slack-token"


@pytest.fixture
async def telegram_api() -> AsyncIterator[tuple[fake_telegram.FakeTelegram, str]]:
    """The fake Bot API and its server root (what `channels.telegram.api_url` holds)."""
    fake = fake_telegram.FakeTelegram(token=TELEGRAM_TOKEN, chats={111, 222}, blocked={666})
    server = await fake_telegram.start(fake)
    yield fake, str(server.make_url("")).rstrip("/")
    fake.release()
    await server.close()


@pytest.fixture
async def slack_api() -> AsyncIterator[tuple[fake_slack.FakeSlack, str]]:
    """The fake Web API and its base URL (what `channels.slack.api_url` holds, ending in /api/)."""
    fake = fake_slack.FakeSlack(
        token=SLACK_TOKEN,
        users={"alice@example.com": "U0ALICE", "bob@example.com": "U0BOB"},
        channels={"#face-gpu"},
    )
    server = await fake_slack.start(fake)
    yield fake, str(server.make_url("/api/"))
    await server.close()


@pytest.fixture
def smtp_server() -> Iterator[tuple[fake_smtp.RecordingHandler, int]]:
    handler = fake_smtp.RecordingHandler(
        refuse={
            "gone@example.com": "550 5.1.1 <gone@example.com>: Recipient address rejected",
            "full@example.com": "452 4.2.2 Mailbox full, try later",
        }
    )
    controller = fake_smtp.start(handler)
    yield handler, controller.port
    controller.stop()


def sample_job(**changes: object) -> JobRecord:
    """A failed 4-GPU job that ran 3 h 12 min after 2 min in the queue: the pages' sample job
    without its team, its Kueue facts and its extended resources."""
    requested = Requested(gpus=4.0, cpu_cores=16.0, memory_bytes=64 * 1024**3)
    job = sample.job(team=None, kueue=None, requested=requested)
    return dataclasses.replace(job, **changes)  # type: ignore[arg-type]


def sample_usage(**changes: object) -> Usage:
    usage = Usage(
        gpu_minutes=240.0,
        used_gpu_minutes=110.4,
        gpus_idle=2,
        gpu_util_mean_percent=46.0,
        gpu_memory_peak_bytes=None,
        memory_peak_bytes=int(42.5 * 1024**3),
        missing=(MissingFigure("gpu_memory_peak_bytes", MissingReason.NO_SAMPLES),),
    )
    return dataclasses.replace(usage, **changes)  # type: ignore[arg-type]


def sample_recommendations() -> list[Recommendation]:
    return [
        Recommendation(
            kind=RecommendationKind.MEMORY,
            severity=Severity.INFO,
            current=64 * 1024**3,
            suggested=52 * 1024**3,
            unit=Unit.BYTES,
            message="Peak RAM was 42.5 GiB: request 52 GiB.",
            waste_gib_hours=40.0,
        ),
        Recommendation(
            kind=RecommendationKind.GPU_COUNT,
            severity=Severity.WARNING,
            current=4,
            suggested=2,
            unit=Unit.GPUS,
            message="2 of 4 GPUs stayed idle: request 2.",
            waste_gpu_minutes=120.0,
            field_path='resources.limits["nvidia.com/gpu"]',
        ),
    ]
