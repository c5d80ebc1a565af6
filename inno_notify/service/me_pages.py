"""The personal page for the API: the store's read of one person, rendered by the channel views.

The API may not import the channel renderers (import-linter keeps it on the store), so the runtime
hands it `me_page_provider`, built here, as it hands it the job pages' provider: given how the page
was opened (domain.personal_page.PageOpening), it returns the page's HTML. Filling the template
takes milliseconds of CPU for a page of a few hundred runs: off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from inno_notify.adapters.channels.me_page import PersonalPageRenderer
from inno_notify.adapters.db import Store
from inno_notify.domain.personal_page import PERSONAL_DAYS, PageOpening

MePageProvider = Callable[[PageOpening], Awaitable[str]]


def me_page_provider(
    store: Store,
    renderer: PersonalPageRenderer,
    clock: Callable[[], datetime],
    *,
    days: int = PERSONAL_DAYS,
) -> MePageProvider:
    """The personal page of the person `opening` names: their runs of the last `days` days."""

    async def provide(opening: PageOpening) -> str:
        now = clock()
        page = await store.personal.page(opening.email, now - timedelta(days=days), now)
        return await asyncio.to_thread(renderer.html, page, opening)

    return provide
