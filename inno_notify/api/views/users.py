"""The directory: GET /api/v1/users, GET/PUT/DELETE /api/v1/users/{email} (writes: admin)."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Annotated

from aiohttp import web

from inno_notify.adapters.db.sql import decode_cursor, encode_cursor
from inno_notify.api import keys, resources, serialize
from inno_notify.api.errors import bad_request, not_found
from inno_notify.api.params import DEFAULT_LIMIT, Body, Cursor, Email, Limit
from inno_notify.api.resources import UserBody
from inno_notify.api.views.respond import json
from inno_notify.domain.model import DirectoryUser


@dataclass(frozen=True, slots=True)
class UserPageRequest:
    limit: Limit = DEFAULT_LIMIT
    cursor: Cursor | None = None


@dataclass(frozen=True, slots=True)
class UserAddress:
    email: Email


@dataclass(frozen=True, slots=True)
class UserWrite:
    email: Email
    body: Annotated[UserBody, Body()]


async def list_users(request: web.Request, given: UserPageRequest) -> web.Response:
    # The directory is small (people, not jobs): page over the sorted list in memory.
    users = await request.app[keys.STORE].list_users()
    start = 0
    if given.cursor is not None:
        (after,) = decode_cursor(given.cursor, (str,))
        start = bisect.bisect_right([u.email for u in users], after)
    page = users[start : start + given.limit]
    more = start + given.limit < len(users)
    next_cursor = encode_cursor([page[-1].email]) if more and page else None
    return json(resources.UserPage(items=[serialize.user(u) for u in page], next_cursor=next_cursor))


async def get_user(request: web.Request, given: UserAddress) -> web.Response:
    user = await request.app[keys.STORE].get_user(given.email)
    if user is None:
        raise not_found(f"no user {given.email}", code="user_not_found")
    return json(serialize.user(user))


async def put_user(request: web.Request, given: UserWrite) -> web.Response:
    """Creates (201) or replaces (200) a user."""
    body, email = given.body, given.email
    if body.email is not None and body.email != email:
        raise bad_request("email in the body differs from the one in the path", code="invalid_body")
    user = DirectoryUser(
        email=email,
        name=body.name,
        slack_user_id=body.slack_user_id,
        telegram_chat_id=body.telegram_chat_id,
        channels=tuple(dict.fromkeys(c.value for c in body.channels)),
    )
    store = request.app[keys.STORE]
    existed = await store.get_user(email) is not None
    await store.upsert_user(user)
    return json(serialize.user(user), status=200 if existed else 201)


async def delete_user(request: web.Request, given: UserAddress) -> web.Response:
    if not await request.app[keys.STORE].delete_user(given.email):
        raise not_found(f"no user {given.email}", code="user_not_found")
    return web.Response(status=204)
