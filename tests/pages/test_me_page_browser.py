"""The personal page (GET /me) as a phone and a laptop show it, in headless Chromium: nothing wider
than the screen (the runs' table scrolls inside itself), text at a readable size, the forms'
buttons big enough to tap. Skipped where /usr/bin/chromium (Debian chromium) is absent."""

from __future__ import annotations

from pathlib import Path

import pytest

from inno_notify.adapters.channels.me_page import PersonalPageRenderer
from inno_notify.domain.page_links import PageLinks, form_token
from inno_notify.domain.personal_page import PageOpening
from tests.pages import me_sample
from tests.pages.browser import CHROMIUM, LAPTOP, PHONE, measure

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (Debian chromium)")

KEY = b"k3y-for-the-personal-page-00000"
LINKS = PageLinks("https://inno.example.org", KEY)


def me_page() -> str:
    """Alice's page as her link opens it (with its forms)."""
    link = LINKS.me(me_sample.ALICE.email, me_sample.NOW)
    assert link is not None
    query = link.split("?", 1)[1]
    sig = query.rsplit("sig=", 1)[1]
    expires = int(query.split("exp=", 1)[1].split("&", 1)[0])
    opening = PageOpening(
        me_sample.ALICE.email,
        expires=expires,
        action="?" + query,
        csrf=form_token(KEY, me_sample.ALICE.email, sig),
        notice="Saved: which runs you hear about.",
    )
    return PersonalPageRenderer(LINKS).html(me_sample.page(), opening)


@pytest.mark.parametrize("size", [PHONE, LAPTOP], ids=["phone", "laptop"])
def test_the_personal_page_fits_the_screen(size: tuple[int, int], tmp_path: Path) -> None:
    html = me_page()
    assert html.count("<form") == 6 and "Unmute now" in html and "finetune-vit" in html
    measured = measure(html, size, tmp_path)
    assert measured["viewport"] == size[0]
    assert measured["scroll_width"] is not None and measured["scroll_width"] <= size[0]
    assert measured["body_font_px"] is not None and measured["body_font_px"] >= 14
