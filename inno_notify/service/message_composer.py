"""What a claimed message says: its rows rendered for their channel, with its chart and its key.

The dispatcher claims, rate-limits, sends and records; what it sends comes from here. A message is
one of three sorts, each rendered by the channel's own templates (adapters.channels.render, one
per channel and kind):
- a weekly digest (one row), rendered by service.digest's DigestMessages, built afresh each round
  so that a digest and its chart are aggregated once per team and week in a round;
- a message that carries its content in the row (workflow summaries, "model is serving", pipeline
  messages, idle nudges, the bot's answers in Telegram chats), rendered from the payload;
- job summaries (grouped per recipient), rendered from the claim's job records with their charts
  (service.job_charts: series read once per round, pictures drawn off the loop).

An e-mail or Slack summary to a directory user without a Telegram chat carries the link that
connects one, minted as it is rendered (`telegram_link`, service.telegram_updates.LinkOffer).
Every message carries a key derived from its rows (the same on every retry): e-mail sends it as
the Message-ID (a resend after a crash collapses in mail clients), Slack as the post's metadata
(a later claim can find the post, dispatcher._arrived_before), the webhook in its
X-Inno-Notify-Key header with the row's recipient in its body. Every e-mail also carries its
recipient's signed one-click unsubscribe link (`unsubscribe`, domain.page_links), which the
e-mail sender puts in its List-Unsubscribe headers. And every message to a person (a recipient that
is an address) ends with the link to their own page (`personal_page`, domain.page_links, GET /me),
added by the renderer's one footer line (Renderer.with_personal_page) whatever the kind.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from inno_notify.adapters.channels.base import MailMessage, RenderedMessage, SlackMessage, WebhookMessage
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.outbox_repository import Claim
from inno_notify.domain.model import Notification, NotificationKind
from inno_notify.service.digest import DigestMessages
from inno_notify.service.digest_accounting import NO_ACCOUNTING, DigestAccounting
from inno_notify.service.job_charts import JobCharts, RoundCharts

# Rendered from what the row's payload carries (domain.messages, domain.live), without a job record.
PAYLOAD_KINDS = frozenset(
    {
        NotificationKind.WORKFLOW_SUMMARY,
        NotificationKind.MODEL_SERVING,
        NotificationKind.PIPELINE_EVENT,
        NotificationKind.BOT_REPLY,
        NotificationKind.IDLE_NUDGE,
    }
)
COMPOSED_KINDS = frozenset(
    {NotificationKind.JOB_SUMMARY.value, NotificationKind.DIGEST.value, *(k.value for k in PAYLOAD_KINDS)}
)


class UnusableRow(Exception):
    """A row that can never be rendered (its payload lacks what the message needs)."""


@dataclass(frozen=True, slots=True)
class MessageParts:
    """What messages are rendered with besides the summaries' renderer: the digests' renderer
    (None: the built-in templates), the jobs' charts (service.job_charts; None: text only), the
    Telegram link offer a message may carry, the unsubscribe link of an e-mail's recipient
    (PageLinks.unsubscribe; None: none) and the link to a recipient's own page (PageLinks.me; None:
    none)."""

    digest_renderer: DigestRenderer | None = None
    charts: JobCharts | None = None
    telegram_link: Callable[[Notification, datetime], str | None] | None = None
    unsubscribe: Callable[[str, datetime], str | None] | None = None
    personal_page: Callable[[str, datetime], str | None] | None = None
    # What digests are priced and budgeted with (accounting.rates, budgets); default: no costs.
    digest_accounting: DigestAccounting = NO_ACCOUNTING


def row_ids(rows: Sequence[Notification]) -> list[int]:
    return [r.id for r in rows if r.id is not None]


def message_key(rows: Sequence[Notification]) -> str:
    """A stable key of the message made of these outbox rows (their ids, in any order)."""
    ids = ",".join(str(i) for i in sorted(row_ids(rows)))
    return hashlib.sha256(ids.encode()).hexdigest()[:32]


def needs_job_records(row: Notification) -> bool:
    """Whether the row's message is rendered from job records the claim must have found."""
    return row.kind is not NotificationKind.DIGEST and row.kind not in PAYLOAD_KINDS


class MessageComposer:
    """Renders claimed messages for the dispatcher; one per dispatcher, shared by its rounds."""

    def __init__(
        self,
        store: Store,
        renderer: Renderer,
        parts: MessageParts | None = None,
        *,
        clock: Callable[[], datetime],
        digest_cluster: str | None = None,
    ) -> None:
        parts = parts or MessageParts()
        self._store = store
        self._renderer = renderer
        self._digest_renderer = parts.digest_renderer or DigestRenderer()
        self._charts = parts.charts
        self._telegram_link = parts.telegram_link
        self._unsubscribe = parts.unsubscribe
        self._personal_page = parts.personal_page
        self._clock = clock
        self._digest_cluster = digest_cluster
        self._digest_accounting = parts.digest_accounting

    def for_round(self, claim: Claim) -> RoundComposer:
        """The composer of one claim's messages (its digests and charts are read once for all)."""
        digests = DigestMessages(
            self._store,
            self._digest_renderer,
            cluster=self._digest_cluster,
            accounting=self._digest_accounting,
        )
        charts = self._charts.for_round(claim.summaries) if self._charts is not None else None
        return RoundComposer(self, claim, digests, charts)

    def link_for(self, row: Notification) -> str | None:
        return self._telegram_link(row, self._clock()) if self._telegram_link is not None else None

    def unsubscribe_for(self, row: Notification) -> str | None:
        """The one-click unsubscribe link of the e-mail `row` is for."""
        return self._unsubscribe(row.recipient, self._clock()) if self._unsubscribe is not None else None

    def personal_page_for(self, row: Notification) -> str | None:
        """The link to the own page of the person `row` is for (None for a team's channel)."""
        if self._personal_page is None or "@" not in row.recipient:
            return None
        return self._personal_page(row.recipient.strip(), self._clock())

    def payload_message(self, rows: Sequence[Notification]) -> RenderedMessage:
        """A message whose content travels in its rows (PAYLOAD_KINDS)."""
        kind = rows[0].kind
        try:
            if len(rows) > 1:  # pipeline messages grouped by plan_batch (GROUPED_KINDS)
                return self._renderer.render_payloads(rows[0].channel, kind, [r.payload for r in rows])
            return self._renderer.render_payload(
                rows[0].channel, kind, rows[0].payload, telegram_link=self.link_for(rows[0])
            )
        except ValueError as exc:
            raise UnusableRow(f"{kind.value} row cannot be rendered: {exc}") from None

    @property
    def renderer(self) -> Renderer:
        return self._renderer


class RoundComposer:
    """One claim's messages: `compose` renders one (raising UnusableRow for a row no attempt can
    render) and stamps it with its key."""

    def __init__(
        self, composer: MessageComposer, claim: Claim, digests: DigestMessages, charts: RoundCharts | None
    ) -> None:
        self._composer = composer
        self._summaries = claim.summaries
        self._digests = digests
        self._charts = charts

    async def compose(self, rows: Sequence[Notification]) -> RenderedMessage:
        message = await self._render(rows)
        personal_page = self._composer.personal_page_for(rows[0])
        if personal_page is not None:
            message = self._composer.renderer.with_personal_page(message, personal_page)
        if isinstance(message, MailMessage):
            return replace(
                message, key=message_key(rows), unsubscribe_url=self._composer.unsubscribe_for(rows[0])
            )
        if isinstance(message, SlackMessage):
            return replace(message, key=message_key(rows), rows=tuple(row_ids(rows)))
        if isinstance(message, WebhookMessage):
            return replace(message, key=message_key(rows), recipient=rows[0].recipient)
        return message

    async def _render(self, rows: Sequence[Notification]) -> RenderedMessage:
        if rows[0].kind is NotificationKind.DIGEST:
            try:
                return await self._digests.render(rows[0])
            except ValueError as exc:
                # A payload without team or week: no later attempt can render it.
                raise UnusableRow(f"digest row cannot be rendered: {exc}") from None
        if rows[0].kind in PAYLOAD_KINDS:
            return self._composer.payload_message(rows)
        keys = [(r.cluster or "", r.job_uid or "") for r in rows]
        extras = await self._charts.for_message(keys) if self._charts is not None else None
        views = [
            SummaryView.from_records(*self._summaries[key], series=extras.series.get(key) if extras else None)
            for key in keys
        ]
        images = extras.images if extras is not None else ()
        renderer, channel, link = self._composer.renderer, rows[0].channel, self._composer.link_for(rows[0])
        if len(views) == 1:
            return renderer.render_summary(channel, views[0], images=images, telegram_link=link)
        return renderer.render_group(channel, views, images=images, telegram_link=link)


__all__ = [
    "COMPOSED_KINDS",
    "MessageComposer",
    "MessageParts",
    "RoundComposer",
    "UnusableRow",
    "message_key",
    "needs_job_records",
    "row_ids",
]
