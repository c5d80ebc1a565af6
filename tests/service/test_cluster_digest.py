"""The admins' cluster digest: planned once per admin and week by the digest scheduler, built from
the week's trends (teams ranked by idle GPU-hours, the cluster's trend, quota shares) and rendered
as an e-mail by the dispatcher's DigestMessages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from inno_notify.adapters.channels.base import MailMessage
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.db import Store
from inno_notify.domain.costs import Rates
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


async def test_with_rates_teams_are_ranked_by_idle_cost(store: Store) -> None:
    # Issue 34: face idles 4 h on A10s at 0.5/h (2 EUR), speech 1 h on H100s at 4/h (4 EUR):
    # by cost speech leads, though face idled longer; vision's idle time was not measured: last.
    await fill(store)
    models = {"f1": "NVIDIA A10", "s1": "NVIDIA H100 80GB HBM3"}
    for uid, model in models.items():
        held, used, idle = {"f1": (600.0, 300.0, 240.0), "s1": (1200.0, 1140.0, 60.0)}[uid]
        await stored.save_usage(
            store,
            "default",
            uid,
            Usage(gpu_minutes=held, used_gpu_minutes=used, idle_gpu_minutes=idle, gpu_model=model),
        )
    rates = Rates(currency="EUR", gpu_hour={"*H100*": 4.0, "*A10": 0.5})
    digest = await build_cluster_digest(store, "2026-W48", "UTC", rates=rates)
    assert [(t.team, t.idle_cost) for t in digest.teams] == [("speech", 4.0), ("face", 2.0), ("vision", None)]
    assert digest.currency == "EUR"
    message = DigestRenderer().cluster_message(digest)
    assert "Teams by idle cost" in message.text and "Teams by idle cost" in message.html
    ranked = [line.strip() for line in message.text.splitlines() if line.strip()[:3] in ("1. ", "2. ")]
    assert ranked[0].startswith("1. speech: 4.00 EUR, 1 h /") and ranked[1].startswith("2. face: 2.00 EUR")
    assert "most in speech (1 GPU-h, 4.00 EUR)" in message.text

    # Rates without GPU prices rank by idle GPU-hours, as without rates.
    unpriced = await build_cluster_digest(
        store, "2026-W48", "UTC", rates=Rates(currency="EUR", cpu_core_hour=1.0)
    )
    assert [t.team for t in unpriced.teams] == ["face", "speech", "vision"] and unpriced.currency is None
    assert "Teams by idle GPU-hours" in DigestRenderer().cluster_message(unpriced).text
