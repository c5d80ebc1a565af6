"""Who gets a finished job's summary (or a running pod's idle nudge), on which channels: outbox rows.

Pure: the caller passes the directory, the teams, the channels the service has configured and
`now`, and gets back the rows to write in the same transaction that marks the job summarized.
Every row carries the recipient's addresses in its payload (chat id, Slack user id, name) so that
the dispatcher can send it without a directory look-up, and a dedup key that makes a replay of
the same job write nothing new.

Rules (CONTRACT.md §3, issue 6):
- `inno-notify/notify: never` sends nothing; `failure` sends only for a failed job.
- A workspace (Coder, JupyterHub) that ended gets no summary: its nudges came while it idled.
- An owner found in the directory gets the summary on the channels of the job's
  `inno-notify/channels` annotation if set, else on their own directory channels.
- An owner e-mail that is not in the directory gets e-mail only (we know no other address);
  if the job's annotation leaves e-mail out, nothing is sent, because the owner asked for that.
- A job without a resolvable owner goes to its team's leads only where the team sets
  `notify_unowned`; each lead is routed like an owner.
- Channels the service has not configured, and channels a recipient has no address for
  (Telegram without a chat id), are skipped with a reason the caller logs.
- Idle nudges (plan_nudge) go to the same recipients on the same channels, except that only
  `notify: never` silences them.
- An owner is an e-mail address only if it is exactly one plain address (domain.addresses): a
  list, a display name or a group is no resolvable owner. E-mail goes only to such an address,
  and, when `notify.allowed_email_domains` lists domains, only within them; the other channels
  of the same recipient are not affected.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from inno_notify.domain.addresses import email_refusal, is_single_address
from inno_notify.domain.live import PAYLOAD_KEY, IdleFinding, finding_to_payload, nudge_dedup_key
from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    JobRecord,
    JobStatus,
    Notification,
    NotificationKind,
    NotifyMode,
    Team,
    WorkloadKind,
)

KNOWN_CHANNELS = frozenset(c.value for c in Channel)


@dataclass(frozen=True, slots=True)
class Skipped:
    """A recipient's channel that gets no row, and why (logged once by the caller)."""

    recipient: str
    channel: str
    reason: str


@dataclass(frozen=True, slots=True)
class RoutingPlan:
    """The rows to enqueue for one job, what was left out, and why nothing was sent if so."""

    notifications: tuple[Notification, ...]
    skipped: tuple[Skipped, ...] = ()
    # Set when the job as a whole gets no summary (opted out, nobody to send to).
    silent_reason: str | None = None


def summary_dedup_key(cluster: str, uid: str, channel: str, recipient: str) -> str:
    """The outbox key of a job summary: one row per (job, channel, recipient), ever."""
    return f"{cluster}/{uid}/{NotificationKind.JOB_SUMMARY.value}/{channel}/{recipient}"


def route_summary(
    job: JobRecord,
    users: Mapping[str, DirectoryUser],
    teams: Mapping[str, Team],
    enabled_channels: frozenset[str],
    now: datetime,
    group_wait_seconds: float,
    allowed_email_domains: Collection[str] = (),
) -> list[Notification]:
    """The outbox rows for `job`'s summary (see plan_summary for the reasons behind them)."""
    plan = plan_summary(job, users, teams, enabled_channels, now, group_wait_seconds, allowed_email_domains)
    return list(plan.notifications)


def plan_summary(
    job: JobRecord,
    users: Mapping[str, DirectoryUser],
    teams: Mapping[str, Team],
    enabled_channels: frozenset[str],
    now: datetime,
    group_wait_seconds: float,
    allowed_email_domains: Collection[str] = (),
) -> RoutingPlan:
    """Routes a finished job's summary. `users` is keyed by e-mail (matched case-insensitively).

    Each row is due `group_wait_seconds` after `now`, so that summaries arriving meanwhile for
    the same recipient and channel can join it in one message (the dispatcher decides that).
    E-mail goes only to single plain addresses within `allowed_email_domains` (empty: any).
    """
    if job.notify is NotifyMode.NEVER:
        return RoutingPlan((), silent_reason="the job asks for no notification (notify: never)")
    if job.kind is WorkloadKind.WORKSPACE:
        # Someone stopped their workspace: it was measured (the digest counts it), its nudges came
        # while it idled, and a message about its end would tell its owner nothing new.
        return RoutingPlan((), silent_reason="a workspace gets nudges while it runs, no summary")
    if job.notify is NotifyMode.FAILURE and job.status is not JobStatus.FAILED:
        return RoutingPlan((), silent_reason=f"notify: failure and the job {job.status.value}")
    due_at = now + timedelta(seconds=group_wait_seconds)

    def row(channel: str, recipient: str, payload: dict[str, object]) -> Notification:
        return Notification(
            dedup_key=summary_dedup_key(job.cluster, job.uid, channel, recipient),
            kind=NotificationKind.JOB_SUMMARY,
            channel=Channel(channel),
            recipient=recipient,
            due_at=due_at,
            created_at=now,
            cluster=job.cluster,
            job_uid=job.uid,
            group_key=job.group_key,
            payload=payload,
        )

    return _route(job, users, teams, enabled_channels, allowed_email_domains, row)


def plan_nudge(
    job: JobRecord,
    finding: IdleFinding,
    users: Mapping[str, DirectoryUser],
    teams: Mapping[str, Team],
    enabled_channels: frozenset[str],
    now: datetime,
    repeat_hours: float,
    allowed_email_domains: Collection[str] = (),
) -> RoutingPlan:
    """Routes an idle nudge about one of `job`'s pods like a summary: to the owner (or the team's
    leads where the team takes unowned work) on the same channels, due at once.

    `notify: never` sends nothing; `notify: failure` still gets nudges (a nudge is about a running
    pod, not about how it ended). Each row carries the finding in its payload (domain.live) and
    the pod's uid as its `job_uid`, which is where the last nudge of a pod is looked up.
    """
    if job.notify is NotifyMode.NEVER:
        return RoutingPlan((), silent_reason="the workload asks for no notification (notify: never)")
    nudge = finding_to_payload(finding)

    def row(channel: str, recipient: str, payload: dict[str, object]) -> Notification:
        return Notification(
            dedup_key=nudge_dedup_key(job.cluster, finding.pod_uid, now, repeat_hours, channel, recipient),
            kind=NotificationKind.IDLE_NUDGE,
            channel=Channel(channel),
            recipient=recipient,
            due_at=now,
            created_at=now,
            cluster=job.cluster,
            job_uid=finding.pod_uid,
            payload={**payload, PAYLOAD_KEY: nudge},
        )

    return _route(job, users, teams, enabled_channels, allowed_email_domains, row)


def _route(
    job: JobRecord,
    users: Mapping[str, DirectoryUser],
    teams: Mapping[str, Team],
    enabled_channels: frozenset[str],
    allowed_email_domains: Collection[str],
    make_row: Callable[[str, str, dict[str, object]], Notification],
) -> RoutingPlan:
    """The rows for `job`'s recipients (its owner, else its team's leads) on their channels."""
    directory = _by_email(users)
    owner = (job.owner or "").strip()
    if owner and (owner.lower() in directory or is_single_address(owner)):
        recipients = [owner]
    else:
        team = _team_of(job, teams)
        if team is None:
            return RoutingPlan((), silent_reason="no resolvable owner and no team")
        if not team.notify_unowned:
            return RoutingPlan((), silent_reason=f"no resolvable owner; team {team.name} keeps unowned quiet")
        recipients = list(team.leads)
        if not recipients:
            return RoutingPlan((), silent_reason=f"no resolvable owner; team {team.name} has no leads")

    notifications: list[Notification] = []
    skipped: list[Skipped] = []
    # Addresses differ in case more often than in anything else: one recipient per address.
    unique: dict[str, str] = {}
    for address in recipients:
        unique.setdefault(address.strip().lower(), address.strip())
    for address in unique.values():
        user = directory.get(address.lower())
        for channel, reason in _channels_for(job, user, enabled_channels):
            recipient = user.email if user is not None else address
            if reason is None and channel == Channel.EMAIL.value:
                reason = email_refusal(recipient, allowed_email_domains)
            if reason is not None:
                skipped.append(Skipped(recipient, channel, reason))
                continue
            notifications.append(make_row(channel, recipient, _addresses(user)))
    silent = None if notifications else "no channel left to send on"
    return RoutingPlan(tuple(notifications), tuple(skipped), silent)


def _channels_for(
    job: JobRecord, user: DirectoryUser | None, enabled: frozenset[str]
) -> Iterable[tuple[str, str | None]]:
    """Each wanted channel with None if it gets a row, else the reason it does not."""
    if user is None:
        wanted = job.channels if job.channels is not None else (Channel.EMAIL.value,)
        for name in wanted:
            if name != Channel.EMAIL.value:
                yield name, "recipient is not in the directory: e-mail only"
            elif name not in enabled:
                yield name, "channel not configured in the service"
            else:
                yield name, None
        return
    for name in job.channels if job.channels is not None else user.channels:
        if name not in KNOWN_CHANNELS:
            yield name, "unknown channel"
        elif name not in enabled:
            yield name, "channel not configured in the service"
        elif name == Channel.TELEGRAM.value and user.telegram_chat_id is None:
            yield name, "no telegram chat id in the directory"
        else:
            yield name, None


def _addresses(user: DirectoryUser | None) -> dict[str, object]:
    if user is None:
        return {}
    payload: dict[str, object] = {}
    if user.name:
        payload["name"] = user.name
    if user.telegram_chat_id is not None:
        payload["telegram_chat_id"] = user.telegram_chat_id
    if user.slack_user_id:
        payload["slack_user_id"] = user.slack_user_id
    return payload


def _by_email(users: Mapping[str, DirectoryUser]) -> dict[str, DirectoryUser]:
    return {user.email.strip().lower(): user for user in users.values()}


def _team_of(job: JobRecord, teams: Mapping[str, Team]) -> Team | None:
    if job.team is not None:
        return teams.get(job.team)
    for team in teams.values():
        if job.namespace in team.namespaces:
            return team
    return None
