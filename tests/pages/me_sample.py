"""One researcher's month as the personal page (GET /me) shows it, stored as the service stores it:
the failed 4-GPU training run of sample.py (usage and advice), a later run of its family that
followed the advice (judged by domain.adoption), a run still going whose GPUs idle (its nudge in
the outbox), an old run outside the 30 days, and a colleague's run the page must not show. Shared
by the API tests, the browser test and the script that takes the screenshots in docs/pages.md."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from inno_notify.adapters.db import Store
from inno_notify.domain.adoption import Outcome, judge
from inno_notify.domain.live import IdleFinding, IdleGpu, findings_to_payload
from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    JobStatus,
    Notification,
    NotificationKind,
    NotifyMode,
    RecipientAddress,
    Requested,
    Usage,
)
from inno_notify.domain.personal_page import PersonalPage, PersonalRun
from inno_notify.domain.preferences import Origin, Preferences, Via
from tests import stored
from tests.pages import sample

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
ALICE = DirectoryUser("alice@example.com", "Alice Moreau", slack_user_id="U1", channels=("slack", "email"))
BOB = "bob@example.com"
FOLLOWED_UID = "f0110wed-2222-4c4c-9a9a-2f2f2f2f2f2f"
RUNNING_UID = "runn1ng0-3333-4c4c-9a9a-2f2f2f2f2f2f"
OLD_UID = "01d00000-4444-4c4c-9a9a-2f2f2f2f2f2f"
BOB_UID = "b0b00000-5555-4c4c-9a9a-2f2f2f2f2f2f"


def _finding(observed: datetime) -> IdleFinding:
    since = observed - timedelta(hours=2, minutes=40)
    return IdleFinding(
        cluster="default",
        namespace="face-research",
        pod="finetune-vit-0-x8k2p",
        pod_uid="pod-running-0",
        node="gpu-node-4",
        workload_kind="job",
        workload_name="finetune-vit",
        workload_uid=RUNNING_UID,
        owner=ALICE.email,
        team="face",
        gpus_held=2,
        gpu_equivalents=2.0,
        idle=(IdleGpu("1", since, "GPU-1", "NVIDIA A100-SXM4-80GB", None, "gpu-node-4", 9216.0),),
        idle_since=since,
        since_at_least=False,
        idle_gpu_equivalents=1.0,
        idle_gpu_hours=2.67,
        memory_held_mib=9216.0,
        observed_at=observed,
        window_minutes=60.0,
    )


async def store_person(store: Store, now: datetime = NOW) -> None:
    """Alice's month, and a run of Bob's (see the module docstring)."""
    await store.directory.upsert_user(ALICE)
    failed = replace(await sample.store_job(store), family="face-research/train-resnet")
    assert failed.finished_at is not None
    await stored.upsert_jobs(store, [failed])
    # The next run of the family took the advice: 2 GPUs, 80 GiB.
    start = failed.finished_at + timedelta(hours=1)
    followed = replace(
        failed,
        uid=FOLLOWED_UID,
        name="train-resnet-8",
        status=JobStatus.SUCCEEDED,
        reason=None,
        exit_code=0,
        exit_reason=None,
        created_at=start,
        first_scheduled_at=start,
        started_at=start,
        finished_at=start + timedelta(hours=2, minutes=30),
        requested=Requested(
            gpus=2.0,
            cpu_cores=16.0,
            memory_bytes=80 * sample.GIB,
            memory_limit_bytes=80 * sample.GIB,
            extended={"nvidia.com/gpu": 2},
        ),
        kueue=None,
    )
    await stored.upsert_jobs(store, [followed])
    await store.jobs.complete_summary(
        "default",
        FOLLOWED_UID,
        Usage(gpu_minutes=300.0, used_gpu_minutes=246.0, gpus_idle=0, collected_at=followed.finished_at),
        [],
        [],
    )
    adoption = judge(followed, failed, sample.recommendations(), now)
    assert adoption is not None and adoption.outcome is Outcome.FOLLOWED, adoption
    await store.adoption.record(adoption)
    running = replace(
        failed,
        uid=RUNNING_UID,
        name="finetune-vit",
        family="face-research/finetune-vit",
        status=JobStatus.RUNNING,
        reason=None,
        exit_code=None,
        exit_reason=None,
        created_at=now - timedelta(hours=4),
        first_scheduled_at=now - timedelta(hours=4),
        started_at=now - timedelta(hours=4),
        finished_at=None,
        requested=Requested(gpus=2.0, extended={"nvidia.com/gpu": 2}),
        kueue=None,
    )
    old = replace(
        failed,
        uid=OLD_UID,
        name="train-resnet-1",
        created_at=now - timedelta(days=45),
        started_at=now - timedelta(days=45),
        finished_at=now - timedelta(days=44),
    )
    bobs = replace(failed, uid=BOB_UID, name="bobs-secret-run", owner=BOB)
    await stored.upsert_jobs(store, [running, old, bobs])
    nudge = Notification(
        dedup_key=f"default/pod-running-0/idle_nudge/1/email/{ALICE.email}",
        kind=NotificationKind.IDLE_NUDGE,
        channel=Channel.EMAIL,
        recipient=ALICE.email,
        due_at=now - timedelta(minutes=20),
        created_at=now - timedelta(minutes=20),
        address=RecipientAddress(name=ALICE.name),
        payload=findings_to_payload([_finding(now - timedelta(minutes=20))]),
    )
    await store.outbox.enqueue([nudge])


def page(now: datetime = NOW) -> PersonalPage:
    """The page's data as the store reads it after `store_person`, without a store (the browser test
    and the screenshots); with a mute and "failed runs only" set on the page, to show them."""
    failed, usage = sample.job(), sample.usage()
    return PersonalPage(
        email=ALICE.email,
        now=now,
        user=ALICE,
        preferences=Preferences(
            ALICE.email,
            notify=NotifyMode.FAILURE,
            muted_until=now + timedelta(hours=8),
            origins={"notify": Origin(Via.PAGE, now), "muted_until": Origin(Via.TELEGRAM, now, "123")},
        ),
        runs=(
            PersonalRun(
                "default",
                RUNNING_UID,
                "face-research",
                "finetune-vit",
                "job",
                "running",
                None,
                now - timedelta(hours=4),
                None,
                2.0,
                None,
                None,
                (),
            ),
            PersonalRun(
                "default",
                FOLLOWED_UID,
                "face-research",
                "train-resnet-8",
                "job",
                "succeeded",
                None,
                failed.finished_at,
                (failed.finished_at or now) + timedelta(hours=3, minutes=30),
                2.0,
                300.0,
                246.0,
                (),
                "followed",
                1.5,
            ),
            PersonalRun(
                "default",
                failed.uid,
                failed.namespace,
                failed.name,
                "job",
                "failed",
                failed.reason,
                failed.created_at,
                failed.finished_at,
                4.0,
                usage.gpu_minutes,
                usage.used_gpu_minutes,
                tuple(r.message for r in sample.recommendations()),
            ),
        ),
        more_runs=False,
        nudges=(_finding(now - timedelta(minutes=20)),),
    )
