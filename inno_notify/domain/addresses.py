"""Which e-mail addresses a message may go to: exactly one plain address, in an allowed domain.

An owner's address comes from an annotation anyone in the namespace can write, and SMTP takes a
list: `attacker@evil.example,victim@corp.example` read as one address is two recipients. So an
address is accepted only when the standard library's parser reads the whole value as a single
addr-spec (`local@domain`) and nothing else: no second address, no display name (`Bob <b@x>`),
no group (`team: a@x, b@y;`), no comment, no quoted local part, no domain literal (`a@[10.0.0.1]`),
no control character (CR, LF, NUL), no source routing (`a%b@relay`, `b!a@relay`), ASCII only, at
most 254 characters (RFC 5321's path limit) with a local part of at most 64.
What remains is the plain `local@domain.tld` a directory holds.

The standard library's parser is slow (a fraction of a millisecond per address, more than
everything else a pipeline message's routing costs), and the same few addresses come again with
every message: verdicts are remembered for the last `VERDICTS_REMEMBERED` distinct strings, a
bound a stream of distinct hostile values cannot grow past.

`notify.allowed_email_domains` lets an operator keep mail inside the organisation: a domain
listed allows itself and its subdomains; an empty list allows any.
"""

from __future__ import annotations

import email.errors
import functools
from collections.abc import Collection
from email.headerregistry import Address

MAX_ADDRESS_LENGTH = 254
MAX_LOCAL_PART_LENGTH = 64  # RFC 5321 4.5.3.1.1
VERDICTS_REMEMBERED = 4096


class AddressRefused(ValueError):
    """A recipient value that is not exactly one plain e-mail address; the message says why."""


def single_address(value: object) -> str:
    """The value as one plain addr-spec (`local@domain`), or AddressRefused with the reason."""
    if not isinstance(value, str) or not value:
        raise AddressRefused("no e-mail address")
    if len(value) > MAX_ADDRESS_LENGTH:
        raise AddressRefused(f"longer than {MAX_ADDRESS_LENGTH} characters")
    # `str(value)`: a subclass of str could compare equal to another value and share its verdict.
    refusal = _refusal(str(value))
    if refusal is not None:
        raise AddressRefused(refusal)
    return value


@functools.lru_cache(maxsize=VERDICTS_REMEMBERED)
def _refusal(value: str) -> str | None:
    """Why `value` (a non-empty string of at most MAX_ADDRESS_LENGTH) is no plain address, or None."""
    try:
        _check(value)
    except AddressRefused as exc:
        return str(exc)
    return None


def _check(value: str) -> None:
    if not value.isascii() or not value.isprintable():
        raise AddressRefused("contains control or non-ASCII characters")
    if any(c in value for c in ' ,;:<>()[]"\\'):
        # Separators of address lists, display names, groups, comments, quoting, domain literals.
        raise AddressRefused("not a single plain address (local@domain)")
    if any(c in value for c in "%!"):
        # `a%b@relay` and `b!a@relay`: old source routing, a relay may forward to another host.
        raise AddressRefused("contains source-routing characters (% or !)")
    try:
        parsed = Address(addr_spec=value)
    except (ValueError, IndexError, email.errors.MessageError) as exc:
        raise AddressRefused(f"not an e-mail address ({type(exc).__name__})") from None
    if parsed.addr_spec != value or not parsed.username or "." not in parsed.domain.strip("."):
        raise AddressRefused("not a single plain address (local@domain)")
    if len(parsed.username) > MAX_LOCAL_PART_LENGTH:
        raise AddressRefused(f"local part longer than {MAX_LOCAL_PART_LENGTH} characters")


def is_single_address(value: object) -> bool:
    try:
        single_address(value)
    except AddressRefused:
        return False
    return True


def domain_allowed(address: str, allowed: Collection[str]) -> bool:
    """Whether the address's domain is one of `allowed` or under one (any domain when empty)."""
    if not allowed:
        return True
    domain = address.rpartition("@")[2].lower().rstrip(".")
    for entry in allowed:
        permitted = entry.strip().lower().lstrip("@").strip(".")
        if permitted and (domain == permitted or domain.endswith("." + permitted)):
            return True
    return False


def email_refusal(value: object, allowed_domains: Collection[str] = ()) -> str | None:
    """Why `value` may not receive e-mail, or None when it may."""
    try:
        address = single_address(value)
    except AddressRefused as exc:
        return f"not a single e-mail address: {exc}"
    if not domain_allowed(address, allowed_domains):
        return "e-mail domain not allowed (notify.allowed_email_domains)"
    return None
