"""A local Telegram Bot API server for tests: answers like api.telegram.org and records what it got.

It speaks the real wire format (`POST /bot{token}/{method}`, form or JSON parameters,
`{"ok": true, "result": ...}` or `{"ok": false, "error_code": ..., "description": ...}`), so the
real python-telegram-bot client is what the tests exercise.

Updates behave as the Bot API documents them: `user_says` makes the update a person's message
would (message, chat, from, date, text and its bot_command entity). Without a webhook it waits for
`getUpdates`, which returns the updates from `offset` on and confirms (forgets) those before it,
waiting up to `timeout` seconds when there are none (long polling); `getUpdates` while a webhook is
set is a 409 Conflict. With a webhook (`setWebhook`) the update is POSTed to its URL with the
secret in `X-Telegram-Bot-Api-Secret-Token`, and kept for a later try unless the answer is 2xx.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

# An answer to script: (HTTP status, JSON body or raw text).
Answer = tuple[int, Mapping[str, Any] | str]

CHAT_NOT_FOUND: Answer = (400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"})
BLOCKED: Answer = (
    403,
    {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"},
)
UNAUTHORIZED: Answer = (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})


def too_many_requests(retry_after: int) -> Answer:
    return (
        429,
        {
            "ok": False,
            "error_code": 429,
            "description": f"Too Many Requests: retry after {retry_after}",
            "parameters": {"retry_after": retry_after},
        },
    )


# nginx in front of the Bot API answers a 502 with an HTML page, not JSON.
BAD_GATEWAY_HTML = "<html><head><title>502 Bad Gateway</title></head><body>502 Bad Gateway</body></html>"
WEBHOOK_CONFLICT: Answer = (
    409,
    {
        "ok": False,
        "error_code": 409,
        "description": "Conflict: can't use getUpdates method while webhook is active; "
        "use deleteWebhook to delete the webhook first",
    },
)
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


@dataclass
class Call:
    token: str
    method: str
    params: dict[str, Any]
    # Multipart file parts (sendPhoto's photo): field name -> (filename, bytes).
    files: dict[str, tuple[str, bytes]] = field(default_factory=dict)


@dataclass
class FakeTelegram:
    token: str
    chats: set[int] = field(default_factory=set)
    blocked: set[int] = field(default_factory=set)
    # Answers to give to the next calls, in order, before the normal behaviour: (status, body).
    scripted: list[Answer] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    # A provider that hangs: "stall" answers nothing until `release()` (the fixture calls it when
    # the test ends); "trickle" sends a response one byte at a time, each well within any read
    # timeout, and never finishes it.
    hang: str | None = None
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    # (message id as the sender records it, chat id, wall-clock time) of every message accepted:
    # bench/failover.py measures from it how long a record lags behind the provider's acceptance.
    accepted: list[tuple[str, str, float]] = field(default_factory=list)
    # Updates not yet confirmed by a getUpdates offset past them (or accepted by the webhook).
    updates: list[dict[str, Any]] = field(default_factory=list)
    webhook: dict[str, Any] | None = None
    # What the webhook answered to each delivery: (update_id, status).
    deliveries: list[tuple[int, int]] = field(default_factory=list)
    _update_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(700_000))
    _message_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def user_says(
        self,
        chat_id: int,
        text: str,
        *,
        first_name: str = "Alice",
        chat_type: str = "private",
        title: str | None = None,
    ) -> dict[str, Any]:
        """Queues the update a person's message makes (a group's when `chat_type` is "group")."""
        sender: dict[str, Any] = {
            "id": abs(chat_id) if chat_type == "private" else 9_000_001,
            "is_bot": False,
        }
        sender["first_name"] = first_name
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = title or "some group"
        message: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "from": sender,
            "chat": chat,
            "date": 1_796_000_000,
            "text": text,
        }
        if text.startswith("/"):
            command = text.split()[0]
            message["entities"] = [{"offset": 0, "length": len(command), "type": "bot_command"}]
        return self.push({"message": message})

    def push(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Queues an update with the next update_id (`body` holds its message, edited_message, …)."""
        update = {"update_id": next(self._update_ids), **body}
        self.updates.append(update)
        self._arrived.set()
        return update

    async def deliver(self) -> None:
        """Posts the pending updates to the webhook, as Telegram does, keeping those not accepted."""
        assert self.webhook is not None, "no webhook set"
        async with aiohttp.ClientSession() as session:
            for update in list(self.updates):
                headers = {}
                if self.webhook.get("secret_token"):
                    headers[SECRET_HEADER] = self.webhook["secret_token"]
                async with session.post(self.webhook["url"], json=update, headers=headers) as response:
                    self.deliveries.append((update["update_id"], response.status))
                    if 200 <= response.status < 300:
                        self.updates.remove(update)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        return app

    def release(self) -> None:
        """Lets stalled requests end (with the normal answer)."""
        self._released.set()

    def photos(self) -> list[Call]:
        """Every sendPhoto call, with its file and parameters (caption, reply_parameters …)."""
        return [c for c in self.calls if c.method == "sendPhoto"]

    def sent(self) -> list[tuple[int, str]]:
        """(chat id, text) of every message the server accepted or was asked to send."""
        return [
            (int(c.params["chat_id"]), str(c.params["text"])) for c in self.calls if c.method == "sendMessage"
        ]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        params: dict[str, Any] = dict(request.query)
        files: dict[str, tuple[str, bytes]] = {}
        if request.content_type == "application/json":
            params.update(await request.json())
        elif request.can_read_body:
            for key, value in (await request.post()).items():
                if isinstance(value, str):
                    params[key] = value
                elif isinstance(value, web.FileField):
                    files[key] = (value.filename, value.file.read())
        call = Call(request.match_info["token"], request.match_info["method"], params, files)
        self.calls.append(call)
        if self.hang == "stall":
            await self._released.wait()
        if self.hang == "trickle":
            return await _trickle(request)
        if self.scripted:
            status, body = self.scripted.pop(0)
            if isinstance(body, str):
                return web.Response(status=status, text=body, content_type="text/html")
            return web.json_response(body, status=status)
        if call.token != self.token:
            return web.json_response(UNAUTHORIZED[1], status=UNAUTHORIZED[0])
        if call.method == "getMe":
            return _ok({"id": 4242, "is_bot": True, "first_name": "inno", "username": "inno_notify_bot"})
        if call.method == "sendMessage":
            return self._send_message(params)
        if call.method == "sendPhoto":
            return self._send_photo(call)
        if call.method == "getUpdates":
            return await self._get_updates(params)
        if call.method == "setWebhook":
            allowed = params.get("allowed_updates")
            self.webhook = {
                "url": params["url"],
                "secret_token": params.get("secret_token"),
                "allowed_updates": json.loads(allowed) if isinstance(allowed, str) else allowed,
            }
            return _ok(True)
        if call.method == "deleteWebhook":
            self.webhook = None
            return _ok(True)
        return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)

    async def _get_updates(self, params: Mapping[str, Any]) -> web.Response:
        if self.webhook is not None:
            return web.json_response(WEBHOOK_CONFLICT[1], status=WEBHOOK_CONFLICT[0])
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        timeout = float(params.get("timeout") or 0)
        # An offset confirms every update before it: they are never returned again.
        self.updates = [u for u in self.updates if u["update_id"] >= offset]
        if not self.updates and timeout > 0:
            self._arrived.clear()
            waiting = asyncio.ensure_future(self._arrived.wait())
            released = asyncio.ensure_future(self._released.wait())
            await asyncio.wait({waiting, released}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            waiting.cancel()
            released.cancel()
        return _ok(self.updates[:limit])

    def _accepted(self, chat_id: int) -> int:
        message_id = next(self._ids)
        self.accepted.append((str(message_id), str(chat_id), time.time()))
        return message_id

    def _send_message(self, params: Mapping[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if chat_id in self.blocked:
            return web.json_response(BLOCKED[1], status=BLOCKED[0])
        if chat_id not in self.chats:
            return web.json_response(CHAT_NOT_FOUND[1], status=CHAT_NOT_FOUND[0])
        message = {
            "message_id": self._accepted(chat_id),
            "date": 1_796_000_000,
            "chat": {"id": chat_id, "type": "private", "first_name": "someone"},
            "text": params.get("text", ""),
        }
        return _ok(message)

    def _send_photo(self, call: Call) -> web.Response:
        chat_id = int(call.params["chat_id"])
        if chat_id in self.blocked:
            return web.json_response(BLOCKED[1], status=BLOCKED[0])
        if chat_id not in self.chats:
            return web.json_response(CHAT_NOT_FOUND[1], status=CHAT_NOT_FOUND[0])
        photo = call.files.get("photo")
        if photo is None:
            # A photo given by file_id or URL (attach://) is not what we send.
            return web.json_response(
                {
                    "ok": False,
                    "error_code": 400,
                    "description": "Bad Request: there is no photo in the request",
                },
                status=400,
            )
        message = {
            "message_id": self._accepted(chat_id),
            "date": 1_796_000_000,
            "chat": {"id": chat_id, "type": "private", "first_name": "someone"},
            "photo": [{"file_id": "AgAD", "file_unique_id": "AQAD", "width": 560, "height": 500}],
            "caption": call.params.get("caption", ""),
        }
        return _ok(message)


async def _trickle(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    await response.prepare(request)
    while True:
        await response.write(b" ")
        await asyncio.sleep(0.05)


def _ok(result: Any) -> web.Response:
    return web.Response(text=json.dumps({"ok": True, "result": result}), content_type="application/json")


async def start(fake: FakeTelegram) -> TestServer:
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    return server
