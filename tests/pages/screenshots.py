"""Takes the screenshots in docs/pages.md and the chart in docs/channels.md from the sample job.

    .venv/bin/python -m tests.pages.screenshots docs/

The job page, the team page and the personal page (tests/pages/me_sample.py) at a phone's width
(390 px) and a laptop's (1280 px), in headless Chromium (tests/pages/browser.py); the job chart as a
summary carries it (PNG).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from inno_notify.adapters.channels.job_chart import ChartJob, render_job_png
from tests.pages import sample
from tests.pages.browser import LAPTOP, PHONE, screenshot
from tests.pages.test_me_page_browser import me_page
from tests.pages.test_pages_browser import job_page, team_page


def main(out: Path) -> None:
    png = render_job_png(ChartJob("face-research/train-resnet-7", sample.series(), sample.job().started_at))
    assert png is not None
    (out / "job-chart.png").write_bytes(png)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, html in (("job", job_page()), ("team", team_page()), ("me", me_page())):
            page = work / f"{name}.html"
            page.write_text(html, encoding="utf-8")
            screenshot(page, (PHONE[0], 1400), out / f"pages-{name}-phone.png", work / "profile")
            screenshot(page, (LAPTOP[0], 1300), out / f"pages-{name}-laptop.png", work / "profile")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
