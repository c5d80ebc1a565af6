"""Migration 0025: the partial index of the stored charts not yet released comes and goes, and the
series under it are left as they were, on both dialects."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .revisions import to, trip
from .test_migrate_queue_quotas import _seed
from .test_migrate_usage_series_chart import _charts, _draw, _series

INDEX = "ix_usage_series_cluster_job_uid"


def _indexes(connection: Connection) -> set[str]:
    return {index["name"] or "" for index in sa.inspect(connection).get_indexes("usage_series")}


async def test_0025_indexes_the_held_charts_and_goes_down_and_up(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0024"), _seed, _series, _draw)
        assert INDEX in await db.run(to("0025"), _indexes)
        assert await db.run(_charts) == {"measured": (60, b"\x89PNG\r\n\x1a\n\x00\xff" * 1000)}
        assert INDEX not in await db.run(to("0024", down=True), _indexes)
        assert (await db.up_to_head())[0] == "0025"
