"""The webhook in routing: one more row per recipient and message beside their own channels, whatever
those are, that follows the person's own choices but not a job's channel annotation, and that
nobody can choose or drop by naming it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from inno_notify.domain.model import DirectoryUser, JobStatus, NotificationKind, NotifyMode
from inno_notify.domain.routing import (
    NO_CHANNELS,
    WEBHOOK_NOT_CHOSEN,
    Audience,
    Directory,
    RoutingPlan,
    plan_event,
    plan_message,
    plan_summary,
)

from .test_routing import ALL, NOW, TEAMS, USERS, job

WITH_WEBHOOK = ALL | {"webhook"}


def pairs(plan: RoutingPlan) -> set[tuple[str, str]]:
    return {(n.recipient, n.channel.value) for n in plan.notifications}


def users(**changes: DirectoryUser) -> dict[str, DirectoryUser]:
    return {**USERS, **{u.email: u for u in changes.values()}}


# (case, job changes, users, enabled, expected {(recipient, channel)})
CASES: list[tuple[str, dict[str, object], dict[str, DirectoryUser], frozenset[str], set[tuple[str, str]]]] = [
    (
        "beside the owner's own channels",
        {},
        USERS,
        WITH_WEBHOOK,
        {("alice@example.com", "slack"), ("alice@example.com", "email"), ("alice@example.com", "webhook")},
    ),
    ("the only channel configured", {}, USERS, frozenset({"webhook"}), {("alice@example.com", "webhook")}),
    (
        "not configured: no row",
        {},
        USERS,
        ALL,
        {("alice@example.com", "slack"), ("alice@example.com", "email")},
    ),
    (
        "a job's annotation narrows the person's channels, not the webhook",
        {"channels": ("email",)},
        USERS,
        WITH_WEBHOOK,
        {("alice@example.com", "email"), ("alice@example.com", "webhook")},
    ),
    (
        "an owner outside the directory",
        {"owner": "stranger@example.org"},
        USERS,
        WITH_WEBHOOK,
        {("stranger@example.org", "email"), ("stranger@example.org", "webhook")},
    ),
    (
        "unowned: each lead once",
        {"owner": None},
        USERS,
        WITH_WEBHOOK,
        {
            ("lead@example.com", "slack"),
            ("lead@example.com", "webhook"),
            ("extlead@example.com", "email"),
            ("extlead@example.com", "webhook"),
        },
    ),
    (
        "a person who stopped everything gets no copy either",
        {},
        users(a=DirectoryUser("alice@example.com", channels=())),
        WITH_WEBHOOK,
        set(),
    ),
    (
        "failures only: none for a success",
        {},
        users(a=DirectoryUser("alice@example.com", channels=("email",), notify=NotifyMode.FAILURE)),
        WITH_WEBHOOK,
        set(),
    ),
    (
        "failures only: a failure's copy",
        {"status": JobStatus.FAILED},
        users(a=DirectoryUser("alice@example.com", channels=("email",), notify=NotifyMode.FAILURE)),
        WITH_WEBHOOK,
        {("alice@example.com", "email"), ("alice@example.com", "webhook")},
    ),
    ("notify: never", {"notify": NotifyMode.NEVER}, USERS, WITH_WEBHOOK, set()),
]


@pytest.mark.parametrize(
    ("case", "changes", "directory", "enabled", "expected"), CASES, ids=[c[0] for c in CASES]
)
def test_summary_rows_with_the_webhook(
    case: str,
    changes: dict[str, object],
    directory: dict[str, DirectoryUser],
    enabled: frozenset[str],
    expected: set[tuple[str, str]],
) -> None:
    plan = plan_summary(job(**changes), Directory(directory, TEAMS), enabled, NOW, 30)
    assert pairs(plan) == expected, case
    # One row per recipient, keyed apart from their other channels.
    keys = [n.dedup_key for n in plan.notifications]
    assert len(keys) == len(set(keys))


def test_naming_the_webhook_chooses_nothing() -> None:
    person = DirectoryUser("alice@example.com", channels=("webhook", "email"))
    plan = plan_summary(job(channels=("webhook",)), Directory(users(a=person), TEAMS), WITH_WEBHOOK, NOW, 30)
    assert pairs(plan) == {("alice@example.com", "webhook")}
    assert [(s.channel, s.reason) for s in plan.skipped] == [("webhook", WEBHOOK_NOT_CHOSEN)]
    nobody = Directory(users(a=replace(person, channels=())), TEAMS)
    stopped = plan_summary(job(), nobody, WITH_WEBHOOK, NOW, 30)
    assert [s.reason for s in stopped.skipped] == [NO_CHANNELS]


def test_a_team_channel_post_is_copied_to_the_webhook() -> None:
    teams = {"face": replace(TEAMS["face"], slack_channel="#face-gpu")}
    audience = Audience(namespace="face-research", owner="alice@example.com", team="face", team_channel=True)
    directory = Directory(USERS, teams)
    plan = plan_message(audience, NotificationKind.MODEL_SERVING, "m/1", {}, directory, WITH_WEBHOOK, NOW)
    assert ("#face-gpu", "slack") in pairs(plan) and ("#face-gpu", "webhook") in pairs(plan)
    event = plan_event(None, "face", "event/1", {}, Directory(USERS, teams), WITH_WEBHOOK, NOW)
    assert pairs(event) == {("#face-gpu", "slack"), ("#face-gpu", "webhook")}


def test_a_person_who_reads_mattermost_gets_it_there() -> None:
    person = DirectoryUser("alice@example.com", channels=("mattermost",))
    directory = users(a=person)
    enabled = WITH_WEBHOOK | {"mattermost"}
    assert pairs(plan_summary(job(), Directory(directory, TEAMS), enabled, NOW, 30)) == {
        ("alice@example.com", "mattermost"),
        ("alice@example.com", "webhook"),
    }
    unconfigured = plan_summary(job(), Directory(directory, TEAMS), ALL, NOW, 30)
    assert unconfigured.notifications == ()
    assert [(s.channel, s.reason) for s in unconfigured.skipped] == [
        ("mattermost", "channel not configured in the service")
    ]
