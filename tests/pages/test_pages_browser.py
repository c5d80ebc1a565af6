"""The job page and the team page as a phone and a laptop show them, in headless Chromium: nothing
wider than the screen (tables scroll inside themselves), the chart as wide as the text column,
text at a readable size. Skipped where /usr/bin/chromium (Debian chromium) is absent."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from inno_notify.adapters.channels.digest_chart import render_chart
from inno_notify.adapters.channels.digest_views import DigestRenderer
from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.channels.render import Renderer
from tests.adapters.channels.test_digest_costs_render import priced
from tests.adapters.channels.test_digest_render import digest
from tests.pages import sample
from tests.pages.browser import CHROMIUM, LAPTOP, PHONE, measure

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian chromium)")


def job_page() -> str:
    renderer = JobPageRenderer(Renderer(log_url_template="https://logs.example.org/?q={{ pod_regex }}"))
    return renderer.html(
        sample.job(), sample.usage(), sample.recommendations(), sample.pods(), sample.series()
    )


def team_page() -> str:
    d = digest()
    return DigestRenderer(dashboard_url="https://inno.example.org").html_page(d, render_chart(d))


def priced_team_page() -> str:
    """The team page with its costs by GPU model, top idle cost and budget bar (issue 34)."""
    costs = priced()
    d = replace(
        digest(),
        currency=costs.currency,
        cost=costs.cost,
        idle_cost=costs.idle_cost,
        by_model=costs.by_model,
        top_idle_cost=costs.top_idle_cost,
        budgets=costs.budgets,
    )
    return DigestRenderer(dashboard_url="https://inno.example.org").html_page(d, render_chart(d))


@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["phone", "laptop"])
@pytest.mark.parametrize("make", [job_page, team_page, priced_team_page], ids=["job", "team", "team-priced"])
def test_the_page_fits_the_screen(make: Callable[[], str], size: tuple[int, int], tmp_path: Path) -> None:
    measured = measure(make(), size, tmp_path)
    assert measured["viewport"] == size[0]
    assert measured["scroll_width"] is not None and measured["scroll_width"] <= size[0]
    chart = measured["chart_width"]
    assert chart is not None and 0.8 * min(size[0], 960) - 40 <= chart <= size[0]
    assert measured["body_font_px"] is not None and measured["body_font_px"] >= 14
