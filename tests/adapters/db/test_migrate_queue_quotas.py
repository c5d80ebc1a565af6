"""Migration 0012 on a database with jobs: the usage copies and the queue-wait end are filled from
what was stored before, and it goes down and up again, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .revisions import tables, to, trip

SCHEDULED = datetime(2026, 11, 30, 10, 5, tzinfo=UTC)


def _seed(connection: Connection) -> None:
    at = "2026-11-30 10:05:00" if connection.dialect.name == "sqlite" else SCHEDULED
    for uid, measured in (("measured", True), ("unmeasured", False)):
        connection.execute(
            sa.text(
                "INSERT INTO jobs (cluster, uid, namespace, name, kind, status, notify, sort_at,"
                " gpus_requested, requested, labels, event_counts, first_scheduled_at, summary_state,"
                " usage_attempts) VALUES ('c', :uid, 'ns', :uid, 'job', 'succeeded', 'always', :at, 1.0,"
                " '{}', '{}', '{}', :at, 'none', 0)"
            ),
            {"uid": uid, "at": at},
        )
        if measured:
            connection.execute(
                sa.text(
                    "INSERT INTO usage (cluster, job_uid, gpu_minutes, used_gpu_minutes, idle_gpu_minutes,"
                    " detail) VALUES ('c', :uid, 120.0, 60.0, 30.0, '{}')"
                ),
                {"uid": uid},
            )


def _copies(connection: Connection) -> dict[str, tuple[object, ...]]:
    rows = connection.execute(
        sa.text("SELECT uid, gpu_minutes_held, gpu_minutes_used, gpu_minutes_idle, queued_until FROM jobs")
    )
    return {row[0]: tuple(row[1:]) for row in rows}


async def test_0012_fills_the_copies_and_goes_down_and_up(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0011"), _seed)
        copies = await db.run(to("0012"), _copies)
        assert copies["measured"][:3] == (120.0, 60.0, 30.0)
        assert copies["unmeasured"][:3] == (None, None, None)
        assert all(str(v[3]).startswith("2026-11-30 10:05:00") for v in copies.values()), copies
        left = await db.run(to("0011", down=True), tables)
        assert "cluster_queues" not in left and "local_queues" not in left
        assert (await db.up_to_head())[0] == "0012"
