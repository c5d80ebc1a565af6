"""A person's own preferences laid over their directory entry, and the mute that holds their rows."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.delivery import Mute, hold_muted, plan_batch
from inno_notify.domain.model import Channel, DirectoryUser, Notification, NotificationKind, NotifyMode
from inno_notify.domain.preferences import (
    Origin,
    Preferences,
    Via,
    apply_preferences,
    link_chat,
    unlink_chat,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
CHAT = Origin(Via.TELEGRAM, NOW, "111")
API = Origin(Via.API, NOW, "ops")
ENTRY = DirectoryUser("alice@example.com", "Alice", telegram_chat_id=42, channels=("telegram", "slack"))


@pytest.mark.parametrize(
    ("case", "prefs", "expected"),
    [
        ("no preferences", None, ENTRY),
        ("nothing set", Preferences("alice@example.com"), ENTRY),
        (
            "linked a chat",
            Preferences("alice@example.com").changed(link_chat(ENTRY, 111), CHAT),
            replace(ENTRY, telegram_chat_id=111),
        ),
        (
            "stopped on telegram",
            Preferences("alice@example.com").changed(unlink_chat(ENTRY), CHAT),
            replace(ENTRY, telegram_chat_id=None, channels=("slack",), telegram_stopped=True),
        ),
        (
            "unlinked by an admin: links are offered again",
            Preferences("alice@example.com").changed({"telegram_chat_id": None}, API),
            replace(ENTRY, telegram_chat_id=None),
        ),
        (
            "failures only",
            Preferences("alice@example.com").changed({"notify": "failure"}, CHAT),
            replace(ENTRY, notify=NotifyMode.FAILURE),
        ),
        (
            "a mute changes no address",
            Preferences("alice@example.com").changed({"muted_until": NOW}, CHAT),
            ENTRY,
        ),
        (
            "reset to the directory",
            Preferences("alice@example.com").changed({"channels": ("email",)}, CHAT).reset(("channels",)),
            ENTRY,
        ),
    ],
)
def test_apply_preferences(case: str, prefs: Preferences | None, expected: DirectoryUser) -> None:
    assert apply_preferences(ENTRY, prefs) == expected, case


def test_changes_record_their_origin_and_refuse_what_is_no_preference() -> None:
    prefs = Preferences("alice@example.com").changed({"channels": ["email", "email", "slack"]}, CHAT)
    prefs = prefs.changed({"notify": NotifyMode.ALWAYS}, API)
    assert prefs.channels == ("email", "slack")
    assert prefs.origins == {"channels": CHAT, "notify": API}
    with pytest.raises(ValueError, match="not a preference"):
        prefs.changed({"email": "mallory@example.com"}, API)
    with pytest.raises(ValueError, match="always or failure"):
        prefs.changed({"notify": NotifyMode.NEVER}, API)
    assert Origin.decode(API.encode()) == API
    with pytest.raises(ValueError):
        Origin.decode({"via": "carrier pigeon", "at": NOW.isoformat()})


def test_unlinking_never_leaves_a_person_without_a_channel() -> None:
    only_telegram = replace(ENTRY, channels=("telegram",))
    assert unlink_chat(only_telegram) == {"telegram_chat_id": None, "channels": ("email",)}
    assert link_chat(replace(ENTRY, channels=("email",)), 7)["channels"] == ("email", "telegram")


def _row(id: int, recipient: str, kind: NotificationKind = NotificationKind.JOB_SUMMARY) -> Notification:
    return Notification(
        dedup_key=f"k{id}",
        kind=kind,
        channel=Channel.EMAIL,
        recipient=recipient,
        due_at=NOW - timedelta(minutes=id),
        created_at=NOW - timedelta(minutes=id + 1),
        id=id,
    )


def test_hold_muted_holds_a_muted_recipient_s_rows_but_never_a_bot_reply() -> None:
    until = NOW + timedelta(hours=1)
    due = [
        _row(1, "Alice@Example.com"),
        _row(2, "alice@example.com", NotificationKind.DIGEST),
        _row(3, "alice@example.com", NotificationKind.BOT_REPLY),
        _row(4, "bob@example.com"),
        _row(5, "carol@example.com"),
    ]
    mutes = {"alice@example.com": Mute(until), "carol@example.com": Mute(NOW)}  # carol's mute ends now
    free, held = hold_muted(due, mutes, NOW)
    assert [r.id for r in free] == [3, 4, 5]
    assert [(r.id, at) for r, at in held] == [(1, until), (2, until)]


@pytest.mark.parametrize(
    ("scope", "channel", "held"),
    [
        (None, Channel.EMAIL, True),  # /mute all, or a mute set through the API: every channel
        (None, Channel.TELEGRAM, True),
        (frozenset({"telegram"}), Channel.TELEGRAM, True),  # /mute from the chat: the chat only
        (frozenset({"telegram"}), Channel.EMAIL, False),
        (frozenset({"telegram"}), Channel.SLACK, False),
        (frozenset(), Channel.EMAIL, False),
    ],
)
def test_a_mute_holds_its_own_channels_only(
    scope: frozenset[str] | None, channel: Channel, held: bool
) -> None:
    row = replace(_row(1, "alice@example.com"), channel=channel)
    free, kept = hold_muted([row], {"alice@example.com": Mute(NOW + timedelta(hours=1), scope)}, NOW)
    assert (len(kept), len(free)) == ((1, 0) if held else (0, 1))


@pytest.mark.parametrize(
    ("changes", "scope"),
    [
        ({"muted_until": NOW}, None),
        ({"muted_until": NOW, "muted_channels": ("telegram",)}, ("telegram",)),
        ({"muted_until": None, "muted_channels": ("telegram",)}, None),
    ],
)
def test_a_mute_s_scope_travels_with_it(changes: dict[str, object], scope: tuple[str, ...] | None) -> None:
    origin = Origin(Via.TELEGRAM, NOW, "1")
    prefs = Preferences("a@example.com").changed(changes, origin)
    assert prefs.muted_channels == scope and "muted_channels" not in prefs.origins
    assert prefs.reset(("muted_until",)).muted_channels is None
    with pytest.raises(ValueError, match="muted_channels"):
        Preferences("a@example.com").changed({"muted_channels": ("telegram",)}, origin)


@pytest.mark.parametrize(
    ("before", "after", "moved"),
    [
        ({}, {"telegram_chat_id": 1}, True),  # a link
        ({"telegram_chat_id": 1}, {"telegram_chat_id": 2}, True),  # a relink
        ({"telegram_chat_id": 1}, {"telegram_chat_id": None}, True),  # /stop
        ({"telegram_chat_id": 1}, {"telegram_chat_id": 1}, False),
        ({"telegram_chat_id": 1}, {"notify": "failure"}, False),
        ({}, {"muted_until": NOW}, False),
    ],
)
def test_which_changes_start_a_new_link_generation(
    before: dict[str, object], after: dict[str, object], moved: bool
) -> None:
    origin = Origin(Via.TELEGRAM, NOW, "1")
    old = Preferences("a@example.com").changed(before, origin) if before else Preferences("a@example.com")
    assert old.chat_changed(old.changed(after, origin)) is moved


def test_held_summaries_come_due_together_and_go_out_as_one_message() -> None:
    until = NOW + timedelta(hours=5)
    held = [replace(_row(i, "alice@example.com"), due_at=until, next_attempt_at=until) for i in range(1, 6)]
    plan = plan_batch(held, [], until, group_wait_seconds=30)
    assert [[r.id for r in m] for m in plan.messages] == [[1, 2, 3, 4, 5]]
