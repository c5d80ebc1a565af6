"""The demo's e-mail channel: every message is written to files and shown on the terminal.

It implements the same `Sender` protocol as the SMTP sender and builds the very MIME message the
SMTP sender would send (`EmailSender.build`), so the demo shows what a user would receive: the
`.eml` to open in a mail client, its HTML part as a page, and the plain-text part in the terminal.
"""

from __future__ import annotations

import re
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from inno_notify.adapters.channels.base import MailMessage, Recipient, RenderedMessage, wrong_message
from inno_notify.adapters.channels.email import EmailSender


class MailboxSender:
    def __init__(self, folder: Path, sender: str, console: Console | None = None) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.console = console
        # Never connects: only its MIME builder is used.
        self._builder = EmailSender("localhost", sender)
        self.sent: list[tuple[Recipient, MailMessage]] = []

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        if not isinstance(message, MailMessage):
            raise wrong_message("email", message)
        mail = self._builder.build(recipient, message)
        stem = f"{len(self.sent) + 1:03d}-{re.sub(r'[^A-Za-z0-9]+', '_', recipient.email or 'unknown')}"
        (self.folder / f"{stem}.eml").write_bytes(bytes(mail))
        (self.folder / f"{stem}.html").write_text(message.html, encoding="utf-8")
        self.sent.append((recipient, message))
        if self.console is not None:
            # Cluster-supplied text may contain "[...]": never let it be read as rich markup.
            title = (
                f"[bold]to {escape(recipient.name or recipient.email or '')}[/] · {escape(message.subject)}"
            )
            body = Text(message.text.strip())
            self.console.print(Panel(body, title=title, title_align="left", border_style="cyan"))
        return str(mail["Message-ID"])

    async def aclose(self) -> None:
        return None
