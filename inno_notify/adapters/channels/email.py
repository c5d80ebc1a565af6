"""Sends summaries by e-mail with aiosmtplib, one SMTP session per message, and classifies failures.

A message is multipart/alternative (plain text, then HTML with its inline images related to it),
with a Message-ID of our own so that the outbox can record it before the server says anything.
Unsubscribing (RFC 2369, RFC 8058): a message that carries its recipient's signed one-click link
(MailMessage.unsubscribe_url) names it in `List-Unsubscribe`, beside the operator's mailto if one
is configured (`channels.email.list_unsubscribe`), and, for an https link, says
`List-Unsubscribe-Post: List-Unsubscribe=One-Click` so that mail providers show their own
Unsubscribe button, which POSTs to it. Without a link the operator's URL or mailto, if any, stands
alone. The URIs go in whole: a URI that could end the header or split it (a control character,
a space, `<`, `>`, `,`, `"`) is left out, and the header is never folded (_Verbatim).
SMTP replies: 4xx and connection trouble are worth another try, 5xx (an address rejected, auth
refused) are not.

A message goes to exactly one address: the recipient's must be a single plain addr-spec
(domain.addresses; a list, a display name, a group or a control character is a permanent failure
with the reason, and nothing is sent), it must lie in `allowed_domains` when those are set (routing
already leaves such owners out; this is the second line), and the SMTP envelope names it
explicitly (`recipients=[address]`) instead of letting the client collect every address in the
headers.
"""

from __future__ import annotations

import email.policy
import re
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from email.headerregistry import Address, BaseHeader, HeaderRegistry
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from typing import Any, TypedDict

import aiosmtplib

from inno_notify.adapters.channels.base import (
    ChannelError,
    MailMessage,
    Recipient,
    RenderedMessage,
    redact,
    wrong_message,
)
from inno_notify.domain.addresses import email_refusal
from inno_notify.settings import HEADER_URI_CHARS

# A message key as the dispatcher makes it: hex, short enough for a Message-ID's left part.
_KEY = re.compile(r"[0-9a-f]{8,64}")
# A URI fit for the List-Unsubscribe header, short enough for it to stay under SMTP's
# 998-character line with two of them.
_URI = re.compile(HEADER_URI_CHARS + "{1,480}")
ONE_CLICK = "List-Unsubscribe=One-Click"


class _Verbatim(BaseHeader):
    """A header written as given, never folded: the e-mail package folds a long URI into RFC 2047
    encoded words, which no mail provider reads as a URI. Its value is made by
    unsubscribe_headers (ASCII, no CR or LF, under the line limit)."""

    max_count = 1

    @classmethod
    def parse(cls, value: str, kwds: dict[str, Any]) -> None:
        kwds["parse_tree"] = None
        kwds["decoded"] = value

    def fold(self, *, policy: email.policy.Policy) -> str:
        return f"{self.name}: {self}{policy.linesep}"


_HEADERS = HeaderRegistry()
for _name in ("List-Unsubscribe", "List-Unsubscribe-Post"):
    _HEADERS.map_to_type(_name, _Verbatim)
_POLICY = email.policy.default.clone(header_factory=_HEADERS)


def _uri(value: str | None) -> str | None:
    return value if value is not None and _URI.fullmatch(value) else None


def unsubscribe_headers(one_click: str | None, configured: str | None) -> dict[str, str]:
    """The List-Unsubscribe headers of a message: its recipient's one-click link (`one_click`, an
    http(s) URL) and the operator's `configured` mailto beside it; without a link, the operator's
    URL or mailto alone. `List-Unsubscribe-Post` only for an https link (RFC 8058 asks for HTTPS)."""
    link = _uri(one_click) if one_click and one_click.lower().startswith(("https://", "http://")) else None
    operator = _uri(configured)
    if link is not None:
        uris = [link, *([operator] if operator and operator.lower().startswith("mailto:") else [])]
    else:
        uris = [operator] if operator else []
    headers = {"List-Unsubscribe": ", ".join(f"<{uri}>" for uri in uris)} if uris else {}
    if link is not None and link.lower().startswith("https://"):
        headers["List-Unsubscribe-Post"] = ONE_CLICK
    return headers


class _Server(TypedDict):
    """How to reach the SMTP server: aiosmtplib's arguments, the same for a send and a check."""

    hostname: str
    port: int
    use_tls: bool
    start_tls: bool
    timeout: float
    # A CA file for servers with a private CA; None: the system's trust store.
    cert_bundle: str | None


class EmailSender:
    """An SMTP submission client: STARTTLS on 587 by default, or implicit TLS (`tls=True`, 465)."""

    def __init__(
        self,
        host: str,
        sender: str,
        *,
        port: int = 587,
        starttls: bool = True,
        tls: bool = False,
        username: str | None = None,
        password: str | None = None,
        timeout: float = 30.0,
        list_unsubscribe: str | None = None,
        cert_bundle: str | None = None,
        allowed_domains: Collection[str] = (),
    ) -> None:
        if starttls and tls:
            raise ValueError("email: choose starttls or tls, not both")
        self._host = host
        self._port = port
        self._sender = sender
        self._server = _Server(
            hostname=host,
            port=port,
            use_tls=tls,
            start_tls=starttls,
            timeout=timeout,
            cert_bundle=cert_bundle,
        )
        self._username = username
        self._password = password
        self._list_unsubscribe = list_unsubscribe
        self._domain = sender.rpartition("@")[2] or None
        self._allowed_domains = tuple(allowed_domains)
        # The envelope sender: the address in `sender`, which may carry a display name.
        self._envelope_sender = parseaddr(sender)[1] or sender

    def __repr__(self) -> str:
        return f"EmailSender(host={self._host!r}, port={self._port}, sender={self._sender!r})"

    def build(self, recipient: Recipient, message: MailMessage) -> EmailMessage:
        """The MIME message as it will be sent (also what the `demo` command can write to a file)."""
        address = self.address_of(recipient)
        mail = EmailMessage(policy=_POLICY)
        mail["Subject"] = " ".join(message.subject.split())
        mail["From"] = self._sender
        name = (
            " ".join("".join(c for c in recipient.name if c.isprintable()).split()) if recipient.name else ""
        )
        mail["To"] = Address(display_name=name, addr_spec=address) if name else address
        mail["Date"] = formatdate(localtime=False, usegmt=True)
        mail["Message-ID"] = (
            f"<inno-notify.{message.key}@{self._domain or 'inno-notify.invalid'}>"
            if message.key and _KEY.fullmatch(message.key)
            else make_msgid(domain=self._domain)
        )
        mail["Auto-Submitted"] = "auto-generated"
        for name, value in unsubscribe_headers(message.unsubscribe_url, self._list_unsubscribe).items():
            mail[name] = value
        mail.set_content(message.text)
        mail.add_alternative(message.html, subtype="html")
        if message.images:
            html_part = mail.get_body(preferencelist=("html",))
            assert html_part is not None  # added just above
            for image in message.images:
                # Inline, not attachment: the picture belongs in the HTML, not in the attachment list.
                html_part.add_related(
                    image.png,
                    "image",
                    "png",
                    cid=f"<{image.cid}>",
                    filename=image.filename,
                    disposition="inline",
                )
        return mail

    def address_of(self, recipient: Recipient) -> str:
        """The one address the message goes to; ChannelError (permanent) with the reason if none."""
        if not recipient.email:
            raise ChannelError("email: recipient has no e-mail address", retryable=False)
        refusal = email_refusal(recipient.email, self._allowed_domains)
        if refusal is not None:
            raise ChannelError(f"email: {refusal}", retryable=False)
        return recipient.email

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        """Sends one message to the recipient's one address; returns its Message-ID."""
        if not isinstance(message, MailMessage):
            raise wrong_message("email", message)
        address = self.address_of(recipient)
        try:
            mail = self.build(recipient, message)
        except ValueError as exc:
            # The e-mail package rejects malformed header values.
            raise ChannelError(f"email: cannot build the message: {exc}", retryable=False) from None
        with self._failures():
            await aiosmtplib.send(
                mail,
                sender=self._envelope_sender,
                recipients=[address],
                username=self._username,
                password=self._password,
                **self._server,
            )
        return str(mail["Message-ID"])

    async def check(self) -> str:
        """Connects, negotiates TLS and logs in if configured, then quits (for `inno-notify check`)."""
        client = aiosmtplib.SMTP(**self._server)
        with self._failures():
            async with client:
                if self._username and self._password:
                    await client.login(self._username, self._password)
        return f"{self._host}:{self._port}"

    async def aclose(self) -> None:
        """Nothing to release: every send opens and closes its own SMTP session."""

    @contextmanager
    def _failures(self) -> Iterator[None]:
        """A refusal of the server as ChannelError (classified); the server out of reach as a
        retryable one."""
        try:
            yield
        except aiosmtplib.SMTPException as exc:
            raise self._classify(exc) from None
        except OSError as exc:
            raise ChannelError(
                f"email: cannot reach {self._host}:{self._port}: {exc.strerror or exc}", retryable=True
            ) from None

    def _classify(self, exc: aiosmtplib.SMTPException) -> ChannelError:
        secrets = [self._password, self._username]
        if isinstance(exc, aiosmtplib.SMTPRecipientsRefused):
            codes = [r.code for r in exc.recipients]
            detail = "; ".join(
                f"{r.recipient}: {r.code} {redact(r.message, secrets)}" for r in exc.recipients
            )
            permanent = all(code >= 500 for code in codes)
            return ChannelError(f"email: recipient refused: {detail}", retryable=not permanent)
        if isinstance(exc, aiosmtplib.SMTPAuthenticationError):
            return ChannelError(f"email: authentication failed ({exc.code})", retryable=exc.code < 500)
        if isinstance(exc, aiosmtplib.SMTPResponseException):
            text = redact(exc.message, secrets)
            return ChannelError(f"email: server replied {exc.code} {text}", retryable=exc.code < 500)
        text = redact(str(exc), secrets)
        if isinstance(exc, aiosmtplib.SMTPNotSupported):
            return ChannelError(f"email: {text}", retryable=False)
        # Timeouts, refused connections, dropped sessions.
        return ChannelError(f"email: {type(exc).__name__}: {text}", retryable=True)
