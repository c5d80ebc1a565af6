"""Routing of a finished job's summary: who gets it, on which channels, and why not."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    JobRecord,
    JobStatus,
    NotificationKind,
    NotifyMode,
    RecipientAddress,
    Team,
)
from inno_notify.domain.routing import Directory, plan_summary, summary_dedup_key

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
ALL = frozenset({"telegram", "slack", "email"})

USERS = {
    "alice@example.com": DirectoryUser(
        "alice@example.com",
        "Alice",
        slack_user_id="U0ALICE",
        telegram_chat_id=111,
        channels=("slack", "email"),
    ),
    "bob@example.com": DirectoryUser("bob@example.com", "Bob", channels=("telegram", "email")),
    "carol@example.com": DirectoryUser("carol@example.com", telegram_chat_id=333, channels=("telegram",)),
    "lead@example.com": DirectoryUser("lead@example.com", "Lead", channels=("slack",)),
}
TEAMS = {
    "face": Team("face", namespaces=("face-research",), leads=("lead@example.com", "extlead@example.com")),
    "quiet": Team("quiet", namespaces=("quiet-ns",), leads=("lead@example.com",), notify_unowned=False),
}
TEAMS["face"] = replace(TEAMS["face"], notify_unowned=True)


def job(**changes: object) -> JobRecord:
    base = JobRecord(
        cluster="default",
        uid="uid-1",
        namespace="face-research",
        name="train",
        status=JobStatus.SUCCEEDED,
        owner="alice@example.com",
        team="face",
    )
    return replace(base, **changes)  # type: ignore[arg-type]


# (case, job changes, enabled channels, expected {(recipient, channel)})
CASES: list[tuple[str, dict[str, object], frozenset[str], set[tuple[str, str]]]] = [
    (
        "directory owner: own channels",
        {},
        ALL,
        {("alice@example.com", "slack"), ("alice@example.com", "email")},
    ),
    (
        "owner matched case-insensitively, directory spelling kept",
        {"owner": " Alice@Example.COM "},
        ALL,
        {("alice@example.com", "slack"), ("alice@example.com", "email")},
    ),
    ("annotation overrides channels", {"channels": ("telegram",)}, ALL, {("alice@example.com", "telegram")}),
    ("channel not configured skipped", {}, frozenset({"email"}), {("alice@example.com", "email")}),
    ("nothing configured", {}, frozenset(), set()),
    ("telegram without chat id skipped", {"owner": "bob@example.com"}, ALL, {("bob@example.com", "email")}),
    ("telegram with chat id", {"owner": "carol@example.com"}, ALL, {("carol@example.com", "telegram")}),
    (
        "owner not in directory: e-mail only",
        {"owner": "stranger@example.org"},
        ALL,
        {("stranger@example.org", "email")},
    ),
    (
        "owner not in directory, annotation without e-mail: nothing",
        {"owner": "stranger@example.org", "channels": ("slack",)},
        ALL,
        set(),
    ),
    (
        "owner not in directory, e-mail disabled: nothing",
        {"owner": "stranger@example.org"},
        frozenset({"slack", "telegram"}),
        set(),
    ),
    ("notify never", {"notify": NotifyMode.NEVER, "status": JobStatus.FAILED}, ALL, set()),
    ("notify failure, job succeeded", {"notify": NotifyMode.FAILURE}, ALL, set()),
    ("notify failure, job deleted", {"notify": NotifyMode.FAILURE, "status": JobStatus.DELETED}, ALL, set()),
    (
        "notify failure, job failed",
        {"notify": NotifyMode.FAILURE, "status": JobStatus.FAILED},
        ALL,
        {("alice@example.com", "slack"), ("alice@example.com", "email")},
    ),
    (
        "no owner, team notifies unowned: leads (directory channels / e-mail only)",
        {"owner": None},
        ALL,
        {("lead@example.com", "slack"), ("extlead@example.com", "email")},
    ),
    (
        "owner that is not an e-mail and not in the directory counts as no owner",
        {"owner": "alice"},
        ALL,
        {("lead@example.com", "slack"), ("extlead@example.com", "email")},
    ),
    (
        "no owner, team from namespace",
        {"owner": None, "team": None},
        ALL,
        {("lead@example.com", "slack"), ("extlead@example.com", "email")},
    ),
    ("no owner, team keeps unowned quiet", {"owner": None, "team": "quiet"}, ALL, set()),
    ("no owner, unknown team", {"owner": None, "team": "nobody"}, ALL, set()),
    ("no owner, no team", {"owner": None, "team": None, "namespace": "elsewhere"}, ALL, set()),
]


@pytest.mark.parametrize(
    ("changes", "enabled", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_who_gets_the_summary(
    changes: dict[str, object], enabled: frozenset[str], expected: set[tuple[str, str]]
) -> None:
    rows = plan_summary(job(**changes), Directory(USERS, TEAMS), enabled, NOW, 30.0).notifications

    assert {(n.recipient, n.channel.value) for n in rows} == expected
    assert len(rows) == len(expected)


def test_rows_carry_the_dedup_key_due_time_group_and_addresses() -> None:
    record = job(group_key="sweep-7", channels=("telegram", "slack"))
    rows = plan_summary(record, Directory(USERS, TEAMS), ALL, NOW, 30.0).notifications

    by_channel = {n.channel: n for n in rows}
    tg = by_channel[Channel.TELEGRAM]
    assert tg.dedup_key == "default/uid-1/job_summary/telegram/alice@example.com"
    assert tg.dedup_key == summary_dedup_key("default", "uid-1", "telegram", "alice@example.com")
    assert tg.kind is NotificationKind.JOB_SUMMARY
    assert (tg.created_at, tg.due_at) == (NOW, NOW + timedelta(seconds=30))
    assert (tg.cluster, tg.job_uid, tg.group_key) == ("default", "uid-1", "sweep-7")
    assert tg.address == RecipientAddress(name="Alice", telegram_chat_id=111, slack_user_id="U0ALICE")
    assert by_channel[Channel.SLACK].address == tg.address
    assert tg.payload == {} == by_channel[Channel.SLACK].payload  # a summary's content is its job's


def test_routing_twice_gives_the_same_keys() -> None:
    first = plan_summary(job(), Directory(USERS, TEAMS), ALL, NOW, 30.0).notifications
    again = plan_summary(job(), Directory(USERS, TEAMS), ALL, NOW + timedelta(hours=1), 30.0).notifications
    assert [n.dedup_key for n in first] == [n.dedup_key for n in again]


def test_a_lead_who_is_also_listed_twice_gets_one_row_per_channel() -> None:
    teams = {"face": replace(TEAMS["face"], leads=("lead@example.com", "LEAD@example.com"))}
    rows = plan_summary(job(owner=None), Directory(USERS, teams), ALL, NOW, 30.0).notifications
    assert [(n.recipient, n.channel.value) for n in rows] == [("lead@example.com", "slack")]


def test_skips_and_silence_come_with_reasons() -> None:
    plan = plan_summary(
        job(owner="bob@example.com"), Directory(USERS, TEAMS), frozenset({"telegram"}), NOW, 30.0
    )
    assert plan.notifications == ()
    assert {(s.recipient, s.channel, s.reason) for s in plan.skipped} == {
        ("bob@example.com", "telegram", "no telegram chat id in the directory"),
        ("bob@example.com", "email", "channel not configured in the service"),
    }
    assert plan.silent_reason == "no channel left to send on"

    never = plan_summary(job(notify=NotifyMode.NEVER), Directory(USERS, TEAMS), ALL, NOW, 30.0)
    assert never.silent_reason is not None and "never" in never.silent_reason

    quiet = plan_summary(job(owner=None, team="quiet"), Directory(USERS, TEAMS), ALL, NOW, 30.0)
    assert quiet.silent_reason is not None and "quiet" in quiet.silent_reason


def test_unknown_channel_in_the_annotation_is_skipped() -> None:
    plan = plan_summary(job(channels=("pager", "email")), Directory(USERS, TEAMS), ALL, NOW, 30.0)
    assert [(n.channel.value) for n in plan.notifications] == ["email"]
    assert [(s.channel, s.reason) for s in plan.skipped] == [("pager", "unknown channel")]


LEADS = {("lead@example.com", "slack"), ("extlead@example.com", "email")}
# (case, owner annotation, allowed e-mail domains, expected {(recipient, channel)})
HOSTILE_OWNERS: list[tuple[str, str, tuple[str, ...], set[tuple[str, str]]]] = [
    ("two addresses in one", "attacker@evil.example,victim@corp.example", (), LEADS),
    ("two addresses, semicolon", "attacker@evil.example;victim@corp.example", (), LEADS),
    ("display name", "Victim <victim@corp.example>", (), LEADS),
    ("group syntax", "all: a@corp.example, b@corp.example;", (), LEADS),
    ("header injection", "a@corp.example\r\nBcc: victim@corp.example", (), LEADS),
    ("NUL", "a@corp.example\x00b@evil.example", (), LEADS),
    ("comment", "a@corp.example (me)", (), LEADS),
    ("quoted local part", '"a,b"@corp.example', (), LEADS),
    ("domain literal", "a@[10.0.0.1]", (), LEADS),
    ("source route", "victim%evil.example@corp.example", (), LEADS),
    ("plain address", "stranger@corp.example", (), {("stranger@corp.example", "email")}),
    ("allowed domain", "stranger@corp.example", ("corp.example",), {("stranger@corp.example", "email")}),
    ("allowed subdomain", "x@lab.corp.example", ("corp.example",), {("x@lab.corp.example", "email")}),
    ("allowed, case and @ ignored", "x@CORP.example", ("@Corp.Example",), {("x@CORP.example", "email")}),
    ("domain outside the allowed ones", "attacker@evil.example", ("corp.example",), set()),
    ("suffix is not a subdomain", "x@evilcorp.example", ("corp.example",), set()),
]


@pytest.mark.parametrize(
    ("owner", "allowed", "expected"), [c[1:] for c in HOSTILE_OWNERS], ids=[c[0] for c in HOSTILE_OWNERS]
)
def test_an_owner_gets_e_mail_only_at_one_plain_address_in_an_allowed_domain(
    owner: str, allowed: tuple[str, ...], expected: set[tuple[str, str]]
) -> None:
    rows = plan_summary(job(owner=owner), Directory(USERS, TEAMS), ALL, NOW, 30.0, allowed).notifications

    assert {(n.recipient, n.channel.value) for n in rows} == expected


def test_allowed_domains_keep_directory_users_other_channels_and_say_why() -> None:
    teams = {"face": replace(TEAMS["face"], leads=("lead@example.com", "ext@partner.example"))}
    plan = plan_summary(job(), Directory(USERS, teams), ALL, NOW, 30.0, ("corp.example",))

    assert {(n.recipient, n.channel.value) for n in plan.notifications} == {("alice@example.com", "slack")}
    assert [(s.recipient, s.channel, s.reason) for s in plan.skipped] == [
        ("alice@example.com", "email", "e-mail domain not allowed (notify.allowed_email_domains)")
    ]
    leads = plan_summary(job(owner=None), Directory(USERS, teams), ALL, NOW, 30.0, ("example.com",))
    assert {(n.recipient, n.channel.value) for n in leads.notifications} == {("lead@example.com", "slack")}
    assert [(s.recipient, s.reason) for s in leads.skipped] == [
        ("ext@partner.example", "e-mail domain not allowed (notify.allowed_email_domains)")
    ]


def test_a_lead_listed_as_an_address_list_gets_no_e_mail() -> None:
    teams = {"face": replace(TEAMS["face"], leads=("a@example.com,b@example.com",))}
    plan = plan_summary(job(owner=None), Directory(USERS, teams), ALL, NOW, 30.0)

    assert plan.notifications == ()
    assert plan.skipped[0].reason.startswith("not a single e-mail address")
