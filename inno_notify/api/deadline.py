"""Every request ends within a time limit: a handler still running past it is cancelled.

A client may ask for something the database takes long to answer (a usage window over years, a
page behind a lock), or the database may hang. Without a limit such requests pile up, each holding
a pooled connection, until the API answers nothing. Past the limit the handler's task is
cancelled (on Postgres the cancellation reaches the server: asyncpg sends a cancel request for the
running statement) and the client gets 503 with the contract's error JSON and a Retry-After. The
API's engine also carries a statement timeout no longer than this limit (app.create_api_store), so
on SQLite, where a statement cannot be cancelled from outside its thread, it stops by itself.
"""

from __future__ import annotations

import asyncio
import logging

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from inno_notify.api.errors import timed_out

log = logging.getLogger("inno_notify.api")

HANDLER_TIMEOUT_SECONDS = 30.0


def deadline_middleware(limit_seconds: float) -> Middleware:
    """Cancels a handler that runs longer than `limit_seconds` and answers 503 `timeout`."""

    @web.middleware
    async def within_limit(request: web.Request, handler: Handler) -> web.StreamResponse:
        scope = asyncio.timeout(limit_seconds)
        try:
            async with scope:
                return await handler(request)
        except TimeoutError:
            if not scope.expired():
                raise  # the handler's own timeout (a probe's, say): not ours to answer
            log.warning("%s %s: cancelled after %g s", request.method, request.path, limit_seconds)
            raise timed_out(f"the request ran past {limit_seconds:g} s") from None

    return within_limit
