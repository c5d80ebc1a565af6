"""The directory: GET /api/v1/users, GET/PUT/DELETE /api/v1/users/{email} (writes: admin)."""

from __future__ import annotations

import bisect
import re
from typing import Literal

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inno_notify.adapters.db.sql import decode_cursor, encode_cursor
from inno_notify.api import keys, params, serialize
from inno_notify.api.errors import ApiError, bad_request, not_found
from inno_notify.api.views.respond import json
from inno_notify.domain.model import DirectoryUser

# Deliberately loose (one @, no spaces): the directory matches what owners write in annotations.
# ASCII whitespace spelled out: Python's \s also matches Unicode spaces, the schema's (ECMA) \s fewer.
EMAIL = re.compile(r"[^@/\x00\x09-\x0d\x20]{1,64}@[^@/\x00\x09-\x0d\x20]{1,189}")
SAFE_TEXT = r"^[^\x00]*$"
MAX_BODY = 64 * 1024


class UserBody(BaseModel):
    """The body of PUT /api/v1/users/{email}; `email`, if given, must match the path."""

    model_config = ConfigDict(extra="forbid", strict=True)

    email: str | None = Field(None, pattern=f"^{EMAIL.pattern}$")
    name: str | None = Field(None, max_length=200, pattern=SAFE_TEXT)
    slack_user_id: str | None = Field(None, max_length=64, pattern=SAFE_TEXT)
    telegram_chat_id: int | None = Field(None, ge=-(2**63), le=2**63 - 1)
    channels: tuple[Literal["telegram", "slack", "email"], ...] = ("email",)


def _email(request: web.Request) -> str:
    email = request.match_info["email"]
    if not EMAIL.fullmatch(email):
        raise bad_request(f"not an e-mail address: {email!r}", code="invalid_email")
    return email


async def list_users(request: web.Request) -> web.Response:
    query = request.query
    params.check_known(query, ("limit", "cursor"))
    limit = params.limit(query)
    cursor = params.cursor(query)
    # The directory is small (people, not jobs): page over the sorted list in memory.
    users = await request.app[keys.STORE].list_users()
    start = 0
    if cursor is not None:
        (after,) = decode_cursor(cursor, (str,))
        start = bisect.bisect_right([u.email for u in users], after)
    page = users[start : start + limit]
    more = start + limit < len(users)
    next_cursor = encode_cursor([page[-1].email]) if more and page else None
    return json({"items": [serialize.user(u) for u in page], "next_cursor": next_cursor})


async def get_user(request: web.Request) -> web.Response:
    params.check_known(request.query, ())
    email = _email(request)
    user = await request.app[keys.STORE].get_user(email)
    if user is None:
        raise not_found(f"no user {email}", code="user_not_found")
    return json(serialize.user(user))


async def put_user(request: web.Request) -> web.Response:
    """Creates (201) or replaces (200) a user."""
    params.check_known(request.query, ())
    email = _email(request)
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise ApiError(413, "payload_too_large", f"body over {MAX_BODY} bytes")
    raw = await request.read()
    try:
        body = UserBody.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise bad_request(f"{where}: {first['msg']}", code="invalid_body") from None
    if body.email is not None and body.email != email:
        raise bad_request("email in the body differs from the one in the path", code="invalid_body")
    user = DirectoryUser(
        email=email,
        name=body.name,
        slack_user_id=body.slack_user_id,
        telegram_chat_id=body.telegram_chat_id,
        channels=tuple(dict.fromkeys(body.channels)),
    )
    store = request.app[keys.STORE]
    existed = await store.get_user(email) is not None
    await store.upsert_user(user)
    return json(serialize.user(user), status=200 if existed else 201)


async def delete_user(request: web.Request) -> web.Response:
    params.check_known(request.query, ())
    email = _email(request)
    if not await request.app[keys.STORE].delete_user(email):
        raise not_found(f"no user {email}", code="user_not_found")
    return web.Response(status=204)
