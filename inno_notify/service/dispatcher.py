"""The dispatcher: takes due outbox rows, groups them, renders, sends, records. The one place that retries.

A round (`run_once`) claims a batch in one transaction (rows leased, so a crashed dispatcher's rows
come back when the lease runs out), loads the jobs' figures in a few queries, and sends the
messages concurrently within the channels' rate limits. Each message is recorded, for all its
rows at once, in the first commit after the provider accepted it (sends that finish together
share a commit): a duplicate can only come from a crash between the provider's answer and that
commit. Failures are classified by the channel (ChannelError);
what happens next (retry at, or failed with the reason) is decided by domain.delivery.

Job summaries (grouped per recipient) and weekly digests (one row per message, rendered by
service.digest's DigestMessages, built afresh each round so a digest and its chart are aggregated
once per team and week in a round) are claimed here; idle nudges stay pending for the code that
knows how to render them.

On Postgres a round's sent records go through one connection held for the round in autocommit: a
record is then one statement, one round trip, where a pooled transaction would cost a ping, BEGIN
and COMMIT besides. SQLite is in-process and keeps a transaction per flush.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import datetime
from functools import partial
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.channels.base import ChannelError, Recipient, RenderedMessage, Sender
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.views import SummaryView
from inno_notify.adapters.db import Store, dispatch_queries
from inno_notify.adapters.db.dispatch_queries import Summary
from inno_notify.domain.delivery import (
    DEFAULT_CAP_FACTOR,
    DEFAULT_MAX_PER_MESSAGE,
    Backoff,
    Fail,
    plan_batch,
)
from inno_notify.domain.delivery import after_failure as decide_after_failure
from inno_notify.domain.model import Channel, Notification, NotificationKind
from inno_notify.service.digest import DigestMessages
from inno_notify.service.pausing import pause
from inno_notify.service.ratelimit import DEFAULT_LIMITS, ChannelLimits, RateLimiter
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

HANDLED_KINDS = frozenset({NotificationKind.JOB_SUMMARY.value, NotificationKind.DIGEST.value})
# How long a flush of sent records waits for more sends to finish. Measured on the 2-core machine
# under load (bench/dispatch.py): without it a flush took 3.6 messages, with 5 ms 6.7, and fewer
# flushes mean fewer wake-ups of the database server; 5 ms is nothing next to a send.
DEFAULT_RECORD_LINGER = 0.005


class DigestSource(Protocol):
    """Renders one DIGEST outbox row for its channel (DigestMessages)."""

    async def render(self, row: Notification) -> RenderedMessage: ...


class Dispatcher:
    """Sends due job summaries and digests through the configured senders (keyed by channel name).

    `digest_renderer` and `digest_cluster` are what DigestMessages renders digest rows with
    (None: the built-in templates, and the figures of every cluster in the database).
    """

    def __init__(
        self,
        store: Store,
        senders: Mapping[str, Sender],
        renderer: Renderer,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        group_wait_seconds: float = 30.0,
        give_up_after_seconds: float = 86400.0,
        group_cap_factor: float = DEFAULT_CAP_FACTOR,
        max_per_message: int = DEFAULT_MAX_PER_MESSAGE,
        batch_size: int = 200,
        lease_seconds: float = 300.0,
        concurrency: int = 16,
        poll_seconds: float = 1.0,
        limits: Mapping[str, ChannelLimits] = DEFAULT_LIMITS,
        backoff: Backoff | None = None,
        rand: Callable[[], float] = random.random,
        telemetry: Telemetry | None = None,
        digest_renderer: DigestRenderer | None = None,
        digest_cluster: str | None = None,
        record_linger_seconds: float = DEFAULT_RECORD_LINGER,
    ) -> None:
        self._store = store
        self._senders = dict(senders)
        self._renderer = renderer
        self._clock = clock
        self._sleep = sleep
        self._group_wait = group_wait_seconds
        self._give_up = give_up_after_seconds
        self._cap_factor = group_cap_factor
        self._max_per_message = max_per_message
        self._batch_size = batch_size
        self._lease = lease_seconds
        self._concurrency = max(1, concurrency)
        self._poll = poll_seconds
        self._limiter = RateLimiter(limits, lambda: clock().timestamp(), sleep)
        self._backoff = backoff or Backoff()
        self._rand = rand
        self._telemetry = telemetry
        self._digest_renderer = digest_renderer or DigestRenderer()
        self._digest_cluster = digest_cluster
        self._linger = record_linger_seconds

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until `stop` is set; a round in progress finishes its sends first."""
        while not stop.is_set():
            try:
                handled = await self.run_once(self._clock())
                wait = 0.0 if handled else await self._idle_wait()
            except Exception:
                # The database went away or a bug surfaced: claimed rows come back after their
                # lease, so waiting and trying again loses nothing.
                log.exception("dispatch round failed; trying again in %.1f s", self._poll)
                wait = self._poll
            if wait > 0:
                await pause(wait, stop, self._sleep)

    async def run_once(self, now: datetime) -> int:
        """One round at `now`: returns how many outbox rows were settled (sent, retried or failed)."""
        planner = partial(
            plan_batch,
            now=now,
            group_wait_seconds=self._group_wait,
            cap_factor=self._cap_factor,
            max_per_message=self._max_per_message,
        )
        async with self._store.engine.begin() as conn:
            plan = await dispatch_queries.claim_batch(
                conn, now, self._batch_size, self._lease, planner, kinds=HANDLED_KINDS
            )
            if not plan.messages:
                return 0
            # Read in the claim's transaction: one pooled connection per round instead of two.
            keys = [
                (r.cluster, r.job_uid)
                for m in plan.messages
                for r in m
                if r.kind is NotificationKind.JOB_SUMMARY and r.cluster and r.job_uid
            ]
            summaries = await dispatch_queries.load_summaries(conn, keys) if keys else {}
        digests = DigestMessages(self._store, self._digest_renderer, cluster=self._digest_cluster)
        seats = asyncio.Semaphore(self._concurrency)
        async with self._recording() as recorder:

            async def deliver(message: Sequence[Notification]) -> None:
                async with seats:
                    await self._deliver(message, summaries, digests, recorder)

            async with asyncio.TaskGroup() as tasks:
                for message in plan.messages:
                    tasks.create_task(deliver(message))
        return sum(len(m) for m in plan.messages)

    @asynccontextmanager
    async def _recording(self) -> AsyncIterator[_SentRecorder]:
        engine = self._store.engine
        if engine.dialect.name != "postgresql":
            recorder = _SentRecorder(engine.begin, self._linger)
            try:
                yield recorder
            finally:
                await recorder.drain()
            return
        async with engine.connect() as conn:
            held = await conn.execution_options(isolation_level="AUTOCOMMIT")
            recorder = _SentRecorder(partial(_statement_on, held), self._linger)
            try:
                yield recorder
            finally:
                # Sends cancelled with a failing round may still have records queued: write them
                # before the connection goes back to the pool.
                await recorder.drain()

    async def _deliver(
        self,
        rows: Sequence[Notification],
        summaries: Mapping[tuple[str, str], Summary],
        digests: DigestSource,
        recorder: _SentRecorder,
    ) -> None:
        channel = rows[0].channel.value
        sender = self._senders.get(channel)
        if sender is None:
            await self._record_failure(rows, f"channel {channel} is not configured", retryable=False)
            return
        if rows[0].kind is NotificationKind.DIGEST:
            known = list(rows)
        else:
            known = [r for r in rows if (r.cluster or "", r.job_uid or "") in summaries]
            missing = [r for r in rows if (r.cluster or "", r.job_uid or "") not in summaries]
            if missing:
                await self._record_failure(missing, "job record not found", retryable=False)
            if not known:
                return
        recipient = recipient_of(known[0])
        try:
            message = await self._render(rows[0].channel, known, summaries, digests)
            async with self._limiter.slot(channel, limit_key(rows[0].channel, recipient)):
                message_id = await sender.send(recipient, message)
        except ChannelError as exc:
            await self._record_failure(known, exc.message, exc.retryable, exc.retry_after)
            return
        except _UnusableRow as exc:
            await self._record_failure(known, str(exc), retryable=False)
            return
        except Exception as exc:
            # A sender bug is not the recipient's fault: keep the rows and let them give up in time.
            log.exception("%s sender raised an unclassified error", channel)
            await self._record_failure(
                known, f"unexpected error: {type(exc).__name__}: {exc}", retryable=True
            )
            return
        await recorder.record([r.id for r in known if r.id is not None], message_id, self._clock())
        self._count(channel, "sent", len(known))
        log.debug("sent %d row(s) to %s on %s as %s", len(known), known[0].recipient, channel, message_id)

    async def _render(
        self,
        channel: Channel,
        rows: Sequence[Notification],
        summaries: Mapping[tuple[str, str], Summary],
        digests: DigestSource,
    ) -> RenderedMessage:
        if rows[0].kind is NotificationKind.DIGEST:
            try:
                return await digests.render(rows[0])
            except ValueError as exc:
                # A payload without team or week: no later attempt can render it.
                raise _UnusableRow(f"digest row cannot be rendered: {exc}") from None
        views = [SummaryView.from_records(*summaries[(r.cluster or "", r.job_uid or "")]) for r in rows]
        if len(views) == 1:
            return self._renderer.render_summary(channel, views[0])
        return self._renderer.render_group(channel, views)

    async def _record_failure(
        self,
        rows: Sequence[Notification],
        error: str,
        retryable: bool,
        retry_after: float | None = None,
    ) -> None:
        at = self._clock()
        retries: list[tuple[int, str, datetime]] = []
        failures: list[tuple[int, str]] = []
        for row in rows:
            if row.id is None:
                continue
            verdict = decide_after_failure(
                row,
                error=error,
                retryable=retryable,
                retry_after=retry_after,
                now=at,
                give_up_after_seconds=self._give_up,
                backoff=self._backoff,
                rand=self._rand,
            )
            if isinstance(verdict, Fail):
                failures.append((row.id, verdict.error))
            else:
                retries.append((row.id, verdict.error, verdict.at))
        async with self._store.engine.begin() as conn:
            await dispatch_queries.mark_retries(conn, retries)
            await dispatch_queries.mark_failures(conn, failures, at)
        self._count(rows[0].channel.value, "failed", len(failures))
        self._count(rows[0].channel.value, "retry", len(retries))
        if failures:
            log.warning("%d notification(s) to %s failed: %s", len(failures), rows[0].recipient, error)
        if retries:
            log.info("%d notification(s) to %s will be retried: %s", len(retries), rows[0].recipient, error)

    def _count(self, channel: str, outcome: str, rows: int) -> None:
        if self._telemetry is not None and rows:
            self._telemetry.sends.labels(channel, outcome).inc(rows)

    async def _idle_wait(self) -> float:
        async with self._store.engine.connect() as conn:
            upcoming = await dispatch_queries.next_due(conn, HANDLED_KINDS)
        if upcoming is None:
            return self._poll
        # New rows may be enqueued by another process at any time, so never sleep past one poll.
        return min(self._poll, max(0.0, (upcoming - self._clock()).total_seconds()))


class _UnusableRow(Exception):
    """A row that can never be rendered (its payload lacks what the message needs)."""


Transaction = Callable[[], AbstractAsyncContextManager[AsyncConnection]]


@asynccontextmanager
async def _statement_on(conn: AsyncConnection) -> AsyncIterator[AsyncConnection]:
    # On an autocommit connection BEGIN and COMMIT stay on our side: the statement commits itself.
    async with conn.begin():
        yield conn


class _SentRecorder:
    """Records accepted messages, several per statement when sends finish together.

    A commit per message caps a dispatcher at the database's commit rate; here a send that
    finishes while a flush is in flight waits for the next one, which takes everything queued
    meanwhile (group commit). No send waits longer than one flush it was not part of, and each
    caller returns only once its rows are recorded. `transaction` gives the connection each flush
    runs on, committed when it exits; a flush first lingers `linger` seconds (real time, not the
    dispatcher's clock: it only shapes batches) so that sends finishing together share it.
    """

    def __init__(self, transaction: Transaction, linger: float = 0.0) -> None:
        self._transaction = transaction
        self._linger = linger
        self._queue: list[tuple[list[int], str | None, datetime, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def record(self, ids: list[int], message_id: str | None, at: datetime) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((ids, message_id, at, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        await done

    async def drain(self) -> None:
        """Waits until everything queued so far is recorded (or its flush failed)."""
        if self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    async def _flush(self) -> None:
        while self._queue:
            if self._linger > 0:
                await asyncio.sleep(self._linger)
            batch, self._queue = self._queue, []
            rows = [(id, message_id, at) for ids, message_id, at, _ in batch for id in ids]
            try:
                async with self._transaction() as conn:
                    await dispatch_queries.mark_sent_many(conn, rows)
            except Exception as exc:
                for *_, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for *_, done in batch:
                if not done.done():
                    done.set_result(None)


def recipient_of(row: Notification) -> Recipient:
    """The addresses routing stored in the row's payload, plus the recipient's e-mail."""
    payload = row.payload
    chat = payload.get("telegram_chat_id")
    return Recipient(
        email=row.recipient if "@" in row.recipient else None,
        name=_text(payload.get("name")),
        telegram_chat_id=int(chat)
        if isinstance(chat, int | str) and str(chat).lstrip("-").isdigit()
        else None,
        slack_user_id=_text(payload.get("slack_user_id")),
        slack_channel=_text(payload.get("slack_channel")),
    )


def limit_key(channel: Channel, recipient: Recipient) -> str:
    """What the provider counts a per-recipient limit on: the chat, the Slack channel, the address."""
    if channel is Channel.TELEGRAM and recipient.telegram_chat_id is not None:
        return str(recipient.telegram_chat_id)
    if channel is Channel.SLACK:
        return recipient.slack_channel or recipient.slack_user_id or recipient.email or ""
    return recipient.email or ""


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


# Re-exported for callers that build a Dispatcher with explicit limits or a custom backoff.
__all__ = [
    "DEFAULT_LIMITS",
    "Backoff",
    "ChannelLimits",
    "DigestSource",
    "Dispatcher",
    "limit_key",
    "recipient_of",
]
