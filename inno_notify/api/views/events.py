"""Pipeline messages: POST /api/v1/events (roles admin and pipeline).

A script in an Airflow task or an Argo step (`inno-notify send`) posts `{to | team, title, text,
links, key}`; the message is routed through the directory like a summary (a person on their own
channels, e-mail only outside the directory; a team's Slack channel, else its leads) and enqueued
in the outbox, where the dispatcher sends it rendered and escaped like everything else, grouped
like job summaries: events to one recipient within `notify.group_wait_seconds` are one message.

A pipeline token is the most exposed credential there is (it sits in CI systems and DAG
definitions), so what it can do with this endpoint is bounded (issue 29, docs/hardening.md):
- its scope (`api.tokens[].teams` / `recipients`), when it has one: 403 `out_of_scope` outside it;
- `api.events` limits, counted in the store over all replicas: events accepted per token per
  minute, events per resolved recipient per hour; over one, 429 `rate_limited` with Retry-After,
  and nothing is queued. What this replica already knows the store would refuse it refuses
  without the database (api/throttle.py), and at most app.EVENT_WRITERS_LIMIT posts go past that
  at once, so that a flood of posts never takes every pooled connection from other requests;
- keys are the token's own: the event and its outbox rows are written in one transaction under a
  unique (token name, key), so the same token and key again writes nothing and answers with the
  first event (`duplicate: true`), a retried task cannot send twice, the same key with another
  body is 409 `key_reused`, and another token's key is another key (it can neither read another
  pipeline's receipt nor suppress its message). Without a key, every post is a new message.

Everything in the body is the poster's word: its shape is resources.EventBody (400 `invalid_body`
from params.py), the recipient must be exactly one plain address (the one-address rule of
domain.addresses), link URLs plain web URLs with a host (domain.links), and the texts are escaped
per channel when rendered.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated
from urllib.parse import quote

import orjson
from aiohttp import web

from inno_notify.adapters.db.pipeline_events import (
    EventLimited,
    EventLimits,
    EventRecord,
    KeyReused,
    limited,
)
from inno_notify.api import keys, serialize
from inno_notify.api.auth import PRINCIPAL
from inno_notify.api.errors import ApiError, bad_request
from inno_notify.api.params import Body
from inno_notify.api.resources import EventBody
from inno_notify.api.throttle import RecentAccepts
from inno_notify.api.views.respond import json
from inno_notify.domain.addresses import is_single_address
from inno_notify.domain.links import link
from inno_notify.domain.messages import MESSAGE_KEY, PipelineMessage, encode_pipeline
from inno_notify.domain.model import Link
from inno_notify.domain.routing import plan_event


@dataclass(frozen=True, slots=True)
class EventPost:
    body: Annotated[EventBody, Body()]


def _links(body: EventBody) -> tuple[Link, ...]:
    links = []
    for index, item in enumerate(body.links):
        made = link(item.title, item.url)
        if made is None:
            raise bad_request(f"links.{index}.url: not a plain http(s) URL with a host", code="invalid_body")
        links.append(made)
    return tuple(links)


def _fingerprint(body: EventBody, links: tuple[Link, ...]) -> str:
    """What tells two posts of one key apart: a hash of everything the message says."""
    said = {
        "to": None if body.to is None else body.to.strip().lower(),
        "team": body.team,
        "title": body.title,
        "text": body.text,
        "links": [[item.title, item.url] for item in links],
    }
    return hashlib.sha256(orjson.dumps(said, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _span(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    return "hour" if seconds == 3600 else "minute" if seconds == 60 else f"{seconds} s"


def _limited(limited: EventLimited) -> ApiError:
    if limited.limit == "token":
        what = f"token {limited.subject} has had {limited.count} events accepted"
        setting = "api.events.per_token_per_minute"
    else:
        what = f"{limited.subject} has been sent {limited.count} events"
        setting = "api.events.per_recipient_per_hour"
    return ApiError(
        429,
        "rate_limited",
        f"{what} in the last {_span(limited.window)} (limit {setting}: {limited.allowed}); nothing was "
        f"queued; try again in {limited.retry_after} s",
        {"Retry-After": str(limited.retry_after)},
    )


def _answer(earlier: EventRecord | KeyReused) -> web.Response:
    if isinstance(earlier, KeyReused):
        raise ApiError(
            409,
            "key_reused",
            f"this token posted key {earlier.earlier.key!r} before with another message (event "
            f"{earlier.earlier.id}); nothing was sent: use a new key for a new message",
        )
    return json(serialize.event_receipt(earlier, duplicate=True), status=202)


def _held(recent: RecentAccepts, name: str, to: str | None, now: datetime, limits: EventLimits) -> None:
    """Refuses at once (429) what this replica knows the store would refuse (api/throttle.py): the
    token over its limit, or the one recipient a `to` routes to (always that address, lower-case)."""
    oldest = recent.oldest(name, now, limits.per_token, limits.per_token_window)
    if oldest is not None:
        allowed, window = limits.per_token, limits.per_token_window
        raise _limited(limited("token", name, allowed, allowed, window, oldest, now))
    held = recent.held("token", name, now)
    if held is None and to is not None:
        held = recent.held("recipient", to.strip().lower(), now)
    if held is not None:
        raise _limited(held)


async def post_event(request: web.Request, given: EventPost) -> web.Response:
    """Routes and enqueues a pipeline's message, once per token and key, within the token's scope
    and the limits: 202 {id, key, recipients, duplicate}."""
    body = given.body
    if body.to is not None and not is_single_address(body.to):
        raise bad_request("to: not exactly one plain e-mail address", code="invalid_body")
    links = _links(body)
    principal = request[PRINCIPAL]
    refusal = principal.refuses(body.to, body.team)
    if refusal is not None:
        raise ApiError(403, "out_of_scope", refusal)
    app = request.app
    store = app[keys.STORE]
    limits = app[keys.EVENT_LIMITS]
    recent = app[keys.RECENT_EVENTS]
    clock = app[keys.CLOCK]
    fingerprint = _fingerprint(body, links)
    if body.key is None:
        # A keyless post is a new message: over a limit this replica knows of, refused before it
        # waits for a writer's place or reads anything (a keyed one may be a retry, answered first).
        _held(recent, principal.name, body.to, clock(), limits)
    async with app[keys.EVENT_WRITERS]:
        now = clock()
        if body.key is not None:
            earlier = await store.events.get_event(principal.name, body.key, fingerprint)
            if earlier is not None:
                return _answer(earlier)
        _held(recent, principal.name, body.to, now, limits)
        key = body.key or f"anonymous-{secrets.token_hex(16)}"
        routing = app[keys.EVENT_ROUTING]
        directory = await app[keys.DIRECTORY].current()
        message = PipelineMessage(
            key=key, title=body.title, text=body.text, links=links, sender=principal.name, created_at=now
        )
        plan = plan_event(
            body.to,
            body.team,
            # The token's name is part of the outbox key, as it is of the event's (quoted: no "/").
            f"event/{quote(principal.name, safe='')}/{key}",
            {MESSAGE_KEY: encode_pipeline(message)},
            directory,
            routing.channels,
            now,
            routing.allowed_email_domains,
            group_wait_seconds=routing.group_wait_seconds,
        )
        if not plan.notifications:
            reasons = [plan.silent_reason] if plan.silent_reason else []
            reasons += [f"{s.channel} for {s.recipient}: {s.reason}" for s in plan.skipped]
            raise ApiError(422, "no_recipients", "nobody to send to: " + "; ".join(reasons or ["no channel"]))
        for recipient in sorted({n.recipient.strip().lower() for n in plan.notifications}):
            held = recent.held("recipient", recipient, now)
            if held is not None:
                raise _limited(held)
        outcome = await store.events.record_event(
            principal.name,
            key,
            fingerprint,
            body.title,
            plan.notifications,
            now,
            limits,
            fresh_key=body.key is None,
        )
    if isinstance(outcome, EventLimited):
        recent.hold(outcome)
        raise _limited(outcome)
    if isinstance(outcome, KeyReused) or not outcome.created:
        return _answer(outcome)
    recent.add(principal.name, now, limits.per_token)
    return json(serialize.event_receipt(outcome, duplicate=False), status=202)
