"""Signed page links: a link opens its own page until it expires, and nothing else."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest

from inno_notify.domain.page_links import (
    JOB_PAGE,
    TEAM_PAGE,
    UNSUBSCRIBE_PAGE,
    UNSUBSCRIBE_TTL_SECONDS,
    LinkVerdict,
    PageLinks,
    signature,
    verify,
)

KEY = b"k" * 32
NOW = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def params(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def test_job_link_verifies_for_its_own_values_until_it_expires() -> None:
    links = PageLinks("https://inno.example.org/", KEY, ttl_seconds=86400)
    url = links.job("face research", "train/7", "uid-1", NOW)
    assert url is not None
    split = urlsplit(url)
    assert split.path == "/jobs/face%20research/train%2F7"
    q = params(url)
    assert q["uid"] == "uid-1" and int(q["exp"]) == int(NOW.timestamp()) + 86400
    values = ["face research", "train/7", "uid-1"]
    assert verify(KEY, JOB_PAGE, values, q["exp"], q["sig"], NOW) is LinkVerdict.VALID
    later = NOW + timedelta(days=1)
    assert verify(KEY, JOB_PAGE, values, q["exp"], q["sig"], later) is LinkVerdict.EXPIRED


@pytest.mark.parametrize(
    ("page", "values", "exp_delta", "sig_change", "key", "verdict"),
    [
        (JOB_PAGE, ["ns", "job", "uid-1"], 0, None, KEY, LinkVerdict.VALID),
        (JOB_PAGE, ["ns", "job", "uid-2"], 0, None, KEY, LinkVerdict.FORGED),  # another run
        (JOB_PAGE, ["ns2", "job", "uid-1"], 0, None, KEY, LinkVerdict.FORGED),
        (TEAM_PAGE, ["ns", "job", "uid-1"], 0, None, KEY, LinkVerdict.FORGED),  # another kind of page
        (JOB_PAGE, ["ns", "job", "uid-1"], 3600, None, KEY, LinkVerdict.FORGED),  # expiry moved
        (JOB_PAGE, ["ns", "job", "uid-1"], 0, "flip", KEY, LinkVerdict.FORGED),
        (JOB_PAGE, ["ns", "job", "uid-1"], 0, "cut", KEY, LinkVerdict.FORGED),
        (JOB_PAGE, ["ns", "job", "uid-1"], 0, None, b"x" * 32, LinkVerdict.FORGED),  # another key
        (JOB_PAGE, ["ns", "job", "uid-1"], 0, "empty", KEY, LinkVerdict.UNSIGNED),
    ],
)
def test_a_changed_value_expiry_signature_or_key_does_not_verify(
    page: str, values: list[str], exp_delta: int, sig_change: str | None, key: bytes, verdict: LinkVerdict
) -> None:
    expires = int(NOW.timestamp()) + 600
    sig = signature(KEY, JOB_PAGE, ["ns", "job", "uid-1"], expires)
    if sig_change == "flip":
        sig = ("A" if sig[0] != "A" else "B") + sig[1:]
    elif sig_change == "cut":
        sig = sig[:-1]
    elif sig_change == "empty":
        sig = ""
    assert verify(key, page, values, str(expires + exp_delta), sig, NOW) is verdict


@pytest.mark.parametrize("expires", ["", "abc", "-5", "1e9", "٣٣٣", "9" * 40, "1.5"])
def test_a_hostile_expiry_is_not_a_valid_link(expires: str) -> None:
    assert verify(KEY, JOB_PAGE, ["a"], expires, "sig", NOW) in {LinkVerdict.FORGED, LinkVerdict.UNSIGNED}


def test_values_cannot_be_shifted_between_fields() -> None:
    # ["a,b", "c"] and ["a", "b,c"] must not share a message.
    assert signature(KEY, JOB_PAGE, ["a,b", "c"], 1) != signature(KEY, JOB_PAGE, ["a", "b,c"], 1)


def test_without_a_key_links_are_plain_and_without_a_public_url_there_are_none() -> None:
    plain = PageLinks("https://inno.example.org", None).team("face", "2026-W48", NOW)
    assert plain == "https://inno.example.org/teams/face?week=2026-W48"
    assert PageLinks(None, KEY).job("ns", "job", "uid", NOW) is None


def test_team_link_verifies() -> None:
    url = PageLinks("https://inno.example.org/base", KEY).team("vision & co", "2026-W48", NOW)
    assert url is not None and url.startswith("https://inno.example.org/base/teams/vision%20%26%20co?")
    q = params(url)
    assert verify(KEY, TEAM_PAGE, ["vision & co", "2026-W48"], q["exp"], q["sig"], NOW) is LinkVerdict.VALID


# --- the one-click unsubscribe link every e-mail carries (RFC 8058) ---------------------------------

ALICE = "alice@example.org"
YEAR = timedelta(seconds=UNSUBSCRIBE_TTL_SECONDS)


def unsubscribe_link(email: str = ALICE, ttl_seconds: float = 30 * 86400) -> dict[str, str]:
    url = PageLinks("https://inno.example.org", KEY, ttl_seconds).unsubscribe(email, NOW)
    assert url is not None and urlsplit(url).path == "/unsubscribe"
    return params(url)


@pytest.mark.parametrize(
    ("email", "page", "change", "at", "verdict"),
    [
        (ALICE, UNSUBSCRIBE_PAGE, None, NOW, LinkVerdict.VALID),
        # A provider's button on a mail nearly a year old still works; a year and a day, not.
        (ALICE, UNSUBSCRIBE_PAGE, None, NOW + YEAR - timedelta(days=1), LinkVerdict.VALID),
        (ALICE, UNSUBSCRIBE_PAGE, None, NOW + YEAR, LinkVerdict.EXPIRED),
        # Another address, another case of it, or the link taken for another kind of page.
        ("bob@example.org", UNSUBSCRIBE_PAGE, None, NOW, LinkVerdict.FORGED),
        ("Alice@example.org", UNSUBSCRIBE_PAGE, None, NOW, LinkVerdict.FORGED),
        (ALICE, TEAM_PAGE, None, NOW, LinkVerdict.FORGED),
        # The expiry moved on, the signature changed or cut, no signature at all.
        (ALICE, UNSUBSCRIBE_PAGE, "later", NOW, LinkVerdict.FORGED),
        (ALICE, UNSUBSCRIBE_PAGE, "flip", NOW, LinkVerdict.FORGED),
        (ALICE, UNSUBSCRIBE_PAGE, "cut", NOW, LinkVerdict.FORGED),
        (ALICE, UNSUBSCRIBE_PAGE, "unsigned", NOW, LinkVerdict.UNSIGNED),
    ],
)
def test_an_unsubscribe_link_opens_for_its_own_address_for_a_year(
    email: str, page: str, change: str | None, at: datetime, verdict: LinkVerdict
) -> None:
    q = unsubscribe_link()
    assert q["email"] == ALICE
    exp, sig = q["exp"], q["sig"]
    if change == "later":
        exp = str(int(exp) + 86400)
    elif change == "flip":
        sig = ("A" if sig[0] != "A" else "B") + sig[1:]
    elif change == "cut":
        sig = sig[:-1]
    elif change == "unsigned":
        sig = ""
    assert verify(KEY, page, [email], exp, sig, at) is verdict


def test_an_unsubscribe_link_lives_as_long_as_page_links_when_they_live_longer() -> None:
    two_years = 2 * UNSUBSCRIBE_TTL_SECONDS
    assert int(unsubscribe_link(ttl_seconds=two_years)["exp"]) == int(NOW.timestamp() + two_years)
    assert int(unsubscribe_link(ttl_seconds=60)["exp"]) == int(NOW.timestamp() + UNSUBSCRIBE_TTL_SECONDS)


def test_a_hostile_address_is_percent_encoded_and_still_verifies() -> None:
    hostile = 'a"\r\nBcc: eve@evil.example <x>, b@example.org'
    url = PageLinks("https://inno.example.org", KEY).unsubscribe(hostile, NOW)
    assert url is not None
    assert all(33 <= ord(c) <= 126 for c in url) and not set(url) & set('<>,"')
    q = params(url)
    assert q["email"] == hostile
    assert verify(KEY, UNSUBSCRIBE_PAGE, [hostile], q["exp"], q["sig"], NOW) is LinkVerdict.VALID


def test_no_unsubscribe_link_without_a_key_or_a_public_url() -> None:
    # Unsigned it would be useless: a mail provider's POST carries no token.
    assert PageLinks("https://inno.example.org", None).unsubscribe(ALICE, NOW) is None
    assert PageLinks(None, KEY).unsubscribe(ALICE, NOW) is None
