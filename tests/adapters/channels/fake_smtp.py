"""A real SMTP server on loopback (aiosmtpd) that records every message and can refuse addresses."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any

from aiosmtpd.controller import Controller


@dataclass
class Received:
    mail_from: str
    rcpt_tos: list[str]
    message: EmailMessage
    # The message as it came over the wire (its headers as folded).
    raw: bytes = b""


@dataclass
class RecordingHandler:
    # address -> SMTP reply to RCPT TO, e.g. "550 5.1.1 <x@y>: Recipient address rejected".
    refuse: dict[str, str] = field(default_factory=dict)
    received: list[Received] = field(default_factory=list)
    # Every address a client named in RCPT TO, accepted or refused, in order.
    rcpt_commands: list[str] = field(default_factory=list)

    async def handle_RCPT(
        self, server: Any, session: Any, envelope: Any, address: str, rcpt_options: list[str]
    ) -> str:
        self.rcpt_commands.append(address)
        reply = self.refuse.get(address)
        if reply is not None:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        self.received.append(Received(envelope.mail_from, list(envelope.rcpt_tos), parsed, envelope.content))
        return "250 Message accepted for delivery"


def free_port() -> int:
    # aiosmtpd's Controller connects to its own port to check it is up, so port 0 cannot be used.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(handler: RecordingHandler, **kwargs: Any) -> Controller:
    controller = Controller(handler, hostname="127.0.0.1", port=free_port(), **kwargs)
    controller.start()
    return controller
