"""GET /jobs/{namespace}/{name}?uid=, /workflows/{namespace}/{name}?uid= and /teams/{team}?week=:
the pages the links in messages open.

Outside /api/v1 and HTML, for a person in a browser (docs/pages.md). They open with the signed,
expiring link a message carried (its `exp` and `sig`, checked by the auth middleware before the
view runs, auth.SignedPages) or with a viewer or admin token (a pipeline token gets 403). The job
and workflow pages are built by injected providers (the channel views render it; the API may not import them),
the team page is the digest page of the digest provider, from the same cache as
GET /api/v1/digests/{team}. A page carries no signed link that outlives the one it was opened with
(the team page has no link to itself).

Every page answers with headers that keep it to itself: no script and nothing from elsewhere
(Content-Security-Policy), no Referer carrying a signed link to the log or Grafana links on it,
no caching, no framing, no indexing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote, urlencode

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys
from inno_notify.api.errors import bad_request, not_found
from inno_notify.api.params import Parse, Text
from inno_notify.api.views.digests import TeamWeek, compute

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "private, no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "X-Robots-Tag": "noindex",
}
# A page whose one form posts back to this service (the unsubscribe page's button), and nowhere else.
FORM_PAGE_HEADERS = {
    **PAGE_HEADERS,
    "Content-Security-Policy": PAGE_HEADERS["Content-Security-Policy"].replace(
        "form-action 'none'", "form-action 'self'"
    ),
}

EXPIRY_PATTERN = r"^[0-9]{1,12}$"
SIGNATURE_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
_EXPIRY = re.compile(EXPIRY_PATTERN[1:-1])
_SIGNATURE = re.compile(SIGNATURE_PATTERN[1:-1])


def _expiry(value: str, name: str) -> str:
    if not _EXPIRY.fullmatch(value):
        raise bad_request(f"{name} must be the unix time a link expires at; got {value!r}")
    return value


def _signature(value: str, name: str) -> str:
    if not _SIGNATURE.fullmatch(value):
        raise bad_request(f"{name} is not a link signature")
    return value


Expiry = Annotated[
    str,
    Field(pattern=EXPIRY_PATTERN, description="A signed link's expiry (unix seconds)."),
    Parse(_expiry),
]
Signature = Annotated[
    str,
    Field(pattern=SIGNATURE_PATTERN, description="A signed link's signature (base64url HMAC-SHA256)."),
    Parse(_signature),
]


@dataclass(frozen=True, slots=True)
class JobPageRequest:
    namespace: Text
    name: Text
    uid: Annotated[Text | None, Field(description="The run's uid; default: the newest run of that name.")] = (
        None
    )
    exp: Expiry | None = None
    sig: Signature | None = None


@dataclass(frozen=True, slots=True)
class TeamPageRequest(TeamWeek):
    """The digest's team and week, and the signature of the link a digest carried."""

    exp: Expiry | None = None
    sig: Signature | None = None


def link_query(email: str, exp: str | None, sig: str | None) -> str:
    """The query of the signed link a page about `email` was opened with, for its forms to post to."""
    link = {"email": email, "exp": exp, "sig": sig}
    return "?" + urlencode({k: v for k, v in link.items() if v is not None}, quote_via=quote)


def page(html: str, *, form: bool = False) -> web.Response:
    """A page with the page headers; `form`: one whose forms may post back to this service."""
    headers = FORM_PAGE_HEADERS if form else PAGE_HEADERS
    return web.Response(text=html, content_type="text/html", charset="utf-8", headers=headers)


async def job_page(request: web.Request, given: JobPageRequest) -> web.Response:
    return await _run_page(request, given, request.app[keys.JOB_PAGES], "job")


async def workflow_page(request: web.Request, given: JobPageRequest) -> web.Response:
    return await _run_page(request, given, request.app[keys.WORKFLOW_PAGES], "workflow")


async def _run_page(
    request: web.Request, given: JobPageRequest, provider: keys.JobPageProvider | None, what: str
) -> web.Response:
    if provider is None:
        raise not_found(f"{what} pages are not available in this deployment", code="pages_unavailable")
    html = await provider(given.namespace, given.name, given.uid)
    if html is None:
        which = f" with uid {given.uid}" if given.uid else ""
        raise not_found(f"no {what} {given.namespace}/{given.name}{which}", code=f"{what}_not_found")
    return page(html)


async def team_page(request: web.Request, given: TeamPageRequest) -> web.Response:
    provider = request.app[keys.DIGESTS]
    if provider is None:
        raise not_found("team pages are not available in this deployment", code="pages_unavailable")
    cached = await request.app[keys.DIGEST_CACHE].get(
        (given.team, given.week), compute(provider, given.team, given.week)
    )
    bodies = cached.value
    if bodies is None or bodies.html is None:
        raise not_found(f"no team {given.team}", code="team_not_found")
    return page(bodies.html)
