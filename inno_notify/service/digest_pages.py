"""One team's digest as the reader asks for it: text, HTML page or JSON (CLI and API).

The API may not import the channel renderers (import-linter keeps it on the store), so the
runtime hands it `digest_provider`, built here, which returns the JSON-ready document (not yet
encoded: the API encodes it once) with the HTML page under "html". `inno-notify digest` uses
`render_digest` for its three formats.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from inno_notify.adapters.channels.digest_chart import render_chart
from inno_notify.adapters.channels.digest_views import DigestRenderer, render_json
from inno_notify.adapters.db.repository import Store
from inno_notify.domain.digest import Digest, digest_to_dict
from inno_notify.domain.page_links import PageLinks
from inno_notify.domain.weeks import last_complete_week
from inno_notify.service.digest_accounting import NO_ACCOUNTING, DigestAccounting


class UnknownTeam(LookupError):
    """The team is not in the directory."""


async def team_digest(
    store: Store,
    team: str,
    week: str | None,
    tz: str,
    now: datetime,
    accounting: DigestAccounting = NO_ACCOUNTING,
) -> Digest:
    """The digest of `team` for `week` (default: the last complete week in `tz`), priced and
    budgeted with `accounting` (accounting.rates and budgets)."""
    teams = {t.name for t in await store.directory.list_teams()}
    if team not in teams:
        known = ", ".join(sorted(teams)) or "none configured"
        raise UnknownTeam(f"unknown team {team!r} (teams: {known})")
    return await accounting.team_digest(store, team, week or last_complete_week(now, tz), tz)


def render_digest(digest: Digest, fmt: str, renderer: DigestRenderer | None = None) -> str:
    """`text`, `html` (the page a lead reads, chart inlined) or `json`."""
    renderer = renderer or DigestRenderer()
    if fmt == "json":
        return render_json(digest)
    if fmt == "html":
        return renderer.html_page(digest, render_chart(digest))
    return renderer.text(digest)


def digest_provider(
    store: Store,
    tz: str,
    clock: Any,
    dashboard_url: str | None = None,
    *,
    links: PageLinks | None = None,
    accounting: DigestAccounting = NO_ACCOUNTING,
) -> Any:
    """The API's `digest_provider`: (team, week) → the JSON document plus the page under "html"."""
    renderer = DigestRenderer(dashboard_url=dashboard_url, links=links, clock=clock)

    async def provide(team: str, week: str | None) -> Mapping[str, Any] | None:
        try:
            digest = await team_digest(store, team, week, tz, clock(), accounting)
        except UnknownTeam:
            return None
        # The API encodes this document once, when it answers (and caches the bytes).
        return {**digest_to_dict(digest), "html": render_digest(digest, "html", renderer)}

    return provide
