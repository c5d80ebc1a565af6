"""The personal page's forms as preference changes (domain.personal_page.changes_of), and the
links it may carry (domain.page_links: the form token, links that expire with the page's)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from inno_notify.domain.model import NotifyMode
from inno_notify.domain.page_links import (
    ME_PAGE,
    LinkVerdict,
    PageLinks,
    form_token,
    form_token_valid,
    verify,
)
from inno_notify.domain.personal_page import PageChange, changes_of
from inno_notify.domain.preferences import MUTE_SCOPE

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
KEY = b"k" * 32


@pytest.mark.parametrize(
    ("change", "value", "channels", "expected"),
    [
        (PageChange.NOTIFY, "failure", (), {"notify": NotifyMode.FAILURE}),
        (PageChange.NOTIFY, "always", (), {"notify": NotifyMode.ALWAYS}),
        (PageChange.MUTE, "8h", (), {"muted_until": NOW + timedelta(hours=8), MUTE_SCOPE: None}),
        (PageChange.MUTE, "7d", (), {"muted_until": NOW + timedelta(days=7), MUTE_SCOPE: None}),
        (PageChange.UNMUTE, None, (), {"muted_until": None}),
        (PageChange.NUDGES, "off", (), {"nudges": False}),
        (PageChange.EMAILS, "on", (), {"emails": True}),
        (PageChange.CHANNELS, None, ("telegram", "email"), {"channels": ("email", "telegram")}),
    ],
)
def test_a_form_is_one_change_of_the_preference_model(
    change: PageChange, value: str | None, channels: tuple[str, ...], expected: dict[str, Any]
) -> None:
    assert changes_of(change, value, channels, NOW) == expected


@pytest.mark.parametrize(
    ("change", "value", "channels"),
    [
        (PageChange.NOTIFY, "never", ()),
        (PageChange.NOTIFY, None, ()),
        (PageChange.MUTE, "99d", ()),
        (PageChange.MUTE, None, ()),
        (PageChange.NUDGES, "maybe", ()),
        (PageChange.EMAILS, None, ()),
        (PageChange.CHANNELS, None, ()),
        (PageChange.CHANNELS, None, ("pager",)),
    ],
)
def test_what_the_page_does_not_offer_is_refused(
    change: PageChange, value: str | None, channels: tuple[str, ...]
) -> None:
    with pytest.raises(ValueError):
        changes_of(change, value, channels, NOW)


def test_the_personal_link_is_signed_over_the_address_and_only_with_a_key() -> None:
    assert PageLinks("https://inno.example.org").me("a@example.org", NOW) is None
    url = PageLinks("https://inno.example.org", KEY).me("a@example.org", NOW)
    assert url is not None and url.startswith("https://inno.example.org/me?email=a%40example.org&exp=")
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert verify(KEY, ME_PAGE, ["a@example.org"], query["exp"], query["sig"], NOW) is LinkVerdict.VALID
    assert verify(KEY, ME_PAGE, ["b@example.org"], query["exp"], query["sig"], NOW) is LinkVerdict.FORGED


def test_a_form_token_belongs_to_one_link() -> None:
    token = form_token(KEY, "a@example.org", "sig1")
    assert form_token_valid(KEY, "a@example.org", "sig1", token)
    assert not form_token_valid(KEY, "a@example.org", "sig2", token)
    assert not form_token_valid(KEY, "b@example.org", "sig1", token)
    assert not form_token_valid(b"o" * 32, "a@example.org", "sig1", token)
    assert not form_token_valid(KEY, "a@example.org", "sig1", None)
    assert not form_token_valid(KEY, "a@example.org", "sig1", "")


def test_links_made_until_an_expiry_expire_then_whatever_their_lifetime() -> None:
    links = PageLinks("https://inno.example.org", KEY, ttl_seconds=30 * 86400)
    until = int((NOW + timedelta(hours=2)).timestamp())
    url = links.until(until).job("ns", "train", "u1", NOW)
    assert url is not None and f"exp={until}&" in url
    query = {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    assert verify(KEY, "job", ["ns", "train", "u1"], query["exp"], query["sig"], NOW) is LinkVerdict.VALID
    # Opened with a token: plain links, which open with a token only.
    assert links.until(None).job("ns", "train", "u1", NOW) == "https://inno.example.org/jobs/ns/train?uid=u1"
