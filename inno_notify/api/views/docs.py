"""GET /api/v1/openapi.json: the OpenAPI document, encoded once when the app is built."""

from __future__ import annotations

from aiohttp import web

from inno_notify.api import keys


async def openapi_document(request: web.Request) -> web.Response:
    return web.Response(body=request.app[keys.OPENAPI], content_type="application/json")
