"""Idle nudges through the dispatcher: claimed, rendered from their payload, sent by the real channel
clients to the local servers, one row per message; a row whose payload cannot be rendered fails."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from inno_notify.adapters.channels.base import Sender
from inno_notify.adapters.db import Store
from inno_notify.domain.live import IdlePolicy, find_idle
from inno_notify.domain.model import DeliveryStatus, JobStatus, PodRecord, WorkloadKind
from inno_notify.domain.routing import Directory, plan_nudge
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.ratelimit import UNLIMITED
from tests.domain.test_live import gpu

from .support import T0, FakeClock, all_rows, finished_job, renderer
from .test_dispatcher import USERS, Servers, servers

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
__all__ = ["servers"]


def nudge_rows(pod_name: str, now=T0):
    job = replace(
        finished_job("ws-1"), kind=WorkloadKind.WORKSPACE, status=JobStatus.RUNNING, finished_at=None
    )
    pod = PodRecord(
        "default",
        "pod-1",
        job.namespace,
        pod_name,
        job.uid,
        "Running",
        now - timedelta(hours=3),
        scheduled_at=now - timedelta(hours=3),
        gpu_equivalents=1.0,
    )
    finding = find_idle(job, pod, [gpu("0")], now, IdlePolicy(3600, 5.0), now - timedelta(days=7))
    assert finding is not None
    return list(
        plan_nudge(
            job, finding, Directory(USERS, {}), frozenset({"telegram", "slack", "email"}), now, 24.0
        ).notifications
    )


async def test_nudges_go_out_on_every_channel_of_the_owner(
    store: Store, senders: dict[str, Sender], servers: Servers
) -> None:
    telegram, slack, smtp = servers
    rows = nudge_rows("jupyter-alice")
    assert len(rows) == 3
    await store.outbox.enqueue(rows)
    clock = FakeClock(T0)
    dispatcher = Dispatcher(
        store, senders, renderer(), DispatchOptions(limits=UNLIMITED), clock=clock, sleep=clock.sleep
    )

    assert await dispatcher.run_once(T0) == 3
    assert all(r.status is DeliveryStatus.SENT for r in await all_rows(store))
    assert [(chat, "jupyter-alice" in text) for chat, text in telegram.sent()] == [(111, True)]
    assert len(slack.posted()) == 1
    assert [r.message["Subject"] for r in smtp.received] == [
        "[inno-notify] jupyter-alice: its GPU idle for 3 h"
    ]


async def test_a_payload_that_cannot_be_rendered_fails_for_good(
    store: Store, senders: dict[str, Sender]
) -> None:
    (row, *_) = nudge_rows("p")
    await store.outbox.enqueue([replace(row, payload={"nudge": {"pod": "p"}})])
    clock = FakeClock(T0)
    dispatcher = Dispatcher(
        store, senders, renderer(), DispatchOptions(limits=UNLIMITED), clock=clock, sleep=clock.sleep
    )
    await dispatcher.run_once(T0)
    (stored,) = await all_rows(store)
    assert stored.status is DeliveryStatus.FAILED
    assert stored.last_error is not None and "nudge row cannot be rendered" in stored.last_error
