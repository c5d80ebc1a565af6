"""The one-click unsubscribe every e-mail carries (RFC 8058, issue 33), on the real app over the real
store: POST with the link's signature and the form `List-Unsubscribe=One-Click` (urlencoded or
multipart) turns e-mail off for that address only, in the directory or not, and nothing else; GET
changes nothing and shows a button that posts the same form; any other body is 400, a changed or
expired link 401; posting twice is the same as once. At the end, the whole way: a summary e-mailed
through a real SMTP server carries the headers, and posting its link stops the next summary's e-mail.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from html import unescape
from typing import Any

import pytest

from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.db import Store
from inno_notify.api.views.pages import FORM_PAGE_HEADERS, PAGE_HEADERS
from inno_notify.domain.model import DirectoryUser, JobStatus, Notification
from inno_notify.domain.page_links import PageLinks
from inno_notify.domain.preferences import Origin, Via
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.message_composer import MessageParts
from inno_notify.service.planner import DirectoryPlanner
from inno_notify.service.ratelimit import UNLIMITED
from tests import stored
from tests.adapters.channels.conftest import smtp_server
from tests.adapters.channels.fake_smtp import RecordingHandler
from tests.service.support import finished_job, renderer

from .conftest import serve_api
from .support import NOW, Api

__all__ = ["smtp_server"]

KEY = b"k3y-for-unsubscribe-links-000000"
PUBLIC = "https://inno.example.org"
LINKS = PageLinks(PUBLIC, KEY)
ALICE = DirectoryUser("alice@example.com", "Alice", slack_user_id="U1", channels=("slack", "email"))
STRANGER = "stranger@example.org"
ONE_CLICK = b"List-Unsubscribe=One-Click"
URLENCODED = "application/x-www-form-urlencoded"
BOUNDARY = "b0undary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"
BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


def multipart(*parts: tuple[str, str]) -> bytes:
    """A multipart/form-data body of (Content-Disposition parameters, value) parts."""
    body = "".join(
        f"--{BOUNDARY}\r\nContent-Disposition: form-data; {disposition}\r\n\r\n{value}\r\n"
        for disposition, value in parts
    )
    return f"{body}--{BOUNDARY}--\r\n".encode()


def link(email: str, at: Any = NOW) -> str:
    """The path and query of `email`'s one-click link as an e-mail made at `at` carries it."""
    url = LINKS.unsubscribe(email, at)
    assert url is not None
    return url.removeprefix(PUBLIC)


@pytest.fixture
async def api(store: Store) -> AsyncIterator[Api]:
    await store.directory.upsert_user(ALICE)
    async with serve_api(store, link_key=KEY) as served:
        yield served


async def post(
    api: Api,
    path: str,
    body: bytes = ONE_CLICK,
    content_type: str = URLENCODED,
    role: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, str, Mapping[str, str]]:
    sent = api.headers(role, {"Content-Type": content_type, **(headers or {})})
    async with api.client.post(path, data=body, headers=sent) as response:
        return response.status, await response.text(), response.headers


async def get(api: Api, path: str, role: str | None = None) -> tuple[int, str, Mapping[str, str]]:
    async with api.client.get(path, headers=api.headers(role, BROWSER)) as response:
        return response.status, await response.text(), response.headers


async def email_off(store: Store) -> frozenset[str]:
    return (await store.directory.snapshot()).email_off


@pytest.mark.parametrize(
    ("body", "content_type"),
    [(ONE_CLICK, URLENCODED), (multipart(('name="List-Unsubscribe"', "One-Click")), MULTIPART)],
    ids=["urlencoded", "multipart"],
)
async def test_the_one_click_post_turns_e_mail_off_for_that_person_only(
    api: Api, store: Store, body: bytes, content_type: str
) -> None:
    status, page, headers = await post(api, link(ALICE.email), body, content_type)

    assert status == 200 and "E-mail is off" in page and "alice@example.com" in page
    assert headers["Content-Security-Policy"] == PAGE_HEADERS["Content-Security-Policy"]
    assert headers["Cache-Control"] == "private, no-store" and headers["Referrer-Policy"] == "no-referrer"
    assert await email_off(store) == {"alice@example.com"}
    # The directory entry and its other channels are as they were; the API shows who turned it off.
    assert await store.directory.get_user(ALICE.email) == ALICE
    status, user = await api.get("/api/v1/users/alice@example.com")
    assert (status, user["emails"], user["channels"]) == (200, False, ["slack", "email"])
    assert user["preferences"] == {
        "emails": {"value": False, "via": "email", "by": None, "at": "2026-12-01T12:00:00Z"}
    }


async def test_a_person_outside_the_directory_unsubscribes_too(api: Api, store: Store) -> None:
    body = multipart(('name="List-Unsubscribe"', "One-Click"))
    assert (await post(api, link(STRANGER), body, MULTIPART))[0] == 200
    assert await email_off(store) == {STRANGER}
    assert await store.directory.get_user(STRANGER) is None  # no directory entry made for them


async def test_posting_again_changes_nothing(api: Api, store: Store) -> None:
    assert (await post(api, link(ALICE.email)))[0] == 200
    version = await store.directory.version()
    status, page, _ = await post(api, link(ALICE.email, NOW - timedelta(days=3)))
    assert status == 200 and "E-mail is off" in page
    assert await store.directory.version() == version  # not even written again
    prefs = await store.directory.get_preferences(ALICE.email)
    assert prefs is not None and prefs.origins == {"emails": Origin(Via.EMAIL, NOW)}


async def test_get_changes_nothing_and_its_button_posts_the_one_click_form(api: Api, store: Store) -> None:
    """Link scanners fetch every link of a message: only the button unsubscribes."""
    path = link(ALICE.email)
    for _ in range(2):
        status, page, headers = await get(api, path)
        assert status == 200 and "Unsubscribe from e-mail" in page
    assert await store.directory.get_preferences(ALICE.email) is None
    assert await email_off(store) == frozenset()
    # The page may post its form back here, and nowhere else; it still loads and runs nothing.
    assert headers["Content-Security-Policy"] == FORM_PAGE_HEADERS["Content-Security-Policy"]
    assert "form-action 'self'" in headers["Content-Security-Policy"]
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    (form,) = re.findall(r'<form method="post" action="([^"]+)">(.*?)</form>', page, re.S)
    action, fields = unescape(form[0]), form[1]
    assert '<input type="hidden" name="List-Unsubscribe" value="One-Click">' in fields
    assert "/unsubscribe" + action == path  # the same signed link

    # What a browser sends when the button is pressed: the form, urlencoded, to that link.
    status, page, _ = await post(api, "/unsubscribe" + action, headers=BROWSER)
    assert status == 200 and "E-mail is off" in page
    assert await email_off(store) == {"alice@example.com"}


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"List-Unsubscribe": "One-Click"}', "application/json"),
        (ONE_CLICK, "text/plain"),
        (b"", URLENCODED),
        (b"List-Unsubscribe=Yes", URLENCODED),
        (b"List-Unsubscribe=one-click", URLENCODED),
        (b"List-Unsubscribe=One-Click&List-Unsubscribe=One-Click", URLENCODED),
        (b"List-Unsubscribe=One-Click&unsubscribe_all_channels=1", URLENCODED),
        (b"List-Unsubscribe=One-Click&", URLENCODED),
        ("List-Unsubscribe=One-Click\u00e9".encode(), URLENCODED),
        (multipart(('name="List-Unsubscribe"', "Yes")), MULTIPART),
        (multipart(('name="List-Unsubscribe"; filename="x.txt"', "One-Click")), MULTIPART),
        (multipart(("", "One-Click")), MULTIPART),
        (multipart(('name="List-Unsubscribe"', "One-Click")), "multipart/form-data"),  # no boundary
        (multipart(('name="List-Unsubscribe"', "One-Click"))[:-8], MULTIPART),  # cut short
        (b"\x00" * 100, MULTIPART),
    ],
)
async def test_any_other_body_is_400_and_changes_nothing(
    api: Api, store: Store, body: bytes, content_type: str
) -> None:
    status, text, _ = await post(api, link(ALICE.email), body, content_type)
    assert status == 400 and "invalid_body" in text
    assert await store.directory.get_preferences(ALICE.email) is None


async def test_a_body_over_64_kib_is_413(api: Api, store: Store) -> None:
    status, text, _ = await post(api, link(ALICE.email), ONE_CLICK + b"&x=" + b"y" * 70_000)
    assert status == 413 and "payload_too_large" in text
    assert await store.directory.get_preferences(ALICE.email) is None


def with_query(path: str, **changes: str) -> str:
    """`path` with the values of some of its query parameters replaced (as they are spelled)."""
    base, _, query = path.partition("?")
    pairs = [pair.partition("=") for pair in query.split("&")]
    return base + "?" + "&".join(f"{k}={changes.get(k, v)}" for k, _, v in pairs)


@pytest.mark.parametrize(
    ("path", "code"),
    [
        (with_query(link(ALICE.email), email="bob%40example.com"), "invalid_link"),  # another address
        (with_query(link(ALICE.email), email="ALICE%40example.com"), "invalid_link"),
        (with_query(link(ALICE.email), sig="A" * 43), "invalid_link"),
        (with_query(link(ALICE.email), exp="4102444800"), "invalid_link"),  # a later expiry
        (link(ALICE.email, NOW - timedelta(days=366)), "link_expired"),
        (with_query(link(ALICE.email), sig=""), "unauthorized"),
        ("/unsubscribe?email=alice%40example.com", "unauthorized"),
    ],
)
async def test_a_changed_or_expired_link_is_401(api: Api, store: Store, path: str, code: str) -> None:
    for method in ("POST", "GET"):
        async with api.client.request(method, path, data=ONE_CLICK, headers=BROWSER) as response:
            text = await response.text()
            assert response.status == 401 and code in text, (method, text)
            assert response.headers["Content-Type"].startswith("text/html")  # a person reads it
    assert await store.directory.get_preferences("alice@example.com") is None


async def test_a_link_for_a_job_page_does_not_unsubscribe(api: Api, store: Store) -> None:
    job_link = LINKS.job("face-research", "train", "uid-1", NOW)
    assert job_link is not None
    query = job_link.split("?", 1)[1].replace("uid=uid-1", "email=alice%40example.com")
    assert (await post(api, f"/unsubscribe?{query}"))[0] == 401
    assert await store.directory.get_preferences("alice@example.com") is None


async def test_of_the_tokens_only_an_admin_s_acts_for_someone(api: Api, store: Store) -> None:
    path = "/unsubscribe?email=alice%40example.com"
    for role in ("viewer", "pipeline"):
        assert (await post(api, path, role=role))[0] == 403
        assert (await get(api, path, role=role))[0] == 403
    assert await store.directory.get_preferences("alice@example.com") is None
    assert (await get(api, path, role="admin"))[0] == 200
    assert (await post(api, path, role="admin"))[0] == 200
    prefs = await store.directory.get_preferences("alice@example.com")
    assert prefs is not None and prefs.origins == {"emails": Origin(Via.API, NOW, "ops")}


async def test_an_admin_turns_e_mail_on_again_through_the_users_api(api: Api, store: Store) -> None:
    assert (await post(api, link(ALICE.email)))[0] == 200
    status, user, _ = await api.call(
        "PUT",
        "/api/v1/users/alice@example.com",
        json={
            "name": "Alice",
            "slack_user_id": "U1",
            "channels": ["slack", "email"],
            "preferences": {"emails": True},
        },
    )
    assert (status, user["emails"], user["preferences"]["emails"]["via"]) == (200, True, "api")
    assert await email_off(store) == frozenset()


async def test_a_pipeline_message_no_longer_goes_by_e_mail(api: Api) -> None:
    """POST /api/v1/events reads who turned e-mail off through the directory cache, at once."""

    async def send(to: str) -> tuple[int, Any]:
        body = {"title": "nightly eval done", "key": f"{to}-{len(api.recorder.seen)}", "to": to}
        status, answer, _ = await api.call("POST", "/api/v1/events", "pipeline", json=body)
        return status, answer

    status, body = await send(ALICE.email)
    assert status == 202 and {r["channel"] for r in body["recipients"]} == {"slack", "email"}

    assert (await post(api, link(ALICE.email)))[0] == 200
    assert (await post(api, link(STRANGER)))[0] == 200
    status, body = await send(ALICE.email)
    assert status == 202 and {r["channel"] for r in body["recipients"]} == {"slack"}
    status, body = await send(STRANGER)
    assert status == 422 and "unsubscribed from e-mail" in body["error"]["message"], body


# --- the whole way: an e-mail's header, its link posted, the next summary ----------------------------


async def test_posting_an_e_mailed_link_stops_the_next_summary_s_e_mail(
    api: Api, store: Store, smtp_server: tuple[RecordingHandler, int]
) -> None:
    handler, port = smtp_server
    clock = [NOW]
    email = EmailSender(
        "127.0.0.1", "inno@example.com", port=port, starttls=False, list_unsubscribe="mailto:ops@example.com"
    )
    dispatcher = Dispatcher(
        store,
        {"email": email},
        renderer(),
        DispatchOptions(limits=UNLIMITED, rand=lambda: 0.5),
        clock=lambda: clock[0],
        parts=MessageParts(unsubscribe=LINKS.unsubscribe),
    )
    planner = DirectoryPlanner(store, frozenset({"email", "slack"}), 0.0, lambda: clock[0])

    async def summarize(uid: str) -> set[str]:
        job = finished_job(uid, status=JobStatus.FAILED)
        rows = await planner(job, clock[0])
        await stored.upsert_jobs(store, [job])
        await stored.summarize(store, job.cluster, job.uid, rows)
        return {n.channel.value for n in rows}

    assert await summarize("j1") == {"slack", "email"}
    await dispatcher.run_once(clock[0])
    [received] = handler.received
    header = received.message["List-Unsubscribe"]
    found = re.fullmatch(r"<(https://[^>]+)>, <mailto:ops@example.com>", header)
    assert found is not None, header
    assert received.message["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"

    # The mail provider's POST: the header's URL, the RFC 8058 form, no token, no cookie.
    assert (await post(api, found.group(1).removeprefix(PUBLIC)))[0] == 200

    clock[0] += timedelta(minutes=5)
    assert await summarize("j2") == {"slack"}  # Slack as before, no e-mail
    await email.aclose()


async def test_e_mail_still_waiting_when_the_link_is_posted_is_not_sent(api: Api, store: Store) -> None:
    """Queued before the click (a grouped summary waiting for its group): the e-mail is dropped with
    its reason, the same summary's Slack message still goes."""
    planner = DirectoryPlanner(store, frozenset({"email", "slack"}), 600.0, lambda: NOW)
    job = finished_job("waiting", status=JobStatus.FAILED)
    rows = await planner(job, NOW)
    await stored.upsert_jobs(store, [job])
    await stored.summarize(store, job.cluster, job.uid, rows)

    assert (await post(api, link(ALICE.email)))[0] == 200

    outcome = {
        n.channel.value: (n.status.value, n.last_error) for n in await notifications_of(store, job.uid)
    }
    assert outcome == {
        "email": ("failed", "not sent: the recipient turned e-mail off"),
        "slack": ("pending", None),
    }


async def notifications_of(store: Store, job_uid: str) -> list[Notification]:
    rows, _ = await store.outbox.list_notifications(limit=100)
    return [n for n in rows if n.job_uid == job_uid]
