"""A summary e-mail as a browser shows it: the HTML part of the real MIME message, loaded in headless
Chromium, must show every figure next to its label and the advice, with cluster values escaped.

String checks on the template output cannot tell whether a browser parses the markup as meant (an
unclosed tag or a stray `<` from a job name swallows the rows after it); the DOM after load can.
Skipped cleanly where /usr/bin/chromium (Debian package chromium) is absent.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from inno_notify.adapters.channels.base import MailMessage, Recipient
from inno_notify.adapters.channels.email import EmailSender
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.channels.views import SummaryView
from tests.adapters.channels.conftest import sample_job, sample_recommendations, sample_usage
from tests.pages.browser import CHROMIUM, loaded_dom, screenshot

WINDOW = (900, 1200)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian chromium)")


def mail_html(message: MailMessage) -> str:
    """The text/html part of the MIME message the sender would submit."""
    mime = EmailSender("smtp.example.org", "inno@example.org").build(
        Recipient(email="alice@example.com", name="Alice"), message
    )
    part = mime.get_body(preferencelist=("html",))
    assert part is not None
    content = part.get_content()
    assert isinstance(content, str)
    return content


def table_rows(dom: str) -> dict[str, str]:
    """label -> value of every two-cell row, as text (tags removed, entities decoded)."""
    rows = re.findall(r"<tr>\s*<td[^>]*>(.*?)</td>\s*<td[^>]*>(.*?)</td>\s*</tr>", dom, re.S)
    return {_text(label): _text(value) for label, value in rows}


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


FIGURES = [
    ("Exit code", "137 (OOMKilled)"),
    ("Runtime", "3 h 12 min"),
    ("Queue wait", "2 min"),
    ("GPU (used / held)", "110 / 240 GPU-min"),
    ("GPU utilization", "46 % mean, 2 idle GPUs"),
    ("Peak RAM", "42.5 GiB of 64 GiB"),
    # Not measured: said so, never 0.
    ("Peak GPU memory", "n/a (no samples)"),
]


def test_a_summary_mail_shows_its_figures_in_chromium(tmp_path: Path) -> None:
    # A job name a user chose, with markup in it: the browser must show it as text.
    job = sample_job(name="train-<b>resnet</b>-7")
    view = SummaryView.from_records(job, sample_usage(), sample_recommendations())
    message = Renderer(dashboard_url="https://dash.example.org").render_summary("email", view)
    assert isinstance(message, MailMessage)
    page = tmp_path / "mail.html"
    page.write_text(mail_html(message), encoding="utf-8")
    shot = tmp_path / "mail.png"

    screenshot(page, WINDOW, shot, tmp_path / "profile")
    dom = loaded_dom(page, WINDOW, tmp_path / "profile")

    assert shot.read_bytes().startswith(PNG_SIGNATURE)
    rows = table_rows(dom)
    assert [(label, rows.get(label)) for label, _ in FIGURES] == FIGURES
    heading = _text(re.search(r"<h2[^>]*>(.*?)</h2>", dom, re.S)[1])  # type: ignore[index]
    assert heading.endswith("face-research/train-<b>resnet</b>-7")
    assert "<b>resnet</b>" not in dom  # escaped, so no element was made of it
    advice = [_text(item) for item in re.findall(r"<li>(.*?)</li>", dom, re.S)]
    assert advice == ["2 of 4 GPUs stayed idle: request 2.", "Peak RAM was 42.5 GiB: request 52 GiB."]
    assert re.search(r'<a href="https://dash\.example\.org/jobs/face-research/[^"]+">Dashboard</a>', dom)
