"""Pipeline messages, POST /api/v1/events, on both databases: routed through the directory, queued
once per token and key (the same key twice sends once, through the real dispatcher; another token's
key is its own; another body 409), refused with a reason when nobody can get them; a pipeline token
may do this and nothing else, within its scope (403) and the limits per token and per recipient
(429, held across replicas); events to one recipient within the group wait are one message."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import event

from inno_notify.adapters.channels.base import MailMessage, Recipient, RenderedMessage
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.engine import POSTGRES_POOL_SIZE
from inno_notify.api import keys, openapi
from inno_notify.api.app import EVENT_WRITERS_LIMIT
from inno_notify.api.keys import EventRouting
from inno_notify.api.params import MAX_BODY
from inno_notify.domain.messages import decode_pipeline
from inno_notify.domain.model import DeliveryStatus, DirectoryUser, NotificationKind, RecipientAddress, Team
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.settings import ApiEventsSettings, ApiSettings, ApiToken

from .conftest import serve_api
from .support import NOW, SETTINGS, Api, schema_errors, sha256
from .test_auth import OPERATIONS

EVENT = {
    "to": "alice@example.com",
    "title": "Training finished, model in prod",
    "text": "accuracy 0.93",
    "links": [{"title": "Model card", "url": "https://models.example.org/resnet?v=2"}],
    "key": "nightly_embeddings/scheduled__2026-11-30T09:00:00+00:00/publish",
}


class RecordingSender:
    def __init__(self) -> None:
        self.sent: list[tuple[Recipient, RenderedMessage]] = []

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        self.sent.append((recipient, message))
        return f"m{len(self.sent)}"

    async def aclose(self) -> None:
        return None


async def directory(store: Store) -> None:
    await store.directory.upsert_user(DirectoryUser("alice@example.com", "Alice", channels=("email",)))
    await store.directory.upsert_user(DirectoryUser("lead@example.com", "Lead", channels=("email",)))
    await store.directory.replace_teams(
        [
            Team("face", namespaces=("face-research",), leads=("lead@example.com",)),
            Team("nlp", leads=(), slack_channel="#nlp-gpu"),
        ]
    )


async def test_the_same_key_twice_sends_once(api: Api, store: Store) -> None:
    await directory(store)
    first = await api.call("POST", "/api/v1/events", "pipeline", json=EVENT)
    again = await api.call("POST", "/api/v1/events", "pipeline", json=EVENT)
    assert first[0] == again[0] == 202
    assert first[1]["recipients"] == [{"recipient": "alice@example.com", "channel": "email"}]
    assert (first[1]["duplicate"], again[1]["duplicate"]) == (False, True)
    assert first[1]["id"] == again[1]["id"] and first[1]["key"] == EVENT["key"]
    rows, _ = await store.outbox.list_notifications()
    assert [(r.kind, r.recipient, r.status) for r in rows] == [
        (NotificationKind.PIPELINE_EVENT, "alice@example.com", DeliveryStatus.PENDING)
    ]
    message = decode_pipeline(rows[0].payload)
    assert (message.title, message.text, message.sender) == (
        EVENT["title"],
        "accuracy 0.93",
        "airflow-nightly",
    )
    sender = RecordingSender()
    dispatcher = Dispatcher(store, {"email": sender}, Renderer(), clock=lambda: NOW)
    assert await dispatcher.run_once(NOW) == 1
    assert await dispatcher.run_once(NOW) == 0
    [(recipient, mail)] = sender.sent
    assert recipient.email == "alice@example.com" and isinstance(mail, MailMessage)
    assert mail.subject == "[inno-notify] Training finished, model in prod"
    assert "Model card: https://models.example.org/resnet?v=2" in mail.text
    # Posting it again after it was sent still sends nothing.
    status, body, _ = await api.call("POST", "/api/v1/events", "pipeline", json=EVENT)
    assert (status, body["duplicate"]) == (202, True)
    assert await dispatcher.run_once(NOW) == 0 and len(sender.sent) == 1


async def test_to_a_team_and_without_a_key(api: Api, store: Store) -> None:
    await directory(store)
    body = {"team": "face", "title": "Nightly eval done"}
    first = await api.call("POST", "/api/v1/events", "pipeline", json=body)
    second = await api.call("POST", "/api/v1/events", "pipeline", json=body)
    assert first[0] == second[0] == 202
    assert first[1]["recipients"] == [{"recipient": "lead@example.com", "channel": "email"}]
    assert first[1]["key"] != second[1]["key"]  # no key: each post is a message of its own
    rows, _ = await store.outbox.list_notifications()
    assert len(rows) == 2


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        ({**EVENT, "team": "face"}, 400, "invalid_body"),
        ({k: v for k, v in EVENT.items() if k != "to"}, 400, "invalid_body"),
        ({**EVENT, "to": "attacker@evil.example,victim@corp.example"}, 400, "invalid_body"),
        ({**EVENT, "to": "Bob <bob@example.com>"}, 400, "invalid_body"),
        ({**EVENT, "title": ""}, 400, "invalid_body"),
        ({**EVENT, "title": "x\x00y"}, 400, "invalid_body"),
        ({**EVENT, "links": [{"title": "x", "url": "javascript:alert(1)"}]}, 400, "invalid_body"),
        ({**EVENT, "links": [{"title": "x", "url": "https://"}]}, 400, "invalid_body"),
        ({**EVENT, "key": "has space"}, 400, "invalid_body"),
        ({**EVENT, "extra": 1}, 400, "invalid_body"),
        ({**EVENT, "to": None, "team": "nobody-here"}, 422, "no_recipients"),
    ],
)
async def test_bad_posts_are_refused_with_a_reason(
    api: Api, store: Store, body: dict[str, Any], status: int, code: str
) -> None:
    await directory(store)
    got, answer, _ = await api.call("POST", "/api/v1/events", "pipeline", json=body)
    assert (got, answer["error"]["code"]) == (status, code)
    assert (await store.outbox.list_notifications())[0] == []


async def test_a_team_with_a_slack_channel_gets_a_channel_post(api: Api, store: Store) -> None:
    await directory(store)
    status, body, _ = await api.call("POST", "/api/v1/events", "pipeline", json={"team": "nlp", "title": "t"})
    assert (status, body["recipients"]) == (202, [{"recipient": "#nlp-gpu", "channel": "slack"}])
    [row] = (await store.outbox.list_notifications())[0]
    assert row.address == RecipientAddress(slack_channel="#nlp-gpu")


async def test_viewers_may_not_post_events(api: Api, store: Store) -> None:
    status, body, _ = await api.call("POST", "/api/v1/events", "viewer", json=EVENT)
    assert (status, body["error"]) == (403, {"code": "forbidden", "message": "role viewer may only read"})
    assert (await store.outbox.list_notifications())[0] == []


@pytest.mark.parametrize(("method", "path"), [op for op in OPERATIONS if op != ("POST", "/api/v1/events")])
async def test_a_pipeline_token_gets_403_on_every_other_route(api: Api, method: str, path: str) -> None:
    status, body, _ = await api.call(method, path, "pipeline", json={"channels": ["email"]})
    assert (status, body["error"]) == (
        403,
        {
            "code": "forbidden",
            "message": "role pipeline may only post pipeline events (POST /api/v1/events)",
        },
    )


@pytest.mark.parametrize(("method", "path"), [("GET", "/api/v1/events"), ("PATCH", "/api/v1/jobs")])
async def test_a_pipeline_token_gets_403_not_405(api: Api, method: str, path: str) -> None:
    """A 405 would list the allowed methods: a pipeline token learns nothing about other routes."""
    status, body, _ = await api.call(method, path, "pipeline")
    assert (status, body["error"]["code"]) == (403, "forbidden")


@pytest.mark.parametrize(
    ("body", "valid"),
    [
        ({"to": "alice@example.com", "title": "t"}, True),
        ({"team": "face", "title": "t"}, True),
        ({"to": None, "team": "face", "title": "t"}, True),
        ({"to": "alice@example.com", "team": None, "title": "t"}, True),
        ({"to": "alice@example.com", "team": "face", "title": "t"}, False),
        ({"to": None, "team": None, "title": "t"}, False),
        ({"title": "t"}, False),
        ({"to": "alice@example.com"}, False),
    ],
)
async def test_the_documented_body_is_the_accepted_one(
    api: Api, store: Store, body: dict[str, Any], valid: bool
) -> None:
    """Exactly one of to and team, as the document's oneOf states it (a null one is left out)."""
    await directory(store)
    document = openapi.build()
    schema = document["paths"]["/api/v1/events"]["post"]["requestBody"]["content"]["application/json"]
    assert (not schema_errors(document, schema["schema"], body)) is valid
    status, answer, _ = await api.call("POST", "/api/v1/events", "pipeline", json=body)
    assert (status == 202) is valid, answer


async def chunks(total: int) -> AsyncIterator[bytes]:
    """A JSON body of `total` bytes sent without a Content-Length, in 4 KiB chunks."""
    head = orjson.dumps({**EVENT, "key": None})[:-1] + b', "text": "'
    tail = b'"}'
    body = head + b"x" * (total - len(head) - len(tail)) + tail
    for start in range(0, len(body), 4096):
        yield body[start : start + 4096]


@pytest.mark.parametrize(("total", "status"), [(MAX_BODY + 1, 413), (3000, 202), (4000 + 400, 400)])
async def test_a_chunked_body_is_read_whole_and_bounded(
    api: Api, store: Store, total: int, status: int
) -> None:
    """Without a Content-Length the body is read to its end, in as many reads as it takes, and
    refused once it passes 64 KiB (4,000 characters of text pass the size, not the model)."""
    await directory(store)
    headers = {**api.headers("pipeline"), "Content-Type": "application/json"}
    async with api.client.post("/api/v1/events", data=chunks(total), headers=headers) as response:
        assert response.request_info.headers.get("Transfer-Encoding") == "chunked"
        assert response.status == status, await response.text()


async def test_every_routed_operation_is_forbidden_to_a_pipeline_token(api: Api) -> None:
    """The list above is complete: every route of the app but POST /events and the pages (403 to a
    pipeline token too, tests/api/test_pages.py, test_workflow_pages.py, test_unsubscribe.py and
    test_me_page.py) is
    in it."""
    routed = {
        (route.method, route.resource.canonical)
        for route in api.app.router.routes()
        if route.resource is not None and route.method != "HEAD"
    }
    listed = {(m, p) for m, p in OPERATIONS}
    shapes = {
        ("GET", "/api/v1/jobs/{namespace}/{name}"): ("GET", "/api/v1/jobs/face-research/train"),
        ("POST", "/api/v1/notifications/{id}/retry"): ("POST", "/api/v1/notifications/1/retry"),
        ("GET", "/api/v1/digests/{team}"): ("GET", "/api/v1/digests/face"),
        ("GET", "/api/v1/users/{email}"): ("GET", "/api/v1/users/alice@example.com"),
        ("PUT", "/api/v1/users/{email}"): ("PUT", "/api/v1/users/alice@example.com"),
        ("DELETE", "/api/v1/users/{email}"): ("DELETE", "/api/v1/users/alice@example.com"),
    }
    open_paths = {("GET", "/healthz"), ("GET", "/readyz"), ("GET", "/metrics")}
    pages = {
        ("GET", "/jobs/{namespace}/{name}"),
        ("GET", "/workflows/{namespace}/{name}"),
        ("GET", "/teams/{team}"),
        ("GET", "/unsubscribe"),
        ("POST", "/unsubscribe"),
        ("GET", "/me"),
        ("POST", "/me"),
    }
    for operation in routed - open_paths - pages:
        assert shapes.get(operation, operation) in listed, operation


# --- trust boundaries (issue 29): keys per token, scopes, rate limits, grouping ---------------------

CI_TOKEN = "ci-token-5d1e90"
TEAM_TOKEN = "face-etl-token-11ab"
ALICE_TOKEN = "alice-only-token-3c"


def bounded(per_token: int = 60, per_recipient: int = 10) -> ApiSettings:
    """The tests' settings plus pipeline tokens of their own: `ci` (no scope), `face-etl` (team
    face only) and `alice-only` (alice only), under the given limits."""
    return ApiSettings(
        listen=SETTINGS.listen,
        tokens=(
            *SETTINGS.tokens,
            ApiToken(name="ci", sha256=sha256(CI_TOKEN), role="pipeline", teams=None, recipients=None),
            ApiToken(
                name="face-etl", sha256=sha256(TEAM_TOKEN), role="pipeline", teams=("face",), recipients=()
            ),
            ApiToken(
                name="alice-only",
                sha256=sha256(ALICE_TOKEN),
                role="pipeline",
                teams=None,
                recipients=("Alice@Example.com",),
            ),
        ),
        events=ApiEventsSettings(per_token_per_minute=per_token, per_recipient_per_hour=per_recipient),
    )


async def post(api: Api, token: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], dict[str, str]]:
    headers = {"Authorization": f"Bearer {token}"}
    async with api.client.post("/api/v1/events", json=body, headers=headers) as response:
        return response.status, await response.json(), dict(response.headers)


async def outbox_rows(store: Store) -> list[tuple[str, str]]:
    rows, _ = await store.outbox.list_notifications(limit=500)
    return sorted((r.recipient, decode_pipeline(r.payload).title) for r in rows)


async def test_a_key_belongs_to_the_token_that_posted_it(store: Store) -> None:
    """Another pipeline's key neither answers with the first one's receipt (and recipients) nor
    drops its own message; the same token's key again is a duplicate, with another body 409."""
    await directory(store)
    async with serve_api(store, settings=bounded()) as api:
        first = await api.call("POST", "/api/v1/events", "pipeline", json=EVENT)
        theirs = await post(api, CI_TOKEN, {**EVENT, "to": "lead@example.com", "title": "ci's own"})
        assert first[0] == theirs[0] == 202
        assert theirs[1]["duplicate"] is False and theirs[1]["id"] != first[1]["id"]
        assert theirs[1]["recipients"] == [{"recipient": "lead@example.com", "channel": "email"}]
        again = await post(api, CI_TOKEN, {**EVENT, "to": "lead@example.com", "title": "ci's own"})
        assert (again[0], again[1]["duplicate"], again[1]["id"]) == (202, True, theirs[1]["id"])
        changed = await post(api, CI_TOKEN, {**EVENT, "to": "lead@example.com", "title": "another"})
        assert (changed[0], changed[1]["error"]["code"]) == (409, "key_reused")
        assert EVENT["key"] in changed[1]["error"]["message"]
    assert await outbox_rows(store) == [
        ("alice@example.com", EVENT["title"]),
        ("lead@example.com", "ci's own"),
    ]


@pytest.mark.parametrize(
    ("token", "body", "allowed"),
    [
        (TEAM_TOKEN, {"team": "face", "title": "t"}, True),
        (TEAM_TOKEN, {"team": "nlp", "title": "t"}, False),
        (TEAM_TOKEN, {"to": "alice@example.com", "title": "t"}, False),
        (ALICE_TOKEN, {"to": "ALICE@example.com", "title": "t"}, True),
        (ALICE_TOKEN, {"to": "lead@example.com", "title": "t"}, False),
        (ALICE_TOKEN, {"team": "face", "title": "t"}, False),
        (CI_TOKEN, {"to": "lead@example.com", "title": "t"}, True),
    ],
)
async def test_a_scoped_token_posts_only_within_its_scope(
    store: Store, token: str, body: dict[str, Any], allowed: bool
) -> None:
    await directory(store)
    async with serve_api(store, settings=bounded()) as api:
        status, answer, _ = await post(api, token, body)
    if allowed:
        assert status == 202, answer
    else:
        assert (status, answer["error"]["code"]) == (403, "out_of_scope")
        assert "may not post to" in answer["error"]["message"]
        assert await outbox_rows(store) == []


async def test_a_token_over_its_limit_gets_429_on_every_replica_and_nothing_is_queued(store: Store) -> None:
    """Per token per minute, counted in the store: a second replica (a fresh app over the same
    database, its memory empty) refuses too; a minute later the token may post again."""
    await directory(store)
    now = [NOW]
    settings = bounded(per_token=3)
    async with (
        serve_api(store, settings=settings, clock=lambda: now[0]) as one,
        serve_api(store, settings=settings, clock=lambda: now[0]) as two,
    ):
        for i, api in enumerate((one, two, one)):
            status, _, _ = await post(api, CI_TOKEN, {"to": f"p{i}@example.com", "title": f"t{i}"})
            assert status == 202
        for api in (one, two):
            status, answer, headers = await post(api, CI_TOKEN, {"to": "p9@example.com", "title": "t9"})
            assert (status, answer["error"]["code"]) == (429, "rate_limited")
            assert headers["Retry-After"] == "60"
            assert "api.events.per_token_per_minute: 3" in answer["error"]["message"]
        # Another token is not held back by this one.
        assert (await post(one, ALICE_TOKEN, {"to": "alice@example.com", "title": "a"}))[0] == 202
        assert len(await outbox_rows(store)) == 4
        now[0] = NOW + timedelta(seconds=61)
        assert (await post(two, CI_TOKEN, {"to": "p9@example.com", "title": "t9"}))[0] == 202


async def test_a_recipient_gets_at_most_its_hourly_events_from_all_tokens_and_replicas(store: Store) -> None:
    """Per resolved recipient per hour: alice by address and by her team's leads count alike; two
    replicas and two tokens share the count; over it 429 with Retry-After and nothing queued."""
    await directory(store)
    await store.directory.replace_teams(
        [Team("face", namespaces=("face-research",), leads=("alice@example.com",))]
    )
    now = [NOW]
    settings = bounded(per_recipient=2)
    async with (
        serve_api(store, settings=settings, clock=lambda: now[0]) as one,
        serve_api(store, settings=settings, clock=lambda: now[0]) as two,
    ):
        assert (await post(one, CI_TOKEN, {"to": "Alice@example.com", "title": "one"}))[0] == 202
        now[0] = NOW + timedelta(minutes=10)
        assert (await post(two, TEAM_TOKEN, {"team": "face", "title": "two"}))[0] == 202
        status, answer, headers = await post(one, ALICE_TOKEN, {"to": "alice@example.com", "title": "three"})
        assert (status, answer["error"]["code"]) == (429, "rate_limited")
        assert headers["Retry-After"] == str(50 * 60)  # the first one leaves the hour in 50 min
        assert "alice@example.com has been sent 2 events in the last hour" in answer["error"]["message"]
        # Others are not held back by her limit.
        assert (await post(two, CI_TOKEN, {"to": "lead@example.com", "title": "lead"}))[0] == 202
        now[0] = NOW + timedelta(hours=1, seconds=1)
        assert (await post(one, ALICE_TOKEN, {"to": "alice@example.com", "title": "four"}))[0] == 202
    assert await outbox_rows(store) == [
        ("alice@example.com", "four"),
        ("alice@example.com", "one"),
        ("alice@example.com", "two"),
        ("lead@example.com", "lead"),
    ]


async def test_events_to_one_recipient_within_the_group_wait_are_one_message(store: Store) -> None:
    """Like job summaries (the dispatcher's grouping): three posts within notify.group_wait_seconds
    are one e-mail to alice; lead's is his own."""
    await directory(store)
    routing = EventRouting(frozenset({"email"}), group_wait_seconds=30)
    now = [NOW]
    async with serve_api(store, settings=bounded(), event_routing=routing, clock=lambda: now[0]) as api:
        for i, token in enumerate((CI_TOKEN, ALICE_TOKEN, CI_TOKEN)):
            now[0] = NOW + timedelta(seconds=5 * i)
            assert (await post(api, token, {"to": "alice@example.com", "title": f"step {i}"}))[0] == 202
        assert (await post(api, CI_TOKEN, {"to": "lead@example.com", "title": "lead's"}))[0] == 202
    sender = RecordingSender()
    dispatcher = Dispatcher(
        store, {"email": sender}, Renderer(), DispatchOptions(group_wait_seconds=30), clock=lambda: now[0]
    )
    assert await dispatcher.run_once(NOW + timedelta(seconds=29)) == 0  # nothing due yet
    now[0] = NOW + timedelta(seconds=30)
    assert await dispatcher.run_once(now[0]) == 3  # alice's first is due; her later two ride along
    now[0] = NOW + timedelta(seconds=40)
    assert await dispatcher.run_once(now[0]) == 1  # lead's, posted at +10 s
    mails = {recipient.email: mail for recipient, mail in sender.sent}
    assert set(mails) == {"alice@example.com", "lead@example.com"} and len(sender.sent) == 2
    alice = mails["alice@example.com"]
    assert isinstance(alice, MailMessage)
    assert alice.subject == "[inno-notify] step 0 (and 2 more)"
    assert [line for line in alice.text.splitlines() if line.startswith("step")] == [
        "step 0",
        "step 1",
        "step 2",
    ]
    assert "Posted by pipeline ci, alice-only through inno-notify." in alice.text


# --- a cheap post (issue 29's bench): refusals known to the replica, the directory by version, -------
# --- a bounded number of posts at the database --------------------------------------------------


@contextlib.contextmanager
def statements(store: Store) -> Iterator[list[str]]:
    """The SQL statements `store` runs inside the block."""
    seen: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        seen.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", record)


async def test_a_recipient_the_store_refused_is_refused_again_without_the_database(store: Store) -> None:
    """Once the store said alice is over her hourly limit, the replica answers the same 429 (Retry-After
    counted down) without a statement until the instant the store named; then the store decides again."""
    await directory(store)
    now = [NOW]
    async with serve_api(store, settings=bounded(per_recipient=1), clock=lambda: now[0]) as api:
        assert (await post(api, CI_TOKEN, {"to": "alice@example.com", "title": "one"}))[0] == 202
        now[0] = NOW + timedelta(minutes=10)
        status, _, headers = await post(api, ALICE_TOKEN, {"to": "Alice@example.com", "title": "two"})
        assert (status, headers["Retry-After"]) == (429, str(50 * 60))
        now[0] = NOW + timedelta(minutes=20)
        with statements(store) as seen:
            status, again, headers = await post(api, CI_TOKEN, {"to": "alice@example.com", "title": "three"})
        assert (status, again["error"]["code"], headers["Retry-After"]) == (429, "rate_limited", str(40 * 60))
        assert "alice@example.com has been sent 1 events in the last hour" in again["error"]["message"]
        assert seen == []
        # Others are not held back; past the hour the store decides again, and lets her through.
        assert (await post(api, CI_TOKEN, {"to": "lead@example.com", "title": "lead"}))[0] == 202
        now[0] = NOW + timedelta(hours=1, seconds=1)
        assert (await post(api, CI_TOKEN, {"to": "alice@example.com", "title": "four"}))[0] == 202
    assert await outbox_rows(store) == [
        ("alice@example.com", "four"),
        ("alice@example.com", "one"),
        ("lead@example.com", "lead"),
    ]


async def test_posts_read_the_directory_whole_only_when_it_changed(store: Store) -> None:
    """Each post asks the directory version; the directory itself is read again only after a
    change, and the change applies to the very next post (nlp loses its Slack channel: its lead)."""
    await directory(store)
    routing = EventRouting(frozenset({"email", "slack"}))
    async with serve_api(store, settings=bounded(), event_routing=routing) as api:
        cached = api.app[keys.DIRECTORY]
        for i in range(3):
            status, receipt, _ = await post(api, CI_TOKEN, {"team": "nlp", "title": f"t{i}"})
            assert (status, receipt["recipients"]) == (202, [{"recipient": "#nlp-gpu", "channel": "slack"}])
        assert cached.loads == 1
        await store.directory.replace_teams([Team("nlp", leads=("lead@example.com",))])
        status, receipt, _ = await post(api, CI_TOKEN, {"team": "nlp", "title": "after"})
        assert (status, receipt["recipients"]) == (
            202,
            [{"recipient": "lead@example.com", "channel": "email"}],
        )
        assert cached.loads == 2


async def test_refusals_and_readers_do_not_wait_for_the_event_writers(store: Store) -> None:
    """With every event writer's place taken (a flood of posts at the database), a token over its
    limit is still refused at once and a reader still gets its page; a post that needs the
    database goes through once a place is free."""
    await directory(store)
    async with serve_api(store, settings=bounded(per_token=1)) as api:
        assert (await post(api, CI_TOKEN, {"to": "alice@example.com", "title": "one"}))[0] == 202
        writers = api.app[keys.EVENT_WRITERS]
        for _ in range(EVENT_WRITERS_LIMIT):
            await writers.acquire()
        assert writers.locked()
        waiting = asyncio.create_task(post(api, ALICE_TOKEN, {"to": "alice@example.com", "title": "a"}))
        status, answer, _ = await asyncio.wait_for(
            post(api, CI_TOKEN, {"to": "lead@example.com", "title": "x"}), 10
        )
        assert (status, answer["error"]["code"]) == (429, "rate_limited")
        assert (await asyncio.wait_for(api.call("GET", "/api/v1/jobs", "viewer"), 10))[0] == 200
        for _ in range(EVENT_WRITERS_LIMIT):
            writers.release()
        assert (await asyncio.wait_for(waiting, 10))[0] == 202
    assert EVENT_WRITERS_LIMIT < POSTGRES_POOL_SIZE
