"""Usage and recommendations of a page of jobs, in two queries instead of two per job.

The API's job resource embeds both; fetching them per job would make a page of 50 cost 100 round
trips. Jobs are keyed by (cluster, uid); the queries go one cluster at a time so that each uses the
(cluster, job_uid) indexes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from inno_notify.adapters.db import codec
from inno_notify.adapters.db.sql import chunks
from inno_notify.adapters.db.tables import recommendations, usage
from inno_notify.domain.model import Recommendation, Usage

JobKey = tuple[str, str]  # (cluster, uid)


async def usage_of_jobs(conn: AsyncConnection, keys: Sequence[JobKey]) -> dict[JobKey, Usage]:
    found: dict[JobKey, Usage] = {}
    for cluster, uids in _by_cluster(keys).items():
        for chunk in chunks(uids):
            result = await conn.execute(
                sa.select(usage).where(usage.c.cluster == cluster, usage.c.job_uid.in_(chunk))
            )
            for row in result.mappings():
                found[(cluster, row["job_uid"])] = codec.usage_from_row(row)
    return found


async def recommendations_of_jobs(
    conn: AsyncConnection, keys: Sequence[JobKey]
) -> dict[JobKey, list[Recommendation]]:
    """Each job's recommendations in their stored order; jobs without any are absent."""
    found: dict[JobKey, list[Recommendation]] = {}
    for cluster, uids in _by_cluster(keys).items():
        for chunk in chunks(uids):
            result = await conn.execute(
                sa.select(recommendations)
                .where(recommendations.c.cluster == cluster, recommendations.c.job_uid.in_(chunk))
                .order_by(recommendations.c.job_uid, recommendations.c.position)
            )
            for row in result.mappings():
                found.setdefault((cluster, row["job_uid"]), []).append(codec.recommendation_from_row(row))
    return found


def _by_cluster(keys: Sequence[JobKey]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = defaultdict(list)
    for cluster, uid in dict.fromkeys(keys):
        grouped[cluster].append(uid)
    return grouped


async def usage_and_recommendations(
    conn: AsyncConnection, keys: Sequence[JobKey]
) -> tuple[dict[JobKey, Usage], dict[JobKey, list[Recommendation]]]:
    """Both of the above on the caller's connection."""
    if not keys:
        return {}, {}
    return await usage_of_jobs(conn, keys), await recommendations_of_jobs(conn, keys)
