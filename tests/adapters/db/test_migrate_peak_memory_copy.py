"""Migration 0019 on a database with jobs: each job's row gains a copy of its usage's peak memory
(NULL where nothing was measured), and it goes down and up again, on both dialects."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from .revisions import columns_of, to, trip
from .test_migrate_queue_quotas import _seed

GIB = 1 << 30


def _measure_memory(connection: Connection) -> None:
    connection.execute(sa.text(f"UPDATE usage SET memory_peak_bytes = {12 * GIB} WHERE job_uid = 'measured'"))


def _copies(connection: Connection) -> dict[str, object]:
    return {uid: peak for uid, peak in connection.execute(sa.text("SELECT uid, memory_peak_bytes FROM jobs"))}


async def test_0019_copies_the_peak_memory_onto_the_job(empty_database_url: str) -> None:
    async with trip(empty_database_url) as db:
        await db.run(to("0018"), _seed, _measure_memory)
        assert await db.run(to("0019"), _copies) == {"measured": 12 * GIB, "unmeasured": None}
        assert "memory_peak_bytes" not in await db.run(to("0018", down=True), columns_of("jobs"))
        assert (await db.up_to_head())[0] == "0019"
