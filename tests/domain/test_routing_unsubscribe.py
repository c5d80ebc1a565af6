"""Routing of a person who unsubscribed from e-mail (the one-click link every e-mail carries, issue
33): no e-mail row for them from any planner, whatever a job's annotation or a pipeline asks, in the
directory or not; their other channels are routed as before, and so is everyone else."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection

import pytest

from inno_notify.domain import routing
from inno_notify.domain.model import DirectoryUser, NotificationKind, Team
from inno_notify.domain.routing import (
    UNSUBSCRIBED,
    Audience,
    Directory,
    RoutingPlan,
    Skipped,
    plan_event,
    plan_message,
    plan_nudge,
    plan_summary,
)
from inno_notify.service import digest

from .test_nudge_bundles import finding
from .test_routing import ALL, NOW, job

ALICE = DirectoryUser("Alice@Example.com", "Alice", slack_user_id="U1", channels=("slack", "email"))
STRANGER = "stranger@example.org"
LEAD = "lead@example.org"
A = "alice@example.com"
USERS = {A: ALICE}
TEAMS = {"face": Team("face", namespaces=("face-research",), leads=(LEAD,), notify_unowned=True)}

# A planner: (owner, the annotation's channels, who turned e-mail off) -> its plan.
Planner = Callable[[str | None, tuple[str, ...] | None, Collection[str]], RoutingPlan]


def summary(owner: str | None, channels: tuple[str, ...] | None, off: Collection[str]) -> RoutingPlan:
    return plan_summary(
        job(owner=owner, channels=channels), Directory(USERS, TEAMS, frozenset(off)), ALL, NOW, 30.0
    )


def nudge(owner: str | None, channels: tuple[str, ...] | None, off: Collection[str]) -> RoutingPlan:
    record = job(owner=owner, channels=channels)
    return plan_nudge(
        record, finding(1, owner or ""), Directory(USERS, TEAMS, frozenset(off)), ALL, NOW, 24.0
    )


def message(kind: NotificationKind) -> Planner:
    def plan(owner: str | None, channels: tuple[str, ...] | None, off: Collection[str]) -> RoutingPlan:
        audience = Audience("face-research", owner=owner, team="face", channels=channels, failed=True)
        return plan_message(audience, kind, "s", {}, Directory(USERS, TEAMS, frozenset(off)), ALL, NOW)

    return plan


def event(owner: str | None, channels: tuple[str, ...] | None, off: Collection[str]) -> RoutingPlan:
    # A pipeline names a person (its own channels) or, without one, a team (its leads).
    return plan_event(
        owner, None if owner else "face", "e", {}, Directory(USERS, TEAMS, frozenset(off)), ALL, NOW
    )


PLANNERS = {
    "summary": summary,
    "nudge": nudge,
    "workflow": message(NotificationKind.WORKFLOW_SUMMARY),
    "serving": message(NotificationKind.MODEL_SERVING),
    "event": event,
}
# (case, owner, the annotation's channels, e-mail off, the rows expected {(recipient, channel)})
CASES: list[tuple[str, str | None, tuple[str, ...] | None, set[str], set[tuple[str, str]]]] = [
    ("nobody off", "alice@example.com", None, set(), {(ALICE.email, "slack"), (ALICE.email, "email")}),
    (
        "directory user off: slack stays",
        "alice@example.com",
        None,
        {"alice@example.com"},
        {(ALICE.email, "slack")},
    ),
    ("annotation asks e-mail: still none", "alice@example.com", ("email",), {"alice@example.com"}, set()),
    (
        "annotation asks both",
        "ALICE@example.com",
        ("email", "slack"),
        {"alice@example.com"},
        {(ALICE.email, "slack")},
    ),
    ("outside the directory", STRANGER, None, set(), {(STRANGER, "email")}),
    ("outside the directory, off", STRANGER, None, {STRANGER}, set()),
    ("outside, off, annotation asks e-mail", " Stranger@Example.org ", ("email",), {STRANGER}, set()),
    ("someone else off", STRANGER, None, {"alice@example.com"}, {(STRANGER, "email")}),
    ("a lead off (no owner)", None, None, {LEAD}, set()),
    ("a lead on (no owner)", None, None, set(), {(LEAD, "email")}),
]


@pytest.mark.parametrize(
    ("planner", "owner", "channels", "off", "expected"),
    [
        pytest.param(planner, *case[1:], id=f"{name}: {case[0]}")
        for name, planner in PLANNERS.items()
        for case in CASES
        # A pipeline message names no channels (the person's own go).
        if not (planner is event and case[2] is not None)
    ],
)
def test_no_e_mail_row_for_a_person_who_unsubscribed(
    planner: Planner,
    owner: str | None,
    channels: tuple[str, ...] | None,
    off: set[str],
    expected: set[tuple[str, str]],
) -> None:
    plan = planner(owner, channels, frozenset(off))
    assert {(n.recipient, n.channel.value) for n in plan.notifications} == expected
    said = (owner or LEAD).strip().lower() in off
    assert [s.channel for s in plan.skipped if s.reason == UNSUBSCRIBED] == (["email"] if said else [])


def test_the_skip_says_who_unsubscribed() -> None:
    plan = summary(STRANGER, None, {STRANGER})
    assert plan.notifications == ()
    assert plan.skipped == (Skipped(STRANGER, "email", UNSUBSCRIBED),)
    assert plan.silent_reason == "no channel left to send on"


def test_turning_e_mail_off_changes_no_other_row() -> None:
    """The rows of a person who still gets e-mail, and the other channels' rows, are the same rows."""
    before = summary("alice@example.com", None, set()).notifications
    after = summary("alice@example.com", None, {"alice@example.com"}).notifications
    assert after == tuple(n for n in before if n.channel.value != "email")


# --- every caller passes who turned e-mail off ------------------------------------------------------

# Each planner takes who turned e-mail off with no default: the whole routing.Directory, or (the
# admins' cluster digest, which reads no user) the addresses alone. A caller cannot forget it.
WHO_TURNED_E_MAIL_OFF: list[tuple[Callable[..., object], str]] = [
    (routing.plan_summary, "directory"),
    (routing.plan_nudge, "directory"),
    (routing.plan_message, "directory"),
    (routing.plan_event, "directory"),
    (digest.plan_digest, "directory"),
    (digest.plan_cluster_digest, "email_off"),
]


@pytest.mark.parametrize(
    ("planner", "parameter"), WHO_TURNED_E_MAIL_OFF, ids=[f.__name__ for f, _ in WHO_TURNED_E_MAIL_OFF]
)
def test_every_planner_must_be_told_who_turned_e_mail_off(
    planner: Callable[..., object], parameter: str
) -> None:
    assert inspect.signature(planner).parameters[parameter].default is inspect.Parameter.empty
