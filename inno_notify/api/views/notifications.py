"""The delivery log (GET /api/v1/notifications) and an admin's retry of a failed send."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys, resources, serialize
from inno_notify.api.errors import ApiError, bad_request, not_found
from inno_notify.api.params import DEFAULT_LIMIT, Cursor, Limit, Parse
from inno_notify.api.views.respond import json
from inno_notify.domain.model import DeliveryStatus

MAX_ID = 2**63 - 1
_ID = re.compile(r"[0-9]{1,19}")


def _notification_id(value: str, name: str) -> int:
    if not _ID.fullmatch(value) or not 1 <= int(value) <= MAX_ID:
        raise bad_request(f"notification {name} must be a positive integer; got {value!r}")
    return int(value)


@dataclass(frozen=True, slots=True)
class LogFilters:
    status: Annotated[DeliveryStatus | None, Field(description="Delivery status.")] = None
    limit: Limit = DEFAULT_LIMIT
    cursor: Cursor | None = None


@dataclass(frozen=True, slots=True)
class NotificationId:
    id: Annotated[int, Field(ge=1, le=MAX_ID), Parse(_notification_id)]


async def list_notifications(request: web.Request, given: LogFilters) -> web.Response:
    page, next_cursor = await request.app[keys.STORE].outbox.list_notifications(
        given.status, given.limit, given.cursor
    )
    items = [serialize.notification(n) for n in page]
    return json(resources.NotificationPage(items=items, next_cursor=next_cursor))


async def retry_notification(request: web.Request, given: NotificationId) -> web.Response:
    """Re-queues a failed notification, due now; the dispatcher sends it (the API never sends)."""
    store = request.app[keys.STORE]
    ident = given.id
    if not await store.outbox.retry_notification(ident, request.app[keys.CLOCK]()):
        current = await store.outbox.get_notification(ident)
        if current is None:
            raise not_found(f"no notification {ident}", code="notification_not_found")
        raise ApiError(
            409, "not_failed", f"notification {ident} is {current.status.value}; only failed ones are retried"
        )
    retried = await store.outbox.get_notification(ident)
    if retried is None:  # deleted between the two statements
        raise not_found(f"no notification {ident}", code="notification_not_found")
    return json(serialize.notification(retried))
