"""The digest as people see it: chart PNG, e-mail with the chart inline, Slack, Telegram, text, JSON,
and the HTML page loaded by a real headless Chromium (skipped where /usr/bin/chromium is absent)."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from inno_notify.adapters.channels.base import MailMessage, Recipient, SlackMessage, TelegramMessage
from inno_notify.adapters.channels.digest_chart import MAX_PANELS, chart_alt_text, panels, render_chart
from inno_notify.adapters.channels.digest_views import CHART_CID, DigestRenderer, render_json
from inno_notify.adapters.channels.email import EmailSender
from inno_notify.domain.adoption import AdoptionPerson, AdoptionTally
from inno_notify.domain.digest import (
    DailyRow,
    Digest,
    DigestRows,
    PersonRow,
    TeamTotals,
    WasteRow,
    build_digest,
)
from tests.pages.browser import CHROMIUM, loaded_dom, screenshot

WINDOW = (1000, 1300)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EVIL = "<script>alert(1)</script>&<!channel>*bold*"


def digest(owner: str = "alice@example.com", job_name: str = "train-7") -> Digest:
    rows = DigestRows(
        totals=TeamTotals(
            jobs=3,
            succeeded=2,
            failed=1,
            oom=1,
            gpu_minutes=750.0,
            used_gpu_minutes=300.0,
            idle_gpu_minutes=240.0,
            memory_requested_gib_hours=96.0,
            memory_peak_gib_hours=24.0,
        ),
        people=(PersonRow(owner, 2, 600.0, 210.0, 240.0), PersonRow("bob@example.com", 1, 150.0, 90.0, 0.0)),
        daily=(
            DailyRow(owner, 0, 360.0, 60.0),
            DailyRow(owner, 3, 240.0, 150.0),
            DailyRow("bob@example.com", 4, 150.0, 90.0),
        ),
        top_waste=(
            WasteRow(
                "c", "u1", "face-research", job_name, owner, 240.0, "idle_gpu", "warning", "2 of 4 GPUs idle"
            ),
        ),
        queue_seconds_sorted=(30.0, 90.0, 3600.0),
    )
    return build_digest("face", "2026-W48", "Europe/Berlin", rows, TeamTotals(jobs=2, gpu_minutes=600.0))


EMPTY = build_digest("face", "2026-W49", "UTC", DigestRows(TeamTotals()))


def test_chart_is_a_png_and_the_same_digest_gives_the_same_bytes() -> None:
    png = render_chart(digest())
    assert png is not None and png.startswith(PNG_SIGNATURE)
    assert render_chart(digest()) == png


def test_no_chart_for_a_week_without_gpu_jobs() -> None:
    assert render_chart(EMPTY) is None
    assert chart_alt_text(EMPTY) == "No GPU jobs for face in 2026-W49."


def test_many_people_fold_into_others() -> None:
    people = tuple(PersonRow(f"p{i:02d}@x", 1, 60.0 * (20 - i), 30.0, 0.0) for i in range(12))
    daily = tuple(DailyRow(p.owner, 1, p.gpu_minutes or 0.0, 30.0) for p in people)
    d = build_digest(
        "face", "2026-W48", "UTC", DigestRows(TeamTotals(jobs=12, gpu_minutes=1.0), people, daily)
    )
    drawn = panels(d)
    assert len(drawn) == MAX_PANELS
    assert drawn[-1].owner == f"{12 - MAX_PANELS + 1} others"
    assert sum(drawn[-1].held) == pytest.approx(sum(60.0 * (20 - i) for i in range(MAX_PANELS - 1, 12)) / 60)
    assert render_chart(d) is not None


def test_alt_text_states_each_persons_week() -> None:
    alt = chart_alt_text(digest())
    assert "alice@example.com 10.0 held, 3.5 used" in alt
    assert "bob@example.com 2.5 held, 1.5 used" in alt


def test_email_has_the_chart_inline_and_its_alt_text() -> None:
    d = digest()
    png = render_chart(d)
    message = DigestRenderer().message("email", d, png)
    assert isinstance(message, MailMessage)
    assert message.subject.startswith("GPU digest face 2026-W48")
    assert f'src="cid:{CHART_CID}"' in message.html
    assert 'alt="Bar chart of daily GPU-hours' in message.html
    assert "12.5 h" in message.text and "40 %" in message.text
    mime = EmailSender("smtp.invalid", "digest@example.com").build(
        Recipient(email="lead@example.com"), message
    )
    images = [part for part in mime.walk() if part.get_content_type() == "image/png"]
    assert len(images) == 1
    assert images[0]["Content-ID"] == f"<{CHART_CID}>"
    assert images[0].get_payload(decode=True) == png


def test_figures_in_the_text() -> None:
    text = DigestRenderer(dashboard_url="https://dash.example/").text(digest())
    assert "GPU-hours held             12.5 h  [+2.5 h (+25 %) vs last week]" in text
    assert "Queue wait                 p50 2 min · p95 54 min" in text
    assert "Share of Kueue quota       n/a (no Kueue quota known)" in text
    assert "alice@example.com: 10 h / 3.5 h / 4 h, 35 %, jobs: 2" in text
    assert "1. face-research/train-7 (alice@example.com): 4 GPU-h wasted — 2 of 4 GPUs idle" in text
    assert "Dashboard: https://dash.example/teams/face?week=2026-W48" in text


def test_a_week_without_gpu_jobs_is_short() -> None:
    renderer = DigestRenderer()
    text = renderer.text(EMPTY)
    assert "No GPU jobs finished in 2026-W49." in text
    assert "By person" not in text
    mail = renderer.message("email", EMPTY, None)
    assert isinstance(mail, MailMessage) and mail.images == () and "cid:" not in mail.html


def test_values_from_the_cluster_are_escaped_per_channel() -> None:
    d = digest(owner=EVIL, job_name=EVIL)
    renderer = DigestRenderer()
    mail = renderer.message("email", d, None)
    assert isinstance(mail, MailMessage)
    assert "<script>" not in mail.html and "&lt;script&gt;" in mail.html
    telegram = renderer.message("telegram", d, None)
    assert isinstance(telegram, TelegramMessage) and "<script>" not in telegram.html
    slack = renderer.message("slack", d, None)
    assert isinstance(slack, SlackMessage)
    body = json.dumps(slack.blocks)
    assert "<!channel>" not in body and "&lt;!channel&gt;" in body
    assert "<script>" not in renderer.html_page(d, render_chart(d))


def test_json_carries_every_figure() -> None:
    data = json.loads(render_json(digest()))
    assert data["gpu_hours"] == 12.5
    assert data["efficiency"] == pytest.approx(0.4)
    assert data["queue_wait_seconds"]["p50"] == 90.0
    assert data["change"]["gpu_hours"] == {"previous": 10.0, "delta": 2.5, "percent": 25.0}
    assert data["top_waste"][0]["recommendation"] == "2 of 4 GPUs idle"


@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian package chromium)")
def test_the_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    d = replace(digest(), quota_gpus=8.0, quota_share=12.5 / (8 * 168))
    page = tmp_path / "digest.html"
    page.write_text(DigestRenderer().html_page(d, render_chart(d)), encoding="utf-8")
    shot = tmp_path / "digest.png"
    screenshot(page, WINDOW, shot, tmp_path / "profile")
    dom = loaded_dom(page, WINDOW, tmp_path / "profile")
    assert shot.read_bytes().startswith(PNG_SIGNATURE)
    cells = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<td[^>]*>(.*?)</td>", dom)]
    assert "12.5 h" in cells and "40 %" in cells and "+2.5 h (+25 %)" in cells
    assert "alice@example.com" in cells and "face-research/train-7" in cells
    assert "1 % of 8 GPUs × 168 h" in cells
    # The chart arrived as an image the browser decoded, with its alt text.
    assert re.search(r'<img src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}" alt="Bar chart', dom)


def write_docs_screenshot() -> None:
    """Refreshes docs/digest-screenshot.png; run by hand:
    `.venv/bin/python -m tests.adapters.channels.test_digest_render`."""
    root = Path(__file__).resolve().parents[3]
    work = root / ".digest-shot"
    work.mkdir(exist_ok=True)
    d = replace(digest(), quota_gpus=8.0, quota_share=12.5 / (8 * 168))
    page = work / "digest.html"
    page.write_text(DigestRenderer().html_page(d, render_chart(d)), encoding="utf-8")
    screenshot(page, WINDOW, root / "docs" / "digest-screenshot.png", work / "profile")
    shutil.rmtree(work)


if __name__ == "__main__":
    write_docs_screenshot()


def _adopted(owner: str = "alice@example.com") -> Digest:
    """The week's new runs: alice 4 followed of 6 advised (1 ignored, 1 partly), bob 1 of 2
    (1 over-corrected), carol's run had no prior advice; 10 + 2 GPU-h, 40 GiB-h freed."""
    people = (
        AdoptionPerson(owner, AdoptionTally(7, 6, 4, 1, 1, 0, 10.0, 40.0)),
        AdoptionPerson("bob@example.com", AdoptionTally(2, 2, 1, 0, 0, 1, 2.0, 0.0)),
        AdoptionPerson("carol@example.com", AdoptionTally(1, 0, 0, 0, 0, 0, 0.0, 0.0)),
    )
    d = digest(owner=owner)
    built = build_digest("face", d.week, d.timezone, DigestRows(TeamTotals(), adoption=people))
    return replace(d, adoption=built.adoption, adoption_people=built.adoption_people)


def test_adoption_in_every_channel() -> None:
    d = _adopted()
    line = (
        "Advice followed in 5 of 8 new runs (1 partly, 1 ignored, 1 over-corrected); "
        "12 GPU-h and 40 GiB-h of memory freed this week."
    )
    renderer = DigestRenderer()
    text = renderer.text(d)
    assert line in text
    assert "alice@example.com: 4 of 6 runs followed (1 partly, 1 ignored), 10 GPU-h and 40 GiB-h" in text
    assert "bob@example.com: 1 of 2 runs followed (1 over-corrected), 2 GPU-h freed" in text
    assert "carol" not in text  # no advice to follow: not listed
    mail = renderer.message("email", d, None)
    assert isinstance(mail, MailMessage) and line in mail.html and 'id="adoption-people"' in mail.html
    telegram = renderer.message("telegram", d, None)
    assert isinstance(telegram, TelegramMessage) and line in telegram.html
    slack = renderer.message("slack", d, None)
    assert isinstance(slack, SlackMessage)
    assert "Advice followed in 5 of 8 new runs" in json.dumps(slack.blocks)
    data = json.loads(render_json(d))["adoption"]
    assert (data["advised"], data["followed"], data["gpu_hours_freed"]) == (8, 5, 12.0)
    assert [p["owner"] for p in data["people"]] == ["alice@example.com", "bob@example.com"]


def test_adoption_escaped_and_absent_without_advice() -> None:
    d = _adopted(owner=EVIL)
    mail = DigestRenderer().message("email", d, None)
    assert isinstance(mail, MailMessage) and "<script>" not in mail.html
    assert "Advice followed" not in DigestRenderer().text(digest())
