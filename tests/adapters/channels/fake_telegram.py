"""A local Telegram Bot API server for tests: answers like api.telegram.org and records what it got.

It speaks the real wire format (`POST /bot{token}/{method}`, form or JSON parameters,
`{"ok": true, "result": ...}` or `{"ok": false, "error_code": ..., "description": ...}`), so the
real python-telegram-bot client is what the tests exercise.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

CHAT_NOT_FOUND = (400, {"ok": False, "error_code": 400, "description": "Bad Request: chat not found"})
BLOCKED = (403, {"ok": False, "error_code": 403, "description": "Forbidden: bot was blocked by the user"})
UNAUTHORIZED = (401, {"ok": False, "error_code": 401, "description": "Unauthorized"})


def too_many_requests(retry_after: int) -> tuple[int, dict[str, Any]]:
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
    scripted: list[tuple[int, Mapping[str, Any] | str]] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    # A provider that hangs: "stall" answers nothing until `release()` (the fixture calls it when
    # the test ends); "trickle" sends a response one byte at a time, each well within any read
    # timeout, and never finishes it.
    hang: str | None = None
    _released: asyncio.Event = field(default_factory=asyncio.Event)
    _ids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

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
        return web.json_response({"ok": False, "error_code": 404, "description": "Not Found"}, status=404)

    def _send_message(self, params: Mapping[str, Any]) -> web.Response:
        chat_id = int(params["chat_id"])
        if chat_id in self.blocked:
            return web.json_response(BLOCKED[1], status=BLOCKED[0])
        if chat_id not in self.chats:
            return web.json_response(CHAT_NOT_FOUND[1], status=CHAT_NOT_FOUND[0])
        message = {
            "message_id": next(self._ids),
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
            "message_id": next(self._ids),
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
