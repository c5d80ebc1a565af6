"""GET /api/v1/digests/{team}?week=: a team's weekly digest, built by an injected provider.

The digest itself is built elsewhere (domain.digest over a store query); the API only asks the
provider the app was given and picks JSON or the HTML page from the Accept header.
"""

from __future__ import annotations

from aiohttp import web

from inno_notify.api import keys, params
from inno_notify.api.errors import ApiError, not_found
from inno_notify.api.negotiate import preferred
from inno_notify.api.views.respond import json

FORMATS = ("application/json", "text/html")


async def get_digest(request: web.Request) -> web.Response:
    params.check_known(request.query, ("week",))
    team = params.path_text(request.match_info, "team")
    week = params.iso_week(request.query.get("week"))
    media = preferred(request.headers.get("Accept"), FORMATS)
    if media is None:
        raise ApiError(406, "not_acceptable", f"digests are available as {' or '.join(FORMATS)}")
    provider = request.app[keys.DIGESTS]
    if provider is None:
        raise not_found("digests are not available in this deployment", code="digest_unavailable")
    digest = await provider(team, week)
    if digest is None:
        raise not_found(f"no team {team}", code="team_not_found")
    if media == "text/html":
        html = digest.get("html")
        if not isinstance(html, str):
            raise ApiError(406, "not_acceptable", "this digest has no HTML page; ask for application/json")
        return web.Response(text=html, content_type="text/html", charset="utf-8")
    return json({k: v for k, v in digest.items() if k != "html"})
