"""The directory: GET /api/v1/users, GET/PUT/DELETE /api/v1/users/{email} (writes: admin).

A user is shown as routing sees them, their own preferences (domain.preferences: set from their
Telegram chat, or here) applied, with each preference's value and where it came from. PUT replaces
the directory entry; its optional `preferences` object sets the preferences it names (recorded as
changed through the API by the token's name) and, for a name given null, drops that preference so
that the directory's value stands again. Preferences it does not name are kept.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Annotated

from aiohttp import web

from inno_notify.adapters.db.sql import decode_cursor, encode_cursor
from inno_notify.api import keys, resources, serialize
from inno_notify.api.auth import PRINCIPAL
from inno_notify.api.errors import bad_request, not_found
from inno_notify.api.params import DEFAULT_LIMIT, Body, Cursor, Email, Limit
from inno_notify.api.resources import PreferencesBody, UserBody
from inno_notify.api.views.respond import json
from inno_notify.domain.chat_commands import MAX_MUTE_HOURS
from inno_notify.domain.model import DirectoryUser, NotifyMode
from inno_notify.domain.preferences import Origin, Via


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
    store = request.app[keys.STORE]
    users = await store.directory.list_users()
    start = 0
    if given.cursor is not None:
        (after,) = decode_cursor(given.cursor, (str,))
        start = bisect.bisect_right([u.email for u in users], after)
    page = users[start : start + given.limit]
    more = start + given.limit < len(users)
    next_cursor = encode_cursor([page[-1].email]) if more and page else None
    prefs = await store.directory.all_preferences() if page else {}
    items = [serialize.user(u, prefs.get(u.email)) for u in page]
    return json(resources.UserPage(items=items, next_cursor=next_cursor))


async def get_user(request: web.Request, given: UserAddress) -> web.Response:
    store = request.app[keys.STORE]
    user = await store.directory.get_user(given.email)
    if user is None:
        raise not_found(f"no user {given.email}", code="user_not_found")
    return json(serialize.user(user, await store.directory.get_preferences(user.email)))


async def put_user(request: web.Request, given: UserWrite) -> web.Response:
    """Creates (201) or replaces (200) a user, and changes the preferences the body names."""
    body, email = given.body, given.email
    if body.email is not None and body.email != email:
        raise bad_request("email in the body differs from the one in the path", code="invalid_body")
    now = request.app[keys.CLOCK]()
    wanted = body.preferences
    until = wanted.muted_until if wanted is not None else None
    if until is not None and until > now + timedelta(hours=MAX_MUTE_HOURS):
        raise bad_request(
            f"preferences.muted_until: at most {MAX_MUTE_HOURS:g} hours ahead", code="invalid_body"
        )
    user = DirectoryUser(
        email=email,
        name=body.name,
        slack_user_id=body.slack_user_id,
        telegram_chat_id=body.telegram_chat_id,
        channels=tuple(dict.fromkeys(c.value for c in body.channels)),
    )
    store = request.app[keys.STORE]
    existed = await store.directory.get_user(email) is not None
    await store.directory.upsert_user(user)
    if wanted is not None:
        await _change_preferences(request, email, wanted, now)
    shown = await store.directory.get_user(email)
    assert shown is not None  # just written
    return json(
        serialize.user(shown, await store.directory.get_preferences(email)), status=200 if existed else 201
    )


async def _change_preferences(
    request: web.Request, email: str, wanted: PreferencesBody, now: datetime
) -> None:
    given = wanted.model_fields_set
    changes = {name: getattr(wanted, name) for name in given if getattr(wanted, name) is not None}
    if "notify" in changes:
        changes["notify"] = NotifyMode(changes["notify"])
    if "channels" in changes:
        changes["channels"] = tuple(c.value for c in changes["channels"])
    reset = tuple(sorted(name for name in given if getattr(wanted, name) is None))
    origin = Origin(Via.API, now, request[PRINCIPAL].name)
    await request.app[keys.STORE].directory.change_preferences(
        email, now, changes=changes, origin=origin, reset=reset
    )


async def delete_user(request: web.Request, given: UserAddress) -> web.Response:
    if not await request.app[keys.STORE].directory.delete_user(given.email):
        raise not_found(f"no user {given.email}", code="user_not_found")
    return web.Response(status=204)
