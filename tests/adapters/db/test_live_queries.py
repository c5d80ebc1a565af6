"""What the live check and the digest read about running pods and nudges, on both dialects."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.digest_queries import load_digest, nudged_pods
from inno_notify.domain.digest import NudgeEntry
from inno_notify.domain.live import IdleFinding, IdleGpu, finding_to_payload, nudge_entry
from inno_notify.domain.model import (
    Channel,
    JobRecord,
    JobStatus,
    Notification,
    NotificationKind,
    PodRecord,
    WorkloadKind,
)
from inno_notify.domain.weeks import week_bounds
from tests import stored
from tests.adapters.db.records import job, pod

WEEK = "2026-W48"
START, END = week_bounds(WEEK, "UTC")  # Monday 23 November to Monday 30 November
H = timedelta(hours=1)


def running_job(uid: str, **changes: object) -> JobRecord:
    return job(uid, **{"status": JobStatus.RUNNING, "finished_at": None, "reason": None, **changes})


def running_pod(uid: str, job_uid: str, **changes: object) -> PodRecord:
    base = {"phase": "Running", "finished_at": None, "deleted_at": None, "reason": None}
    return pod(uid, job_uid, **{**base, **changes})


async def test_running_gpu_pods(store: Store) -> None:
    await stored.upsert_jobs(
        store,
        [
            running_job("j-run"),
            running_job("ws", kind=WorkloadKind.WORKSPACE, namespace="jhub"),
            running_job("j-other", cluster="other"),
            job("j-done"),
            replace(running_job("j-pending"), status=JobStatus.PENDING),
        ],
    )
    await stored.upsert_pods(
        store,
        [
            running_pod("p-run", "j-run"),
            running_pod("p-cpu", "j-run", gpu_equivalents=0.0),
            running_pod("p-ended", "j-run", finished_at=START),
            running_pod("p-deleted", "j-run", deleted_at=START),
            running_pod("p-pending", "j-run", phase="Pending"),
            running_pod("ws", "ws", namespace="jhub"),
            running_pod("p-done", "j-done"),
            running_pod("p-pend", "j-pending"),
            running_pod("p-other", "j-other", cluster="other"),
        ],
    )
    found = await store.live.running_gpu_pods("default")
    assert [(j.uid, p.uid) for j, p in found] == [("j-run", "p-run"), ("ws", "ws")]
    assert found[1][0].kind is WorkloadKind.WORKSPACE
    assert [p.uid for _, p in await store.live.running_gpu_pods("default", ["jhub"])] == ["ws"]
    assert [p.uid for _, p in await store.live.running_gpu_pods("other")] == ["p-other"]


def nudge_finding(
    pod_uid: str, since: datetime, at: datetime, gpus: float = 2.0, pod_name: str = "", kind: str = "job"
) -> IdleFinding:
    return IdleFinding(
        cluster="default",
        namespace="face-research",
        pod=pod_name or f"train-{pod_uid}",
        pod_uid=pod_uid,
        node="n1",
        workload_kind=kind,
        workload_name="train",
        workload_uid="j",
        owner=None,
        team=None,
        gpus_held=int(gpus),
        gpu_equivalents=gpus,
        idle=tuple(IdleGpu(str(i), since) for i in range(int(gpus))),
        idle_since=since,
        since_at_least=False,
        idle_gpu_equivalents=gpus,
        idle_gpu_hours=gpus * (at - since).total_seconds() / 3600,
        memory_held_mib=None,
        observed_at=at,
        window_minutes=60.0,
    )


def nudge(
    pod_uid: str,
    since: datetime,
    at: datetime,
    *,
    channel: Channel = Channel.EMAIL,
    gpus: float = 2.0,
    recipient: str = "alice@example.com",
    kind: str = "job",
) -> Notification:
    return Notification(
        dedup_key=f"default/{pod_uid}/idle_nudge/{at.isoformat()}/{channel.value}/{recipient}",
        kind=NotificationKind.IDLE_NUDGE,
        channel=channel,
        recipient=recipient,
        due_at=at,
        created_at=at,
        cluster="default",
        job_uid=pod_uid,
        payload={"nudge": finding_to_payload(nudge_finding(pod_uid, since, at, gpus, kind=kind))},
    )


async def test_last_nudges_reads_only_nudges(store: Store) -> None:
    t = START + 10 * H
    summary = replace(
        nudge("p1", t, t + 5 * H), kind=NotificationKind.JOB_SUMMARY, dedup_key="s1", payload={}
    )
    await store.outbox.enqueue(
        [
            nudge("p1", t - H, t),
            nudge("p1", t - H, t + H, channel=Channel.SLACK),
            summary,
            nudge("p2", t, t + 2 * H),
        ]
    )
    last = await store.live.last_nudges("default", ["p1", "p2", "p3"])
    assert last == {"p1": t + H, "p2": t + 2 * H}
    assert await store.live.last_nudges("other", ["p1"]) == {}


def planned(
    pod_uid: str,
    since: datetime,
    at: datetime,
    *,
    team: str = "face",
    owner: str = "alice@example.com",
    gpus: float = 2.0,
    kind: str = "job",
    pod_name: str = "",
    channels: tuple[Channel, ...] = (Channel.EMAIL,),
) -> tuple[list[Notification], list[tuple[str, NudgeEntry]]]:
    """A nudge as the live check enqueues it: its rows (one per channel) and its ledger entries."""
    finding = replace(nudge_finding(pod_uid, since, at, gpus, pod_name, kind), owner=owner, team=team)
    rows = [nudge(pod_uid, since, at, channel=c, gpus=gpus, recipient=owner, kind=kind) for c in channels]
    return rows, [(team, nudge_entry(finding))]


@pytest.fixture
async def nudged(store: Store) -> Store:
    """Alice's Job pod idles from Sunday before the week and is nudged three times in it (on two
    channels each); Bob's workspace once; a pod of another team, and nudges outside the week."""
    since_a = START - 12 * H  # Sunday noon, the week before
    both = (Channel.EMAIL, Channel.SLACK)
    nudges = [
        planned("p-a", since_a, START + timedelta(days=day, hours=9), channels=both) for day in (0, 1, 2)
    ]
    nudges += [
        planned(
            "ws-b",
            START + 30 * H,
            START + 40 * H,
            gpus=1.0,
            owner="bob@example.com",
            kind="workspace",
            pod_name="jupyter-bob",
        ),
        planned("p-x", START, START + 10 * H, team="other", owner="xavier@example.com"),
        planned("p-old", START - 10 * H, START - 3 * H),  # before the week
        planned("p-a", END + H, END + 2 * H),  # after it
    ]
    assert await store.live.enqueue_nudges(nudges) == 10
    # A replayed round adds nothing, to the outbox or the ledger.
    assert await store.live.enqueue_nudges(nudges[:1]) == 0
    return store


async def test_nudged_pods_of_a_team_in_a_week(nudged: Store) -> None:
    rows = {r.pod_uid: r for r in await nudged_pods(nudged.engine, None, "face", START, END)}
    assert set(rows) == {"p-a", "ws-b"}
    a = rows["p-a"]
    # Three nudges (two channels each); idle from before the week: counted from its start to the
    # last nudge, Wednesday 09:00, on 2 GPU-equivalents.
    assert (a.nudges, a.owner, a.kind, a.pod) == (3, "alice@example.com", "job", "train-p-a")
    assert a.idle_gpu_hours == pytest.approx(2 * (2 * 24 + 9))
    b = rows["ws-b"]
    assert (b.nudges, b.kind, b.pod) == (1, "workspace", "jupyter-bob")
    assert b.idle_gpu_hours == pytest.approx(10.0)
    assert await nudged_pods(nudged.engine, "other-cluster", "face", START, END) == ()


async def test_the_digest_shows_idle_gpus_of_running_pods(nudged: Store) -> None:
    digest = await load_digest(nudged.engine, "face", WEEK, "UTC")
    assert [(p.owner, p.pods, p.nudges, round(p.idle_gpu_hours)) for p in digest.live_idle] == [
        ("alice@example.com", 1, 3, 114),
        ("bob@example.com", 1, 1, 10),
    ]
    assert digest.live_idle_gpu_hours == pytest.approx(124.0)
    assert [(n.pod, n.nudges) for n in digest.nudged_repeatedly] == [("train-p-a", 3)]
    text = DigestRenderer().text(digest)
    assert "Idle GPUs in running pods and workspaces (nudged this week, 124 GPU-h held idle):" in text
    assert "alice@example.com: 114 GPU-h idle in 1 pod(s), 3 nudge(s)" in text
    assert "face-research/train-p-a (job, alice@example.com): 3 nudges, 114 GPU-h idle" in text


async def test_a_week_without_nudges_has_no_live_section(store: Store) -> None:
    digest = await load_digest(store.engine, "face", WEEK, "UTC")
    assert digest.live_idle == () and digest.live_idle_gpu_hours is None
    assert "running pods" not in DigestRenderer().text(digest)
