"""The digest's costs and budget bars in every channel (issue 34): figures spelt, a model name or
owner from the cluster escaped per channel, the page's bar an SVG with the forecast marked and the
chat channels' a line of block characters; the page in headless Chromium."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inno_notify.adapters.channels.base import (
    MailMessage,
    MattermostMessage,
    SlackMessage,
    TelegramMessage,
    WebhookMessage,
)
from inno_notify.adapters.channels.digest_chart import budget_bar_svg, budget_bar_text, render_chart
from inno_notify.adapters.channels.digest_views import DigestRenderer, digest_view
from inno_notify.domain.budgets import Budget, BudgetReport, BudgetStatus, ModelSpend, Period
from inno_notify.domain.costs import Rates
from inno_notify.domain.digest import Digest, DigestRows, PersonRow, TeamTotals, build_digest
from tests.pages.browser import CHROMIUM, loaded_dom, screenshot

EVIL = "<script>alert(1)</script>&<!channel>*bold*"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"
RATES = Rates(currency="EUR", gpu_hour={"*H100*": 2.5, "*A100*": 1.5})


def report(spent: float | None, forecast: float | None, *, gpu_model: str | None = None) -> BudgetReport:
    budget = Budget("face", Period.MONTH, amount=1000.0, gpu_model=gpu_model)
    start, end = datetime(2026, 11, 1, tzinfo=UTC), datetime(2026, 12, 1, tzinfo=UTC)
    return BudgetReport(
        BudgetStatus(budget, start, end, spent, forecast, "EUR"), (ModelSpend(H100, 248.0, spent),)
    )


def priced(owner: str = "alice@example.com", model: str = A100, budget_glob: str | None = None) -> Digest:
    totals = TeamTotals(jobs=3, gpu_minutes=1020.0, used_gpu_minutes=600.0, idle_gpu_minutes=420.0)
    people = (
        PersonRow(owner, 1, 600.0, 360.0, 240.0, None, H100),
        PersonRow(owner, 1, 300.0, 120.0, 180.0, None, model),
        PersonRow("bob@example.com", 1, 120.0, 120.0, 0.0, None, H100),
    )
    return build_digest(
        "face",
        "2026-W48",
        "UTC",
        DigestRows(totals, people),
        rates=RATES,
        budgets=[report(620.0, 1180.0, gpu_model=budget_glob)],
    )


@pytest.mark.parametrize(
    ("spent", "forecast", "bar"),
    [
        # 62 % filled (12 of 20 cells), the forecast within the budget at 90 %: cell 18.
        (620.0, 900.0, "[████████████░░░░░┃░░]"),
        # The forecast past the budget: an arrow after the bar.
        (620.0, 1180.0, "[████████████░░░░░░░░]▶"),
        # No forecast yet.
        (250.0, None, "[█████░░░░░░░░░░░░░░░]"),
        # Spent past the budget: the bar is full.
        (1300.0, 1500.0, "[████████████████████]▶"),
        # Spend unknown (no rate for its models): no bar rather than an empty one.
        (None, None, ""),
    ],
)
def test_the_text_bar(spent: float | None, forecast: float | None, bar: str) -> None:
    assert budget_bar_text(spent, 1000.0, forecast) == bar


def test_the_svg_bar_marks_the_budget_and_the_forecast() -> None:
    svg = budget_bar_svg(620.0, 1000.0, 1180.0, 'Budget "<x>" & y')
    # The scale reaches the forecast (1180) over 478 px from x = 1: the budget at 1 + 1000 / 1180 × 478,
    # the spend 620 / 1180 × 478 wide.
    assert 'class="budget" x1="406.1"' in svg and 'class="forecast" x1="479.0"' in svg
    assert 'class="spent" x="1" y="2" width="251.2"' in svg and 'fill="#2e7d32"' in svg
    assert "&lt;x&gt;" in svg and "<x>" not in svg and "&quot;" in svg
    assert 'fill="#c62828"' in budget_bar_svg(1100.0, 1000.0, None, "over")
    assert 'class="forecast"' not in budget_bar_svg(50.0, 1000.0, None, "early")


def test_costs_and_budget_in_every_channel() -> None:
    d = priced()
    renderer = DigestRenderer()
    view = digest_view(d)
    # H100: 12 h × 2.5 = 30 EUR (4 h idle: 10); A100: 5 h × 1.5 = 7.50 (3 h idle: 4.50).
    assert view.cost == "37.50 EUR for 17 GPU-h, of which 14.50 EUR idle"
    assert [(m.gpu_model, m.cost, m.idle_cost) for m in view.by_model] == [
        (H100, "30.00 EUR", "10.00 EUR"),
        (A100, "7.50 EUR", "4.50 EUR"),
    ]
    [b] = view.budgets
    assert b.name == "November 2026"
    assert (
        b.figures == "620.00 EUR of 1,000.00 EUR (62 %); forecast 1,180.00 EUR (118 %) by 01 Dec" and b.over
    )

    text = renderer.text(d)
    assert "GPU cost: 37.50 EUR for 17 GPU-h, of which 14.50 EUR idle" in text
    assert f"  {A100}: 5 GPU-h, 7.50 EUR, 4.50 EUR idle" in text
    assert "alice@example.com: 14.50 EUR (7 GPU-h idle)" in text
    assert "Budget November 2026: [████████████░░░░░░░░]▶ 620.00 EUR of 1,000.00 EUR (62 %)" in text
    mail = renderer.message("email", d, None)
    assert isinstance(mail, MailMessage)
    assert 'id="by-model"' in mail.html and 'id="idle-cost"' in mail.html
    # Mail clients draw no SVG: the e-mail has the text bar.
    assert "<svg" not in mail.html and "[████████████░░░░░░░░]▶" in mail.html
    telegram = renderer.message("telegram", d, None)
    assert isinstance(telegram, TelegramMessage)
    assert "<b>GPU cost</b>: 37.50 EUR" in telegram.html and "<code>[████" in telegram.html
    slack = renderer.message("slack", d, None)
    assert isinstance(slack, SlackMessage)
    blocks = json.dumps(slack.blocks, ensure_ascii=False)
    assert "*GPU cost*: 37.50 EUR" in blocks and "*Top idle cost*" in blocks
    assert "*Budget November 2026*: [████████████░░░░░░░░]▶ 620.00 EUR" in blocks
    mattermost = renderer.message("mattermost", d, None)
    assert isinstance(mattermost, MattermostMessage)
    # Markdown's escapes, outside a code span (inside one they would show): the bar reads as it is.
    assert "37.50 EUR" in mattermost.markdown
    assert "**Budget November 2026**: \\[████████████░░░░░░░░\\]▶ 620.00 EUR" in mattermost.markdown
    webhook = renderer.message("webhook", d, None)
    assert isinstance(webhook, WebhookMessage)
    assert webhook.data["digest"]["costs"]["gpu_cost"] == pytest.approx(37.5)
    assert webhook.data["digest"]["budgets"][0]["forecast"] == 1180.0
    page = renderer.html_page(d, None)
    assert page.count("<svg") == 1 and 'class="forecast"' in page and "<h3>Budget</h3>" in page


def test_unpriced_figures_read_no_rate_not_zero() -> None:
    d = priced(model="NVIDIA A10")
    view = digest_view(d)
    assert [(m.gpu_model, m.cost) for m in view.by_model][-1] == (
        "NVIDIA A10",
        "n/a (no rate for its GPU model)",
    )
    assert any("NVIDIA A10" in note for note in view.notes)
    unknown = build_digest(
        "face",
        "2026-W48",
        "UTC",
        DigestRows(TeamTotals(jobs=1, gpu_minutes=60.0)),
        budgets=[report(None, None)],
    )
    [b] = digest_view(unknown).budgets
    assert b.figures.startswith("spend not known") and b.bar == "" and "no forecast yet" in b.figures
    assert digest_view(unknown).cost == ""  # no rates: no cost lines


def test_model_owner_and_budget_glob_from_the_cluster_are_escaped_per_channel() -> None:
    d = priced(owner=EVIL, model=f"A100 {EVIL}", budget_glob=EVIL)
    renderer = DigestRenderer()
    mail = renderer.message("email", d, None)
    assert isinstance(mail, MailMessage) and "<script>" not in mail.html and "&lt;script&gt;" in mail.html
    telegram = renderer.message("telegram", d, None)
    assert isinstance(telegram, TelegramMessage) and "<script>" not in telegram.html
    slack = renderer.message("slack", d, None)
    assert isinstance(slack, SlackMessage)
    body = json.dumps(slack.blocks)
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body
    mattermost = renderer.message("mattermost", d, None)
    assert isinstance(mattermost, MattermostMessage) and "<!channel>" not in mattermost.markdown
    page = renderer.html_page(d, None)
    assert "<script>" not in page and page.count("&lt;script&gt;") >= 4  # people, model, idle cost, budget


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian package chromium)")
def test_the_team_page_with_costs_and_budget_in_headless_chromium(tmp_path: Path) -> None:
    d = priced()
    page = tmp_path / "digest.html"
    page.write_text(DigestRenderer().html_page(d, render_chart(d)), encoding="utf-8")
    window = (1000, 1600)
    shot = tmp_path / "digest.png"
    screenshot(page, window, shot, tmp_path / "profile")
    assert shot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    dom = loaded_dom(page, window, tmp_path / "profile")
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", dom)]
    assert H100 in cells and "30.00 EUR" in cells and "14.50 EUR" in cells
    # The bar reached the DOM as SVG, its budget and forecast lines in place.
    assert re.search(r'<svg[^>]*class="budget-bar"', dom)
    assert 'class="budget"' in dom and 'class="forecast"' in dom
