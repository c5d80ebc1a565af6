"""The job and workflow pages for the API: the store's read of one run, rendered by the channel views.

The API may not import the channel renderers (import-linter keeps it on the store), so the
runtime hands it `job_page_provider`, built here, as it hands it the digest provider: given a
namespace, a name and optionally a uid, it returns the page's HTML, or None when there is no
such job. Drawing the chart and filling the template take milliseconds of CPU: off the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from inno_notify.adapters.channels.pages import JobPageRenderer
from inno_notify.adapters.db import Store
from inno_notify.domain.workflows import summarize_workflow

# Steps a workflow page lists (the record keeps up to domain.workflows.STEPS_KEPT); the rest counted.
WORKFLOW_PAGE_STEPS = 300

# (namespace, name, uid or None for the newest run) -> the page, or None for no such job.
JobPageProvider = Callable[[str, str, str | None], Awaitable[str | None]]


def job_page_provider(store: Store, renderer: JobPageRenderer) -> JobPageProvider:
    """The page of a run of any kind (CONTRACT §5): a job's, else a workflow's of that name."""
    workflow_page = workflow_page_provider(store, renderer)

    async def provide(namespace: str, name: str, uid: str | None) -> str | None:
        data = await store.jobs.job_page_data(namespace, name, uid)
        if data is None:
            return await workflow_page(namespace, name, uid)
        return await asyncio.to_thread(
            renderer.html, data.job, data.usage, data.recommendations, data.pods, data.series
        )

    return provide


def workflow_page_provider(store: Store, renderer: JobPageRenderer) -> JobPageProvider:
    """The workflow pages (an Argo Workflow, an Airflow DAG run): its steps with their figures, as
    its summary has them, more of them listed."""

    async def provide(namespace: str, name: str, uid: str | None) -> str | None:
        data = await store.workflows.workflow_page_data(namespace, name, uid)
        if data is None:
            return None
        record, pods, figures = data
        summary = summarize_workflow(record, pods, figures, steps_shown=WORKFLOW_PAGE_STEPS)
        return await asyncio.to_thread(renderer.workflow_html, summary)

    return provide
