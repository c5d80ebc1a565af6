"""A round's nudges, one message per recipient and channel (issue 29).

Anyone can set `inno-notify/owner` on many idle pods: before, each pod was one message to the
named person. Now a round gives that person one message per channel listing the pods (most idle
GPU-hours first, NUDGE_PODS_LISTED at most, and how many more), and nothing if they turned nudges off.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from inno_notify.domain.live import NUDGE_PODS_LISTED, IdleFinding, findings_from_payload
from inno_notify.domain.model import DirectoryUser, JobRecord, Notification, WorkloadKind
from inno_notify.domain.routing import NUDGES_OFF, Directory, bundle_nudges, plan_nudge
from tests.domain.idle_samples import idle_finding

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
VICTIM = "victim@example.com"


def finding(n: int, owner: str = VICTIM) -> IdleFinding:
    return idle_finding(
        NOW,
        cluster="lab",
        namespace="ns",
        pod=f"pod-{n}",
        pod_uid=f"uid-{n}",
        node="node-1",
        workload_kind="pod",
        workload_name=f"pod-{n}",
        workload_uid=f"uid-{n}",
        owner=owner,
        team=None,
        idle_gpu_hours=2.0 + n / 100,
    )


def job(f: IdleFinding) -> JobRecord:
    return JobRecord(
        cluster=f.cluster,
        uid=f.workload_uid,
        namespace=f.namespace,
        name=f.pod,
        kind=WorkloadKind.POD,
        owner=f.owner,
    )


def plan(findings: list[IdleFinding], user: DirectoryUser) -> list[Notification]:
    rows: list[Notification] = []
    for f in findings:
        rows.extend(
            plan_nudge(
                job(f), f, Directory({user.email: user}, {}), frozenset({"email", "slack"}), NOW, 24
            ).notifications
        )
    return rows


@pytest.mark.parametrize("pods", [1, 3, NUDGE_PODS_LISTED, 50])
def test_one_message_per_channel_lists_the_pods(pods: int) -> None:
    user = DirectoryUser(VICTIM, channels=("email", "slack"), slack_user_id="U1")
    rows = bundle_nudges(plan([finding(n) for n in range(pods)], user), NOW, 24)
    assert sorted(r.channel.value for r in rows) == ["email", "slack"]
    for row in rows:
        listed, more = findings_from_payload(row.payload)
        assert len(listed) == min(pods, NUDGE_PODS_LISTED) and more == pods - len(listed)
        assert [f.pod_uid for f in listed] == [
            f"uid-{n}" for n in range(pods - 1, pods - 1 - len(listed), -1)
        ]
        assert row.job_uid is None and row.address.slack_user_id == "U1"
    # The same round again writes the same rows (a raced writer adds none).
    assert [r.dedup_key for r in bundle_nudges(plan([finding(n) for n in range(pods)], user), NOW, 24)] == [
        r.dedup_key for r in rows
    ]


def test_a_person_who_turned_nudges_off_gets_no_row() -> None:
    user = DirectoryUser(VICTIM, channels=("email",), nudges=False)
    f = finding(1)
    result = plan_nudge(job(f), f, Directory({VICTIM: user}, {}), frozenset({"email"}), NOW, 24)
    assert result.notifications == () and [s.reason for s in result.skipped] == [NUDGES_OFF]
    other = replace(f, owner="someone@example.com")
    assert plan_nudge(
        job(other), other, Directory({VICTIM: user}, {}), frozenset({"email"}), NOW, 24
    ).notifications
