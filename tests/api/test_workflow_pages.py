"""The workflow page (issue 28): a workflow summary's signed link opens its workflow's page without a
token, with every step; the link opens no other run; a viewer's token opens it, a pipeline token
does not; an unknown workflow is 404. The workflow is recorded by the one ingestion pipeline from
the Argo controller's writes; real app, real store, the service's own renderers and providers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import timedelta
from html import unescape

import pytest

from inno_notify.adapters.channels.base import TelegramMessage
from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store
from inno_notify.domain.model import Channel, DirectoryUser, Team
from inno_notify.domain.page_links import PageLinks
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.workflows import summarize_workflow
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.job_pages import workflow_page_provider
from inno_notify.service.serving import ServingAnnouncer
from inno_notify.service.workflow_tracking import WorkflowOptions, join_recorder
from inno_notify.sim.kube_store import ARGO_WORKFLOWS
from inno_notify.sim.pipelines import SimArgoWorkflow, SimAttempt, SimStep, argo_changes

from .conftest import serve_api
from .support import NOW, Api

KEY = b"k3y-for-workflow-page-links-000"
PUBLIC = "https://inno.example.org"
STARTED = NOW - timedelta(hours=3)
BROWSER = {"Accept": "text/html"}

WORKFLOW = SimArgoWorkflow(
    name="train-pipeline-x7k2p",
    namespace="face-research",
    created=STARTED,
    owner="alice@example.com",
    steps=(
        SimStep("prepare-data", (SimAttempt(STARTED + timedelta(minutes=1), 300),)),
        SimStep("train", (SimAttempt(STARTED + timedelta(minutes=7), 2400),), gpus=2),
        SimStep("evaluate", (SimAttempt(STARTED + timedelta(minutes=48), 60, 2),)),
    ),
)


async def nobody() -> tuple[dict[str, DirectoryUser], dict[str, Team]]:
    return {}, {}


@pytest.fixture
async def pages(store: Store) -> AsyncIterator[Api]:
    ingestor = Ingestor(store, ParseConfig(cluster="test"), IngestOptions(), lambda: NOW, STARTED)
    join_recorder(ingestor, WorkflowOptions(), ServingAnnouncer(store, nobody, frozenset(), STARTED, 3600))
    kinds = {ARGO_WORKFLOWS: "Workflow"}
    ops = {"create": "ADDED", "update": "MODIFIED", "delete": "DELETED"}
    await ingestor.apply([(kinds.get(c.rt, "Pod"), ops[c.op], c.obj) for c in argo_changes(WORKFLOW)])
    renderer = Renderer(links=PageLinks(PUBLIC, KEY), clock=lambda: NOW)
    async with serve_api(
        store, workflow_pages=workflow_page_provider(store, JobPageRenderer(renderer)), link_key=KEY
    ) as served:
        yield served


async def summary_link(store: Store) -> str:
    """The Dashboard link of the workflow's summary as the dispatcher renders it (Telegram's HTML)."""
    data = await store.workflows.workflow_page_data(WORKFLOW.namespace, WORKFLOW.name)
    assert data is not None
    record, pods, figures = data
    renderer = Renderer(links=PageLinks(PUBLIC, KEY), clock=lambda: NOW)
    message = renderer.render_workflow(Channel.TELEGRAM, summarize_workflow(record, pods, figures))
    assert isinstance(message, TelegramMessage)
    (href,) = [unescape(h) for h in re.findall(r'<a href="([^"]+)">Dashboard</a>', message.html)]
    assert href.startswith(f"{PUBLIC}/workflows/face-research/{WORKFLOW.name}?uid={WORKFLOW.uid}")
    return href.removeprefix(PUBLIC)


async def get(api: Api, path: str, role: str | None = None) -> tuple[int, str]:
    async with api.client.get(path, headers=api.headers(role, BROWSER)) as response:
        return response.status, await response.text()


async def test_a_workflow_summarys_link_opens_its_page_with_every_step(pages: Api, store: Store) -> None:
    status, body = await get(pages, await summary_link(store))
    assert status == 200
    text = unescape(re.sub(r"<[^>]+>", " ", body))
    assert f"face-research/{WORKFLOW.name}" in text and "Argo workflow" in text
    (steps,) = re.findall(r'<table id="steps">(.*?)</table>', body, re.S)
    rows = re.findall(r"<tr><td>([^<]+)</td><td>([A-Za-z]+)", steps)
    assert rows == [("prepare-data", "Succeeded"), ("train", "Succeeded"), ("evaluate", "Failed")]
    assert "2 GPUs" in text


async def test_the_link_opens_no_other_run_and_tokens_are_checked(pages: Api, store: Store) -> None:
    link = await summary_link(store)
    assert (await get(pages, link.replace(WORKFLOW.uid, "another-run")))[0] == 401
    assert (await get(pages, link.replace("/workflows/", "/jobs/")))[0] == 401
    path = f"/workflows/face-research/{WORKFLOW.name}"
    assert (await get(pages, path))[0] == 401
    assert (await get(pages, path, "viewer"))[0] == 200
    assert (await get(pages, path, "pipeline"))[0] == 403
    status, body = await get(pages, "/workflows/face-research/no-such-workflow", "admin")
    assert status == 404 and "workflow_not_found" in body
