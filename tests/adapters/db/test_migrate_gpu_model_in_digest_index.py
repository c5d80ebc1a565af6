"""Migration 0026: the (team, finished_at) index carries the job's GPU model among its INCLUDE
columns on Postgres (the digest prices its week per model from the index alone), and goes down and
up again; SQLite's plain index is left as it is. On both dialects."""

from __future__ import annotations

from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from inno_notify.adapters.db.tables import DIGEST_JOB_COLUMNS

from .revisions import to, trip


def _include(connection: Connection) -> list[str] | None:
    for index in inspect(connection).get_indexes("jobs"):
        if index["name"] == "ix_jobs_team_finished_at":
            found: list[str] = index.get("dialect_options", {}).get("postgresql_include", [])
            return found
    return None


async def test_0026_puts_the_gpu_model_in_the_digest_index(empty_database_url: str, db_dialect: str) -> None:
    async with trip(empty_database_url) as db:
        before = await db.run(to("0025"), _include)
        after = await db.run(to("0026"), _include)
        if db_dialect == "sqlite":
            assert before == after == []
        else:
            assert before is not None and "gpu_model" not in before
            assert after == [*before, "gpu_model"] == DIGEST_JOB_COLUMNS
        assert await db.run(to("0025", down=True), _include) == before
        await db.up_to_head()
        assert await db.run(_include) == after
