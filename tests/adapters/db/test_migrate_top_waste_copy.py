"""Migration 0024 on a database with jobs and advice: each job's row gains a copy of its
recommendations' largest waste (NULL for a job without any), and it goes down and up again, on both
dialects."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .revisions import columns_of, to, trip
from .test_migrate_queue_quotas import _seed


def _advise(connection: Connection) -> None:
    # The largest waste is not the first recommendation's.
    for position, waste in enumerate((30.0, 60.0, 0.0)):
        connection.execute(
            sa.text(
                "INSERT INTO recommendations (cluster, job_uid, position, kind, severity, amounts, unit,"
                " message, waste_gpu_minutes, waste_gib_hours, waste_core_hours, evidence)"
                " VALUES ('c', 'measured', :position, 'idle_gpu', 'warning', '{}', 'gpus', 'm', :waste,"
                " 0, 0, '{}')"
            ),
            {"position": position, "waste": waste},
        )


def _copies(connection: Connection) -> dict[str, object]:
    return {
        uid: waste
        for uid, waste in connection.execute(sa.text("SELECT uid, top_waste_gpu_minutes FROM jobs"))
    }


async def test_0024_copies_the_largest_waste_onto_the_job(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0023"), _seed, _advise)
        assert await db.run(to("0024"), _copies) == {"measured": 60.0, "unmeasured": None}
        assert "top_waste_gpu_minutes" not in await db.run(to("0023", down=True), columns_of("jobs"))
        assert (await db.up_to_head())[0] == "0024"
