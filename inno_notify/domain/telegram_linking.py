"""The token in a "Get these on Telegram" link: single-purpose, signed, short-lived, used once.

A summary by e-mail or Slack to a directory user without a Telegram chat carries
`https://t.me/<bot>?start=<token>`; Telegram hands the bot `/start <token>` from the chat of whoever
opened it, and the bot links that chat to the user the token names. Holding the token is the proof
of reading that person's mail, so it must not be guessable, must not outlive its purpose, and must
link at most one chat.

Telegram allows a start payload of at most 64 characters of `A-Za-z0-9_-` (Bot API, "Deep
linking"), far too few for an e-mail address, so the token names its user by a keyed reference
that only this service can compute (`user_ref`), and the caller finds the user among the
directory's. Its bytes:

    version (1) | user ref (8) | expires, Unix seconds (4) | nonce (8) | MAC (12)

base64url without padding: 44 characters. The MAC is HMAC-SHA-256 over the rest under the link
key, cut to 96 bits; the key is its own (`channels.telegram.link_secret`, else derived from the
bot token with a purpose label, `derive_key`), so no other signed value of the service (a page
link, a webhook secret) can pass for a linking token. `token_id` (everything but the MAC) is what
the store records once the token is used: a second use finds it and is refused.

Pure: time and randomness are passed in.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = [
    "PAYLOAD_MAX_CHARS",
    "LinkGrant",
    "LinkRefusal",
    "deep_link",
    "derive_key",
    "derive_secret_token",
    "mint",
    "user_ref",
    "verify",
]

PAYLOAD_MAX_CHARS = 64
NONCE_BYTES = 8
_VERSION = 1
_REF_BYTES = 8
_MAC_BYTES = 12
_BODY_BYTES = 1 + _REF_BYTES + 4 + NONCE_BYTES
_TOKEN_BYTES = _BODY_BYTES + _MAC_BYTES
_PAYLOAD = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAC_LABEL = b"inno-notify telegram link\x00"
_REF_LABEL = b"inno-notify telegram user\x00"


class LinkRefusal(enum.StrEnum):
    """Why a token links nothing; each has its own polite answer."""

    FORGED = "forged"  # not a token of ours: wrong shape, wrong version or a MAC that does not match
    EXPIRED = "expired"
    USED = "used"  # the store already recorded it
    UNKNOWN_USER = "unknown_user"  # signed for someone no longer in the directory


@dataclass(frozen=True, slots=True)
class LinkGrant:
    """A token that is genuine and in time: whom it names and the id its single use is recorded by."""

    user_ref: bytes
    token_id: str
    expires_at: datetime


def derive_key(material: str, purpose: str) -> bytes:
    """A key for one purpose from a secret that serves several (the bot token)."""
    return hmac.new(material.encode(), f"inno-notify/{purpose}".encode(), hashlib.sha256).digest()


def derive_secret_token(material: str, purpose: str) -> str:
    """A derived secret spelled in `A-Za-z0-9_-` (Telegram's webhook secret_token alphabet)."""
    return _b64(derive_key(material, purpose))


def user_ref(key: bytes, email: str) -> bytes:
    """The 8 bytes a token names its user by: keyed, so the token does not reveal the address."""
    return hmac.new(key, _REF_LABEL + email.strip().lower().encode(), hashlib.sha256).digest()[:_REF_BYTES]


def mint(key: bytes, email: str, now: datetime, ttl: timedelta, nonce: bytes) -> str:
    """A token for `email`, valid for `ttl` from `now`; `nonce` is NONCE_BYTES of fresh randomness."""
    if len(nonce) != NONCE_BYTES:
        raise ValueError(f"nonce must be {NONCE_BYTES} bytes")
    expires = int((now + ttl).timestamp())
    if not 0 < expires < 2**32:
        raise ValueError("expiry out of range")
    body = bytes([_VERSION]) + user_ref(key, email) + expires.to_bytes(4, "big") + nonce
    token = _b64(body + _mac(key, body))
    assert len(token) <= PAYLOAD_MAX_CHARS and _PAYLOAD.fullmatch(token)
    return token


def verify(key: bytes, payload: str, now: datetime) -> LinkGrant | LinkRefusal:
    """The grant a `/start` payload carries, or why it carries none (the store checks USED)."""
    if not isinstance(payload, str) or not _PAYLOAD.fullmatch(payload):
        return LinkRefusal.FORGED
    try:
        raw = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    except (binascii.Error, ValueError):
        return LinkRefusal.FORGED
    if len(raw) != _TOKEN_BYTES or raw[0] != _VERSION:
        return LinkRefusal.FORGED
    body, mac = raw[:_BODY_BYTES], raw[_BODY_BYTES:]
    if not hmac.compare_digest(mac, _mac(key, body)):
        return LinkRefusal.FORGED
    expires_at = datetime.fromtimestamp(int.from_bytes(body[1 + _REF_BYTES : 5 + _REF_BYTES], "big"), UTC)
    if now >= expires_at:
        return LinkRefusal.EXPIRED
    return LinkGrant(user_ref=body[1 : 1 + _REF_BYTES], token_id=body.hex(), expires_at=expires_at)


def deep_link(bot_username: str, token: str) -> str:
    """`https://t.me/<bot>?start=<token>`: opens the bot and sends `/start <token>` on START."""
    return f"https://t.me/{bot_username}?start={token}"


def _mac(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, _MAC_LABEL + body, hashlib.sha256).digest()[:_MAC_BYTES]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
