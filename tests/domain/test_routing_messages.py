"""Routing of the messages that are not a job's summary: workflow summaries and serving notices (like
a summary, plus the team's Slack channel where asked), and pipeline events (to a person, or a team's
channel, else its leads); each row due now, keyed so that planning twice adds nothing."""

from __future__ import annotations

from dataclasses import replace

import pytest

from inno_notify.domain.model import NotificationKind, NotifyMode, RecipientAddress, Team
from inno_notify.domain.routing import (
    Audience,
    Directory,
    RoutingPlan,
    message_dedup_key,
    plan_event,
    plan_message,
)

from .test_routing import ALL, NOW, TEAMS, USERS

FACE = Audience(namespace="face-research", owner="alice@example.com", team="face")


def pairs(plan: RoutingPlan) -> set[tuple[str, str]]:
    return {(n.recipient, n.channel.value) for n in plan.notifications}


# (case, audience, enabled, teams changes, expected {(recipient, channel)})
MESSAGE_CASES: list[tuple[str, Audience, frozenset[str], dict[str, Team], set[tuple[str, str]]]] = [
    (
        "owner in the directory: own channels",
        FACE,
        ALL,
        {},
        {("alice@example.com", "slack"), ("alice@example.com", "email")},
    ),
    (
        "owner outside the directory: e-mail only",
        replace(FACE, owner="zed@example.org"),
        ALL,
        {},
        {("zed@example.org", "email")},
    ),
    ("annotation channels", replace(FACE, channels=("email",)), ALL, {}, {("alice@example.com", "email")}),
    ("notify never", replace(FACE, notify=NotifyMode.NEVER), ALL, {}, set()),
    ("notify failure, succeeded", replace(FACE, notify=NotifyMode.FAILURE), ALL, {}, set()),
    (
        "notify failure, failed",
        replace(FACE, notify=NotifyMode.FAILURE, failed=True, channels=("email",)),
        ALL,
        {},
        {("alice@example.com", "email")},
    ),
    (
        "unowned, team notifies unowned: the leads",
        replace(FACE, owner=None),
        ALL,
        {},
        {("lead@example.com", "slack"), ("extlead@example.com", "email")},
    ),
    ("unowned, team keeps quiet", Audience(namespace="quiet-ns"), ALL, {}, set()),
    (
        "team channel too",
        replace(FACE, team_channel=True, channels=("email",)),
        ALL,
        {"face": replace(TEAMS["face"], slack_channel="#face-gpu")},
        {("alice@example.com", "email"), ("#face-gpu", "slack")},
    ),
    (
        "team channel, Slack not configured",
        replace(FACE, team_channel=True, channels=("email",)),
        frozenset({"email"}),
        {"face": replace(TEAMS["face"], slack_channel="#face-gpu")},
        {("alice@example.com", "email")},
    ),
]


@pytest.mark.parametrize(
    ("case", "audience", "enabled", "teams", "expected"), MESSAGE_CASES, ids=[c[0] for c in MESSAGE_CASES]
)
def test_plan_message(
    case: str,
    audience: Audience,
    enabled: frozenset[str],
    teams: dict[str, Team],
    expected: set[tuple[str, str]],
) -> None:
    plan = plan_message(
        audience,
        NotificationKind.WORKFLOW_SUMMARY,
        "c/wf-1",
        {"message": {"x": 1}},
        Directory(USERS, {**TEAMS, **teams}),
        enabled,
        NOW,
        cluster="c",
    )
    assert pairs(plan) == expected
    assert (plan.silent_reason is None) == bool(expected)
    for row in plan.notifications:
        assert row.kind is NotificationKind.WORKFLOW_SUMMARY
        assert row.due_at == NOW and row.cluster == "c" and row.job_uid is None
        assert row.payload["message"] == {"x": 1}
        assert row.dedup_key == message_dedup_key("c/wf-1", row.kind, row.channel.value, row.recipient)
        assert row.payload == {"message": {"x": 1}}
    by_recipient = {(n.recipient, n.channel.value): n.address for n in plan.notifications}
    if ("alice@example.com", "slack") in by_recipient:
        assert by_recipient[("alice@example.com", "slack")].slack_user_id == "U0ALICE"
    if ("#face-gpu", "slack") in by_recipient:
        assert by_recipient[("#face-gpu", "slack")] == RecipientAddress(slack_channel="#face-gpu")


def test_plan_event_to_a_person() -> None:
    plan = plan_event("alice@example.com", None, "event/k1", {}, Directory(USERS, TEAMS), ALL, NOW)
    assert pairs(plan) == {("alice@example.com", "slack"), ("alice@example.com", "email")}
    assert all(n.kind is NotificationKind.PIPELINE_EVENT for n in plan.notifications)
    outside = plan_event("zed@example.org", None, "event/k2", {}, Directory(USERS, TEAMS), ALL, NOW)
    assert pairs(outside) == {("zed@example.org", "email")}
    refused = plan_event("a@x.example,b@y.example", None, "event/k3", {}, Directory(USERS, TEAMS), ALL, NOW)
    assert refused.notifications == () and refused.silent_reason


def test_plan_event_to_a_team() -> None:
    teams = {**TEAMS, "face": replace(TEAMS["face"], slack_channel="#face-gpu")}
    assert pairs(plan_event(None, "face", "event/k", {}, Directory(USERS, teams), ALL, NOW)) == {
        ("#face-gpu", "slack")
    }
    # Without a channel (or without Slack), the leads, each on their own channels.
    leads = plan_event(None, "face", "event/k", {}, Directory(USERS, TEAMS), ALL, NOW)
    assert pairs(leads) == {("lead@example.com", "slack"), ("extlead@example.com", "email")}
    no_slack = plan_event(None, "face", "event/k", {}, Directory(USERS, teams), frozenset({"email"}), NOW)
    assert pairs(no_slack) == {("extlead@example.com", "email")}
    unknown = plan_event(None, "nope", "event/k", {}, Directory(USERS, TEAMS), ALL, NOW)
    assert unknown.notifications == () and unknown.silent_reason == "no team 'nope'"
