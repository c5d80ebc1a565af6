"""GET /api/v1/openapi.json: the OpenAPI document, encoded once when the app is built."""

from __future__ import annotations

from aiohttp import web

from inno_notify.api import keys
from inno_notify.api.params import Nothing


async def openapi_document(request: web.Request, _: Nothing) -> web.Response:
    return web.Response(body=request.app[keys.OPENAPI], content_type="application/json")
