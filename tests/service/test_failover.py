"""Two `serve` processes on Postgres against the sim API server (issue 22's "done when"):

- SIGKILL the leader while 500 summaries are due: the follower leads within 30 s, every summary
  is delivered within 60 s of the kill, and a recipient got two copies only where the killed
  process had handed the message to a provider and not recorded it (the stored id is the new
  leader's); the follower answered the API all along; jobs that end after the kill are watched,
  measured and sent by the new leader.
- SIGTERM the new leader while more summaries are due (a third process follows): it exits 0, the
  follower takes over, and nothing is sent twice.

Short lease timings (3 s / 2 s / 0.5 s) keep it fast; bench/failover.py measures the defaults.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from inno_notify.adapters.db import Store
from inno_notify.domain.model import DeliveryStatus, DirectoryUser, Notification
from inno_notify.domain.routing import Directory, plan_summary
from inno_notify.sim.kube_api import SimKubeServer
from inno_notify.sim.kube_store import JOBS, PODS
from inno_notify.sim.objects import (
    JobSpec,
    job_object,
    job_started,
    job_succeeded,
    pod_object,
    pod_running,
    pod_terminated,
)
from tests import stored
from tests.db_support import postgres_database
from tests.waiting import eventually

from .replicas import (
    API_TOKEN,
    Ledger,
    Recipient,
    Replica,
    base_config,
    overlap_seconds,
    start_replica,
    wait_leader,
)
from .support import all_rows, finished_job

pytestmark = [pytest.mark.postgres, pytest.mark.slow, pytest.mark.serial]

FAST_HA = {
    "lease_seconds": 3,
    "renew_deadline_seconds": 2,
    "retry_period_seconds": 0.5,
    "shutdown_grace_seconds": 15,
}
KILL_BATCH = 500
TERM_BATCH = 150
WATCHED_JOBS = 3


def recipients(first: int, count: int) -> dict[str, DirectoryUser]:
    """Half on Telegram (rate-limited to 25/s: a leader is mid-dispatch for seconds), half on Slack."""
    users = {}
    for i in range(first, first + count):
        email = f"u{i}@example.com"
        if i % 2:
            users[email] = DirectoryUser(email, telegram_chat_id=100_000 + i, channels=("telegram",))
        else:
            users[email] = DirectoryUser(email, slack_user_id=f"U{i:07d}", channels=("slack",))
    return users


def recipient_of(user: DirectoryUser) -> Recipient:
    if user.telegram_chat_id is not None:
        return ("telegram", str(user.telegram_chat_id))
    return ("slack", str(user.slack_user_id))


async def enqueue_due(store: Store, first: int, count: int) -> set[Recipient]:
    """`count` job summaries due now, one per recipient; returns the recipients."""
    users = recipients(first, count)
    jobs = [
        finished_job(f"due-{i:05d}", owner=email)
        for i, email in zip(range(first, first + count), users, strict=True)
    ]
    await stored.upsert_jobs(store, jobs)
    now = datetime.now(UTC)
    rows: list[Notification] = [
        n
        for job in jobs
        for n in plan_summary(
            job, Directory(users, {}), frozenset({"telegram", "slack"}), now, 0.0
        ).notifications
    ]
    assert await store.outbox.enqueue(rows) == count
    return {recipient_of(user) for user in users.values()}


async def delivered(replicas: list[Replica], wanted: set[Recipient], within: float) -> float:
    """Waits until every wanted recipient got a message; the wall-clock time it happened."""
    # The fakes record calls in their handlers: polling them is simpler than wiring events.
    await eventually(
        lambda: wanted <= Ledger.of(replicas).delivered(),
        within=within,
        what=f"{len(wanted)} recipients delivered",
        poll=0.05,
    )
    return time.time()


async def all_recorded(store: Store, within: float = 60.0) -> list[Notification]:
    """Waits until every outbox row is recorded as sent: a provider's answer comes before the
    replica's record of it, so "delivered" alone can be seen while the record is still on its way
    (or, after a kill, while the new leader has yet to send again what nobody recorded)."""
    rows: list[Notification] = []

    async def recorded() -> bool:
        rows[:] = await all_rows(store)
        return {row.status for row in rows} == {DeliveryStatus.SENT}

    await eventually(recorded, within=within, what="every outbox row recorded as sent")
    return rows


async def delivered_by(replica: Replica, count: int, within: float = 60.0) -> None:
    def done() -> bool:
        if replica.proc.returncode is not None:
            raise AssertionError(f"{replica.name} exited:\n{replica.tail()}")
        return len(replica.deliveries()) >= count

    await eventually(done, within=within, what=f"{count} deliveries by {replica.name}")


def finish_job(sim: SimKubeServer, index: int) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    spec = JobSpec(
        name=f"after-kill-{index}", namespace="face-research", owner=f"owner{index}@example.com", gpus=1
    )
    job = sim.create(JOBS, job_started(job_object(spec, now - timedelta(minutes=10)), now))
    pod = sim.create(PODS, pod_object(job, f"p{index:04d}", now - timedelta(minutes=10)))
    running = sim.update(PODS, pod_running(pod, "gpu-1", now - timedelta(minutes=9), now))
    sim.update(PODS, pod_terminated(running, now, 0))
    sim.update(JOBS, job_succeeded(job, now + timedelta(seconds=1)))


@pytest.fixture
async def database() -> AsyncIterator[str]:
    async with postgres_database("failover", migrated=True) as url:
        yield url


async def test_sigkill_then_sigterm_of_the_leader(database: str, tmp_path: Path) -> None:
    sim = SimKubeServer(bookmark_interval=1.0)
    await sim.start()
    owners: list[dict[str, Any]] = [
        {"email": f"owner{i}@example.com", "slack_user_id": f"UOWNER{i}", "channels": ["slack"]}
        for i in range(WATCHED_JOBS)
    ]
    config = base_config(
        database,
        str(sim.kubeconfig(tmp_path / "kubeconfig")),
        FAST_HA,
        directory={"users": owners, "teams": [{"name": "face", "namespaces": ["face-research"]}]},
    )
    everyone = recipients(0, KILL_BATCH + TERM_BATCH)
    chats = {u.telegram_chat_id for u in everyone.values() if u.telegram_chat_id is not None}
    slack_users = {e: u.slack_user_id for e, u in everyone.items() if u.slack_user_id is not None}
    slack_users |= {owner["email"]: owner["slack_user_id"] for owner in owners}
    store = Store.from_url(database)
    replicas: list[Replica] = []
    try:
        async with aiohttp.ClientSession() as session:
            first = await start_replica(
                "a", 1, config, tmp_path, telegram_chats=chats, slack_users=slack_users
            )
            replicas.append(first)
            await first.wait_ready(session)
            assert await wait_leader(session, replicas) is first
            follower = await start_replica(
                "b", 2, config, tmp_path, telegram_chats=chats, slack_users=slack_users
            )
            replicas.append(follower)
            await follower.wait_ready(session)

            # --- SIGKILL mid-dispatch ---------------------------------------------------------
            due = await enqueue_due(store, 0, KILL_BATCH)
            await delivered_by(first, 60)
            await first.kill()
            killed_at = time.time()
            async with session.get(
                f"{follower.api}/api/v1/jobs?limit=1", headers={"Authorization": f"Bearer {API_TOKEN}"}
            ) as response:
                assert response.status == 200  # a follower serves the API
            assert await wait_leader(session, [follower], within=30) is follower
            led_after = time.time() - killed_at
            for index in range(WATCHED_JOBS):
                finish_job(sim, index)
            watched = {("slack", f"UOWNER{i}") for i in range(WATCHED_JOBS)}
            done_at = await delivered(replicas, due | watched, within=60)

            stored = {row.recipient: row for row in await all_recorded(store)}
            ledger = Ledger.of(replicas)
            users = recipients(0, KILL_BATCH)
            by_recipient = {recipient_of(user): stored[email] for email, user in users.items()}
            for recipient, senders in ledger.duplicates().items():
                # Sent by the killed process, then again by the new leader, which recorded it: the
                # killed one had handed it over but had not recorded it.
                assert senders == ["a", "b"], (recipient, senders)
                assert follower.owns(by_recipient[recipient].provider_message_id), recipient
            for recipient, row in by_recipient.items():
                assert row.status is DeliveryStatus.SENT
                if first.owns(row.provider_message_id):
                    assert ledger.by_recipient[recipient] == ["a"], "recorded by a, yet sent again"
            kill_duplicates = len(ledger.duplicates())
            print(
                f"kill: led_after_s={led_after:.1f} delivered_after_s={done_at - killed_at:.1f} "
                f"sent_by_killed={len(first.deliveries())} duplicates={kill_duplicates}"
            )

            # --- SIGTERM hand-over ---------------------------------------------------------------
            third = await start_replica(
                "c", 3, config, tmp_path, telegram_chats=chats, slack_users=slack_users
            )
            replicas.append(third)
            await third.wait_ready(session)
            due_later = await enqueue_due(store, KILL_BATCH, TERM_BATCH)
            sent_before = len(follower.deliveries())
            await delivered_by(follower, sent_before + 20)
            assert await follower.terminate() == 0, follower.tail()
            assert await wait_leader(session, [third], within=30) is third
            await delivered(replicas, due_later, within=60)
            handover = {r: s for r, s in Ledger.of(replicas).duplicates().items() if r in due_later}
            assert handover == {}, f"the SIGTERM hand-over sent twice: {handover}"
            assert any(r in due_later for r in third.deliveries()), "b sent everything before stopping"

            await all_recorded(store)
        assert overlap_seconds({r.name: r.leader_intervals() for r in replicas}) == 0.0
    finally:
        for replica in replicas:
            await replica.close()
        await store.close()
        await sim.stop()
