"""Headless Chromium for the page tests: a screenshot at a given width, and what the page measures
after layout (the widest element, the chart's width), read back through the DOM.

Headless Chromium will not make a window narrower than 500 px, so a phone is an iframe of the
phone's width in a wider window: the page inside lays out for 390 px exactly as on the phone. The
page under test is a copy with one script appended that posts its measurements to the frame
around it, which writes them into its own DOM; the served page itself has no script (its
Content-Security-Policy forbids any)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
PHONE = (390, 844)  # an iPhone 12-15's CSS viewport
LAPTOP = (1280, 900)

_MEASURE = """
<script>
addEventListener("load", () => {
  const doc = document.documentElement;
  const shown = (e) => e.getBoundingClientRect().width > 0;
  const chart = [...document.querySelectorAll("#chart svg, img")].find(shown);
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = JSON.stringify({
    viewport: innerWidth,
    scroll_width: doc.scrollWidth,
    chart_width: chart ? chart.getBoundingClientRect().width : null,
    body_font_px: parseFloat(getComputedStyle(document.body).fontSize),
  });
  (parent === window ? document.body : null)?.appendChild(out);
  if (parent !== window) parent.postMessage(out.textContent, "*");
});
</script>
"""
_FRAME = """<!DOCTYPE html><html><body style="margin:0">
<iframe src="{src}" width="{width}" height="{height}" style="border:0;display:block"></iframe>
<script>
addEventListener("message", (event) => {{
  const out = document.createElement("pre");
  out.id = "measured";
  out.textContent = event.data;
  document.body.appendChild(out);
}});
</script></body></html>
"""
# Headless Chromium's narrowest window.
_MIN_WINDOW = 500


def _framed(page: Path, size: tuple[int, int], workdir: Path) -> Path:
    """The page itself when the window can be that narrow, else a window holding it in a frame."""
    if size[0] >= _MIN_WINDOW:
        return page
    frame = workdir / f"frame-{page.stem}.html"
    frame.write_text(_FRAME.format(src=page.name, width=size[0], height=size[1]), encoding="utf-8")
    return frame


def _args(profile: Path, size: tuple[int, int]) -> list[str]:
    return [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}",
    ]


def screenshot(page: Path, size: tuple[int, int], out: Path, profile: Path) -> None:
    """A PNG of the page as a screen of `size` shows its top (a phone: cut to the phone's width)."""
    window = (max(size[0], _MIN_WINDOW), size[1])
    shown = _framed(page, size, page.parent)
    subprocess.run(
        [*_args(profile, window), f"--screenshot={out}", shown.as_uri()],
        check=True,
        capture_output=True,
        timeout=90,
    )
    if window != size:
        from PIL import Image

        with Image.open(out) as image:
            image.crop((0, 0, size[0], size[1])).save(out)


def measure(html: str, size: tuple[int, int], workdir: Path) -> dict[str, float | None]:
    """Loads the page at `size` and returns what it measured after layout."""
    page = workdir / f"measure-{size[0]}.html"
    page.write_text(html.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    window = (max(size[0], _MIN_WINDOW), size[1])
    done = subprocess.run(
        [
            *_args(workdir / "profile", window),
            "--allow-file-access-from-files",
            "--virtual-time-budget=3000",
            "--dump-dom",
            _framed(page, size, workdir).as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=90,
    )
    dom = done.stdout.decode()
    start = dom.index('<pre id="measured">') + len('<pre id="measured">')
    return json.loads(dom[start : dom.index("</pre>", start)].replace("&quot;", '"'))  # type: ignore[no-any-return]
