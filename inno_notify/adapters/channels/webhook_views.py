"""What the webhook says of a message: the same context the other channels' templates render, as data.

The webhook sends no markup of its own. Its `title` and `text` are the e-mail's subject and plain
text (the same templates, so a deployment's override changes both), without the e-mail's footer,
which speaks of owner annotations and the Unsubscribe link of a mail program; its `links` are the
links the templates print; its `data` is each view of the context as JSON (domain.message_json's
encoding of the view dataclasses: the figures spelt as the messages spell them, and the raw ones a
view carries). Nothing here is escaped: JSON encoding is the only escaping a JSON body needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from inno_notify.adapters.channels.base import WebhookMessage, WebLink
from inno_notify.domain.message_json import encode

# Context entries that are no view: pictures (the webhook carries none), the Telegram link offer
# (never made for a webhook row), how many pages a grouped e-mail links, the chart's cid.
_NOT_DATA = frozenset(
    {"images", "telegram_link", "pages_shown", "chart_src", "dashboard_url", "log_url", "grafana_url"}
)
# Links the templates print from the context, by their rel in the webhook's `links`.
_CONTEXT_LINKS = (
    ("dashboard_url", "page", "Dashboard"),
    ("log_url", "logs", "Logs"),
    ("grafana_url", "grafana", "Grafana"),
)
# The e-mail's footer starts at a line of its own "--" (the signature separator without its space).
_FOOTER = "\n--\n"


def webhook_message(
    kind: str, subject: str, text: str, context: Mapping[str, Any], *, data: Mapping[str, Any] | None = None
) -> WebhookMessage:
    """The webhook's message of template set `kind` rendered with `context`: `subject` and `text`
    are the e-mail's; `data` replaces the views of the context (the digest gives its own JSON)."""
    return WebhookMessage(
        kind=kind,
        title=" ".join(subject.split()),
        text=without_footer(text),
        links=tuple(_links(context)),
        data=dict(data) if data is not None else view_data(context),
    )


def view_data(context: Mapping[str, Any]) -> dict[str, Any]:
    """Each view of a template context as JSON, under its name in the context."""
    return {name: encode(value) for name, value in context.items() if name not in _NOT_DATA}


def without_footer(text: str) -> str:
    """The plain text up to the e-mail's footer (the last line "--"), stripped."""
    body = text.strip()
    head, separator, _ = ("\n" + body).rpartition(_FOOTER)
    return head.strip() if separator else body


def _links(context: Mapping[str, Any]) -> Iterable[WebLink]:
    for name, rel, label in _CONTEXT_LINKS:
        href = context.get(name)
        if isinstance(href, str) and href:
            yield WebLink(rel, label, href)
    # The links a view carries itself (a job's, a model's or a pipeline message's own), once each.
    seen: set[str] = set()
    for name, value in context.items():
        if name in _NOT_DATA:
            continue
        for view in value if isinstance(value, list | tuple) else (value,):
            for link in getattr(view, "links", None) or ():
                url, title = getattr(link, "url", None), getattr(link, "title", None)
                if isinstance(url, str) and url not in seen:
                    seen.add(url)
                    yield WebLink("link", str(title or url), url)
