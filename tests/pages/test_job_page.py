"""The job page as the service renders it from the store: figures, chart, advice with evidence,
Kueue facts, termination message, pods and links; hostile values stay text."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import timedelta
from html import unescape
from html.parser import HTMLParser

from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.service.job_pages import JobPageProvider, job_page_provider
from tests.pages import sample

LOGS = "https://logs.example.org/?pods={{ pod_regex | urlencode }}&from={{ start }}"


def provider(store: Store) -> JobPageProvider:
    renderer = Renderer(
        log_url_template=LOGS, grafana_url_template="https://grafana.example.org/?node={{ node }}"
    )
    return job_page_provider(store, JobPageRenderer(renderer))


class Text(HTMLParser):
    def __init__(self, source: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.tags: list[str] = []
        self.feed(source)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.parts).split())


def rows(page: str, table: str) -> dict[str, str]:
    body = re.search(rf'<table[^>]*id="{table}">(.*?)</table>', page, re.S)
    assert body is not None, table
    return {
        unescape(k): unescape(v)
        for k, v in re.findall(r"<tr><td>(.*?)</td><td>(.*?)</td></tr>", body.group(1))
    }


async def test_a_job_page_shows_figures_chart_advice_with_evidence_kueue_and_the_termination_message(
    store: Store,
) -> None:
    await sample.store_job(store)
    page = await provider(store)("face-research", "train-resnet-7", sample.UID)
    assert page is not None
    figures = rows(page, "figures")
    assert figures["Exit code"] == "137 (OOMKilled)"
    # The wait ends at Kueue's admission (1 min 2 s), not at the pod's scheduling (2 min).
    assert figures["Runtime"] == "3 h 12 min" and figures["Queue wait"] == "1 min"
    assert figures["GPU (used / held)"] == "353 / 768 GPU-min"
    assert figures["GPU utilization"] == "46 % mean, 2 idle GPUs"
    assert figures["Peak RAM"] == "63.9 GiB of 64 GiB"
    assert figures["Peak GPU memory"] == "31 GiB"
    assert figures["CPU p95"] == "3.2 cores"
    # The exit that decided the job, not the retry's.
    assert "the kernel killed the trainer at 64 GiB" in page and "a retry&#39;s own failure" not in page
    # The chart, inline, with its alt text as the figure's caption.
    assert re.search(r'<figure class="chart" id="chart"><svg [^>]*role="img"', page)
    assert "gpu-node-1/2 mean 0 % (idle)" in Text(page).text
    # Advice, largest waste first, each with its evidence and window.
    text = Text(page).text
    assert text.index("2 of 4 GPUs stayed idle") < text.index("Killed for memory at 63.9 GiB")
    assert "idle GPUs 2" in text and "measured over 3 h 5 min" in text
    assert "from 2026-11-30 10:02:00 UTC until 2026-11-30 13:14:00 UTC" in text
    assert "peak RAM 63.9 GiB" in text and "OOM kills 1" in text
    kueue = rows(page, "kueue")
    assert kueue["ClusterQueue"] == "gpu-a100" and kueue["Evictions"] == "1"
    assert kueue["Last eviction"] == "Preempted"
    assert "gpu-node-0" in page and "train-resnet-7-1x2kq" in page  # the pods table
    assert (
        'href="https://logs.example.org/?pods=train-resnet-7-0x2kq%7Ctrain-resnet-7-1x2kq&amp;from=' in page
    )
    assert 'href="https://grafana.example.org/?node=gpu-node-0"' in page
    assert "cpu cores mean: n/a (no samples)" in text


async def test_without_uid_the_newest_run_and_an_unknown_job_is_none(store: Store) -> None:
    await sample.store_job(store)
    newer = sample.job(
        uid="newer-run", created_at=sample.T0 + timedelta(days=1), exit_code=0, exit_reason="Completed"
    )
    await sample.store_job(store, newer, with_series=False)
    page = await provider(store)("face-research", "train-resnet-7", None)
    assert page is not None and "uid newer-run" in page and 'id="chart"' not in page
    assert await provider(store)("face-research", "no-such-job", None) is None
    assert await provider(store)("face-research", "train-resnet-7", "no-such-uid") is None


async def test_hostile_values_are_text_on_the_page(store: Store) -> None:
    evil = "<script>alert(1)</script>"
    kueue = sample.job().kueue
    assert kueue is not None
    record = replace(sample.job(), owner=f"{evil}@x", reason=evil, kueue=replace(kueue, cluster_queue=evil))
    await sample.store_job(store, record)
    page = await provider(store)("face-research", "train-resnet-7", None)
    assert page is not None
    assert "<script>" not in page and Text(page).tags.count("script") == 0
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
