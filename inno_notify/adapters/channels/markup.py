"""Escaping and cutting for the markups whose rules Jinja does not know: Telegram HTML, Slack mrkdwn,
Mattermost Markdown.

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

Mattermost renders Markdown (CommonMark with its own additions) and shows no raw HTML.
`escape_markdown` backslash-escapes the characters that form inline markup (emphasis, code, links,
images, strike, tables, headings) and a line start that would begin a list or a quote; `@` that
starts a word gets the zero-width space as in Slack (Mattermost notifies `@channel`, `@all`,
`@here` and `@user`), and so does a word-initial `~` (a channel link). Mattermost messages are
rendered from Slack's templates (render.py): `mrkdwn_to_markdown` turns their `*bold*` into
`**bold**`; values never hold an unescaped `*`, so every pair it finds is the template's own.
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


class Markdown(str):
    """Text that is already Mattermost Markdown (a link we built); `escape_markdown` passes it through."""

    __slots__ = ()


_MARKDOWN_INLINE = re.compile(r"([\\`*_\[\]()#|<>!{}])")
# A line start that would make a list item, a quote, a rule or a heading underline.
_MARKDOWN_LINE_START = re.compile(r"^(\s*)(>|[-+](?=\s|$)|\d+(?=[.)](?:\s|$))|=+(?=\s*$))", re.MULTILINE)
# Mattermost reads a mention after any non-word character (`x-@here` too): only an `@` that follows
# a letter or digit (an e-mail address) is left alone; likewise `~` (a channel link).
_MARKDOWN_AT = re.compile(r"(?<!\w)@")
_WORD_INITIAL_TILDE = re.compile(r"(?<!\w)~")
# A Slack `*bold*` of a template: not escaped, not part of `**`, no line break inside.
_MRKDWN_BOLD = re.compile(r"(?<![\\*])\*(?=\S)((?:\\.|[^*\\\n])*?(?:\\.|[^\s*\\]))\*(?!\*)")


def escape_markdown(value: object) -> str:
    """Makes any value print literally in Mattermost Markdown, mentioning nobody."""
    if isinstance(value, Markdown):
        return value
    text = _MARKDOWN_INLINE.sub(r"\\\1", str(value))
    text = _MARKDOWN_LINE_START.sub(_escape_line_start, text)
    text = _MARKDOWN_AT.sub("@" + ZWSP, text)
    return _WORD_INITIAL_TILDE.sub("~" + ZWSP, text)


def _escape_line_start(match: re.Match[str]) -> str:
    indent, marker = match.group(1), match.group(2)
    # "1." and "1)" start an ordered list: the punctuation after the digits is escaped.
    return f"{indent}{marker}\\" if marker[0].isdigit() else f"{indent}\\{marker}"


def markdown_link(url: str, label: object) -> Markdown:
    """`[label](url)` with the label escaped and the URL unable to end the link early."""
    safe_url = (
        url.replace(" ", "%20")
        .replace("(", "%28")
        .replace(")", "%29")
        .replace("<", "%3C")
        .replace(">", "%3E")
    )
    return Markdown(f"[{escape_markdown(label)}]({safe_url})")


def mrkdwn_to_markdown(text: str) -> str:
    """A Slack template's `*bold*` as Markdown's `**bold**` (values are escaped, so untouched)."""
    return _MRKDWN_BOLD.sub(r"**\1**", text)


def cut_text(text: str, limit: int, marker: str = TRUNCATION_MARKER) -> str:
    """`text` cut at a line end to at most `limit` characters with `marker`, if it is longer."""
    if len(text) <= limit:
        return text
    head = text[: limit - len(marker)]
    if "\n" in head:
        head = head[: head.rindex("\n")]
    return head.rstrip() + marker
