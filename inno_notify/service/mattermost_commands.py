"""Mattermost's `/inno` slash command: who typed it, what it changes, and the answer to show them.

The API (api/views/mattermost.py) checks the command's token and hands the form here. The person is
found by the e-mail of the Mattermost account that typed it (`GET /api/v4/users/{user_id}`, with the
bot's token: adapters.channels.mattermost) in the directory (domain.mattermost_commands), and the
command carried out like every chat's (service.self_service) in one transaction: the preferences
changed with `Origin(Via.MATTERMOST, …, <user id>)`, `status` filled with the person's figures.

Unlike Slack's and Telegram's answers, which are outbox rows the dispatcher sends, the answer here
is the slash command's own HTTP response (an ephemeral post only the person sees), rendered at once
from the same templates as Slack's (`mattermost/bot_reply.md.j2`): Mattermost waits for it, and
nothing is worth a retry — Mattermost does not send a command twice, and every command sets a
state, so typing it again does no harm. The command is served by whichever replica Mattermost
reaches (not fenced), like Slack's HTTP requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Protocol

from inno_notify.adapters.channels.base import ChannelError, MattermostMessage
from inno_notify.adapters.channels.mattermost import MattermostSender
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db.repository import Store
from inno_notify.domain.mattermost_commands import decide, user_of_mattermost
from inno_notify.domain.model import Channel
from inno_notify.domain.preferences import Origin, Via
from inno_notify.service.self_service import carry_out, mutes_of
from inno_notify.settings import MattermostSettings, secret_value

__all__ = ["MattermostAccounts", "MattermostBot", "MattermostCommands"]

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


class MattermostAccounts(Protocol):
    """What the handler asks the Mattermost server (adapters.channels.mattermost.MattermostSender)."""

    async def email_of(self, user_id: str) -> str | None: ...


class MattermostCommands:
    """Handles one slash command in one transaction (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        accounts: MattermostAccounts,
        renderer: Renderer,
        clock: Clock,
        *,
        timezone: str = "UTC",
    ) -> None:
        self._store = store
        self._accounts = accounts
        self._renderer = renderer
        self._clock = clock
        self._timezone = timezone

    async def handle(self, user_id: str, text: str) -> str | None:
        """The Markdown answer to `text` typed by Mattermost user `user_id`, its changes made; None
        when the server could not say who that is right now (nothing changed then)."""
        try:
            email = await self._accounts.email_of(user_id)
        except ChannelError as exc:
            log.warning("mattermost: the account of %s could not be read: %s", user_id, exc.message)
            return None
        now = self._clock()
        async with self._store.directory.bot_transaction(fenced=False) as tx:
            person = user_of_mattermost(await tx.users(), email)
            prefs = await tx.preferences(person.email) if person is not None else None
            decision = decide(text, person, now, self._timezone, muted_until=mutes_of(prefs))
            reply = await carry_out(
                tx,
                decision.reply,
                decision.changes,
                Origin(Via.MATTERMOST, now, user_id),
                now,
                self._timezone,
                status_of=decision.status_of,
            )
        if decision.changes:
            log.info(
                "mattermost user %s: %s for %s",
                user_id,
                reply.kind.value if reply is not None else "changes",
                ", ".join(sorted(decision.changes)),
            )
        if person is None:
            log.info("mattermost: user %s is not in the directory (by their e-mail)", user_id)
        if reply is None:
            return ""
        message = self._renderer.render_reply(reply, Channel.MATTERMOST)
        assert isinstance(message, MattermostMessage)
        return message.markdown


def commands_enabled(mattermost: MattermostSettings) -> bool:
    """A server, the bot's token (to read who typed it) and the command's token."""
    return (
        mattermost.url is not None
        and bool(secret_value(mattermost.token))
        and bool(secret_value(mattermost.command_token))
    )


class MattermostBot:
    """The slash command's parts for one process (None from `build` when off): `command_token`, what
    the API checks each request's token against, and `handle`, the handler of a checked one."""

    def __init__(
        self, mattermost: MattermostSettings, timezone: str, store: Store, clock: Clock, renderer: Renderer
    ) -> None:
        token = secret_value(mattermost.token)
        command_token = secret_value(mattermost.command_token)
        assert mattermost.url is not None and token and command_token
        self.command_token = command_token
        self._accounts = MattermostSender(mattermost.url, token)
        self.handler = MattermostCommands(store, self._accounts, renderer, clock, timezone=timezone)

    @classmethod
    def build(
        cls,
        mattermost: MattermostSettings,
        timezone: str,
        store: Store,
        clock: Clock,
        renderer: Renderer,
    ) -> MattermostBot | None:
        """The slash command (`channels.mattermost`; replies dated in the digest's `timezone`), or
        None when it is not configured."""
        return cls(mattermost, timezone, store, clock, renderer) if commands_enabled(mattermost) else None

    async def handle(self, fields: Mapping[str, str]) -> str | None:
        """The answer to one slash command whose token the API checked (`fields`: its form)."""
        return await self.handler.handle(fields.get("user_id", ""), fields.get("text", ""))

    async def aclose(self) -> None:
        await self._accounts.aclose()
