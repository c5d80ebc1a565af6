"""Linking tokens: they fit Telegram's payload rules, name their user, and refuse forgery and age."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.telegram_linking import (
    PAYLOAD_MAX_CHARS,
    LinkGrant,
    LinkRefusal,
    deep_link,
    derive_key,
    derive_secret_token,
    link_allowed,
    mint,
    user_ref,
    verify,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
KEY = derive_key("123456:AAE-secret-telegram-token", "telegram-link")
TTL = timedelta(hours=72)
NONCE = bytes(range(8))


def _token(email: str = "alice@example.com", key: bytes = KEY, now: datetime = NOW) -> str:
    return mint(key, email, now, TTL, NONCE)


def test_a_token_fits_telegram_s_start_payload_and_names_its_user() -> None:
    token = _token("a-very-long.address+with-tags@some.department.example.org")
    assert len(token) <= PAYLOAD_MAX_CHARS
    assert re.fullmatch(r"[A-Za-z0-9_-]+", token)
    grant = verify(KEY, token, NOW + TTL - timedelta(seconds=1))
    assert isinstance(grant, LinkGrant)
    assert grant.user_ref == user_ref(KEY, "A-Very-Long.Address+with-tags@some.department.example.org")
    assert grant.expires_at == NOW + TTL
    # The reference reveals nothing readable of the address.
    assert b"alice" not in base64.urlsafe_b64decode(_token() + "==")


def test_each_token_has_its_own_id_for_its_single_use() -> None:
    one = verify(KEY, mint(KEY, "alice@example.com", NOW, TTL, b"\x00" * 8), NOW)
    two = verify(KEY, mint(KEY, "alice@example.com", NOW, TTL, b"\x01" * 8), NOW)
    assert isinstance(one, LinkGrant) and isinstance(two, LinkGrant)
    assert one.token_id != two.token_id and one.user_ref == two.user_ref


def _flip(token: str, at: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    replacement = alphabet[(alphabet.index(token[at]) + 1) % 64]
    return token[:at] + replacement + token[at + 1 :]


@pytest.mark.parametrize(
    ("case", "payload", "at", "expected"),
    [
        ("genuine", _token(), NOW, None),
        ("expired at its end", _token(), NOW + TTL, LinkRefusal.EXPIRED),
        ("expired long ago", _token(now=NOW - timedelta(days=30)), NOW, LinkRefusal.EXPIRED),
        ("another key", _token(key=derive_key("other-bot-token", "telegram-link")), NOW, LinkRefusal.FORGED),
        (
            "a key for another purpose",
            _token(key=derive_key("123456:AAE-secret-telegram-token", "webhook")),
            NOW,
            LinkRefusal.FORGED,
        ),
        ("first character changed", _flip(_token(), 0), NOW, LinkRefusal.FORGED),
        ("user reference changed", _flip(_token(), 5), NOW, LinkRefusal.FORGED),
        ("expiry pushed out", _flip(_token(), 14), NOW, LinkRefusal.FORGED),
        ("MAC changed", _flip(_token(), 40), NOW, LinkRefusal.FORGED),
        ("cut short", _token()[:-1], NOW, LinkRefusal.FORGED),
        ("one character more", _token() + "A", NOW, LinkRefusal.FORGED),
        ("empty", "", NOW, LinkRefusal.FORGED),
        ("too long", "A" * 65, NOW, LinkRefusal.FORGED),
        ("not the alphabet", _token()[:-1] + "=", NOW, LinkRefusal.FORGED),
        ("html", "<b>x</b>", NOW, LinkRefusal.FORGED),
        ("other scripts' digits", "١٢٣٤٥٦٧٨٩", NOW, LinkRefusal.FORGED),
        ("NUL bytes", "\x00" * 44, NOW, LinkRefusal.FORGED),
    ],
    ids=lambda value: value if isinstance(value, str) and len(value) < 40 and " " in value else None,
)
def test_verify(case: str, payload: str, at: datetime, expected: LinkRefusal | None) -> None:
    result = verify(KEY, payload, at)
    if expected is None:
        assert isinstance(result, LinkGrant), case
    else:
        assert result is expected, case


def test_mint_refuses_a_nonce_of_the_wrong_size() -> None:
    with pytest.raises(ValueError, match="nonce"):
        mint(KEY, "alice@example.com", NOW, TTL, b"short")


def test_deep_link_and_derived_secrets() -> None:
    assert deep_link("inno_notify_bot", "abc-_9") == "https://t.me/inno_notify_bot?start=abc-_9"
    secret = derive_secret_token("123456:AAE-secret-telegram-token", "telegram-webhook")
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,256}", secret)
    assert "AAE" not in secret
    assert secret != derive_secret_token("123456:other", "telegram-webhook")


def _version_1_token(email: str = "alice@example.com") -> str:
    """A token as minted before link epochs (issue 29): version 1, no epoch."""
    body = bytes([1]) + user_ref(KEY, email) + int((NOW + TTL).timestamp()).to_bytes(4, "big") + NONCE
    mac = hmac.new(KEY, b"inno-notify telegram link\x00" + body, hashlib.sha256).digest()[:12]
    return base64.urlsafe_b64encode(body + mac).rstrip(b"=").decode()


@pytest.mark.parametrize("epoch", [0, 1, 7, 2**32 - 1])
def test_a_token_carries_the_link_epoch_it_was_minted_under(epoch: int) -> None:
    token = mint(KEY, "alice@example.com", NOW, TTL, NONCE, epoch)
    assert len(token) <= PAYLOAD_MAX_CHARS
    grant = verify(KEY, token, NOW)
    assert isinstance(grant, LinkGrant) and grant.epoch == epoch


def test_the_epoch_is_signed_and_a_version_1_token_counts_as_epoch_0() -> None:
    token = mint(KEY, "alice@example.com", NOW, TTL, NONCE, 3)
    # Characters 18-22 carry the epoch's bytes (13-16): moving it on breaks the MAC.
    assert verify(KEY, _flip(token, 20), NOW) is LinkRefusal.FORGED
    old = verify(KEY, _version_1_token(), NOW)
    assert isinstance(old, LinkGrant) and old.epoch == 0
    assert old.user_ref == user_ref(KEY, "alice@example.com")
    with pytest.raises(ValueError, match="epoch"):
        mint(KEY, "alice@example.com", NOW, TTL, NONCE, -1)


@pytest.mark.parametrize(
    ("minted", "current", "expected"),
    [
        (0, 0, None),  # never linked: the token of its generation links
        (4, 4, None),  # minted after the latest link, relink or /stop
        (0, 1, LinkRefusal.SUPERSEDED),  # an older token after a link (the takeover of issue 29)
        (3, 4, LinkRefusal.SUPERSEDED),  # after a /stop, or a relink from another token
        (5, 4, LinkRefusal.SUPERSEDED),  # never minted by the store as it stands (entry re-added)
    ],
)
def test_link_allowed(minted: int, current: int, expected: LinkRefusal | None) -> None:
    grant = verify(KEY, mint(KEY, "alice@example.com", NOW, TTL, NONCE, minted), NOW)
    assert isinstance(grant, LinkGrant)
    assert link_allowed(grant, current) is expected
