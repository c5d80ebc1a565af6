"""Who gets a finished job's summary (or a running pod's idle nudge), on which channels: outbox rows.

Pure: the caller passes the directory, the teams, the channels the service has configured and
`now`, and gets back the rows to write in the same transaction that marks the job summarized.
Every row carries where its recipient is reached (a typed RecipientAddress: name, chat id, Slack
user id or team channel) so that the dispatcher can send it without a directory look-up, and a
dedup key that makes a replay of the same job write nothing new.

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
  `notify: never` silences them, and a person who turned nudges off (their `nudges` preference:
  `/nudges off`, the API) gets none on any channel. A round's nudges are bundled (bundle_nudges):
  one row per recipient and channel listing all their idle pods.
- A person's own preferences (domain.preferences, applied to the directory entry before routing):
  one who asked for failures only (`/failures`) gets no summary of a job or workflow that did not
  fail. A directory user without a Telegram chat (who did not /stop it) has rows whose address
  carries their link epoch: their e-mail and Slack summaries offer the link that connects one.
- An owner is an e-mail address only if it is exactly one plain address (domain.addresses): a
  list, a display name or a group is no resolvable owner. E-mail goes only to such an address,
  and, when `notify.allowed_email_domains` lists domains, only within them; the other channels
  of the same recipient are not affected.
- The service's webhook (`channels.webhook`), when configured, gets one more row per recipient
  and message, beside the recipient's own channels, whatever they are and whether or not any of
  them is configured (a cluster may bridge everything through the webhook alone), and a copy of a
  team channel's post. It follows the person's own choices (failures only, nudges off, nothing at
  all after `/stop all`), not the channels a job's annotation names: nobody chooses it, so a
  person or an annotation naming it is skipped with a reason.
- A person who unsubscribed from e-mail (`email_off`: the one-click link every e-mail carries, or
  the API; in the directory or not) gets no e-mail row, whatever a job's annotation asks; their
  other channels are routed as before.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import partial
from typing import NamedTuple

from inno_notify.domain.addresses import email_refusal, is_single_address
from inno_notify.domain.live import (
    PAYLOAD_KEY,
    IdleFinding,
    finding_from_payload,
    finding_to_payload,
    findings_to_payload,
    nudge_dedup_key,
)
from inno_notify.domain.model import (
    Channel,
    DirectoryUser,
    JobRecord,
    JobStatus,
    Notification,
    NotificationKind,
    NotifyMode,
    RecipientAddress,
    Team,
    WorkloadKind,
)

KNOWN_CHANNELS = frozenset(c.value for c in Channel)
FAILURES_ONLY = "the recipient asked for failed jobs only"
NO_CHANNELS = "the recipient has no channel (stopped all)"
NUDGES_OFF = "the recipient turned nudges off"
UNSUBSCRIBED = "the recipient unsubscribed from e-mail"
WEBHOOK_NOT_CHOSEN = "the webhook gets a copy of every message; it is not a channel to choose"


class Directory(NamedTuple):
    """What routing reads of the store: users by lower-case e-mail (their own preferences applied),
    teams by name, and the lower-case addresses that turned e-mail off, of people in the directory
    or not (domain.preferences `emails`)."""

    users: dict[str, DirectoryUser]
    teams: dict[str, Team]
    email_off: frozenset[str] = frozenset()


def unsubscribed(recipient: str, email_off: Collection[str]) -> bool:
    """Whether `recipient` turned e-mail off (`email_off` holds lower-case addresses)."""
    return recipient.strip().lower() in email_off


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


def plan_summary(
    job: JobRecord,
    directory: Directory,
    enabled_channels: frozenset[str],
    now: datetime,
    group_wait_seconds: float,
    allowed_email_domains: Collection[str] = (),
) -> RoutingPlan:
    """Routes a finished job's summary. Users are matched by e-mail case-insensitively.

    Each row is due `group_wait_seconds` after `now`, so that summaries arriving meanwhile for
    the same recipient and channel can join it in one message (the dispatcher decides that).
    E-mail goes only to single plain addresses within `allowed_email_domains` (empty: any), and to
    nobody in `directory.email_off`.
    """
    if job.notify is NotifyMode.NEVER:
        return RoutingPlan((), silent_reason="the job asks for no notification (notify: never)")
    if job.kind is WorkloadKind.WORKSPACE:
        # Someone stopped their workspace: it was measured (the digest counts it), its nudges came
        # while it idled, and a message about its end would tell its owner nothing new.
        return RoutingPlan((), silent_reason="a workspace gets nudges while it runs, no summary")
    if job.notify is NotifyMode.FAILURE and job.status is not JobStatus.FAILED:
        return RoutingPlan((), silent_reason=f"notify: failure and the job {job.status.value}")
    row = _row_maker(
        NotificationKind.JOB_SUMMARY,
        partial(summary_dedup_key, job.cluster, job.uid),
        now,
        now + timedelta(seconds=group_wait_seconds),
        cluster=job.cluster,
        job_uid=job.uid,
        group_key=job.group_key,
    )
    failed = job.status is JobStatus.FAILED
    return _route(job, directory, enabled_channels, allowed_email_domains, row, failed=failed)


def plan_nudge(
    job: JobRecord,
    finding: IdleFinding,
    directory: Directory,
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
    row = _row_maker(
        NotificationKind.IDLE_NUDGE,
        partial(nudge_dedup_key, job.cluster, finding.pod_uid, now, repeat_hours),
        now,
        now,
        cluster=job.cluster,
        job_uid=finding.pod_uid,
        payload={PAYLOAD_KEY: finding_to_payload(finding)},
    )
    return _route(job, directory, enabled_channels, allowed_email_domains, row, nudge=True)


def bundle_nudges(rows: Sequence[Notification], now: datetime, repeat_hours: float) -> list[Notification]:
    """The rows of a round's nudges (one per pod, recipient and channel, from plan_nudge) as one
    row per recipient and channel listing all that person's idle pods (domain.live.findings_to_payload).

    The row is about no one pod (`job_uid` None; the live check records per pod when it was
    nudged); its dedup key names the pods, so two writers of the same round write one row."""
    groups: dict[tuple[str, str], list[Notification]] = {}
    for row in rows:
        groups.setdefault((row.recipient.strip().lower(), row.channel.value), []).append(row)
    bundled: list[Notification] = []
    for (_, channel), members in groups.items():
        first = members[0]
        findings = {f.pod_uid: f for f in (finding_from_payload(r.payload) for r in members)}
        payload = {k: v for k, v in first.payload.items() if k != PAYLOAD_KEY}
        payload.update(findings_to_payload(list(findings.values())))
        pods = hashlib.sha256("\n".join(sorted(findings)).encode()).hexdigest()[:16]
        cluster = first.cluster or ""
        bundled.append(
            replace(
                first,
                dedup_key=nudge_dedup_key(
                    cluster, f"pods-{pods}", now, repeat_hours, channel, first.recipient
                ),
                job_uid=None,
                payload=payload,
            )
        )
    return bundled


# A row to (channel, recipient) at the recipient's address.
RowMaker = Callable[[str, str, RecipientAddress], Notification]


def _route(
    job: JobRecord,
    directory: Directory,
    enabled_channels: frozenset[str],
    allowed_email_domains: Collection[str],
    make_row: RowMaker,
    *,
    failed: bool | None = None,
    nudge: bool = False,
) -> RoutingPlan:
    """The rows for `job`'s recipients (its owner, else its team's leads) on their channels.

    `failed`: whether the message is about a run that failed, for a person's failures-only
    preference (None: it is about no ended run, a nudge, and the preference does not apply)."""
    users = _by_email(directory.users)
    recipients, silent = _recipients(job.owner, _team_of(job.team, job.namespace, directory.teams), users)
    if silent is not None:
        return RoutingPlan((), silent_reason=silent)
    notifications, skipped = _route_people(
        recipients,
        job.channels,
        users,
        enabled_channels,
        allowed_email_domains,
        make_row,
        failed=failed,
        nudge=nudge,
        email_off=directory.email_off,
    )
    return _plan(notifications, skipped)


def _recipients(
    owner: str | None, team: Team | None, directory: Mapping[str, DirectoryUser]
) -> tuple[list[str], str | None]:
    """Whom a message goes to, the owner, else the leads of a team that takes unowned work; with
    the reason it goes to nobody, if so."""
    address = (owner or "").strip()
    if address and (address.lower() in directory or is_single_address(address)):
        return [address], None
    if team is None:
        return [], "no resolvable owner and no team"
    if not team.notify_unowned:
        return [], f"no resolvable owner; team {team.name} keeps unowned quiet"
    if not team.leads:
        return [], f"no resolvable owner; team {team.name} has no leads"
    return list(team.leads), None


def _plan(
    notifications: Sequence[Notification], skipped: Sequence[Skipped], silent: str | None = None
) -> RoutingPlan:
    """The plan of the rows made; with no row, why nothing is sent (`silent`, else no channel)."""
    if notifications:
        return RoutingPlan(tuple(notifications), tuple(skipped))
    return RoutingPlan((), tuple(skipped), silent or "no channel left to send on")


def _address_of(user: DirectoryUser | None) -> RecipientAddress:
    """Where a person is reached, on every channel (each row carries all of them, whatever its
    channel); the empty address for one known by e-mail alone (outside the directory)."""
    if user is None:
        return RecipientAddress()
    # A person without a chat who did not /stop it is offered the link that connects one, minted
    # under their link generation (domain.telegram_linking).
    offer_link = user.telegram_chat_id is None and not user.telegram_stopped
    return RecipientAddress(
        name=user.name or None,
        telegram_chat_id=user.telegram_chat_id,
        slack_user_id=user.slack_user_id or None,
        telegram_link_epoch=user.link_epoch if offer_link else None,
    )


def _wants(user: DirectoryUser, failed: bool | None) -> bool:
    """Whether the person's own preference lets a message about a run that `failed` through (None:
    the message is about no run, the preference does not apply)."""
    return failed is None or failed or user.notify is not NotifyMode.FAILURE


def _by_email(users: Mapping[str, DirectoryUser]) -> dict[str, DirectoryUser]:
    return {user.email.strip().lower(): user for user in users.values()}


def _team_of(name: str | None, namespace: str, teams: Mapping[str, Team]) -> Team | None:
    """The team named, else the one whose namespaces hold `namespace`."""
    if name is not None:
        return teams.get(name)
    for team in teams.values():
        if namespace in team.namespaces:
            return team
    return None


# --- messages that are not a job's summary: workflows, serving models, pipeline events ----------------


@dataclass(frozen=True, slots=True)
class Audience:
    """Whom a message is for, in its owner's words (as a job's annotations say them).

    `failed` is what `notify: failure` looks at; `team_channel` also posts the message in the team's
    Slack channel where the team has one.
    """

    namespace: str
    owner: str | None = None
    team: str | None = None
    notify: NotifyMode = NotifyMode.ALWAYS
    channels: tuple[str, ...] | None = None
    failed: bool = False
    team_channel: bool = False


def message_dedup_key(subject: str, kind: NotificationKind, channel: str, recipient: str) -> str:
    """The outbox key of a message about `subject` (a workflow, a model revision, an event key)."""
    return f"{subject}/{kind.value}/{channel}/{recipient}"


def plan_message(
    audience: Audience,
    kind: NotificationKind,
    subject: str,
    payload: Mapping[str, object],
    directory: Directory,
    enabled_channels: frozenset[str],
    now: datetime,
    *,
    cluster: str | None = None,
    allowed_email_domains: Collection[str] = (),
) -> RoutingPlan:
    """Routes a message like a job summary (owner, else the team's leads where the team asks for
    unowned summaries; the same notify modes and channel rules), plus the team's Slack channel
    when `audience.team_channel`. Rows are due now (these messages are not grouped) and carry
    `payload` to the recipient's address."""
    if audience.notify is NotifyMode.NEVER:
        return RoutingPlan((), silent_reason="it asks for no notification (notify: never)")
    if audience.notify is NotifyMode.FAILURE and not audience.failed:
        return RoutingPlan((), silent_reason="notify: failure and it did not fail")
    users = _by_email(directory.users)
    team = _team_of(audience.team, audience.namespace, directory.teams)
    recipients, silent = _recipients(audience.owner, team, users)
    notifications, skipped = _route_people(
        recipients,
        audience.channels,
        users,
        enabled_channels,
        allowed_email_domains,
        _message_row(kind, subject, payload, now, now, cluster),
        failed=audience.failed if kind is NotificationKind.WORKFLOW_SUMMARY else None,
        email_off=directory.email_off,
    )
    if audience.team_channel and team is not None:
        notifications += _team_channel_row(team, kind, subject, payload, enabled_channels, now, now, cluster)
    return _plan(notifications, skipped, silent)


def plan_event(
    to: str | None,
    team_name: str | None,
    subject: str,
    payload: Mapping[str, object],
    directory: Directory,
    enabled_channels: frozenset[str],
    now: datetime,
    allowed_email_domains: Collection[str] = (),
    *,
    group_wait_seconds: float = 0.0,
    leads_only: bool = False,
) -> RoutingPlan:
    """Routes a pipeline's message: to one person like an owner (directory channels; e-mail only
    for an address outside the directory), or to a team: its Slack channel where it has one and
    Slack is configured, else each of its leads like an owner (`leads_only`: the leads always, never
    the channel — a budget alert is the leads' business). Rows are due `group_wait_seconds` after
    `now`, like summaries, so that events to one recipient meanwhile share one message."""
    kind = NotificationKind.PIPELINE_EVENT
    due_at = now + timedelta(seconds=group_wait_seconds)
    users = _by_email(directory.users)
    if to is not None:
        address = to.strip()
        if not (address.lower() in users or is_single_address(address)):
            return RoutingPlan((), silent_reason="the address is not one plain e-mail address")
        people = [address]
    else:
        team = directory.teams.get(team_name or "")
        if team is None:
            return RoutingPlan((), silent_reason=f"no team {team_name!r}")
        if not leads_only:
            channel_rows = _team_channel_row(
                team, kind, subject, payload, enabled_channels, now, due_at, None
            )
            if channel_rows:
                return RoutingPlan(tuple(channel_rows))
        people = list(team.leads)
        if not people:
            return RoutingPlan((), silent_reason=f"team {team.name} has no Slack channel and no leads")
    notifications, skipped = _route_people(
        people,
        None,
        users,
        enabled_channels,
        allowed_email_domains,
        _message_row(kind, subject, payload, now, due_at, None),
        email_off=directory.email_off,
    )
    return _plan(notifications, skipped)


def _route_people(
    people: Iterable[str],
    wanted: tuple[str, ...] | None,
    directory: Mapping[str, DirectoryUser],
    enabled: frozenset[str],
    allowed_email_domains: Collection[str],
    make_row: RowMaker,
    *,
    failed: bool | None = None,
    nudge: bool = False,
    email_off: Collection[str] = frozenset(),
) -> tuple[list[Notification], list[Skipped]]:
    """A row from `make_row` for each of `people` on each channel they get (`wanted`: the
    annotation's channels, None: their own), and each one they do not get, with the reason.

    `failed` is for a person's failures-only preference (None: it does not apply); `nudge` leaves
    out the people who turned nudges off; nobody in `email_off` gets e-mail."""
    notifications: list[Notification] = []
    skipped: list[Skipped] = []
    # Addresses differ in case more often than in anything else: one recipient per address.
    unique: dict[str, str] = {}
    for address in people:
        unique.setdefault(address.strip().lower(), address.strip())
    for address in unique.values():
        user = directory.get(address.lower())
        recipient = user.email if user is not None else address
        if user is not None and not _wants(user, failed):
            skipped.append(Skipped(recipient, "*", FAILURES_ONLY))
            continue
        if nudge and user is not None and not user.nudges:
            skipped.append(Skipped(recipient, "*", NUDGES_OFF))
            continue
        for channel, reason in _wanted_channels(wanted, user, enabled):
            if reason is None and channel == Channel.EMAIL.value:
                if unsubscribed(recipient, email_off):
                    reason = UNSUBSCRIBED
                else:
                    reason = email_refusal(recipient, allowed_email_domains)
            if reason is not None:
                skipped.append(Skipped(recipient, channel, reason))
                continue
            notifications.append(make_row(channel, recipient, _address_of(user)))
        if Channel.WEBHOOK.value in enabled and (user is None or user.channels):
            notifications.append(make_row(Channel.WEBHOOK.value, recipient, _address_of(user)))
    return notifications, skipped


def _message_row(
    kind: NotificationKind,
    subject: str,
    payload: Mapping[str, object],
    now: datetime,
    due_at: datetime,
    cluster: str | None,
) -> RowMaker:
    """How a row of a message about `subject` is made: `payload` to the recipient's address."""
    return _row_maker(
        kind, partial(message_dedup_key, subject, kind), now, due_at, cluster=cluster, payload=payload
    )


def _row_maker(
    kind: NotificationKind,
    dedup_key: Callable[[str, str], str],
    now: datetime,
    due_at: datetime,
    *,
    cluster: str | None,
    job_uid: str | None = None,
    group_key: str | None = None,
    payload: Mapping[str, object] | None = None,
) -> RowMaker:
    """How every row is made (a summary's, a nudge's, a message's): to (channel, recipient) at the
    recipient's address, keyed by `dedup_key(channel, recipient)`, carrying a copy of `payload`."""

    def row(channel: str, recipient: str, address: RecipientAddress) -> Notification:
        return Notification(
            dedup_key=dedup_key(channel, recipient),
            kind=kind,
            channel=Channel(channel),
            recipient=recipient,
            due_at=due_at,
            created_at=now,
            cluster=cluster,
            job_uid=job_uid,
            group_key=group_key,
            address=address,
            payload=dict(payload or {}),
        )

    return row


def _team_channel_row(
    team: Team,
    kind: NotificationKind,
    subject: str,
    payload: Mapping[str, object],
    enabled: frozenset[str],
    now: datetime,
    due_at: datetime,
    cluster: str | None,
) -> list[Notification]:
    if not team.slack_channel or Channel.SLACK.value not in enabled:
        return []
    row = _message_row(kind, subject, payload, now, due_at, cluster)
    address = RecipientAddress(slack_channel=team.slack_channel)
    channels = [Channel.SLACK.value, *([Channel.WEBHOOK.value] if Channel.WEBHOOK.value in enabled else [])]
    return [row(channel, team.slack_channel, address) for channel in channels]


def _wanted_channels(
    wanted: tuple[str, ...] | None, user: DirectoryUser | None, enabled: frozenset[str]
) -> Iterable[tuple[str, str | None]]:
    """Each of the channels wanted (the annotation's, else the user's own; e-mail only for an
    address outside the directory) with None if it gets a row, else the reason it does not."""
    if user is None:
        for name in wanted if wanted is not None else (Channel.EMAIL.value,):
            if name == Channel.WEBHOOK.value:
                yield name, WEBHOOK_NOT_CHOSEN
            elif name != Channel.EMAIL.value:
                yield name, "recipient is not in the directory: e-mail only"
            elif name not in enabled:
                yield name, "channel not configured in the service"
            else:
                yield name, None
        return
    if not user.channels:
        # A person with no channel at all asked for nothing (`/stop all`): a job's annotation,
        # which anyone who names them as owner can write, does not override that.
        yield "*", NO_CHANNELS
        return
    for name in wanted if wanted is not None else user.channels:
        if name == Channel.WEBHOOK.value:
            yield name, WEBHOOK_NOT_CHOSEN
        elif name not in KNOWN_CHANNELS:
            yield name, "unknown channel"
        elif name not in enabled:
            yield name, "channel not configured in the service"
        elif name == Channel.TELEGRAM.value and user.telegram_chat_id is None:
            yield name, "no telegram chat id in the directory"
        else:
            yield name, None
