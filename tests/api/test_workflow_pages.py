"""The workflow page (issue 28): a workflow summary's signed link opens its workflow's page without a
token, with every step; the link opens no other run; a viewer's token opens it, a pipeline token
does not; an unknown workflow is 404. The workflow is recorded by the one ingestion pipeline from
the Argo controller's writes; real app, real store, the service's own renderers and providers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping
from datetime import timedelta
from html import unescape
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.channels.base import TelegramMessage
from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.channels.render import Renderer
from inno_notify.adapters.db import Store, job_details, sql
from inno_notify.domain.model import Channel
from inno_notify.domain.page_links import PageLinks
from inno_notify.domain.parsing import ParseConfig
from inno_notify.domain.routing import Directory
from inno_notify.domain.workflows import summarize_workflow
from inno_notify.service.ingest import IngestOptions, Ingestor
from inno_notify.service.job_pages import job_page_provider, workflow_page_provider
from inno_notify.service.serving import ServingAnnouncer
from inno_notify.service.workflow_tracking import WorkflowOptions, join_recorder
from inno_notify.sim.kube_store import ARGO_WORKFLOWS
from inno_notify.sim.pipelines import SimArgoWorkflow, SimAttempt, SimStep, argo_changes
from tests import stored

from .conftest import serve_api
from .data import GIB, usage_of
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


async def nobody() -> Directory:
    return Directory({}, {})


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


# --- a workflow is a run of the job list, and /jobs opens its page (CONTRACT §3a, §5) ---------------


@pytest.fixture
async def listed(store: Store, pages: Api) -> AsyncIterator[Api]:
    """The same workflow, its GPU step measured (100 GPU-minutes held, 40 used), and the API with
    the job pages (which open a workflow's too)."""
    [step] = [j for j in await stored.all_jobs(store) if j.parent_uid == WORKFLOW.uid]
    await stored.save_usage(store, step.cluster, step.uid, usage_of(100.0, 40.0, 60.0, 8 * GIB))
    renderer = JobPageRenderer(Renderer(links=PageLinks(PUBLIC, KEY), clock=lambda: NOW))
    async with serve_api(store, job_pages=job_page_provider(store, renderer), link_key=KEY) as served:
        yield served


async def test_the_job_list_has_the_workflow_with_its_steps_figures(listed: Api, store: Store) -> None:
    status, body = await listed.get("/api/v1/jobs", "viewer", params={"kind": "Workflow"})
    assert status == 200 and body["next_cursor"] is None
    [workflow] = body["items"]
    assert (workflow["uid"], workflow["kind"], workflow["name"]) == (WORKFLOW.uid, "Workflow", WORKFLOW.name)
    assert (workflow["owner"], workflow["status"], workflow["parent"]) == (
        "alice@example.com",
        "failed",  # its evaluate step exited 2
        None,
    )
    assert workflow["requested"]["gpus"] == 2.0  # its one GPU step's
    usage = workflow["usage"]
    assert (usage["gpu_minutes"], usage["used_gpu_minutes"], usage["gpu_util_mean_percent"]) == (
        100.0,
        40.0,
        40.0,
    )
    assert usage["memory_peak_bytes"] == 8 * GIB

    status, body = await listed.get("/api/v1/jobs", "viewer")
    kinds = {item["kind"]: item for item in body["items"]}
    assert set(kinds) == {"Workflow", "Pod"}
    assert kinds["Pod"]["parent"] == WORKFLOW.uid
    keys = [(item["finished_at"] or item["created_at"], item["uid"]) for item in body["items"]]
    assert keys == sorted(keys, reverse=True)  # one order over both kinds

    for kind, found in (("Pod", 1), ("Job", 0), ("PyTorchJob", 0)):
        _, body = await listed.get("/api/v1/jobs", "viewer", params={"kind": kind})
        assert len(body["items"]) == found, kind
    _, body = await listed.get(
        "/api/v1/jobs", "viewer", params={"kind": "Workflow", "owner": "bob@example.com"}
    )
    assert body["items"] == []


async def test_the_job_list_pages_through_jobs_and_workflows_alike(listed: Api, store: Store) -> None:
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": "1"} if cursor is None else {"limit": "1", "cursor": cursor}
        status, body = await listed.get("/api/v1/jobs", "viewer", params=params)
        assert status == 200
        seen += [item["kind"] for item in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert sorted(seen) == ["Pod", "Workflow"]


async def test_a_page_reads_both_tables_in_one_statement(
    listed: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflows' page is merged into the jobs' by the page's one statement (issue 32: a second
    per page cost the hottest path a round trip); only a page that holds a workflow reads its
    steps' figures with another."""
    statements: list[object] = []
    fetch = sql.fetch

    async def counted(
        conn: AsyncConnection, statement: sa.Select[Any], params: Mapping[str, Any]
    ) -> list[Any]:
        statements.append(statement)
        return await fetch(conn, statement, params)

    monkeypatch.setattr(job_details, "fetch", counted)
    status, body = await listed.get("/api/v1/jobs", "viewer", params={"limit": "1"})
    assert status == 200 and [item["kind"] for item in body["items"]] == ["Workflow"]
    assert body["items"][0]["requested"]["gpus"] == 2.0 and len(statements) == 2
    statements.clear()
    params = {"limit": "1", "cursor": body["next_cursor"]}
    status, body = await listed.get("/api/v1/jobs", "viewer", params=params)
    assert status == 200 and [item["kind"] for item in body["items"]] == ["Pod"]
    assert len(statements) == 1  # workflows admitted, none on the page
    statements.clear()
    status, body = await listed.get("/api/v1/jobs", "viewer", params={"kind": "Pod"})
    assert status == 200 and len(body["items"]) == 1 and len(statements) == 1


async def test_a_workflow_is_found_by_name_and_its_page_opens_at_jobs(listed: Api) -> None:
    status, body = await listed.get(f"/api/v1/jobs/face-research/{WORKFLOW.name}", "viewer")
    assert status == 200 and (body["kind"], body["uid"]) == ("Workflow", WORKFLOW.uid)
    status, body = await listed.get(
        f"/api/v1/jobs/face-research/{WORKFLOW.name}", "viewer", params={"uid": "not-its-uid"}
    )
    assert status == 404

    status, html = await get(listed, f"/jobs/face-research/{WORKFLOW.name}?uid={WORKFLOW.uid}", "viewer")
    assert status == 200
    text = unescape(re.sub(r"<[^>]+>", " ", html))
    assert all(step in text for step in ("prepare-data", "train", "evaluate"))
