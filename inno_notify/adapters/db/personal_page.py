"""What the personal page (GET /me) reads of one person, on one read connection.

Their runs come from the job list's own statement (job_details.job_page, filtered by owner and
the window: the jobs' owner index, and the workflows' table merged in by the same statement),
with their usage and advice; whether each run followed its family's previous advice is one more
statement on `advice_adoption`'s primary key. Their open nudges are the idle-GPU nudges sent to
them in the window (the outbox's (recipient, channel, status) index), newest per pod, kept where
the workload still runs (one statement on the jobs' primary key). No index is added for the page:
it reads what the indexes of the job list and the outbox already find.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import job_details
from inno_notify.adapters.db.directory import directory_user
from inno_notify.adapters.db.job_details import by_cluster
from inno_notify.adapters.db.jobs import JobFilter
from inno_notify.adapters.db.preferences import get_preferences
from inno_notify.adapters.db.sql import chunks
from inno_notify.adapters.db.tables import advice_adoption, jobs, outbox
from inno_notify.adapters.db.transactions import Repository, reads
from inno_notify.domain.live import IdleFinding, findings_from_payload
from inno_notify.domain.model import JobStatus, NotificationKind
from inno_notify.domain.personal_page import PERSONAL_RUNS_MAX, PersonalPage, PersonalRun

log = logging.getLogger(__name__)

_NAMES = [c.name for c in job_details.PAGE_COLUMNS]
_AT = {name: i for i, name in enumerate(_NAMES)}
JobKey = tuple[str, str]
_RUNNING = JobStatus.RUNNING.value


def _run(row: Sequence[Any], advice: Sequence[dict[str, Any]]) -> PersonalRun:
    def at(name: str) -> Any:
        return row[_AT[name]]

    return PersonalRun(
        cluster=at("cluster"),
        uid=at("uid"),
        namespace=at("namespace"),
        name=at("name"),
        kind=at("kind"),
        status=at("status"),
        reason=at("reason"),
        created_at=at("created_at"),
        finished_at=at("finished_at"),
        gpus=float(at("gpus_requested") or 0.0),
        gpu_minutes_held=at("gpu_minutes"),
        gpu_minutes_used=at("used_gpu_minutes"),
        advice=tuple(str(item["message"]) for item in advice if item.get("message")),
    )


async def _adoption(conn: AsyncConnection, keys: Sequence[JobKey]) -> dict[JobKey, tuple[str, float | None]]:
    """(outcome, GPU-hours freed) of the runs judged, by (cluster, uid)."""
    found: dict[JobKey, tuple[str, float | None]] = {}
    t = advice_adoption.c
    for cluster, uids in by_cluster(keys).items():
        for chunk in chunks(uids):
            query = sa.select(t.job_uid, t.outcome, t.gpu_hours_freed).where(
                t.cluster == cluster, t.job_uid.in_(list(chunk))
            )
            for uid, outcome, freed in await conn.execute(query):
                found[(cluster, uid)] = (outcome, freed)
    return found


async def open_nudges(conn: AsyncConnection, email: str, since: datetime) -> list[IdleFinding]:
    """The idle-GPU nudges sent (or queued) to `email` since `since` about workloads that still
    run: the newest finding per pod, most idle GPU-hours first."""
    rows = await conn.execute(
        sa.select(outbox.c.payload)
        .where(
            outbox.c.recipient == email,
            outbox.c.kind == NotificationKind.IDLE_NUDGE.value,
            outbox.c.created_at >= since,
        )
        .order_by(outbox.c.created_at.desc(), outbox.c.id.desc())
    )
    newest: dict[tuple[str, str], IdleFinding] = {}
    for (payload,) in rows:
        try:
            findings, _ = findings_from_payload(payload if isinstance(payload, dict) else {})
        except ValueError as exc:
            log.warning("a nudge to %s does not read: %s", email, exc)
            continue
        for finding in findings:
            newest.setdefault((finding.cluster, finding.pod_uid), finding)
    running: set[JobKey] = set()
    for cluster, uids in by_cluster(sorted({(f.cluster, f.workload_uid) for f in newest.values()})).items():
        for chunk in chunks(uids):
            query = sa.select(jobs.c.uid).where(
                jobs.c.cluster == cluster,
                jobs.c.uid.in_(list(chunk)),
                jobs.c.status == JobStatus.RUNNING.value,
            )
            running.update((cluster, uid) for (uid,) in await conn.execute(query))
    kept = [f for f in newest.values() if (f.cluster, f.workload_uid) in running]
    return sorted(kept, key=lambda f: (-f.idle_gpu_hours, f.namespace, f.pod))


async def personal_page(conn: AsyncConnection, email: str, since: datetime, now: datetime) -> PersonalPage:
    """The personal page of `email`: runs finished (or, running, created) since `since`."""
    page = await job_details.job_page(conn, JobFilter(owner=email, since=since), PERSONAL_RUNS_MAX, None)
    runs = [
        _run(row, advice)
        for row, advice in zip(page.rows, page.recommendations, strict=True)
        # A workflow's steps are its own row's (its page lists them).
        if row[_AT["parent_uid"]] is None
    ]
    judged = await _adoption(conn, [(r.cluster, r.uid) for r in runs])
    runs = [_with_adoption(run, judged.get((run.cluster, run.uid))) for run in runs]
    return PersonalPage(
        email=email,
        now=now,
        user=await directory_user(conn, email),
        preferences=await get_preferences(conn, email),
        runs=tuple(runs),
        more_runs=page.next_cursor is not None,
        nudges=tuple(await open_nudges(conn, email, since)),
    )


def _with_adoption(run: PersonalRun, judged: tuple[str, float | None] | None) -> PersonalRun:
    if judged is None:
        return run
    return replace(run, adoption=judged[0], gpu_hours_freed=judged[1])


class PersonalPageRepository(Repository):
    """`Store.personal`: the reads of a person's own page."""

    page = reads(personal_page)
