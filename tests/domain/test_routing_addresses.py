"""Where each routed row's recipient is reached: the typed address routing fills for every kind of
plan and channel (issue 31), and the payload that keeps only what the message says."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    JobStatus,
    Notification,
    NotificationKind,
    RecipientAddress,
    Team,
)
from inno_notify.domain.routing import (
    Audience,
    Directory,
    RoutingPlan,
    plan_event,
    plan_message,
    plan_nudge,
    plan_summary,
)

from .test_live import finding_for
from .test_routing import ALL, NOW, TEAMS, job

ALICE = DirectoryUser(
    "alice@example.com",
    "Alice",
    slack_user_id="U0ALICE",
    telegram_chat_id=111,
    channels=("telegram", "slack", "email"),
)
# No chat yet, not stopped: the link is offered under their generation.
BOB = DirectoryUser(
    "bob@example.com", "Bob", channels=("email", "slack"), slack_user_id="U0BOB", link_epoch=4
)
STOPPED = DirectoryUser("dan@example.com", channels=("email",), telegram_stopped=True, link_epoch=2)
USERS = {u.email: u for u in (ALICE, BOB, STOPPED)}
CHANNEL_TEAM = Team("nlp", namespaces=("nlp",), slack_channel="#nlp-gpu")
ALL_TEAMS = {**TEAMS, "nlp": CHANNEL_TEAM}

ALICE_ADDRESS = RecipientAddress(name="Alice", telegram_chat_id=111, slack_user_id="U0ALICE")
BOB_ADDRESS = RecipientAddress(name="Bob", slack_user_id="U0BOB", telegram_link_epoch=4)
NOWHERE = RecipientAddress()
CONTENT = {"message": {"title": "done"}}

Plan = Callable[[str], RoutingPlan]


def summary(owner: str) -> RoutingPlan:
    return plan_summary(job(owner=owner, status=JobStatus.FAILED), Directory(USERS, TEAMS), ALL, NOW, 30.0)


def nudge(owner: str) -> RoutingPlan:
    record = job(owner=owner, status=JobStatus.RUNNING)
    return plan_nudge(
        record, replace(finding_for(record), owner=owner), Directory(USERS, TEAMS), ALL, NOW, 24.0
    )


def message(owner: str) -> RoutingPlan:
    audience = Audience(namespace="face-research", owner=owner, team="face")
    return plan_message(
        audience, NotificationKind.WORKFLOW_SUMMARY, "c/wf", CONTENT, Directory(USERS, TEAMS), ALL, NOW
    )


def event(owner: str) -> RoutingPlan:
    return plan_event(owner, None, "event/k", CONTENT, Directory(USERS, TEAMS), ALL, NOW)


# (plan, recipient, {channel: the row's address}: one row per channel the recipient gets)
CASES: list[tuple[str, Plan, str, dict[Channel, RecipientAddress]]] = [
    (name, plan, owner, rows)
    for name, plan in (("summary", summary), ("nudge", nudge), ("message", message), ("event", event))
    for owner, rows in (
        # Every row carries all the person's addresses, whatever its channel.
        (
            "alice@example.com",
            {Channel.TELEGRAM: ALICE_ADDRESS, Channel.SLACK: ALICE_ADDRESS, Channel.EMAIL: ALICE_ADDRESS},
        ),
        ("bob@example.com", {Channel.SLACK: BOB_ADDRESS, Channel.EMAIL: BOB_ADDRESS}),
        ("dan@example.com", {Channel.EMAIL: NOWHERE}),  # stopped Telegram: no link offered
        ("zed@example.org", {Channel.EMAIL: NOWHERE}),  # outside the directory: the e-mail alone
    )
]


@pytest.mark.parametrize(("name", "plan", "owner", "rows"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_each_row_carries_its_recipient_s_typed_address(
    name: str, plan: Plan, owner: str, rows: dict[Channel, RecipientAddress]
) -> None:
    notifications = plan(owner).notifications
    assert {n.channel: n.address for n in notifications} == rows
    assert len(notifications) == len(rows)
    for row in notifications:
        assert row.recipient == owner
        _assert_content_only(row)


@pytest.mark.parametrize(
    "plan",
    [
        lambda: plan_message(
            Audience(namespace="nlp", team="nlp", team_channel=True, owner="zed@example.org"),
            NotificationKind.MODEL_SERVING,
            "c/model",
            CONTENT,
            Directory(USERS, ALL_TEAMS),
            ALL,
            NOW,
        ),
        lambda: plan_event(None, "nlp", "event/k", CONTENT, Directory(USERS, ALL_TEAMS), ALL, NOW),
    ],
    ids=["message", "event"],
)
def test_a_team_channel_row_is_addressed_to_the_channel(plan: Callable[[], RoutingPlan]) -> None:
    (row,) = [n for n in plan().notifications if n.recipient == "#nlp-gpu"]
    assert (row.channel, row.address) == (Channel.SLACK, RecipientAddress(slack_channel="#nlp-gpu"))
    _assert_content_only(row)


def _assert_content_only(row: Notification) -> None:
    """The payload says what the message says, and nothing of where it goes."""
    if row.kind is NotificationKind.JOB_SUMMARY:
        assert row.payload == {}
    elif row.kind is NotificationKind.IDLE_NUDGE:
        assert set(row.payload) == {"nudge"}
    else:
        assert row.payload == CONTENT
