"""A local Slack Web API server for tests: answers like slack.com/api and records what it got.

Methods are `POST|GET /api/{method}` with the bot token as `Authorization: Bearer`; answers are
HTTP 200 with `{"ok": false, "error": "..."}` for API errors, and HTTP 429 with a `Retry-After`
header when rate limited, as the real Web API does. The real slack-sdk client is pointed at it.

Socket Mode as Slack speaks it: `apps.connections.open` with the app-level token (`app_token`)
hands out a `ws://` URL of this server; a client that connects gets `{"type": "hello"}`, then the
envelopes a test sends (`send_envelope`: `{"type", "envelope_id", "payload",
"accepts_response_payload"}`); what the client sends back with an `envelope_id` is an ack
(`acks`, and `wait_ack`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer


@dataclass(frozen=True)
class Scripted:
    status: int
    body: Mapping[str, Any] | str
    headers: Mapping[str, str] = field(default_factory=dict)


def api_error(error: str, status: int = 200) -> Scripted:
    """The Web API's answer to a call that failed: `{"ok": false, "error": error}`."""
    return Scripted(status, {"ok": False, "error": error})


def rate_limited(retry_after: int) -> Scripted:
    return Scripted(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": str(retry_after)})


@dataclass
class Call:
    method: str
    token: str | None
    params: dict[str, Any]


@dataclass
class FakeSlack:
    token: str
    # e-mail -> user id, what users.lookupByEmail knows.
    users: dict[str, str] = field(default_factory=dict)
    channels: set[str] = field(default_factory=set)
    scripted: list[Scripted] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    # file id -> the bytes uploaded (files_upload_v2); the base URL is set by `start`.
    uploads: dict[str, bytes] = field(default_factory=dict)
    base_url: str = ""
    # Calls answered from `scripted` (a 429, a 5xx): the Web API took nothing from them.
    refused: list[Call] = field(default_factory=list)
    # conversation id -> the messages posted into it, oldest first (what conversations.history reads).
    history: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    # The seconds of every post's ts: a fixed instant, not the wall clock, so that ids are the same in
    # every run (2026-11-29; a test whose clock is later sets its own, for conversations.history).
    ts_base: int = 1796000000
    # Posts stamped with this clock instead (seconds), as the real Slack stamps them: for processes
    # that ask for history since their rows' wall-clock creation (bench/soak.py).
    clock: Callable[[], float] | None = None
    _last_ts: float = 0.0
    # ("{conversation}:{ts}" as the sender records it, channel as requested, wall-clock time) of
    # every post accepted.
    accepted: list[tuple[str, str, float]] = field(default_factory=list)
    _ts: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    # Socket Mode: the app-level token apps.connections.open takes, the open sockets, the acks.
    app_token: str | None = None
    sockets: list[web.WebSocketResponse] = field(default_factory=list)
    acks: dict[str, dict[str, Any]] = field(default_factory=dict)
    _acked: dict[str, asyncio.Event] = field(default_factory=dict)
    _connected: asyncio.Event = field(default_factory=asyncio.Event)
    # user id -> the last view views.publish showed them (their App Home tab).
    homes: dict[str, dict[str, Any]] = field(default_factory=dict)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/socket", self._socket)
        app.router.add_route("*", "/api/{method}", self._handle)
        app.router.add_post("/upload/{file_id}", self._upload)
        return app

    async def _upload(self, request: web.Request) -> web.Response:
        """Step 2 of files_upload_v2: the bytes, POSTed to the URL step 1 handed out."""
        self.uploads[request.match_info["file_id"]] = await request.read()
        return web.Response(text="OK - " + str(len(self.uploads[request.match_info["file_id"]])))

    def posted(self) -> list[tuple[str, Mapping[str, Any]]]:
        """(channel as requested, the whole chat.postMessage payload) for every post."""
        return [(str(c.params["channel"]), c.params) for c in self.calls if c.method == "chat.postMessage"]

    def accepted_posts(self) -> list[tuple[str, Mapping[str, Any]]]:
        """`posted`, less the posts answered from `scripted` (nothing was posted for those)."""
        refused = {id(c) for c in self.refused}
        return [
            (str(c.params["channel"]), c.params)
            for c in self.calls
            if c.method == "chat.postMessage" and id(c) not in refused
        ]

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self.sockets.append(ws)
        await ws.send_json({"type": "hello", "num_connections": 1, "debug_info": {"host": "fake"}})
        self._connected.set()
        async for message in ws:
            if message.type is not web.WSMsgType.TEXT:
                continue
            data = json.loads(message.data)
            envelope = data.get("envelope_id") if isinstance(data, dict) else None
            if isinstance(envelope, str):
                self.acks[envelope] = data
                self._acked.setdefault(envelope, asyncio.Event()).set()
        self.sockets.remove(ws)
        return ws

    async def wait_connected(self) -> None:
        # A whole service may be starting (migrations, the first term): a generous bound.
        await asyncio.wait_for(self._connected.wait(), 30)

    async def send_envelope(self, kind: str, payload: Mapping[str, Any]) -> str:
        """Sends one envelope to the connected client; its envelope_id."""
        await self.wait_connected()
        envelope = str(uuid.uuid4())
        self._acked.setdefault(envelope, asyncio.Event())
        body = {
            "type": kind,
            "envelope_id": envelope,
            "payload": dict(payload),
            "accepts_response_payload": kind != "events_api",
        }
        await self.sockets[-1].send_json(body)
        return envelope

    async def wait_ack(self, envelope: str) -> dict[str, Any]:
        await asyncio.wait_for(self._acked.setdefault(envelope, asyncio.Event()).wait(), 10)
        return self.acks[envelope]

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def _handle(self, request: web.Request) -> web.Response:
        params: dict[str, Any] = dict(request.query)
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            params.update({k: v for k, v in (await request.post()).items() if isinstance(v, str)})
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        call = Call(request.match_info["method"], token, params)
        self.calls.append(call)
        if self.scripted:
            answer = self.scripted.pop(0)
            self.refused.append(call)
            if isinstance(answer.body, str):
                return web.Response(
                    status=answer.status, text=answer.body, headers=answer.headers, content_type="text/html"
                )
            return web.json_response(answer.body, status=answer.status, headers=answer.headers)
        if token is None:
            return _error("not_authed")
        if call.method == "apps.connections.open":
            if self.app_token is None or token != self.app_token:
                return _error("invalid_auth")
            ws_url = self.base_url.replace("http://", "ws://", 1) + "/socket"
            return web.json_response({"ok": True, "url": ws_url})
        if token != self.token:
            return _error("invalid_auth")
        handler = {
            "auth.test": self._auth_test,
            "users.lookupByEmail": self._lookup,
            "users.info": self._info,
            "views.publish": self._publish,
            "conversations.open": self._open,
            "chat.postMessage": self._post,
            "conversations.history": self._history,
            "files.getUploadURLExternal": self._upload_url,
            "files.completeUploadExternal": self._complete_upload,
        }.get(call.method)
        if handler is None:
            return _error("unknown_method")
        return handler(params)

    def _auth_test(self, params: Mapping[str, Any]) -> web.Response:
        return web.json_response({"ok": True, "team": "Research", "user": "inno-notify", "user_id": "UBOT"})

    def _lookup(self, params: Mapping[str, Any]) -> web.Response:
        user_id = self.users.get(str(params.get("email", "")).lower())
        if user_id is None:
            return _error("users_not_found")
        return web.json_response({"ok": True, "user": {"id": user_id, "profile": {"email": params["email"]}}})

    def _info(self, params: Mapping[str, Any]) -> web.Response:
        user_id = str(params.get("user", ""))
        emails = [email for email, known in self.users.items() if known == user_id]
        if not emails:
            return _error("user_not_found")
        profile = {"email": emails[0], "display_name": "someone"}
        return web.json_response({"ok": True, "user": {"id": user_id, "is_bot": False, "profile": profile}})

    def _publish(self, params: Mapping[str, Any]) -> web.Response:
        view = params.get("view")
        if isinstance(view, str):  # form-encoded calls carry it as a JSON string
            view = json.loads(view)
        user_id = str(params.get("user_id", ""))
        if not isinstance(view, dict) or view.get("type") != "home":
            return _error("invalid_arguments")
        if user_id not in self.users.values():
            return _error("user_not_found")
        self.homes[user_id] = view
        return web.json_response({"ok": True, "view": {"id": "V1", **view}})

    def _open(self, params: Mapping[str, Any]) -> web.Response:
        user = str(params.get("users", ""))
        if user not in self.users.values():
            return _error("user_not_found")
        return web.json_response({"ok": True, "channel": {"id": "D" + user[1:]}})

    def _post(self, params: Mapping[str, Any]) -> web.Response:
        channel = str(params.get("channel", ""))
        if channel in self.users.values():
            # A post to a user id lands in the app's DM with them, which has its own id.
            channel = "D" + channel[1:]
        elif channel not in self.channels:
            return _error("channel_not_found")
        if not params.get("text") and not params.get("blocks"):
            return _error("no_text")
        ts = self._next_ts()
        posted: dict[str, Any] = {"type": "message", "ts": ts, "text": params.get("text")}
        metadata = params.get("metadata")
        if isinstance(metadata, str):  # form-encoded calls carry it as a JSON string
            metadata = json.loads(metadata)
        if isinstance(metadata, dict):
            posted["metadata"] = metadata
        self.history.setdefault(channel, []).append(posted)
        self.accepted.append((f"{channel}:{ts}", str(params.get("channel", "")), time.time()))
        return web.json_response(
            {"ok": True, "channel": channel, "ts": ts, "message": {"text": params.get("text")}}
        )

    def _next_ts(self) -> str:
        if self.clock is None:
            return f"{self.ts_base}.{next(self._ts):06d}"
        self._last_ts = max(self.clock(), self._last_ts + 0.000001)
        return f"{self._last_ts:.6f}"

    def _history(self, params: Mapping[str, Any]) -> web.Response:
        """Newest first, `oldest` exclusive, `limit` a page, `cursor` an offset; `metadata` only with
        `include_all_metadata` (as the Web API answers)."""
        channel = str(params.get("channel", ""))
        if channel not in self.history and channel not in self.channels:
            return _error("channel_not_found")
        oldest = float(params.get("oldest") or 0)
        with_metadata = str(params.get("include_all_metadata", "")).lower() in {"1", "true"}
        found = [m for m in reversed(self.history.get(channel, [])) if float(m["ts"]) > oldest]
        start = int(params.get("cursor") or 0)
        limit = int(params.get("limit") or 100)
        page = found[start : start + limit]
        more = start + limit < len(found)
        messages = [m if with_metadata else {k: v for k, v in m.items() if k != "metadata"} for m in page]
        return web.json_response(
            {
                "ok": True,
                "messages": messages,
                "has_more": more,
                "response_metadata": {"next_cursor": str(start + limit) if more else ""},
            }
        )

    def _upload_url(self, params: Mapping[str, Any]) -> web.Response:
        file_id = f"F{next(self._ts):06d}"
        return web.json_response(
            {"ok": True, "upload_url": f"{self.base_url}/upload/{file_id}", "file_id": file_id}
        )

    def _complete_upload(self, params: Mapping[str, Any]) -> web.Response:
        files = params.get("files")
        if isinstance(files, str):  # form-encoded calls carry it as a JSON string
            files = json.loads(files)
        if not files or any(f.get("id") not in self.uploads for f in files):
            return _error("file_not_found")
        return web.json_response(
            {"ok": True, "files": [{"id": f["id"], "title": f.get("title")} for f in files]}
        )


def _error(error: str) -> web.Response:
    return web.json_response({"ok": False, "error": error})


async def start(fake: FakeSlack) -> TestServer:
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    fake.base_url = str(server.make_url("")).rstrip("/")
    return server
