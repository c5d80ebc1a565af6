"""The demo's Slack workspace: the app's direct messages are shown on the terminal instead of posted.

It stands where the Slack Web API would (like the mailbox stands for SMTP): the dispatcher hands it
what it rendered for Slack through the same `Sender` protocol as slack-sdk's sender, and the
self-service handler asks it what Slack itself would answer (a member's profile e-mail, the Home tab
published). Everything else — the signed request, its check, the command, the preferences, the
outbox row of the answer and its rendering — is the service's own path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from inno_notify.adapters.channels.base import Recipient, RenderedMessage, SlackMessage, wrong_message

__all__ = ["SimSlack", "message_text"]


def message_text(message: SlackMessage) -> str:
    """What a person reads in Slack: the section blocks' mrkdwn, one paragraph each (the fallback
    `text` when there are none)."""
    sections = [
        str(block["text"]["text"])
        for block in message.blocks
        if block.get("type") == "section" and isinstance(block.get("text"), Mapping)
    ]
    return "\n\n".join(sections) if sections else message.text


class SimSlack:
    """Members (their Slack member id → their profile's e-mail) and the DMs the app sent them."""

    def __init__(self, members: Mapping[str, str], console: Console | None = None) -> None:
        self._members = dict(members)
        self._console = console
        self.sent: list[tuple[str, SlackMessage]] = []
        self.homes: dict[str, Mapping[str, Any]] = {}
        # Set at each DM: the demo waits on it for the app's answer.
        self.delivered = asyncio.Event()

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        if not isinstance(message, SlackMessage):
            raise wrong_message("slack", message)
        to = recipient.slack_user_id or recipient.slack_channel or recipient.email or ""
        self.sent.append((to, message))
        if self._console is not None:
            title = f"[bold]Slack DM from the app to {escape(recipient.name or to)}[/]"
            self._console.print(
                Panel(Text(message_text(message)), title=title, title_align="left", border_style="magenta")
            )
        self.delivered.set()
        return f"{len(self.sent)}.000100"

    async def email_of(self, user_id: str) -> str | None:
        return self._members.get(user_id)

    async def publish_home(self, user_id: str, view: Mapping[str, Any]) -> None:
        self.homes[user_id] = view

    async def aclose(self) -> None:
        return None
