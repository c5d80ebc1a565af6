"""A local receiver of the service's webhook for tests: it checks each request's signature the way
docs/channels.md tells a receiver to (its own code, not the sender's), and records what it got.

A request whose signature does not verify is answered 401, as a receiver should; `scripted`
answers (a 429 with Retry-After, a 5xx) are given first, one per request.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.test_utils import TestServer

TOLERANCE_SECONDS = 300


def verify(secret: str, header: str, body: bytes, now: float, tolerance: float = TOLERANCE_SECONDS) -> bool:
    """The docs' verification: `t=<unix seconds>,v1=<hex>` with v1 = HMAC-SHA256(secret, "<t>.<body>"),
    compared in constant time, and t within `tolerance` seconds of `now`."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    try:
        timestamp = int(fields["t"])
    except (KeyError, ValueError):
        return False
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return abs(now - timestamp) <= tolerance and hmac.compare_digest(expected, fields.get("v1", ""))


@dataclass(frozen=True)
class Received:
    body: bytes
    headers: Mapping[str, str]

    @property
    def json(self) -> dict[str, Any]:
        document = json.loads(self.body)
        assert isinstance(document, dict)
        return document


@dataclass
class FakeReceiver:
    secret: str
    # (status, headers) answered before anything is accepted, one per request.
    scripted: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    # Verified requests, accepted or answered from `scripted`.
    received: list[Received] = field(default_factory=list)
    # Verified requests answered 204: what a receiver would act on.
    accepted: list[Received] = field(default_factory=list)
    # Requests whose signature did not verify.
    refused: list[Received] = field(default_factory=list)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/hook", self._hook)
        return app

    async def _hook(self, request: web.Request) -> web.Response:
        body = await request.read()
        got = Received(body, dict(request.headers))
        if not verify(self.secret, request.headers.get("X-Inno-Notify-Signature", ""), body, time.time()):
            self.refused.append(got)
            return web.json_response({"error": "bad signature"}, status=401)
        self.received.append(got)
        if self.scripted:
            status, headers = self.scripted.pop(0)
            return web.Response(status=status, headers=headers)
        self.accepted.append(got)
        return web.Response(status=204)


@contextlib.asynccontextmanager
async def serving(fake: FakeReceiver) -> AsyncIterator[str]:
    """The running receiver and the URL to post to, until the block ends."""
    server = TestServer(fake.app(), host="127.0.0.1")
    await server.start_server()
    try:
        yield str(server.make_url("/hook"))
    finally:
        await server.close()
