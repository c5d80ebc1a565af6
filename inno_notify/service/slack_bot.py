"""The Slack app's ears: `/inno` slash commands, DMs to the app, its Home tab and the tab's buttons,
over Socket Mode (on the leader) or over HTTP (the Events API and slash commands, signed).

A request is read by adapters.channels.slack_inbound, the person found by their Slack user id
(domain.slack_commands.user_of_slack; for a directory user without one, by the e-mail Slack's own
profile of that id holds, `users.info`), and carried out like every chat's command
(service.self_service) in one transaction: the preferences changed with `Origin(Via.SLACK, …,
<user id>)`, the answer an outbox row of kind `bot_reply` to the person's DM with the app, which the
dispatcher sends. The answer's key is the request's own (an event id, a slash command's trigger id):
a request Slack delivers twice changes nothing the second time. A Home tab opened, or one of its
buttons pressed, is answered by publishing the tab again (`views.publish`) after the commit, not by
a message: a button's change shows on the tab itself.

- Socket Mode (`channels.slack.app_token`) runs on the leader only (a leader component, built per
  term, like Telegram's polling); its writes are fenced, so a deposed leader's late request changes
  nothing.
- HTTP (`channels.slack.signing_secret`): the API of whichever replica Slack reaches checks the
  signature (api/views/slack.py) and hands the payload here (not fenced: every replica serves it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine, Mapping
from datetime import datetime
from typing import Any, Protocol

from inno_notify.adapters.channels.base import ChannelError
from inno_notify.adapters.channels.slack import SlackSender
from inno_notify.adapters.channels.slack_home import home_view, unknown_home_view
from inno_notify.adapters.channels.slack_inbound import SocketTransport, read_request
from inno_notify.adapters.db.repository import Store
from inno_notify.adapters.db.telegram_bot import BotTransaction
from inno_notify.domain.bot_replies import HomeSnapshot
from inno_notify.domain.model import Channel, DirectoryUser, NotifyMode, RecipientAddress
from inno_notify.domain.preferences import Origin, Via
from inno_notify.domain.slack_commands import SlackRequest, SlackRequestKind, decide, user_of_slack
from inno_notify.service.self_service import carry_out, mutes_of, reply_row
from inno_notify.settings import SlackSettings, secret_value

__all__ = ["SlackBot", "SlackHandler", "SlackWorkspace", "reply_key"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
# Runs until the stop event is set (runtime.Component).
Component = Callable[[asyncio.Event], Coroutine[Any, Any, None]]
# The requests whose answer is a message (the rest publish the Home tab).
_ANSWERED = frozenset({SlackRequestKind.COMMAND, SlackRequestKind.MESSAGE})


class SlackWorkspace(Protocol):
    """What the handler asks Slack itself (adapters.channels.slack.SlackSender)."""

    async def email_of(self, user_id: str) -> str | None: ...

    async def publish_home(self, user_id: str, view: Mapping[str, Any]) -> None: ...


def reply_key(request: SlackRequest) -> str:
    """The outbox key of the answer to one request: the marker that it was handled."""
    return f"slack/{request.team_id}/{request.key}"


class SlackHandler:
    """Handles one Slack request in one transaction (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        workspace: SlackWorkspace,
        clock: Clock,
        *,
        timezone: str = "UTC",
    ) -> None:
        self._store = store
        self._workspace = workspace
        self._clock = clock
        self._timezone = timezone

    async def handle(self, kind: str, payload: Mapping[str, Any], *, fenced: bool) -> None:
        """Handles the payload of a request of `kind` (an envelope type); raises what the store
        raised (nothing is kept then, and the request is not acknowledged)."""
        request = read_request(kind, payload)
        if request is None:
            return
        email = await self._profile_email(request.user_id)
        now = self._clock()
        home: HomeSnapshot | None = None
        known = False
        async with self._store.directory.bot_transaction(fenced=fenced) as tx:
            key = reply_key(request)
            if request.kind in _ANSWERED and await tx.handled(key):
                log.info("slack request %s was handled before; nothing to do", key)
                return
            users = await tx.users()
            person = user_of_slack(users, request.user_id, email)
            known = person is not None
            prefs = await tx.preferences(person.email) if person is not None else None
            decision = decide(request, person, now, self._timezone, muted_until=mutes_of(prefs))
            origin = Origin(Via.SLACK, now, request.user_id)
            reply = await carry_out(
                tx,
                decision.reply,
                decision.changes,
                origin,
                now,
                self._timezone,
                status_of=decision.status_of,
            )
            if reply is not None and request.kind in _ANSWERED:
                address = RecipientAddress(
                    name=person.name if person is not None else None, slack_user_id=request.user_id
                )
                await tx.enqueue([reply_row(key, Channel.SLACK, address, reply, now)])
            if decision.changes:
                log.info(
                    "slack user %s: %s for %s",
                    request.user_id,
                    reply.kind.value if reply is not None else "changes",
                    ", ".join(sorted(decision.changes)),
                )
            if person is not None and request.kind not in _ANSWERED:
                home = await self._home(tx, person.email, now)
        if request.kind in _ANSWERED:
            return
        await self._publish(request.user_id, home_view(home) if home is not None else unknown_home_view())
        if not known:
            log.info("slack: user %s is not in the directory; their Home tab says so", request.user_id)

    async def _profile_email(self, user_id: str) -> str | None:
        try:
            return await self._workspace.email_of(user_id)
        except ChannelError as exc:
            # The user id alone still finds a directory user who has it.
            log.warning("slack: the profile of %s could not be read: %s", user_id, exc.message)
            return None

    async def _home(self, tx: BotTransaction, email: str, now: datetime) -> HomeSnapshot | None:
        """The person's Home tab as it stands after this request's changes."""
        person: DirectoryUser | None = next((u for u in await tx.users() if u.email == email), None)
        if person is None:
            return None
        prefs = await tx.preferences(email)
        muted = prefs is not None and prefs.muted_at(now)
        return HomeSnapshot(
            person=person.name or person.email,
            runs=await tx.recent_runs(email),
            advice=await tx.open_advice(email),
            channels=person.channels,
            failures_only=person.notify is NotifyMode.FAILURE,
            nudges=person.nudges,
            muted_until=prefs.muted_until if prefs is not None and muted else None,
            muted_everywhere=muted and prefs is not None and prefs.muted_channels is None,
            timezone=self._timezone,
        )

    async def _publish(self, user_id: str, view: Mapping[str, Any]) -> None:
        try:
            await self._workspace.publish_home(user_id, view)
        except ChannelError as exc:
            # The change (if any) is made; the tab shows it the next time it is opened.
            log.warning("slack: the Home tab of %s was not published: %s", user_id, exc.message)


def self_service_enabled(slack: SlackSettings) -> bool:
    """A bot token, and a way for Slack to reach the app (an app token or a signing secret)."""
    return bool(secret_value(slack.token)) and bool(
        secret_value(slack.app_token) or secret_value(slack.signing_secret)
    )


class SlackBot:
    """The Slack app's self-service parts for one process (None from `build` when off).

    `leader_components()`: the Socket Mode connection when an app token is set. `http`: the API's
    handler of a verified request (None without a signing secret). `signing_secret`: what the API
    verifies requests with.
    """

    def __init__(self, slack: SlackSettings, timezone: str, store: Store, clock: Clock) -> None:
        token = secret_value(slack.token)
        assert token
        self._token = token
        self._api_url = slack.api_url
        self._app_token = secret_value(slack.app_token)
        self.signing_secret = secret_value(slack.signing_secret)
        self._workspace = SlackSender(token, slack.api_url)
        self.handler = SlackHandler(store, self._workspace, clock, timezone=timezone)

    @classmethod
    def build(
        cls,
        slack: SlackSettings,
        timezone: str,
        store: Store,
        clock: Clock,
    ) -> SlackBot | None:
        """The app (`channels.slack`; replies dated in the digest's `timezone`), or None when
        self-service on Slack is off."""
        return cls(slack, timezone, store, clock) if self_service_enabled(slack) else None

    def leader_components(self) -> list[tuple[str, Component]]:
        if not self._app_token:
            return []
        app_token = self._app_token

        async def socket(stop: asyncio.Event) -> None:
            async def handle(kind: str, payload: Mapping[str, Any]) -> None:
                await self.handler.handle(kind, payload, fenced=True)

            await SocketTransport(app_token, self._token, handle, self._api_url).run(stop)

        return [("slack-socket", socket)]

    async def http(self, kind: str, payload: Mapping[str, object]) -> None:
        """Handles one request the API received (its signature already checked)."""
        await self.handler.handle(kind, payload, fenced=False)

    async def aclose(self) -> None:
        await self._workspace.aclose()
