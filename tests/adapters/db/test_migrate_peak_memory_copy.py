"""Migration 0019 on a database with jobs: each job's row gains a copy of its usage's peak memory
(NULL where nothing was measured), and it goes down and up again, on both dialects."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from inno_notify.adapters.db import create_engine, migrate

from .test_migrate_queue_quotas import _seed, _to

GIB = 1 << 30


def _measure_memory(connection: Connection) -> None:
    connection.execute(sa.text(f"UPDATE usage SET memory_peak_bytes = {12 * GIB} WHERE job_uid = 'measured'"))


def _copies(connection: Connection) -> dict[str, object]:
    return {uid: peak for uid, peak in connection.execute(sa.text("SELECT uid, memory_peak_bytes FROM jobs"))}


async def test_0019_copies_the_peak_memory_onto_the_job(empty_database_url: str) -> None:
    engine = create_engine(empty_database_url, statement_timeout_seconds=None)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0018")
            await conn.run_sync(_seed)
            await conn.run_sync(_measure_memory)
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0019")
        async with engine.connect() as conn:
            assert await conn.run_sync(_copies) == {"measured": 12 * GIB, "unmeasured": None}
        async with engine.begin() as conn:
            await conn.run_sync(_to, "0018", True)
            columns = await conn.run_sync(
                lambda c: {col["name"] for col in sa.inspect(c).get_columns("jobs")}
            )
        assert "memory_peak_bytes" not in columns
        assert (await migrate(empty_database_url))[0] == "0019"
    finally:
        await engine.dispose()
