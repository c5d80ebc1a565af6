"""Pipeline messages: POST /api/v1/events (roles admin and pipeline).

A script in an Airflow task or an Argo step (`inno-notify send`) posts `{to | team, title, text,
links, key}`; the message is routed through the directory like a summary (a person on their own
channels, e-mail only outside the directory; a team's Slack channel, else its leads) and enqueued
in the outbox, where the dispatcher sends it rendered and escaped like everything else. Exactly
once per `key`: the event and its outbox rows are written in one transaction under a unique key,
and the same key again writes nothing and answers with the first event (`duplicate: true`), so a
retried task cannot send twice. Without a key, every post is a new message.

Everything in the body is the poster's word: the recipient must be exactly one plain address (the
one-address rule of domain.addresses), link URLs plain web URLs (domain.links), and the texts are
escaped per channel when rendered.
"""

from __future__ import annotations

import secrets

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from inno_notify.api import keys
from inno_notify.api.auth import PRINCIPAL
from inno_notify.api.errors import ApiError, bad_request
from inno_notify.api.views.respond import json
from inno_notify.domain.addresses import is_single_address
from inno_notify.domain.links import LINKS_MAX, TITLE_MAX_CHARS, URL_MAX_CHARS, link
from inno_notify.domain.messages import MESSAGE_KEY, PipelineMessage, encode_pipeline
from inno_notify.domain.model import Link
from inno_notify.domain.routing import plan_event

MAX_BODY = 64 * 1024
TEXT_MAX_CHARS = 4000
KEY_PATTERN = r"^[A-Za-z0-9._:/+@=-]{1,200}$"
SAFE_TEXT = r"^[^\x00]*$"
TEAM_PATTERN = r"^[^\x00]{1,253}$"
URL_PATTERN = r"^https?://[!#$%&()*+,\-./0-9:;=?@A-Z\[\]_a-z~]+$"
EMAIL_PATTERN = r"^[^@/\x00\x09-\x0d\x20]{1,64}@[^@/\x00\x09-\x0d\x20]{1,189}$"


class LinkBody(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    title: str = Field(min_length=1, max_length=TITLE_MAX_CHARS, pattern=SAFE_TEXT)
    url: str = Field(max_length=URL_MAX_CHARS, pattern=URL_PATTERN)


class EventBody(BaseModel):
    """The body of POST /api/v1/events: exactly one of `to` and `team`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    to: str | None = Field(None, max_length=254, pattern=EMAIL_PATTERN)
    team: str | None = Field(None, pattern=TEAM_PATTERN)
    title: str = Field(min_length=1, max_length=TITLE_MAX_CHARS, pattern=SAFE_TEXT)
    text: str | None = Field(None, max_length=TEXT_MAX_CHARS, pattern=SAFE_TEXT)
    links: tuple[LinkBody, ...] = Field((), max_length=LINKS_MAX)
    key: str | None = Field(None, pattern=KEY_PATTERN)

    @model_validator(mode="after")
    def _one_recipient(self) -> EventBody:
        if (self.to is None) == (self.team is None):
            raise ValueError("give exactly one of to and team")
        return self


def _body(raw: bytes) -> EventBody:
    try:
        return EventBody.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise bad_request(f"{where}: {first['msg']}", code="invalid_body") from None


def _links(body: EventBody) -> tuple[Link, ...]:
    links = []
    for index, item in enumerate(body.links):
        made = link(item.title, item.url)
        if made is None:
            raise bad_request(f"links.{index}.url: not a plain http(s) URL with a host", code="invalid_body")
        links.append(made)
    return tuple(links)


def _answer(
    event_id: int, key: str, recipients: tuple[tuple[str, str], ...], duplicate: bool
) -> web.Response:
    return json(
        {
            "id": event_id,
            "key": key,
            "recipients": [{"recipient": r, "channel": c} for r, c in recipients],
            "duplicate": duplicate,
        },
        status=202,
    )


async def post_event(request: web.Request) -> web.Response:
    """Routes and enqueues a pipeline's message, once per key: 202 {id, key, recipients, duplicate}."""
    if request.query:
        raise bad_request(f"unknown query parameter {sorted(request.query)[0]!r}; allowed: none")
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ApiError(413, "payload_too_large", f"body over {MAX_BODY} bytes")
    raw = await request.content.read(MAX_BODY + 1)
    if len(raw) > MAX_BODY:
        raise ApiError(413, "payload_too_large", f"body over {MAX_BODY} bytes")
    body = _body(raw)
    if body.to is not None and not is_single_address(body.to):
        raise bad_request("to: not exactly one plain e-mail address", code="invalid_body")
    links = _links(body)
    store = request.app[keys.STORE]
    key = body.key or f"anonymous-{secrets.token_hex(16)}"
    principal = request[PRINCIPAL]
    now = request.app[keys.CLOCK]()
    earlier = await store.get_event(key) if body.key is not None else None
    if earlier is not None:
        return _answer(earlier.id, key, earlier.recipients, True)
    routing = request.app[keys.EVENT_ROUTING]
    users = {u.email.lower(): u for u in await store.list_users()}
    teams = {t.name: t for t in await store.list_teams()}
    message = PipelineMessage(
        key=key, title=body.title, text=body.text, links=links, sender=principal.name, created_at=now
    )
    plan = plan_event(
        body.to,
        body.team,
        f"event/{key}",
        {MESSAGE_KEY: encode_pipeline(message)},
        users,
        teams,
        routing.channels,
        now,
        routing.allowed_email_domains,
    )
    if not plan.notifications:
        reasons = [plan.silent_reason] if plan.silent_reason else []
        reasons += [f"{s.channel} for {s.recipient}: {s.reason}" for s in plan.skipped]
        raise ApiError(422, "no_recipients", "nobody to send to: " + "; ".join(reasons or ["no channel"]))
    event = await store.record_event(key, principal.name, body.title, plan.notifications, now)
    return _answer(event.id, key, event.recipients, not event.created)


__all__ = ["KEY_PATTERN", "EventBody", "post_event"]
