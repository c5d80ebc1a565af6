"""The bot's conversation: which command a message holds, and what each one changes and answers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.bot_replies import Reply, ReplyKind, decode_reply, encode_reply
from inno_notify.domain.chat_commands import Command, CommandName, parse_hours, parse_mute, read_command
from inno_notify.domain.delivery import Mute
from inno_notify.domain.model import DirectoryUser, NotifyMode
from inno_notify.domain.telegram_commands import IncomingMessage, decide
from inno_notify.domain.telegram_linking import LinkRefusal, derive_key, mint

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = derive_key("123456:token", "telegram-link")
ALICE = DirectoryUser("alice@example.com", "Alice", channels=("email",))
BOB = DirectoryUser("bob@example.com", None, telegram_chat_id=222, channels=("telegram", "slack"))
USERS = [ALICE, BOB]


def _message(text: str | None, chat: int = 111, private: bool = True) -> IncomingMessage:
    return IncomingMessage(update_id=7, chat_id=chat, private=private, text=text, first_name="Al")


def _token(email: str = "alice@example.com", at: datetime = NOW) -> str:
    return mint(KEY, email, at, timedelta(hours=1), b"\x07" * 8)


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/start abc", Command(CommandName.START, "abc")),
        ("/start", Command(CommandName.START)),
        ("/START@inno_notify_bot  2 h", Command(CommandName.START, "2 h")),
        ("  /mute\n8h ", Command(CommandName.MUTE, "8h")),
        ("/unmute", Command(CommandName.UNMUTE)),
        ("/failures", Command(CommandName.FAILURES)),
        ("/all", Command(CommandName.ALL)),
        ("/stop", Command(CommandName.STOP)),
        ("/status", Command(CommandName.STATUS)),
        ("/help", Command(CommandName.HELP)),
        ("/frobnicate", Command(CommandName.UNKNOWN, word="/frobnicate")),
        ("/unknown", Command(CommandName.UNKNOWN, word="/unknown")),
        ("/<b>bold</b>", Command(CommandName.UNKNOWN, word="/<b>bold</b>")),
        ("/" + "x" * 100, Command(CommandName.UNKNOWN, word="/" + "x" * 31)),
        ("hello /start", Command(CommandName.TEXT)),
        ("", Command(CommandName.TEXT)),
        (None, Command(CommandName.TEXT)),
        ("   ", Command(CommandName.TEXT)),
    ],
)
def test_read_command(text: str | None, command: Command) -> None:
    assert read_command(text) == command


@pytest.mark.parametrize(
    ("argument", "hours"),
    [
        ("2", 2.0),
        ("1.5", 1.5),
        ("8h", 8.0),
        ("3 hours", 3.0),
        ("720", 720.0),
        ("0", None),
        ("721", None),
        ("-1", None),
        ("", None),
        ("abc", None),
        ("٣", None),
        ("1e3", None),
        ("inf", None),
        ("nan", None),
    ],
)
def test_parse_hours(argument: str, hours: float | None) -> None:
    assert parse_hours(argument) == hours


def test_start_with_a_genuine_token_links_the_chat_and_adds_telegram() -> None:
    decision = decide(_message(f"/start {_token()}"), USERS, NOW, KEY)
    assert decision.changes == {
        "alice@example.com": {"telegram_chat_id": 111, "channels": ("email", "telegram")}
    }
    assert decision.grant is not None and decision.link_to == "alice@example.com"
    assert decision.reply is not None and decision.reply.kind is ReplyKind.LINKED
    assert (decision.reply.person, decision.reply.first_name) == ("Alice", "Al")
    assert decision.used_reply is not None and decision.used_reply.refusal is LinkRefusal.USED


def test_a_chat_linked_to_someone_else_moves_to_the_token_s_user() -> None:
    decision = decide(_message(f"/start {_token()}", chat=222), USERS, NOW, KEY)
    assert decision.changes == {
        "bob@example.com": {"telegram_chat_id": None, "channels": ("slack",)},
        "alice@example.com": {"telegram_chat_id": 222, "channels": ("email", "telegram")},
    }


@pytest.mark.parametrize(
    ("payload", "refusal"),
    [
        (_token(at=NOW - timedelta(hours=2)), LinkRefusal.EXPIRED),
        (_token()[:-2] + "AA", LinkRefusal.FORGED),
        ("<b>hi</b>&amp;", LinkRefusal.FORGED),
        (_token("gone@example.com"), LinkRefusal.UNKNOWN_USER),
    ],
)
def test_a_bad_token_links_nothing_and_is_refused_politely(payload: str, refusal: LinkRefusal) -> None:
    decision = decide(_message(f"/start {payload}"), USERS, NOW, KEY)
    assert decision.changes == {} and decision.grant is None
    assert decision.reply == Reply(ReplyKind.LINK_REFUSED, first_name="Al", refusal=refusal)


@pytest.mark.parametrize(
    ("text", "kind", "changes"),
    [
        # A chat speaks for its own channel: /mute holds Telegram only, unless the person says all.
        (
            "/mute 2",
            ReplyKind.MUTED,
            {"muted_until": NOW + timedelta(hours=2), "muted_channels": ("telegram",)},
        ),
        ("/mute all 2", ReplyKind.MUTED, {"muted_until": NOW + timedelta(hours=2), "muted_channels": None}),
        ("/mute ALL 8h", ReplyKind.MUTED, {"muted_until": NOW + timedelta(hours=8), "muted_channels": None}),
        ("/mute", ReplyKind.MUTE_USAGE, {}),
        ("/mute all", ReplyKind.MUTE_USAGE, {}),
        ("/mute forever", ReplyKind.MUTE_USAGE, {}),
        ("/mute allx 2", ReplyKind.MUTE_USAGE, {}),
        ("/unmute", ReplyKind.UNMUTED, {"muted_until": None}),
        ("/failures", ReplyKind.FAILURES_ONLY, {"notify": NotifyMode.FAILURE}),
        ("/all", ReplyKind.ALL_SUMMARIES, {"notify": NotifyMode.ALWAYS}),
        ("/nudges off", ReplyKind.NUDGES_OFF, {"nudges": False}),
        ("/nudges ON", ReplyKind.NUDGES_ON, {"nudges": True}),
        ("/nudges", ReplyKind.NUDGES_USAGE, {}),
        ("/nudges sometimes", ReplyKind.NUDGES_USAGE, {}),
        ("/stop", ReplyKind.STOPPED, {"telegram_chat_id": None, "channels": ("slack",)}),
        ("/stop all", ReplyKind.STOPPED, {"telegram_chat_id": None, "channels": ()}),
        ("/status", ReplyKind.STATUS, {}),
        ("/help", ReplyKind.HELP, {}),
        ("/start", ReplyKind.HELP, {}),
        ("/nope", ReplyKind.HELP, {}),
        ("free text <b>", ReplyKind.HELP, {}),
    ],
)
def test_commands_of_a_linked_chat(text: str, kind: ReplyKind, changes: dict[str, object]) -> None:
    decision = decide(_message(text, chat=222), USERS, NOW, KEY)
    assert decision.reply is not None and decision.reply.kind is kind
    assert decision.changes == ({"bob@example.com": changes} if changes else {})
    assert decision.status_of == ("bob@example.com" if kind is ReplyKind.STATUS else None)


@pytest.mark.parametrize(
    "text", ["/status", "/mute 2", "/unmute", "/failures", "/all", "/stop", "/help", "hi", "/x"]
)
def test_an_unlinked_chat_changes_nothing_and_learns_how_to_link(text: str) -> None:
    decision = decide(_message(text, chat=999), USERS, NOW, KEY)
    assert decision.reply is not None and decision.reply.kind is ReplyKind.NOT_LINKED
    assert decision.changes == {} and decision.status_of is None


@pytest.mark.parametrize("text", [f"/start {_token()}", "/stop", "/status", "hello"])
def test_groups_are_ignored(text: str) -> None:
    assert decide(_message(text, chat=222, private=False), USERS, NOW, KEY).reply is None


@pytest.mark.parametrize(("channels", "everywhere"), [(frozenset({"telegram"}), False), (None, True)])
def test_help_tells_a_muted_person_until_when_and_on_what(
    channels: frozenset[str] | None, everywhere: bool
) -> None:
    until = NOW + timedelta(hours=3)
    mutes = {"bob@example.com": Mute(until, channels)}
    decision = decide(_message("/help", chat=222), USERS, NOW, KEY, muted_until=mutes)
    assert decision.reply is not None and decision.reply.muted_until == until
    assert decision.reply.everywhere is everywhere


@pytest.mark.parametrize(
    ("text", "everywhere", "others"),
    [("/mute 2", False, ("slack",)), ("/mute all 2", True, ("slack",)), ("/stop all", True, ())],
)
def test_the_answer_says_what_a_mute_or_stop_holds(
    text: str, everywhere: bool, others: tuple[str, ...]
) -> None:
    decision = decide(_message(text, chat=222), USERS, NOW, KEY)
    assert decision.reply is not None
    assert (decision.reply.everywhere, decision.reply.channels) == (everywhere, others)


@pytest.mark.parametrize(
    ("argument", "parsed"),
    [
        ("2", (2.0, False)),
        ("all 2", (2.0, True)),
        ("All 8h", (8.0, True)),
        ("all", None),
        ("all all 2", None),
        ("2 all", None),
        ("everything 2", None),
        ("", None),
    ],
)
def test_parse_mute(argument: str, parsed: tuple[float, bool] | None) -> None:
    assert parse_mute(argument) == parsed


def test_relinking_a_person_from_another_chat_tells_their_previous_chat() -> None:
    carol = DirectoryUser("carol@example.com", "Carol", telegram_chat_id=333, channels=("telegram",))
    decision = decide(_message(f"/start {_token('carol@example.com')}"), [*USERS, carol], NOW, KEY)
    assert decision.changes == {"carol@example.com": {"telegram_chat_id": 111, "channels": ("telegram",)}}
    assert decision.previous_chat == 333
    assert decision.previous_reply == Reply(ReplyKind.RELINKED_AWAY, person="Carol")
    assert decision.superseded_reply is not None
    assert decision.superseded_reply.refusal is LinkRefusal.SUPERSEDED
    # From the chat already linked, nobody else is told.
    same = decide(_message(f"/start {_token('carol@example.com')}", chat=333), [*USERS, carol], NOW, KEY)
    assert same.previous_chat is None and same.previous_reply is None


def test_replies_round_trip_through_the_payload_and_hostile_text_is_capped() -> None:
    reply = Reply(
        ReplyKind.HELP, first_name="<b>" * 100, unknown="/" + "&" * 100, muted_until=NOW, everywhere=True
    )
    decoded = decode_reply({"message": encode_reply(reply)})
    assert decoded.first_name == ("<b>" * 100)[:64] and decoded.unknown == "/" + "&" * 31
    assert decoded.muted_until == NOW and decoded.everywhere
    with pytest.raises(ValueError):
        decode_reply({"message": {"kind": "launch_missiles"}})
    with pytest.raises(ValueError):
        decode_reply({})
