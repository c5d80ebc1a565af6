"""Routing with a person's own preferences: failures only, and the rows that offer a Telegram link."""

from __future__ import annotations

from dataclasses import replace

import pytest

from inno_notify.domain.model import DirectoryUser, JobStatus, NotificationKind, NotifyMode
from inno_notify.domain.routing import (
    FAILURES_ONLY,
    NO_CHANNELS,
    Audience,
    Directory,
    Skipped,
    plan_event,
    plan_message,
    plan_nudge,
    plan_summary,
)

from .idle_samples import idle_finding
from .test_routing import ALL, NOW, TEAMS, USERS, job

FAILURES = {**USERS, "alice@example.com": replace(USERS["alice@example.com"], notify=NotifyMode.FAILURE)}


@pytest.mark.parametrize(
    ("status", "channels"),
    [(JobStatus.FAILED, {"slack", "email"}), (JobStatus.SUCCEEDED, set())],
)
def test_a_person_who_asked_for_failures_only_gets_only_failed_jobs(
    status: JobStatus, channels: set[str]
) -> None:
    plan = plan_summary(job(status=status), Directory(FAILURES, TEAMS), ALL, NOW, 30.0)
    assert {n.channel.value for n in plan.notifications} == channels
    if not channels:
        assert plan.skipped == (Skipped("alice@example.com", "*", FAILURES_ONLY),)


def test_failures_only_applies_to_workflows_but_not_to_pipeline_messages() -> None:
    face = Audience(namespace="face-research", owner="alice@example.com", team="face")
    ok = plan_message(face, NotificationKind.WORKFLOW_SUMMARY, "wf", {}, Directory(FAILURES, TEAMS), ALL, NOW)
    failed = plan_message(
        replace(face, failed=True),
        NotificationKind.WORKFLOW_SUMMARY,
        "wf",
        {},
        Directory(FAILURES, TEAMS),
        ALL,
        NOW,
    )
    serving = plan_message(
        face, NotificationKind.MODEL_SERVING, "m", {}, Directory(FAILURES, TEAMS), ALL, NOW
    )
    event = plan_event("alice@example.com", None, "e", {}, Directory(FAILURES, TEAMS), ALL, NOW)
    assert (len(ok.notifications), len(failed.notifications)) == (0, 2)
    assert len(serving.notifications) == 2 and len(event.notifications) == 2


@pytest.mark.parametrize(
    ("user", "linkable"),
    [
        (DirectoryUser("alice@example.com", channels=("email",)), True),
        (DirectoryUser("alice@example.com", telegram_chat_id=5, channels=("email",)), False),
        (DirectoryUser("alice@example.com", channels=("email",), telegram_stopped=True), False),
    ],
)
def test_rows_to_a_directory_user_without_a_chat_offer_the_link(user: DirectoryUser, linkable: bool) -> None:
    plan = plan_summary(job(), Directory({user.email: user}, TEAMS), ALL, NOW, 30.0)
    assert [n.address.telegram_link_epoch is not None for n in plan.notifications] == [linkable]
    # Someone outside the directory is no one the bot could link.
    outsider = plan_summary(job(owner="zed@example.org"), Directory({}, TEAMS), ALL, NOW, 30.0)
    assert [n.address.telegram_link_epoch for n in outsider.notifications] == [None]


def test_failures_only_leaves_idle_nudges_alone() -> None:
    """A nudge is about a running pod, not about how a job ended: the preference does not apply."""
    finding = idle_finding(NOW)
    running = job(status=JobStatus.RUNNING)
    plan = plan_nudge(running, finding, Directory(FAILURES, TEAMS), ALL, NOW, 24.0)
    assert {n.channel.value for n in plan.notifications} == {"slack", "email"}


@pytest.mark.parametrize("epoch", [0, 3])
def test_the_offered_link_is_of_the_person_s_current_link_generation(epoch: int) -> None:
    user = DirectoryUser("alice@example.com", channels=("email",), link_epoch=epoch)
    (row,) = plan_summary(job(), Directory({user.email: user}, TEAMS), ALL, NOW, 30.0).notifications
    assert row.address.telegram_link_epoch == epoch


@pytest.mark.parametrize("annotation", [None, ("email", "slack")])
def test_a_person_with_no_channel_left_gets_nothing_whatever_the_job_says(
    annotation: tuple[str, ...] | None,
) -> None:
    """`/stop all`: a job's channels annotation, which anyone naming the person can write, does not
    bring a channel back."""
    user = DirectoryUser("alice@example.com", slack_user_id="U1", channels=())
    plan = plan_summary(job(channels=annotation), Directory({user.email: user}, TEAMS), ALL, NOW, 30.0)
    assert plan.notifications == () and plan.skipped == (Skipped("alice@example.com", "*", NO_CHANNELS),)
