"""`inno-notify digest`: one team's weekly digest, printed (text, html, json) or sent now.

Printing reads the database only; `--send` goes through the team's configured channels with the
service's own dispatcher (service.digest_now), so a hand-sent digest looks and dedups like a
scheduled one.
"""

from __future__ import annotations

from inno_notify.adapters.db.migrate import migrate
from inno_notify.runtime import (
    build_digest_accounting,
    build_digest_renderer,
    build_dispatcher,
    build_senders,
    service_store,
    utc_now,
)
from inno_notify.runtime.configuration import seed_directory
from inno_notify.service.digest_now import send_digest_now
from inno_notify.service.digest_pages import UnknownTeam, render_digest, team_digest
from inno_notify.settings import Settings


async def digest_command(settings: Settings, team: str, week: str | None, fmt: str, send: bool) -> str:
    """Builds one team's digest; prints it (returned) or sends it through the team's channels now."""
    await migrate(settings.database_url)
    store = service_store(settings)
    try:
        await seed_directory(store, settings)
        accounting = build_digest_accounting(settings, store, utc_now)
        digest = await team_digest(store, team, week, settings.digest.timezone, utc_now(), accounting)
        if not send:
            return render_digest(digest, fmt, build_digest_renderer(settings))
        senders = build_senders(settings)
        try:
            if not senders:
                raise UnknownTeam("no channel is configured (channels.email.host, or a Slack/Telegram token)")
            dispatcher = build_dispatcher(settings, store, senders, utc_now)
            states = await send_digest_now(
                store, dispatcher, team, digest.week, settings.digest.timezone, senders, utc_now
            )
        finally:
            for sender in senders.values():
                await sender.aclose()
        if not states:
            return f"{team} {digest.week}: nobody to send to (leads and digest_channels of the team)"
        return "\n".join(f"{state} {key}" for key, state in sorted(states.items()))
    finally:
        await store.close()
