"""The admins' cluster digest: planned once per admin and week by the digest scheduler, built from
the week's trends (teams ranked by idle GPU-hours, the cluster's trend, quota shares) and rendered
as an e-mail by the dispatcher's DigestMessages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inno_notify.adapters.channels.base import MailMessage
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.db import Store
from inno_notify.domain.kueue_queues import ClusterQueueQuota, LocalQueueRef
from inno_notify.domain.model import Channel, JobRecord, NotificationKind, Requested, Team, Usage
from inno_notify.service.digest import DigestMessages, DigestScheduler, build_cluster_digest
from tests import stored

# Monday 30 Nov 2026 08:00 UTC: the digest of 2026-W48 (23-29 Nov) is due.
FIRED = datetime(2026, 11, 30, 8, tzinfo=UTC)
IN_W48 = datetime(2026, 11, 25, 12, tzinfo=UTC)
IN_W47 = datetime(2026, 11, 18, 12, tzinfo=UTC)


async def fill(store: Store) -> None:
    await store.directory.replace_teams(
        [Team("face", ("face-research",), ("lead@example.com",)), Team("speech", ("speech-research",))]
    )
    jobs = {
        # uid: (team, finished, held, used, idle) in GPU-minutes
        "f1": ("face", IN_W48, 600.0, 300.0, 240.0),
        "s1": ("speech", IN_W48, 1200.0, 1140.0, 60.0),
        "v1": ("vision", IN_W48, 120.0, None, None),
        "f0": ("face", IN_W47, 300.0, 300.0, 0.0),
    }
    await stored.upsert_jobs(
        store,
        [
            JobRecord(
                cluster="default",
                uid=uid,
                namespace=f"{team}-research",
                name=uid,
                team=team,
                finished_at=at,
                requested=Requested(gpus=1.0),
            )
            for uid, (team, at, *_) in jobs.items()
        ],
    )
    for uid, (_, _, held, used, idle) in jobs.items():
        await stored.save_usage(
            store, "default", uid, Usage(gpu_minutes=held, used_gpu_minutes=used, idle_gpu_minutes=idle)
        )
    await store.queues.replace_cluster_queues("default", [ClusterQueueQuota("cq-face", 4.0)], FIRED)
    await store.queues.replace_local_queues(
        "default", [LocalQueueRef("face-research", "lq", "cq-face")], FIRED
    )


async def test_teams_ranked_by_idle_gpu_hours(store: Store) -> None:
    await fill(store)
    digest = await build_cluster_digest(
        store, "2026-W48", "UTC", adoption=["advice followed in 1 of 2 new runs"]
    )
    # face 4 h idle, speech 1 h, vision not measured: last.
    assert [(t.team, t.idle_gpu_hours, t.gpu_hours) for t in digest.teams] == [
        ("face", 4.0, 10.0),
        ("speech", 1.0, 20.0),
        ("vision", None, 2.0),
    ]
    assert digest.teams[0].quota_share == 10.0 / (4.0 * 168) and digest.teams[1].quota_gpus is None
    [default] = digest.clusters
    assert [p.gpu_hours for p in default.points[-2:]] == [5.0, 32.0]

    message = DigestRenderer().cluster_message(digest)
    assert isinstance(message, MailMessage)
    assert message.subject.startswith("GPU cluster digest 2026-W48: 3 teams ran GPU jobs")
    lines = message.text.splitlines()
    ranked = [line.strip() for line in lines if line.strip()[:3] in ("1. ", "2. ", "3. ")]
    assert [line.split(":")[0] for line in ranked] == ["1. face", "2. speech", "3. vision"]
    assert "1 % of 4 GPUs" in ranked[0]  # 10 GPU-h of 4 GPUs × 168 h: 1.5 %
    assert "Trend:" in message.text and "advice followed in 1 of 2 new runs" in message.text
    assert "<td>face</td>" in message.html


def admins_scheduler(store: Store, channels: set[str], admins: list[str]) -> DigestScheduler:
    """The scheduler with no team digests, firing on Mondays at 08:00 UTC, the clock at FIRED."""
    return DigestScheduler(
        store,
        schedule="0 8 * * MON",
        timezone="UTC",
        channels=channels,
        clock=lambda: FIRED,
        teams=[],
        admin_recipients=admins,
    )


async def test_planned_once_per_admin_and_rendered_for_the_dispatcher(store: Store) -> None:
    await fill(store)
    scheduler = admins_scheduler(store, {"email"}, ["Ops@example.com", "ops@example.com", "sre@example.com"])
    assert await scheduler.run_once(FIRED) == 2
    assert await scheduler.run_once(FIRED + timedelta(hours=1)) == 0  # a later round adds nothing
    rows, _ = await store.outbox.list_notifications(None, 10, None)
    assert sorted((r.recipient, r.kind, r.channel) for r in rows) == [
        ("ops@example.com", NotificationKind.DIGEST, Channel.EMAIL),
        ("sre@example.com", NotificationKind.DIGEST, Channel.EMAIL),
    ]
    message = await DigestMessages(store, DigestRenderer()).render(rows[0])
    assert isinstance(message, MailMessage) and "1. face" in message.text


async def test_no_admin_rows_without_email(store: Store) -> None:
    scheduler = admins_scheduler(store, {"slack"}, ["ops@example.com"])
    assert await scheduler.run_once(FIRED) == 0
