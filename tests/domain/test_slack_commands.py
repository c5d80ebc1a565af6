"""The chat commands as Slack gives them (`/inno mute 2`, a DM "status", a Home tab button): which
command, what it changes (a Slack chat speaks for Slack unless the person says `all`), and who the
Slack user is (by id, never by a name)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.bot_replies import ReplyKind
from inno_notify.domain.chat_commands import Command, CommandName, read_command
from inno_notify.domain.model import DirectoryUser, NotifyMode
from inno_notify.domain.slack_commands import (
    ACTIONS,
    SlackRequest,
    SlackRequestKind,
    decide,
    user_of_slack,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BOB = DirectoryUser("bob@example.com", "Bob", slack_user_id="U0BOB", channels=("slack", "email"))
ALICE = DirectoryUser("alice@example.com", "Alice", channels=("email",))
CAROL = DirectoryUser("carol@example.com", "Carol", slack_user_id="U0CAROL", channels=("slack",))
USERS = [BOB, ALICE, CAROL]


def _said(text: str, kind: SlackRequestKind = SlackRequestKind.COMMAND) -> SlackRequest:
    return SlackRequest(kind, "T0", "U0BOB", "command/1", text=text)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("status", Command(CommandName.STATUS)),
        ("/status", Command(CommandName.STATUS)),
        ("  MUTE  all 8h ", Command(CommandName.MUTE, "all 8h")),
        ("mute\n2", Command(CommandName.MUTE, "2")),
        ("nudges off", Command(CommandName.NUDGES, "off")),
        ("failures", Command(CommandName.FAILURES)),
        ("all", Command(CommandName.ALL)),
        ("stop all", Command(CommandName.STOP, "all")),
        ("help", Command(CommandName.HELP)),
        ("hello there", Command(CommandName.UNKNOWN, word="hello")),
        ("<!channel>", Command(CommandName.UNKNOWN, word="<!channel>")),
        ("x" * 100, Command(CommandName.UNKNOWN, word="x" * 32)),
        ("", Command(CommandName.TEXT)),
        ("   ", Command(CommandName.TEXT)),
    ],
)
def test_slack_text_reads_with_or_without_the_slash(text: str, command: Command) -> None:
    assert read_command(text, bare=True) == command


def test_telegram_still_needs_the_slash() -> None:
    assert read_command("status") == Command(CommandName.TEXT)


@pytest.mark.parametrize("kind", [SlackRequestKind.COMMAND, SlackRequestKind.MESSAGE])
@pytest.mark.parametrize(
    ("text", "reply", "changes"),
    [
        ("mute 2", ReplyKind.MUTED, {"muted_until": NOW + timedelta(hours=2), "muted_channels": ("slack",)}),
        ("mute all 2", ReplyKind.MUTED, {"muted_until": NOW + timedelta(hours=2), "muted_channels": None}),
        ("mute", ReplyKind.MUTE_USAGE, {}),
        ("mute 9999", ReplyKind.MUTE_USAGE, {}),
        ("unmute", ReplyKind.UNMUTED, {"muted_until": None}),
        ("failures", ReplyKind.FAILURES_ONLY, {"notify": NotifyMode.FAILURE}),
        ("all", ReplyKind.ALL_SUMMARIES, {"notify": NotifyMode.ALWAYS}),
        ("nudges off", ReplyKind.NUDGES_OFF, {"nudges": False}),
        ("nudges on", ReplyKind.NUDGES_ON, {"nudges": True}),
        ("nudges maybe", ReplyKind.NUDGES_USAGE, {}),
        # Slack's stop takes Slack off; Telegram's chat is Telegram's own business.
        ("stop", ReplyKind.STOPPED, {"channels": ("email",)}),
        ("stop all", ReplyKind.STOPPED, {"telegram_chat_id": None, "channels": ()}),
        ("status", ReplyKind.STATUS, {}),
        ("help", ReplyKind.HELP, {}),
        # /start is Telegram's linking: on Slack it is the help and links nothing.
        ("start abc", ReplyKind.HELP, {}),
        ("what is this", ReplyKind.HELP, {}),
    ],
)
def test_commands_from_slack(
    kind: SlackRequestKind, text: str, reply: ReplyKind, changes: dict[str, object]
) -> None:
    decision = decide(_said(text, kind), BOB, NOW)
    assert decision.reply is not None and decision.reply.kind is reply
    assert decision.changes == ({"bob@example.com": changes} if changes else {})
    assert decision.grant is None and decision.link_to is None
    assert decision.status_of == ("bob@example.com" if reply is ReplyKind.STATUS else None)


def test_a_stop_of_the_last_channel_keeps_e_mail() -> None:
    decision = decide(_said("stop"), CAROL, NOW)
    assert decision.changes == {"carol@example.com": {"channels": ("email",)}}


@pytest.mark.parametrize("text", ["stop all", "failures", "mute all 8", "status", "hi"])
def test_an_unknown_slack_user_changes_nothing(text: str) -> None:
    decision = decide(_said(text), None, NOW)
    assert decision.reply is not None and decision.reply.kind is ReplyKind.NOT_LINKED
    assert decision.changes == {} and decision.status_of is None


@pytest.mark.parametrize(
    ("action", "changes"),
    [
        ("inno_failures", {"notify": NotifyMode.FAILURE}),
        ("inno_all", {"notify": NotifyMode.ALWAYS}),
        ("inno_nudges_off", {"nudges": False}),
        ("inno_nudges_on", {"nudges": True}),
        ("inno_mute_8", {"muted_until": NOW + timedelta(hours=8), "muted_channels": ("slack",)}),
        ("inno_mute_all_8", {"muted_until": NOW + timedelta(hours=8), "muted_channels": None}),
        ("inno_unmute", {"muted_until": None}),
        ("inno_something_else", {}),  # a button we never made: the help, nothing changed
    ],
)
def test_home_buttons_are_commands(action: str, changes: dict[str, object]) -> None:
    request = SlackRequest(SlackRequestKind.ACTION, "T0", "U0BOB", "action/1", action=action)
    decision = decide(request, BOB, NOW)
    assert decision.changes == ({"bob@example.com": changes} if changes else {})
    assert action in ACTIONS or (decision.reply is not None and decision.reply.kind is ReplyKind.HELP)


def test_opening_the_home_tab_changes_and_says_nothing() -> None:
    decision = decide(SlackRequest(SlackRequestKind.HOME, "T0", "U0BOB", "event/1"), BOB, NOW)
    assert (decision.reply, decision.changes) == (None, {})


@pytest.mark.parametrize(
    ("user_id", "email", "found"),
    [
        ("U0BOB", None, BOB),
        ("U0BOB", "alice@example.com", BOB),  # the id wins over a profile's e-mail
        ("U0ALICE", "Alice@Example.com", ALICE),  # no id in the directory: her Slack profile's e-mail
        ("U0ALICE", None, None),
        # Carol has an id of her own: another Slack user with her e-mail is not her.
        ("U0IMPOSTOR", "carol@example.com", None),
        ("U0NOBODY", "nobody@example.com", None),
        ("Bob", None, None),  # a name is no id
    ],
)
def test_the_slack_user_is_found_by_id_never_by_name(
    user_id: str, email: str | None, found: DirectoryUser | None
) -> None:
    assert user_of_slack(USERS, user_id, email) == found
