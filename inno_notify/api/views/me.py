"""GET and POST /me?email=…&exp=…&sig=…: a person's own page, and its forms.

Every message to a person links to it (domain.page_links, kind `me`, signed over the address): their
runs of the last 30 days, the nudges about workloads that still run, and their preferences, with
forms that change them (docs/pages.md). The link alone opens it (auth.SignedPages, like the job
pages); a viewer's or admin's token opens anyone's, read-only (a form posted from a browser carries
no token). A GET changes nothing. A POST changes one preference, through the same model as the
Telegram bot and the API (domain.preferences), recorded as from `Via.PAGE`; it needs the link and
the CSRF token the page put in its forms (domain.page_links.form_token: an HMAC over the address and
the link's signature with the links' key), so that no other site can post for the person: it can
send the link, if it has it, but it cannot read the page to learn the token. A missing or wrong
token is 403 and changes nothing. An admin's token may post a form without link or CSRF token (a
bearer token is nothing a browser sends by itself); the change is then the API's, by the token's
name, as with the one-click unsubscribe.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Annotated

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys
from inno_notify.api.auth import PRINCIPAL
from inno_notify.api.errors import ApiError, bad_request, not_found
from inno_notify.api.params import Body, Email
from inno_notify.api.resources import PersonalPageForm
from inno_notify.api.views.pages import Expiry, Signature, link_query, page
from inno_notify.domain.page_links import form_token, form_token_valid
from inno_notify.domain.personal_page import PAGE_CHANNELS, PageChange, PageOpening, changes_of
from inno_notify.domain.preferences import Origin, Via

log = logging.getLogger(__name__)

Address = Annotated[Email, Field(description="The person whose page it is.")]


@dataclass(frozen=True, slots=True)
class MeLink:
    """The person and the signature of the link their messages carry."""

    email: Address
    exp: Expiry | None = None
    sig: Signature | None = None


@dataclass(frozen=True, slots=True)
class MePost:
    """The personal page's link and one of its forms."""

    email: Address
    body: Annotated[PersonalPageForm, Body(form=True)]
    exp: Expiry | None = None
    sig: Signature | None = None


_SAVED = {
    PageChange.NOTIFY: "Saved: which runs you hear about.",
    PageChange.MUTE: "Saved: muted on every channel.",
    PageChange.UNMUTE: "Saved: not muted any more; what waited is on its way.",
    PageChange.NUDGES: "Saved: idle-GPU nudges.",
    PageChange.EMAILS: "Saved: e-mail.",
    PageChange.CHANNELS: "Saved: your channels.",
}


def _opening(request: web.Request, given: MeLink | MePost, notice: str | None = None) -> PageOpening:
    """What the page may show: forms for the signed link's holder, none for a token's."""
    key = request.app[keys.LINK_KEY]
    if request.get(PRINCIPAL) is not None or key is None or given.sig is None or given.exp is None:
        return PageOpening(given.email, notice=notice)
    return PageOpening(
        given.email,
        expires=int(given.exp),
        action=link_query(given.email, given.exp, given.sig),
        csrf=form_token(key, given.email, given.sig),
        notice=notice,
    )


async def _render(request: web.Request, opening: PageOpening) -> web.Response:
    provider = request.app[keys.ME_PAGES]
    if provider is None:
        raise not_found("personal pages are not available in this deployment", code="pages_unavailable")
    return page(await provider(opening), form=opening.action is not None)


async def me_page(request: web.Request, given: MeLink) -> web.Response:
    """The person's page; it changes nothing (link scanners and previews fetch every link)."""
    return await _render(request, _opening(request, given))


async def change(request: web.Request, given: MePost) -> web.Response:
    """One form's change, then the page again saying what changed."""
    key = request.app[keys.LINK_KEY]
    principal = request.get(PRINCIPAL)
    now = request.app[keys.CLOCK]()
    if principal is not None:  # an admin's token (the row lets no other post)
        origin = Origin(Via.API, now, principal.name)
    elif (
        key is not None
        and given.sig is not None
        and form_token_valid(key, given.email, given.sig, given.body.csrf)
    ):
        origin = Origin(Via.PAGE, now)  # the link, checked by the auth middleware, and its form
    else:
        raise ApiError(403, "invalid_csrf", "the form's token is missing or not this page's: reload the page")
    form = given.body
    what = PageChange(form.change)
    ticked = tuple(c for c in PAGE_CHANNELS if getattr(form, f"channel_{c}", None) == "on")
    try:
        changes = changes_of(what, form.value, ticked, now)
    except ValueError as exc:
        raise bad_request(str(exc), code="invalid_body") from None
    await request.app[keys.STORE].directory.change_preferences(
        given.email, now, changes=changes, origin=origin
    )
    log.info(
        "personal page of %s: %s changed (%s, via %s)",
        given.email,
        ", ".join(sorted(changes)),
        what.value,
        origin.via,
    )
    return await _render(request, _opening(request, given, _SAVED[what]))
