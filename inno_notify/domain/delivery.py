"""The dispatcher's decisions, kept pure: which claimed rows form one message, when to retry, when to give up.

Grouping (CONTRACT.md §6): rows of one kind to the same recipient on the same channel form a bucket
(job summaries and pipeline messages; other kinds go one row per message). A bucket fires when one
of its ungrouped rows is due, or when one of its `inno-notify/group` sets is ready; it then takes
every ungrouped row it holds (those that became due within the window of the first ride along) and
every ready set. A set is ready once no new member has arrived for `group_wait` (each row is due
`group_wait` after it was created, so that is the latest due time of the set), but no later than
`cap_factor × group_wait` after its first member, so a never-ending sweep still reports. Rows of a
set that is not ready are deferred to the time it will be.

A muted recipient's rows are held (`hold_muted`): due at the end of the mute, none lost, and since
they all come due at that one moment, the grouping above sends a recipient's held summaries as one
message per channel. A mute holds the channels it names only (a `/mute` from Telegram: Telegram;
`/mute all` or the API: every channel), so e-mail keeps flowing while a chat is muted. Bot replies
are never held: they answer what the person just asked.

Retries follow Alertmanager's schedule: 0.5 s × 1.5 per attempt up to 60 s, with jitter, unless
the provider said how long to wait; a failure the provider calls permanent, or any failure
after `give_up_after` seconds past the row's due time, ends the row as failed. A provider's wait
is whatever its answer said (`Retry-After: 1e12`, `inf`, `NaN`, `-5`), so it is clamped to
0 … MAX_RETRY_AFTER_SECONDS before any date arithmetic, and a wait that would end past the
give-up deadline fails the row now, with the reason, instead of parking it for that long.

A dispatcher that has just started (a new leader's term, a restarted process) ramps up
(`ramped_concurrency`): one message in flight at first, its full concurrency only after
`ramp_seconds`. Every message handed to a provider and not yet recorded when the process dies is
sent again by the next leader, and a process dies young more often than old: a new leader relists
the whole cluster (its CPU and memory peak), and a crash-looping one (a bad node, a memory limit
hit at the relist) would otherwise repeat up to a full set of in-flight messages at every crash.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from inno_notify.domain.backoff import Backoff
from inno_notify.domain.model import Notification, NotificationKind

DEFAULT_CAP_FACTOR = 10.0
DEFAULT_MAX_PER_MESSAGE = 500
# The longest wait a provider may impose on one row: an hour is more than any documented rate
# limit (Telegram and Slack ask for seconds to minutes), and it keeps `now + wait` a valid date.
MAX_RETRY_AFTER_SECONDS = 3600.0
# Kinds whose rows to one recipient and channel share a message within the group wait: job
# summaries, and pipeline messages (a pipeline posting in a loop is one message, not a flood).
GROUPED_KINDS = frozenset({NotificationKind.JOB_SUMMARY, NotificationKind.PIPELINE_EVENT})
# Kinds a mute does not hold: the bot's answers to the person's own commands.
UNHELD_KINDS = frozenset({NotificationKind.BOT_REPLY})


@dataclass(frozen=True, slots=True)
class Mute:
    """A running mute: until when, and on which channels (None: every channel)."""

    until: datetime
    channels: frozenset[str] | None = None

    def holds(self, channel: str, now: datetime) -> bool:
        return self.until > now and (self.channels is None or channel in self.channels)


@dataclass(frozen=True, slots=True)
class Retry:
    at: datetime
    error: str


@dataclass(frozen=True, slots=True)
class Fail:
    error: str


Verdict = Retry | Fail


def after_failure(
    row: Notification,
    *,
    error: str,
    retryable: bool,
    retry_after: float | None,
    now: datetime,
    give_up_after_seconds: float,
    backoff: Backoff,
    rand: Callable[[], float],
) -> Verdict:
    """What becomes of a row whose send failed at `now`.

    `row.attempts` counts this try. A provider's `retry_after` replaces our backoff (it knows when
    it will accept again), clamped by `clamp_retry_after`; past the give-up deadline the row fails
    with the last error, and so does a provider's wait that would end past it. Our own backoff
    (at most a minute) still gets its try after the deadline: the next failure ends the row.
    """
    if not retryable:
        return Fail(error)
    deadline = row.due_at + timedelta(seconds=give_up_after_seconds)
    if now >= deadline:
        return Fail(f"gave up after {_span(now - row.due_at)}: {error}")
    asked = clamp_retry_after(retry_after)
    if asked is None:
        return Retry(now + timedelta(seconds=backoff.delay(row.attempts, rand)), error)
    at = now + timedelta(seconds=asked)
    if at > deadline:
        return Fail(
            f"gave up: the provider asked to wait {_span(timedelta(seconds=asked))}, past the "
            f"give-up deadline ({_span(deadline - row.due_at)} after due): {error}"
        )
    return Retry(at, error)


def clamp_retry_after(value: object) -> float | None:
    """A provider's wait in seconds, within 0 … MAX_RETRY_AFTER_SECONDS; None if it is no number.

    Accepts what a channel passes on (a float, an int, a header string); NaN and text that is no
    number give None (our backoff applies), infinities and huge values the maximum, negatives 0.
    """
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        # An int too big for a float is still a wait, a very long one.
        seconds = float(value) if abs(value) < 2**1000 else (math.inf if value > 0 else -math.inf)
    elif isinstance(value, float):
        seconds = value
    elif isinstance(value, str) and len(value) <= 64:
        try:
            seconds = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    if math.isnan(seconds):
        return None
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


def ramped_concurrency(running_seconds: float, ramp_seconds: float, maximum: int) -> int:
    """How many messages may be in flight `running_seconds` after the dispatcher started: 1 at the
    start, rising linearly to `maximum` at `ramp_seconds` (no ramp: `maximum` at once)."""
    maximum = max(1, maximum)
    if ramp_seconds <= 0 or not running_seconds < ramp_seconds:  # NaN too: the full concurrency
        return maximum
    share = max(0.0, running_seconds) / ramp_seconds
    return min(maximum, 1 + math.floor(share * (maximum - 1)))


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """Messages to send now (each a tuple of rows, oldest first) and rows to put back until later."""

    messages: tuple[tuple[Notification, ...], ...]
    deferred: tuple[tuple[Notification, datetime], ...] = ()


BucketKey = tuple[str, str, str]


def bucket_of(row: Notification) -> BucketKey:
    """Rows that may share a message: same kind, channel and recipient."""
    return (row.kind.value, row.channel.value, row.recipient)


def plan_batch(
    due: Sequence[Notification],
    waiting: Sequence[Notification],
    now: datetime,
    group_wait_seconds: float,
    *,
    cap_factor: float = DEFAULT_CAP_FACTOR,
    max_per_message: int = DEFAULT_MAX_PER_MESSAGE,
) -> BatchPlan:
    """Groups claimed rows into messages.

    `due`: rows whose next attempt time has come. `waiting`: never-tried rows of the same buckets
    that are not due yet (candidates to ride along or to hold a group back). Only GROUPED_KINDS
    are grouped; any other kind goes out one row per message. Rows are told apart by their id.
    """
    buckets: dict[BucketKey, list[Notification]] = {}
    due_ids = {row.id for row in due}
    seen: set[int | None] = set()
    for row in [*due, *waiting]:
        if row.id in seen:
            continue
        seen.add(row.id)
        buckets.setdefault(bucket_of(row), []).append(row)

    messages: list[tuple[Notification, ...]] = []
    deferred: list[tuple[Notification, datetime]] = []
    cap = timedelta(seconds=cap_factor * group_wait_seconds)
    window = timedelta(seconds=group_wait_seconds)
    for rows in buckets.values():
        if rows[0].kind not in GROUPED_KINDS:
            messages.extend((row,) for row in rows if row.id in due_ids)
            continue
        # A row that is not due rides along only if it becomes due within the window (a row from
        # a writer whose clock runs ahead waits for its own time instead).
        ungrouped = [r for r in rows if r.group_key is None and (r.id in due_ids or r.due_at <= now + window)]
        sets: dict[str, list[Notification]] = {}
        for r in rows:
            if r.group_key is not None:
                sets.setdefault(r.group_key, []).append(r)
        ready: list[Notification] = []
        fires = any(r.id in due_ids for r in ungrouped)
        for members in sets.values():
            at = _set_ready_at(members, cap)
            if at <= now:
                ready.extend(members)
                fires = True
            else:
                deferred.extend((r, at) for r in members if r.next_attempt_at != at)
        if not fires:
            continue
        chosen = sorted([*ungrouped, *ready], key=_age)
        messages.extend(
            tuple(chosen[i : i + max_per_message]) for i in range(0, len(chosen), max_per_message)
        )
    messages.sort(key=lambda m: _age(m[0]))
    return BatchPlan(tuple(messages), tuple(deferred))


def hold_muted(
    due: Sequence[Notification], mutes: Mapping[str, Mute], now: datetime
) -> tuple[list[Notification], list[tuple[Notification, datetime]]]:
    """Splits due rows into those that may go now and those held until their recipient's mute ends.

    `mutes` is keyed by lower-case e-mail; a mute that has ended holds nothing, and a mute holds
    only rows on its channels. A held row is due again (and counts as due, for give-up and
    grouping) from the end of the mute.
    """
    free: list[Notification] = []
    held: list[tuple[Notification, datetime]] = []
    for row in due:
        found = mutes.get(row.recipient.strip().lower())
        if found is not None and found.holds(row.channel.value, now) and row.kind not in UNHELD_KINDS:
            held.append((row, found.until))
        else:
            free.append(row)
    return free, held


def _set_ready_at(members: Iterable[Notification], cap: timedelta) -> datetime:
    rows = list(members)
    sliding = max(r.due_at for r in rows)
    capped = min(r.created_at for r in rows) + cap
    return min(sliding, capped)


def _age(row: Notification) -> tuple[datetime, int]:
    return (row.due_at, row.id or 0)


def _span(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds} s"
