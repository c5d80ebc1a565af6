"""The dispatcher when things go wrong: a record that fails, a lease that runs out, a late outcome
of an expired claim, a provider that hangs or asks for an absurd wait.

Each test reproduces one defect of issue 12 on both databases. Where the fault is timing (a send
still in flight when something else happens) the sender is a scripted one of our own Sender
protocol, whose sends wait on events the test sets; where it is a provider's answer, the real
client talks to the fake Bot API or Web API.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event

from inno_notify.adapters.channels.base import ChannelError, Recipient, RenderedMessage, Sender
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.telegram import TelegramSender
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.outbox_repository import Outcomes
from inno_notify.domain.model import DeliveryStatus, DirectoryUser
from inno_notify.service.dispatcher import Dispatcher, DispatchOptions
from inno_notify.service.ratelimit import UNLIMITED
from tests.adapters.channels.conftest import SLACK_TOKEN, TELEGRAM_TOKEN
from tests.adapters.channels.fake_slack import FakeSlack, Scripted
from tests.adapters.channels.fake_telegram import FakeTelegram

from .support import T0, FakeClock, all_rows, finish, finished_job, renderer

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

PEOPLE = 20
USERS = {
    f"u{i}@example.com": DirectoryUser(
        f"u{i}@example.com", slack_user_id=f"U{i:04d}", telegram_chat_id=1000 + i, channels=("telegram",)
    )
    for i in range(PEOPLE)
}


class ScriptedSender:
    """Our Sender protocol: records every send; `script(n)` may make send number n wait or fail."""

    def __init__(self, script: Callable[[int], Any] | None = None) -> None:
        self.calls: list[int | None] = []
        self._script = script

    async def send(self, recipient: Recipient, message: RenderedMessage) -> str:
        number = len(self.calls)
        self.calls.append(recipient.telegram_chat_id)
        if self._script is not None:
            step = self._script(number)
            if asyncio.iscoroutine(step):
                await step
        return f"m{number}"

    async def aclose(self) -> None:
        return None


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def dispatcher(store: Store, senders: dict[str, Sender], clock: FakeClock, **kw: Any) -> Dispatcher:
    options: dict[str, Any] = {"group_wait_seconds": 0.0, "limits": UNLIMITED, "rand": lambda: 0.5}
    options.update(kw)
    return Dispatcher(store, senders, renderer(), DispatchOptions(**options), clock=clock, sleep=clock.sleep)


async def seed(store: Store, people: int = PEOPLE) -> None:
    jobs = [finished_job(f"j{i:02d}", owner=f"u{i}@example.com") for i in range(people)]
    await finish(store, jobs, USERS, T0, group_wait_seconds=0)


# --- a failed record cancels nothing --------------------------------------------------------------


@pytest.fixture
def failing_marks(monkeypatch: pytest.MonkeyPatch) -> Iterator[asyncio.Event]:
    """The store's mark of sent rows fails twice; the event is set once it has failed."""
    failed = asyncio.Event()
    real = Outcomes.sent
    failures = 0

    async def sent(self: Outcomes, rows: Any) -> int:
        nonlocal failures
        if failures < 2:
            failures += 1
            failed.set()
            raise ConnectionResetError("connection to the database was lost")
        return await real(self, rows)

    monkeypatch.setattr(Outcomes, "sent", sent)
    yield failed


async def test_a_failed_record_is_retried_and_cancels_no_send_in_flight(
    store: Store, clock: FakeClock, failing_marks: asyncio.Event
) -> None:
    """The first message is accepted and its record fails while 19 others are in flight: they are
    all sent once and recorded (before, the failure cancelled them and they went out again)."""
    await seed(store)
    sender = ScriptedSender(lambda n: None if n == 0 else failing_marks.wait())
    d = dispatcher(store, {"telegram": sender}, clock, concurrency=PEOPLE)

    assert await d.run_once(T0) == PEOPLE

    assert sorted(c for c in sender.calls if c is not None) == [1000 + i for i in range(PEOPLE)]
    rows = await all_rows(store)
    assert [r.status for r in rows] == [DeliveryStatus.SENT] * PEOPLE
    assert all(r.attempts == 1 for r in rows)
    # The retries waited 0.2 s and 0.4 s on the dispatcher's clock.
    assert clock.slept == [0.2, 0.4]
    assert await d.run_once(clock.advance(3600)) == 0
    assert len(sender.calls) == PEOPLE


async def test_a_database_error_while_recording_is_retried_on_a_fresh_connection(
    store: Store, clock: FakeClock
) -> None:
    """The first statement that records sent rows fails in the database driver's hands (on Postgres
    on the connection held for the round, which is then replaced); the others are in flight."""
    await seed(store)
    failed = asyncio.Event()

    def fail_first_sent_record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("UPDATE OUTBOX SET STATUS") and not failed.is_set():
            failed.set()
            raise ConnectionResetError("server closed the connection unexpectedly")

    sender = ScriptedSender(lambda n: None if n == 0 else failed.wait())
    d = dispatcher(store, {"telegram": sender}, clock, concurrency=PEOPLE)
    event.listen(store.engine.sync_engine, "before_cursor_execute", fail_first_sent_record)
    try:
        handled = await d.run_once(T0)
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", fail_first_sent_record)

    assert failed.is_set()
    assert handled == PEOPLE
    assert len(sender.calls) == PEOPLE
    assert {r.status for r in await all_rows(store)} == {DeliveryStatus.SENT}


async def test_a_record_that_never_succeeds_gives_up_without_raising(
    store: Store, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(self: Outcomes, rows: Any) -> int:
        raise ConnectionRefusedError("database is down")

    monkeypatch.setattr(Outcomes, "sent", broken)
    await seed(store, 3)
    sender = ScriptedSender()
    d = dispatcher(store, {"telegram": sender}, clock, record_attempts=4)

    assert await d.run_once(T0) == 3
    assert len(sender.calls) == 3
    assert clock.slept == [0.2, 0.4, 0.8]
    # Not recorded: the rows stay leased and come back after the lease, as after a crash.
    rows = await all_rows(store)
    assert {(r.status, r.next_attempt_at) for r in rows} == {
        (DeliveryStatus.PENDING, T0 + timedelta(seconds=300))
    }


# --- claims, tokens and leases ---------------------------------------------------------------------


async def test_a_late_outcome_of_an_expired_claim_does_not_free_the_row_for_a_third_claim(
    store: Store, clock: FakeClock
) -> None:
    """Dispatcher A's send hangs past its lease; B claims the row and is sending it when A's send
    fails and A records a retry. That retry must not touch B's row: before, it moved the row's
    next attempt before B's lease ended, and a third dispatcher sent it again."""
    await seed(store, 1)
    a_sending, a_may_fail = asyncio.Event(), asyncio.Event()
    b_sending, b_may_finish = asyncio.Event(), asyncio.Event()

    async def a_send() -> None:
        a_sending.set()
        await a_may_fail.wait()
        raise ChannelError("telegram: bad gateway", retryable=True)

    async def b_send() -> None:
        b_sending.set()
        await b_may_finish.wait()

    a = dispatcher(store, {"telegram": ScriptedSender(lambda n: a_send())}, clock, lease_seconds=120)
    b_sender = ScriptedSender(lambda n: b_send())
    b = dispatcher(store, {"telegram": b_sender}, clock, lease_seconds=120)
    c_sender = ScriptedSender()
    c = dispatcher(store, {"telegram": c_sender}, clock, lease_seconds=120)

    a_round = asyncio.create_task(a.run_once(T0))
    await a_sending.wait()
    b_round = asyncio.create_task(b.run_once(clock.advance(120)))
    await b_sending.wait()
    a_may_fail.set()
    assert await a_round == 1
    # A's retry would have been due 0.5 s after its failure: a third dispatcher comes later.
    assert await c.run_once(clock.advance(5)) == 0
    b_may_finish.set()
    assert await b_round == 1

    assert c_sender.calls == []
    (row,) = await all_rows(store)
    assert (row.status, row.provider_message_id, row.attempts) == (DeliveryStatus.SENT, "m0", 2)


async def test_dispatchers_running_side_by_side_send_each_row_once(
    store: Store, clock: FakeClock, telegram_api: tuple[FakeTelegram, str]
) -> None:
    """Three dispatchers claim from one outbox at once, with the production claim, each through its
    own real Telegram client: every chat gets its summary exactly once."""
    fake, url = telegram_api
    fake.chats.update(1000 + i for i in range(PEOPLE))
    await seed(store)
    senders = [TelegramSender(TELEGRAM_TOKEN, url, timeout=5.0) for _ in range(3)]
    try:
        dispatchers = [dispatcher(store, {"telegram": s}, clock, batch_size=4) for s in senders]
        handled = 0
        for _ in range(PEOPLE):
            rounds = await asyncio.gather(*(d.run_once(T0) for d in dispatchers))
            handled += sum(rounds)
            if not any(rounds):
                break
    finally:
        for sender in senders:
            await sender.aclose()

    assert handled == PEOPLE
    assert sorted(chat for chat, _ in fake.sent()) == [1000 + i for i in range(PEOPLE)]
    assert {(r.status, r.attempts) for r in await all_rows(store)} == {(DeliveryStatus.SENT, 1)}


class SlowSender(ScriptedSender):
    """Each send takes `seconds` of the dispatcher's clock."""

    def __init__(self, clock: FakeClock, seconds: float) -> None:
        super().__init__(lambda n: clock.sleep(seconds))


async def test_a_round_never_starts_a_send_that_could_outlive_its_lease(
    store: Store, clock: FakeClock
) -> None:
    """Sends take 8 s each, one at a time, the lease is 100 s and a send may take 10 s: sends start
    at 0, 8, …, 88 s; the one at 96 s could end past the lease and is left for the next claim."""
    await seed(store)
    sender = SlowSender(clock, 8.0)
    d = dispatcher(
        store, {"telegram": sender}, clock, lease_seconds=100, send_timeout_seconds=10, concurrency=1
    )

    assert await d.run_once(T0) == 12
    assert len(sender.calls) == 12
    rows = await all_rows(store)
    assert sum(r.status is DeliveryStatus.SENT for r in rows) == 12
    left = [r for r in rows if r.status is DeliveryStatus.PENDING]
    assert len(left) == 8 and {r.next_attempt_at for r in left} == {T0 + timedelta(seconds=100)}

    # The next claim, once the lease ended, sends the rest (again within its own lease).
    clock.now = T0 + timedelta(seconds=100)
    assert await d.run_once(clock.now) == 8
    assert sorted(c for c in sender.calls if c is not None) == [1000 + i for i in range(PEOPLE)]


def test_a_send_timeout_must_fit_in_the_lease(store: Store) -> None:
    with pytest.raises(ValueError, match="shorter than lease_seconds"):
        Dispatcher(
            store,
            {},
            renderer(),
            DispatchOptions(lease_seconds=30, send_timeout_seconds=30),
            clock=FakeClock(),
        )


# --- providers that hang or ask for absurd waits -----------------------------------------------------


@pytest.fixture
async def telegram_sender(telegram_api: tuple[FakeTelegram, str]) -> AsyncIterator[TelegramSender]:
    sender = TelegramSender(TELEGRAM_TOKEN, telegram_api[1], timeout=5.0)
    yield sender
    await sender.aclose()


async def test_a_hung_provider_is_a_retryable_failure_after_the_send_timeout(
    store: Store, clock: FakeClock, telegram_api: tuple[FakeTelegram, str], telegram_sender: TelegramSender
) -> None:
    fake = telegram_api[0]
    fake.chats.add(1000)
    fake.hang = "stall"
    await seed(store, 1)
    d = dispatcher(store, {"telegram": telegram_sender}, clock, send_timeout_seconds=0.3)

    assert await d.run_once(T0) == 1

    (row,) = await all_rows(store)
    assert (row.status, row.next_attempt_at) == (DeliveryStatus.PENDING, T0 + timedelta(seconds=0.5))
    assert row.last_error == "telegram: no answer within 0.3 s"


@pytest.fixture
async def slack_sender(slack_api: tuple[FakeSlack, str]) -> AsyncIterator[SlackSender]:
    sender = SlackSender(SLACK_TOKEN, slack_api[1], timeout=5.0)
    yield sender
    await sender.aclose()


# (Retry-After header, give-up after, status, next attempt after the failure or reason prefix)
ABSURD_WAITS = [
    ("1e12", 86400.0, DeliveryStatus.PENDING, 3600.0),
    ("inf", 86400.0, DeliveryStatus.PENDING, 3600.0),
    ("1e400", 86400.0, DeliveryStatus.PENDING, 3600.0),
    ("NaN", 86400.0, DeliveryStatus.PENDING, 0.5),
    ("-30", 86400.0, DeliveryStatus.PENDING, 0.0),
    ("soon", 86400.0, DeliveryStatus.PENDING, 0.5),
    ("1e12", 1800.0, DeliveryStatus.FAILED, "gave up: the provider asked to wait 1 h 0 min"),
]


@pytest.mark.parametrize(("header", "give_up", "status", "then"), ABSURD_WAITS)
async def test_a_providers_retry_after_is_clamped(
    store: Store,
    clock: FakeClock,
    slack_api: tuple[FakeSlack, str],
    slack_sender: SlackSender,
    header: str,
    give_up: float,
    status: DeliveryStatus,
    then: float | str,
) -> None:
    fake = slack_api[0]
    fake.users["u0@example.com"] = "U0000"
    fake.scripted.append(Scripted(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": header}))
    job = finished_job("j00", owner="u0@example.com", channels=("slack",))
    await finish(store, [job], USERS, T0, group_wait_seconds=0)
    d = dispatcher(store, {"slack": slack_sender}, clock, give_up_after_seconds=give_up)

    assert await d.run_once(T0) == 1

    (row,) = await all_rows(store)
    assert row.status is status
    if isinstance(then, float):
        assert row.next_attempt_at == T0 + timedelta(seconds=then)
        assert row.last_error == "slack chat_postMessage: ratelimited"
    else:
        assert row.last_error is not None and row.last_error.startswith(then)
    assert len(fake.posted()) == 1


async def test_a_retry_after_of_a_trillion_seconds_from_telegram_is_clamped(
    store: Store, clock: FakeClock, telegram_api: tuple[FakeTelegram, str], telegram_sender: TelegramSender
) -> None:
    fake = telegram_api[0]
    fake.chats.add(1000)
    fake.scripted.append(
        (
            429,
            {
                "ok": False,
                "error_code": 429,
                "description": "Too Many Requests",
                "parameters": {"retry_after": 10**12},
            },
        )
    )
    await seed(store, 1)
    d = dispatcher(store, {"telegram": telegram_sender}, clock)

    assert await d.run_once(T0) == 1
    (row,) = await all_rows(store)
    assert (row.status, row.next_attempt_at) == (DeliveryStatus.PENDING, T0 + timedelta(hours=1))


# --- a message that arrived before its claim was lost is not posted again (Slack) ------------------


SLACK_USERS = {
    f"s{i}@example.com": DirectoryUser(f"s{i}@example.com", slack_user_id=f"U{i:04d}", channels=("slack",))
    for i in range(3)
}


@pytest.fixture
def slack_people(slack_api: tuple[FakeSlack, str], clock: FakeClock) -> FakeSlack:
    fake, _ = slack_api
    fake.users.update({email: user.slack_user_id or "" for email, user in SLACK_USERS.items()})
    fake.ts_base = int(clock().timestamp()) + 1  # posts are made after the rows were written
    return fake


@pytest.fixture
async def slack_leaders(
    store: Store, clock: FakeClock, slack_api: tuple[FakeSlack, str]
) -> AsyncIterator[Callable[..., Dispatcher]]:
    """Dispatchers, each with a real Slack client of its own (a leader each), closed after the test."""
    senders: list[SlackSender] = []

    def leader(**options: Any) -> Dispatcher:
        senders.append(SlackSender(SLACK_TOKEN, slack_api[1], timeout=5.0))
        return dispatcher(store, {"slack": senders[-1]}, clock, lease_seconds=120, **options)

    yield leader
    for sender in senders:
        await sender.aclose()


async def summaries_due(store: Store, clock: FakeClock, people: int = len(SLACK_USERS)) -> None:
    jobs = [finished_job(f"s{i}", owner=email) for i, email in enumerate(list(SLACK_USERS)[:people])]
    await finish(store, jobs, SLACK_USERS, clock(), group_wait_seconds=0)


async def test_a_slack_post_accepted_but_never_recorded_is_found_and_not_posted_again(
    store: Store,
    clock: FakeClock,
    slack_people: FakeSlack,
    slack_leaders: Callable[..., Dispatcher],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Leader A posts three summaries and dies before recording them (every record fails); B takes
    the claims over, finds each post in the DM's history by its metadata and records it as sent,
    under the post's id: Slack shows each summary once."""
    fake = slack_people
    await summaries_due(store, clock)
    real_sent = Outcomes.sent

    async def lost(self: Outcomes, rows: Any) -> int:
        raise ConnectionResetError("the leader died before its record")

    monkeypatch.setattr(Outcomes, "sent", lost)
    await slack_leaders(record_attempts=1).run_once(clock())
    assert len(fake.accepted_posts()) == 3
    assert {r.status for r in await all_rows(store)} == {DeliveryStatus.PENDING}

    monkeypatch.setattr(Outcomes, "sent", real_sent)
    assert await slack_leaders().run_once(clock.advance(121)) == 3

    assert len(fake.accepted_posts()) == 3
    rows = await all_rows(store)
    assert {r.status for r in rows} == {DeliveryStatus.SENT}
    posted_ids = {f"{channel}:{m['ts']}" for channel, messages in fake.history.items() for m in messages}
    assert {r.provider_message_id for r in rows} == posted_ids
    assert len(fake.calls_to("conversations.history")) == 3


async def test_a_slack_message_claimed_but_never_posted_is_posted_by_the_next_claim(
    store: Store, clock: FakeClock, slack_people: FakeSlack, slack_leaders: Callable[..., Dispatcher]
) -> None:
    """A leader claimed the rows and died before posting: the history shows nothing, so the next
    claim posts each summary, once."""
    await summaries_due(store, clock)
    assert (await store.outbox.claim(clock(), 10, lease_seconds=120)).rows == 3

    assert await slack_leaders().run_once(clock.advance(121)) == 3

    assert len(slack_people.accepted_posts()) == 3
    assert len(slack_people.calls_to("conversations.history")) == 3
    assert {r.status for r in await all_rows(store)} == {DeliveryStatus.SENT}


async def test_a_slack_history_that_cannot_be_read_means_the_message_is_sent_again(
    store: Store, clock: FakeClock, slack_people: FakeSlack, slack_leaders: Callable[..., Dispatcher]
) -> None:
    """At least once comes first: a history Slack refuses to show (a token without im:history) does
    not hold a summary back."""
    await summaries_due(store, clock, people=1)
    await store.outbox.claim(clock(), 10, lease_seconds=120)
    slack_people.scripted.append(Scripted(200, {"ok": False, "error": "missing_scope"}))

    assert await slack_leaders().run_once(clock.advance(121)) == 1

    assert len(slack_people.accepted_posts()) == 1
    assert {r.status for r in await all_rows(store)} == {DeliveryStatus.SENT}
