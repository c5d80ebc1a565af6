"""Pipeline messages, POST /api/v1/events, on both databases: routed through the directory, queued
once per key (the same key twice sends once, through the real dispatcher), refused with a reason
when nobody can get them; a pipeline token may do this and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
import pytest

from inno_notify.adapters.channels.base import MailMessage, Recipient, RenderedMessage
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.api import openapi
from inno_notify.api.params import MAX_BODY
from inno_notify.domain.messages import decode_pipeline
from inno_notify.domain.model import DeliveryStatus, DirectoryUser, NotificationKind, Team
from inno_notify.service.dispatcher import Dispatcher

from .support import NOW, Api, schema_errors
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
    again = await api.call("POST", "/api/v1/events", "pipeline", json={**EVENT, "title": "changed"})
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
    status, body, _ = await api.call("POST", "/api/v1/events", "admin", json=EVENT)
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
    assert row.payload["slack_channel"] == "#nlp-gpu"


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
    pipeline token too, tests/api/test_pages.py) is in it."""
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
    pages = {("GET", "/jobs/{namespace}/{name}"), ("GET", "/teams/{team}")}
    for operation in routed - open_paths - pages:
        assert shapes.get(operation, operation) in listed, operation
