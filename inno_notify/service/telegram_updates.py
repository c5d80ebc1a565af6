"""The bot's ears: Telegram updates in (long polling on the leader, or a webhook), commands handled,
answers planned; and the "Get these on Telegram" link that summaries offer.

Each update is handled in one transaction of the store (adapters/db/telegram_bot.py): the decision
is domain.telegram_commands' (the commands every chat shares, domain.chat_commands), carried out
like every chat's (service.self_service), the answer an outbox row the dispatcher sends (so it is retried and
rate-limited like any message), and, when polling, the stored offset moves past the update in the
same commit. A restart therefore polls from the first update not handled; an update is never
handled twice, nor lost between handling and the offset.

- Polling (`channels.telegram.updates: polling`) runs on the leader only (a leader component,
  built per term); its writes are fenced, so a deposed leader's late update changes nothing. It
  first removes any webhook (Telegram refuses getUpdates while one is set).
- Webhook (`updates: webhook`): the leader registers `webhook_url` with its secret token; the API
  of whichever replica Telegram reaches checks the X-Telegram-Bot-Api-Secret-Token header and
  hands the update here (not fenced: every replica serves the API). An update delivered twice
  finds its answer planned and changes nothing.

An update that cannot be read, or whose handling fails `MAX_TRIES` times in a row, is set aside:
logged, counted in `inno_notify_rejected_objects_total{resource="TelegramUpdate"}`, and the offset
moves past it, so one bad update never deafens the bot. A failure that may pass (the database
away) keeps the offset where it is and is tried again after a pause.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from inno_notify.adapters.channels.base import ChannelError
from inno_notify.adapters.channels.telegram_updates import IncomingUpdate, TelegramUpdates, bot_id_of
from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.db.telegram_bot import BotTransaction
from inno_notify.domain.bot_replies import Reply
from inno_notify.domain.chat_commands import Decision
from inno_notify.domain.model import Channel, Notification, NotificationKind, RecipientAddress
from inno_notify.domain.preferences import Origin, Via
from inno_notify.domain.telegram_commands import decide, user_of_chat
from inno_notify.domain.telegram_linking import (
    MAX_EPOCH,
    deep_link,
    derive_key,
    derive_secret_token,
    link_allowed,
    mint,
)
from inno_notify.service.pausing import pause
from inno_notify.service.self_service import carry_out, mutes_of, reply_row
from inno_notify.settings import TelegramSettings, secret_value
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# Runs until the stop event is set (runtime.Component).
Component = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
# A failed handling of one update is tried this often (pausing in between) before it is set aside.
MAX_TRIES = 3
RETRY_PAUSE_SECONDS = 5.0
# How long the poller waits after getUpdates failed without a provider's wait (Retry-After).
POLL_BACKOFF_SECONDS = 5.0
# The kinds of message whose e-mail and Slack versions offer the link.
LINK_OFFER_KINDS = frozenset({NotificationKind.JOB_SUMMARY, NotificationKind.WORKFLOW_SUMMARY})
LINK_OFFER_CHANNELS = frozenset({Channel.EMAIL, Channel.SLACK})


def link_key(telegram: TelegramSettings) -> bytes | None:
    """The key that signs linking tokens: `link_secret`, else derived from the bot token."""
    explicit = secret_value(telegram.link_secret)
    if explicit:
        return derive_key(explicit, "telegram-link")
    token = secret_value(telegram.token)
    return derive_key(token, "telegram-link") if token else None


def webhook_secret(telegram: TelegramSettings) -> str | None:
    """The secret Telegram sends with each webhook request: `webhook_secret`, else derived."""
    explicit = secret_value(telegram.webhook_secret)
    if explicit:
        return explicit
    token = secret_value(telegram.token)
    return derive_secret_token(token, "telegram-webhook") if token else None


def self_service_enabled(telegram: TelegramSettings) -> bool:
    """A bot token, a bot username to link to, and updates that reach the bot."""
    return (
        bool(secret_value(telegram.token)) and telegram.bot_username is not None and telegram.updates != "off"
    )


@dataclass(frozen=True, slots=True)
class LinkOffer:
    """Mints the deep link that an e-mail or Slack summary to a person without a chat carries."""

    bot_username: str
    key: bytes
    ttl: timedelta
    nonce: Callable[[int], bytes] = secrets.token_bytes

    def __call__(self, row: Notification, now: datetime) -> str | None:
        """The link for the message `row` leads, or None when it offers none."""
        if row.channel not in LINK_OFFER_CHANNELS or row.kind not in LINK_OFFER_KINDS:
            return None
        # The person's link generation when the row was planned (None: they have a chat, stopped
        # it, or are not in the directory): a link since voids the token.
        epoch = row.address.telegram_link_epoch
        if epoch is None or "@" not in row.recipient or not 0 <= epoch <= MAX_EPOCH:
            return None
        token = mint(self.key, row.recipient, now, self.ttl, self.nonce(8), epoch)
        return deep_link(self.bot_username, token)


def link_offer(telegram: TelegramSettings) -> LinkOffer | None:
    """The dispatcher's link offer, when self-service linking is configured."""
    key = link_key(telegram)
    if not self_service_enabled(telegram) or key is None or telegram.bot_username is None:
        return None
    return LinkOffer(telegram.bot_username, key, timedelta(hours=telegram.link_ttl_hours))


def reply_key(bot_id: str, update_id: int) -> str:
    """The outbox key of the answer to one update: the marker that the update was handled."""
    return f"telegram/{bot_id}/update/{update_id}"


class UpdateHandler:
    """Handles one update in one transaction (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        key: bytes,
        bot_id: str,
        clock: Clock,
        *,
        timezone: str = "UTC",
        telemetry: Telemetry | None = None,
    ) -> None:
        self._store = store
        self._key = key
        self.bot_id = bot_id
        self._clock = clock
        self._timezone = timezone
        self._telemetry = telemetry

    async def handle(self, update: IncomingUpdate, *, polled: bool) -> None:
        """Handles `update`; with `polled` (the leader's poller) its writes are fenced and the stored
        offset moves past it. Raises what the store raised (nothing is kept then)."""
        message = update.message
        if update.unreadable is not None:
            self.set_aside(update.update_id, "unreadable", update.unreadable)
        if message is None:
            if polled and update.update_id >= 0:
                await self._store.directory.set_telegram_offset(self.bot_id, update.update_id + 1)
            return
        now = self._clock()
        async with self._store.directory.bot_transaction(fenced=polled) as tx:
            key = reply_key(self.bot_id, update.update_id)
            if await tx.handled(key):
                log.info("telegram update %d was handled before; nothing to do", update.update_id)
            else:
                users = await tx.users()
                linked = user_of_chat(users, message.chat_id)
                prefs = await tx.preferences(linked.email) if linked is not None else None
                decision = decide(message, users, now, self._key, self._timezone, muted_until=mutes_of(prefs))
                reply, changes = decision.reply, decision.changes
                told: tuple[int, Reply] | None = None
                if decision.grant is not None and decision.link_to is not None:
                    reply, changes, told = await self._link(tx, decision, message.chat_id, now)
                origin = Origin(Via.TELEGRAM, now, str(message.chat_id))
                reply = await carry_out(
                    tx,
                    reply,
                    changes,
                    origin,
                    now,
                    self._timezone,
                    status_of=decision.status_of,
                    new_link=decision.link_to,
                )
                rows = []
                if reply is not None:
                    rows.append(self._reply_row(key, message.chat_id, reply, now))
                if told is not None:
                    # The chat the person's messages moved away from hears of it, once per update.
                    rows.append(self._reply_row(f"{key}/previous", told[0], told[1], now))
                if rows:
                    await tx.enqueue(rows)
                if changes:
                    log.info(
                        "telegram chat %d: %s for %s",
                        message.chat_id,
                        reply.kind.value if reply is not None else "changes",
                        ", ".join(sorted(changes)),
                    )
            if polled:
                await tx.set_offset(self.bot_id, update.update_id + 1)

    @staticmethod
    async def _link(
        tx: BotTransaction, decision: Decision, chat_id: int, now: datetime
    ) -> tuple[Reply | None, Mapping[str, Mapping[str, Any]], tuple[int, Reply] | None]:
        """The answer, the changes and the notice to an old chat of a `/start <token>`: the token
        is recorded as used (a second use is refused), then held against the person's link epoch,
        locked until the commit (a token of an older generation is refused)."""
        grant, email = decision.grant, decision.link_to
        assert grant is not None and email is not None
        if not await tx.use_link_token(grant.token_id, email, chat_id, now, grant.expires_at):
            return decision.used_reply, {}, None
        refusal = link_allowed(grant, await tx.link_epoch(email, now))
        if refusal is not None:
            log.warning("telegram chat %d: a linking token of an older link generation was refused", chat_id)
            return decision.superseded_reply, {}, None
        told = None
        if decision.previous_chat is not None and decision.previous_reply is not None:
            told = (decision.previous_chat, decision.previous_reply)
            log.warning(
                "telegram: %s relinked from chat %d to chat %d", email, decision.previous_chat, chat_id
            )
        return decision.reply, decision.changes, told

    async def stored_offset(self) -> int:
        """The first update id not handled yet, as stored."""
        return await self._store.directory.telegram_offset(self.bot_id)

    def set_aside(self, update_id: int, reason: str, detail: str) -> None:
        log.warning("telegram update %d set aside (%s): %s", update_id, reason, detail)
        if self._telemetry is not None:
            self._telemetry.rejected_objects.labels("TelegramUpdate", reason).inc()

    @staticmethod
    def _reply_row(key: str, chat_id: int, reply: Reply, now: datetime) -> Notification:
        return reply_row(key, Channel.TELEGRAM, RecipientAddress(telegram_chat_id=chat_id), reply, now)


class UpdatePoller:
    """Long polling on the leader (a leader component: `run` until its term's stop is set)."""

    def __init__(
        self,
        client: TelegramUpdates,
        handler: UpdateHandler,
        *,
        poll_seconds: int = 30,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        retry_pause_seconds: float = RETRY_PAUSE_SECONDS,
    ) -> None:
        self._client = client
        self._handler = handler
        self._poll = poll_seconds
        self._sleep = sleep
        self._retry_pause = retry_pause_seconds
        self._failures: dict[int, int] = {}

    async def run(self, stop: asyncio.Event) -> None:
        offset: int | None = None
        while not stop.is_set():
            try:
                if offset is None:
                    await self._client.delete_webhook()
                    offset = await self._handler.stored_offset()
                    log.info("telegram: polling for updates from %d", offset)
                updates = await _unless_stopped(self._client.get_updates(offset, self._poll), stop)
                if updates is None:
                    break
                for update in updates:
                    if not await self._handle(update, stop):
                        break
                    offset = max(offset, update.update_id + 1)
            except LostLeadership:
                raise  # the leader work ends with it (service.leadership)
            except ChannelError as exc:
                log.warning("telegram: %s", exc.message)
                await pause(exc.retry_after or POLL_BACKOFF_SECONDS, stop, self._sleep)
            except Exception:
                # The database went away or a bug surfaced: nothing moved the offset, so waiting
                # and polling again loses no update.
                log.exception("telegram polling failed; trying again in %.0f s", POLL_BACKOFF_SECONDS)
                await pause(POLL_BACKOFF_SECONDS, stop, self._sleep)

    async def _handle(self, update: IncomingUpdate, stop: asyncio.Event) -> bool:
        """Handles one update; False when it failed and the batch should be polled again later."""
        try:
            await self._handler.handle(update, polled=True)
        except LostLeadership:
            raise
        except Exception as exc:
            tries = self._failures.get(update.update_id, 0) + 1
            if tries < MAX_TRIES:
                self._failures = {update.update_id: tries}
                log.warning(
                    "telegram update %d failed (%d of %d tries): %s: %s",
                    update.update_id,
                    tries,
                    MAX_TRIES,
                    type(exc).__name__,
                    exc,
                )
                await pause(self._retry_pause, stop, self._sleep)
                return False
            self._failures = {}
            self._handler.set_aside(update.update_id, "failed", f"{type(exc).__name__}: {exc}")
            await self._handler.handle(IncomingUpdate(update.update_id), polled=True)
            return True
        self._failures.pop(update.update_id, None)
        return True


class WebhookRegistration:
    """Registers the webhook once per term (a leader component), then waits for the term to end."""

    def __init__(
        self,
        client: TelegramUpdates,
        url: str,
        secret: str,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._client = client
        self._url = url
        self._secret = secret
        self._sleep = sleep

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self._client.set_webhook(self._url, self._secret)
                log.info("telegram: webhook registered")
                break
            except ChannelError as exc:
                log.warning("telegram setWebhook failed: %s", exc.message)
                await pause(exc.retry_after or POLL_BACKOFF_SECONDS, stop, self._sleep)
        await stop.wait()


WebhookHandler = Callable[[Mapping[str, object]], Awaitable[None]]


class TelegramBot:
    """The bot's parts for one process, built from the settings (None from `build` when off).

    `leader_components()`: what the leader runs per term (the poller, or the webhook's
    registration), each with a client of its own that ends with the term. `webhook`: the API's
    handler of a verified webhook body. `secret`: the webhook's secret token.
    """

    def __init__(
        self,
        telegram: TelegramSettings,
        timezone: str,
        store: Store,
        clock: Clock,
        telemetry: Telemetry | None,
    ) -> None:
        token = secret_value(telegram.token)
        key = link_key(telegram)
        assert token and key is not None
        self._telegram = telegram
        self._token = token
        self._api_url = telegram.api_url
        self.handler = UpdateHandler(
            store, key, bot_id_of(token), clock, timezone=timezone, telemetry=telemetry
        )
        self.secret = webhook_secret(telegram)
        # Reads webhook bodies (no request goes out through it).
        self._reader = TelegramUpdates(token, self._api_url)

    @classmethod
    def build(
        cls,
        telegram: TelegramSettings,
        timezone: str,
        store: Store,
        clock: Clock,
        telemetry: Telemetry | None = None,
    ) -> TelegramBot | None:
        """The bot (`channels.telegram`; replies dated in the digest's `timezone`), or None when
        self-service is off."""
        return cls(telegram, timezone, store, clock, telemetry) if self_service_enabled(telegram) else None

    @property
    def mode(self) -> str:
        return self._telegram.updates

    def leader_components(self) -> list[tuple[str, Component]]:
        telegram = self._telegram

        async def poll(stop: asyncio.Event) -> None:
            client = TelegramUpdates(self._token, self._api_url)
            try:
                await UpdatePoller(client, self.handler, poll_seconds=telegram.poll_timeout_seconds).run(stop)
            finally:
                await client.aclose()

        async def register(stop: asyncio.Event) -> None:
            client = TelegramUpdates(self._token, self._api_url)
            try:
                assert telegram.webhook_url is not None and self.secret is not None
                await WebhookRegistration(client, telegram.webhook_url, self.secret).run(stop)
            finally:
                await client.aclose()

        if self.mode == "polling":
            return [("telegram-updates", poll)]
        return [("telegram-webhook", register)]

    async def webhook(self, body: Mapping[str, object]) -> None:
        """Handles one update the API received (its secret already checked)."""
        await self.handler.handle(self._reader.read(body), polled=False)

    async def aclose(self) -> None:
        await self._reader.aclose()


async def _unless_stopped(
    call: Awaitable[list[IncomingUpdate]], stop: asyncio.Event
) -> list[IncomingUpdate] | None:
    """The call's result, or None (the call cancelled) once `stop` is set first: a long poll must not
    hold a term's end for its whole timeout."""
    task = asyncio.ensure_future(call)
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopping}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopping.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None
