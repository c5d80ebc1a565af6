"""The one way views build a JSON response (orjson, RFC 3339 times)."""

from __future__ import annotations

from aiohttp import web

from inno_notify.api.serialize import dumps


def json(document: object, status: int = 200) -> web.Response:
    return web.Response(status=status, body=dumps(document), content_type="application/json")
