"""The delivery log (GET /api/v1/notifications) and an admin's retry of a failed send."""

from __future__ import annotations

import re

from aiohttp import web

from inno_notify.api import keys, params, serialize
from inno_notify.api.errors import ApiError, bad_request, not_found
from inno_notify.api.views.respond import json
from inno_notify.domain.model import DeliveryStatus

PARAMS = ("status", "limit", "cursor")
MAX_ID = 2**63 - 1


async def list_notifications(request: web.Request) -> web.Response:
    query = request.query
    params.check_known(query, PARAMS)
    page, next_cursor = await request.app[keys.STORE].list_notifications(
        params.choice(query, "status", DeliveryStatus), params.limit(query), params.cursor(query)
    )
    return json({"items": [serialize.notification(n) for n in page], "next_cursor": next_cursor})


async def retry_notification(request: web.Request) -> web.Response:
    """Re-queues a failed notification, due now; the dispatcher sends it (the API never sends)."""
    params.check_known(request.query, ())
    raw = request.match_info["id"]
    if not re.fullmatch(r"[0-9]{1,19}", raw) or not 1 <= int(raw) <= MAX_ID:
        raise bad_request(f"notification id must be a positive integer; got {raw!r}")
    store = request.app[keys.STORE]
    ident = int(raw)
    if not await store.retry_notification(ident, request.app[keys.CLOCK]()):
        current = await store.get_notification(ident)
        if current is None:
            raise not_found(f"no notification {ident}", code="notification_not_found")
        raise ApiError(
            409, "not_failed", f"notification {ident} is {current.status.value}; only failed ones are retried"
        )
    retried = await store.get_notification(ident)
    if retried is None:  # deleted between the two statements
        raise not_found(f"no notification {ident}", code="notification_not_found")
    return json(serialize.notification(retried))
