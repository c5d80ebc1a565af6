"""GET and POST /unsubscribe?email=…&exp=…&sig=…: the one-click unsubscribe every e-mail carries.

RFC 8058: an e-mail's `List-Unsubscribe` header names this signed link (domain.page_links) and
`List-Unsubscribe-Post: List-Unsubscribe=One-Click` tells mail providers that they may POST the
form `List-Unsubscribe=One-Click` to it, without cookies and without anyone looking at a page: the
link alone says whom it is about and authorises it (auth.SignedPages, like the job pages' links).
The POST turns e-mail off for that address, in the directory or not (its `emails` preference, from
origin `email`), and leaves every other channel as it is; posting again changes nothing. GET
changes nothing, because link scanners and previews fetch the links of a message: it shows a
page whose button posts the same form to the same link. An admin's token opens both without a
link (the change is then recorded as the API's, by the token's name).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Annotated

from aiohttp import web
from pydantic import Field

from inno_notify.api import keys
from inno_notify.api.auth import PRINCIPAL
from inno_notify.api.params import Body, Email
from inno_notify.api.resources import OneClickBody
from inno_notify.api.views.pages import Expiry, Signature, link_query, page
from inno_notify.domain.preferences import Origin, Via

Address = Annotated[Email, Field(description="The address whose e-mail the link turns off.")]


@dataclass(frozen=True, slots=True)
class UnsubscribeLink:
    """The address a one-click link is about, and its signature."""

    email: Address
    exp: Expiry | None = None
    sig: Signature | None = None


@dataclass(frozen=True, slots=True)
class OneClickPost:
    """The one-click link and the form RFC 8058 posts to it."""

    email: Address
    body: Annotated[OneClickBody, Body(form=True)]
    exp: Expiry | None = None
    sig: Signature | None = None


_STYLE = "font-family:system-ui,sans-serif;max-width:34em;margin:2em auto;padding:0 1em;line-height:1.5"
_OTHERS = "Messages on other channels (Slack, Telegram), if you get any, do not change."


def _page(title: str, body: str, *, form: bool = False) -> web.Response:
    return page(
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title></head>"
        f'<body style="{_STYLE}"><h1 style="font-size:1.3em">{escape(title)}</h1>{body}</body></html>',
        form=form,
    )


async def unsubscribe_page(request: web.Request, given: UnsubscribeLink) -> web.Response:
    """The page a person (or a link scanner) gets from the link: it asks, and changes nothing."""
    action = link_query(given.email, given.exp, given.sig)
    return _page(
        "Stop e-mail from inno-notify?",
        f"<p>{escape(given.email)} will get no more e-mail from inno-notify: no job summaries, "
        f"digests, nudges or pipeline messages. {_OTHERS}</p>"
        f'<form method="post" action="{escape(action)}">'
        '<input type="hidden" name="List-Unsubscribe" value="One-Click">'
        '<button type="submit" style="font-size:1em;padding:.4em 1em">Unsubscribe from e-mail</button>'
        "</form>",
        form=True,
    )


async def unsubscribe(request: web.Request, given: OneClickPost) -> web.Response:
    """Turns e-mail off for the link's address (once: a second post keeps the first's origin)."""
    store = request.app[keys.STORE]
    now = request.app[keys.CLOCK]()
    before = await store.directory.get_preferences(given.email)
    if before is None or not before.email_off:
        principal = request.get(PRINCIPAL)
        origin = Origin(Via.API, now, principal.name) if principal is not None else Origin(Via.EMAIL, now)
        await store.directory.change_preferences(given.email, now, changes={"emails": False}, origin=origin)
    return _page(
        "E-mail is off",
        f"<p>{escape(given.email)} gets no more e-mail from inno-notify. {_OTHERS} "
        "To get e-mail again, ask your cluster admin.</p>",
    )
