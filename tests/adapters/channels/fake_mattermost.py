"""A local Mattermost REST API v4 for tests: answers like a Mattermost server and records what it got.

`Authorization: Bearer <token>` on every call (401 with Mattermost's error body otherwise);
`GET /api/v4/users/me`, `GET /api/v4/users/email/{email}` (404 for nobody), `GET /api/v4/users/{id}`
(the account with its e-mail; 400 for an id of the wrong shape, 404 for nobody),
`POST /api/v4/channels/direct` with two user ids (the same channel for the same pair),
`POST /api/v4/posts {channel_id, message}` (201 with the post). `scripted` answers (a 429 with
`X-Ratelimit-*` headers, a 5xx) are given first, one per call, and take nothing.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

BOT_ID = "botuserid0000000000000000a"


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: Any


def error(status: int, error_id: str, message: str) -> web.Response:
    """Mattermost's error body (model.AppError)."""
    return web.json_response(
        {"id": error_id, "message": message, "detailed_error": "", "request_id": "r1", "status_code": status},
        status=status,
    )


def rate_limited(reset_seconds: int) -> tuple[int, dict[str, str]]:
    """What Mattermost's rate limiter answers (app/ratelimit.go): 429 with its three headers."""
    return 429, {
        "X-Ratelimit-Limit": "10",
        "X-Ratelimit-Remaining": "0",
        "X-Ratelimit-Reset": str(reset_seconds),
    }


@dataclass
class FakeMattermost:
    token: str
    # e-mail -> user id
    users: dict[str, str] = field(default_factory=dict)
    scripted: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    # user ids whose e-mail the server hides from the bot (privacy: ShowEmailAddress off), and
    # deactivated accounts
    hidden_emails: set[str] = field(default_factory=set)
    deactivated: set[str] = field(default_factory=set)
    # channel id -> messages posted there
    posts: dict[str, list[str]] = field(default_factory=dict)
    _direct: dict[frozenset[str], str] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/api/v4/users/me", self._me)
        app.router.add_get("/api/v4/users/email/{email}", self._by_email)
        app.router.add_get("/api/v4/users/{user_id}", self._by_id)
        app.router.add_post("/api/v4/channels/direct", self._direct_channel)
        app.router.add_post("/api/v4/posts", self._post)
        return app

    @web.middleware
    async def _auth(self, request: web.Request, handler: Any) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        self.calls.append(Call(request.method, request.path, body))
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return error(
                401,
                "api.context.session_expired.app_error",
                "Invalid or expired session, please login again.",
            )
        if self.scripted:
            status, headers = self.scripted.pop(0)
            return web.json_response(
                {"id": "scripted", "status_code": status}, status=status, headers=headers
            )
        response: web.StreamResponse = await handler(request)
        return response

    async def _me(self, request: web.Request) -> web.Response:
        return web.json_response({"id": BOT_ID, "username": "inno-notify", "is_bot": True})

    async def _by_email(self, request: web.Request) -> web.Response:
        user = self.users.get(request.match_info["email"].lower())
        if user is None:
            return error(404, "app.user.missing_account.const", "Unable to find the user.")
        return web.json_response({"id": user, "email": request.match_info["email"], "username": user})

    async def _by_id(self, request: web.Request) -> web.Response:
        user_id = request.match_info["user_id"]
        if len(user_id) != 26 or not user_id.isalnum():
            return error(
                400, "api.context.invalid_url_param.app_error", "Invalid or missing user_id in request URL."
            )
        email = next((e for e, i in self.users.items() if i == user_id), None)
        if email is None:
            return error(404, "app.user.missing_account.const", "Unable to find the user.")
        return web.json_response(
            {
                "id": user_id,
                "username": email.split("@")[0],
                "email": "" if user_id in self.hidden_emails else email,
                "delete_at": 1764590400000 if user_id in self.deactivated else 0,
                "roles": "system_user",
            }
        )

    async def _direct_channel(self, request: web.Request) -> web.Response:
        ids = await request.json()
        if not isinstance(ids, list) or len(ids) != 2 or not set(ids) <= {BOT_ID, *self.users.values()}:
            return error(
                400,
                "api.context.invalid_body_param.app_error",
                "Invalid or missing user_ids in request body.",
            )
        pair = frozenset(ids)
        channel = self._direct.setdefault(pair, f"dm{next(self._ids):024d}")
        return web.json_response({"id": channel, "type": "D", "name": "__".join(sorted(ids))}, status=201)

    async def _post(self, request: web.Request) -> web.Response:
        body = await request.json()
        channel = body.get("channel_id")
        if channel not in self._direct.values():
            return error(
                403, "api.context.permissions.app_error", "You do not have the appropriate permissions."
            )
        self.posts.setdefault(channel, []).append(body["message"])
        return web.json_response(
            {"id": f"post{next(self._ids):022d}", "channel_id": channel, "message": body["message"]},
            status=201,
        )

    def calls_to(self, path_prefix: str) -> list[Call]:
        return [c for c in self.calls if c.path.startswith(path_prefix)]


@contextlib.asynccontextmanager
async def serving(fake: FakeMattermost) -> AsyncIterator[str]:
    """The running fake and the server URL (what `channels.mattermost.url` holds), until the block
    ends."""
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("")).rstrip("/")
    finally:
        await server.close()
