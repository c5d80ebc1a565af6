"""The webhook through the real path: routing adds its rows, the dispatcher renders and sends them with
the real WebhookSender to a local receiver that verifies every signature, on both databases.

Each kind the webhook gets (a job summary, a team's digest, a pipeline message, an idle nudge)
arrives once, signed, in schema inno-notify.message/v1 with the message's key in its header and
its body; a 503 leaves the rows to retry and a 400 fails them, each after one request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from inno_notify.adapters.channels.webhook import SCHEMA, WebhookSender
from inno_notify.adapters.db import Store
from inno_notify.domain.message_json import MESSAGE_KEY
from inno_notify.domain.messages import PipelineMessage, encode_pipeline
from inno_notify.domain.model import Channel, DeliveryStatus, DirectoryUser, Link, NotificationKind, Team
from inno_notify.domain.routing import Directory, plan_event, plan_nudge
from inno_notify.service.message_composer import message_key
from tests.adapters.channels import fake_webhook
from tests.adapters.channels.fake_webhook import FakeReceiver
from tests.domain.idle_samples import idle_finding

from .support import T0, FakeClock, all_rows, dispatcher, finish, finished_job, plan_digest

SECRET = "webhook-secret-for-the-dispatcher-tests"
ALICE = DirectoryUser("alice@example.com", "Alice", channels=("email",))
USERS = {ALICE.email: ALICE}
FACE = Team("face", namespaces=("face-research",), leads=("alice@example.com",), digest_channels=("email",))
# Only the webhook is configured: a cluster that bridges everything through it.
ENABLED = frozenset({"webhook"})


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[FakeReceiver, str]]:
    fake = FakeReceiver(SECRET)
    async with fake_webhook.serving(fake) as url:
        yield fake, url


@pytest.fixture
async def webhook(receiver: tuple[FakeReceiver, str]) -> AsyncIterator[WebhookSender]:
    sender = WebhookSender(receiver[1], SECRET, timeout=5.0)
    yield sender
    await sender.aclose()


async def test_every_kind_arrives_once_signed_with_its_key(
    store: Store, receiver: tuple[FakeReceiver, str], webhook: WebhookSender
) -> None:
    fake, _ = receiver
    clock = FakeClock()
    job = finished_job("wh-1", links=(Link("W&B run", "https://wandb.example.org/run/1"),))
    summary = await finish(store, [job], USERS, T0, group_wait_seconds=0, enabled=ENABLED)
    event = plan_event(
        "alice@example.com",
        None,
        "event/deploy-1",
        {
            MESSAGE_KEY: encode_pipeline(
                PipelineMessage(key="deploy-1", title="Model deployed", text="v2 is live")
            )
        },
        Directory(USERS, {}),
        ENABLED,
        T0,
    )
    nudge = plan_nudge(
        finished_job("running-1", name="notebook"),
        idle_finding(
            T0,
            pod="notebook-0",
            pod_uid="pod-uid-1",
            workload_kind="pod",
            workload_name="notebook-0",
            workload_uid="pod-uid-1",
            team=None,
        ),
        Directory(USERS, {}),
        ENABLED,
        T0,
        repeat_hours=24,
    )
    assert await store.outbox.enqueue([*event.notifications, *nudge.notifications]) == 2
    await plan_digest(store, FACE, ALICE, ENABLED, clock)
    d = dispatcher(store, {"webhook": webhook}, clock)

    assert await d.run_once(T0 + timedelta(seconds=1)) == 4
    assert await d.run_once(clock.advance(3600)) == 0

    assert fake.refused == []
    rows = await all_rows(store)
    assert {row.channel for row in rows} == {Channel.WEBHOOK}
    assert {row.status for row in rows} == {DeliveryStatus.SENT}
    by_kind = {got.json["kind"]: got for got in fake.accepted}
    assert sorted(by_kind) == ["digest", "idle_nudge", "job_summary", "pipeline_event"]
    for got in fake.accepted:
        document = got.json
        assert document["schema"] == SCHEMA
        assert document["recipient"] == "alice@example.com"
        assert document["key"] == got.headers["X-Inno-Notify-Key"]
    # The key is the message's, as the outbox made it: the same on every attempt.
    [summary_row] = [r for r in rows if r.kind is NotificationKind.JOB_SUMMARY]
    assert by_kind["job_summary"].headers["X-Inno-Notify-Key"] == message_key([summary_row])
    assert summary_row.dedup_key == summary[0].dedup_key

    job_doc = by_kind["job_summary"].json
    assert job_doc["job"]["name"] == "train-wh-1" and job_doc["job"]["namespace"] == "face-research"
    assert job_doc["job"]["status"] == "succeeded"
    assert job_doc["title"].startswith("[inno-notify] face-research/train-wh-1")
    # The e-mail's text without its footer (owner annotations, a mail program's Unsubscribe).
    assert "face-research/train-wh-1" in job_doc["text"] and "Unsubscribe" not in job_doc["text"]
    assert {"rel": "link", "title": "W&B run", "url": "https://wandb.example.org/run/1"} in job_doc["links"]
    digest = by_kind["digest"].json
    assert digest["digest"]["team"] == "face" and digest["digest"]["week"] == "2026-W48"
    assert by_kind["pipeline_event"].json["messages"][0]["title"] == "Model deployed"
    assert by_kind["idle_nudge"].json["nudges"]["items"][0]["pod"] == "notebook-0"


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(503, DeliveryStatus.PENDING), (429, DeliveryStatus.PENDING), (400, DeliveryStatus.FAILED)],
)
async def test_a_refusal_is_retried_or_failed_by_the_dispatcher_alone(
    store: Store,
    receiver: tuple[FakeReceiver, str],
    webhook: WebhookSender,
    status: int,
    outcome: DeliveryStatus,
) -> None:
    fake, _ = receiver
    fake.scripted.append((status, {"Retry-After": "120"} if status == 429 else {}))
    clock = FakeClock()
    await finish(store, [finished_job("wh-2")], USERS, T0, group_wait_seconds=0, enabled=ENABLED)

    assert await dispatcher(store, {"webhook": webhook}, clock).run_once(T0 + timedelta(seconds=1)) == 1

    [row] = await all_rows(store)
    assert row.status is outcome and f"HTTP {status}" in (row.last_error or "")
    assert len(fake.received) == 1 and fake.accepted == []
    if status == 429:
        # The receiver's own wait, not the dispatcher's backoff.
        assert row.next_attempt_at == clock.now + timedelta(seconds=120)
