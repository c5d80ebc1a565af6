"""GET /api/v1/digests/{team}?week=: a team's weekly digest, built by an injected provider, cached.

The digest itself is built elsewhere (domain.digest over a store query, rendered by the channel
views); the API only asks the provider the app was given and picks JSON or the HTML page from the
Accept header. Building one aggregates a team's fortnight and draws a chart, so each (team, week)
is kept in the app's digest cache for a short while, both bodies encoded once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys
from inno_notify.api.errors import ApiError, not_found
from inno_notify.api.negotiate import preferred
from inno_notify.api.params import Text, Week
from inno_notify.api.resources import ProvidedDigest
from inno_notify.api.serialize import dumps

FORMATS = ("application/json", "text/html")


@dataclass(frozen=True, slots=True)
class TeamWeek:
    team: Text
    week: Annotated[
        Week | None, Field(description="ISO week like 2026-W48; default: the last complete week.")
    ] = None


class DigestBodies:
    """One digest as served: the JSON document (without the page) and the HTML page, if any."""

    def __init__(self, digest: ProvidedDigest) -> None:
        html = digest.get("html")
        self.html = html if isinstance(html, str) else None
        self.json = dumps({k: v for k, v in digest.items() if k != "html"})


def compute(
    provider: keys.DigestProvider, team: str, week: str | None
) -> Callable[[], Awaitable[DigestBodies | None]]:
    """The cache's computation of one (team, week): None for a team the provider does not know."""

    async def run() -> DigestBodies | None:
        digest = await provider(team, week)
        return None if digest is None else DigestBodies(digest)

    return run


async def get_digest(request: web.Request, given: TeamWeek) -> web.Response:
    team, week = given.team, given.week
    media = preferred(request.headers.get("Accept"), FORMATS)
    if media is None:
        raise ApiError(406, "not_acceptable", f"digests are available as {' or '.join(FORMATS)}")
    provider = request.app[keys.DIGESTS]
    if provider is None:
        raise not_found("digests are not available in this deployment", code="digest_unavailable")
    cached = await request.app[keys.DIGEST_CACHE].get((team, week), compute(provider, team, week))
    bodies: DigestBodies | None = cached.value
    if bodies is None:
        raise not_found(f"no team {team}", code="team_not_found")
    if media == "text/html":
        if bodies.html is None:
            raise ApiError(406, "not_acceptable", "this digest has no HTML page; ask for application/json")
        return web.Response(text=bodies.html, content_type="text/html", charset="utf-8")
    return web.Response(body=bodies.json, content_type="application/json")
