"""An API server whose watch streams say exactly what a test scripts, byte for byte.

The simulated API server (inno_notify.sim) only ever writes well-formed events; a hostile or broken
one can send anything on a watch line. This one answers a LIST of Jobs with `items` and every
WATCH with the raw lines queued in `lines`, over real HTTP, so kubernetes-asyncio and the watcher
meet them exactly as they would from a cluster.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web


def event_line(event_type: str, obj: Any) -> bytes:
    return orjson.dumps({"type": event_type, "object": obj}) + b"\n"


class ScriptedServer:
    def __init__(self) -> None:
        self.items: list[Any] = []
        self.lines: asyncio.Queue[bytes] = asyncio.Queue()
        self.watches = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/apis/batch/v1/jobs", self._jobs)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def kubeconfig(self, path: Path) -> Path:
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "s", "cluster": {"server": self.url}}],
                    "users": [{"name": "s", "user": {"token": "t"}}],
                    "contexts": [{"name": "s", "context": {"cluster": "s", "user": "s"}}],
                    "current-context": "s",
                }
            )
        )
        return path

    async def _jobs(self, request: web.Request) -> web.StreamResponse:
        if request.query.get("watch") != "true":
            body = {"kind": "JobList", "metadata": {"resourceVersion": "1"}, "items": self.items}
            return web.Response(body=orjson.dumps(body), content_type="application/json")
        self.watches += 1
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        while True:
            await response.write(await self.lines.get())
