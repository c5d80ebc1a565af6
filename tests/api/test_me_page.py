"""The personal page (GET /me, issue 33) on the real app over the real store (both dialects): the
link a message carries opens the person's own page without a token, and only theirs (another
address with the same signature, a changed link, an expired one: 401); a viewer's or admin's token
opens it read-only, a pipeline token does not; it shows exactly the person's runs of the last 30
days with their GPU-hours, advice and whether they followed it, the nudges about workloads that
still run and the preferences; its forms change a preference through the preference model with
origin `page`, and only with the page's CSRF token (without it, or with another link's, or from a
token: nothing changes); a GET changes nothing; the page links runs' pages that expire with it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from datetime import timedelta
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest

from inno_notify.adapters.channels.me_page import PersonalPageRenderer
from inno_notify.adapters.db import Store
from inno_notify.api.views.pages import FORM_PAGE_HEADERS, PAGE_HEADERS
from inno_notify.domain.model import JobStatus, NotifyMode
from inno_notify.domain.page_links import PageLinks, form_token
from inno_notify.domain.preferences import Origin, Via
from inno_notify.service.me_pages import me_page_provider
from tests import stored
from tests.pages import me_sample
from tests.pages.me_sample import ALICE, BOB

from .conftest import serve_api
from .support import NOW, Api

KEY = b"k3y-for-the-personal-page-00000"
PUBLIC = "https://inno.example.org"
LINKS = PageLinks(PUBLIC, KEY, ttl_seconds=30 * 86400)
RENDERER = PersonalPageRenderer(LINKS)
URLENCODED = "application/x-www-form-urlencoded"
BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


@pytest.fixture
async def api(store: Store) -> AsyncIterator[Api]:
    await me_sample.store_person(store, NOW)
    provider = me_page_provider(store, RENDERER, lambda: NOW)
    async with serve_api(store, me_pages=provider, link_key=KEY) as served:
        yield served


def link(email: str = ALICE.email, at: Any = NOW) -> str:
    url = LINKS.me(email, at)
    assert url is not None
    return url.removeprefix(PUBLIC)


def query(path: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(path).query).items()}


async def get(api: Api, path: str, role: str | None = None) -> tuple[int, str, Mapping[str, str]]:
    async with api.client.get(path, headers=api.headers(role, BROWSER)) as response:
        return response.status, await response.text(), response.headers


async def post(
    api: Api, path: str, form: Mapping[str, str], role: str | None = None
) -> tuple[int, str, Mapping[str, str]]:
    headers = api.headers(role, {**BROWSER, "Content-Type": URLENCODED})
    async with api.client.post(path, data=urlencode(form), headers=headers) as response:
        return response.status, await response.text(), response.headers


def csrf_of(page: str) -> str:
    (token,) = set(re.findall(r'name="csrf" value="([^"]+)"', page))
    return unescape(token)


async def test_the_link_opens_the_persons_own_page_and_nothing_else(api: Api, store: Store) -> None:
    status, page, headers = await get(api, link())

    assert status == 200, page
    assert headers["Content-Security-Policy"] == FORM_PAGE_HEADERS["Content-Security-Policy"]
    assert "form-action 'self'" in headers["Content-Security-Policy"]
    assert headers["Cache-Control"] == "private, no-store" and headers["Referrer-Policy"] == "no-referrer"
    text = unescape(page)
    assert "Alice Moreau" in text and ALICE.email in text
    # Her runs of the last 30 days, every one, the newest first; not the old one, not Bob's.
    names = re.findall(r"face-research/([a-z0-9-]+)</a>", text)
    assert names == ["finetune-vit", "train-resnet-8", "train-resnet-7"]
    assert "train-resnet-1" not in text and "bobs-secret-run" not in text
    # GPU-hours used / held, the advice, and that the next run followed it.
    assert "5.9 / 12.8 h" in text and "4.1 / 5 h" in text
    assert "Killed for memory at 63.9 GiB: request 80 GiB." in text
    assert "previous advice: followed" in text
    # The open nudge, and the settings with the forms.
    assert "finetune-vit" in re.search(r'id="nudge-1">(.*?)</div>', text, re.S).group(1)  # type: ignore[union-attr]
    assert "slack, email" in text and "every run" in text
    assert page.count('<form method="post"') == 5
    assert await store.directory.get_preferences(ALICE.email) is None  # a GET changes nothing


async def test_the_runs_link_their_pages_signed_to_expire_with_the_page(api: Api) -> None:
    opened = link(at=NOW - timedelta(days=20))
    status, page, _ = await get(api, opened)
    assert status == 200
    hrefs = [unescape(h) for h in re.findall(r'<a href="([^"]+)">face-research/', page)]
    assert hrefs and all(h.startswith(PUBLIC + "/jobs/") for h in hrefs)
    assert {query(h)["exp"] for h in hrefs} == {query(opened)["exp"]}
    # And each opens its page (signed for it).
    for href in hrefs:
        assert (await get(api, href.removeprefix(PUBLIC)))[0] in (200, 404)  # no job pages served here


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"email": BOB}, "invalid_link"),
        ({"sig": "A" * 43}, "invalid_link"),
        ({"exp": "9999999999"}, "invalid_link"),
        ({}, "link_expired"),
    ],
    ids=["another-person", "tampered-signature", "later-expiry", "expired"],
)
async def test_a_changed_or_expired_link_is_401(api: Api, change: dict[str, str], expected: str) -> None:
    path = link(at=NOW - timedelta(days=31)) if not change else link()
    given = {**query(path), **change}
    status, page, _ = await get(api, "/me?" + urlencode(given))
    assert status == 401 and ("expired" in page if expected == "link_expired" else "not valid" in page)
    async with api.client.get("/me?" + urlencode(given), headers={"Accept": "application/json"}) as response:
        assert response.status == 401 and (await response.json())["error"]["code"] == expected


@pytest.mark.parametrize(
    ("role", "expected"), [("viewer", 200), ("admin", 200), ("pipeline", 403), (None, 401)]
)
async def test_tokens(api: Api, role: str | None, expected: int) -> None:
    status, page, headers = await get(api, f"/me?email={ALICE.email}", role)
    assert status == expected
    if expected == 200:
        # Read-only: a browser's form would carry no token, so there is none.
        assert "Alice Moreau" in page and "<form" not in page
        assert headers["Content-Security-Policy"] == PAGE_HEADERS["Content-Security-Policy"]


async def test_a_form_changes_the_preference_with_origin_page(api: Api, store: Store) -> None:
    path = link()
    _, page, _ = await get(api, path)
    token = csrf_of(page)
    assert token == form_token(KEY, ALICE.email, query(path)["sig"])

    status, page, _ = await post(api, path, {"csrf": token, "change": "notify", "value": "failure"})

    assert status == 200 and "Saved: which runs you hear about." in page
    prefs = await store.directory.get_preferences(ALICE.email)
    assert prefs is not None and prefs.notify is NotifyMode.FAILURE
    assert prefs.origins == {"notify": Origin(Via.PAGE, NOW)}
    user = await store.directory.get_user(ALICE.email)
    assert user is not None and user.notify is NotifyMode.FAILURE
    # The API shows where it came from.
    status, shown = await api.get(f"/api/v1/users/{ALICE.email}")
    assert shown["preferences"]["notify"] == {
        "value": "failure",
        "via": "page",
        "by": None,
        "at": "2026-12-01T12:00:00Z",
    }


@pytest.mark.parametrize(
    ("form", "check"),
    [
        ({"change": "mute", "value": "1d"}, lambda p: p.muted_until == NOW + timedelta(days=1)),
        ({"change": "nudges", "value": "off"}, lambda p: p.nudges is False),
        ({"change": "emails", "value": "off"}, lambda p: p.email_off),
        ({"change": "channels", "channel_telegram": "on"}, lambda p: p.channels == ("telegram",)),
        (
            {"change": "channels", "channel_email": "on", "channel_slack": "on"},
            lambda p: p.channels == ("email", "slack"),
        ),
    ],
    ids=["mute", "nudges-off", "e-mail-off", "channels", "two-channels"],
)
async def test_each_form(api: Api, store: Store, form: dict[str, str], check: Any) -> None:
    path = link()
    token = form_token(KEY, ALICE.email, query(path)["sig"])
    status, page, _ = await post(api, path, {"csrf": token, **form})
    assert status == 200, page
    prefs = await store.directory.get_preferences(ALICE.email)
    assert prefs is not None and check(prefs)
    assert {o.via for o in prefs.origins.values()} == {Via.PAGE}


async def test_unmute(api: Api, store: Store) -> None:
    path = link()
    token = form_token(KEY, ALICE.email, query(path)["sig"])
    await post(api, path, {"csrf": token, "change": "mute", "value": "3d"})
    _, page, _ = await get(api, path)
    assert "Unmute now" in page
    assert (await post(api, path, {"csrf": token, "change": "unmute"}))[0] == 200
    prefs = await store.directory.get_preferences(ALICE.email)
    assert prefs is not None and prefs.muted_until is None


@pytest.mark.parametrize(
    "csrf",
    [None, "", "A" * 43, "other-link"],
    ids=["none", "empty", "forged", "another-links-token"],
)
async def test_a_post_without_the_pages_token_is_403_and_changes_nothing(
    api: Api, store: Store, csrf: str | None
) -> None:
    path = link()
    form = {"change": "emails", "value": "off"}
    if csrf == "other-link":
        form["csrf"] = form_token(KEY, ALICE.email, query(link(at=NOW - timedelta(days=1)))["sig"])
    elif csrf is not None:
        form["csrf"] = csrf
    version = await store.directory.version()
    status, _, _ = await post(api, path, form)
    assert status == 403
    assert await store.directory.get_preferences(ALICE.email) is None
    assert await store.directory.version() == version


async def test_a_post_with_a_changed_link_is_401_and_changes_nothing(api: Api, store: Store) -> None:
    path = link()
    token = form_token(KEY, ALICE.email, query(path)["sig"])
    forged = "/me?" + urlencode({**query(path), "email": BOB})
    status, _, _ = await post(api, forged, {"csrf": token, "change": "emails", "value": "off"})
    assert status == 401
    assert await store.directory.get_preferences(BOB) is None
    assert await store.directory.get_preferences(ALICE.email) is None


@pytest.mark.parametrize("role", ["viewer", "pipeline"])
async def test_no_other_token_posts(api: Api, store: Store, role: str) -> None:
    form = {"change": "emails", "value": "off"}
    status, _, _ = await post(api, f"/me?email={ALICE.email}", form, role)
    assert status == 403
    assert await store.directory.get_preferences(ALICE.email) is None


async def test_an_admins_token_posts_for_someone_as_the_api(api: Api, store: Store) -> None:
    form = {"change": "emails", "value": "off"}
    status, _, _ = await post(api, f"/me?email={ALICE.email}", form, "admin")
    assert status == 200
    prefs = await store.directory.get_preferences(ALICE.email)
    assert prefs is not None and prefs.origins == {"emails": Origin(Via.API, NOW, "ops")}


@pytest.mark.parametrize(
    "form",
    [
        {"change": "notify", "value": "never"},
        {"change": "mute", "value": "99d"},
        {"change": "channels"},
        {"change": "reboot"},
        {"change": "emails", "value": "off", "extra": "1"},
    ],
    ids=["never", "long-mute", "no-channel", "unknown", "extra-field"],
)
async def test_a_form_the_page_does_not_offer_is_400_and_changes_nothing(
    api: Api, store: Store, form: dict[str, str]
) -> None:
    path = link()
    token = form_token(KEY, ALICE.email, query(path)["sig"])
    status, _, _ = await post(api, path, {"csrf": token, **form})
    assert status == 400
    assert await store.directory.get_preferences(ALICE.email) is None


async def test_a_nudge_is_open_while_its_workload_runs(api: Api, store: Store) -> None:
    _, page, _ = await get(api, link())
    assert 'id="nudge-1"' in page
    running = await stored.get_job(store, "default", me_sample.RUNNING_UID)
    assert running is not None
    await stored.upsert_jobs(store, [replace(running, status=JobStatus.SUCCEEDED, finished_at=NOW)])
    _, page, _ = await get(api, link())
    assert 'id="nudge-1"' not in page and "None: no workload of yours" in page
