"""Headless Chromium for the page tests: a screenshot at a given width, what the page measures
after layout (the widest element, the chart's width), read back through the DOM, and a browser
that follows links as a person would and reports the status each answered with (`Browser`).

Headless Chromium will not make a window narrower than 500 px, so a phone is an iframe of the
phone's width in a wider window: the page inside lays out for 390 px exactly as on the phone. The
page under test is a copy with one script appended that posts its measurements to the frame
around it, which writes them into its own DOM; the served page itself has no script (its
Content-Security-Policy forbids any)."""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

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
# How long a page may take to load before its test fails.
OPEN_SECONDS = 30.0
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


def loaded_dom(page: Path, window: tuple[int, int], profile: Path, *flags: str) -> str:
    """The DOM of `page` after load in a window of that size (Chromium's `flags` added)."""
    done = subprocess.run(
        [*_args(profile, window), *flags, "--dump-dom", page.as_uri()],
        check=True,
        capture_output=True,
        timeout=90,
    )
    return done.stdout.decode()


def measure(html: str, size: tuple[int, int], workdir: Path) -> dict[str, float | None]:
    """Loads the page at `size` and returns what it measured after layout."""
    page = workdir / f"measure-{size[0]}.html"
    page.write_text(html.replace("</body>", _MEASURE + "</body>"), encoding="utf-8")
    window = (max(size[0], _MIN_WINDOW), size[1])
    dom = loaded_dom(
        _framed(page, size, workdir),
        window,
        workdir / "profile",
        "--allow-file-access-from-files",
        "--virtual-time-budget=3000",
    )
    start = dom.index('<pre id="measured">') + len('<pre id="measured">')
    return json.loads(dom[start : dom.index("</pre>", start)].replace("&quot;", '"'))  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class Opened:
    """What Chromium got for a URL it navigated to: the document's HTTP status and its DOM."""

    status: int | None
    html: str
    error: str | None = None


class Browser:
    """One headless Chromium, driven over the DevTools protocol (CDP): opens URLs the way a person's
    browser does and tells the status of the document it got, which `--dump-dom` cannot. The pages
    run no script (their CSP forbids any), so the DOM is read through the DOM domain, not by
    evaluating script in the page."""

    def __init__(self, profile: Path) -> None:
        self._profile = profile
        self._process: asyncio.subprocess.Process | None = None
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._pending: list[dict[str, Any]] = []

    async def __aenter__(self) -> Browser:
        self._process = await asyncio.create_subprocess_exec(
            *_args(self._profile, LAPTOP),
            "--remote-debugging-port=0",
            "about:blank",
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        assert self._process.stderr is not None
        async with asyncio.timeout(60):
            while not (line := (await self._process.stderr.readline()).decode()).startswith("DevTools"):
                if not line:
                    raise RuntimeError("chromium ended before it listened for DevTools")
        # "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID": the page's socket is listed
        # beside it.
        origin = "http://" + line.split("ws://", 1)[1].split("/", 1)[0]
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"{origin}/json/list") as response:
            targets = await response.json()
        page = next(t for t in targets if t["type"] == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        for method in ("Page.enable", "Network.enable", "DOM.enable"):
            await self._call(method)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()

    async def open(self, url: str) -> Opened:
        """Navigates to `url` and waits until it loaded; the document's status and DOM."""
        async with asyncio.timeout(OPEN_SECONDS):
            sent = await self._call("Page.navigate", url=url)
            if sent.get("errorText"):
                return Opened(None, "", sent["errorText"])
            loader = sent.get("loaderId")
            status = None
            async for event in self._events():
                params = event.get("params", {})
                if (
                    event.get("method") == "Network.responseReceived"
                    and params.get("loaderId") == loader
                    and params.get("type") == "Document"
                ):
                    status = int(params["response"]["status"])
                if event.get("method") == "Page.loadEventFired":
                    break
            root = await self._call("DOM.getDocument")
            html = await self._call("DOM.getOuterHTML", nodeId=root["root"]["nodeId"])
            return Opened(status, str(html["outerHTML"]))

    async def _call(self, method: str, **params: Any) -> dict[str, Any]:
        """Sends one command and returns its result; events arriving meanwhile are kept."""
        assert self._ws is not None
        call = next(self._ids)
        await self._ws.send_json({"id": call, "method": method, "params": params})
        while True:
            message = await self._ws.receive_json()
            if message.get("id") == call:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})  # type: ignore[no-any-return]
            self._pending.append(message)

    async def _events(self) -> AsyncIterator[dict[str, Any]]:
        assert self._ws is not None
        while True:
            while self._pending:
                yield self._pending.pop(0)
            yield await self._ws.receive_json()
