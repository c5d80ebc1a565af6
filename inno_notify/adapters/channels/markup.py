"""Escaping and cutting for the two markups whose rules Jinja does not know: Telegram HTML, Slack mrkdwn.

Telegram HTML is escaped by Jinja's autoescape; what is left is cutting a message to 4096
characters without splitting a tag or an entity and without leaving a tag open (Telegram rejects
such a message). Slack mrkdwn has no autoescape in Jinja: `escape_mrkdwn` is the template
environment's finalize, applied to every value a template prints.

Slack documents only three escapes (`&`, `<`, `>`), which already make `<!channel>`, `<@U123>`,
`<#C123>`, `<!subteam^S123>` and `<url|label>` inert. It has no escape for the formatting
characters `*`, `_`, `~` and backtick; a zero-width space on both sides of each keeps them from
pairing up into bold, italics, strike or code, so a value shows as written. Mentions typed as
words (`@channel`, `@here`, `@everyone`, `@someone`) are what Slack parses in text objects that
are not `verbatim` and in the notification `text`: every text object we send is verbatim
(render.slack_message), and a zero-width space after an `@` that starts a word keeps a value's
`@here` from being read as one anyway. An `@` inside a word (an e-mail address) is left alone.
"""

from __future__ import annotations

import re

from inno_notify.adapters.channels.base import SLACK_MAX_SECTION_CHARS, TELEGRAM_MAX_CHARS

TRUNCATION_MARKER = "\n… (truncated)"
ZWSP = "\u200b"

# A tag, an entity, or one character: the units a cut may not split.
_HTML_TOKEN = re.compile(r"<[^<>]*>|&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z]+);|.", re.DOTALL)
_TAG = re.compile(r"<(/?)([A-Za-z][A-Za-z0-9-]*)")
_MRKDWN_FORMAT = re.compile(r"[*_~`]")
# An @ that starts a word: what Slack could read as a mention (not the @ of an e-mail address).
_MENTION_AT = re.compile(r"(?<![\w.+-])@")


class Mrkdwn(str):
    """Text that is already mrkdwn (a link we built); `escape_mrkdwn` passes it through."""

    __slots__ = ()


def escape_mrkdwn(value: object) -> str:
    """Makes any value print literally in Slack mrkdwn."""
    if isinstance(value, Mrkdwn):
        return value
    text = str(value).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MENTION_AT.sub("@" + ZWSP, text)
    return _MRKDWN_FORMAT.sub(lambda m: f"{ZWSP}{m.group()}{ZWSP}", text)


def inert_slack_text(value: object) -> str:
    """Plain text for Slack fields that are no mrkdwn (a file's alt text and title): no brackets
    that could form `<!here>` or `<@U123>`, and no word-initial `@`."""
    text = str(value).replace("<", "‹").replace(">", "›")
    return _MENTION_AT.sub("@" + ZWSP, text)


def mrkdwn_link(url: str, label: object) -> Mrkdwn:
    """`<url|label>` with both parts escaped; a `|` in the URL would end it early."""
    safe_url = url.replace("&", "&amp;").replace("<", "%3C").replace(">", "%3E").replace("|", "%7C")
    safe_label = escape_mrkdwn(label).replace("|", "¦")
    return Mrkdwn(f"<{safe_url}|{safe_label}>")


def truncate_html(html: str, limit: int = TELEGRAM_MAX_CHARS, marker: str = TRUNCATION_MARKER) -> str:
    """Cuts HTML to at most `limit` characters, closing the tags left open and adding `marker`."""
    if len(html) <= limit:
        return html
    kept: list[str] = []
    open_tags: list[str] = []
    used = 0
    for match in _HTML_TOKEN.finditer(html):
        token = match.group()
        stack = _after(open_tags, token)
        closing = sum(len(name) + 3 for name in stack)
        if used + len(token) + closing + len(marker) > limit:
            break
        kept.append(token)
        used += len(token)
        open_tags = stack
    # An element cut right after its opening tag would show empty (a link without text): drop it.
    while kept and open_tags and _TAG.match(kept[-1]) and not kept[-1].startswith("</"):
        kept.pop()
        open_tags = open_tags[:-1]
    body = "".join(kept).rstrip()
    return body + "".join(f"</{name}>" for name in reversed(open_tags)) + marker


def _after(open_tags: list[str], token: str) -> list[str]:
    """The stack of open tags after `token`."""
    tag = _TAG.match(token) if token.startswith("<") and token.endswith(">") else None
    if tag is None or token.endswith("/>"):
        return open_tags
    closing, name = tag.group(1), tag.group(2).lower()
    if not closing:
        return [*open_tags, name]
    if name in open_tags:
        index = len(open_tags) - 1 - open_tags[::-1].index(name)
        return open_tags[:index]
    return open_tags


def cut_mrkdwn(text: str, limit: int = SLACK_MAX_SECTION_CHARS) -> list[str]:
    """Splits mrkdwn into pieces of at most `limit` characters, at line ends where possible.

    A piece never ends inside an entity (`&amp;`) or a link (`<url|label>`).
    """
    pieces: list[str] = []
    current = ""
    for line in text.split("\n"):
        candidate = f"{current}\n{line}" if current else line
        if len(candidate) <= limit:
            current = candidate
            continue
        if current:
            pieces.append(current)
        current = ""
        for token in _HTML_TOKEN.findall(line):
            if len(current) + len(token) > limit:
                pieces.append(current)
                current = ""
            current += token[:limit]
    if current or not pieces:
        pieces.append(current)
    return pieces
