"""The dispatcher: takes due outbox rows, groups them, renders, sends, records. The one place that retries.

A round (`run_once`) claims a batch through the store's outbox repository: one transaction leases
the rows under a fresh claim token (a crashed dispatcher's rows come back when the lease runs
out) and reads the jobs' figures; the messages are then sent concurrently within the channels'
rate limits. Each message is recorded, for all its rows at once, in the first commit after the
provider accepted it (sends that finish together share a commit): a duplicate can only come from
a crash between the provider's answer and that commit. Failures are classified by the channel
(ChannelError); what happens next (retry at, or failed with the reason) is decided by
domain.delivery.

Nothing one message does may cost another: a send that raises, a provider that hangs (each send
has `send_timeout_seconds`), a failed record (retried on its own with backoff) all end in that
message's outcome, never in the round's TaskGroup, where they would cancel sends in flight that
the provider may already have accepted. A send starts only while its claim's lease will still
hold when the send's timeout is up, and while this replica's leadership certainly holds by its own
clock (leases.LeaseFence.holds: a process frozen past its lease finds out before it sends); later
ones are left to the next claim, so no round sends what another dispatcher may have claimed
meanwhile. A dispatcher that has just started (`run`: a new term, a restart) ramps up from one
message in flight to `concurrency` over `ramp_seconds`, claiming in proportion
(domain.delivery.ramped_concurrency says why).

What a claimed message says (rendered for its channel, with its chart and its key) comes from
service.message_composer; the dispatcher claims the kinds it composes (COMPOSED_KINDS).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from inno_notify.adapters.channels.base import (
    ChannelError,
    Recipient,
    Sender,
    SentLookup,
)
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.outbox_repository import Claim, Outcomes, SentRecord
from inno_notify.domain.backoff import Backoff
from inno_notify.domain.delivery import (
    DEFAULT_CAP_FACTOR,
    DEFAULT_MAX_PER_MESSAGE,
    Fail,
    plan_batch,
    ramped_concurrency,
)
from inno_notify.domain.delivery import after_failure as decide_after_failure
from inno_notify.domain.model import Channel, Notification
from inno_notify.options import from_setting
from inno_notify.service.message_composer import (
    COMPOSED_KINDS,
    MessageComposer,
    MessageParts,
    RoundComposer,
    UnusableRow,
    needs_job_records,
    row_ids,
)
from inno_notify.service.pausing import rounds
from inno_notify.service.ratelimit import DEFAULT_LIMITS, ChannelLimits, RateLimiter
from inno_notify.telemetry import Telemetry

log = logging.getLogger(__name__)

# How long a flush of sent records waits for more sends to finish. Measured on the 2-core machine
# under load (bench/dispatch.py): without it a flush took 3.6 messages, with 5 ms 6.7, and fewer
# flushes mean fewer wake-ups of the database server; 5 ms is nothing next to a send.
DEFAULT_RECORD_LINGER = 0.005
# The longest one send may take (the channels' own timeouts are per request; a Slack post with its
# chart is several): a provider that hangs past it counts as a retryable failure.
DEFAULT_SEND_TIMEOUT = 60.0
# Recording an outcome is tried this often, waiting 0.2, 0.4, 0.8 ... s (at most 5 s) in between:
# about half a minute, enough for a database fail-over, well inside a lease.
RECORD_ATTEMPTS = 8
RECORD_RETRY = Backoff(initial=0.2, factor=2.0, maximum=5.0, low=1.0, high=1.0)
# How long a started dispatcher takes to reach its full concurrency: longer than a new leader's
# relist of a large cluster, short next to the group wait a summary waits anyway.
DEFAULT_RAMP_SECONDS = 30.0


@dataclass(frozen=True, slots=True)
class DispatchOptions:
    """How the dispatcher claims, paces, groups, retries and gives up.

    `digest_cluster`: the cluster whose figures digests show (None: every cluster in the database).
    `cluster`: claim only that cluster's rows and those of no cluster (digests, pipeline events),
    for several clusters' services sharing one database (docs/scale.md); None: every row.
    `send_timeout_seconds` bounds one send and must be shorter than `lease_seconds`.
    `concurrency` messages are in flight at most, reached `ramp_seconds` after `run` started (a
    round called on its own, `run_once`, has the full concurrency). `backoff` and `rand` space the
    retries of a failed send (with jitter).
    """

    group_wait_seconds: float = from_setting("notify.group_wait_seconds", 30.0)
    give_up_after_seconds: float = from_setting("notify.give_up_after_seconds", 86400.0)
    group_cap_factor: float = DEFAULT_CAP_FACTOR
    max_per_message: int = DEFAULT_MAX_PER_MESSAGE
    batch_size: int = 200
    lease_seconds: float = 300.0
    send_timeout_seconds: float = DEFAULT_SEND_TIMEOUT
    concurrency: int = 16
    ramp_seconds: float = DEFAULT_RAMP_SECONDS
    poll_seconds: float = 1.0
    limits: Mapping[str, ChannelLimits] = field(default_factory=lambda: DEFAULT_LIMITS)
    backoff: Backoff = field(default_factory=Backoff)
    rand: Callable[[], float] = random.random
    digest_cluster: str | None = None
    cluster: str | None = from_setting("cluster", None)
    record_linger_seconds: float = DEFAULT_RECORD_LINGER
    record_attempts: int = RECORD_ATTEMPTS


class Dispatcher:
    """Sends due job summaries, digests, nudges and pipeline messages through the configured senders
    (keyed by channel name): claims, rate-limits, sends and records (DispatchOptions says how)."""

    def __init__(
        self,
        store: Store,
        senders: Mapping[str, Sender],
        renderer: Renderer,
        options: DispatchOptions | None = None,
        *,
        clock: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        telemetry: Telemetry | None = None,
        parts: MessageParts | None = None,
    ) -> None:
        opts = options or DispatchOptions()
        if not 0 < opts.send_timeout_seconds < opts.lease_seconds:
            raise ValueError(
                f"send_timeout_seconds ({opts.send_timeout_seconds}) must be positive and shorter than "
                f"lease_seconds ({opts.lease_seconds}): a send must end while its claim holds"
            )
        self._store = store
        self._senders = dict(senders)
        self._composer = MessageComposer(
            store, renderer, parts, clock=clock, digest_cluster=opts.digest_cluster
        )
        self._clock = clock
        self._sleep = sleep
        self._group_wait = opts.group_wait_seconds
        self._give_up = opts.give_up_after_seconds
        self._cap_factor = opts.group_cap_factor
        self._max_per_message = opts.max_per_message
        self._batch_size = opts.batch_size
        self._lease = opts.lease_seconds
        self._send_timeout = opts.send_timeout_seconds
        self._concurrency = max(1, opts.concurrency)
        self._ramp = opts.ramp_seconds
        self._started_at: datetime | None = None  # when `run` started: the ramp's origin
        self._poll = opts.poll_seconds
        self._limiter = RateLimiter(opts.limits, lambda: clock().timestamp(), sleep)
        self._backoff = opts.backoff
        self._rand = opts.rand
        self._telemetry = telemetry
        self._cluster = opts.cluster
        self._linger = opts.record_linger_seconds
        self._record_attempts = max(1, opts.record_attempts)

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds until `stop` is set; then the round in progress finishes the sends it started and
        gives back the rows it had not started (see run_once)."""
        self._started_at = self._clock()

        async def round_() -> float:
            handled = await self.run_once(self._clock(), stop)
            return 0.0 if handled else await self._idle_wait()

        # A failed round (the database went away, a bug surfaced): claimed rows come back after
        # their lease, so waiting and trying again loses nothing.
        await rounds(
            round_, stop, log=log, what="dispatch round", retry_seconds=self._poll, sleep=self._sleep
        )

    async def run_once(self, now: datetime, stop: asyncio.Event | None = None) -> int:
        """One round at `now`: returns how many outbox rows were settled (sent, retried or failed)
        or tried; rows whose send could not start before the lease ended are not counted.

        Once `stop` is set no further send starts: the rows not yet sent are given back (due now,
        unclaimed) for whoever claims next, the next leader included."""
        planner = partial(
            plan_batch,
            now=now,
            group_wait_seconds=self._group_wait,
            cap_factor=self._cap_factor,
            max_per_message=self._max_per_message,
        )
        concurrency = self.concurrency_at(now)
        # Claimed in proportion, so that a ramping round does not hold rows it will send slowly.
        batch = max(1, -(-self._batch_size * concurrency // self._concurrency))
        claim = await self._store.outbox.claim(
            now, batch, self._lease, planner, kinds=COMPOSED_KINDS, **self._scope()
        )
        if not claim.messages:
            return 0
        composer = self._composer.for_round(claim)
        seats = asyncio.Semaphore(concurrency)
        async with self._store.outbox.recorder(claim) as outcomes:
            recorder = _SentRecorder(
                lambda rows: self._persist(f"{len(rows)} sent row(s)", partial(outcomes.sent, rows)),
                self._linger,
                others_sending=lambda: round_.sending > 0,
            )
            round_ = _Round(claim, outcomes, recorder, stop)

            async def deliver(message: Sequence[Notification]) -> None:
                async with seats:
                    try:
                        await self._deliver(message, round_, composer)
                    except Exception:
                        # Never into the TaskGroup: it would cancel the other sends in flight.
                        log.exception("delivering %d row(s) to %s failed", len(message), message[0].recipient)

            try:
                async with asyncio.TaskGroup() as tasks:
                    for message in claim.messages:
                        tasks.create_task(deliver(message))
                if round_.given_back:
                    await self._persist(
                        f"{len(round_.given_back)} row(s) given back",
                        partial(outcomes.given_back, round_.given_back, self._clock()),
                    )
            finally:
                # Records still queued (a cancelled round) are written before the connection goes.
                await recorder.drain()
        if round_.given_back:
            log.info("stopping: %d claimed row(s) given back unsent", len(round_.given_back))
        if round_.left:
            log.info(
                "%d row(s) left for the next claim: their lease (or this replica's leadership) ran out "
                "before they could be sent",
                round_.left,
            )
        return claim.rows - round_.left - len(round_.given_back)

    async def _deliver(
        self,
        rows: Sequence[Notification],
        round_: _Round,
        composer: RoundComposer,
    ) -> None:
        if round_.give_back(rows):
            return
        summaries = round_.claim.summaries
        channel = rows[0].channel.value
        sender = self._senders.get(channel)
        if sender is None:
            await self._record_failure(
                round_.outcomes, rows, f"channel {channel} is not configured", retryable=False
            )
            return
        if not needs_job_records(rows[0]):
            known = list(rows)
        else:
            known = [r for r in rows if (r.cluster or "", r.job_uid or "") in summaries]
            missing = [r for r in rows if (r.cluster or "", r.job_uid or "") not in summaries]
            if missing:
                await self._record_failure(round_.outcomes, missing, "job record not found", retryable=False)
            if not known:
                return
        recipient = recipient_of(known[0])
        try:
            if await self._arrived_before(sender, recipient, known, round_):
                return
            message = await composer.compose(known)
            async with self._limiter.slot(channel, limit_key(rows[0].channel, recipient)):
                # The leadership too, on this process's own clock: after a freeze the rows may
                # already be another leader's, and a message handed over cannot be taken back.
                if not self._lease_holds(round_.claim) or not self._store.fence.holds():
                    round_.left += len(known)
                    return
                if round_.give_back(known):
                    return
                round_.sending += 1
                try:
                    async with asyncio.timeout(self._send_timeout):
                        message_id = await sender.send(recipient, message)
                finally:
                    round_.sending -= 1
        except ChannelError as exc:
            await self._record_failure(round_.outcomes, known, exc.message, exc.retryable, exc.retry_after)
            return
        except UnusableRow as exc:
            await self._record_failure(round_.outcomes, known, str(exc), retryable=False)
            return
        except TimeoutError:
            await self._record_failure(
                round_.outcomes,
                known,
                f"{channel}: no answer within {self._send_timeout:g} s",
                retryable=True,
            )
            return
        except Exception as exc:
            # A sender bug is not the recipient's fault: keep the rows and let them give up in time.
            log.exception("%s sender raised an unclassified error", channel)
            await self._record_failure(
                round_.outcomes, known, f"unexpected error: {type(exc).__name__}: {exc}", retryable=True
            )
            return
        await round_.recorder.record(row_ids(known), message_id, self._clock())
        self._count(channel, "sent", len(known))
        log.debug("sent %d row(s) to %s on %s as %s", len(known), known[0].recipient, channel, message_id)

    async def _arrived_before(
        self, sender: Sender, recipient: Recipient, rows: Sequence[Notification], round_: _Round
    ) -> bool:
        """Whether rows whose previous claim ended with their outcome unknown (its leader killed or
        frozen after the provider may have accepted them) already arrived, on a channel that can
        tell (SentLookup): then they are recorded as sent, under the provider's id, instead of being
        sent again. A channel that cannot be asked (an error, no answer in time) gets the message
        again: at least once comes first (CONTRACT §6)."""
        ids = row_ids(rows)
        # The unsure rows first: they are rare, and a check against a runtime Protocol is not cheap.
        if round_.claim.unsure.isdisjoint(ids) or not isinstance(sender, SentLookup):
            return False
        since = min((r.created_at for r in rows), default=self._clock())
        try:
            async with asyncio.timeout(self._send_timeout):
                found = await sender.find_sent(recipient, ids, since)
        except (ChannelError, TimeoutError) as exc:
            log.warning(
                "%s: could not tell whether %d row(s) arrived before: %s", rows[0].channel, len(ids), exc
            )
            return False
        if found is None:
            return False
        await round_.recorder.record(ids, found, self._clock())
        self._count(rows[0].channel.value, "found_sent", len(ids))
        log.info(
            "%d row(s) to %s had arrived before their claim was lost: recorded as %s",
            len(ids),
            rows[0].recipient,
            found,
        )
        return True

    def concurrency_at(self, now: datetime) -> int:
        """How many messages a round starting at `now` may have in flight (see ramp_seconds)."""
        if self._started_at is None:
            return self._concurrency
        running = (now - self._started_at).total_seconds()
        return ramped_concurrency(running, self._ramp, self._concurrency)

    def _lease_holds(self, claim: Claim) -> bool:
        """Whether a send starting now ends (or times out) before the claim's lease does."""
        return self._clock() + timedelta(seconds=self._send_timeout) <= claim.lease_until

    async def _record_failure(
        self,
        outcomes: Outcomes,
        rows: Sequence[Notification],
        error: str,
        retryable: bool,
        retry_after: float | None = None,
    ) -> None:
        """Records a failed send's verdict for its rows; never raises (see _persist)."""
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
        if retries:
            await self._persist(f"{len(retries)} retry row(s)", partial(outcomes.retry, retries))
        if failures:
            await self._persist(f"{len(failures)} failed row(s)", partial(outcomes.failed, failures, at))
        self._count(rows[0].channel.value, "failed", len(failures))
        self._count(rows[0].channel.value, "retry", len(retries))
        if failures:
            log.warning("%d notification(s) to %s failed: %s", len(failures), rows[0].recipient, error)
        if retries:
            log.info("%d notification(s) to %s will be retried: %s", len(retries), rows[0].recipient, error)

    async def _persist(self, what: str, write: Callable[[], Awaitable[int]]) -> int | None:
        """Runs one record, trying again with backoff; the rows it settled, None if every try failed.

        Never raises: a record that cannot be written leaves its rows leased, and they are sent
        again after the lease (the only duplicate this allows is the database being unreachable
        for all the tries). Rows settled fewer than given were claimed by someone else meanwhile.
        """
        for attempt in range(1, self._record_attempts + 1):
            try:
                return await write()
            except Exception as exc:
                if attempt >= self._record_attempts:
                    log.error(
                        "could not record %s after %d tries: %s: %s", what, attempt, type(exc).__name__, exc
                    )
                    return None
                delay = RECORD_RETRY.ceiling(attempt)
                log.warning(
                    "recording %s failed (%s: %s); trying again in %.1f s",
                    what,
                    type(exc).__name__,
                    exc,
                    delay,
                )
                await self._sleep(delay)
        return None

    def _count(self, channel: str, outcome: str, rows: int) -> None:
        if self._telemetry is not None and rows:
            self._telemetry.sends.labels(channel, outcome).inc(rows)

    def _scope(self) -> dict[str, Any]:
        """Which rows this dispatcher claims: with a cluster, its own and the rows of no cluster on
        a channel it can send on (another cluster's service may send on more)."""
        if self._cluster is None:
            return {}
        return {"cluster": self._cluster, "shared_channels": frozenset(self._senders)}

    async def _idle_wait(self) -> float:
        upcoming = await self._store.outbox.next_due(COMPOSED_KINDS, **self._scope())
        if upcoming is None:
            return self._poll
        # New rows may be enqueued by another process at any time, so never sleep past one poll.
        return min(self._poll, max(0.0, (upcoming - self._clock()).total_seconds()))


@dataclass(slots=True)
class _Round:
    """One round's claim, where its outcomes go, how many of its sends are with a provider now, and
    how many rows it left for the next claim."""

    claim: Claim
    outcomes: Outcomes
    recorder: _SentRecorder
    stop: asyncio.Event | None = None
    sending: int = 0
    left: int = 0
    given_back: list[int] = field(default_factory=list)

    def give_back(self, rows: Sequence[Notification]) -> bool:
        """True (and the rows noted) once the dispatcher is stopping: their send must not start."""
        if self.stop is None or not self.stop.is_set():
            return False
        self.given_back.extend(row.id for row in rows if row.id is not None)
        return True


class _SentRecorder:
    """Records accepted messages, several per statement when sends finish together.

    A commit per message caps a dispatcher at the database's commit rate; here a send that
    finishes while a flush is in flight waits for the next one, which takes everything queued
    meanwhile (group commit). No send waits longer than one flush it was not part of, and each
    caller returns once its rows are recorded or the recording gave up. A flush first lingers
    `linger` seconds (real time, not the dispatcher's clock: it only shapes batches) so that sends
    finishing together share it, but only while `others_sending()`: with no other send at a
    provider nothing can join, and a linger would only widen the window in which a crash sends
    the message again. `write` records a flush's rows and must not raise (the dispatcher's
    _persist retries it); if it does anyway, its callers still return. `sleep` is the linger's
    (asyncio's: real time).
    """

    def __init__(
        self,
        write: Callable[[list[SentRecord]], Awaitable[object]],
        linger: float = 0.0,
        others_sending: Callable[[], bool] = lambda: True,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._write = write
        self._linger = linger
        self._others_sending = others_sending
        self._sleep = sleep
        self._queue: list[tuple[list[int], str | None, datetime, asyncio.Future[None]]] = []
        self._flusher: asyncio.Task[None] | None = None

    async def record(self, ids: list[int], message_id: str | None, at: datetime) -> None:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.append((ids, message_id, at, done))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        await done

    async def drain(self) -> None:
        """Waits until everything queued so far is recorded (or its recording gave up)."""
        if self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)

    async def _flush(self) -> None:
        while self._queue:
            if self._linger > 0 and self._others_sending():
                await self._sleep(self._linger)
            batch, self._queue = self._queue, []
            rows = [(id, message_id, at) for ids, message_id, at, _ in batch for id in ids]
            try:
                settled = await self._write(rows)
            except Exception:
                log.exception("recording %d sent row(s) failed", len(rows))
            else:
                if isinstance(settled, int) and settled < len(rows):
                    log.warning(
                        "%d of %d sent row(s) were no longer held by this claim when recorded "
                        "(their lease ran out and another claim took them)",
                        len(rows) - settled,
                        len(rows),
                    )
            for *_, done in batch:
                if not done.done():
                    done.set_result(None)


def recipient_of(row: Notification) -> Recipient:
    """Where the channel sends the row: the address routing planned it with, plus the recipient's
    e-mail."""
    address = row.address
    return Recipient(
        email=row.recipient if "@" in row.recipient else None,
        name=address.name,
        telegram_chat_id=address.telegram_chat_id,
        slack_user_id=address.slack_user_id,
        slack_channel=address.slack_channel,
    )


def limit_key(channel: Channel, recipient: Recipient) -> str:
    """What the provider counts a per-recipient limit on: the chat, the Slack channel, the address."""
    if channel is Channel.TELEGRAM and recipient.telegram_chat_id is not None:
        return str(recipient.telegram_chat_id)
    if channel is Channel.SLACK:
        return recipient.slack_channel or recipient.slack_user_id or recipient.email or ""
    return recipient.email or ""


# Re-exported for callers that build a Dispatcher with explicit limits or a custom backoff.
__all__ = [
    "DEFAULT_LIMITS",
    "Backoff",
    "ChannelLimits",
    "Dispatcher",
    "limit_key",
    "recipient_of",
]
