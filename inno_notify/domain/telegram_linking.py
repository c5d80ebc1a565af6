"""The token in a "Get these on Telegram" link: single-purpose, signed, short-lived, of one link generation.

A summary by e-mail or Slack to a directory user without a Telegram chat carries
`https://t.me/<bot>?start=<token>`; Telegram hands the bot `/start <token>` from the chat of whoever
opened it, and the bot links that chat to the user the token names. Holding the token is the proof
of reading that person's mail, so it must not be guessable, must not outlive its purpose, and must
link at most one chat.

Telegram allows a start payload of at most 64 characters of `A-Za-z0-9_-` (Bot API, "Deep
linking"), far too few for an e-mail address, so the token names its user by a keyed reference
that only this service can compute (`user_ref`), and the caller finds the user among the
directory's. Its bytes:

    version (2) | user ref (8) | expires, Unix seconds (4) | link epoch (4) | nonce (8) | MAC (12)

base64url without padding: 50 characters. The MAC is HMAC-SHA-256 over the rest under the link
key, cut to 96 bits; the key is its own (`channels.telegram.link_secret`, else derived from the
bot token with a purpose label, `derive_key`), so no other signed value of the service (a page
link, a webhook secret) can pass for a linking token. `token_id` (everything but the MAC) is what
the store records once the token is used: a second use finds it and is refused.

A token is also of one *link generation* (issue 29). The store keeps a link epoch per person,
moved on by every link, relink and `/stop` (and by any change of the chat through the API); a token
carries the epoch it was minted under, and links only while that is still the person's epoch
(`link_allowed`). So a link voids every token minted before it: an older, unused token (a
forwarded e-mail, a shared mailbox, a screenshot) cannot move the chat afterwards, and a relink
needs a token newer than the current link. Tokens of version 1, minted before epochs existed,
count as epoch 0: they link only a person who never linked nor stopped (migration 0015 starts
everyone who did at epoch 1).

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
    "link_allowed",
    "mint",
    "user_ref",
    "verify",
]

PAYLOAD_MAX_CHARS = 64
NONCE_BYTES = 8
_VERSION = 2
_VERSION_WITHOUT_EPOCH = 1
_REF_BYTES = 8
_EPOCH_BYTES = 4
_MAC_BYTES = 12
# Body sizes by version: a version-1 token has no epoch.
_BODY_BYTES = {
    _VERSION_WITHOUT_EPOCH: 1 + _REF_BYTES + 4 + NONCE_BYTES,
    _VERSION: 1 + _REF_BYTES + 4 + _EPOCH_BYTES + NONCE_BYTES,
}
MAX_EPOCH = 2**32 - 1
_PAYLOAD = re.compile(r"[A-Za-z0-9_-]{1,64}")
_MAC_LABEL = b"inno-notify telegram link\x00"
_REF_LABEL = b"inno-notify telegram user\x00"


class LinkRefusal(enum.StrEnum):
    """Why a token links nothing; each has its own polite answer."""

    FORGED = "forged"  # not a token of ours: wrong shape, wrong version or a MAC that does not match
    EXPIRED = "expired"
    USED = "used"  # the store already recorded it
    SUPERSEDED = "superseded"  # a newer link, relink or /stop of that person voided it
    UNKNOWN_USER = "unknown_user"  # signed for someone no longer in the directory


@dataclass(frozen=True, slots=True)
class LinkGrant:
    """A token that is genuine and in time: whom it names, the id its single use is recorded by, and
    the link epoch it was minted under (0 for a version-1 token)."""

    user_ref: bytes
    token_id: str
    expires_at: datetime
    epoch: int = 0


def derive_key(material: str, purpose: str) -> bytes:
    """A key for one purpose from a secret that serves several (the bot token)."""
    return hmac.new(material.encode(), f"inno-notify/{purpose}".encode(), hashlib.sha256).digest()


def derive_secret_token(material: str, purpose: str) -> str:
    """A derived secret spelled in `A-Za-z0-9_-` (Telegram's webhook secret_token alphabet)."""
    return _b64(derive_key(material, purpose))


def user_ref(key: bytes, email: str) -> bytes:
    """The 8 bytes a token names its user by: keyed, so the token does not reveal the address."""
    return hmac.new(key, _REF_LABEL + email.strip().lower().encode(), hashlib.sha256).digest()[:_REF_BYTES]


def mint(key: bytes, email: str, now: datetime, ttl: timedelta, nonce: bytes, epoch: int = 0) -> str:
    """A token for `email`, valid for `ttl` from `now` while the person's link epoch is `epoch`;
    `nonce` is NONCE_BYTES of fresh randomness."""
    if len(nonce) != NONCE_BYTES:
        raise ValueError(f"nonce must be {NONCE_BYTES} bytes")
    expires = int((now + ttl).timestamp())
    if not 0 < expires < 2**32:
        raise ValueError("expiry out of range")
    if not 0 <= epoch <= MAX_EPOCH:
        raise ValueError("epoch out of range")
    body = (
        bytes([_VERSION])
        + user_ref(key, email)
        + expires.to_bytes(4, "big")
        + epoch.to_bytes(_EPOCH_BYTES, "big")
        + nonce
    )
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
    size = _BODY_BYTES.get(raw[0]) if raw else None
    if size is None or len(raw) != size + _MAC_BYTES:
        return LinkRefusal.FORGED
    body, mac = raw[:size], raw[size:]
    if not hmac.compare_digest(mac, _mac(key, body)):
        return LinkRefusal.FORGED
    expires_at = datetime.fromtimestamp(int.from_bytes(body[1 + _REF_BYTES : 5 + _REF_BYTES], "big"), UTC)
    if now >= expires_at:
        return LinkRefusal.EXPIRED
    epoch = 0
    if body[0] == _VERSION:
        epoch = int.from_bytes(body[5 + _REF_BYTES : 5 + _REF_BYTES + _EPOCH_BYTES], "big")
    return LinkGrant(
        user_ref=body[1 : 1 + _REF_BYTES], token_id=body.hex(), expires_at=expires_at, epoch=epoch
    )


def link_allowed(grant: LinkGrant, current_epoch: int) -> LinkRefusal | None:
    """None when a genuine token may link now, given the person's link epoch in the store; else why
    not. Only a token of the current generation links: one minted before the latest link, relink or
    /stop (a lower epoch) is void. A higher epoch than the store's cannot have been minted by us
    (the store lost it, or the directory entry was deleted and added again): refused as well."""
    if grant.epoch != current_epoch:
        return LinkRefusal.SUPERSEDED
    return None


def deep_link(bot_username: str, token: str) -> str:
    """`https://t.me/<bot>?start=<token>`: opens the bot and sends `/start <token>` on START."""
    return f"https://t.me/{bot_username}?start={token}"


def _mac(key: bytes, body: bytes) -> bytes:
    return hmac.new(key, _MAC_LABEL + body, hashlib.sha256).digest()[:_MAC_BYTES]


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
