"""Query-string parsing with clear 400s: every filter is validated before it reaches the store.

Unknown parameters are refused rather than ignored: a typo like `?teem=face` silently returning
every team's jobs is worse than an error. Times are RFC 3339 with an explicit offset; a naive time
would mean whatever the server's zone happens to be.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Mapping
from datetime import UTC, date, datetime
from typing import TypeVar

from multidict import MultiMapping

from inno_notify.api.errors import bad_request

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
MAX_TEXT = 253  # the longest Kubernetes name; owner e-mails fit as well

E = TypeVar("E", bound=enum.Enum)

_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})",
)
_ISO_WEEK = re.compile(r"(\d{4})-W(\d{2})")


def check_known(query: MultiMapping[str], allowed: Collection[str]) -> None:
    unknown = sorted(set(query) - set(allowed))
    if unknown:
        raise bad_request(
            f"unknown query parameter {unknown[0]!r}; allowed: {', '.join(sorted(allowed)) or 'none'}"
        )
    for name in set(query):
        if len(query.getall(name)) > 1:
            raise bad_request(f"query parameter {name!r} given more than once")


def text(query: MultiMapping[str], name: str) -> str | None:
    value = query.get(name)
    if value is None:
        return None
    if not value:
        raise bad_request(f"{name} must not be empty (leave it out to not filter)")
    return _checked(value, name)


def path_text(match_info: Mapping[str, str], name: str) -> str:
    return _checked(match_info[name], name)


def _checked(value: str, name: str) -> str:
    if len(value) > MAX_TEXT:
        raise bad_request(f"{name} is longer than {MAX_TEXT} characters")
    # No database stores a NUL character (Postgres refuses it): no record can match one.
    if "\x00" in value:
        raise bad_request(f"{name} contains a NUL character")
    return value


def choice(query: MultiMapping[str], name: str, kind: type[E]) -> E | None:
    value = query.get(name)
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in kind)
        raise bad_request(f"{name} must be one of {allowed}; got {value!r}") from None


def limit(query: MultiMapping[str]) -> int:
    value = query.get("limit")
    if value is None:
        return DEFAULT_LIMIT
    if not re.fullmatch(r"[0-9]{1,4}", value) or not 1 <= int(value) <= MAX_LIMIT:
        raise bad_request(f"limit must be an integer from 1 to {MAX_LIMIT}; got {value!r}")
    return int(value)


def cursor(query: MultiMapping[str]) -> str | None:
    value = query.get("cursor")
    if value is not None and not re.fullmatch(r"[A-Za-z0-9_-]{1,1000}", value):
        raise bad_request("cursor is not one this API handed out", code="invalid_cursor")
    return value


def rfc3339(value: str, name: str) -> datetime:
    if not _RFC3339.fullmatch(value):
        raise bad_request(
            f"{name} must be an RFC 3339 time with an offset, like 2026-11-30T10:00:00Z; got {value!r}"
        )
    try:
        return datetime.fromisoformat(value.upper().replace(" ", "T")).astimezone(UTC)
    except (ValueError, OverflowError):
        raise bad_request(f"{name} is not a valid time: {value!r}") from None


def time_range(
    query: MultiMapping[str], *, with_until: bool = True
) -> tuple[datetime | None, datetime | None]:
    since = query.get("since")
    until = query.get("until") if with_until else None
    start = None if since is None else rfc3339(since, "since")
    end = None if until is None else rfc3339(until, "until")
    if start is not None and end is not None and start >= end:
        raise bad_request("since must be earlier than until")
    return start, end


def iso_week(value: str | None) -> str | None:
    if value is None:
        return None
    match = _ISO_WEEK.fullmatch(value)
    if match is None:
        raise bad_request(f"week must be an ISO week like 2026-W48; got {value!r}")
    try:
        date.fromisocalendar(int(match[1]), int(match[2]), 1)
    except ValueError:
        raise bad_request(f"week {value} does not exist") from None
    return value
