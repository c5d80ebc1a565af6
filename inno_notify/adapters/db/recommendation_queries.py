"""Open recommendations across jobs, largest waste first: the admin's "where to look" list.

A recommendation is advice for the *next* run of a job family. It is open while that next run has
not happened: no newer run of the same family (cluster, namespace, family) has finished since. A job
without a family is its own family, so its advice stays open. Ordering is by wasted GPU-minutes,
then wasted memory GiB-hours, then newest first; pages are keyset-paginated on that same key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.sql import InvalidCursor, decode_cursor, encode_cursor, finished_in
from inno_notify.adapters.db.tables import jobs, recommendations
from inno_notify.domain.model import Recommendation


@dataclass(frozen=True, slots=True)
class JobRecommendation:
    """One recommendation and the job it was made for."""

    id: int
    cluster: str
    job_uid: str
    namespace: str
    name: str
    owner: str | None
    team: str | None
    finished_at: datetime | None
    recommendation: Recommendation


async def open_recommendations(
    conn: AsyncConnection,
    *,
    team: str | None = None,
    owner: str | None = None,
    cluster: str | None = None,
    since: datetime | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> tuple[list[JobRecommendation], str | None]:
    """A page of open recommendations of jobs finished at or after `since`, and the next cursor.

    Raises InvalidCursor for a cursor this function did not hand out.
    """
    newer = jobs.alias("newer")
    superseded = sa.exists().where(
        newer.c.cluster == jobs.c.cluster,
        newer.c.namespace == jobs.c.namespace,
        newer.c.family == jobs.c.family,
        newer.c.finished_at > jobs.c.finished_at,
    )
    key = (recommendations.c.waste_gpu_minutes, recommendations.c.waste_gib_hours, recommendations.c.id)
    query = (
        sa.select(
            recommendations,
            jobs.c.namespace,
            jobs.c.name,
            jobs.c.owner,
            jobs.c.team,
            jobs.c.finished_at,
        )
        .join(
            jobs,
            sa.and_(jobs.c.cluster == recommendations.c.cluster, jobs.c.uid == recommendations.c.job_uid),
        )
        .where(sa.or_(jobs.c.family.is_(None), jobs.c.finished_at.is_(None), ~superseded))
    )
    if team is not None:
        query = query.where(jobs.c.team == team)
    if owner is not None:
        query = query.where(jobs.c.owner == owner)
    query = query.where(*finished_in(jobs, since, None, cluster))
    if cursor is not None:
        gpu_text, gib_text, before = decode_cursor(cursor, (str, str, int))
        try:
            gpu, gib = float(gpu_text), float(gib_text)
        except ValueError as exc:
            raise InvalidCursor("invalid cursor") from exc
        if not (math.isfinite(gpu) and math.isfinite(gib)):  # we never hand out NaN or infinity
            raise InvalidCursor("invalid cursor")
        query = query.where(sa.tuple_(*key) < sa.tuple_(sa.literal(gpu), sa.literal(gib), sa.literal(before)))
    query = query.order_by(*(c.desc() for c in key)).limit(limit + 1)
    rows = (await conn.execute(query)).mappings().all()
    page = [
        JobRecommendation(
            id=row["id"],
            cluster=row["cluster"],
            job_uid=row["job_uid"],
            namespace=row["namespace"],
            name=row["name"],
            owner=row["owner"],
            team=row["team"],
            finished_at=row["finished_at"],
            recommendation=codec.recommendation_from_row(row),
        )
        for row in rows[:limit]
    ]
    if len(rows) <= limit:
        return page, None
    last = rows[limit - 1]
    return page, encode_cursor(
        # repr round-trips a float exactly; the cursor codec carries only text and integers.
        [repr(float(last["waste_gpu_minutes"])), repr(float(last["waste_gib_hours"])), last["id"]]
    )
