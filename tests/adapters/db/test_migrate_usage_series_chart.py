"""Migration 0022 on a database with usage series: each keeps its series and gains an empty chart
(NULL: drawn at the send, as before), a chart written after it reads back whole, and it goes down
and up again, on both dialects."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .revisions import columns_of, to, trip
from .test_migrate_queue_quotas import _seed

CHART = b"\x89PNG\r\n\x1a\n\x00\xff" * 1000


def _series(connection: Connection) -> None:
    connection.execute(
        sa.text(
            "INSERT INTO usage_series (cluster, job_uid, step_seconds, series)"
            " VALUES ('c', 'measured', 60, '{\"gpu_util\": []}')"
        )
    )


def _charts(connection: Connection) -> dict[str, tuple[int, object]]:
    rows = connection.execute(sa.text("SELECT job_uid, step_seconds, chart FROM usage_series"))
    return {row[0]: (row[1], None if row[2] is None else bytes(row[2])) for row in rows}


def _draw(connection: Connection) -> None:
    connection.execute(
        sa.text("UPDATE usage_series SET chart = :chart").bindparams(
            sa.bindparam("chart", type_=sa.LargeBinary())
        ),
        {"chart": CHART},
    )


async def test_0022_adds_an_empty_chart_to_each_series_and_goes_down_and_up(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0021"), _seed, _series)
        assert await db.run(to("0022"), _charts) == {"measured": (60, None)}
        assert await db.run(_draw, _charts) == {"measured": (60, CHART)}
        assert "chart" not in await db.run(to("0021", down=True), columns_of("usage_series"))
        assert await db.run(_charts_gone) == {"measured": 60}
        assert (await db.up_to_head())[0] == "0022"


def _charts_gone(connection: Connection) -> dict[str, int]:
    return dict(connection.execute(sa.text("SELECT job_uid, step_seconds FROM usage_series")).all())
