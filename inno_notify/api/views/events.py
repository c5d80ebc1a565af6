"""Pipeline messages: POST /api/v1/events (roles admin and pipeline).

A script in an Airflow task or an Argo step (`inno-notify send`) posts `{to | team, title, text,
links, key}`; the message is routed through the directory like a summary (a person on their own
channels, e-mail only outside the directory; a team's Slack channel, else its leads) and enqueued
in the outbox, where the dispatcher sends it rendered and escaped like everything else. Exactly
once per `key`: the event and its outbox rows are written in one transaction under a unique key,
and the same key again writes nothing and answers with the first event (`duplicate: true`), so a
retried task cannot send twice. Without a key, every post is a new message.

Everything in the body is the poster's word: its shape is resources.EventBody (400 `invalid_body`
from params.py), the recipient must be exactly one plain address (the one-address rule of
domain.addresses), link URLs plain web URLs with a host (domain.links), and the texts are escaped
per channel when rendered.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated

from aiohttp import web

from inno_notify.api import keys, serialize
from inno_notify.api.auth import PRINCIPAL
from inno_notify.api.errors import ApiError, bad_request
from inno_notify.api.params import Body
from inno_notify.api.resources import EventBody
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


async def post_event(request: web.Request, given: EventPost) -> web.Response:
    """Routes and enqueues a pipeline's message, once per key: 202 {id, key, recipients, duplicate}."""
    body = given.body
    if body.to is not None and not is_single_address(body.to):
        raise bad_request("to: not exactly one plain e-mail address", code="invalid_body")
    links = _links(body)
    store = request.app[keys.STORE]
    key = body.key or f"anonymous-{secrets.token_hex(16)}"
    principal = request[PRINCIPAL]
    now = request.app[keys.CLOCK]()
    earlier = await store.workflows.get_event(key) if body.key is not None else None
    if earlier is not None:
        return json(serialize.event_receipt(earlier, duplicate=True), status=202)
    routing = request.app[keys.EVENT_ROUTING]
    users = {u.email.lower(): u for u in await store.directory.list_users()}
    teams = {t.name: t for t in await store.directory.list_teams()}
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
    event = await store.workflows.record_event(key, principal.name, body.title, plan.notifications, now)
    return json(serialize.event_receipt(event, duplicate=not event.created), status=202)
