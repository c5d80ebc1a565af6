"""The weekly digest scheduler: plans each team's digest rows in the outbox, once per team and week.

At every firing of `digest.schedule` (cron, in `digest.timezone`) the last complete ISO week's
digest is due for every team: one outbox row per lead and channel (plus one for the team's Slack
channel), and the admins' cluster digest: one e-mail per `digest.admin_recipients` address. The
dedup key `digest/{team}/{week}/{channel}/{recipient}` is unique in the outbox, so
enqueueing is idempotent: a restart, a second replica or a late round inserts nothing new, and
nothing is sent twice. The scheduler only plans; the dispatcher sends DIGEST rows, rendering them
with `DigestMessages` (figures aggregated by the database when the row is sent, so a resend
shows the same week).

A round plans the newest firing at or before `now`; a service started after a firing therefore
still sends that week's digest, but never older ones.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from inno_notify.adapters.channels.base import RenderedMessage
from inno_notify.adapters.channels.digest_chart import render_chart
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.db import Store
from inno_notify.adapters.db.leases import LostLeadership
from inno_notify.adapters.db.usage_queries import GroupBy, group_cells
from inno_notify.domain.cluster_digest import ClusterDigest
from inno_notify.domain.cluster_digest import build_cluster_digest as build_cluster_view
from inno_notify.domain.costs import Rates
from inno_notify.domain.digest import Digest, gpu_rates
from inno_notify.domain.model import (
    Channel,
    Notification,
    NotificationKind,
    RecipientAddress,
    Team,
)
from inno_notify.domain.routing import Directory, unsubscribed
from inno_notify.domain.trends import TREND_WEEKS, TrendGroup, trend_weeks
from inno_notify.domain.weeks import last_complete_week, week_bounds
from inno_notify.service.digest_accounting import NO_ACCOUNTING, DigestAccounting
from inno_notify.service.pausing import pause

log = logging.getLogger(__name__)

DEFAULT_POLL_SECONDS = 300.0


def digest_dedup_key(team: str, week: str, channel: str, recipient: str) -> str:
    return f"digest/{team}/{week}/{channel}/{recipient}"


# The admins' cluster digest: its payload's scope, and the dedup key's "team" part ("(" cannot
# start a Kubernetes-style team name, so no team's digest shares its keys).
CLUSTER_SCOPE = "cluster"
_CLUSTER_KEY = "(cluster)"


async def build_cluster_digest(
    store: Store,
    week: str,
    tz: str,
    *,
    cluster: str | None = None,
    adoption: Sequence[str] = (),
    rates: Rates | None = None,
) -> ClusterDigest:
    """The admins' digest of ISO `week` in zone `tz`: every team's and cluster's trend ending with it.
    `adoption` is the hook for advice adoption's lines (issue 17 part A). Where `rates` price
    GPU-hours, the teams are ranked by idle cost: the week's usage cells (per team and GPU model,
    the API's usage figures) priced per model, one more aggregation over the week's jobs."""
    weeks = trend_weeks(week, TREND_WEEKS)
    teams = await store.trends.weekly(TrendGroup.TEAM, weeks, tz, cluster=cluster)
    clusters = await store.trends.weekly(TrendGroup.CLUSTER, weeks, tz, cluster=cluster)
    idle_costs: dict[str, float | None] | None = None
    priced = gpu_rates(rates)
    if priced is not None:
        start, end = week_bounds(week, tz)
        cells = await store.usage.usage_cells(start, end, cluster)
        idle_costs = {
            g.key: None if g.cost is None else g.cost.idle
            for g in group_cells(cells, GroupBy.TEAM, priced)
            if g.key is not None
        }
    return build_cluster_view(
        week,
        tz,
        teams,
        clusters,
        adoption=adoption,
        idle_costs=idle_costs,
        currency=None if priced is None else priced.currency,
    )


def plan_cluster_digest(
    week: str,
    tz: str,
    *,
    due_at: datetime,
    now: datetime,
    recipients: Sequence[str],
    channels: Collection[str],
    email_off: Collection[str],
) -> list[Notification]:
    """The outbox rows of the admins' cluster digest: one e-mail per `digest.admin_recipients`
    address, when e-mail is configured, except to an address that unsubscribed from e-mail."""
    if Channel.EMAIL.value not in channels:
        return []
    return [
        Notification(
            dedup_key=digest_dedup_key(_CLUSTER_KEY, week, Channel.EMAIL.value, recipient),
            kind=NotificationKind.DIGEST,
            channel=Channel.EMAIL,
            recipient=recipient,
            due_at=due_at,
            created_at=now,
            payload={"scope": CLUSTER_SCOPE, "week": week, "timezone": tz},
        )
        for recipient in dict.fromkeys(r.lower() for r in recipients)
        if not unsubscribed(recipient, email_off)
    ]


def last_firing(schedule: str, tz: str, now: datetime) -> datetime:
    """The newest time at or before `now` at which the cron `schedule` fires in zone `tz`."""
    # croniter's get_prev is strictly before its start: start a microsecond later so that a
    # round exactly at the firing counts it.
    start = now.astimezone(ZoneInfo(tz)) + timedelta(microseconds=1)
    fired: datetime = croniter(schedule, start).get_prev(datetime)
    return fired.astimezone(UTC)


def next_firing(schedule: str, tz: str, now: datetime) -> datetime:
    fired: datetime = croniter(schedule, now.astimezone(ZoneInfo(tz))).get_next(datetime)
    return fired.astimezone(UTC)


def plan_digest(
    team: Team,
    week: str,
    tz: str,
    *,
    due_at: datetime,
    now: datetime,
    directory: Directory,
    channels: Collection[str],
) -> list[Notification]:
    """The outbox rows of one team's digest: each lead on each of the team's digest channels the
    service has configured (Telegram only for leads with a chat id, Mattermost by e-mail; e-mail
    not to a lead who unsubscribed from it, `directory.email_off`), and the team's Slack channel instead of
    Slack DMs where one is set; with the webhook configured, a copy to it per lead (the admins'
    cluster digest goes by e-mail only)."""
    rows: list[Notification] = []
    payload = {"team": team.name, "week": week, "timezone": tz}

    def add(channel: Channel, recipient: str, address: RecipientAddress) -> None:
        rows.append(
            Notification(
                dedup_key=digest_dedup_key(team.name, week, channel.value, recipient),
                kind=NotificationKind.DIGEST,
                channel=channel,
                recipient=recipient,
                due_at=due_at,
                created_at=now,
                address=address,
                payload=dict(payload),
            )
        )

    for name in dict.fromkeys(team.digest_channels):
        if name not in channels or name not in {c.value for c in Channel} or name == Channel.WEBHOOK.value:
            continue
        channel = Channel(name)
        if channel is Channel.SLACK and team.slack_channel:
            add(channel, team.slack_channel, RecipientAddress(slack_channel=team.slack_channel))
            continue
        for lead in dict.fromkeys(lead.lower() for lead in team.leads):
            user = directory.users.get(lead)
            # An empty name or Slack id in the directory is none (the channels would show it).
            name_ = (user.name or None) if user else None
            if channel is Channel.EMAIL:
                if not unsubscribed(lead, directory.email_off):
                    add(channel, lead, RecipientAddress(name=name_))
            elif channel is Channel.SLACK:
                slack_user_id = (user.slack_user_id or None) if user else None
                add(channel, lead, RecipientAddress(name=name_, slack_user_id=slack_user_id))
            elif channel is Channel.MATTERMOST:
                # Found by e-mail when sent (adapters.channels.mattermost).
                add(channel, lead, RecipientAddress(name=name_))
            elif user is not None and user.telegram_chat_id is not None:
                add(channel, lead, RecipientAddress(name=name_, telegram_chat_id=user.telegram_chat_id))
    if Channel.WEBHOOK.value in channels and team.digest_channels:
        # The webhook's copy: one per lead, whichever of the team's channels are configured.
        for lead in dict.fromkeys(lead.lower() for lead in team.leads):
            user = directory.users.get(lead)
            add(Channel.WEBHOOK, lead, RecipientAddress(name=(user.name or None) if user else None))
    return rows


class DigestScheduler:
    """Enqueues every team's weekly digest when `schedule` fires; safe to run in every replica."""

    def __init__(
        self,
        store: Store,
        *,
        schedule: str,
        timezone: str,
        channels: Collection[str],
        clock: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        teams: Sequence[Team] | None = None,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        admin_recipients: Sequence[str] = (),
    ) -> None:
        if not croniter.is_valid(schedule):
            raise ValueError(f"not a cron expression: {schedule!r}")
        ZoneInfo(timezone)
        self._store = store
        self._schedule = schedule
        self._tz = timezone
        self._channels = frozenset(channels)
        self._clock = clock
        self._sleep = sleep
        # None: the teams stored in the database (the configuration is synced there at startup).
        self._teams = None if teams is None else tuple(teams)
        self._poll = poll_seconds
        self._admins = tuple(admin_recipients)

    async def run_once(self, now: datetime) -> int:
        """Enqueues the digests of the newest firing at or before `now`; returns how many rows were new."""
        fired = last_firing(self._schedule, self._tz, now)
        week = last_complete_week(fired, self._tz)
        directory = await self._store.directory.snapshot()
        teams = self._teams if self._teams is not None else list(directory.teams.values())
        rows = [
            row
            for team in teams
            for row in plan_digest(
                team,
                week,
                self._tz,
                due_at=fired,
                now=now,
                directory=directory,
                channels=self._channels,
            )
        ]
        rows += plan_cluster_digest(
            week,
            self._tz,
            due_at=fired,
            now=now,
            recipients=self._admins,
            channels=self._channels,
            email_off=directory.email_off,
        )
        new = await self._store.outbox.enqueue(rows) if rows else 0
        if new:
            log.info("planned %d digest message(s) for %s", new, week)
        return new

    async def run(self, stop: asyncio.Event) -> None:
        """Rounds at each firing (and at least every poll interval) until `stop` is set."""
        while not stop.is_set():
            now = self._clock()
            try:
                await self.run_once(now)
            except LostLeadership:
                raise  # the leader work ends with it (service.leadership)
            except Exception:
                # The database is away: the next round plans the same week, nothing is lost.
                log.exception("digest round failed; trying again in %.0f s", self._poll)
            wait = (next_firing(self._schedule, self._tz, now) - now).total_seconds()
            await pause(min(self._poll, max(0.0, wait)), stop, self._sleep)


class DigestMessages:
    """Renders DIGEST outbox rows for the dispatcher; a digest and its chart are built once per
    (team, week) for the life of this object (one dispatch round)."""

    def __init__(
        self,
        store: Store,
        renderer: DigestRenderer,
        *,
        cluster: str | None = None,
        accounting: DigestAccounting = NO_ACCOUNTING,
    ) -> None:
        self._store = store
        self._renderer = renderer
        self._cluster = cluster
        # The budgets are read once for all the round's digests.
        self._accounting = accounting.for_round()
        self._built: dict[tuple[str, str, str], tuple[Digest, bytes | None]] = {}
        self._clusters: dict[tuple[str, str], ClusterDigest] = {}

    async def digest_and_chart(self, team: str, week: str, tz: str) -> tuple[Digest, bytes | None]:
        key = (team, week, tz)
        if key not in self._built:
            digest = await self._accounting.team_digest(self._store, team, week, tz, cluster=self._cluster)
            # Drawing is CPU-bound: keep it off the event loop.
            chart = await asyncio.to_thread(render_chart, digest)
            self._built[key] = (digest, chart)
        return self._built[key]

    async def render(self, row: Notification) -> RenderedMessage:
        payload = row.payload
        if payload.get("scope") == CLUSTER_SCOPE:
            return await self._render_cluster(row)
        team, week, tz = (str(payload.get(k, "")) for k in ("team", "week", "timezone"))
        if not team or not week:
            raise ValueError(f"digest row {row.id} has no team/week in its payload")
        digest, chart = await self.digest_and_chart(team, week, tz or "UTC")
        return self._renderer.message(row.channel, digest, chart)

    async def _render_cluster(self, row: Notification) -> RenderedMessage:
        week, tz = str(row.payload.get("week", "")), str(row.payload.get("timezone") or "UTC")
        if not week or row.channel is not Channel.EMAIL:
            raise ValueError(f"cluster digest row {row.id} needs a week and the e-mail channel")
        if (week, tz) not in self._clusters:
            self._clusters[week, tz] = await build_cluster_digest(
                self._store, week, tz, cluster=self._cluster, rates=self._accounting.rates
            )
        return self._renderer.cluster_message(self._clusters[week, tz])
