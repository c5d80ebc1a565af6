"""The dispatcher's pure decisions: retry or fail, and which rows form one message (the schedule:
tests/domain/test_backoff.py)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from inno_notify.domain.backoff import Backoff
from inno_notify.domain.delivery import (
    MAX_RETRY_AFTER_SECONDS,
    BatchPlan,
    Fail,
    Retry,
    after_failure,
    clamp_retry_after,
    plan_batch,
    ramped_concurrency,
)
from inno_notify.domain.model import Channel, Notification, NotificationKind

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
WAIT = 30.0


def s(seconds: float) -> timedelta:
    return timedelta(seconds=seconds)


def row(
    id: int,
    *,
    recipient: str = "alice@example.com",
    channel: Channel = Channel.TELEGRAM,
    created: float = 0.0,
    group: str | None = None,
    kind: NotificationKind = NotificationKind.JOB_SUMMARY,
    attempts: int = 0,
    next_at: float | None = None,
) -> Notification:
    """A row created `created` seconds after T0, due WAIT seconds later (what routing writes)."""
    created_at = T0 + s(created)
    due_at = created_at + s(WAIT)
    return Notification(
        id=id,
        dedup_key=f"k{id}",
        kind=kind,
        channel=channel,
        recipient=recipient,
        created_at=created_at,
        due_at=due_at,
        group_key=group,
        attempts=attempts,
        next_attempt_at=due_at if next_at is None else T0 + s(next_at),
        job_uid=f"uid-{id}",
        cluster="default",
    )


def ids(plan: BatchPlan) -> list[list[int | None]]:
    return [[r.id for r in message] for message in plan.messages]


def deferred(plan: BatchPlan) -> dict[int | None, float]:
    return {r.id: (at - T0).total_seconds() for r, at in plan.deferred}


def plan(due: Sequence[Notification], waiting: Sequence[Notification], at: float, **kw: int) -> BatchPlan:
    return plan_batch(due, waiting, T0 + s(at), WAIT, **kw)


def test_rows_to_one_recipient_within_the_window_are_one_message() -> None:
    first, second, third = row(1), row(2, created=10), row(3, created=29)
    result = plan([first], [second, third], at=30)
    assert ids(result) == [[1, 2, 3]]
    assert result.deferred == ()


def test_a_row_due_beyond_the_window_waits_for_its_own_time() -> None:
    assert ids(plan([row(1)], [row(2, created=29), row(3, created=31)], at=30)) == [[1, 2]]


def test_recipients_and_channels_are_separate_messages_oldest_first() -> None:
    due = [row(2, recipient="bob@example.com", created=1), row(1), row(3, channel=Channel.SLACK, created=2)]
    assert ids(plan(due, [], at=40)) == [[1], [2], [3]]


def test_other_kinds_are_never_grouped_and_waiting_ones_stay() -> None:
    due = [row(1, kind=NotificationKind.DIGEST), row(2, kind=NotificationKind.DIGEST)]
    waiting = [row(3, kind=NotificationKind.DIGEST, created=20)]
    assert ids(plan(due, waiting, at=40)) == [[1], [2]]


def test_nothing_fires_for_a_bucket_without_due_rows() -> None:
    # A companion of a digest row: a job summary not due yet waits for its own time.
    due = [row(1, kind=NotificationKind.DIGEST)]
    waiting = [row(2, created=20)]
    result = plan(due, waiting, at=31)
    assert ids(result) == [[1]]
    assert result.deferred == ()


# A sweep with group key "g": members created at these offsets; the set waits until WAIT after the
# last member, capped at 10 × WAIT after the first.
GROUP_CASES = [
    # (case, member offsets, planning time, expected message ids, expected deferrals {id: at});
    # a row whose next attempt is already the set's time is not rewritten.
    ("one member, due", [0], 30, [[1]], {}),
    ("last member not due yet: all wait for it", [0, 20], 30, [], {1: 50}),
    ("last member due: all go", [0, 20], 50, [[1, 2]], {}),
    ("sliding: a late member extends the wait", [0, 20, 45], 50, [], {1: 75, 2: 75}),
    ("cap: a never-ending sweep still reports", [0, 100, 200, 290], 300, [[1, 2, 3, 4]], {}),
    ("cap bounds the deferral", [0, 100, 200, 290], 230, [], {1: 300, 2: 300, 3: 300, 4: 300}),
]


@pytest.mark.parametrize(
    ("offsets", "at", "messages", "defers"), [c[1:] for c in GROUP_CASES], ids=[c[0] for c in GROUP_CASES]
)
def test_group_members_wait_for_each_other(
    offsets: list[float], at: float, messages: list[list[int]], defers: dict[int, float]
) -> None:
    rows = [row(i + 1, created=c, group="g") for i, c in enumerate(offsets)]
    now = T0 + s(at)
    due = [r for r in rows if r.next_attempt_at is not None and r.next_attempt_at <= now]
    waiting = [r for r in rows if r not in due]
    result = plan(due, waiting, at=at)
    assert ids(result) == messages
    assert deferred(result) == defers


def test_a_deferred_row_is_not_deferred_again_to_the_same_time() -> None:
    first = row(1, group="g", next_at=50)
    second = row(2, group="g", created=20)
    result = plan([first], [second], at=50)
    assert ids(result) == [[1, 2]]
    result = plan([row(1, group="g", next_at=50)], [row(2, group="g", created=20, next_at=55)], at=50)
    # Set ready at 50 (the latest due): the first is due, so both go although the second was deferred.
    assert ids(result) == [[1, 2]]


def test_ungrouped_due_row_goes_while_a_set_of_the_same_recipient_waits() -> None:
    loose = row(1)
    sweep = [row(2, group="g", created=5), row(3, group="g", created=25)]
    result = plan([loose], sweep, at=30)
    assert ids(result) == [[1]]
    assert deferred(result) == {2: 55}


def test_a_ready_set_takes_the_loose_rows_of_its_recipient_along() -> None:
    sweep = [row(1, group="g"), row(2, group="g", created=10)]
    loose = row(3, created=20)
    result = plan(sweep, [loose], at=40)
    assert ids(result) == [[1, 2, 3]]


def test_two_sets_of_one_recipient_wait_independently() -> None:
    a = [row(1, group="a"), row(2, group="a", created=5)]
    b = [row(3, group="b", created=1), row(4, group="b", created=40)]
    result = plan([a[0], a[1], b[0]], [b[1]], at=36)
    assert ids(result) == [[1, 2]]
    assert deferred(result) == {3: 70}


def test_a_retried_row_takes_new_rows_along() -> None:
    retried = row(1, attempts=2, next_at=100)
    fresh = row(2, created=90)
    assert ids(plan([retried], [fresh], at=100)) == [[1, 2]]


def test_big_groups_are_split_at_max_per_message() -> None:
    rows = [row(i, created=i * 0.1) for i in range(1, 8)]
    result = plan(rows[:1], rows[1:], at=31, max_per_message=3)
    assert ids(result) == [[1, 2, 3], [4, 5, 6], [7]]


def test_a_row_listed_as_due_and_waiting_counts_once() -> None:
    first = row(1)
    assert ids(plan([first], [first, row(2, created=1)], at=30)) == [[1, 2]]


# (case, retryable, retry_after, attempts, seconds since due, expected)
FAILURE_CASES: list[tuple[str, bool, float | None, int, float, Retry | Fail]] = [
    ("permanent", False, None, 1, 0, Fail("boom")),
    ("permanent even with retry_after", False, 5.0, 1, 0, Fail("boom")),
    ("first retry: backoff", True, None, 1, 0, Retry(T0 + s(WAIT + 0.5), "boom")),
    ("third retry: backoff grows", True, None, 3, 10, Retry(T0 + s(WAIT + 10 + 1.125), "boom")),
    ("provider's retry_after wins", True, 7.0, 1, 0, Retry(T0 + s(WAIT + 7), "boom")),
    ("retry_after of 0", True, 0.0, 5, 0, Retry(T0 + s(WAIT), "boom")),
    ("just before give-up", True, None, 40, 119.9, Retry(T0 + s(WAIT + 119.9 + 60), "boom")),
    ("give-up reached", True, None, 40, 120, Fail("gave up after 2 min 0 s: boom")),
    ("give-up long after", True, 3.0, 400, 86400, Fail("gave up after 24 h 0 min: boom")),
]


@pytest.mark.parametrize(
    ("retryable", "retry_after", "attempts", "since_due", "expected"),
    [c[1:] for c in FAILURE_CASES],
    ids=[c[0] for c in FAILURE_CASES],
)
def test_after_failure(
    retryable: bool, retry_after: float | None, attempts: int, since_due: float, expected: Retry | Fail
) -> None:
    failed = replace(row(1), attempts=attempts)
    verdict = after_failure(
        failed,
        error="boom",
        retryable=retryable,
        retry_after=retry_after,
        now=failed.due_at + s(since_due),
        give_up_after_seconds=120,
        backoff=Backoff(),
        rand=lambda: 0.5,
    )
    assert verdict == expected


# (what a provider answered, the wait the dispatcher uses; None: our backoff)
RETRY_AFTER_CASES: list[tuple[object, float | None]] = [
    (7.0, 7.0),
    (0, 0.0),
    (-5.0, 0.0),
    (-1e308, 0.0),
    (1e12, MAX_RETRY_AFTER_SECONDS),
    (3600.5, MAX_RETRY_AFTER_SECONDS),
    (float("inf"), MAX_RETRY_AFTER_SECONDS),
    (float("-inf"), 0.0),
    (float("nan"), None),
    (10**400, MAX_RETRY_AFTER_SECONDS),
    (-(10**400), 0.0),
    ("30", 30.0),
    (" 1e12 ", MAX_RETRY_AFTER_SECONDS),
    ("1e400", MAX_RETRY_AFTER_SECONDS),
    ("inf", MAX_RETRY_AFTER_SECONDS),
    ("NaN", None),
    ("Wed, 21 Oct 2026 07:28:00 GMT", None),
    ("", None),
    ("9" * 5000, None),
    (None, None),
    (True, None),
    ([], None),
]


@pytest.mark.parametrize(
    ("answered", "expected"), RETRY_AFTER_CASES, ids=[repr(c[0])[:30] for c in RETRY_AFTER_CASES]
)
def test_clamp_retry_after(answered: object, expected: float | None) -> None:
    assert clamp_retry_after(answered) == expected


# (provider's Retry-After, give-up after, expected); the row failed at its due time + 10 s.
HOSTILE_WAITS: list[tuple[float, float, Retry | Fail]] = [
    (1e12, 86400, Retry(T0 + s(WAIT + 10 + 3600), "429")),
    (float("inf"), 86400, Retry(T0 + s(WAIT + 10 + 3600), "429")),
    (float("nan"), 86400, Retry(T0 + s(WAIT + 10 + 0.5), "429")),
    (-3.0, 86400, Retry(T0 + s(WAIT + 10), "429")),
    (50.0, 60, Retry(T0 + s(WAIT + 60), "429")),
    (
        51.0,
        60,
        Fail(
            "gave up: the provider asked to wait 51 s, past the give-up deadline (1 min 0 s after due): 429"
        ),
    ),
    (
        1e12,
        1800,
        Fail(
            "gave up: the provider asked to wait 1 h 0 min, past the give-up deadline "
            "(30 min 0 s after due): 429"
        ),
    ),
]


@pytest.mark.parametrize(("retry_after", "give_up", "expected"), HOSTILE_WAITS)
def test_a_providers_wait_is_clamped_and_never_past_the_give_up_deadline(
    retry_after: float, give_up: float, expected: Retry | Fail
) -> None:
    failed = replace(row(1), attempts=1)
    verdict = after_failure(
        failed,
        error="429",
        retryable=True,
        retry_after=retry_after,
        now=failed.due_at + s(10),
        give_up_after_seconds=give_up,
        backoff=Backoff(),
        rand=lambda: 0.5,
    )
    assert verdict == expected


# --- the ramp of a started dispatcher ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("running", "ramp", "maximum", "expected"),
    [
        (0.0, 30.0, 16, 1),  # just started: one message in flight
        (1.9, 30.0, 16, 1),
        (2.0, 30.0, 16, 2),  # one more seat each 30 / 15 s
        (15.0, 30.0, 16, 8),
        (29.9, 30.0, 16, 15),
        (30.0, 30.0, 16, 16),  # the ramp is over
        (3600.0, 30.0, 16, 16),
        (-5.0, 30.0, 16, 1),  # a clock that stepped back: still at the start
        (float("nan"), 30.0, 16, 16),  # no sense of time: no ramp
        (0.0, 0.0, 16, 16),  # no ramp
        (0.0, -1.0, 16, 16),
        (10.0, 30.0, 1, 1),
        (10.0, 30.0, 0, 1),  # at least one message, however configured
    ],
)
def test_a_started_dispatcher_ramps_up_to_its_concurrency(
    running: float, ramp: float, maximum: int, expected: int
) -> None:
    assert ramped_concurrency(running, ramp, maximum) == expected
